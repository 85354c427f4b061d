"""The fix for rotary state a module cast would round, when it cannot be rebuilt in forward.

An ``_apply`` override goes into the class that registers the state. ``nn.Module._apply`` is what
``module.half()``, ``.bfloat16()``, ``.to(dtype)`` and ``to_empty`` call for every tensor; the
override hands it a conversion that keeps the named tensors' dtype and still moves them between
devices. The tensor, its name, its state-dict key and every line that reads it stay as they are, so
updates after construction (dynamic scaling, lazy registration, per-layer-type buffers) keep
working, and a learned Parameter keeps its learned values. The runtime helper does the work
(``rope_runtime.apply_keeping_dtype``), so the inserted method is two lines. One more line goes
first in ``__init__``: it records the constructor's arguments, because ``to_empty`` after a
meta-device build leaves the kept tensors uninitialised (a non-persistent buffer is in no state
dict) and the override then rebuilds them by constructing the module again on the new device.
"""

from __future__ import annotations

import ast

from ..diagnostics import AddImport, FixPlan, InsertAfterStatement, InsertBeforeStatement, Replace
from ..model.events import Product
from ..model.interpreter import in_file_mro, is_cast_call, read_as_tensor
from ..model.names import dotted
from ..model.values import Role, StateKind, StateRef
from ..vendor import IMPORT_MODULE
from .base import RuleContext, atom_code, cast_receiver, spelled_as_tensor, tuple_code
from .casts import BOUNDARY_CASTS, state_boundary_casts

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
    if fix is not None and fix.safety == "safe" and (reg.value.has(Role.TABLE) or reg.value.has(Role.PHASE)):
        # Tables that stay float32 where a module cast made them 16-bit: the methods reading them hand them on, or
        # rotate with them, in the activations' dtype (float32 queries would meet 16-bit values in the attention).
        # A kept phase is no table: what its readers take cos/sin of is (casting the phase would round it again).
        found = registering_class(ctx, reg.ref)
        others = _other_state(ctx, found[0], reg.ref) if found is not None else []
        tables = {r.ref.name for r in (*others, reg) if r.value.has(Role.TABLE)}
        casts = state_boundary_casts(ctx, tables, {reg.ref.name} - tables)
        if casts:
            fix = FixPlan("safe", f"{fix.description}, {BOUNDARY_CASTS}", (*fix.edits, *casts))
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
    info = _topmost_registering(ctx, ctx.model.classes[cls_name], ref.name)
    if info.name != cls_name:
        method_name = "__init__"
    # A Parameter frozen unless its constructor is asked to learn it: the override keeps it while it
    # does not require grad (the runtime looks), so a learned one converts as before; safe.
    learnable = ref.kind is StateKind.PARAMETER and not ref.frozen and not ref.frozen_by_default
    safety = "unsafe" if learnable else "safe"
    why = f" ({LEARNABLE})" if learnable else ""
    dropped = construction_casts(ctx, ref)
    if ref.kind is StateKind.APPLIED:
        return _applied_fix(ctx, info, ref, what, dropped)
    if "_apply" in info.methods:
        names = _kept_names(info.methods["_apply"])
        if names is None:
            wrapped = _wrap_super_apply(ctx, info.methods["_apply"], _names(ctx, info, ref))
            if wrapped is None or learnable:
                return None, f"`{cls_name}` already overrides `_apply`; make it keep `{ref.name}` float32"
            return FixPlan(safety, f"keep {what} `{ref.name}` float32 through module dtype casts: the class's own "
                                   f"`_apply` override runs `super()._apply` through ropelint's runtime helper"
                                   f"{_dropped_note(dropped)}",
                           (wrapped, *_remember(ctx, info), AddImport(IMPORT_MODULE), *dropped)), ""
        held = [*(n.value for n in names.elts), *(n for n in _names(ctx, info, ref) if n not in
                                                   {e.value for e in names.elts})]
        edits: tuple = (Replace(names, _quoted(held)), *_remember(ctx, info))  # type: ignore[type-arg]
        if learnable:
            learned = _learnable_edit(info.methods["_apply"], ref.name)
            if learned is None:
                return None, f"`{cls_name}` already overrides `_apply`; add `{ref.name}` to its `learnable=` names"
            edits += (learned,)
        return FixPlan(safety, f"keep {what} `{ref.name}` float32 through module dtype casts too (it joins the "
                               f"`_apply` override){_dropped_note(dropped)}{why}", (*edits, *dropped)), ""
    # After ``__init__`` when the class has one: two findings in one class then write the same
    # override at the same place, and the fixer merges identical edits.
    method = info.methods.get("__init__") or info.methods.get(method_name)
    if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None, "the registering method was not found"
    kept = _names(ctx, info, ref)
    learned = [name for name in kept if _learnable(ctx, info, name)]
    extra = f"learnable={_quoted(learned)}, " if learned else ""
    lines = ["",
             "def _apply(self, fn, *args, **kwargs):  # ropelint: module dtype casts leave the state named below as built",
             f"    return rope_runtime.apply_keeping_dtype(self, super()._apply, fn, {_quoted(kept)}, *args, "
             f"{extra}**kwargs)"]
    edits = (InsertAfterStatement(method, "\n".join(lines)), *_remember(ctx, info), AddImport(IMPORT_MODULE), *dropped)
    return FixPlan(safety, f"keep {what} `{ref.name}` float32 through module dtype casts with an `_apply` override "
                           f"(device moves still apply; a meta-device load rebuilds it){_dropped_note(dropped)}{why}",
                   edits), ""


