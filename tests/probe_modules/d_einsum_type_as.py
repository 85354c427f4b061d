"""(d) GPT-NeoX-era einsum with ``type_as(inv_freq)`` positions, called as (x, seq_dim).

The einsum has no summed index, so autocast leaves it alone; the damage is the buffer and
the positions taking the buffer's dtype. Tables come back as [S, 1, 1, dim].
"""

import torch
from torch import nn


class NeoXRotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)))

    def forward(self, x, seq_dim=1):
        length = x.shape[seq_dim]
        steps = torch.arange(length, device=x.device).type_as(self.inv_freq)
        angles = torch.einsum("i,j->ij", steps, self.inv_freq)
        table = torch.cat((angles, angles), dim=-1).to(x.device)
        return table.cos()[:, None, None, :], table.sin()[:, None, None, :]
