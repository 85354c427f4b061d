from __future__ import annotations

from ..model.events import Product
from .base import Rule, RuleContext


class InvFreqInModuleState(Rule):
    code = "RPL002"
    name = "rope-inv-freq-in-module-state"
    summary = "inverse frequencies kept in a floating buffer or Parameter feed the phase"
    fix_availability = "none"

    def check(self, ctx: RuleContext) -> None:
        for product in ctx.model.products:
            for read in product.freq.reads:
                if read.ref.follows_module_casts and not self._repaired(ctx, product, read.ref.name):
                    self._report(ctx, product, read)

    def _report(self, ctx: RuleContext, product: Product, read) -> None:  # type: ignore[no-untyped-def]
        ref = read.ref
        message = (f"inverse frequencies `self.{ref.name}` ({ref.describe()} registered at line "
                   f"{ctx.line_of(ref.node)}) feed the phase at line {ctx.line_of(product.node)}; "
                   f"`module.bfloat16()`/`.half()` round them and `.float()` at use restores nothing")
        ctx.report(self.code, read.node, message, product.scope)

    @staticmethod
    def _repaired(ctx: RuleContext, product: Product, name: str) -> bool:
        cls_name = product.scope.symbol.split(".")[0]
        info = ctx.model.classes.get(cls_name)
        return info is not None and name in info.repaired