def _applied_fix(ctx: RuleContext, info, ref: StateRef, what: str,  # type: ignore[no-untyped-def]
                 dropped: tuple[Replace, ...]) -> tuple[FixPlan | None, str]:
    """A plain attribute the class's own ``_apply`` converts (``self._freqs = fn(self._freqs)``): that conversion
    goes through the runtime helper, which keeps the dtype and still moves the tensor between devices."""
    override = next((cls.methods["_apply"] for cls in _bases(ctx, info) if "_apply" in cls.methods), None)
    params = [a.arg for a in override.args.args[1:2]] if override is not None else []
    calls = [n for n in ast.walk(override) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
             and n.func.id in params and len(n.args) == 1 and (dotted(n.args[0]) or []) == ["self", ref.name]] \
        if override is not None else []
    if len(calls) != 1:
        return None, f"the `_apply` override converting `{ref.name}` was not found"
    call = calls[0]
    edit = Replace(call, f"rope_runtime.converted_keeping_dtype({ctx.code(call.func)}, {ctx.code(call.args[0])})")
    return FixPlan("safe", f"keep {what} `{ref.name}` float32 through module dtype casts: the `_apply` override "
                           f"converts it through ropelint's runtime helper, which still moves it between devices"
                           f"{_dropped_note(dropped)}", (edit, AddImport(IMPORT_MODULE), *dropped)), ""


def _self_stores(info) -> dict[str, list[ast.Assign]]:  # type: ignore[no-untyped-def]
    """``self.<name> = value`` statements of the class's methods by name (one walk per class, kept on its node:
    asked once per finding's state)."""
    found = getattr(info.node, "_ropelint_self_stores", None)
    if found is None:
        found = {}
        for method in info.methods.values():
            for n in ast.walk(method):
                if isinstance(n, ast.Assign) and len(n.targets) == 1 and len(dotted(n.targets[0]) or []) == 2 \
                        and (dotted(n.targets[0]) or [""])[0] == "self":
                    found.setdefault((dotted(n.targets[0]) or ["", ""])[1], []).append(n)
        info.node._ropelint_self_stores = found
    return found


