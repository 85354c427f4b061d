"""(m) lit-gpt-style functions ``(seq_len, n_elem, dtype, device, base, condense_ratio)``
returning a half-split (cos, sin) pair.

The buggy one builds positions and frequencies in ``dtype``; the correct one in float32,
casting the finished tables.
"""

import torch


def rope_cache_in_dtype(seq_len: int, n_elem: int, dtype: torch.dtype, device=None,
                        base: int = 10000, condense_ratio: int = 1):
    theta = 1.0 / (base ** (torch.arange(0, n_elem, 2, device=device, dtype=dtype) / n_elem))
    seq_idx = torch.arange(seq_len, device=device, dtype=dtype) / condense_ratio
    idx_theta = torch.outer(seq_idx, theta).repeat(1, 2)
    return torch.cos(idx_theta).to(dtype), torch.sin(idx_theta).to(dtype)


def rope_cache(seq_len: int, n_elem: int, dtype: torch.dtype, device=None,
               base: int = 10000, condense_ratio: int = 1):
    steps = torch.arange(0, n_elem, 2, device=device, dtype=torch.float32)
    theta = 1.0 / (base ** (steps / n_elem))
    seq_idx = torch.arange(seq_len, device=device, dtype=torch.float32) / condense_ratio
    idx_theta = torch.outer(seq_idx, theta).repeat(1, 2)
    return torch.cos(idx_theta).to(dtype), torch.sin(idx_theta).to(dtype)
