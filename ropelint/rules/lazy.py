"""Recognising rotary state that a module builds on its first forward, so a fix can rebuild it there.

The Gemma shape registers ``inv_freq`` as ``None`` and fills it under ``if self.inv_freq is None``;
the Baichuan shape registers it from a method that forward calls only under
``if "inv_freq" not in self._buffers``. When every write of the state is of that kind and the
value is the default construction from ``self`` attributes and constants, forward can compute the
same float32 values itself, on every call, and the module then survives a meta-device load.
"""

from __future__ import annotations

import ast
import functools

from ..model.interpreter import ClassInfo
from .base import RuleContext
from .construction import assigned_value, match_default


def lazy_default(ctx: RuleContext, info: ClassInfo, name: str) -> tuple[str, str] | None:
    """(dim, base) source of the default construction the class builds ``name`` from lazily, else None."""
    writes = [w for method in info.methods.values() for w in _writes(method, name)]
    if not writes:
        return None
    specs = set()
    for method_name, value, guards, owner in writes:
        if method_name == "__init__":
            if not (isinstance(value, ast.Constant) and value.value is None):
                return None  # built eagerly: not this shape
            continue
        if not (any(_first_time(test, name) for test in guards) or _called_only_first_time(info, method_name, name)):
            return None
        if isinstance(value, ast.Name):
            found = assigned_value(owner, value.id, value)
            if found is None or found[0] is None or found[1] is not None:
                return None
            value = found[0]
        spec = match_default(value, ctx.spans, ctx.imports)
        if spec is None:
            return None
        dim, base = ctx.code(spec.dim), ctx.code(spec.base)
        if not all(_stable(info, part) for part in (spec.dim, spec.base)):
            return None
        specs.add((dim, base))
    return specs.pop() if len(specs) == 1 else None


@functools.lru_cache(maxsize=64)
def _guarded(method: ast.AST):  # type: ignore[no-untyped-def]
    """Every node of the method's body with the tests of the ``if`` statements it sits under (asked once
    per written name; the walk is shared)."""
    out: list = []  # type: ignore[type-arg]

    def visit(body: list, guards: list) -> None:  # type: ignore[type-arg]
        for stmt in body:
            if isinstance(stmt, ast.If):
                visit(stmt.body, [*guards, stmt.test])
                visit(stmt.orelse, guards)
            else:
                out.extend((node, guards) for node in ast.walk(stmt))

    visit(method.body, [])  # type: ignore[attr-defined]
    return out


def _writes(method: ast.AST, name: str):  # type: ignore[no-untyped-def]
    """(method name, written value, enclosing if-tests, method) for each write of ``self.<name>``."""
    return _writes_by_name(method).get(name, [])


@functools.lru_cache(maxsize=64)
def _writes_by_name(method: ast.AST):  # type: ignore[no-untyped-def]
    """Every ``self.<name> = ...`` and ``register_buffer("<name>", ...)`` of the method, by name: one walk
    for all the names a class asks about."""
    out: dict = {}  # type: ignore[type-arg]
    for node, guards in _guarded(method):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                        and target.value.id == "self":
                    out.setdefault(target.attr, []).append(
                        (method.name, node.value, guards, method))  # type: ignore[attr-defined]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "register_buffer" and len(node.args) >= 2 \
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            out.setdefault(node.args[0].value, []).append(
                (method.name, node.args[1], guards, method))  # type: ignore[attr-defined]
    return out


def _first_time(test: ast.AST, name: str) -> bool:
    """``self.X is None``, ``"X" not in self._buffers``, ``not hasattr(self, "X")``."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, op, right = test.left, test.ops[0], test.comparators[0]
        if isinstance(op, ast.Is) and isinstance(right, ast.Constant) and right.value is None \
                and isinstance(left, ast.Attribute) and left.attr == name:
            return True
        if isinstance(op, ast.NotIn) and isinstance(left, ast.Constant) and left.value == name \
                and isinstance(right, ast.Attribute) and right.attr == "_buffers":
            return True
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and isinstance(test.operand, ast.Call):
        call = test.operand
        return getattr(call.func, "id", None) == "hasattr" and len(call.args) == 2 \
            and isinstance(call.args[1], ast.Constant) and call.args[1].value == name
    return False


def _called_only_first_time(info: ClassInfo, method_name: str, name: str) -> bool:
    """Every call of ``self.<method_name>(...)`` in the class sits under a first-time test of ``name``."""
    calls = 0
    for method in info.methods.values():
        for _, guards, call in _calls(method, method_name):
            calls += 1
            if not any(_first_time(test, name) for test in guards):
                return False
    return calls > 0


def _calls(method: ast.AST, callee: str):  # type: ignore[no-untyped-def]
    return [(method, guards, node) for node, guards in _guarded(method)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == callee
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "self"]


def _stable(info: ClassInfo, node: ast.AST) -> bool:
    """A constant, or ``self.<attr>`` that only ``__init__`` writes."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return info.set_only_in_init(node.attr)
    return False
