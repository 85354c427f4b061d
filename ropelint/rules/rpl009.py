from __future__ import annotations

import ast

from ..diagnostics import FixPlan, Replace
from ..model.values import Role
from .base import Rule, RuleContext, atom_code, cast_receiver
from .keep import already_kept, keep_fix


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
            fix, why = keep_fix(ctx, reg.ref, "the phase")
            cast = value.site if value.dtype.can_be_16bit else None
            receiver = cast_receiver(cast) if isinstance(cast, ast.Call) else None
            if fix is not None and receiver is not None and reg.scope.node is not None \
                    and any(n is cast for n in ast.walk(reg.scope.node)):
                # ``pe = (position * div_term).to(dtype)``: once kept, the buffer is what that cast made it.
                text = ctx.code(cast)
                tail = text[text.rfind("." + cast.func.attr):] if isinstance(cast.func, ast.Attribute) else text
                fix = FixPlan(fix.safety, f"{fix.description}; the phase is stored without its cast (`{tail}`)",
                              (*fix.edits, Replace(cast, atom_code(ctx, receiver, cast))))
            if fix is None and why:
                message += f" (no automatic fix: {why})"
            ctx.report(self.code, reg.node, message, reg.scope, fix)
