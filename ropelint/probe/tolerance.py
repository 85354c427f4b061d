"""Per-position tolerance against a float64 reference (ROPE_NOTES section 4).

For float32 output the allowance is ``2 * (pos + 1) * 2**-24 + 2**-23``: a correct float32
implementation measures at most about ``1.34 * (pos + 1) * 2**-24`` (phase rounding plus the
float32 inverse frequencies), so the bound grows with the position instead of being a flat
number that fails correct code past position ~1500. For bfloat16/float16 output one ulp of
the reference in that dtype is added, since the final cast alone may round by half an ulp.
"""

from __future__ import annotations

import math

import torch

FLOAT32_SLOPE = 2.0 * 2.0**-24
FLOAT32_FLOOR = 2.0**-23

# Output dtypes whose final rounding is allowed for (one ulp of the reference).
_ROUNDED_OUTPUTS = (torch.float16, torch.bfloat16)


def float32_term(positions: torch.Tensor) -> torch.Tensor:
    """``2 * (pos + 1) * 2**-24 + 2**-23`` per position, float64, same shape as ``positions``."""
    pos = positions.to(torch.float64)
    return FLOAT32_SLOPE * (pos + 1.0) + FLOAT32_FLOOR


def ulp(reference: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Spacing of ``dtype`` numbers at each reference value (float64 result).

    ``2**floor(log2|r|) * eps`` in the normal range; below the smallest normal the spacing
    is constant (subnormals), which also covers ``r == 0``.
    """
    info = torch.finfo(dtype)
    magnitude = reference.to(torch.float64).abs()
    _, exponent = torch.frexp(magnitude)  # magnitude = m * 2**exponent, m in [0.5, 1)
    exponent = (exponent - 1).to(torch.float64)
    spacing = torch.ldexp(torch.full_like(magnitude, info.eps), exponent)
    subnormal = torch.full_like(magnitude, info.tiny * info.eps)
    return torch.where(magnitude < info.tiny, subnormal, spacing)


def trig_tolerance(
    reference: torch.Tensor, positions: torch.Tensor, output_dtype: torch.dtype
) -> torch.Tensor:
    """Allowed |error| for cos/sin values. ``reference`` is [S, L], ``positions`` is [S]."""
    allowed = float32_term(positions)[:, None].expand_as(reference)
    if output_dtype in _ROUNDED_OUTPUTS:
        allowed = allowed + ulp(reference, output_dtype)
    return allowed


def phase_tolerance(positions: torch.Tensor, width: int) -> torch.Tensor:
    """Allowed wrapped angle error for a returned phase, whatever its dtype.

    A phase handed back in 16 bits gets no ulp allowance: its caller takes cos/sin of it,
    and one bfloat16 ulp at position 131072 is 1024 rad.
    """
    return float32_term(positions)[:, None].expand(positions.shape[0], width)


def wrapped_angle_error(angle: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """|angle - reference| reduced to [0, pi]: phases that differ by 2*pi*k are equal."""
    diff = angle.to(torch.float64) - reference.to(torch.float64)
    return torch.remainder(diff + math.pi, 2.0 * math.pi).sub(math.pi).abs()
