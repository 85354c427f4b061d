"""A minimal model-config stand-in for rotary classes whose constructor takes ``config``."""

from __future__ import annotations

from typing import Any


class ProbeConfig:
    """Attributes that rotary modules commonly read from a model config.

    Unknown attributes raise ``AttributeError`` on purpose: code written as
    ``getattr(config, "partial_rotary_factor", 1.0)`` must get its own default, not ``None``.
    """

    def __init__(self, head_dim: int, base: float, *, num_heads: int = 8,
                 max_positions: int = 4096) -> None:
        hidden = head_dim * num_heads
        self.head_dim = head_dim
        self.hidden_size = hidden
        self.num_attention_heads = num_heads
        self.num_key_value_heads = num_heads
        self.max_position_embeddings = max_positions
        self.rope_theta = base
        self.rope_scaling = None
        self.rope_parameters = {"rope_type": "default", "rope_theta": base}
        self.partial_rotary_factor = 1.0
        # GPT-NeoX / Megatron / GPT-2 / Meta spellings of the same facts.
        self.rotary_emb_base = base
        self.rotary_base = base
        self.rotary_pct = 1.0
        self.rotary_percent = 1.0
        self.rotary_dim = head_dim
        self.kv_channels = head_dim
        self.n_embd = hidden
        self.n_head = num_heads
        self.n_heads = num_heads
        self.dim = hidden  # Meta's ModelArgs.dim is the model width; head_dim = dim // n_heads
        self.max_seq_len = max_positions
        self.seq_length = max_positions
        self.model_type = "probe"

    def get(self, name: str, default: Any = None) -> Any:
        return getattr(self, name, default)

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))

    def __repr__(self) -> str:
        return f"ProbeConfig(head_dim={self.head_dim}, rope_theta={self.rope_theta:g})"
