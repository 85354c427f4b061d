"""Build and call a target for one case, and discover how to do so in the first place.

Discovery tries, in order, every constructor variant (one per config object worth trying),
every candidate call (``signature.forward_plans``/``function_plans``), every place the
sequence can sit in the activation, and for targets that hand the activation back rotated,
both channel pairings. It keeps the first combination whose float32 output matches the
float64 reference, so the way an output is read is always one that was seen to be right.
When nothing matches, the output is either an imprecise rotary (kept, reported as wrong even
in float32) or not the rotary the reference describes (scaled, multi-axis, not a rotary at
all): then it says so instead of guessing.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

import torch
from torch import nn

from ropelint.probe.compare import Reference, compare
from ropelint.probe.config import STANDIN_LENGTH, ProbeConfig, build_annotated
from ropelint.probe.readings import (
    ReadError,
    Reading,
    Table,
    basis_row,
    candidate_readings,
    read,
    rotated_candidate,
    summarize,
)
from ropelint.probe.signature import (
    X_LAYOUTS,
    Arg,
    CallPlan,
    ConfigChoice,
    ConstructorPlan,
    Fixed,
    InferenceError,
    constructor_plans,
    fixed_pair,
    forward_plans,
    function_plans,
    parse_assignments,
)

# Small, cheap positions for discovery; 4097 makes a phase easy to tell from a cos table.
DISCOVERY_POSITIONS: tuple[int, ...] = (*range(64), 1000, 4097)
# Bases tried for code that fixes its base instead of taking it as a parameter.
COMMON_BASES: tuple[float, ...] = (1e4, 5e5, 1e6, 1e5, 5e4, 2e4, 1e7)
SMALL_POSITIONS: tuple[int, ...] = tuple(range(64))  # to diagnose targets that fail
PATTERNS = ("half", "interleaved")
DEFAULT_LAYER_TYPE = "full_attention"


# Layers a rotary module does not hold: a module with one is an attention block or a whole model.
LEARNED_LAYERS = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Embedding, nn.LayerNorm, nn.MultiheadAttention)


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
    pattern: str = "half"  # basis pattern of the activation (see readings.basis_row)
    materialize: bool = True  # a real activation tensor; else a broadcast view of one row

    @classmethod
    def make(cls, head_dim: int, base: float, positions: torch.Tensor, dtype: torch.dtype,
             device: torch.device | str, *, pattern: str = "half",
             materialize: bool = True) -> CallContext:
        """``positions`` on the CPU; the length is read there (a meta tensor has no values)."""
        device = torch.device(device)
        return cls(head_dim, base, positions.to(device), dtype, device,
                   int(positions.max()) + 1, pattern, materialize)


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip()


def make_config(choice: ConfigChoice, head_dim: int, base: float, length: int) -> object:
    """The config object for one case (see ``ropelint.probe.config``).

    Its maximum lengths are ``length`` when the choice says raised, else the config class's
    own defaults (``STANDIN_LENGTH`` for the stand-ins).
    """
    if choice.kind == "annotated" and choice.cls is not None:
        return build_annotated(choice.cls, head_dim, base, length if choice.raised else None)
    config = ProbeConfig(head_dim, base,
                         max_positions=length if choice.raised else STANDIN_LENGTH,
                         layered=choice.kind == "layered")
    return config.to_dict() if choice.kind == "dict" else config


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
    inferred_pair: bool = False  # the fixed dim/base were read off code that hard-codes them

    @property
    def is_class(self) -> bool:
        return self.constructor is not None

    @property
    def callee(self) -> str:
        return "forward" if self.is_class else getattr(self.target, "__name__", self.name)

    @property
    def config_choice(self) -> ConfigChoice | None:
        return self.constructor.config if self.constructor is not None else self.plan.config

    def describe(self) -> str:
        parts = []
        if self.constructor is not None:
            parts.append(self.constructor.binding.describe(getattr(self.target, "__name__", "")))
        parts.append(self.plan.binding.describe(self.callee))
        if self.plan.uses_x:
            parts.append(f"x shaped [{', '.join(self._shape_text())}]")
        parts.append(f"read as {self.reading.describe()}")
        notes = []
        if self.config_choice is not None:
            notes.append(f"config: {self.config_choice.describe()}")
        owner = self.constructor if self.constructor is not None else self.plan
        notes += list(owner.notes)
        if self.note:
            notes.append(self.note)
        text = "; ".join(parts)
        return f"{text} ({'; '.join(notes)})" if notes else text

    def _shape_text(self) -> tuple[str, ...]:
        rank, axis = self.plan.x_layout
        shape = ["1"] * rank
        shape[-1] = "head_dim"
        shape[axis] = "S"
        return tuple(shape)

    # --- values ------------------------------------------------------------------------

    def x_shape(self, ctx: CallContext) -> tuple[int, ...]:
        length = ctx.positions.shape[0] if self.plan.feeds_positions else ctx.length
        rank, axis = self.plan.x_layout
        shape = [1] * rank
        shape[-1] = ctx.head_dim
        shape[axis] = length
        return tuple(shape)

    def make_x(self, ctx: CallContext) -> torch.Tensor:
        """The activation: the basis row on every position (see ``readings.basis_row``)."""
        row = torch.tensor(basis_row(ctx.head_dim, ctx.pattern), dtype=ctx.dtype,
                           device=ctx.device)
        x = row.expand(self.x_shape(ctx))
        return x.contiguous() if ctx.materialize else x

    def config(self, ctx: CallContext, length: int) -> object:
        choice = self.config_choice or ConfigChoice("probe")
        return make_config(choice, ctx.head_dim, ctx.base, length)

    def resolve(self, arg: Arg, ctx: CallContext, build_length: int | None = None) -> object:
        if isinstance(arg, Fixed):
            return arg.value
        name = arg.name
        length = build_length or ctx.length
        if name == "x":
            return self.make_x(ctx)
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
            return self.config(ctx, length)
        if name == "max_positions":
            return length
        if name == "build_dtype":
            return torch.float32
        if name == "unit_factors":
            return [1.0] * (ctx.head_dim // 2)
        if name == "layer_type":
            config = self.config(ctx, length)
            types = getattr(config, "layer_types", None)
            if isinstance(config, Mapping):
                types = config.get("layer_types")
            return types[0] if types else DEFAULT_LAYER_TYPE
        raise InferenceError(f"unknown slot {name}")

    def arguments(self, binding_args: tuple[Arg, ...], binding_kwargs: tuple[tuple[str, Arg], ...],
                  ctx: CallContext,
                  build_length: int | None = None) -> tuple[list[object], dict[str, object]]:
        args = [self.resolve(a, ctx, build_length) for a in binding_args]
        kwargs = {k: self.resolve(a, ctx, build_length) for k, a in binding_kwargs}
        return args, kwargs

    # --- actions -----------------------------------------------------------------------

    def instantiate(self, head_dim: int, base: float, device: torch.device,
                    length: int = DISCOVERY_POSITIONS[-1] + 1) -> nn.Module | None:
        """A fresh float32 module (None for a function target).

        ``length`` goes to maximum-length parameters, so tables cover every probed position.
        """
        if self.constructor is None:
            return None
        ctx = CallContext.make(head_dim, base, torch.zeros(1, dtype=torch.long, device="cpu"),
                               torch.float32, device)
        binding = self.constructor.binding
        args, kwargs = self.arguments(binding.args, binding.kwargs, ctx, length)
        module = self.target(*args, **kwargs)  # type: ignore[operator]
        if not isinstance(module, nn.Module):
            raise ProbeSetupError(f"{self.name}(...) did not return a torch.nn.Module")
        learned = [name for name, sub in module.named_modules() if isinstance(sub, LEARNED_LAYERS)]
        if learned:
            # An attention block or a model: its forward would run the full attention over every probed
            # position (tens of GB at 32k positions), and its output is not a rotary table anyway.
            raise ProbeSetupError(f"{self.name} holds learned layers ({', '.join(learned[:3])}): it is not a rotary "
                                  f"module; probe the rotary class or function it uses instead")
        return module

    def call(self, module: nn.Module | None, ctx: CallContext) -> object:
        args, kwargs = self.arguments(self.plan.binding.args, self.plan.binding.kwargs, ctx)
        fn = module if module is not None else self.target
        return fn(*args, **kwargs)  # type: ignore[operator]

    def read(self, output: object, ctx: CallContext, reading: Reading | None = None) -> Table:
        rows = None if self.plan.feeds_positions else ctx.positions.to("cpu")
        return read(output, reading or self.reading, half=ctx.head_dim // 2, rows=rows,
                    expected_rows=ctx.positions.shape[0])

    def context(self, head_dim: int, base: float, positions: torch.Tensor, dtype: torch.dtype,
                device: torch.device | str) -> CallContext:
        """A call context that feeds the activation this invocation's reading needs."""
        return CallContext.make(head_dim, base, positions, dtype, device,
                                pattern=self.reading.pattern,
                                materialize=self.reading.form == "rotated")


