"""Recognising how inverse frequencies were built, so a fix can rebuild them in float32.

Only the default construction ``1 / (base ** (arange(0, dim, 2) / dim))`` (and its ``torch.pow``
and ``base ** -x`` spellings) is rebuilt by the runtime helper; anything else (YaRN ramps, llama3
smoothing, factor lists) is left to the module's own code and the fix says so.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from ..imports import ImportTable
from ..model.names import dotted, number, qualname
from ..spans import Spans


@dataclass(frozen=True)
class DefaultConstruction:
    dim: ast.expr
    base: ast.expr


def _number(node: ast.AST, *values: float) -> bool:
    value = number(node)
    return value is not None and float(value) in values


def _arange_stop(node: ast.AST, imports: ImportTable) -> ast.expr | None:
    """The ``dim`` of ``arange(0, dim, 2)`` under ``.float()``, ``.to(...)``, ``[: dim // 2]``."""
    while True:
        if isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("float", "to", "double") and dotted(node.func) is None:
            node = node.func.value
        else:
            break
    if not isinstance(node, ast.Call):
        return None
    name = qualname(node.func, imports) or ""
    if name not in ("torch.arange",):
        return None
    pos = node.args
    if len(pos) != 3 or any(isinstance(a, ast.Starred) for a in pos) or not _number(pos[0], 0) \
            or not _number(pos[2], 2):
        return None
    return pos[1]


def match_default(expr: ast.AST, spans: Spans, imports: ImportTable) -> DefaultConstruction | None:
    """``1.0 / (base ** (arange(0, dim, 2)... / dim))`` -> (dim, base), else None."""
    power = None
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Div) and _number(expr.left, 1):
        inner = expr.right
        if isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Pow):
            power = (inner.left, inner.right)
        elif isinstance(inner, ast.Call) and qualname(inner.func, imports) == "torch.pow" and len(inner.args) == 2 \
                and not inner.keywords:
            power = (inner.args[0], inner.args[1])
    elif isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Pow) \
            and isinstance(expr.right, ast.UnaryOp) and isinstance(expr.right.op, ast.USub):
        power = (expr.left, expr.right.operand)
    if power is None:
        return None
    base, exponent = power
    if not (isinstance(exponent, ast.BinOp) and isinstance(exponent.op, ast.Div)):
        return None
    stop = _arange_stop(exponent.left, imports)
    if stop is None or spans.text(stop) != spans.text(exponent.right):
        return None
    return DefaultConstruction(exponent.right, base)


def assigned_value(fn: ast.AST, name: str, before: ast.AST) -> tuple[ast.expr | None, int | None] | None:
    """The one expression a local is assigned in ``fn`` before ``before``, with its index when the
    assignment unpacks a tuple (``inv_freq, scale = f(...)``); None if zero or several. An
    augmented assignment counts as one more assignment with no expression."""
    found: list[tuple[ast.expr | None, int | None]] = []
    limit = (before.lineno, before.col_offset)  # type: ignore[attr-defined]
    for node in ast.walk(fn):
        if not isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) or (node.lineno, node.col_offset) >= limit:
            continue
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id == name:
                    found.append((node.value, None))
                elif isinstance(target, (ast.Tuple, ast.List)):
                    for i, element in enumerate(target.elts):
                        if isinstance(element, ast.Name) and element.id == name:
                            found.append((node.value, i))
        elif isinstance(node.target, ast.Name) and node.target.id == name:
            found.append((node.value if isinstance(node, ast.AnnAssign) else None, None))
    return found[0] if len(found) == 1 else None
