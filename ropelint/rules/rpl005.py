from __future__ import annotations

from .base import Rule, RuleContext
from .casts import float32_fix


class LowPrecisionPositions(Rule):
    code = "RPL005"
    name = "rope-low-precision-positions"
    summary = "positions created or cast in a dtype that can be 16-bit"
    fix_availability = "always"

    def check(self, ctx: RuleContext) -> None:
        for product in ctx.model.products:
            pos = product.positions
            if not pos.dtype.can_be_16bit or pos.site is None:
                continue
            message = (f"positions get a dtype that can be 16-bit here and feed the phase at line "
                       f"{ctx.line_of(product.node)}: bfloat16 cannot tell 256 from 257 (8184..8195 all become 8192)")
            ctx.report(self.code, pos.site, message, product.scope, float32_fix(ctx, pos.site, "positions"))