def construction_casts(ctx: RuleContext, ref: StateRef) -> tuple[Replace, ...]:
    """The casts to a 16-bit-able dtype that made the registered value (``(basis * math.pi / 2).to(dtype)``,
    ``emb.cos().to(dtype)``), as edits that drop them: a kept tensor would otherwise keep what they rounded."""
    edits = []
    for reg in ctx.model.registrations:
        cast = reg.value.site if reg.ref.name == ref.name and reg.value.dtype.can_be_16bit else None
        receiver = cast_receiver(cast) if isinstance(cast, ast.Call) else None
        if receiver is not None and is_cast_call(cast) and reg.scope.node is not None \
                and any(n is cast for n in ast.walk(reg.scope.node)):
            target = cast.args[0] if isinstance(cast.func, ast.Attribute) and cast.func.attr in ("to", "type_as") \
                and len(cast.args) == 1 and not cast.keywords and spelled_as_tensor(ctx, cast.args[0]) else None
            moved = target if target is not None and (cast.func.attr == "type_as" or (dotted(target) or [])[:1] == ["self"]
                                                      or (isinstance(target, ast.Name)
                                                          and read_as_tensor(reg.scope.node, target.id))) else None
            # ``freqs.to(self._freqs)`` moves to that tensor's device as well: the move stays.
            edits.append(Replace(cast, atom_code(ctx, receiver, cast) if moved is None
                                 else f"{atom_code(ctx, receiver, cast)}.to({ctx.code(moved)}.device)"))
    # ``self.pe = freqs.to(dtype)`` refilling the registered buffer on another branch: the same cast, dropped too.
    done = {id(e.node) for e in edits}
    found = registering_class(ctx, ref)
    info = ctx.model.classes.get(found[0]) if found is not None else None
    stores = {id(n.value): n for n in _self_stores(info).get(ref.name, ())} if info is not None else {}
    for cast in ctx.model.casts:
        receiver = cast_receiver(cast.node)
        if id(cast.node) in stores and id(cast.node) not in done and receiver is not None \
                and cast.target.dtype.can_be_16bit and cast.receiver.roles & DERIVED and not cast.node.keywords \
                and not (cast.node.args and spelled_as_tensor(ctx, cast.node.args[0])):  # (a move: RPL001's)
            edits.append(Replace(cast.node, atom_code(ctx, receiver, cast.node)))
    return tuple(edits)


def _dropped_note(dropped: tuple[Replace, ...]) -> str:
    return "; it is built without the cast that rounded it" if dropped else ""


def _topmost_registering(ctx: RuleContext, info, name: str):  # type: ignore[no-untyped-def]
    """The in-file base class furthest up that registers ``name`` too: its override, which names it,
    serves the subclasses (a subclass that rebuilds the cache registers the same names again)."""
    for base in reversed(_bases(ctx, info)[1:]):
        if any(reg.ref.name == name and reg.scope.symbol.split(".")[0] == base.name
               for reg in ctx.model.registrations):
            return base
    return info


def _learnable(ctx: RuleContext, info, name: str) -> bool:  # type: ignore[no-untyped-def]
    """The class registers ``name`` as a Parameter that can be learned (no ``requires_grad=False``)."""
    return any(reg.ref.name == name and reg.ref.kind is StateKind.PARAMETER and not reg.ref.frozen
               and not reg.ref.frozen_by_default
               for reg in ctx.model.registrations if reg.scope.symbol.split(".")[0] == info.name)


def _remember(ctx: RuleContext, info) -> tuple[InsertBeforeStatement, ...]:  # type: ignore[no-untyped-def]
    """Lines that record the constructor's arguments, first in the ``__init__`` that ``info`` runs
    (its own or an in-file base's) and in those of its in-file subclasses (the outermost one records),
    unless one is there already or the body has no line of its own to go before."""
    owners = [cls for cls in [*_bases(ctx, info), *_subclasses(ctx, info)] if "__init__" in cls.methods]
    # The nearest __init__ above (or at) ``info``, then every subclass's own.
    chosen = owners[:1] + [cls for cls in owners[1:] if cls not in _bases(ctx, info)]
    return tuple(edit for cls in chosen if (edit := _remember_line(ctx, cls.methods["__init__"])) is not None)


def _bases(ctx: RuleContext, info) -> list:  # type: ignore[no-untyped-def,type-arg]
    return in_file_mro(ctx.model.classes, info)


