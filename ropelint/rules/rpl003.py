from __future__ import annotations

import libcst as cst

from ..diagnostics import FixPlan, Replace
from ..model.events import Product
from ..model.values import Dt
from .base import Rule, RuleContext, as_float32

MATMUL_FORMS = ("matmul", "einsum-sum", "einsum-matmul")


def elementwise_rewrite(ctx: RuleContext, product: Product) -> FixPlan | None:
    """The phase as a broadcast product of float32 operands, with the matmul's result shape."""
    if product.form not in ("matmul", "einsum-matmul") or len(product.operands) != 2:
        return None
    left, right = product.operands
    lval, rval = product.operand_vals
    lcode = ctx.code(left) if lval.dtype is Dt.FULL else as_float32(ctx, left)
    rcode = ctx.code(right) if rval.dtype is Dt.FULL else as_float32(ctx, right)
    node = product.node
    if isinstance(node, cst.BinaryOperation):
        op = node.operator
        new = node.with_changes(
            left=cst.parse_expression(lcode) if lcode != ctx.code(left) else left,
            right=cst.parse_expression(rcode) if rcode != ctx.code(right) else right,
            operator=cst.Multiply(whitespace_before=op.whitespace_before, whitespace_after=op.whitespace_after),
        )
        # Positions exclude a node's own parentheses, so the replacement must too.
        code = ctx.code(new.with_changes(lpar=(), rpar=()))
    else:
        code = f"({lcode} * {rcode})"
    shapes_proven = lval.last_is_one and rval.second_last_is_one
    safety = "safe" if shapes_proven else "unsafe"
    why = "" if shapes_proven else " (assumes the contracted dimension has size 1, as in an outer product)"
    return FixPlan(safety, f"form the phase as an elementwise float32 product{why}", (Replace(node, code),))


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
