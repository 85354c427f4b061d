"""(c) Elementwise phase, no guard, inv_freq buffer: transformers 5.x style.

Autocast-proof, but the buffer is still converted by ``module.to(bfloat16)``.
Built from a config object, like the real thing.
"""

import torch
from torch import nn


class ConfigRotaryEmbedding(nn.Module):
    def __init__(self, config, device=None):
        super().__init__()
        base = config.rope_parameters["rope_theta"]
        head_dim = getattr(config, "head_dim", None)
        dim = int(head_dim or config.hidden_size // config.num_attention_heads)
        dim = int(dim * getattr(config, "partial_rotary_factor", 1.0))
        steps = torch.arange(0, dim, 2, dtype=torch.int64).to(device=device, dtype=torch.float)
        inv_freq = 1.0 / (base ** (steps / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.attention_scaling = 1.0

    @torch.no_grad()
    def forward(self, x, position_ids):
        angles = position_ids[..., None].float() * self.inv_freq.float()
        table = torch.cat((angles, angles), dim=-1)
        cos = table.cos() * self.attention_scaling
        sin = table.sin() * self.attention_scaling
        return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)
