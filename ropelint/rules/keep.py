"""The fix for rotary state a module cast would round, when it cannot be rebuilt in forward.

An ``_apply`` override goes into the class that registers the state. ``nn.Module._apply`` is what
``module.half()``, ``.bfloat16()``, ``.to(dtype)`` and ``to_empty`` call for every tensor; the
override hands it a conversion that keeps the named tensors' dtype and still moves them between
devices. The tensor, its name, its state-dict key and every line that reads it stay as they are, so
updates after construction (dynamic scaling, lazy registration, per-layer-type buffers) keep
working, and a learned Parameter keeps its learned values. The runtime helper does the work
(``rope_runtime.apply_keeping_dtype``), so the inserted method is two lines.
"""

from __future__ import annotations

import ast

from ..diagnostics import AddImport, FixPlan, InsertAfterStatement, Replace
from ..model.values import Role, StateKind, StateRef
from ..vendor import IMPORT_MODULE
from .base import RuleContext, tuple_code

DERIVED = frozenset({Role.TABLE, Role.PHASE, Role.COMPLEX})  # values built from the frequencies
ROTARY = DERIVED | {Role.INV_FREQ}
LEARNABLE = ("a learnable Parameter stays float32 after `module.half()`/`.bfloat16()` while the other parameters "
             "convert: optimizers and checkpoints see mixed dtypes, and FSDP/ZeRO flat parameters need one dtype")


def already_kept(ctx: RuleContext, reg) -> bool:  # type: ignore[no-untyped-def]
    """The registering class keeps this state's dtype already (an ``_apply`` override names it)."""
    owner = ctx.model.classes.get(reg.scope.symbol.split(".")[0])
    return owner is not None and reg.ref.name in owner.repaired


def report_kept(ctx: RuleContext, code: str, reg, message: str, what: str) -> None:  # type: ignore[no-untyped-def]
    """Report state a module cast would round, with the ``_apply`` fix (or why there is none)."""
    fix, why = keep_fix(ctx, reg.ref, what)
    if fix is None and why:
        message += f" (no automatic fix: {why})"
    ctx.report(code, reg.node, message, reg.scope, fix)


def rotary_siblings(ctx: RuleContext, ref: StateRef) -> list[str]:
    """Tables, phases or complex rotations that module casts convert, registered by the class that
    registers ``ref``: rebuilding ``ref`` alone would leave them rounded."""
    found = registering_class(ctx, ref)
    if found is None:
        return []
    return [reg.ref.name for reg in _other_state(ctx, found[0], ref)
            if reg.value.roles & DERIVED and not reg.value.has(Role.INV_FREQ)]


def _other_state(ctx: RuleContext, class_name: str, ref: StateRef) -> list:  # type: ignore[type-arg]
    """Registrations of other state that module casts convert, made by the class ``class_name``."""
    return [reg for reg in ctx.model.registrations
            if reg.ref is not ref and reg.ref.follows_module_casts and reg.scope.symbol.split(".")[0] == class_name]


def registering_class(ctx: RuleContext, ref: StateRef) -> tuple[str, str] | None:
    """(class name, method name) where ``ref`` is registered."""
    for reg in ctx.model.registrations:
        if reg.ref is ref:
            parts = reg.scope.symbol.split(".")
            if len(parts) >= 2 and parts[0] in ctx.model.classes:
                return parts[0], parts[1]
    return None


def keep_fix(ctx: RuleContext, ref: StateRef, what: str) -> tuple[FixPlan | None, str]:
    """(the ``_apply`` fix for ``ref``, why there is none)."""
    found = registering_class(ctx, ref)
    if found is None:
        return None, "the state is not registered by a method of a class in this file"
    cls_name, method_name = found
    info = ctx.model.classes[cls_name]
    learnable = ref.kind is StateKind.PARAMETER and not ref.frozen
    safety = "unsafe" if learnable else "safe"
    why = f" ({LEARNABLE})" if learnable else ""
    if "_apply" in info.methods:
        names = _kept_names(info.methods["_apply"])
        if names is None:
            return None, f"`{cls_name}` already overrides `_apply`; make it keep `{ref.name}` float32"
        held = [*(n.value for n in names.elts), *(n for n in _names(ctx, info, ref) if n not in
                                                   {e.value for e in names.elts})]
        return FixPlan(safety, f"keep {what} `{ref.name}` float32 through module dtype casts too (it joins the "
                               f"`_apply` override){why}", (Replace(names, _quoted(held)),)), ""
    method = info.methods.get(method_name)
    if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None, "the registering method was not found"
    code = "\n".join([
        "",
        "def _apply(self, fn, *args, **kwargs):  # ropelint: module dtype casts leave the state named below as built",
        f"    return rope_runtime.apply_keeping_dtype(self, super()._apply, fn, {_quoted(_names(ctx, info, ref))}, *args, "
        "**kwargs)",
    ])
    return FixPlan(safety, f"keep {what} `{ref.name}` float32 through module dtype casts with an `_apply` override "
                           f"(device moves still apply){why}",
                   (InsertAfterStatement(method, code), AddImport(IMPORT_MODULE))), ""




def _kept_names(method: ast.AST) -> ast.Tuple | None:
    """The names tuple of an ``_apply`` override this fix wrote earlier, else None."""
    for node in ast.walk(method):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "apply_keeping_dtype" and len(node.args) >= 4:
            names = node.args[3]
            if isinstance(names, ast.Tuple) and all(isinstance(e, ast.Constant) and isinstance(e.value, str)
                                                     for e in names.elts):
                return names
    return None


def _names(ctx: RuleContext, info, ref: StateRef) -> list[str]:  # type: ignore[no-untyped-def]
    """The state and the other rotary state the class registers (``original_inv_freq``, cached
    cos/sin tables): one override keeps them all, or a cast-and-back still rounds the tables."""
    others = [reg.ref.name for reg in _other_state(ctx, info.name, ref) if reg.value.roles & ROTARY]
    return list(dict.fromkeys([ref.name, *others]))


def _quoted(names: list[str]) -> str:
    return tuple_code([f'"{name}"' for name in names])