def _score(value: float) -> float:
    return math.inf if math.isnan(value) else value


@dataclass
class _Attempt:
    """The closest reading seen while nothing matched, kept for the verdict or a diagnosis."""

    ratio: float
    plausible: bool  # position 0 reads as the identity rotation
    invocation: Invocation
    table: Table
    reference: Reference


def _identity_at_zero(table: Table) -> bool:
    """Row 0 (position 0) is cos 1, sin 0 (or a zero phase)."""
    first = table.first[0]
    if table.kind == "phase":
        return bool((first.abs() < 1e-2).all())
    assert table.second is not None
    return bool(((first - 1).abs() < 1e-2).all() and (table.second[0].abs() < 1e-2).all())


@dataclass(frozen=True)
class _Verdict:
    """What a float32 output that matches no reading is."""

    refuse: str | None = None  # not the reference's kind of rotary: exit 2 with this
    note: str = ""  # measured as it is (wrong even in float32), with this explanation


def _diagnose(attempt: _Attempt) -> _Verdict:
    """Decide whether a float32 output that matches no reading can still be measured.

    It is measured (every case then fails) when it is a 1-D rotary table computed wrongly:
    imprecise values, broken ones (cos/sin cast to an integer dtype), or frequencies that
    differ from the reference's. It is refused when its structure is not one the reference
    describes: a constant amplitude on cos/sin, channels that do not move with the position
    (a multi-axis rotary), or no identity rotation at position 0 (not a rotary table).
    """
    table, reference = attempt.table, attempt.reference
    layout = attempt.invocation.reading.compare_layout
    ref_phase = reference.layout_phase(layout)
    if table.kind == "trig":
        assert table.second is not None
        norm = (table.first**2 + table.second**2).sqrt()
        if torch.isfinite(norm).all() and float(norm.std()) < 1e-3 and abs(
                float(norm.mean()) - 1) > 1e-2:
            return _Verdict(
                f"cos and sin all carry a factor of {float(norm.mean()):.4g} (an attention "
                "or magnitude scaling the probe could not switch off); pass the scaling "
                "parameter with --init to turn it off")
    if not attempt.plausible:
        return _Verdict("at position 0 the output is not the identity rotation (cos 1, sin "
                        "0), so it is not a rotary table for the positions the probe passes")
    if table.kind == "trig":
        assert table.second is not None
        if not bool(((norm - 1).abs() < 0.05).all()):
            return _Verdict()  # broken values (e.g. an integer cast): measured as they are
        measured = torch.atan2(table.second[1], table.first[1])
    else:
        measured = table.first[1]
    expected = ref_phase[1]
    significant = expected.abs() > 1e-6
    relative = (measured - expected).abs() / expected.abs().clamp_min(1e-12)
    if not bool(significant.any()) or float(relative[significant].max()) < 0.05:
        return _Verdict()  # the right frequencies, computed imprecisely
    column = int(relative.masked_fill(~significant, -1).argmax())
    found = (f"channel {column} turns {float(measured[column]):.6g} rad per position, the "
             f"reference base**(-2i/head_dim) for head_dim={reference.head_dim}, "
             f"base={reference.base:g} {float(expected[column]):.6g}")
    if bool(((measured.abs() < 1e-9) & significant).any()):
        return _Verdict(f"the output rotates, but some channels do not move with the "
                        f"position ({found}): a multi-axis (2-D/3-D) rotary, which the 1-D "
                        "reference does not describe")
    return _Verdict(note=f"its frequencies are not the reference's ({found}): wrong "
                         "frequencies, or scaling the probe did not recognise (it sets scaling "
                         "factors to 1; pin values with --init/--call)")


