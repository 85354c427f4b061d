"""What the interpreter saw: the facts rules read. Each event carries the nodes a finding or a fix needs."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from .values import StateRef, Val


@dataclass(frozen=True)
class Scope:
    """The function or method an event happened in."""

    symbol: str  # dotted: ``LlamaRotaryEmbedding.forward``
    node: ast.FunctionDef | ast.AsyncFunctionDef | None
    params: tuple[str, ...]
    activation: str | None  # the parameter that carries the activation dtype (x, hidden_states, q...)
    top: ast.AST | None = None  # the top-level statement (class or function) it lies in


@dataclass(frozen=True)
class Guard:
    """A region where autocast is disabled (or forced to float32)."""

    node: ast.Call  # the autocast call in the ``with`` item or decorator
    owner: ast.AST  # the With statement or the decorated FunctionDef (or the statement switching autocast off)
    scope: Scope
    # ``torch.set_autocast_enabled(True)`` closing a region that ``torch.set_autocast_enabled(False)`` opened.
    closer: ast.stmt | None = None


@dataclass(frozen=True)
class Product:
    """Positions combined with inverse frequencies: the phase."""

    node: ast.AST
    form: str  # "matmul", "einsum-matmul", "einsum-sum", "einsum", "outer", "elementwise", "linear", "tensordot"
    freq: Val
    positions: Val
    guard: Guard | None
    scope: Scope
    # For matmul forms: the two operand expressions in order, for the rewrite.
    operands: tuple[ast.AST, ...] = ()
    operand_vals: tuple[Val, ...] = ()


@dataclass(frozen=True)
class Cast:
    """A dtype conversion of a rotary value: ``.to(...)``, ``.type_as(...)``, ``.half()``..."""

    node: ast.Call
    method: str
    receiver: Val
    target: Val  # a DTYPE value
    target_expr: ast.AST | None
    scope: Scope


@dataclass(frozen=True)
class Trig:
    node: ast.Call
    arg: Val
    scope: Scope
    guard: Guard | None = None


@dataclass(frozen=True)
class TrigInHelper:
    """A cast phase handed to a same-file function or method that takes its cos/sin."""

    call: ast.Call
    arg: Val
    callee: str
    scope: Scope


@dataclass(frozen=True)
class ScalePower:
    """Module state raised to a position-sized power (xPos: ``self.scale ** power``, ``power`` growing with the
    position): a cast's rounding of the base is multiplied by the power."""

    node: ast.AST
    base: Val
    scope: Scope


@dataclass(frozen=True)
class Registration:
    """Module state registered from a rotary value."""

    node: ast.AST
    ref: StateRef
    value: Val
    scope: Scope


@dataclass(frozen=True)
class InvFreqBuilt:
    node: ast.AST
    val: Val
    scope: Scope
