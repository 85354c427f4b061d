from __future__ import annotations

from ..model.values import Role, StateKind
from .base import Rule, RuleContext
from .shadow import has_shadow, state_fix


class ComplexBuffer(Rule):
    code = "RPL008"

    def check(self, ctx: RuleContext) -> None:
        for reg in ctx.model.registrations:
            if reg.ref.kind is StateKind.BUFFER and reg.value.has(Role.COMPLEX) and not has_shadow(ctx, reg):
                message = (f"complex `{reg.ref.name}` registered as a buffer: `module.to(torch.bfloat16)` turns it "
                           f"into a real tensor and drops the imaginary part (only a warning is printed)")
                ctx.report(self.code, reg.node, message, reg.scope, state_fix(ctx, reg, "the complex rotation"))
