"""(v) A constructor taking a plain dict config; forward returns (sin, cos), sin first.

The buggy one keeps ``inv_freq`` in a buffer.
"""

import torch
from torch import nn


class DictConfigBufferRotary(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        dim, base = cfg["head_dim"], cfg["rope_theta"]
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)))

    def forward(self, x, positions):
        angles = positions.float()[:, None] * self.inv_freq.float()
        emb = torch.cat((angles, angles), dim=-1)
        return emb.sin().to(x.dtype), emb.cos().to(x.dtype)


class DictConfigRotary(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        self.dim, self.base = cfg["head_dim"], cfg["rope_theta"]

    def forward(self, x, positions):
        exponent = torch.arange(0, self.dim, 2, dtype=torch.float32, device=positions.device)
        angles = positions.float()[:, None] * (1.0 / self.base ** (exponent / self.dim))
        emb = torch.cat((angles, angles), dim=-1)
        return emb.sin().to(x.dtype), emb.cos().to(x.dtype)
