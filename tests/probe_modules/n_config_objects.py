"""(n) Config-built rotaries: an annotated dataclass config with ``head_dim`` unset (so the
head dim is ``hidden_size // num_attention_heads``) and ``partial_rotary_factor``, and an
unannotated config read with ``getattr`` defaults.

The buggy one forms the phase with a matmul, which autocast runs in 16 bits (it fails every
autocast case, its float32 controls under autocast too); the correct one is elementwise.
"""

from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class TinyConfig:
    hidden_size: int = 512
    num_attention_heads: int = 8
    head_dim: int | None = None
    rope_theta: float = 10000.0
    partial_rotary_factor: float = 0.5
    max_position_embeddings: int = 2048


def _rotary_dim(config):
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    return int(head_dim * getattr(config, "partial_rotary_factor", 1.0))


class ConfigMatmulRotary(nn.Module):
    def __init__(self, config: TinyConfig, device=None):
        super().__init__()
        self.dim = _rotary_dim(config)
        self.base = config.rope_theta

    def forward(self, x, position_ids):
        steps = torch.arange(0, self.dim, 2, dtype=torch.float32, device=x.device)
        inv_freq = 1.0 / (self.base ** (steps / self.dim))
        freq_col = inv_freq[None, :, None].expand(position_ids.shape[0], -1, 1)
        angles = (freq_col @ position_ids[:, None, :].float()).transpose(1, 2)
        emb = torch.cat((angles, angles), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


class ConfigRotary(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dim = _rotary_dim(config)
        self.base = getattr(config, "rope_theta", 10000.0)

    def forward(self, x, position_ids):
        steps = torch.arange(0, self.dim, 2, dtype=torch.float32, device=x.device)
        inv_freq = 1.0 / (self.base ** (steps / self.dim))
        angles = position_ids[:, :, None].float() * inv_freq[None, None, :]
        emb = torch.cat((angles, angles), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)
