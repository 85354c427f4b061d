"""(b) Matmul phase under a disabled-autocast guard, transformers-4.40 style.

The guard fixes autocast, but inv_freq is still a floating buffer: ``module.to(bfloat16)``
rounds it and ``.float()`` at use restores only the dtype. The guard also breaks the meta
device (``torch.autocast(device_type="meta")`` raises).
"""

import torch
from torch import nn


class GuardedRotaryEmbedding(nn.Module):
    def __init__(self, dim, max_position_embeddings=2048, base=10000, device=None):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    @torch.no_grad()
    def forward(self, x, position_ids):
        freq_col = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        pos_row = position_ids[:, None, :].float()
        with torch.autocast(device_type=x.device.type, enabled=False):
            angles = (freq_col.float() @ pos_row.float()).transpose(1, 2)
            table = torch.cat((angles, angles), dim=-1)
            cos, sin = table.cos(), table.sin()
        return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)
