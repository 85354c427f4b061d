"""Casting tables at the attention boundary, in the callers, when the function that makes them has no
activation of its own to take the dtype from.

Dropping an integer cast from ``return cos.to(dtype), sin.to(dtype)`` leaves float32 tables. A caller that
then rotates 16-bit queries with them (``q * cos``) gets float32 queries by type promotion, and the next
matmul with 16-bit keys or values raises a dtype error: the module ran (wrongly) before the fix and fails
after it. When every call of the function in the file is ``cos, sin = self.rotary(...)`` inside a method
that holds the activations, the cast goes there instead, to the activations' dtype.
"""

from __future__ import annotations

import ast

from ..diagnostics import FixPlan, NodeEdit, Replace
from ..model.interpreter import ACTIVATION_PARAMS, call_params
from ..model.names import is_none
from ..model.values import Role
from .base import RuleContext, atom_code, calls_in_text, cast_receiver, spelled_as_tensor
from .callsite import calls_of

# Names of the rotated activations, best first: the tables should take the queries' dtype.
_PREFERRED = ("q", "query", "query_states", "xq", "q_rot", "k", "key", "key_states", "xk")


def cast_at_callers(ctx: RuleContext, cast) -> FixPlan | None:  # type: ignore[no-untyped-def]
    """Drop the integer casts of the returned tables and cast them where this file's callers receive them."""
    fn = cast.scope.node
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    returns = [n for n in ast.walk(fn) if isinstance(n, ast.Return) and n.value is not None]
    if len(returns) != 1 or not any(n is cast.node for n in ast.walk(returns[0].value)):  # type: ignore[arg-type]
        return None
    value = returns[0].value
    elements = list(value.elts) if isinstance(value, ast.Tuple) else [value]
    casts = [_table_cast_in(ctx, e) for e in elements]
    if any(c is None for c in casts):
        return None
    calls = _calls(ctx, cast.scope.symbol, fn.name)
    if not calls:
        return None
    edits: list[NodeEdit] = [_without_dtype(ctx, c) for c in casts]  # type: ignore[arg-type]
    for caller, call in calls:
        like = _activation_before(caller, call)
        owner = ctx.model.statement_of.get(id(call))
        # ``cos, sin = self.rotary(...)``, or handed on as it is: ``return hidden, self.rotary_tables(n)``.
        received = (isinstance(owner, ast.Assign) and owner.value is call) or (
            isinstance(owner, ast.Return) and (owner.value is call or (
                isinstance(owner.value, ast.Tuple) and any(e is call for e in owner.value.elts))))
        if like is None or not received:
            return None
        code = ctx.code(call)
        edits.append(Replace(call, f"tuple(t.to({like}.dtype) for t in {code})" if len(elements) > 1
                             else f"{code}.to({like}.dtype)"))
    where = ", ".join(dict.fromkeys(_symbol(ctx, caller) for caller, _ in calls))
    return FixPlan("safe", f"keep the tables float32 here and cast them to the activations' dtype where "
                           f"{where} receives them", tuple(edits))


def _table_cast_in(ctx: RuleContext, element: ast.AST):  # type: ignore[no-untyped-def]
    """The recorded cast of a cos/sin table that a returned element is, or wraps (``cos.type_as(t)[:, None]``)."""
    while isinstance(element, ast.Subscript):
        element = element.value
    return next((c for c in ctx.model.casts if c.node is element and c.method in ("to", "type", "type_as")
                 and c.receiver.roles & {Role.TABLE}), None)


def _without_dtype(ctx: RuleContext, cast) -> Replace:  # type: ignore[no-untyped-def]
    """The cast without its dtype: ``t.type_as(positions)`` keeps the move (``t.to(positions.device)``)."""
    receiver = atom_code(ctx, cast_receiver(cast.node), cast.node)
    target = cast.target_expr
    if cast.method == "type_as" and target is not None:
        return Replace(cast.node, f"{receiver}.to({ctx.code(target)}.device)")
    if cast.method == "to" and target is not None and spelled_as_tensor(ctx, target):
        return Replace(cast.node, f"{receiver}.to({ctx.code(target)}.device)")
    return Replace(cast.node, receiver)


def _calls(ctx: RuleContext, symbol: str, name: str) -> list[tuple[ast.AST, ast.Call]]:
    """(caller, call) for every call of the function or method ``symbol`` in the file, a held rotary's
    ``forward`` through ``self.rope(...)`` included. Empty when the file may call it in a way not seen here."""
    cls_name = symbol.split(".")[0] if "." in symbol else None
    held = name in ("forward", "__call__")
    found = list(calls_of(ctx, cls_name, name, through_held=held))
    if not held and calls_in_text(ctx.source, name) != len(found):
        return []  # a call the analysis did not see would keep getting float32 tables
    return found


def _activation_before(caller: ast.AST, call: ast.Call) -> str | None:
    """The queries (or another activation) the caller has made by its own top-level statements before the
    call, else its activation parameter."""
    made: list[str] = []
    for stmt in getattr(caller, "body", []):
        if isinstance(stmt, ast.Assign) and stmt.lineno < call.lineno and not _not_a_tensor(stmt.value):
            for target in stmt.targets:
                for node in target.elts if isinstance(target, ast.Tuple) else [target]:
                    if isinstance(node, ast.Name) and (node.id in _PREFERRED or ACTIVATION_PARAMS.match(node.id)):
                        made.append(node.id)
    for preferred in _PREFERRED:
        if preferred in made:
            return preferred
    if made:
        return made[-1]
    if not isinstance(caller, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    defaults = dict(zip(reversed([a.arg for a in caller.args.args]), reversed(caller.args.defaults)))
    return next((p for p in call_params(caller, is_method=True) if ACTIVATION_PARAMS.match(p)
                 and not (p in defaults and is_none(defaults[p]))), None)


def _not_a_tensor(value: ast.AST) -> bool:
    """``key = (end_x, end_y, str(device))``: a cache key, a literal or a string, whatever its name says."""
    return isinstance(value, (ast.Tuple, ast.List, ast.Dict, ast.Set, ast.Constant, ast.JoinedStr)) \
        or (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
            and value.func.id in ("str", "int", "float", "tuple", "list", "dict", "len", "hash", "repr"))


def _symbol(ctx: RuleContext, fn: ast.AST) -> str:
    for info in ctx.model.classes.values():
        for name, method in info.methods.items():
            if method is fn:
                return f"`{info.name}.{name}`"
    return f"`{getattr(fn, 'name', '?')}`"