def _candidate_pairs(pair: tuple[int, float], dim_free: bool, base_free: bool,
                     output: object) -> list[tuple[int, float]]:
    """References to score an output against: one, or several for hard-coded dim/base."""
    dims = [pair[0]]
    if dim_free:
        widths = _widths(output)
        dims = list(dict.fromkeys(d for w in widths for d in (2 * w, w, w // 2)
                                  if d >= 2 and d % 2 == 0))
    bases = [pair[1]]
    if base_free:
        bases = list(dict.fromkeys((pair[1], *COMMON_BASES)))
    return [(d, b) for d in dims for b in bases]


def _widths(output: object) -> list[int]:
    while isinstance(output, (tuple, list)) and output:
        output = output[0]
    if isinstance(output, Mapping):
        output = next(iter(output.values()), None)
    if isinstance(output, torch.Tensor) and output.dim() >= 1:
        return [int(output.shape[-1])] + ([int(output.shape[-2])] if output.dim() >= 2
                                          and output.shape[-1] == 2 else [])
    return []


class _Discovery:
    """State of one discovery run: what was tried, the closest miss, the first match."""

    def __init__(self, target: object, name: str, pair: tuple[int, float],
                 fixed_dim: int | None, fixed_base: float | None, far: int | None,
                 positions: tuple[int, ...] = DISCOVERY_POSITIONS) -> None:
        self.target = target
        self.name = name
        self.head_dim = fixed_dim or pair[0]
        self.base = fixed_base or pair[1]
        self.fixed_dim = fixed_dim
        self.fixed_base = fixed_base
        extra = (far,) if far is not None and far > max(positions) else ()
        self.positions = torch.tensor((*positions, *extra), dtype=torch.long)
        self.length = int(self.positions.max()) + 1
        self.references: dict[tuple[int, float], Reference] = {}
        self.tried: list[str] = []
        self.build_errors: list[str] = []
        self.best: _Attempt | None = None
        self.built_any = False

    def reference(self, pair: tuple[int, float]) -> Reference:
        if pair not in self.references:
            self.references[pair] = Reference(self.positions, *pair)
        return self.references[pair]

    def attempt(self, candidate: Invocation, ctx: CallContext, module: nn.Module | None,
                dim_free: bool, base_free: bool) -> tuple[Invocation | None, object]:
        """Call once; return a matching invocation (or None) and the raw output."""
        with torch.no_grad():
            output = candidate.call(module, ctx)
        x_shape = candidate.x_shape(ctx) if candidate.plan.uses_x else None
        readings = candidate_readings(output, x_shape, ctx.pattern)
        if ctx.pattern != "half":
            readings = [r for r in readings if r.form == "rotated"]
        for dim, base in _candidate_pairs((self.head_dim, self.base), dim_free, base_free,
                                          output):
            pair_ctx = replace(ctx, head_dim=dim, base=base)
            reference = self.reference((dim, base))
            for reading in readings:
                try:
                    table = candidate.read(output, pair_ctx, reading)
                except ReadError:
                    continue
                ratio = _score(compare(table, reading.compare_layout, reference).worst_ratio)
                found = replace(candidate, reading=reading)
                if dim_free or base_free:
                    fixed = ([f"head_dim {dim}"] if dim_free else []) + (
                        [f"base {base:g}"] if base_free else [])
                    found = replace(found, fixed_head_dim=dim if dim_free else self.fixed_dim,
                                    fixed_base=base if base_free else self.fixed_base,
                                    inferred_pair=True,
                                    note=f"{' and '.join(fixed)} fixed in the code: every "
                                         "case uses it")
                if ratio < 1.0:
                    return found, output
                plausible = _identity_at_zero(table)
                key = (not plausible, ratio)
                if self.best is None or key < (not self.best.plausible, self.best.ratio):
                    self.best = _Attempt(ratio, plausible, found, table, reference)
        return None, output


def discover(target: object, name: str, *, pair: tuple[int, float],
             init: str | Mapping[str, object] | None = None,
             call: str | None = None, far: int | None = None) -> Invocation:
    """Find a constructor, call and reading whose float32 output matches the reference.

    Each candidate call runs on a fresh float32 module with autocast off. When none matches,
    the closest reading is kept if the output is the reference's rotary computed imprecisely
    (code that is wrong even in float32); otherwise ``ProbeSetupError`` says what the output
    is instead. ``far``, the largest position the cases will probe, is probed here too, so a
    table too short for it shows now, and the next constructor variant (lengths raised) is
    tried.
    """
    hint = ""
    try:
        if inspect.isclass(target):
            if not issubclass(target, nn.Module):
                raise ProbeSetupError(f"{name} is a class but not a torch.nn.Module")
            ctors: list[ConstructorPlan | None] = list(constructor_plans(target, init))
            hint = _guess_hint(target, ctors[0])
            plans = forward_plans(target, call)
            first = ctors[0]
            assert first is not None
            fixed_dim, fixed_base = first.fixed_head_dim, first.fixed_base
        elif callable(target):
            ctors = [None]
            plans = function_plans(target, call, init)
            merged = {**parse_assignments(init, allow_positional=False)[1],
                      **parse_assignments(call, allow_positional=True)[1]}
            fixed_dim, fixed_base = fixed_pair(merged)
        else:
            raise ProbeSetupError(f"{name} is a {type(target).__name__}, not a class or function")
    except InferenceError as exc:
        raise ProbeSetupError(f"{name}: {exc}{hint}") from exc
    try:
        return _discover(target, name, pair, ctors, plans, fixed_dim, fixed_base, far)
    except ProbeSetupError as exc:
        if not hint:
            raise
        raise ProbeSetupError(f"{exc}{hint}") from exc


def _guess_hint(target: object, ctor: ConstructorPlan | None) -> str:
    """When constructor parameters were guessed by elimination, say so in every error."""
    guessed = [n for n in (ctor.notes if ctor else ()) if " taken as the " in n]
    if ctor is None or not guessed:
        return ""
    shown = ctor.binding.describe(getattr(target, "__name__", "target"))
    return (f"\nthe constructor was guessed as {shown} ({'; '.join(guessed)}); if that is "
            "wrong, give it with --init, e.g. --init 'NAME={head_dim},OTHER={base}'")


def _discover(target: object, name: str, pair: tuple[int, float],
              ctors: list[ConstructorPlan | None], plans: list[CallPlan],
              fixed_dim: int | None, fixed_base: float | None, far: int | None) -> Invocation:
    state = _Discovery(target, name, pair, fixed_dim, fixed_base, far)
    found = _search(state, ctors, plans)
    if found is not None:
        return found
    if not state.built_any:
        raise ProbeSetupError(
            f"{name}: building it with head_dim={state.head_dim}, base={state.base:g} "
            "failed:\n  " + "\n  ".join(dict.fromkeys(state.build_errors))
            + "\ngive the constructor with --init"
        )
    best = state.best
    if best is not None:
        verdict = _diagnose(best)
        if verdict.refuse is None:
            note = "; ".join(n for n in (best.invocation.note,
                                         "wrong even in float32; kept the closest reading",
                                         verdict.note) if n)
            return replace(best.invocation, note=note)
        raise ProbeSetupError(
            f"{name}: called as {best.invocation.describe()}: {verdict.refuse}")
    tried = "\n  ".join(dict.fromkeys(state.tried))
    # Nothing ran through: see whether small positions work, to say what limits the target.
    small = _Discovery(target, name, pair, fixed_dim, fixed_base, None, SMALL_POSITIONS)
    found = _search(small, ctors, plans)
    if found is not None:
        raise ProbeSetupError(
            f"{name}: works for positions below {len(SMALL_POSITIONS)} (called as "
            f"{found.describe()}) but not for the positions the probe needs:\n  {tried}\n"
            "its table length is likely set by a parameter the probe does not recognise; "
            "pass it with --init NAME={max_positions}, or narrow --positions"
        )
    if small.best is not None:
        verdict = _diagnose(small.best)
        problem = verdict.refuse or (
            "it matches no reading even in float32" + (f" ({verdict.note})" if verdict.note
                                                       else ""))
        raise ProbeSetupError(
            f"{name}: at positions below {len(SMALL_POSITIONS)}, called as "
            f"{small.best.invocation.describe()}: {problem}; larger positions fail:\n  {tried}"
        )
    built = ("" if not state.build_errors else
             "\nconstructor variants that failed:\n  " + "\n  ".join(state.build_errors))
    raise ProbeSetupError(
        f"could not call {name}; tried:\n  " + tried + built
        + "\ngive the call with --call, e.g. --call '{x},position_ids={positions}'"
    )


def _search(state: _Discovery, ctors: list[ConstructorPlan | None],
            plans: list[CallPlan]) -> Invocation | None:
    """Try every constructor variant, call, activation layout and pattern, in order."""
    target, name = state.target, state.name
    device = torch.device("cpu")
    for ctor in ctors:
        dim_free = ctor.dim_free if ctor is not None else False
        base_free = ctor.base_free if ctor is not None else False
        ctor_failed = False
        for plan in plans:
            if ctor is None:
                dim_free, base_free = plan.dim_free, plan.base_free
            candidate = Invocation(target, name, ctor, plan, Reading("pair", "plain"),
                                   state.fixed_dim, state.fixed_base)
            layouts = [plan.x_layout] if plan.fixed_layout or not plan.uses_x else X_LAYOUTS
            errors: list[str] = []
            outputs: list[str] = []
            for layout in layouts:
                shaped = replace(candidate, plan=replace(plan, x_layout=layout))
                for pattern in PATTERNS:
                    ctx = CallContext.make(state.head_dim, state.base, state.positions,
                                           torch.float32, device, pattern=pattern)
                    try:
                        module = shaped.instantiate(state.head_dim, state.base, device,
                                                    state.length)
                    except ProbeSetupError:
                        raise
                    except Exception as exc:  # the user's constructor can raise anything
                        assert ctor is not None
                        shown = ctor.binding.describe(getattr(target, "__name__", name))
                        config = (f" with {ctor.config.describe()}" if ctor.config else "")
                        state.build_errors.append(f"{shown}{config}: {one_line(exc)}")
                        ctor_failed = True
                        break
                    state.built_any = True
                    try:
                        found, output = state.attempt(shaped, ctx, module, dim_free, base_free)
                    except Exception as exc:  # any failure of the user's code: next shape
                        errors.append(one_line(exc))
                        break
                    if found is not None:
                        return found
                    outputs.append(summarize(output))
                    if not rotated_candidate(output, shaped.x_shape(ctx)):
                        break  # the second pattern only matters to a rotated activation
                if ctor_failed:
                    break
            if ctor_failed:
                break
            described = candidate.plan.binding.describe(candidate.callee)
            if outputs:
                state.tried.append(f"{described}: returned {outputs[0]}, which matches no "
                                   "reading of cos/sin, a table, freqs_cis, a phase or a "
                                   "rotated activation")
            elif errors:
                state.tried.append(f"{described}: {errors[0]}")
    return None
