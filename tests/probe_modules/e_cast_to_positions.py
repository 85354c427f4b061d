"""(e) Float32 recompute done right, then cos/sin cast to ``position_ids.dtype`` (int64).

Truncation toward zero leaves cos in {0, 1} and sin all 0: wrong even in float32.
"""

import torch
from torch import nn


class IntCastRotaryEmbedding(nn.Module):
    def __init__(self, head_dim, rope_theta=10000.0):
        super().__init__()
        self.head_dim = head_dim
        self.rope_theta = rope_theta

    def forward(self, x, position_ids):
        device = position_ids.device
        exponent = torch.arange(0, self.head_dim, 2, dtype=torch.float32, device=device)
        inv_freq = 1.0 / (self.rope_theta ** (exponent / self.head_dim))
        angles = position_ids[..., None].float() * inv_freq
        table = torch.cat((angles, angles), dim=-1)
        return table.cos().to(position_ids.dtype), table.sin().to(position_ids.dtype)
