"""Work out how to build and call a rotary class or function from its parameter names.

Nothing here touches torch: a binding is a recipe of slots (``head_dim``, ``positions``,
...) that ``invoke`` fills per case. Discovery (``invoke.discover``) tries the candidate
constructors and calls listed here, in order, and keeps the first whose float32 output
matches the reference.
"""

from __future__ import annotations

import ast
import inspect
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

# Parameter names by role. Order does not matter; membership does.
DIM_NAMES = frozenset({
    "dim", "head_dim", "rotary_dim", "kv_channels", "n_elem", "rotary_ndims", "dim_head",
    "d_head", "head_size", "rotary_emb_dim", "rotary_embedding_dim", "rope_dim", "rot_dim",
    "dimension", "size_per_head", "hidden_size_per_attention_head", "ndims", "features",
    "qk_rope_head_dim", "rope_head_dim", "rotary_size", "d_rotary", "embedding_dim",
    "attention_head_size", "head_dims", "n_dim", "d_k", "dims", "rotary_dims", "d",
    "d_rot", "n_rot", "rope_dims", "num_rotary_dims", "rotary_channels", "rot_dims",
    "rotary_ndim", "pos_dim", "rope_head_size",
})
BASE_NAMES = frozenset({
    "base", "theta", "rope_theta", "rotary_base", "rotary_emb_base", "rope_base", "base_freq",
    "freq_base", "rotary_theta", "rope_freq_base", "rotary_emb_theta", "base_frequency",
    "rope_local_base_freq", "frequency_base", "base_theta", "rope_base_frequency",
    "theta_base", "max_wavelength", "max_timescale", "wavelength", "rope_freq", "freq",
})
CONFIG_NAMES = frozenset({"config", "cfg", "model_config", "args", "model_args", "params",
                          "conf", "rope_config", "text_config", "hparams", "settings"})
MAX_POSITION_NAMES = frozenset({
    "max_position_embeddings", "max_positions", "max_seq_len", "max_seq_length", "max_len",
    "max_length", "block_size", "context_length", "max_seq_len_cached", "n_positions",
    "max_sequence_length", "n_ctx", "num_positions", "max_cache_len", "cache_size",
    "rope_max_seq_len", "max_seq", "max_pos", "max_position", "seq_len_cached",
    "original_max_position_embeddings", "original_max_seq_len", "original_context_length",
    "old_context_len", "original_seq_len", "pretrained_max_position_embeddings",
})
POSITION_NAMES = frozenset({
    "position_ids", "positions", "pos", "position", "pos_ids", "input_pos",
    "token_positions", "position_idx", "t", "seq_pos", "pos_idx", "position_index",
    "cache_position", "cache_positions", "position_indices", "pos_id", "positions_ids",
})
LENGTH_NAMES = frozenset({
    "seq_len", "seqlen", "seq_length", "sequence_length", "max_seq_len", "max_seq_length",
    "end", "length", "num_positions", "n_positions", "max_len", "max_length", "T",
    "num_pos", "n_pos", "npos", "num_tokens", "n_tokens", "seq_size", "max_position",
    "max_position_embeddings", "context_length", "block_size",
})
# Required layout switches (vLLM's ``is_neox_style``): either value builds a rotary the probe can read.
LAYOUT_FLAG_NAMES = frozenset({"is_neox_style", "is_neox", "neox_style", "use_neox_style", "is_neox_rope"})
SEQ_DIM_NAMES = frozenset({"seq_dim", "seq_axis", "sequence_dim", "seq_dimension"})
OFFSET_NAMES = frozenset({"offset", "start_pos", "past_len", "past_length", "start",
                          "past_key_values_length", "position_offset", "start_index"})
