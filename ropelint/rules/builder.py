"""Rebuilding state that ``__init__`` computes in several statements (YaRN ramps, llama3 smoothing,
scaled or factor-list frequencies): the statements become a method forward can call.

The statements that compute the registered local (its backward slice in ``__init__``) are copied,
unchanged, into ``_build_<name>(self, <the __init__ arguments they read>, device=None)``, which
returns the local; ``__init__`` keeps its own statements, and records the arguments right after the
registration. Forward then calls the builder through ``rope_runtime.inv_freq_from`` on the
positions' device, so it computes exactly what ``__init__`` computed, in float32.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass

from ..model.interpreter import ClassInfo
from .base import RuleContext

BUILTINS = frozenset(dir(builtins))


@dataclass(frozen=True)
class Builder:
    name: str  # the method's name
    code: str  # the method, indented relative to ``__init__``'s own line
    args: tuple[str, ...]  # ``__init__`` parameters it takes, in signature order (``device`` excluded)


def extract_builder(ctx: RuleContext, info: ClassInfo, init: ast.FunctionDef, registration: ast.AST,
                    local: str, state: str) -> Builder | None:
    """The builder for ``local`` as ``__init__`` computes it before ``registration``, or None when the
    statements cannot be lifted out unchanged."""
    stmt = ctx.model.statement_of.get(id(registration), registration)
    if stmt not in init.body:
        return None
    before = init.body[:init.body.index(stmt)]
    needed, sliced = {local}, []
    for candidate in reversed(before):
        defined = _defined(candidate)
        if defined is None:
            if _may_change(candidate, needed):
                return None  # a statement other than a plain assignment may change what the slice needs
            continue
        if not defined & needed:
            continue
        if not isinstance(candidate, ast.AugAssign):
            needed -= defined
        needed |= _loads(candidate)
        sliced.insert(0, candidate)
    if not sliced:
        return None
    params = [a.arg for a in (*init.args.posonlyargs, *init.args.args, *init.args.kwonlyargs)]
    module_names = set(ctx.imports.names) | ctx.module_names | set(ctx.model.functions) | BUILTINS
    free = needed - {"self"}
    if any(name not in params and name not in module_names for name in free):
        return None  # a local the slice cannot see
    if not _self_reads_stable(info, sliced):
        return None
    args = tuple(p for p in params[1:] if p in free and p != "device")
    name = f"_build_{state.strip('_')}"
    while name in info.methods:
        name += "_"
    _, init_column = ctx.spans.start(init)
    body = []
    for part in sliced:
        first, last = part.lineno, part.end_lineno  # type: ignore[attr-defined]
        for number in range(first, last + 1):
            line = ctx.spans.line_text(number).rstrip("\r")
            body.append(line[init_column:] if line[:init_column].strip() == "" else None)
    if any(line is None for line in body):
        return None
    # Checks of the arguments (``assert dtype in [torch.float64, torch.float32]``) hold in the builder too.
    checks = [stmt for stmt in before if isinstance(stmt, ast.Assert)
              and {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)} <= set(args) | module_names]
    for check in reversed(checks):
        lines = [ctx.spans.line_text(n).rstrip("\r") for n in range(check.lineno, check.end_lineno + 1)]  # type: ignore[operator]
        if any(line[:init_column].strip() for line in lines):
            return None
        body[:0] = [line[init_column:] for line in lines]
    indent = _body_indent(ctx, init, init_column)
    signature = ", ".join(["self", *args, "device=None"])
    code = "\n".join(["", f"def {name}({signature}):  # ropelint: `__init__`'s construction of `{state}`, for forward",
                      *body, f"{indent}return {local}"])  # type: ignore[list-item]
    return Builder(name, code, args)


def _body_indent(ctx: RuleContext, init: ast.FunctionDef, init_column: int) -> str:
    _, column = ctx.spans.start(init.body[0])
    return ctx.spans.line_text(init.body[0].lineno)[init_column:column]


def _defined(stmt: ast.stmt) -> set[str] | None:
    """Local names a plain assignment binds; None for any other statement."""
    if isinstance(stmt, ast.AugAssign):
        return {stmt.target.id} if isinstance(stmt.target, ast.Name) else None
    if isinstance(stmt, ast.AnnAssign):
        return {stmt.target.id} if isinstance(stmt.target, ast.Name) and stmt.value is not None else None
    if not isinstance(stmt, ast.Assign):
        return None
    names: set[str] = set()
    for target in stmt.targets:
        elements = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
        for element in elements:
            if not isinstance(element, ast.Name):
                return None  # ``self.x = ...`` or a subscript: not a pure computation
            names.add(element.id)
    return names


def _loads(stmt: ast.stmt) -> set[str]:
    return {n.id for n in ast.walk(stmt.value) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}  # type: ignore[attr-defined]


def _may_change(stmt: ast.stmt, names: set[str]) -> bool:
    """The statement binds one of ``names`` (a loop target, ``with ... as``) or calls an in-place method
    on one (``inv_freq.mul_(2)``); reading them, as ``self.dim = dim`` does, changes nothing."""
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name) and node.id in names and not isinstance(node.ctx, ast.Load):
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr.endswith("_") \
                and isinstance(node.func.value, ast.Name) and node.func.value.id in names:
            return True
    return False


def _self_reads_stable(info: ClassInfo, sliced: list[ast.stmt]) -> bool:
    """``self.<attr>`` read by the slice is written only in ``__init__``, so forward sees the same value."""
    for stmt in sliced:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self" \
                    and not info.set_only_in_init(node.attr):
                return False
    return True
