"""(r) ``(head_dim, theta)``; forward(x [B, S, H, D], position_ids) returns cos/sin shaped
``[B, S, 1, D]`` for broadcasting over heads.

The buggy one casts the (correct float32) phase to the activation dtype before cos/sin.
"""

import torch
from torch import nn


class _Base(nn.Module):
    def __init__(self, head_dim, theta=10000.0):
        super().__init__()
        self.head_dim, self.theta = head_dim, theta

    def _phase(self, position_ids):
        exponent = torch.arange(0, self.head_dim, 2, dtype=torch.float32,
                                device=position_ids.device) / self.head_dim
        freqs = position_ids.float()[..., None] * (1.0 / self.theta**exponent)
        return torch.cat((freqs, freqs), dim=-1)


class PhaseDowncastRotary(_Base):
    def forward(self, x, position_ids):
        phase = self._phase(position_ids).to(x.dtype)
        return phase.cos().unsqueeze(2), phase.sin().unsqueeze(2)


class ThetaRotary(_Base):
    def forward(self, x, position_ids):
        phase = self._phase(position_ids)
        return phase.cos().to(x.dtype).unsqueeze(2), phase.sin().to(x.dtype).unsqueeze(2)
