"""(w) Scaled rotaries whose scaling is ON by default: llama3 piecewise, YaRN, LongRoPE and
dynamic NTK, each correct (scaled frequencies rebuilt in float32 per call) and buggy
(scaled frequencies kept in a buffer).

The probe measures precision against the unscaled reference, so it switches the scaling
off: scaling factors 1, per-frequency factor lists all ones, and maximum lengths that cover
every probed position (dynamic NTK only rescales past its maximum; LongRoPE's attention
factor depends on maximum / original length). A correct module then passes every case and
a buggy one still fails, whatever its scaling would have been.
"""

import math
from dataclasses import dataclass, field

import torch
from torch import nn


def _inv_freq(dim, base, device=None):
    return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32, device=device) / dim))


def _halves(angles, dtype, scale=1.0):
    emb = torch.cat((angles, angles), dim=-1)
    return (emb.cos() * scale).to(dtype), (emb.sin() * scale).to(dtype)


def llama3_scale(freqs, scale_factor, low_freq_factor, high_freq_factor, old_context_len):
    low_wavelen = old_context_len / low_freq_factor
    high_wavelen = old_context_len / high_freq_factor
    wavelen = 2 * math.pi / freqs
    scaled = torch.where(wavelen > low_wavelen, freqs / scale_factor, freqs)
    smooth = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    blended = (1 - smooth) * scaled / scale_factor + smooth * scaled
    in_band = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
    return torch.where(in_band, blended, scaled)


class Llama3Rotary(nn.Module):
    def __init__(self, dim, base=500000.0, scale_factor=8.0, low_freq_factor=1.0,
                 high_freq_factor=4.0, old_context_len=8192):
        super().__init__()
        self.dim, self.base = dim, base
        self.args = (scale_factor, low_freq_factor, high_freq_factor, old_context_len)

    def forward(self, x, position_ids):
        freqs = llama3_scale(_inv_freq(self.dim, self.base, x.device), *self.args)
        return _halves(position_ids[..., None].float() * freqs, x.dtype)


class Llama3BufferRotary(Llama3Rotary):
    def __init__(self, dim, base=500000.0, scale_factor=8.0, low_freq_factor=1.0,
                 high_freq_factor=4.0, old_context_len=8192):
        super().__init__(dim, base, scale_factor, low_freq_factor, high_freq_factor,
                         old_context_len)
        self.register_buffer("freqs", llama3_scale(_inv_freq(dim, base), *self.args),
                             persistent=False)

    def forward(self, x, position_ids):
        return _halves(position_ids[..., None].float() * self.freqs.float(), x.dtype)


