"""The rule interface: a small class with a code, a name and a ``check`` that reports findings.

The engine owns traversal (the RoPE model), suppression, positions and fix application; a rule
only reads the model and calls ``ctx.report``.
"""

from __future__ import annotations

import ast
import io
import sys
import tokenize
from dataclasses import dataclass, field
from typing import Callable, ClassVar

from ..catalogue import INFO, FixAvailability
from ..diagnostics import AddImport, Finding, FixPlan, NodeEdit
from ..imports import ImportTable
from ..model.events import Scope
from ..model.interpreter import FileModel
from ..model.names import qualname
from ..spans import Spans


@dataclass
class RuleContext:
    model: FileModel
    imports: ImportTable
    spans: Spans
    line_of: Callable[[ast.AST], int]  # the line in the file, for messages
    # Names the file defines at top level (functions, classes, assignments), selected for parsing or not.
    module_names: frozenset[str] = frozenset()
    source: str = ""  # the whole file, for the few checks that must see parts the analysis pruned
    findings: list[Finding] = field(default_factory=list)
    _seen: set[tuple[str, int]] = field(default_factory=set)

    def report(self, code: str, node: ast.AST, message: str, scope: Scope | None,
               fix: FixPlan | None = None) -> None:
        key = (code, id(node))
        if key in self._seen:
            return
        self._seen.add(key)
        self.findings.append(Finding(code, node, message, scope.symbol if scope else "", fix))

    def code(self, node: ast.AST) -> str:
        return self.spans.text(node)

    def torch_name(self) -> tuple[str, tuple[NodeEdit, ...]]:
        """The local name of the torch module, and the import edit a fix needs when there is none."""
        alias = self.imports.alias_for("torch")
        if alias is not None:
            return alias, ()
        return "torch", (AddImport("import torch"),)


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    summary: ClassVar[str]
    default_enabled: ClassVar[bool] = True
    fix_availability: ClassVar[FixAvailability] = "none"

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        info = INFO[cls.code]  # name, summary and defaults live in the catalogue
        cls.name, cls.summary = info.name, info.summary
        cls.default_enabled, cls.fix_availability = info.default_enabled, info.fix_availability

    def check(self, ctx: RuleContext) -> None:
        raise NotImplementedError

    def finish(self, ctx: RuleContext) -> None:
        """After every rule has checked the file: revise this rule's findings in the light of the others'."""


def assigned_name(ctx: RuleContext, node: ast.AST, *, whole: bool = True) -> tuple[ast.Assign, str] | None:
    """The statement ``name = <node>`` and the name (``whole=False``: ``node`` anywhere in its value)."""
    stmt = ctx.model.statement_of.get(id(node))
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
            and (stmt.value is node or not whole):
        return stmt, stmt.targets[0].id
    return None


def alone_in_block(fn: ast.AST | None, stmt: ast.stmt) -> bool:
    """``stmt`` is the only statement of a block in ``fn`` (an ``if`` branch, a loop body): deleting its
    lines would leave the block empty."""
    for node in ast.walk(fn) if fn is not None else ():
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if isinstance(block, list) and len(block) == 1 and block[0] is stmt:
                return True
    return False


def names_in(node: ast.AST) -> set[str]:
    """Every name ``node`` reads or binds."""
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def only_read_by(ctx: RuleContext, node: ast.AST, fn: ast.AST | None, allowed: set[int]) -> bool:
    """``name = <node>``, and every later read of ``name`` in ``fn`` is one of the ``allowed`` Name nodes (by id)."""
    found = assigned_name(ctx, node)
    if found is None:
        # ``angles = angles.to(x.dtype).unsqueeze(1)``: the value reshaped on the way to its name.
        found = assigned_name(ctx, node, whole=False)
        found = found if found is not None and under_reshapes(found[0].value) is node else None
    if found is None or fn is None:
        return False
    stmt, name = found
    loads = later_loads(fn, stmt, name)
    return bool(loads) and all(id(n) in allowed for n in loads)


# Methods that change a tensor's shape or layout, never its dtype or values.
RESHAPES = frozenset({"unsqueeze", "squeeze", "view", "reshape", "flatten", "contiguous", "expand", "transpose",
                      "permute", "repeat", "repeat_interleave"})


def under_reshapes(node: ast.AST) -> ast.AST:
    """The value a chain of reshapes and subscripts starts from (``x.repeat(1, 2)[None]`` -> ``x``)."""
    while (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in RESHAPES) \
            or isinstance(node, ast.Subscript):
        node = node.func.value if isinstance(node, ast.Call) else node.value  # type: ignore[union-attr]
    return node


def later_loads(fn: ast.AST, stmt: ast.stmt, name: str) -> list[ast.Name]:
    """Reads of ``name`` in ``fn`` after the statement ``stmt``."""
    after = (stmt.end_lineno, stmt.end_col_offset)
    return [n for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
            and (n.lineno, n.col_offset) > after]


