from __future__ import annotations

from ..model.values import Role
from .base import Rule, RuleContext
from .keep import already_kept, report_kept


class PhaseBuffer(Rule):
    code = "RPL009"

    def check(self, ctx: RuleContext) -> None:
        for reg in ctx.model.registrations:
            value = reg.value
            if not reg.ref.follows_module_casts or not value.has(Role.PHASE):
                continue
            if value.has(Role.TABLE) or value.has(Role.COMPLEX) or already_kept(ctx, reg):
                continue
            message = (f"the phase is stored in `{reg.ref.name}` ({reg.ref.describe()}): a module cast rounds the "
                       f"angles before cos/sin (bfloat16 keeps 8 bits of a value that reaches thousands of radians)")
            report_kept(ctx, self.code, reg, message, "the phase")
