"""(s) ``(hidden_size, num_heads, rope_theta, max_position_embeddings)``: no head-dim
parameter, the head dim is ``hidden_size // num_heads``; returns ``stack((cos, sin), -1)``
shaped ``[B, S, D/2, 2]``.

The buggy one keeps the frequencies in a frozen ``nn.Parameter`` (converted by module casts
like a buffer).
"""

import torch
from torch import nn


class ParamFreqRotary(nn.Module):
    def __init__(self, hidden_size, num_heads, rope_theta=10000.0, max_position_embeddings=2048):
        super().__init__()
        head_dim = hidden_size // num_heads
        freqs = 1.0 / (rope_theta ** (torch.arange(0, head_dim, 2).float() / head_dim))
        self.freqs = nn.Parameter(freqs, requires_grad=False)

    def forward(self, x, position_ids):
        angles = position_ids.float()[..., None] * self.freqs.float()
        return torch.stack((angles.cos(), angles.sin()), dim=-1).to(x.dtype)


class WidthHeadsRotary(nn.Module):
    def __init__(self, hidden_size, num_heads, rope_theta=10000.0, max_position_embeddings=2048):
        super().__init__()
        self.head_dim = hidden_size // num_heads
        self.rope_theta = rope_theta

    def forward(self, x, position_ids):
        steps = torch.arange(0, self.head_dim, 2, dtype=torch.float32, device=x.device)
        angles = position_ids.float()[..., None] * (1.0 / self.rope_theta ** (steps / self.head_dim))
        return torch.stack((angles.cos(), angles.sin()), dim=-1).to(x.dtype)
