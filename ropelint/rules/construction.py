"""Recognising how inverse frequencies were built, so a fix can rebuild them in float32.

Only the default construction ``1 / (base ** (arange(0, dim, 2) / dim))`` (and its ``torch.pow``
and ``base ** -x`` spellings) is rebuilt by the runtime helper; anything else (YaRN ramps, llama3
smoothing, factor lists) is left to the module's own code and the fix says so.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from ..imports import ImportTable
from ..model.names import dotted, qualname


@dataclass(frozen=True)
class DefaultConstruction:
    dim: cst.BaseExpression
    base: cst.BaseExpression


def _number(node: cst.BaseExpression, *values: float) -> bool:
    return isinstance(node, (cst.Integer, cst.Float)) and float(node.evaluated_value) in values


def _same(a: cst.BaseExpression, b: cst.BaseExpression, module: cst.Module) -> bool:
    return module.code_for_node(a.with_changes(lpar=(), rpar=())) == module.code_for_node(b.with_changes(lpar=(), rpar=()))  # type: ignore[attr-defined]


def _arange_stop(node: cst.BaseExpression, imports: ImportTable) -> cst.BaseExpression | None:
    """The ``dim`` of ``arange(0, dim, 2)`` under ``.float()``, ``.to(...)``, ``[: dim // 2]``."""
    while True:
        if isinstance(node, cst.Subscript):
            node = node.value
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
                and node.func.attr.value in ("float", "to", "double") and dotted(node.func) is None:
            node = node.func.value
        else:
            break
    if not isinstance(node, cst.Call):
        return None
    name = qualname(node.func, imports) or ""
    if name not in ("torch.arange",):
        return None
    pos = [a.value for a in node.args if a.keyword is None]
    if len(pos) != 3 or not _number(pos[0], 0) or not _number(pos[2], 2):
        return None
    return pos[1]


def match_default(expr: cst.BaseExpression, module: cst.Module, imports: ImportTable) -> DefaultConstruction | None:
    """``1.0 / (base ** (arange(0, dim, 2)... / dim))`` -> (dim, base), else None."""
    power = None
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Divide) and _number(expr.left, 1):
        inner = expr.right
        if isinstance(inner, cst.BinaryOperation) and isinstance(inner.operator, cst.Power):
            power = (inner.left, inner.right)
        elif isinstance(inner, cst.Call) and qualname(inner.func, imports) == "torch.pow" and len(inner.args) == 2:
            power = (inner.args[0].value, inner.args[1].value)
    elif isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Power) \
            and isinstance(expr.right, cst.UnaryOperation) and isinstance(expr.right.operator, cst.Minus):
        power = (expr.left, expr.right.expression)
    if power is None:
        return None
    base, exponent = power
    if not (isinstance(exponent, cst.BinaryOperation) and isinstance(exponent.operator, cst.Divide)):
        return None
    stop = _arange_stop(exponent.left, imports)
    if stop is None or not _same(stop, exponent.right, module):
        return None
    return DefaultConstruction(exponent.right, base)


def assigned_value(fn: cst.FunctionDef, name: str, before: cst.CSTNode) -> tuple[cst.BaseExpression, int | None] | None:
    """The one expression a local is assigned in ``fn`` before ``before``, with its index when the
    assignment unpacks a tuple (``inv_freq, scale = f(...)``); None if zero or several."""
    found: list[tuple[cst.BaseExpression, int | None]] = []

    class Finder(cst.CSTVisitor):
        done = False

        def on_visit(self, node: cst.CSTNode) -> bool:
            if node is before:
                Finder.done = True
            if Finder.done:
                return False
            if isinstance(node, cst.Assign):
                for target in node.targets:
                    if isinstance(target.target, cst.Name) and target.target.value == name:
                        found.append((node.value, None))
                    elif isinstance(target.target, (cst.Tuple, cst.List)):
                        for i, element in enumerate(target.target.elements):
                            if isinstance(element.value, cst.Name) and element.value.value == name:
                                found.append((node.value, i))
            elif isinstance(node, (cst.AugAssign, cst.AnnAssign)) and isinstance(node.target, cst.Name) \
                    and node.target.value == name:
                found.append((node.value if isinstance(node, cst.AnnAssign) and node.value else cst.Name("__aug__"), None))
            return True

    fn.body.visit(Finder())
    return found[0] if len(found) == 1 else None
