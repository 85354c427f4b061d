"""Compare one output table with the float64 reference, position by position."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ropelint.probe.readings import Table, expand
from ropelint.probe.tolerance import (
    phase_tolerance,
    trig_tolerance,
    wrapped_angle_error,
)


@dataclass(frozen=True)
class Comparison:
    max_error: float  # inf when the output holds NaN or inf
    worst_ratio: float  # largest error / tolerance; below 1 passes
    first_failing_position: int | None

    @property
    def passed(self) -> bool:
        return self.worst_ratio < 1.0


def reference_phase(positions: torch.Tensor, head_dim: int, base: float) -> torch.Tensor:
    """float64 phase [S, head_dim/2] from exact float64 inverse frequencies."""
    exponents = torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim
    inv_freq = 1.0 / (float(base) ** exponents)
    return positions.to(device="cpu", dtype=torch.float64)[:, None] * inv_freq


class Reference:
    """float64 reference for one (positions, head_dim, base), with per-layout caches.

    Every case of a pair shares the same cos/sin and tolerances, so they are built once.
    """

    def __init__(self, positions: torch.Tensor, head_dim: int, base: float) -> None:
        self.positions = positions.to("cpu")
        self.head_dim = head_dim
        self.base = base
        self.phase = reference_phase(self.positions, head_dim, base)
        self._trig: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        self._allowed: dict[tuple[str, torch.dtype], tuple[torch.Tensor, torch.Tensor]] = {}

    def layout_phase(self, layout: str) -> torch.Tensor:
        return expand(self.phase, layout)

    def trig(self, layout: str) -> tuple[torch.Tensor, torch.Tensor]:
        if layout not in self._trig:
            phase = self.layout_phase(layout)
            self._trig[layout] = (phase.cos(), phase.sin())
        return self._trig[layout]

    def allowed(self, layout: str, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        key = (layout, dtype)
        if key not in self._allowed:
            cos, sin = self.trig(layout)
            # Each table gets the ulp allowance of its own reference value.
            self._allowed[key] = (trig_tolerance(cos, self.positions, dtype),
                                  trig_tolerance(sin, self.positions, dtype))
        return self._allowed[key]


def _error(value: torch.Tensor, expected: torch.Tensor) -> torch.Tensor:
    # NaN compares false with everything and would pass silently: count it as inf.
    return torch.nan_to_num((value - expected).abs(), nan=math.inf, posinf=math.inf)


def compare(table: Table, layout: str, reference: Reference) -> Comparison:
    """Per-element error against the reference, judged by the per-position tolerance."""
    if table.kind == "phase":
        ref = reference.layout_phase(layout)
        error = torch.nan_to_num(wrapped_angle_error(table.first, ref), nan=math.inf)
        error = torch.where(torch.isfinite(table.first), error, math.inf)
        return _summarize(error, error / phase_tolerance(reference.positions, ref.shape[-1]),
                          reference.positions)
    assert table.second is not None
    ref_cos, ref_sin = reference.trig(layout)
    allowed_cos, allowed_sin = reference.allowed(layout, table.dtype)
    cos_err = _error(table.first, ref_cos)
    sin_err = _error(table.second, ref_sin)
    ratio = torch.maximum(cos_err / allowed_cos, sin_err / allowed_sin)
    return _summarize(torch.maximum(cos_err, sin_err), ratio, reference.positions)


def _summarize(error: torch.Tensor, ratio: torch.Tensor, positions: torch.Tensor) -> Comparison:
    row_worst = ratio.amax(dim=-1)
    failing_rows = (row_worst >= 1.0).nonzero()
    first = int(positions[failing_rows[0, 0]]) if failing_rows.numel() else None
    return Comparison(
        max_error=float(error.max()) if error.numel() else 0.0,
        worst_ratio=float(row_worst.max()) if row_worst.numel() else 0.0,
        first_failing_position=first,
    )
