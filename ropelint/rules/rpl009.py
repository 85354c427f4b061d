from __future__ import annotations

from ..model.values import Role
from .base import Rule, RuleContext
from .keep import keep_fix


class PhaseBuffer(Rule):
    code = "RPL009"

    def check(self, ctx: RuleContext) -> None:
        for reg in ctx.model.registrations:
            value = reg.value
            if not reg.ref.follows_module_casts or not value.has(Role.PHASE):
                continue
            owner = ctx.model.classes.get(reg.scope.symbol.split(".")[0])
            if value.has(Role.TABLE) or value.has(Role.COMPLEX) or (owner is not None and reg.ref.name in owner.repaired):
                continue
            message = (f"the phase is stored in `{reg.ref.name}` ({reg.ref.describe()}): a module cast rounds the "
                       f"angles before cos/sin (bfloat16 keeps 8 bits of a value that reaches thousands of radians)")
            fix, why = keep_fix(ctx, reg.ref, "the phase")
            if fix is None and why:
                message += f" (no automatic fix: {why})"
            ctx.report(self.code, reg.node, message, reg.scope, fix)
