"""(o) A module returning complex ``freqs_cis`` for the positions it is given.

The buggy one keeps ``inv_freq`` in a buffer; the correct one rebuilds it per call.
"""

import torch
from torch import nn


class ComplexBufferFreqRotary(nn.Module):
    def __init__(self, head_dim, rope_theta=10000.0):
        super().__init__()
        freqs = 1.0 / (rope_theta ** (torch.arange(0, head_dim, 2).float() / head_dim))
        self.register_buffer("freqs", freqs, persistent=False)

    def forward(self, position_ids):
        angles = position_ids.float()[..., None] * self.freqs.float()
        return torch.polar(torch.ones_like(angles), angles)


class ComplexRotary(nn.Module):
    def __init__(self, head_dim, rope_theta=10000.0):
        super().__init__()
        self.head_dim, self.rope_theta = head_dim, rope_theta

    def forward(self, position_ids):
        exponent = torch.arange(0, self.head_dim, 2, dtype=torch.float32) / self.head_dim
        freqs = (1.0 / (self.rope_theta**exponent)).to(position_ids.device)
        angles = position_ids.float()[..., None] * freqs
        return torch.polar(torch.ones_like(angles), angles)
