from __future__ import annotations

from ..model.values import Role
from .base import Rule, RuleContext
from .shadow import has_shadow, state_fix


class PhaseBuffer(Rule):
    code = "RPL009"

    def check(self, ctx: RuleContext) -> None:
        for reg in ctx.model.registrations:
            value = reg.value
            if not reg.ref.follows_module_casts or not value.has(Role.PHASE):
                continue
            if value.has(Role.TABLE) or value.has(Role.COMPLEX) or has_shadow(ctx, reg):
                continue
            message = (f"the phase is stored in `{reg.ref.name}` ({reg.ref.describe()}): a module cast rounds the "
                       f"angles before cos/sin (bfloat16 keeps 8 bits of a value that reaches thousands of radians)")
            ctx.report(self.code, reg.node, message, reg.scope, state_fix(ctx, reg, "the phase"))
