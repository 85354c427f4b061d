"""(t) Functions ``(positions, head_dim, rope_theta, dtype)`` returning one table
``cat((cos, sin), -1)``, one column per frequency.

The buggy one computes in ``dtype``; the correct one in float32, casting at the end.
"""

import torch


def rope_table_in_dtype(positions, head_dim, rope_theta=10000.0, dtype=torch.float32):
    exponent = torch.arange(0, head_dim, 2, dtype=dtype, device=positions.device) / head_dim
    angles = positions.to(dtype)[:, None] * (1.0 / rope_theta**exponent)
    return torch.cat((angles.cos(), angles.sin()), dim=-1)


def rope_table(positions, head_dim, rope_theta=10000.0, dtype=torch.float32):
    exponent = torch.arange(0, head_dim, 2, dtype=torch.float32,
                            device=positions.device) / head_dim
    angles = positions.float()[:, None] * (1.0 / rope_theta**exponent)
    return torch.cat((angles.cos(), angles.sin()), dim=-1).to(dtype)
