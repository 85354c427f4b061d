"""(p) Apply-style rotary: forward(q, k, position_ids) rotates q and k ([B, S, H, D]) with
GPT-J interleaved pairs and returns them; no cos/sin table comes out.

The buggy one reads ``inv_freq`` from a buffer; the correct one rebuilds it in float32.
Both rotate in float32 and cast back to the activation dtype.
"""

import torch
from torch import nn


def rotate_every_two(x):
    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def _rotate(t, cos, sin):
    return (t.float() * cos + rotate_every_two(t.float()) * sin).to(t.dtype)


class InterleavedApplyBuffer(nn.Module):
    def __init__(self, dim, base=10000):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, q, k, position_ids):
        angles = position_ids[..., None].float() * self.inv_freq.float()  # [B, S, D/2]
        cos = angles.cos().repeat_interleave(2, dim=-1)[:, :, None, :]
        sin = angles.sin().repeat_interleave(2, dim=-1)[:, :, None, :]
        return _rotate(q, cos, sin), _rotate(k, cos, sin)


class InterleavedApply(nn.Module):
    def __init__(self, dim, base=10000):
        super().__init__()
        self.dim, self.base = dim, base

    def forward(self, q, k, position_ids):
        exponent = torch.arange(0, self.dim, 2, dtype=torch.float32, device=q.device) / self.dim
        inv_freq = 1.0 / (self.base**exponent)
        angles = position_ids[..., None].float() * inv_freq
        cos = angles.cos().repeat_interleave(2, dim=-1)[:, :, None, :]
        sin = angles.sin().repeat_interleave(2, dim=-1)[:, :, None, :]
        return _rotate(q, cos, sin), _rotate(k, cos, sin)