LAYER_TYPE_NAMES = frozenset({"layer_type", "attention_type", "layer_kind", "attn_type"})
ACTIVATION_NAMES = frozenset({
    "x", "q", "k", "v", "query", "key", "value", "hidden_states", "xq", "xk", "inputs",
    "input", "tensor", "qk", "query_states", "key_states", "value_states", "input_tensor",
    "hidden", "h", "q_or_k", "x_in", "xs", "queries", "keys", "states", "inp", "qkv",
})
# Constructor knobs the probe switches off so that the unscaled float64 reference applies.
FRACTION_NAMES = frozenset({
    "partial_rotary_factor", "rotary_pct", "rotary_percent", "rotary_percentage",
    "rotary_emb_fraction", "rotary_fraction", "rope_fraction", "rope_pct", "pct_rotary",
    "rope_partial_factor",
})
SCALE_NAMES = frozenset({
    "scaling_factor", "scale_factor", "factor", "rope_factor", "rope_scaling_factor",
    "seq_len_interpolation_factor", "interpolation_factor", "interpolate_factor",
    "position_interpolation_factor", "theta_rescale_factor", "ntk_factor", "ntk_alpha",
    "rope_ratio", "condense_ratio", "compress", "linear_scaling_factor", "rope_scale",
    "pi_factor", "yarn_factor", "attention_factor", "rope_scaling", "scaling",
})
FACTOR_LIST_NAMES = frozenset({"short_factor", "long_factor", "rescale_factors", "ext_factors",
                               "rope_factors", "freq_factors"})
WIDTH_NAMES = frozenset({"hidden_size", "d_model", "n_embd", "embed_dim", "model_dim",
                         "emb_dim", "n_embed", "width"})
HEADS_NAMES = frozenset({"num_heads", "n_heads", "num_attention_heads", "n_head", "nhead",
                         "heads", "num_head", "attention_heads", "n_kv_heads",
                         "num_key_value_heads", "num_kv_heads"})
DTYPE_NAMES = frozenset({"dtype"})
DEVICE_NAMES = frozenset({"device"})

# Slots a binding can use; ``invoke`` gives each a value per case.
SLOTS = frozenset({
    "x", "positions", "positions_1d", "seq_len", "dtype", "device", "head_dim", "base",
    "config", "max_positions", "build_dtype", "unit_factors", "layer_type",
})

# Where the sequence sits in ``x``: (rank, axis). Tried in this order for a target that
# takes an activation, until its output matches.
X_LAYOUTS: tuple[tuple[int, int], ...] = ((3, 1), (4, 2), (4, 1), (4, 0), (3, 0), (2, 0))


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
    """A literal from ``--init``/``--call``, or a value the probe chose (a neutral factor)."""

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
class ConfigChoice:
    """Which config object a ``{config}`` slot receives (see ``ropelint.probe.config``)."""

    kind: str  # "annotated" | "probe" | "layered" | "dict"
    cls: type | None = None
    raised: bool = False  # every length field covers the probed positions

    def describe(self) -> str:
        if self.kind == "annotated" and self.cls is not None:
            return f"{self.cls.__name__}() overlaid with the case's values, scaling off"
        return {"probe": "ProbeConfig", "layered": "ProbeConfig with per-layer-type "
                "rope_parameters", "dict": "a dict of config values"}.get(self.kind, self.kind)


@dataclass(frozen=True)
class CallPlan:
    """How positions reach the target, and where the sequence sits in ``x``."""

    binding: Binding
    x_layout: tuple[int, int] = (3, 1)  # (rank of x, axis of the sequence)
    fixed_layout: bool = False  # a seq_dim argument names the axis: do not vary it
    config: ConfigChoice | None = None  # functions only; classes keep it on the constructor
    dim_free: bool = False  # functions only: no dimension parameter (hard-coded)
    base_free: bool = False  # functions only: no base parameter (hard-coded)
    notes: tuple[str, ...] = ()

    @property
    def seq_axis(self) -> int:
        return self.x_layout[1]

    @property
    def feeds_positions(self) -> bool:
        """True when an explicit position tensor is passed; else rows are 0..N-1."""
        return bool(self.binding.slots() & {"positions", "positions_1d"})

    @property
    def uses_x(self) -> bool:
        return "x" in self.binding.slots()


@dataclass(frozen=True)
class ConstructorPlan:
    binding: Binding
    fixed_head_dim: int | None = None  # a literal dim from --init narrows the matrix to it
    fixed_base: float | None = None
    config: ConfigChoice | None = None
    dim_free: bool = False  # no dimension parameter: the code fixes it
    base_free: bool = False  # no base parameter: the code fixes it
    notes: tuple[str, ...] = field(default=())
    raised: bool = False  # maximum lengths raised above their defaults


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
    # A ``torch.jit.script`` function has no Python signature; the function it compiled keeps one.
    params = list(inspect.signature(getattr(func, "_torchdynamo_inline", None) or func).parameters.values())
    if drop_first and params:
        params = params[1:]
    return params


