"""Model-config stand-ins for rotary classes whose constructor takes ``config``.

Three kinds of config reach a constructor, tried in this order by discovery:

- the class named by the parameter's annotation (``config: Phi3Config``), built with its own
  defaults and then overlaid with the probe's values (``overlay``);
- ``ProbeConfig``, a plain object with every common spelling of the same facts;
- ``ProbeConfig(layered=True)``: per-layer-type ``rope_parameters`` (``{"full_attention":
  {...}, "sliding_attention": {...}}``) with ``layer_types``, as Gemma-3-style code reads them.

Every config describes ONE head of ``head_dim`` channels (one attention head, so ``hidden_size
// num_attention_heads``, ``dim // n_heads`` and ``head_dim`` all agree), the case's base for
every layer type, a maximum length that covers every probed position, and no scaling: rope
types become ``"default"``, scaling factors 1, per-frequency factor lists all ones, rotary
fractions 1. The probe measures precision against the unscaled float64 reference.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Mapping
from typing import Any

# Names, by role, under which configs (and rope dicts) keep the facts the probe sets.
HEAD_DIM_FIELDS = ("head_dim", "rotary_dim", "rotary_emb_dim", "kv_channels", "qk_rope_head_dim",
                   "dim_head", "d_head", "head_size", "attention_head_size", "rope_dim",
                   "rotary_ndims", "size_per_head", "hidden_size_per_attention_head")
WIDTH_FIELDS = ("hidden_size", "n_embd", "d_model", "embed_dim", "model_dim", "dim", "n_embed",
                "emb_dim", "hidden_dim_attn")
HEADS_FIELDS = ("num_attention_heads", "num_key_value_heads", "n_head", "n_heads", "num_heads",
                "n_kv_heads", "num_kv_heads", "nhead", "n_kv_head", "heads", "attention_heads")
BASE_FIELDS = ("rope_theta", "rotary_emb_base", "rotary_embedding_base", "rotary_base", "rope_base", "base",
               "theta", "rotary_theta", "rope_freq_base", "rotary_emb_theta", "rope_local_base_freq",
               "local_rope_theta", "global_rope_theta", "rope_global_base_freq", "base_freq")
LENGTH_FIELDS = ("max_position_embeddings", "max_seq_len", "max_seq_length", "seq_length",
                 "n_positions", "n_ctx", "block_size", "max_sequence_length", "context_length",
                 "max_len", "max_length", "original_max_position_embeddings",
                 "original_max_seq_len", "original_context_length", "old_context_len",
                 "max_seq_len_cached", "rope_max_seq_len")
FRACTION_FIELDS = ("partial_rotary_factor", "rotary_pct", "rotary_percent", "rotary_percentage",
                   "rotary_emb_fraction", "rotary_fraction", "rope_fraction", "rope_pct",
                   "rope_partial_factor")
# Scalar scaling knobs: 1 means "no scaling" for every one of them.
SCALE_FIELDS = ("factor", "scaling_factor", "scale_factor", "rope_factor", "rope_scaling_factor",
                "seq_len_interpolation_factor", "interpolation_factor", "interpolate_factor",
                "position_interpolation_factor", "theta_rescale_factor", "ntk_factor",
                "ntk_alpha", "rope_ratio", "condense_ratio", "compress", "attention_factor",
                "linear_scaling_factor", "rope_scale")
# Per-frequency factor lists (LongRoPE): all ones is "no scaling".
FACTOR_LIST_FIELDS = ("short_factor", "long_factor", "rescale_factors", "ext_factors",
                      "rope_factors", "freq_factors")
ROPE_DICT_FIELDS = ("rope_scaling", "rope_parameters", "rope_config", "rotary_config",
                    "rope_params")
TYPE_KEYS = ("rope_type", "type")
DEFAULT_LAYER_TYPES = ("full_attention", "sliding_attention")
STANDIN_LENGTH = 4096  # maximum length of the stand-in configs unless raised


def neutral_rope_dict(value: Mapping[str, Any], head_dim: int, base: float,
                      length: int | None) -> dict[str, Any]:
    """A rope-parameters dict with the case's base and every scaling knob switched off.

    A dict whose values are dicts is a per-layer-type table: each entry is neutralised.
    """
    if value and all(isinstance(v, Mapping) for v in value.values()):
        return {k: neutral_rope_dict(v, head_dim, base, length) for k, v in value.items()}
    out: dict[str, Any] = dict(value)
    for key, item in value.items():
        if key in TYPE_KEYS:
            out[key] = "default"
        elif key in BASE_FIELDS:
            out[key] = base
        elif key in SCALE_FIELDS and _is_number(item):
            out[key] = 1.0
        elif key in FACTOR_LIST_FIELDS and isinstance(item, (list, tuple)):
            out[key] = [1.0] * (head_dim // 2)
        elif key in FRACTION_FIELDS and _is_number(item):
            out[key] = 1.0
        elif key in LENGTH_FIELDS and _is_number(item) and length is not None:
            out[key] = length
        elif key in HEAD_DIM_FIELDS and _is_number(item):
            out[key] = head_dim
    return out


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class ProbeConfig:
    """Attributes that rotary modules commonly read from a model config.

    Unknown attributes raise ``AttributeError`` on purpose: code written as
    ``getattr(config, "partial_rotary_factor", 1.0)`` must get its own default, not ``None``.
    Item access (``config["rope_theta"]``), ``in`` and ``.get`` work too, for code that treats
    its config as a dict.
    """

    def __init__(self, head_dim: int, base: float, *, max_positions: int = 4096,
                 layered: bool = False) -> None:
        # One attention head: every way of deriving the head dim gives ``head_dim``.
        for name in HEAD_DIM_FIELDS:
            setattr(self, name, head_dim)
        for name in WIDTH_FIELDS:
            setattr(self, name, head_dim)
        for name in HEADS_FIELDS:
            setattr(self, name, 1)
        for name in BASE_FIELDS:
            setattr(self, name, base)
        for name in LENGTH_FIELDS:
            setattr(self, name, max_positions)
        for name in FRACTION_FIELDS:
            setattr(self, name, 1.0)
        self.rope_scaling = None
        if layered:
            self.layer_types = list(DEFAULT_LAYER_TYPES)
            self.rope_parameters = {
                layer: {"rope_type": "default", "rope_theta": base} for layer in self.layer_types
            }
        else:
            self.rope_parameters = {"rope_type": "default", "rope_theta": base}
        self.model_type = "probe"
        self._layered = layered

    def get(self, name: str, default: Any = None) -> Any:
        return getattr(self, name, default)

    def __getitem__(self, name: str) -> Any:
        try:
            return getattr(self, name)
        except AttributeError:
            raise KeyError(name) from None

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and not name.startswith("_") and hasattr(self, name)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if not k.startswith("_")}

    def __repr__(self) -> str:
        kind = ", per layer type" if self._layered else ""
        return f"ProbeConfig(head_dim={self.head_dim}, rope_theta={self.rope_theta:g}{kind})"


def _fields_of(obj: object) -> list[str]:
    if isinstance(obj, Mapping):
        return [k for k in obj if isinstance(k, str)]
    names = set()
    if dataclasses.is_dataclass(obj):
        names.update(f.name for f in dataclasses.fields(obj))
    names.update(k for k in getattr(obj, "__dict__", {}) if not k.startswith("_"))
    return sorted(names)


def _has(obj: object, name: str) -> bool:
    if isinstance(obj, Mapping):
        return name in obj
    try:
        return hasattr(obj, name)
    except Exception:  # a property that raises
        return False


def _get(obj: object, name: str) -> Any:
    return obj[name] if isinstance(obj, Mapping) else getattr(obj, name)


def _set(obj: object, name: str, value: Any) -> None:
    if isinstance(obj, dict):
        obj[name] = value
        return
    try:
        setattr(obj, name, value)
    except (AttributeError, TypeError, dataclasses.FrozenInstanceError):
        object.__setattr__(obj, name, value)


ORIGINAL_LENGTH_FIELDS = ("original_max_position_embeddings", "original_max_seq_len",
                          "original_context_length")


def overlay(config: Any, head_dim: int, base: float, length: int | None) -> Any:
    """Write the probe's facts into an existing config object (or dict), in place.

    Only names the config already has are set, so its own defaults for everything else stay
    and ``getattr(config, name, default)`` keeps working as its author meant. With
    ``length`` None the config's own maximum lengths stay too, except that an "original"
    length is made equal to the maximum (a context-extension ratio of 1, so no scaling).
    """
    probe = ProbeConfig(head_dim, base, max_positions=length or 1)
    for name, value in probe.to_dict().items():
        if name in ROPE_DICT_FIELDS or name in ("layer_types", "model_type"):
            continue
        if length is None and name in LENGTH_FIELDS:
            continue
        if _has(config, name):
            _set(config, name, value)
    if length is None and _has(config, "max_position_embeddings"):
        for name in ORIGINAL_LENGTH_FIELDS:
            if _has(config, name) and _is_number(_get(config, name)):
                _set(config, name, _get(config, "max_position_embeddings"))
    for name in _fields_of(config):
        value = _get(config, name)
        if name in ROPE_DICT_FIELDS and isinstance(value, Mapping):
            _set(config, name, neutral_rope_dict(value, head_dim, base, length))
        elif name in SCALE_FIELDS and _is_number(value):
            _set(config, name, 1.0)
        elif name in FACTOR_LIST_FIELDS and isinstance(value, (list, tuple)):
            _set(config, name, [1.0] * (head_dim // 2))
    return config


def build_annotated(cls: type, head_dim: int, base: float, length: int | None) -> Any:
    """An instance of the config class a constructor names, overlaid with the probe's facts.

    Built with its own defaults; required fields the probe knows by name are filled in.
    ``length`` None keeps the class's own maximum lengths (see ``overlay``).
    """
    probe = ProbeConfig(head_dim, base, max_positions=length or STANDIN_LENGTH).to_dict()
    kwargs: dict[str, Any] = {}
    try:
        params = inspect.signature(cls).parameters.values()
    except (TypeError, ValueError):
        params = []  # type: ignore[assignment]
    for p in params:
        if p.default is inspect.Parameter.empty and p.kind in (
            inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY
        ):
            if p.name not in probe:
                raise TypeError(f"{cls.__name__} needs {p.name}, which the probe cannot supply")
            kwargs[p.name] = probe[p.name]
    config = cls(**kwargs)
    return overlay(config, head_dim, base, length)
