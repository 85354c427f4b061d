from __future__ import annotations

from ..model.values import Role, StateKind
from .base import Rule, RuleContext
from .keep import already_kept, report_kept


class ComplexBuffer(Rule):
    code = "RPL008"

    def check(self, ctx: RuleContext) -> None:
        for reg in ctx.model.registrations:
            if reg.ref.kind is not StateKind.BUFFER or not reg.value.has(Role.COMPLEX) or already_kept(ctx, reg):
                continue
            message = (f"complex `{reg.ref.name}` registered as a buffer: `module.to(torch.bfloat16)` turns it "
                       f"into a real tensor and drops the imaginary part (only a warning is printed)")
            report_kept(ctx, self.code, reg, message, "the complex rotation")