def _accepts_var_kwargs(params: list[inspect.Parameter]) -> bool:
    return any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def _named(params: list[inspect.Parameter]) -> list[inspect.Parameter]:
    return [p for p in params
            if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)]


def _required(p: inspect.Parameter) -> bool:
    return p.default is inspect.Parameter.empty


def _bind(params: list[inspect.Parameter], values: Mapping[str, Arg]) -> Binding:
    """Positional-only parameters go by position; the rest by keyword, in signature order.

    A positional-only parameter the probe leaves alone but that sits before one it fills is
    passed its own default, so later arguments keep their places.
    """
    positional_only = [p for p in params if p.kind is inspect.Parameter.POSITIONAL_ONLY]
    last = max((i for i, p in enumerate(positional_only) if p.name in values), default=-1)
    args: list[Arg] = []
    for p in positional_only[: last + 1]:
        if p.name in values:
            args.append(values[p.name])
        elif not _required(p):
            args.append(Fixed(p.default))
        else:
            raise InferenceError(f"no value for positional-only parameter {p.name}")
    kwargs: list[tuple[str, Arg]] = [
        (p.name, values[p.name]) for p in params
        if p.kind is not inspect.Parameter.POSITIONAL_ONLY and p.name in values
    ]
    known = {p.name for p in params}
    kwargs += [(k, v) for k, v in values.items() if k not in known]
    return Binding(tuple(args), tuple(kwargs))


def _signature_text(callee: str, params: list[inspect.Parameter]) -> str:
    return f"{callee}({', '.join(str(p) for p in params)})"


def _fixed_number(arg: Arg | None) -> float | None:
    if isinstance(arg, Fixed) and isinstance(arg.value, (int, float)) and not isinstance(
        arg.value, bool
    ):
        return arg.value
    return None


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _hints(func: Callable[..., object]) -> dict[str, object]:
    target = func.__init__ if inspect.isclass(func) else func  # type: ignore[misc]
    try:
        return typing.get_type_hints(target)
    except Exception:  # unresolvable string annotations, odd objects
        annotations = getattr(target, "__annotations__", {})
        return {k: v for k, v in annotations.items() if not isinstance(v, str)}


def config_choices(func: Callable[..., object], name: str) -> list[ConfigChoice]:
    """Configs to try for parameter ``name``: its annotated class first, then stand-ins."""
    hint = _hints(func).get(name)
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    options = list(typing.get_args(hint)) if union else [hint]
    choices: list[ConfigChoice] = []
    wants_dict = False
    for option in options:
        origin = typing.get_origin(option) or option
        if origin in (dict, Mapping) or (
            inspect.isclass(origin) and issubclass(origin, Mapping)
            and origin.__module__ in ("builtins", "typing", "collections.abc")
        ):
            wants_dict = True
        elif inspect.isclass(option) and option not in (object, type(None), str, int, float,
                                                          bool, list, tuple):
            choices.append(ConfigChoice("annotated", option))
    stand_ins = [ConfigChoice("probe"), ConfigChoice("layered"), ConfigChoice("dict")]
    if wants_dict:
        stand_ins.insert(0, stand_ins.pop())
    return choices + stand_ins


def _neutral(p: inspect.Parameter) -> Arg | None:
    """A value that switches a scaling/fraction knob off, or None to leave its default."""
    name, default = p.name, p.default
    if name in FRACTION_NAMES:
        if _required(p) or (_is_number(default) and default != 1):
            return Fixed(1.0)
        return None
    if name in FACTOR_LIST_NAMES:
        if _required(p) or isinstance(default, (list, tuple)):
            return Slot("unit_factors")
        return None
    if name in SCALE_NAMES:
        if name in ("rope_scaling", "scaling"):
            return Fixed(None) if _required(p) or isinstance(default, Mapping) else None
        if _required(p) or (_is_number(default) and default != 1):
            return Fixed(1.0)
    return None


def _by_elimination(values: dict[str, Arg], missing: list[str]) -> tuple[str, ...]:
    """Give unrecognised required parameters the dimension, then the base, if nothing
    else took them (``Rotary(d_model_per_head, freq)``). Discovery checks the guess: a
    wrong one matches no reading."""
    slots = {a.name for a in values.values() if isinstance(a, Slot)}
    notes: list[str] = []
    if "config" in slots:
        return ()
    for slot in ("head_dim", "base"):
        if missing and slot not in slots and not _has_fixed(
                values, DIM_NAMES if slot == "head_dim" else BASE_NAMES):
            name = missing.pop(0)
            values[name] = Slot(slot)
            notes.append(f"{name} taken as the {'head dim' if slot == 'head_dim' else 'base'}")
    return tuple(notes)


