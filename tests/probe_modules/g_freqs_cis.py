"""(g) Meta-style complex ``freqs_cis``.

The function (float32 positions, torch.outer, complex64 result) is correct. The class
keeps the same table in a complex buffer, which ``module.to(torch.bfloat16)`` turns real.
"""

import torch
from torch import nn


def precompute_freqs_cis(dim: int, end: int, theta: float = 10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    steps = torch.arange(end, device=freqs.device, dtype=torch.float32)
    angles = torch.outer(steps, freqs)
    return torch.polar(torch.ones_like(angles), angles)


class ComplexBufferRotary(nn.Module):
    def __init__(self, dim, max_seq_len=4096, theta=10000.0):
        super().__init__()
        self.dim, self.theta = dim, theta
        self.register_buffer("freqs_cis", precompute_freqs_cis(dim, max_seq_len, theta),
                             persistent=False)

    def forward(self, position_ids):
        needed = int(position_ids.max()) + 1
        if needed > self.freqs_cis.shape[0]:
            # Grow the table in whatever dtype the buffer has now.
            grown = precompute_freqs_cis(self.dim, needed, self.theta)
            grown = grown.to(device=self.freqs_cis.device, dtype=self.freqs_cis.dtype)
            self.register_buffer("freqs_cis", grown, persistent=False)
        return self.freqs_cis[position_ids]
