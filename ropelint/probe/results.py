"""Frozen records of a probe run. No torch here, so reports can be built and read without it."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

# Short names used in case labels; the JSON keeps the full dtype names.
_SHORT = {"float16": "f16", "bfloat16": "bf16", "float32": "f32"}


@dataclass(frozen=True)
class Case:
    """One cell of the probe matrix."""

    module_dtype: str  # "float16" | "bfloat16" | "float32" (controls)
    cast_back: bool  # converted back with .float() after the 16-bit conversion
    head_dim: int
    base: float
    autocast: str  # "off" | "cpu-bf16" | "cpu-fp16" | "cuda-bf16" | "cuda-fp16"
    control: bool
    # "module": activations in the module's dtype; "autocast": in the autocast dtype when autocast is
    # on (as q/k come out of autocast's linear layers), else the module's.
    activations: str = "module"

    @property
    def activation_dtype(self) -> str:
        """Dtype of the activations the module is called with."""
        if self.activations == "autocast" and self.autocast != "off" and not self.control:
            return {"bf16": "bfloat16", "fp16": "float16"}[self.autocast.split("-")[1]]
        return "float32" if self.cast_back or self.control else self.module_dtype

    @property
    def label(self) -> str:
        if self.control:
            state = "control f32"
        elif self.cast_back:
            state = f"{_SHORT[self.module_dtype]}→f32"
        else:
            state = _SHORT[self.module_dtype]
        label = f"{state} · d{self.head_dim} b{self.base:g} · {self.autocast}"
        if self.activation_dtype != ("float32" if self.cast_back or self.control else self.module_dtype):
            label += f" · {_SHORT[self.activation_dtype]} in"  # activations fed in the autocast dtype
        return label


@dataclass(frozen=True)
class CaseResult:
    """Outcome of one case; ``error`` is set when the call itself raised or could not be read."""

    case: Case
    passed: bool
    output_dtype: str | None = None
    max_error: float | None = None
    worst_ratio: float | None = None  # largest error / tolerance; below 1 passes
    first_failing_position: int | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        c = self.case
        return {
            "module_dtype": c.module_dtype,
            "cast_back": c.cast_back,
            "head_dim": c.head_dim,
            "base": c.base,
            "autocast": c.autocast,
            "control": c.control,
            "activation_dtype": c.activation_dtype,
            "passed": self.passed,
            # JSON has no inf/nan: a non-finite error (NaN or inf in the output) is null.
            "max_error": _finite_or_none(self.max_error),
            "first_failing_position": self.first_failing_position,
            "error": self.error,
        }


@dataclass(frozen=True)
class CheckResult:
    """An extra check (``--export``, ``--meta``). ``passed`` is None when it does not apply."""

    name: str
    passed: bool | None
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "passed": self.passed, "detail": self.detail}


@dataclass(frozen=True)
class ProbeReport:
    """All cases for one symbol, plus how it was built and called."""

    symbol: str
    cases: tuple[CaseResult, ...]
    how: str = ""
    checks: tuple[CheckResult, ...] = field(default_factory=tuple)

    @property
    def matrix(self) -> tuple[CaseResult, ...]:
        return tuple(r for r in self.cases if not r.case.control)

    @property
    def controls(self) -> tuple[CaseResult, ...]:
        return tuple(r for r in self.cases if r.case.control)

    @property
    def passed(self) -> int:
        return sum(r.passed for r in self.matrix)

    @property
    def total(self) -> int:
        return len(self.matrix)

    @property
    def controls_passed(self) -> int:
        return sum(r.passed for r in self.controls)

    @property
    def controls_total(self) -> int:
        return len(self.controls)

    @property
    def ok(self) -> bool:
        """Every case, every control and every applicable check passed."""
        return all(r.passed for r in self.cases) and all(
            c.passed is not False for c in self.checks
        )

    @property
    def verdict(self) -> str:
        return (
            f"{self.passed}/{self.total} cases pass "
            f"(controls {self.controls_passed}/{self.controls_total})"
        )

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "symbol": self.symbol,
            "passed": self.passed,
            "total": self.total,
            "cases": [r.to_json() for r in self.cases],
        }
        if self.checks:  # only present when --export/--meta asked for them
            data["checks"] = [c.to_json() for c in self.checks]
        return data


def _finite_or_none(value: float | None) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return value
