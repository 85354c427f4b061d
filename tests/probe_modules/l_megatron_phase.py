"""(l) Megatron-style ``(kv_channels, rotary_percent, rotary_base)``; forward(max_seq_len,
offset=0) returns the phase ``[S, 1, 1, dim]``.

The buggy one registers ``inv_freq`` as a persistent buffer and types the positions like
it; the correct one keeps float32 frequencies in a plain attribute (casts leave it alone).
"""

import torch
from torch import nn


class LegacyPhaseRotary(nn.Module):
    def __init__(self, kv_channels, rotary_percent=1.0, seq_len_interpolation_factor=None,
                 rotary_base=10000):
        super().__init__()
        dim = int(kv_channels * rotary_percent)
        self.seq_len_interpolation_factor = seq_len_interpolation_factor
        inv_freq = 1.0 / (rotary_base ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq)

    def forward(self, max_seq_len, offset=0):
        seq = torch.arange(max_seq_len, device=self.inv_freq.device) + offset
        seq = seq.type_as(self.inv_freq)
        if self.seq_len_interpolation_factor is not None:
            seq = seq / self.seq_len_interpolation_factor
        freqs = torch.einsum("i,j->ij", seq, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb[:, None, None, :]


class CorePhaseRotary(nn.Module):
    def __init__(self, kv_channels, rotary_percent=1.0, seq_len_interpolation_factor=None,
                 rotary_base=10000):
        super().__init__()
        dim = int(kv_channels * rotary_percent)
        self.seq_len_interpolation_factor = seq_len_interpolation_factor
        self.inv_freq = 1.0 / (
            rotary_base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))

    def forward(self, max_seq_len, offset=0):
        seq = torch.arange(max_seq_len, dtype=torch.float32) + offset
        if self.seq_len_interpolation_factor is not None:
            seq = seq / self.seq_len_interpolation_factor
        freqs = torch.outer(seq, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb[:, None, None, :]
