from __future__ import annotations

import re

from ..model.values import Role
from .base import Rule, RuleContext
from .keep import already_kept, report_kept


# Absolute sinusoidal position embeddings (added to the tokens, not a rotation) are sin/cos tables
# too, with the same frequencies; a cast only costs them what the output dtype costs anyway.
ABSOLUTE = re.compile(r"pos(ition)?(al)?_?(embed|emb|enc)|^pe$|^_pe$|sincos", re.IGNORECASE)


class TableBuffer(Rule):
    code = "RPL011"

    def check(self, ctx: RuleContext) -> None:
        for reg in ctx.model.registrations:
            value = reg.value
            if not reg.ref.follows_module_casts or not value.has(Role.TABLE):
                continue
            if value.roles & {Role.PHASE, Role.COMPLEX, Role.INV_FREQ} or ABSOLUTE.search(reg.ref.name) \
                    or already_kept(ctx, reg) or _always_rebuilt(ctx, reg):
                continue
            message = (f"cos/sin tables stored in `{reg.ref.name}` ({reg.ref.describe()}): a module cast rounds them "
                       f"and converting back to float32 does not restore them (after `.bfloat16().float()` the "
                       f"tables keep bfloat16's error)")
            report_kept(ctx, self.code, reg, message, "the cos/sin tables")


def _always_rebuilt(ctx: RuleContext, reg) -> bool:  # type: ignore[no-untyped-def]
    """Every read of the tables in this file follows a call that rebuilds them in float32 (``self._build_cache(n)``
    first in ``forward``): a module cast's rounding is overwritten before anything reads it."""
    if id(reg.ref.node) not in ctx.model.rebuilt_states:
        return False
    return not any(read.ref.name == reg.ref.name for read in ctx.model.state_reads)
