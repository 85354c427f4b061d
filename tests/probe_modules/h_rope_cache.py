"""(h) lit-gpt-style ``build_rope_cache(seq_len, n_elem, dtype, device, base)``.

The buggy one builds the inverse frequencies and the positions in ``dtype``; the fixed one
computes in float32 and casts the finished table.
"""

import torch


def build_rope_cache(seq_len, n_elem, dtype, device, base=10000):
    theta = 1.0 / (base ** (torch.arange(0, n_elem, 2, dtype=dtype, device=device) / n_elem))
    seq_idx = torch.arange(seq_len, dtype=dtype, device=device)
    idx_theta = torch.outer(seq_idx, theta).float()
    cache = torch.stack([torch.cos(idx_theta), torch.sin(idx_theta)], dim=-1)
    if dtype in (torch.float16, torch.bfloat16):
        cache = cache.to(dtype)
    return cache


def build_rope_cache_fixed(seq_len, n_elem, dtype, device, base=10000):
    steps = torch.arange(0, n_elem, 2, dtype=torch.float32, device=device)
    theta = 1.0 / (base ** (steps / n_elem))
    seq_idx = torch.arange(seq_len, dtype=torch.float32, device=device)
    idx_theta = torch.outer(seq_idx, theta)
    cache = torch.stack([torch.cos(idx_theta), torch.sin(idx_theta)], dim=-1)
    return cache.to(dtype)
