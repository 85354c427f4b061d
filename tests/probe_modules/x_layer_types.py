"""(x) Per-layer-type rotary from an unannotated config: ``config.layer_types`` and
``config.rope_parameters[layer_type]["rope_theta"]``, forward(x, position_ids, layer_type).

Correct: frequencies rebuilt in float32 per call for the layer type asked for.
"""

import torch
from torch import nn


class LayerTypeRotary(nn.Module):
    def __init__(self, config, device=None):
        super().__init__()
        self.dim = getattr(config, "head_dim", None) or (
            config.hidden_size // config.num_attention_heads)
        self.bases = {t: config.rope_parameters[t]["rope_theta"] for t in config.layer_types}

    def forward(self, x, position_ids, layer_type=None):
        base = self.bases[layer_type]
        steps = torch.arange(0, self.dim, 2, dtype=torch.float32, device=x.device)
        angles = position_ids[..., None].float() * (1.0 / base ** (steps / self.dim))
        emb = torch.cat((angles, angles), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)
