from __future__ import annotations

from ..model.values import Role
from .base import Rule, RuleContext
from .casts import float32_fix


class LowPrecisionInvFreq(Rule):
    code = "RPL006"

    def check(self, ctx: RuleContext) -> None:
        for built in ctx.model.inv_freqs:
            val = built.val
            if not val.dtype.can_be_16bit or val.site is None or val.read is not None:
                continue
            message = ("inverse frequencies built from a tensor whose dtype is not fixed to float32: an integer "
                       "arange divided (or a float arange) takes `torch.get_default_dtype()`, which is bfloat16 "
                       "while many frameworks build models")
            ctx.report(self.code, val.site, message, built.scope, float32_fix(ctx, val.site, "inverse frequencies", built.scope))
        for cast in ctx.model.casts:
            receiver = cast.receiver
            if not receiver.has(Role.INV_FREQ) or receiver.has(Role.PHASE) or receiver.reads:
                continue
            if not cast.target.dtype.can_be_16bit:
                continue
            message = ("inverse frequencies cast to a dtype that can be 16-bit: bfloat16 keeps 8 significant bits, "
                       "and the phase error grows with the position (7.3 rad at 4096 for head_dim 128)")
            ctx.report(self.code, cast.node, message, cast.scope, float32_fix(ctx, cast.node, "inverse frequencies", cast.scope))