def _scaling_note(notes: list[str]) -> tuple[str, ...]:
    if not notes:
        return ()
    return (f"scaling switched off with {', '.join(notes)}: the reference is unscaled",)


def constructor_plans(cls: type,
                      init: str | Mapping[str, object] | None = None) -> list[ConstructorPlan]:
    """Map ``__init__`` parameters to slots; one plan per variant worth trying, in order.

    Dimension, base and config parameters get the case's values; scaling factors, rotary
    fractions and per-frequency factor lists are switched off; other defaults are left
    alone. Maximum-length parameters keep their defaults in the first variants (a required
    one gets a length covering every probed position); later variants raise them all to
    that length, for code whose default table cannot serve the probed positions. Each of
    these comes once per config object worth trying (``config_choices``).
    """
    try:
        params = _parameters(cls, drop_first=False)  # signature(cls) already drops self
    except (TypeError, ValueError) as exc:
        raise InferenceError(f"cannot read the signature of {cls.__name__}: {exc}") from exc
    _, overrides = parse_assignments(init, allow_positional=False)
    named = _named(params)
    names = {p.name for p in named}
    unknown = [k for k in overrides if k not in names]
    if unknown and not _accepts_var_kwargs(params):
        raise InferenceError(
            f"--init names {', '.join(unknown)}, which {_signature_text(cls.__name__, named)} "
            "does not take"
        )
    has_dim = any(p.name in DIM_NAMES for p in named)
    values: dict[str, Arg] = {}
    raised: dict[str, Arg] = {}  # length parameters whose defaults the later variants raise
    missing: list[str] = []
    notes: list[str] = []
    config_param: str | None = None
    for p in named:
        neutral = _neutral(p)
        if p.name in overrides:
            values[p.name] = overrides[p.name]
        elif p.name in DIM_NAMES:
            values[p.name] = Slot("head_dim")
        elif p.name in BASE_NAMES:
            values[p.name] = Slot("base")
        elif p.name in CONFIG_NAMES:
            values[p.name] = Slot("config")
            config_param = p.name
        elif p.name in MAX_POSITION_NAMES:
            if _required(p):
                values[p.name] = Slot("max_positions")
            else:
                raised[p.name] = Slot("max_positions")
        elif p.name in WIDTH_NAMES and not (has_dim and not _required(p)):
            values[p.name] = Slot("head_dim")  # with one head, the width is the head dim
        elif p.name in HEADS_NAMES:
            values[p.name] = Fixed(1)  # one head: width // heads is the head dim
        elif neutral is not None:
            values[p.name] = neutral
            notes.append(f"{p.name}={neutral.describe()}")
        elif not _required(p):
            continue  # leave the author's default alone
        elif p.name in DTYPE_NAMES:
            values[p.name] = Slot("build_dtype")
        elif p.name in LAYOUT_FLAG_NAMES:
            values[p.name] = Fixed(True)  # vLLM's required ``is_neox_style``: the reading detects the layout anyway
            notes.append(f"{p.name}=True")
        elif p.name in DEVICE_NAMES:
            values[p.name] = Slot("device")
        else:
            missing.append(p.name)
    for key in unknown:
        values[key] = overrides[key]
    guessed = _by_elimination(values, missing)
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
    dim_free = "config" not in slots and "head_dim" not in slots and fixed_dim is None
    base_free = "config" not in slots and "base" not in slots and fixed_base is None
    scaled = _scaling_note(notes) + guessed
    choices: list[ConfigChoice | None] = (
        list(config_choices(cls, config_param)) if config_param else [None])
    plans = [ConstructorPlan(_bind(named, values), fixed_dim, fixed_base, choice, dim_free,
                             base_free, scaled) for choice in choices]
    if raised or config_param:
        note = (f"{', '.join(raised)} raised to cover every probed position" if raised
                else "config lengths raised to cover every probed position")
        plans += [
            ConstructorPlan(_bind(named, {**values, **raised}), fixed_dim, fixed_base,
                            replace(choice, raised=True) if choice else None, dim_free,
                            base_free, (*scaled, note), raised=True)
            for choice in choices
        ]
    return plans


