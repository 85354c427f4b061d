from __future__ import annotations

import ast

from ..diagnostics import DeleteLines, FixPlan, NodeEdit, Replace
from ..model.events import Guard, Product
from .base import Rule, RuleContext
from .rpl003 import MATMUL_FORMS, elementwise_rewrite


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
        rewrites: list[tuple[ast.AST, str]] = []
        edits: list[NodeEdit] = []
        safe = True
        for product in products:
            if product.form in MATMUL_FORMS:
                plan = elementwise_rewrite(ctx, product)
                if plan is None:
                    return None
                safe = safe and plan.safety == "safe"
                rewrites.append((product.node, plan.edits[0].code))  # type: ignore[union-attr]
                edits.extend(plan.edits)
        owner = guard.owner
        if isinstance(owner, (ast.With, ast.AsyncWith)):
            text = self._unwrapped(ctx, owner, rewrites)
            if text is None:
                return None
            edits = [Replace(owner, text)]
        elif isinstance(owner, ast.Expr) and guard.closer is not None:
            # The switch off and the switch back on go; the statements between them stay where they are.
            edits = [DeleteLines(owner), *edits, DeleteLines(guard.closer)]
        elif isinstance(owner, (ast.FunctionDef, ast.AsyncFunctionDef)):
            decorator = next((d for d in owner.decorator_list if d is guard.node), None)
            if decorator is None:
                return None
            edits.insert(0, DeleteLines(decorator))
        else:
            return None
        return FixPlan("safe" if safe else "unsafe",
                       "remove the autocast guard and form the phase as an elementwise float32 product",
                       tuple(edits))

    @staticmethod
    def _unwrapped(ctx: RuleContext, owner: ast.With | ast.AsyncWith, rewrites: list[tuple[ast.AST, str]]) -> str | None:
        """The ``with`` statement's body, rewritten and moved out one level: the text that replaces it."""
        spans = ctx.spans
        first, last = owner.body[0], owner.body[-1]
        if len(owner.items) != 1:
            return None  # several managers
        inline = first.lineno == owner.lineno  # ``with guard: freqs = ...`` on one line
        if inline and last.end_lineno != owner.lineno:
            return None
        _, column = spans.start(owner)
        body_line, body_column = spans.start(first)
        # From the start of the body's first line: comments and blank lines inside the block move too.
        start = spans.start_offset(first) if inline else spans.offset(body_line, 0)
        end = spans.end_offset(last)
        code = spans.code[start:end]
        base_offset = start
        for node, new in sorted(rewrites, key=lambda r: spans.start_offset(r[0]), reverse=True):
            a, b = spans.start_offset(node) - base_offset, spans.end_offset(node) - base_offset
            if not 0 <= a <= b <= len(code):
                return None
            code = code[:a] + new + code[b:]
        if inline:
            return code  # the statements take the ``with``'s place on its line
        if '"""' in code or "'''" in code:
            return None  # re-indenting would change a multi-line string
        depth = body_column - column
        lines = code.split("\n")
        out = []
        for line in lines:
            if not line.strip():
                out.append("")
            elif line[:depth].strip():
                return None  # a line indented less than the body: a continuation we cannot move safely
            else:
                out.append(line[depth:])
        out[0] = out[0].lstrip()
        return "\n".join(out)
