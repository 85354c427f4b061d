from __future__ import annotations

from ..model.values import Role, StateKind
from .base import Rule, RuleContext
from .keep import keep_fix


class ComplexBuffer(Rule):
    code = "RPL008"

    def check(self, ctx: RuleContext) -> None:
        for reg in ctx.model.registrations:
            if reg.ref.kind is not StateKind.BUFFER or not reg.value.has(Role.COMPLEX):
                continue
            owner = ctx.model.classes.get(reg.scope.symbol.split(".")[0])
            if owner is not None and reg.ref.name in owner.repaired:
                continue
            message = (f"complex `{reg.ref.name}` registered as a buffer: `module.to(torch.bfloat16)` turns it "
                       f"into a real tensor and drops the imaginary part (only a warning is printed)")
            fix, why = keep_fix(ctx, reg.ref, "the complex rotation")
            if fix is None and why:
                message += f" (no automatic fix: {why})"
            ctx.report(self.code, reg.node, message, reg.scope, fix)
