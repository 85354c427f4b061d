"""Work out how to build and call a rotary class or function from its parameter names.

Nothing here touches torch: a binding is a recipe of slots (``head_dim``, ``positions``,
...) that ``invoke`` fills per case.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass

# Parameter names by role. Order does not matter; membership does.
DIM_NAMES = frozenset({
    "dim", "head_dim", "rotary_dim", "kv_channels", "n_elem", "rotary_ndims", "dim_head",
    "d_head", "head_size", "rotary_emb_dim", "rotary_embedding_dim", "rope_dim", "rot_dim",
    "dimension", "size_per_head", "hidden_size_per_attention_head", "ndims", "features",
})
BASE_NAMES = frozenset({
    "base", "theta", "rope_theta", "rotary_base", "rotary_emb_base", "rope_base", "base_freq",
    "freq_base", "rotary_theta", "rope_freq_base", "rotary_emb_theta",
})
CONFIG_NAMES = frozenset({"config", "cfg", "model_config", "args", "model_args", "params"})
MAX_POSITION_NAMES = frozenset({
    "max_position_embeddings", "max_positions", "max_seq_len", "max_seq_length", "max_len",
    "max_length", "block_size", "context_length", "max_seq_len_cached", "n_positions",
})
POSITION_NAMES = frozenset({
    "position_ids", "positions", "pos", "position", "pos_ids", "input_pos",
    "token_positions", "position_idx", "t",
})
LENGTH_NAMES = frozenset({
    "seq_len", "seqlen", "seq_length", "sequence_length", "max_seq_len", "max_seq_length",
    "end", "length", "num_positions", "n_positions", "max_len", "max_length", "T",
})
SEQ_DIM_NAMES = frozenset({"seq_dim", "seq_axis", "sequence_dim"})
DTYPE_NAMES = frozenset({"dtype"})
DEVICE_NAMES = frozenset({"device"})

# Slots a binding can use; ``invoke.resolve`` gives each a value per case.
SLOTS = frozenset({
    "x", "positions", "positions_1d", "seq_len", "dtype", "device", "head_dim", "base",
    "config", "max_positions", "build_dtype",
})


class InferenceError(Exception):
    """Raised when the parameters cannot be mapped; the message says what was seen."""


@dataclass(frozen=True)
class Slot:
    """A value supplied per case, such as the head dim or the position tensor."""

    name: str

    def describe(self) -> str:
        return "{" + self.name + "}"


@dataclass(frozen=True)
class Fixed:
    """A literal from ``--init``/``--call``."""

    value: object

    def describe(self) -> str:
        return repr(self.value)


Arg = Slot | Fixed


@dataclass(frozen=True)
class Binding:
    """Positional and keyword arguments as slots/literals."""

    args: tuple[Arg, ...] = ()
    kwargs: tuple[tuple[str, Arg], ...] = ()

    def slots(self) -> frozenset[str]:
        items = [*self.args, *(a for _, a in self.kwargs)]
        return frozenset(a.name for a in items if isinstance(a, Slot))

    def describe(self, callee: str) -> str:
        parts = [a.describe() for a in self.args]
        parts += [f"{k}={a.describe()}" for k, a in self.kwargs]
        return f"{callee}({', '.join(parts)})"


@dataclass(frozen=True)
class CallPlan:
    """How positions reach the target, and where the sequence sits in ``x``."""

    binding: Binding
    seq_axis: int | None = None  # None: x is [1, S, head_dim]; else 4-D with S at this axis

    @property
    def feeds_positions(self) -> bool:
        """True when an explicit position tensor is passed; else rows are 0..N-1."""
        return bool(self.binding.slots() & {"positions", "positions_1d"})


@dataclass(frozen=True)
class ConstructorPlan:
    binding: Binding
    fixed_head_dim: int | None = None  # a literal dim from --init narrows the matrix to it
    fixed_base: float | None = None


# --- parsing --init / --call -----------------------------------------------------------


def _split_top_level(spec: str) -> list[str]:
    """Split on commas that are not inside brackets or quotes."""
    items, depth, quote, current = [], 0, "", []
    for ch in spec:
        if quote:
            current.append(ch)
            if ch == quote:
                quote = ""
            continue
        if ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append("".join(current).strip())
            current = []
            continue
        current.append(ch)
    items.append("".join(current).strip())
    return [item for item in items if item]


def parse_value(text: str) -> Arg:
    """``{head_dim}`` and friends become slots; anything else a Python literal or a string."""
    text = text.strip()
    if text.startswith("{") and text.endswith("}") and text[1:-1] in SLOTS:
        return Slot(text[1:-1])
    try:
        return Fixed(ast.literal_eval(text))
    except (ValueError, SyntaxError):
        return Fixed(text)


def parse_assignments(spec: str | Mapping[str, object] | None,
                      *, allow_positional: bool) -> tuple[tuple[Arg, ...], dict[str, Arg]]:
    """Parse ``'dim={head_dim},base=5e5'`` (and for --call also bare ``{x}`` items)."""
    if spec is None:
        return (), {}
    if isinstance(spec, Mapping):
        return (), {
            k: parse_value(v) if isinstance(v, str) else Fixed(v) for k, v in spec.items()
        }
    positional: list[Arg] = []
    named: dict[str, Arg] = {}
    for item in _split_top_level(spec):
        key, sep, value = item.partition("=")
        if sep and key.strip().isidentifier():
            named[key.strip()] = parse_value(value)
        elif allow_positional and not named:
            positional.append(parse_value(item))
        else:
            raise InferenceError(f"cannot parse {item!r}: expected NAME=VALUE")
    for arg in [*positional, *named.values()]:
        if isinstance(arg, Fixed) and isinstance(arg.value, str) and arg.value.startswith("{"):
            known = ", ".join("{" + s + "}" for s in sorted(SLOTS))
            raise InferenceError(f"unknown placeholder {arg.value}; known: {known}")
    return tuple(positional), named


# --- signatures ------------------------------------------------------------------------


def _parameters(func: Callable[..., object], *, drop_first: bool) -> list[inspect.Parameter]:
    params = list(inspect.signature(func).parameters.values())
    if drop_first and params:
        params = params[1:]
    return params


def _accepts_var_kwargs(params: list[inspect.Parameter]) -> bool:
    return any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def _named(params: list[inspect.Parameter]) -> list[inspect.Parameter]:
    return [p for p in params
            if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)]


def _bind(params: list[inspect.Parameter], values: dict[str, Arg]) -> Binding:
    """Positional-only parameters go by position; the rest by keyword, in signature order."""
    args: list[Arg] = []
    kwargs: list[tuple[str, Arg]] = []
    for p in params:
        if p.name not in values:
            continue
        if p.kind is inspect.Parameter.POSITIONAL_ONLY:
            args.append(values[p.name])
        else:
            kwargs.append((p.name, values[p.name]))
    extra = [k for k in values if k not in {p.name for p in params}]
    kwargs += [(k, values[k]) for k in extra]
    return Binding(tuple(args), tuple(kwargs))


def _signature_text(callee: str, params: list[inspect.Parameter]) -> str:
    return f"{callee}({', '.join(str(p) for p in params)})"


def _fixed_number(arg: Arg | None) -> float | None:
    if isinstance(arg, Fixed) and isinstance(arg.value, (int, float)) and not isinstance(
        arg.value, bool
    ):
        return arg.value
    return None


def constructor_plan(cls: type, init: str | Mapping[str, object] | None = None) -> ConstructorPlan:
    """Map ``__init__`` parameters to slots: dimension, base, config; defaults left alone."""
    try:
        params = _parameters(cls, drop_first=False)  # signature(cls) already drops self
    except (TypeError, ValueError) as exc:
        raise InferenceError(f"cannot read the signature of {cls.__name__}: {exc}") from exc
    _, overrides = parse_assignments(init, allow_positional=False)
    named = _named(params)
    unknown = [k for k in overrides if k not in {p.name for p in named}]
    if unknown and not _accepts_var_kwargs(params):
        raise InferenceError(
            f"--init names {', '.join(unknown)}, which {_signature_text(cls.__name__, named)} "
            "does not take"
        )
    values: dict[str, Arg] = {}
    missing: list[str] = []
    for p in named:
        if p.name in overrides:
            values[p.name] = overrides[p.name]
        elif p.name in DIM_NAMES:
            values[p.name] = Slot("head_dim")
        elif p.name in BASE_NAMES:
            values[p.name] = Slot("base")
        elif p.name in CONFIG_NAMES:
            values[p.name] = Slot("config")
        elif p.default is not inspect.Parameter.empty:
            continue  # leave the author's default alone
        elif p.name in MAX_POSITION_NAMES:
            values[p.name] = Slot("max_positions")
        elif p.name in DTYPE_NAMES:
            values[p.name] = Slot("build_dtype")
        elif p.name in DEVICE_NAMES:
            values[p.name] = Slot("device")
        else:
            missing.append(p.name)
    for key in unknown:
        values[key] = overrides[key]
    signature = _signature_text(cls.__name__, named)
    if missing:
        example = ",".join(f"{name}=..." for name in missing)
        raise InferenceError(
            f"{signature}: no rule for required parameter(s) {', '.join(missing)} "
            "(dimension names tried: dim, head_dim, rotary_dim, kv_channels, n_elem, ...; "
            "base names: base, theta, rope_theta, rotary_base, ...; also config); "
            f"pass them with --init, e.g. --init '{example}' where a value may be "
            "{head_dim} or {base}"
        )
    slots = {a.name for a in values.values() if isinstance(a, Slot)}
    fixed_dim, fixed_base = fixed_pair(values)
    if "config" not in slots:
        if "head_dim" not in slots and fixed_dim is None:
            raise InferenceError(
                f"{signature}: found no rotary-dimension parameter (tried names such as "
                "dim, head_dim, rotary_dim, kv_channels, n_elem); "
                "name it with --init 'NAME={head_dim}'"
            )
        if "base" not in slots and fixed_base is None:
            raise InferenceError(
                f"{signature}: found no base parameter (tried base, theta, rope_theta, "
                "rotary_base, ...); name it with --init 'NAME={base}', or if the base is "
                "hard-coded pass it with --init 'NAME=VALUE' for a parameter it does take"
            )
    return ConstructorPlan(_bind(named, values), fixed_dim, fixed_base)


def _role_values(params: list[inspect.Parameter], *, function: bool) -> dict[str, str]:
    """Parameter name -> slot name for every parameter whose role the name gives away."""
    roles: dict[str, str] = {}
    for p in params:
        name = p.name
        if name in POSITION_NAMES:
            roles[name] = "positions"
        elif name in LENGTH_NAMES or (function and name in MAX_POSITION_NAMES):
            roles[name] = "seq_len"
        elif name in SEQ_DIM_NAMES:
            roles[name] = "seq_dim"
        elif name in DTYPE_NAMES:
            roles[name] = "dtype"
        elif name in DEVICE_NAMES:
            roles[name] = "device"
        elif function and name in DIM_NAMES:
            roles[name] = "head_dim"
        elif function and name in BASE_NAMES:
            roles[name] = "base"
        elif function and name in CONFIG_NAMES:
            roles[name] = "config"
    return roles


def _override_plan(params: list[inspect.Parameter], call: str | None,
                   init: str | Mapping[str, object] | None) -> CallPlan:
    positional, named = parse_assignments(call, allow_positional=True)
    _, extra = parse_assignments(init, allow_positional=False)
    values = {**extra, **named}
    binding = Binding(positional, tuple(values.items()))
    seq_axis = None
    for key, arg in values.items():
        if key in SEQ_DIM_NAMES and isinstance(arg, Fixed) and isinstance(arg.value, int):
            seq_axis = arg.value
    return CallPlan(binding, seq_axis)


def forward_plans(cls: type, call: str | None = None) -> list[CallPlan]:
    """Candidate calls of ``forward``, most specific first; ``--call`` replaces them all."""
    forward = getattr(cls, "forward", None)
    if forward is None:
        raise InferenceError(f"{cls.__name__} has no forward method")
    params = _named(_parameters(forward, drop_first=True))
    if call is not None:
        return [_override_plan(params, call, None)]
    roles = _role_values(params, function=False)
    required = [p for p in params if p.default is inspect.Parameter.empty]
    position_param = next((p for p in params if roles.get(p.name) == "positions"), None)
    length_param = next((p for p in params if roles.get(p.name) == "seq_len"), None)
    seq_dim_param = next((p for p in params if roles.get(p.name) == "seq_dim"), None)
    # The activation is the first parameter with no role (x, hidden_states, q, ...).
    x_param = next((p for p in params if p.name not in roles), None)

    def plan(feed: dict[str, Arg], seq_axis: int | None = None) -> CallPlan | None:
        values: dict[str, Arg] = {}
        for p in params:
            if p.name in feed:
                values[p.name] = feed[p.name]
            elif roles.get(p.name) in ("dtype", "device"):
                values[p.name] = Slot(roles[p.name])
            elif p.default is inspect.Parameter.empty:
                return None  # a required parameter this plan cannot fill
        return CallPlan(_bind(params, values), seq_axis)

    x_feed: dict[str, Arg] = {x_param.name: Slot("x")} if x_param is not None else {}
    candidates: list[CallPlan | None] = []
    if position_param is not None:
        for shape in ("positions", "positions_1d"):
            candidates.append(plan({**x_feed, position_param.name: Slot(shape)}))
    if length_param is not None:
        candidates.append(plan({**x_feed, length_param.name: Slot("seq_len")}))
    if seq_dim_param is not None and x_param is not None:
        default = seq_dim_param.default
        axis = default if isinstance(default, int) else 1
        feed = {**x_feed}
        if default is inspect.Parameter.empty:
            feed[seq_dim_param.name] = Fixed(axis)
        candidates.append(plan(feed, seq_axis=axis))
    # Generic shapes by arity, for names no rule knows.
    unknown_required = [p for p in required if p.name not in roles]
    if len(unknown_required) == 1:
        only = unknown_required[0].name
        for slot in ("positions", "positions_1d", "seq_len"):
            candidates.append(plan({only: Slot(slot)}))
        candidates.append(plan({only: Slot("x")}))  # x alone: length from x.shape[1]
    elif len(unknown_required) == 2:
        first, second = unknown_required[0].name, unknown_required[1].name
        for slot in ("positions", "positions_1d", "seq_len"):
            candidates.append(plan({first: Slot("x"), second: Slot(slot)}))
    elif x_param is not None and not required:
        candidates.append(plan({x_param.name: Slot("x")}))
    unique = list(dict.fromkeys(c for c in candidates if c is not None))
    if not unique:
        raise InferenceError(
            f"{_signature_text('forward', params)}: no call shape fits; "
            "give one with --call, e.g. --call '{x},position_ids={positions}'"
        )
    return unique


def function_plans(func: Callable[..., object], call: str | None = None,
                   init: str | Mapping[str, object] | None = None) -> list[CallPlan]:
    """Candidate calls of a table-building function (``--init`` values are merged in)."""
    params = _named(_parameters(func, drop_first=False))
    name = getattr(func, "__name__", "function")
    if call is not None:
        return [_override_plan(params, call, init)]
    _, overrides = parse_assignments(init, allow_positional=False)
    roles = _role_values(params, function=True)
    base_values: dict[str, Arg] = {}
    missing = []
    position_param = None
    for p in params:
        role = roles.get(p.name)
        if p.name in overrides:
            base_values[p.name] = overrides[p.name]
        elif role == "positions":
            position_param = p.name
        elif role in ("seq_len", "head_dim", "base", "dtype", "device", "config"):
            base_values[p.name] = Slot(role)
        elif p.default is inspect.Parameter.empty:
            missing.append(p.name)
    signature = _signature_text(name, params)
    if missing:
        raise InferenceError(
            f"{signature}: no rule for required parameter(s) {', '.join(missing)}; "
            "give the call with --call, e.g. --call 'dim={head_dim},end={seq_len},theta={base}'"
        )
    slots = {a.name for a in base_values.values() if isinstance(a, Slot)}
    if "config" not in slots and not ({"head_dim"} <= slots or _has_fixed(base_values, DIM_NAMES)):
        raise InferenceError(f"{signature}: found no rotary-dimension parameter; use --call")
    if "config" not in slots and not ({"base"} <= slots or _has_fixed(base_values, BASE_NAMES)):
        raise InferenceError(f"{signature}: found no base parameter; use --call")
    if position_param is None and "seq_len" not in slots:
        raise InferenceError(f"{signature}: found no length or positions parameter; use --call")
    if position_param is None:
        return [CallPlan(_bind(params, base_values))]
    return [CallPlan(_bind(params, {**base_values, position_param: Slot(shape)}))
            for shape in ("positions_1d", "positions")]


def fixed_pair(values: Mapping[str, Arg]) -> tuple[int | None, float | None]:
    """Literal head dim / base given for a recognised parameter name (narrows the matrix)."""
    dim = next((int(v) for k, a in values.items()
                if k in DIM_NAMES and (v := _fixed_number(a)) is not None), None)
    base = next((float(v) for k, a in values.items()
                 if k in BASE_NAMES and (v := _fixed_number(a)) is not None), None)
    return dim, base


def _has_fixed(values: dict[str, Arg], names: frozenset[str]) -> bool:
    return any(k in names and isinstance(a, Fixed) for k, a in values.items())