def _role_values(params: list[inspect.Parameter], *, function: bool) -> dict[str, str]:
    """Parameter name -> role for every parameter whose role the name gives away."""
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
        elif name in OFFSET_NAMES:
            roles[name] = "offset"
        elif name in LAYER_TYPE_NAMES:
            roles[name] = "layer_type"
        elif function and name in DIM_NAMES:
            roles[name] = "head_dim"
        elif function and name in BASE_NAMES:
            roles[name] = "base"
        elif function and name in CONFIG_NAMES:
            roles[name] = "config"
        elif function and (name in FRACTION_NAMES or name in SCALE_NAMES
                           or name in FACTOR_LIST_NAMES):
            roles[name] = "neutral"
        elif _looks_positional(name):
            roles[name] = "positions"
        elif _looks_like_activation(name):
            roles[name] = "x"
    return roles


def _looks_positional(name: str) -> bool:
    """``pos_idx``, ``query_positions``, ``position``...: position tensors by the look."""
    lower = name.lower()
    if "emb" in lower or lower in MAX_POSITION_NAMES or lower in LENGTH_NAMES:
        return False
    return "position" in lower or lower.startswith("pos_") or lower.endswith("_pos")


def _looks_like_activation(name: str) -> bool:
    """``x``, ``q``, ``hidden_states``, ``query_layer``, ``key_rot``...: activations."""
    lower = name.lower()
    return lower in ACTIVATION_NAMES or lower.endswith(("_states", "_layer", "_rot")) or (
        lower.startswith(("query", "key", "q_", "k_", "x_")) and "len" not in lower
        and "dim" not in lower)


def _override_plan(params: list[inspect.Parameter], call: str | None,
                   init: str | Mapping[str, object] | None) -> CallPlan:
    positional, named = parse_assignments(call, allow_positional=True)
    _, extra = parse_assignments(init, allow_positional=False)
    values = {**extra, **named}
    binding = Binding(positional, tuple(values.items()))
    layout = (3, 1)
    fixed_layout = False
    for key, arg in values.items():
        if key in SEQ_DIM_NAMES and isinstance(arg, Fixed) and isinstance(arg.value, int):
            layout, fixed_layout = (4, arg.value), True
    config = ConfigChoice("probe") if "config" in binding.slots() else None
    return CallPlan(binding, layout, fixed_layout, config)


def _auto_value(p: inspect.Parameter, role: str | None) -> Arg | None:
    """Values for parameters that are not the point of a plan (dtype, offsets, layer type)."""
    if role in ("dtype", "device"):
        return Slot(role)
    if role == "offset" and _required(p):
        return Fixed(0)
    if role == "layer_type" and (_required(p) or p.default is None):
        return Slot("layer_type")
    return None


