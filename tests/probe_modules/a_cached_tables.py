"""(a) Cached cos/sin tables, transformers-4.37 style.

Bug: inv_freq is a floating buffer and the table positions are built with
``arange(dtype=self.inv_freq.dtype)``, so after ``module.to(bfloat16)`` both go 16-bit.
"""

import torch
from torch import nn


class CachedRotaryEmbedding(nn.Module):
    def __init__(self, dim, max_position_embeddings=2048, base=10000, device=None):
        super().__init__()
        self.dim = dim
        self.base = base
        exponent = torch.arange(0, dim, 2).float().to(device) / dim
        self.register_buffer("inv_freq", 1.0 / (base**exponent), persistent=False)
        self._build_tables(max_position_embeddings, self.inv_freq.device, torch.get_default_dtype())

    def _build_tables(self, length, device, dtype):
        self.cached_length = length
        steps = torch.arange(length, device=device, dtype=self.inv_freq.dtype)
        angles = torch.outer(steps, self.inv_freq)
        table = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos_table", table.cos().to(dtype), persistent=False)
        self.register_buffer("sin_table", table.sin().to(dtype), persistent=False)

    def forward(self, x, seq_len=None):
        if seq_len > self.cached_length:
            self._build_tables(seq_len, x.device, x.dtype)
        return (
            self.cos_table[:seq_len].to(dtype=x.dtype),
            self.sin_table[:seq_len].to(dtype=x.dtype),
        )
