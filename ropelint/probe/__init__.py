"""``ropelint probe``: run rotary code through the precision matrix of ROPE_NOTES.

Importing this package does not import torch; ``run_matrix`` and the click command load it
on first use, so the linter works without the ``torch`` extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ropelint.probe.results import Case, CaseResult, CheckResult, ProbeReport

if TYPE_CHECKING:
    from ropelint.probe.invoke import ProbeSetupError
    from ropelint.probe.runner import run_matrix

__all__ = ["Case", "CaseResult", "CheckResult", "ProbeReport", "ProbeSetupError", "run_matrix"]


def __getattr__(name: str) -> Any:
    # Lazy: these pull in torch.
    if name == "run_matrix":
        from ropelint.probe.runner import run_matrix

        return run_matrix
    if name == "ProbeSetupError":
        from ropelint.probe.invoke import ProbeSetupError

        return ProbeSetupError
    raise AttributeError(f"module 'ropelint.probe' has no attribute {name!r}")
