"""The rule catalogue as data: codes, names and defaults, importable without LibCST.

Codes are public interface: never renumber. The rule classes in ``rules/`` take their name,
summary and defaults from here, so configuration, ``ropelint rules`` and the SARIF driver can
list them without importing the analysis.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

FixAvailability = Literal["always", "sometimes", "none"]


@dataclass(frozen=True)
class RuleInfo:
    code: str
    name: str
    summary: str
    fix_availability: FixAvailability = "none"
    default_enabled: bool = True


CATALOGUE: tuple[RuleInfo, ...] = (
    RuleInfo("RPL001", "rope-integer-table-cast", "cos/sin tables or the phase cast to an integer tensor's dtype",
             "always"),
    RuleInfo("RPL002", "rope-inv-freq-in-module-state",
             "inverse frequencies kept in a floating buffer or Parameter feed the phase", "sometimes"),
    RuleInfo("RPL003", "rope-matmul-phase",
             "the phase is formed by a matmul or a summing einsum, which autocast runs in 16 bits", "sometimes"),
    RuleInfo("RPL004", "rope-autocast-guard", "phase code under a disabled-autocast context manager or decorator",
             "sometimes"),
    RuleInfo("RPL005", "rope-low-precision-positions", "positions created or cast in a dtype that can be 16-bit",
             "always"),
    RuleInfo("RPL006", "rope-low-precision-inv-freq",
             "inverse frequencies built in a dtype that can be 16-bit (including the default dtype)", "always"),
    RuleInfo("RPL007", "rope-trig-after-downcast", "cos/sin taken after the phase was cast to a dtype that can be 16-bit",
             "sometimes"),
    RuleInfo("RPL008", "rope-complex-buffer", "a complex rotation table (freqs_cis) registered as a buffer",
             "sometimes"),
    RuleInfo("RPL009", "rope-phase-buffer", "the phase itself (not cos/sin) stored in a floating buffer",
             "sometimes"),
    RuleInfo("RPL010", "rope-vendored-runtime-outdated",
             "a vendored copy of the runtime helper differs from the installed one", "always"),
    RuleInfo("RPL011", "rope-table-buffer",
             "cos/sin tables stored in a floating buffer: a cast and back leaves them rounded", "sometimes"),
)
INFO: dict[str, RuleInfo] = {info.code: info for info in CATALOGUE}
