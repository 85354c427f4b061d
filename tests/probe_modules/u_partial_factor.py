"""(u) ``(head_dim, partial_rotary_factor=0.25, rotary_emb_base)``; forward(hidden_states,
seq_len) returns (cos, sin) for the rotated channels only.

The buggy one is the GPT-NeoX shape (buffer, positions ``type_as`` the buffer, no-sum einsum).
"""

import torch
from torch import nn


class PartialNeoXRotary(nn.Module):
    def __init__(self, head_dim, partial_rotary_factor=0.25, rotary_emb_base=10000):
        super().__init__()
        dim = int(head_dim * partial_rotary_factor)
        self.register_buffer("inv_freq", 1.0 / (rotary_emb_base ** (torch.arange(0, dim, 2).float() / dim)))

    def forward(self, hidden_states, seq_len):
        t = torch.arange(seq_len, device=hidden_states.device).type_as(self.inv_freq)
        freqs = torch.einsum("i,j->ij", t, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(hidden_states.dtype), emb.sin().to(hidden_states.dtype)


class PartialRotary(nn.Module):
    def __init__(self, head_dim, partial_rotary_factor=0.25, rotary_emb_base=10000):
        super().__init__()
        self.dim = int(head_dim * partial_rotary_factor)
        self.base = rotary_emb_base

    def forward(self, hidden_states, seq_len):
        steps = torch.arange(0, self.dim, 2, dtype=torch.float32, device=hidden_states.device)
        t = torch.arange(seq_len, dtype=torch.float32, device=hidden_states.device)
        freqs = t[:, None] * (1.0 / self.base ** (steps / self.dim))
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(hidden_states.dtype), emb.sin().to(hidden_states.dtype)