def yarn_inv_freq(dim, base, factor, original, beta_fast=32, beta_slow=1, device=None):
    def correction(rotations):
        return dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low = max(math.floor(correction(beta_fast)), 0)
    high = min(math.ceil(correction(beta_slow)), dim - 1)
    extra = _inv_freq(dim, base, device)
    inter = extra / factor
    ramp = ((torch.arange(dim // 2, dtype=torch.float32, device=device) - low)
            / max(high - low, 1e-3)).clamp(0, 1)
    keep = 1.0 - ramp
    return inter * (1 - keep) + extra * keep


def yarn_mscale(factor, mscale=1.0):
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


class YarnRotary(nn.Module):
    def __init__(self, dim, base=10000, scaling_factor=4.0, original_max_position_embeddings=512):
        super().__init__()
        self.dim, self.base = dim, base
        self.factor, self.original = scaling_factor, original_max_position_embeddings

    def forward(self, x, position_ids):
        inv = yarn_inv_freq(self.dim, self.base, self.factor, self.original, device=x.device)
        return _halves(position_ids[..., None].float() * inv, x.dtype, yarn_mscale(self.factor))


class YarnBufferRotary(YarnRotary):
    def __init__(self, dim, base=10000, scaling_factor=4.0, original_max_position_embeddings=512):
        super().__init__(dim, base, scaling_factor, original_max_position_embeddings)
        self.register_buffer("inv_freq", yarn_inv_freq(dim, base, scaling_factor,
                                                       original_max_position_embeddings),
                             persistent=False)

    def forward(self, x, position_ids):
        angles = position_ids[..., None].float() * self.inv_freq.float()
        return _halves(angles, x.dtype, yarn_mscale(self.factor))


@dataclass
class LongRopeConfig:
    hidden_size: int = 256
    num_attention_heads: int = 4
    rope_theta: float = 10000.0
    max_position_embeddings: int = 131072
    original_max_position_embeddings: int = 4096
    rope_scaling: dict = field(default_factory=lambda: {
        "type": "longrope",
        "short_factor": [1.0 + 0.01 * i for i in range(32)],
        "long_factor": [1.0 + 0.5 * i for i in range(32)],
    })


class LongRopeRotary(nn.Module):
    def __init__(self, config: LongRopeConfig):
        super().__init__()
        self.dim = config.hidden_size // config.num_attention_heads
        self.base = config.rope_theta
        self.original = config.original_max_position_embeddings
        scaling = config.rope_scaling or {}
        ones = [1.0] * (self.dim // 2)
        self.short = scaling.get("short_factor", ones)
        self.long = scaling.get("long_factor", ones)
        scale = config.max_position_embeddings / self.original
        self.attention = (1.0 if scale <= 1.0 else
                          math.sqrt(1 + math.log(scale) / math.log(self.original)))

    def _factors(self, position_ids):
        chosen = self.long if int(position_ids.max()) + 1 > self.original else self.short
        return torch.tensor(chosen, dtype=torch.float32, device=position_ids.device)

    def forward(self, x, position_ids):
        inv = _inv_freq(self.dim, self.base, x.device) / self._factors(position_ids)
        return _halves(position_ids[..., None].float() * inv, x.dtype, self.attention)


class LongRopeBufferRotary(LongRopeRotary):
    def __init__(self, config: LongRopeConfig):
        super().__init__(config)
        base_freq = _inv_freq(self.dim, self.base)
        self.register_buffer("short_inv", base_freq / torch.tensor(self.short), persistent=False)
        self.register_buffer("long_inv", base_freq / torch.tensor(self.long), persistent=False)

    def forward(self, x, position_ids):
        inv = self.long_inv if int(position_ids.max()) + 1 > self.original else self.short_inv
        return _halves(position_ids[..., None].float() * inv.float(), x.dtype, self.attention)


class DynamicNTKRotary(nn.Module):
    def __init__(self, dim, max_position_embeddings=2048, base=10000, scaling_factor=2.0):
        super().__init__()
        self.dim, self.max_pos, self.base, self.factor = (dim, max_position_embeddings, base,
                                                          scaling_factor)

    def _base(self, seq_len):
        if seq_len <= self.max_pos:
            return self.base
        grown = (self.factor * seq_len / self.max_pos) - (self.factor - 1)
        return self.base * grown ** (self.dim / (self.dim - 2))

    def forward(self, x, seq_len):
        t = torch.arange(seq_len, dtype=torch.float32, device=x.device)
        angles = t[:, None] * _inv_freq(self.dim, self._base(seq_len), x.device)
        return _halves(angles, x.dtype)


class DynamicNTKBufferRotary(DynamicNTKRotary):
    def __init__(self, dim, max_position_embeddings=2048, base=10000, scaling_factor=2.0):
        super().__init__(dim, max_position_embeddings, base, scaling_factor)
        self.register_buffer("inv_freq", _inv_freq(dim, base), persistent=False)

    def forward(self, x, seq_len):
        if seq_len > self.max_pos:
            self.register_buffer("inv_freq", _inv_freq(self.dim, self._base(seq_len),
                                                       x.device).to(self.inv_freq.dtype),
                                 persistent=False)
        t = torch.arange(seq_len, device=x.device, dtype=self.inv_freq.dtype)
        return _halves(torch.outer(t, self.inv_freq).float(), x.dtype)