# Attributes and methods that read a tensor's shape or device, never its dtype or values.
SHAPE_READS = frozenset({"shape", "ndim", "device", "size", "dim"})


def shape_only_reads(fn: ast.AST | None) -> set[int]:
    """Name nodes read only for their shape or device: ``x.shape``, ``torch.ones_like(x, dtype=...)``."""
    found: set[int] = set()
    for node in ast.walk(fn) if fn is not None else ():
        if isinstance(node, ast.Attribute) and node.attr in SHAPE_READS and isinstance(node.value, ast.Name):
            found.add(id(node.value))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("ones_like", "zeros_like", "empty_like", "full_like") \
                and node.args and isinstance(node.args[0], ast.Name) and any(k.arg == "dtype" for k in node.keywords):
            found.add(id(node.args[0]))
    return found


def cast_receiver(call: ast.Call) -> ast.AST | None:
    """The tensor a method call acts on: ``t`` in ``t.to(d)`` and in ``torch.Tensor.to(t, d)``."""
    func = call.func
    if not isinstance(func, ast.Attribute):
        return None
    if isinstance(func.value, ast.Attribute) and func.value.attr == "Tensor" and call.args:
        return call.args[0]  # called unbound
    return func.value


def tuple_code(items: list[str] | tuple[str, ...]) -> str:
    """Source of a tuple of these expressions: ``()``, ``(a,)``, ``(a, b)``."""
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"


def is_atom(node: ast.AST) -> bool:
    """Safe to append ``.attr`` without parentheses."""
    return isinstance(node, (ast.Name, ast.Attribute, ast.Call, ast.Subscript))


def atom_code(ctx: RuleContext, node: ast.AST, replaced: ast.AST) -> str:
    """The source of ``node`` to put where ``replaced`` stands (a cast of it): parenthesised unless it is an
    atom or ``replaced`` is a whole assigned or returned value (or one item of a tuple that is)."""
    text = ctx.code(node)
    stmt = ctx.model.statement_of.get(id(replaced))
    value = getattr(stmt, "value", None) if isinstance(stmt, (ast.Assign, ast.Return, ast.AnnAssign)) else None
    whole = value is replaced or (isinstance(value, ast.Tuple) and any(e is replaced for e in value.elts))
    return text if is_atom(node) or whole else f"({text})"


def as_float32(ctx: RuleContext, node: ast.AST) -> str:
    text = ctx.code(node)
    return f"{text}.float()" if is_atom(node) else f"({text}).float()"


def append_keyword(ctx: RuleContext, call: ast.Call, keyword: str) -> str:
    """The call's source with ``keyword`` (``dtype=torch.float32``) added as its last argument; everything
    before the closing parenthesis is kept verbatim."""
    code = ctx.code(call)
    unpacked = [k.value for k in call.keywords if k.arg is None]
    if unpacked:
        # ``torch.arange(0, d, 2, **factory_kwargs)`` whose dict may hold ``dtype`` too: a keyword beside it would
        # raise "got multiple values", so the keyword goes into the unpacked dict, where it wins.
        name, value = keyword.split("=", 1)
        last = unpacked[-1]
        base = ctx.spans.start_offset(call)
        begin, end = ctx.spans.start_offset(last) - base, ctx.spans.end_offset(last) - base
        return f'{code[:begin]}{{**{code[begin:end]}, "{name}": {value}}}{code[end:]}'
    head = code[: code.rstrip().rfind(")")].rstrip()
    sep = "" if not (call.args or call.keywords) else " " if head.endswith(",") else ", "
    return f"{head}{sep}{keyword})"


def spelled_as_tensor(ctx: RuleContext, node: ast.AST | None) -> bool:
    """A tensor, not a dtype, as far as the spelling shows: ``self.decay``, ``positions``; not ``torch.bfloat16``
    (or a bare ``bfloat16`` imported from torch), ``x.dtype``, ``out_dtype`` or ``self.dtype``."""
    if not isinstance(node, (ast.Name, ast.Attribute)):
        return False
    return "dtype" not in ctx.code(node) and not (qualname(node, ctx.imports) or "").startswith("torch.")


def calls_in_text(source: str, name: str) -> int:
    """Calls of ``name`` anywhere in the file's code, by any receiver (not in strings or comments);
    the definition is not a call. A file that does not tokenize counts as having unseen calls."""
    count = 0
    previous: list[tokenize.TokenInfo] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
                continue
            if token.string == "(" and len(previous) == 2 and previous[1].type == tokenize.NAME \
                    and previous[1].string == name and previous[0].string != "def":
                count += 1
            previous = [*previous[-1:], token]
    except (tokenize.TokenError, SyntaxError):
        return sys.maxsize
    return count
