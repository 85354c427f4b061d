from __future__ import annotations

from .base import Rule, RuleContext
from .callsite import caller_dtype_fix
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
                fix = float32_fix(ctx, site, "positions", scope)
                if fix is not None and fix.safety == "unsafe":
                    # Built in a dtype the callers pass: passing float32 at this file's calls may be safe.
                    fix = caller_dtype_fix(ctx, site) or fix
                ctx.report(self.code, site, message, scope, fix)
