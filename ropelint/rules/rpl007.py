from __future__ import annotations

from collections import defaultdict

import ast

from ..diagnostics import FixPlan, NodeEdit, Replace
from ..model.events import Cast, Trig
from ..model.values import Dt, Role
from .base import Rule, RuleContext


class TrigAfterDowncast(Rule):
    code = "RPL007"

    def check(self, ctx: RuleContext) -> None:
        phase_casts = {id(c.node): c for c in ctx.model.casts
                       if c.receiver.has(Role.PHASE) and c.target.dtype is not Dt.INT}
        trigs: dict[int, list[Trig]] = defaultdict(list)
        for trig in ctx.model.trigs:
            site = trig.arg.site
            if trig.arg.dtype.can_be_16bit and site is not None and id(site) in phase_casts:
                trigs[id(site)].append(trig)
        for key, found in trigs.items():
            cast = phase_casts[key]
            message = (f"phase cast to a dtype that can be 16-bit before cos/sin at line {ctx.line_of(found[0].node)}: "
                       f"the rounding of the angle is amplified by its size; take cos/sin in float32 and cast the tables")
            ctx.report(self.code, cast.node, message, cast.scope, self._fix(ctx, cast, found))
        for helper in ctx.model.helper_trigs:
            site = helper.arg.site
            if helper.arg.dtype.can_be_16bit and site is not None and id(site) in phase_casts:
                cast = phase_casts[id(site)]
                message = (f"phase cast to a dtype that can be 16-bit, then passed to `{helper.callee}` which takes "
                           f"its cos/sin (line {ctx.line_of(helper.call)}); cast the tables instead")
                ctx.report(self.code, cast.node, message, cast.scope)

    def _fix(self, ctx: RuleContext, cast: Cast, trigs: list[Trig]) -> FixPlan | None:
        if not isinstance(cast.node.func, ast.Attribute):
            return None
        receiver = cast.node.func.value
        receiver_code = ctx.code(receiver)
        cast_code = ctx.code(cast.node)
        if not cast_code.startswith(receiver_code):
            return None
        tail = cast_code[len(receiver_code):]
        if any(t.scope.symbol != cast.scope.symbol for t in trigs):
            return None
        edits: list[NodeEdit] = []
        chained = all(isinstance(t.node.func, ast.Attribute) and t.node.func.value is cast.node for t in trigs)
        if chained:
            for t in trigs:
                edits.append(Replace(t.node, f"{receiver_code}.{t.node.func.attr}(){tail}"))  # type: ignore[attr-defined]
            return FixPlan("safe", "take cos/sin in float32, then cast the tables", tuple(edits))
        edits.append(Replace(cast.node, receiver_code))
        for t in trigs:
            edits.append(Replace(t.node, f"{ctx.code(t.node)}{tail}"))
        return FixPlan("unsafe", "take cos/sin in float32, then cast the tables "
                                 "(other uses of the cast phase stay float32)", tuple(edits))
