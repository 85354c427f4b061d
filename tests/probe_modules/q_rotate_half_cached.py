"""(q) Apply-style rotary without positions: forward(q, k) on [B, H, S, D] rotates by
positions 0..S-1 with rotate-half pairs.

The buggy one caches cos/sin buffers for ``max_position_embeddings`` and regrows them from
its ``inv_freq`` buffer with positions typed like it; the correct one recomputes in float32.
"""

import torch
from torch import nn


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class CachedApplyRotary(nn.Module):
    def __init__(self, head_dim, max_position_embeddings=512, rope_theta=10000.0):
        super().__init__()
        inv_freq = 1.0 / (rope_theta ** (torch.arange(0, head_dim, 2).float() / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self._grow(max_position_embeddings)

    def _grow(self, length):
        t = torch.arange(length, device=self.inv_freq.device, dtype=self.inv_freq.dtype)
        freqs = torch.outer(t, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos_cached", emb.cos(), persistent=False)
        self.register_buffer("sin_cached", emb.sin(), persistent=False)

    def forward(self, q, k):
        length = q.shape[-2]
        if length > self.cos_cached.shape[0]:
            self._grow(length)
        cos = self.cos_cached[:length].to(q.dtype)
        sin = self.sin_cached[:length].to(q.dtype)
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


class RecomputeApplyRotary(nn.Module):
    def __init__(self, head_dim, max_position_embeddings=512, rope_theta=10000.0):
        super().__init__()
        self.head_dim, self.rope_theta = head_dim, rope_theta

    def forward(self, q, k):
        length = q.shape[-2]
        steps = torch.arange(0, self.head_dim, 2, dtype=torch.float32, device=q.device)
        inv_freq = 1.0 / (self.rope_theta ** (steps / self.head_dim))
        t = torch.arange(length, dtype=torch.float32, device=q.device)
        freqs = t[:, None] * inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()

        def rotate(x):
            return (x.float() * cos + rotate_half(x.float()) * sin).to(x.dtype)

        return rotate(q), rotate(k)
