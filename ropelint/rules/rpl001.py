from __future__ import annotations

import ast

from ..diagnostics import DeleteLines, FixPlan, Replace
from ..model.values import Dt, Role
from .base import Rule, RuleContext, cast_receiver


class IntegerTableCast(Rule):
    code = "RPL001"

    def check(self, ctx: RuleContext) -> None:
        for cast in ctx.model.casts:
            if cast.target.dtype is not Dt.INT or not (cast.receiver.has(Role.TABLE) or cast.receiver.has(Role.PHASE)):
                continue
            what = "phase" if cast.receiver.has(Role.PHASE) else "cos/sin table"
            target = ctx.code(cast.target_expr) if cast.target_expr is not None else "an integer dtype"
            source = cast.target.param
            if source is not None and cast.target.has(Role.DTYPE) and source not in target:
                target = source  # ``dtype, device = ids.dtype, ids.device`` ... ``cos.to(dtype)``
            message = (f"{what} cast to the dtype of `{target}`, an integer tensor: values truncate toward zero "
                       f"(cos and sin collapse to -1, 0 or 1: 99.96% of cos becomes 0 over 4096 positions)")
            ctx.report(self.code, cast.node, message, cast.scope, self._fix(ctx, cast))

    def _fix(self, ctx: RuleContext, cast) -> FixPlan:  # type: ignore[no-untyped-def]
        act = cast.scope.activation
        if act is not None and cast.target_expr is not None:
            replacement = act if cast.method == "type_as" else f"{act}.dtype"
            return FixPlan("safe", f"cast to `{replacement}` (the activation dtype) instead",
                           (Replace(cast.target_expr, replacement),))
        receiver = cast_receiver(cast.node) or cast.node
        owner = ctx.model.statement_of.get(id(cast.node))
        if isinstance(owner, ast.Assign) and owner.value is cast.node and isinstance(receiver, ast.Name) \
                and [ctx.code(t) for t in owner.targets] == [receiver.id]:
            # ``cos = cos.to(dtype)`` would become ``cos = cos``: the line goes.
            return FixPlan("safe", "keep the table in float32 (drop the integer cast)", (DeleteLines(owner),))
        return FixPlan("safe", "keep the table in float32 (drop the integer cast)",
                       (Replace(cast.node, ctx.code(receiver)),))
