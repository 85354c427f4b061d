"""Build and call a target for one case, and discover how to do so in the first place."""

from __future__ import annotations

import inspect
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

import torch
from torch import nn

from ropelint.probe.compare import Reference, compare
from ropelint.probe.config import ProbeConfig
from ropelint.probe.readings import ReadError, Reading, Table, candidate_readings, read, summarize
from ropelint.probe.signature import (
    Arg,
    CallPlan,
    ConstructorPlan,
    Fixed,
    InferenceError,
    constructor_plan,
    fixed_pair,
    forward_plans,
    function_plans,
    parse_assignments,
)

# Small, cheap positions for discovery; 4097 makes a phase easy to tell from a cos table.
DISCOVERY_POSITIONS: tuple[int, ...] = (*range(64), 1000, 4097)
MAX_POSITIONS = 4096  # for a required max_position_embeddings-like constructor parameter


class ProbeSetupError(Exception):
    """The target could not be built or called; the message lists what was tried."""


@dataclass(frozen=True)
class CallContext:
    """Everything a slot can ask for in one call."""

    head_dim: int
    base: float
    positions: torch.Tensor  # int64 [S] on ``device``
    dtype: torch.dtype  # dtype of the activations (the module's state dtype)
    device: torch.device
    length: int  # for targets that take a length: rows 0..N-1 cover every position

    @classmethod
    def make(cls, head_dim: int, base: float, positions: torch.Tensor, dtype: torch.dtype,
             device: torch.device | str) -> CallContext:
        """``positions`` on the CPU; the length is read there (a meta tensor has no values)."""
        device = torch.device(device)
        return cls(head_dim, base, positions.to(device), dtype, device, int(positions.max()) + 1)


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip()


@dataclass(frozen=True)
class Invocation:
    """A target with the constructor, call and output reading that worked for it."""

    target: object
    name: str
    constructor: ConstructorPlan | None  # None for functions
    plan: CallPlan
    reading: Reading
    fixed_head_dim: int | None = None
    fixed_base: float | None = None
    note: str = ""

    @property
    def is_class(self) -> bool:
        return self.constructor is not None

    @property
    def callee(self) -> str:
        return "forward" if self.is_class else getattr(self.target, "__name__", self.name)

    def describe(self) -> str:
        parts = []
        if self.constructor is not None:
            parts.append(self.constructor.binding.describe(getattr(self.target, "__name__", "")))
        parts.append(self.plan.binding.describe(self.callee))
        parts.append(f"read as {self.reading.describe()}")
        text = "; ".join(parts)
        return f"{text} ({self.note})" if self.note else text

    # --- values ------------------------------------------------------------------------

    def x_shape(self, ctx: CallContext) -> tuple[int, ...]:
        length = ctx.positions.shape[0] if self.plan.feeds_positions else ctx.length
        if self.plan.seq_axis is None:
            return (1, length, ctx.head_dim)
        shape = [1, 1, 1, ctx.head_dim]
        shape[self.plan.seq_axis] = length
        return tuple(shape)

    def resolve(self, arg: Arg, ctx: CallContext) -> object:
        if isinstance(arg, Fixed):
            return arg.value
        name = arg.name
        if name == "x":
            # Zeros expanded from one element: shape and dtype without the memory.
            return torch.zeros((), dtype=ctx.dtype, device=ctx.device).expand(self.x_shape(ctx))
        if name == "positions":
            return ctx.positions[None, :]
        if name == "positions_1d":
            return ctx.positions
        if name == "seq_len":
            return ctx.length
        if name == "dtype":
            return ctx.dtype
        if name == "device":
            return ctx.device
        if name == "head_dim":
            return ctx.head_dim
        if name == "base":
            return ctx.base
        if name == "config":
            return ProbeConfig(ctx.head_dim, ctx.base, max_positions=MAX_POSITIONS)
        if name == "max_positions":
            return MAX_POSITIONS
        if name == "build_dtype":
            return torch.float32
        raise InferenceError(f"unknown slot {name}")

    def arguments(self, binding_args: tuple[Arg, ...], binding_kwargs: tuple[tuple[str, Arg], ...],
                  ctx: CallContext) -> tuple[list[object], dict[str, object]]:
        args = [self.resolve(a, ctx) for a in binding_args]
        kwargs = {k: self.resolve(a, ctx) for k, a in binding_kwargs}
        return args, kwargs

    # --- actions -----------------------------------------------------------------------

    def instantiate(self, head_dim: int, base: float, device: torch.device) -> nn.Module | None:
        """A fresh float32 module (None for a function target)."""
        if self.constructor is None:
            return None
        ctx = CallContext.make(head_dim, base, torch.zeros(1, dtype=torch.long, device="cpu"),
                               torch.float32,
                               device)
        binding = self.constructor.binding
        args, kwargs = self.arguments(binding.args, binding.kwargs, ctx)
        module = self.target(*args, **kwargs)  # type: ignore[operator]
        if not isinstance(module, nn.Module):
            raise ProbeSetupError(f"{self.name}(...) did not return a torch.nn.Module")
        return module

    def call(self, module: nn.Module | None, ctx: CallContext) -> object:
        args, kwargs = self.arguments(self.plan.binding.args, self.plan.binding.kwargs, ctx)
        fn = module if module is not None else self.target
        return fn(*args, **kwargs)  # type: ignore[operator]

    def read(self, output: object, ctx: CallContext, reading: Reading | None = None) -> Table:
        rows = None if self.plan.feeds_positions else ctx.positions.to("cpu")
        return read(output, reading or self.reading, half=ctx.head_dim // 2, rows=rows,
                    expected_rows=ctx.positions.shape[0])


