"""(j) Positional-only constructor and forward: ``__init__(self, dim, base, /)``.

The buggy one keeps ``inv_freq`` in a buffer (rounded by ``module.to(bfloat16)``); the
correct one rebuilds it in float32 inside forward. Both return half-split (cos, sin).
"""

import torch
from torch import nn


class PosOnlyBufferRotary(nn.Module):
    def __init__(self, dim, base=10000.0, /):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x, position_ids, /):
        angles = position_ids[..., None].float() * self.inv_freq.float()
        emb = torch.cat((angles, angles), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


class PosOnlyRotary(nn.Module):
    def __init__(self, dim, base=10000.0, /):
        super().__init__()
        self.dim, self.base = dim, base

    def forward(self, x, position_ids, /):
        steps = torch.arange(0, self.dim, 2, dtype=torch.float32, device=position_ids.device)
        inv_freq = 1.0 / (self.base ** (steps / self.dim))
        angles = position_ids[..., None].float() * inv_freq
        emb = torch.cat((angles, angles), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)
