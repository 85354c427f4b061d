"""The rule catalogue. Codes are public interface: never renumber."""

from __future__ import annotations

from .base import Rule, RuleContext
from .rpl001 import IntegerTableCast
from .rpl002 import InvFreqInModuleState
from .rpl003 import MatmulPhase
from .rpl004 import AutocastGuard
from .rpl005 import LowPrecisionPositions
from .rpl006 import LowPrecisionInvFreq
from .rpl007 import TrigAfterDowncast
from .rpl008 import ComplexBuffer
from .rpl009 import PhaseBuffer
from .rpl011 import TableBuffer

ALL_RULES: tuple[type[Rule], ...] = (
    IntegerTableCast,
    InvFreqInModuleState,
    MatmulPhase,
    AutocastGuard,
    LowPrecisionPositions,
    LowPrecisionInvFreq,
    TrigAfterDowncast,
    ComplexBuffer,
    PhaseBuffer,
    TableBuffer,
)
BY_CODE: dict[str, type[Rule]] = {rule.code: rule for rule in ALL_RULES}

__all__ = ["ALL_RULES", "BY_CODE", "Rule", "RuleContext"]
