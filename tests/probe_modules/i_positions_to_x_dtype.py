"""(i) Float32 inverse frequencies, but positions cast to the activation dtype.

Only the positions are damaged, so the failure starts exactly where the dtype stops being
exact: 257 in bfloat16 (257 rounds to 256), 2049 in float16.
"""

import torch
from torch import nn


class PositionCastRotary(nn.Module):
    def __init__(self, dim, base=10000.0):
        super().__init__()
        self.dim = dim
        self.base = base

    def forward(self, hidden_states, position_ids):
        exponent = torch.arange(0, self.dim, 2, dtype=torch.float32, device=position_ids.device)
        inv_freq = 1.0 / (self.base ** (exponent / self.dim))
        steps = position_ids.to(hidden_states.dtype).float()
        angles = steps[..., None] * inv_freq
        table = torch.cat((angles, angles), dim=-1)
        return table.cos().to(hidden_states.dtype), table.sin().to(hidden_states.dtype)
