"""(k) Keyword-only constructor and positions; one stacked table ``[2, 1, S, rotary_dim]``.

The buggy one casts the positions to the activation dtype before the product (bfloat16
rounds 257 to 256, float16 2049 to 2048): only the cases whose module stays 16-bit fail.
"""

import torch
from torch import nn


def _inv_freq(rotary_dim, theta, device):
    exponent = torch.arange(0, rotary_dim, 2, dtype=torch.float32, device=device) / rotary_dim
    return 1.0 / (theta**exponent)


class KwOnlyStackedPositionCast(nn.Module):
    def __init__(self, *, rotary_dim, theta=10000.0):
        super().__init__()
        self.rotary_dim, self.theta = rotary_dim, theta
        self.scale = nn.Parameter(torch.ones(()))  # carries the model dtype

    def forward(self, x, *, positions):
        pos = positions.to(self.scale.dtype)
        angles = pos[..., None] * _inv_freq(self.rotary_dim, self.theta, positions.device)
        emb = torch.cat((angles, angles), dim=-1)
        return torch.stack((emb.cos(), emb.sin()), dim=0).to(x.dtype)[:, None]


class KwOnlyStacked(nn.Module):
    def __init__(self, *, rotary_dim, theta=10000.0):
        super().__init__()
        self.rotary_dim, self.theta = rotary_dim, theta

    def forward(self, x, *, positions):
        angles = positions.float()[..., None] * _inv_freq(self.rotary_dim, self.theta,
                                                          positions.device)
        emb = torch.cat((angles, angles), dim=-1)
        return torch.stack((emb.cos(), emb.sin()), dim=0).to(x.dtype)[:, None]
