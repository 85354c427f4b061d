from __future__ import annotations

import ast

from ..diagnostics import FixPlan, Replace
from ..model.events import Product
from ..model.values import Dt
from .base import Rule, RuleContext, as_float32

MATMUL_FORMS = ("matmul", "einsum-sum", "einsum-matmul")


def elementwise_code(ctx: RuleContext, product: Product) -> str | None:
    """The phase as a broadcast product of float32 operands: the text that replaces the product."""
    if product.form not in ("matmul", "einsum-matmul") or len(product.operands) != 2:
        return None
    left, right = product.operands
    lval, rval = product.operand_vals
    lcode = ctx.code(left) if lval.dtype is Dt.FULL else as_float32(ctx, left)
    rcode = ctx.code(right) if rval.dtype is Dt.FULL else as_float32(ctx, right)
    node = product.node
    if not isinstance(node, ast.BinOp):
        return f"({lcode} * {rcode})"
    # Keep the spelling around the operands (their parentheses, spacing, comments); swap the operator.
    spans = ctx.spans
    whole = spans.text(node)
    base = spans.start_offset(node)
    left_end, right_start = spans.end_offset(left) - base, spans.start_offset(right) - base
    gap = whole[left_end:right_start]
    if gap.count("@") != 1:
        return None
    return whole[:spans.start_offset(left) - base] + lcode + gap.replace("@", "*") + rcode \
        + whole[spans.end_offset(right) - base:]


def elementwise_rewrite(ctx: RuleContext, product: Product) -> FixPlan | None:
    code = elementwise_code(ctx, product)
    if code is None:
        return None
    lval, rval = product.operand_vals
    shapes_proven = lval.last_is_one and rval.second_last_is_one
    safety = "safe" if shapes_proven else "unsafe"
    why = "" if shapes_proven else " (assumes the contracted dimension has size 1, as in an outer product)"
    return FixPlan(safety, f"form the phase as an elementwise float32 product{why}", (Replace(product.node, code),))


class MatmulPhase(Rule):
    code = "RPL003"

    def check(self, ctx: RuleContext) -> None:
        for product in ctx.model.products:
            if product.form not in MATMUL_FORMS or product.guard is not None:
                continue
            kind = "a matmul" if product.form == "matmul" else "an einsum that sums an index"
            message = (f"phase formed by {kind}: under autocast it runs in bfloat16/float16 even with float32 "
                       f"inputs (phase error 235 rad at position 131071); use an elementwise product")
            ctx.report(self.code, product.node, message, product.scope, elementwise_rewrite(ctx, product))