def forward_plans(cls: type, call: str | None = None) -> list[CallPlan]:
    """Candidate calls of ``forward``, most specific first; ``--call`` replaces them all."""
    forward = getattr(cls, "forward", None)
    if forward is None:
        raise InferenceError(f"{cls.__name__} has no forward method")
    params = _named(_parameters(forward, drop_first=True))
    if call is not None:
        return [_override_plan(params, call, None)]
    roles = _role_values(params, function=False)
    position_param = next((p for p in params if roles.get(p.name) == "positions"), None)
    length_param = next((p for p in params if roles.get(p.name) == "seq_len"), None)
    seq_dim_param = next((p for p in params if roles.get(p.name) == "seq_dim"), None)
    activations = [p for p in params if roles.get(p.name) == "x"]
    unknown_required = [p for p in params if _required(p) and p.name not in roles]

    def plan(feed: dict[str, Arg], layout: tuple[int, int] = (3, 1),
             fixed_layout: bool = False) -> CallPlan | None:
        values: dict[str, Arg] = {}
        for p in params:
            role = roles.get(p.name)
            auto = _auto_value(p, role)
            if p.name in feed:
                values[p.name] = feed[p.name]
            elif auto is not None:
                values[p.name] = auto
            elif _required(p) and role in ("positions", "seq_len", "x"):
                # Required alongside the parameter the plan is about: (x, position_ids,
                # seq_len) gets both; explicit positions and a covering length agree.
                values[p.name] = Slot(role)
            elif _required(p):
                return None  # a required parameter this plan cannot fill
        return CallPlan(_bind(params, values), layout, fixed_layout)

    x_feed: dict[str, Arg] = {p.name: Slot("x") for p in activations}
    candidates: list[CallPlan | None] = []
    if position_param is not None:
        for shape in ("positions", "positions_1d"):
            candidates.append(plan({**x_feed, position_param.name: Slot(shape)}))
    if length_param is not None:
        candidates.append(plan({**x_feed, length_param.name: Slot("seq_len")}))
    if seq_dim_param is not None and activations:
        default = seq_dim_param.default
        axis = default if isinstance(default, int) and not isinstance(default, bool) else 1
        feed = {**x_feed}
        if _required(seq_dim_param):
            feed[seq_dim_param.name] = Fixed(axis)
        rank = 4 if axis >= 0 else 3
        candidates.append(plan(feed, (rank, axis % rank), fixed_layout=True))
    if activations:
        candidates.append(plan(x_feed))  # the length comes from x, the positions are 0..N-1
    # Generic shapes by arity, for names no rule knows.
    if len(unknown_required) == 1:
        only = unknown_required[0].name
        for slot in ("positions", "positions_1d", "seq_len"):
            candidates.append(plan({**x_feed, only: Slot(slot)}))
        candidates.append(plan({**x_feed, only: Slot("x")}))  # x alone: length from x
    elif len(unknown_required) == 2 and not activations:
        first, second = unknown_required[0].name, unknown_required[1].name
        for slot in ("positions", "positions_1d", "seq_len"):
            candidates.append(plan({first: Slot("x"), second: Slot(slot)}))
        candidates.append(plan({first: Slot("x"), second: Slot("x")}))  # (q, k)
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
    notes: list[str] = []
    position_param = None
    config_param = None
    for p in params:
        role = roles.get(p.name)
        auto = _auto_value(p, role)
        if p.name in overrides:
            base_values[p.name] = overrides[p.name]
        elif role == "positions":
            position_param = p.name
        elif role in ("seq_len", "head_dim", "base", "x"):
            base_values[p.name] = Slot(role)
        elif role == "config":
            base_values[p.name] = Slot("config")
            config_param = p.name
        elif role == "neutral":
            neutral = _neutral(p)
            if neutral is not None:
                base_values[p.name] = neutral
                notes.append(f"{p.name}={neutral.describe()}")
        elif auto is not None:
            base_values[p.name] = auto
        elif _required(p):
            missing.append(p.name)
    signature = _signature_text(name, params)
    if missing:
        raise InferenceError(
            f"{signature}: no rule for required parameter(s) {', '.join(missing)}; "
            "give the call with --call, e.g. --call 'dim={head_dim},end={seq_len},theta={base}'"
        )
    slots = {a.name for a in base_values.values() if isinstance(a, Slot)}
    dim_free = "config" not in slots and not (
        "head_dim" in slots or _has_fixed(base_values, DIM_NAMES))
    base_free = "config" not in slots and not (
        "base" in slots or _has_fixed(base_values, BASE_NAMES))
    if position_param is None and "seq_len" not in slots:
        raise InferenceError(f"{signature}: found no length or positions parameter; use --call")
    scaled = _scaling_note(notes)
    feeds = [base_values] if position_param is None else [
        {**base_values, position_param: Slot(shape)} for shape in ("positions_1d", "positions")
    ]
    choices: list[ConfigChoice | None] = (
        list(config_choices(func, config_param)) if config_param else [None])
    return [CallPlan(_bind(params, feed), config=choice, dim_free=dim_free,
                     base_free=base_free, notes=scaled)
            for feed in feeds for choice in choices]


def fixed_pair(values: Mapping[str, Arg]) -> tuple[int | None, float | None]:
    """Literal head dim / base given for a recognised parameter name (narrows the matrix)."""
    dim = next((int(v) for k, a in values.items()
                if k in DIM_NAMES and (v := _fixed_number(a)) is not None), None)
    base = next((float(v) for k, a in values.items()
                 if k in BASE_NAMES and (v := _fixed_number(a)) is not None), None)
    return dim, base


def _has_fixed(values: dict[str, Arg], names: frozenset[str]) -> bool:
    return any(k in names and isinstance(a, Fixed) for k, a in values.items())
