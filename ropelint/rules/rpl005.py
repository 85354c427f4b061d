from __future__ import annotations

from .base import Rule, RuleContext
from .casts import float32_fix


class LowPrecisionPositions(Rule):
    code = "RPL005"

    def check(self, ctx: RuleContext) -> None:
        uses = [(p.positions, p.node, p.scope, "the phase") for p in ctx.model.products]
        uses += [(h.arg, h.call, h.scope, f"`{h.callee}`, which forms the phase") for h in ctx.model.helper_positions]
        for pos, used_at, scope, what in uses:
            if not pos.dtype.can_be_16bit:
                continue
            for site in pos.sites:
                message = (f"positions get a dtype that can be 16-bit here and reach {what} at line "
                           f"{ctx.line_of(used_at)}: bfloat16 cannot tell 256 from 257 (8184..8195 all become 8192)")
                ctx.report(self.code, site, message, scope, float32_fix(ctx, site, "positions", scope))
