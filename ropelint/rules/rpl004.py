from __future__ import annotations

import libcst as cst

from ..diagnostics import DeleteLines, FixPlan, NodeEdit, Replace
from ..model.events import Guard, Product
from .base import Rule, RuleContext
from .rpl003 import elementwise_rewrite


class _Swap(cst.CSTTransformer):
    def __init__(self, replacements: dict[int, cst.BaseExpression]) -> None:
        self.replacements = replacements

    def on_leave(self, original_node, updated_node):  # type: ignore[no-untyped-def, override]
        new = self.replacements.get(id(original_node))
        if new is None:
            return updated_node
        if getattr(original_node, "lpar", ()) and not getattr(new, "lpar", ()):
            new = new.with_changes(lpar=original_node.lpar, rpar=original_node.rpar)
        return new


class AutocastGuard(Rule):
    code = "RPL004"

    def check(self, ctx: RuleContext) -> None:
        for guard in ctx.model.guards:
            products = [p for p in ctx.model.products if p.guard is guard]
            trigs = [t for t in ctx.model.trigs if t.guard is guard]
            if not products and not trigs:
                continue
            what = (f"phase at line {ctx.line_of(products[0].node)} computed" if products
                    else f"cos/sin of the phase at line {ctx.line_of(trigs[0].node)} taken")
            message = (f"{what} under a disabled-autocast guard: it breaks forward on the meta device and leaves an "
                       f"autocast node in exported graphs; float32 elementwise phase code needs no guard")
            ctx.report(self.code, guard.node, message, guard.scope, self._fix(ctx, guard, products))

    def _fix(self, ctx: RuleContext, guard: Guard, products: list[Product]) -> FixPlan | None:
        rewrites: dict[int, cst.BaseExpression] = {}
        edits: list[NodeEdit] = []
        safe = True
        for product in products:
            if product.form == "einsum-sum":
                return None
            if product.form in ("matmul", "einsum-matmul"):
                plan = elementwise_rewrite(ctx, product)
                if plan is None:
                    return None
                safe = safe and plan.safety == "safe"
                rewrites[id(product.node)] = cst.parse_expression(plan.edits[0].code)  # type: ignore[union-attr]
                edits.extend(plan.edits)
        owner = guard.owner
        if isinstance(owner, cst.With):
            if len(owner.items) != 1 or not isinstance(owner.body, cst.IndentedBlock):
                return None
            body = owner.body.visit(_Swap(rewrites))
            code = "".join(ctx.code(stmt) for stmt in body.body)  # type: ignore[attr-defined]
            if '"""' in code or "'''" in code:
                return None  # re-indenting would change a multi-line string
            _, column = ctx.start_of(owner)
            indent = " " * column
            lines = code.rstrip("\n").split("\n")
            text = "\n".join([lines[0]] + [indent + ln if ln.strip() else "" for ln in lines[1:]])
            edits = [Replace(owner, text)]
        elif isinstance(owner, cst.FunctionDef):
            decorator = next((d for d in owner.decorators if d.decorator is guard.node), None)
            if decorator is None:
                return None
            edits.insert(0, DeleteLines(decorator))
        else:
            return None
        return FixPlan("safe" if safe else "unsafe",
                       "remove the autocast guard and form the phase as an elementwise float32 product",
                       tuple(edits))