def _subclasses(ctx: RuleContext, info) -> list:  # type: ignore[no-untyped-def,type-arg]
    return [cls for cls in ctx.model.classes.values() if cls is not info and info in _bases(ctx, cls)]


def _remember_line(ctx: RuleContext, init: ast.AST) -> InsertBeforeStatement | None:
    if not isinstance(init, ast.FunctionDef):
        return None
    if any(isinstance(n, ast.Attribute) and n.attr == "remember_arguments" for n in ast.walk(init)):
        return None
    body = init.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]  # after the docstring
    params = [*init.args.posonlyargs, *init.args.args]
    if not body or not params:
        return None
    line, column = ctx.spans.start(body[0])
    if ctx.spans.line_text(line)[:column].strip():  # shares its line with the ``def`` or the docstring
        return None
    return InsertBeforeStatement(body[0], f"rope_runtime.remember_arguments({params[0].arg}, locals())  "
                                          "# ropelint: lets a meta-device load rebuild kept state")


def _learnable_edit(method: ast.AST, name: str) -> Replace | None:
    """Add ``name`` to the ``learnable=`` names of the override this fix wrote (or add the keyword)."""
    for node in ast.walk(method):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "apply_keeping_dtype":
            for kw in node.keywords:
                if kw.arg == "learnable" and isinstance(kw.value, ast.Tuple) \
                        and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in kw.value.elts):
                    held = [e.value for e in kw.value.elts]
                    return Replace(kw.value, _quoted(held if name in held else [*held, name]))
            star = next((kw for kw in node.keywords if kw.arg is None and isinstance(kw.value, ast.Name)), None)
            if star is not None:
                return Replace(star, f"learnable={_quoted([name])}, **{star.value.id}")  # type: ignore[attr-defined]
    return None


def _wrap_super_apply(ctx: RuleContext, method: ast.AST, kept: list[str]) -> Replace | None:
    """The one ``super()._apply(fn, ...)`` call of a user's ``_apply(self, fn, ...)`` override, run through
    ``rope_runtime.apply_keeping_dtype`` so that ``kept`` keeps its dtype there (whatever else it does stays)."""
    if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) or len(method.args.args) < 2:
        return None
    fn_param = method.args.args[1].arg
    calls = [n for n in ast.walk(method) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr == "_apply" and isinstance(n.func.value, ast.Call)
             and isinstance(n.func.value.func, ast.Name) and n.func.value.func.id == "super"]
    if len(calls) != 1 or not calls[0].args or not isinstance(calls[0].args[0], ast.Name) \
            or calls[0].args[0].id != fn_param or any(isinstance(a, ast.Starred) for a in calls[0].args[:1]):
        return None
    call = calls[0]
    rest = [ctx.code(a) for a in call.args[1:]] + [ctx.code(k) for k in call.keywords]
    arguments = ", ".join(["self", ctx.code(call.func), fn_param, _quoted(kept), *rest])
    return Replace(call, f"rope_runtime.apply_keeping_dtype({arguments})")


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
    # In registration order, whichever finding asks: the same override for every finding of the class.
    # State that feeds a phase counts whatever its own role (LongRoPE's ``short_factor``/``long_factor``).
    feeding = {read.ref.name for used in (*ctx.model.products, *ctx.model.helper_freqs)
               for read in (used.freq.reads if isinstance(used, Product) else used.arg.reads)}
    feeding |= {read.ref.name for power in ctx.model.scale_powers for read in power.base.reads}  # xPos scales
    # The entries of a ``nn.ParameterList``/``nn.ParameterDict`` are reached through the container's name.
    return list(dict.fromkeys(reg.ref.name + (".{}" if reg.ref.container else "") for reg in ctx.model.registrations
                              if reg.scope.symbol.split(".")[0] == info.name
                              and (reg.ref is ref or reg.ref.follows_module_casts
                                   and (reg.value.roles & ROTARY or (reg.ref.name in feeding
                                                                     and not _learnable(ctx, info, reg.ref.name))))))


def _quoted(names: list[str]) -> str:
    return tuple_code([f'"{name}"' for name in names])
