"""(f) The float32 recompute pattern, in several call shapes; all of these are correct.

Inverse frequencies rebuilt in float32 inside forward on the positions' device, an
elementwise product, cos/sin cast to the activation dtype only at the end.
"""

import torch
from torch import nn


def _inv_freq(dim, base, device):
    exponent = torch.arange(0, dim, 2, dtype=torch.float32, device=device) / dim
    return 1.0 / (base**exponent)


class Float32RotaryEmbedding(nn.Module):
    """forward(x, position_ids) -> (cos, sin), half-split, in x.dtype."""

    def __init__(self, dim, base=10000.0):
        super().__init__()
        self.dim = dim
        self.base = base

    def forward(self, x, position_ids):
        inv_freq = _inv_freq(self.dim, self.base, position_ids.device)
        angles = position_ids[..., None].float() * inv_freq
        table = torch.cat((angles, angles), dim=-1)
        return table.cos().to(x.dtype), table.sin().to(x.dtype)


class Float32ConfigRotary(nn.Module):
    """Built from a config; returns float32 tables regardless of x."""

    def __init__(self, config, device=None):
        super().__init__()
        self.dim = int(config.head_dim * config.partial_rotary_factor)
        self.base = config.rope_theta

    def forward(self, x, position_ids):
        inv_freq = _inv_freq(self.dim, self.base, position_ids.device)
        angles = position_ids[..., None].float() * inv_freq
        table = torch.cat((angles, angles), dim=-1)
        return table.cos(), table.sin()


class InterleavedRotary(nn.Module):
    """GPT-J layout: each frequency repeated in place; forward(x, seq_len=N)."""

    def __init__(self, rotary_dim, theta=10000.0):
        super().__init__()
        self.rotary_dim = rotary_dim
        self.theta = theta

    def forward(self, x, seq_len):
        steps = torch.arange(seq_len, device=x.device, dtype=torch.float32)
        angles = steps[:, None] * _inv_freq(self.rotary_dim, self.theta, x.device)
        table = angles.repeat_interleave(2, dim=-1)
        return table.cos().to(x.dtype), table.sin().to(x.dtype)


class PhaseRotary(nn.Module):
    """forward(max_seq_len) -> the phase itself, cat((f, f)); the caller takes cos/sin."""

    def __init__(self, dim, base=10000.0):
        super().__init__()
        self.dim = dim
        self.base = base

    def forward(self, max_seq_len):
        steps = torch.arange(max_seq_len, dtype=torch.float32)
        angles = torch.outer(steps, _inv_freq(self.dim, self.base, steps.device))
        return torch.cat((angles, angles), dim=-1)


class HelperRotary(nn.Module):
    """The shape ropelint fix writes: one call to the vendored runtime helper."""

    def __init__(self, head_dim, rope_theta=10000.0):
        super().__init__()
        self.head_dim = head_dim
        self.rope_theta = rope_theta

    def forward(self, x, position_ids):
        from ropelint.runtime import rotary_cos_sin

        return rotary_cos_sin(position_ids, self.head_dim, self.rope_theta, dtype=x.dtype)