def _score(value: float) -> float:
    return math.inf if math.isnan(value) else value


def discover(target: object, name: str, *, pair: tuple[int, float],
             init: str | Mapping[str, object] | None = None,
             call: str | None = None) -> Invocation:
    """Find a constructor, call and reading; prefer the first that matches float32 output.

    Each candidate call runs on a fresh float32 module with autocast off. When none matches
    the reference (code that is wrong even in float32), the closest readable one is kept.
    """
    try:
        if inspect.isclass(target):
            if not issubclass(target, nn.Module):
                raise ProbeSetupError(f"{name} is a class but not a torch.nn.Module")
            ctor: ConstructorPlan | None = constructor_plan(target, init)
            plans = forward_plans(target, call)
            fixed_dim, fixed_base = ctor.fixed_head_dim, ctor.fixed_base
        elif callable(target):
            ctor = None
            plans = function_plans(target, call, init)
            merged = {**parse_assignments(init, allow_positional=False)[1],
                      **parse_assignments(call, allow_positional=True)[1]}
            fixed_dim, fixed_base = fixed_pair(merged)
        else:
            raise ProbeSetupError(f"{name} is a {type(target).__name__}, not a class or function")
    except InferenceError as exc:
        raise ProbeSetupError(f"{name}: {exc}") from exc

    head_dim = fixed_dim or pair[0]
    base = fixed_base or pair[1]
    device = torch.device("cpu")
    positions = torch.tensor(DISCOVERY_POSITIONS, dtype=torch.long)
    reference = Reference(positions, head_dim, base)
    ctx = CallContext.make(head_dim, base, positions, torch.float32, device)
    tried: list[str] = []
    best: tuple[float, Invocation] | None = None
    for plan in plans:
        candidate = Invocation(target, name, ctor, plan, Reading("pair", "plain"),
                               fixed_dim, fixed_base)
        described = plan.binding.describe(candidate.callee)
        try:
            module = candidate.instantiate(head_dim, base, device)
        except ProbeSetupError:
            raise
        except Exception as exc:  # the user's constructor can raise anything
            assert ctor is not None
            shown = ctor.binding.describe(getattr(target, "__name__", name))
            raise ProbeSetupError(
                f"{name}: building {shown} with head_dim={head_dim}, base={base:g} raised "
                f"{one_line(exc)}; give the constructor with --init"
            ) from exc
        try:
            with torch.no_grad():
                output = candidate.call(module, ctx)
        except Exception as exc:  # any failure of the user's code means: try the next shape
            tried.append(f"{described}: {one_line(exc)}")
            continue
        scored: list[tuple[float, Reading]] = []
        for reading in candidate_readings(output):
            try:
                table = candidate.read(output, ctx, reading)
            except ReadError:
                continue
            scored.append((_score(compare(table, reading.layout, reference).worst_ratio),
                           reading))
        if not scored:
            tried.append(f"{described}: returned {summarize(output)}, which is not cos/sin, "
                         f"a table, freqs_cis or a phase of width {head_dim // 2} or {head_dim}")
            continue
        ratio, reading = min(scored, key=lambda item: item[0])
        found = replace(candidate, reading=reading)
        if ratio < 1.0:
            return found
        if best is None or ratio < best[0]:
            best = (ratio, found)
    if best is not None:
        return replace(best[1], note="wrong even in float32; kept the closest reading")
    raise ProbeSetupError(
        f"could not call {name}; tried:\n  " + "\n  ".join(tried)
        + "\ngive the call with --call, e.g. --call '{x},position_ids={positions}'"
    )
