from __future__ import annotations

import re

from ..model.values import Role
from .base import Rule, RuleContext
from .keep import already_kept, report_kept


# Absolute sinusoidal position embeddings (added to the tokens, not a rotation) are sin/cos tables
# too, with the same frequencies; a cast only costs them what the output dtype costs anyway.
ABSOLUTE = re.compile(r"pos(ition)?(al)?_?(embed|emb|enc)|^pe$|^_pe$|sincos", re.IGNORECASE)


class TableBuffer(Rule):
    code = "RPL011"

    def check(self, ctx: RuleContext) -> None:
        for reg in ctx.model.registrations:
            value = reg.value
            if not reg.ref.follows_module_casts or not value.has(Role.TABLE):
                continue
            if value.roles & {Role.PHASE, Role.COMPLEX, Role.INV_FREQ} or ABSOLUTE.search(reg.ref.name) \
                    or already_kept(ctx, reg) or _always_rebuilt(ctx, reg):
                continue
            message = (f"cos/sin tables stored in `{reg.ref.name}` ({reg.ref.describe()}): a module cast rounds them "
                       f"and converting back to float32 does not restore them (after `.bfloat16().float()` the "
                       f"tables keep bfloat16's error)")
            embedding = _embedding_class(ctx, reg)
            if embedding is None:
                report_kept(ctx, self.code, reg, message, "the cos/sin tables")
            elif _rotates_with(ctx, embedding):
                # What the embedding returns is the weight's dtype, with no activation to cast it to: keeping the
                # weight float32 would hand float32 tables to 16-bit queries.
                ctx.report(self.code, reg.node, message + " (no automatic fix: the embedding returns its weight's "
                                                          "dtype, which keeping it float32 would change)", reg.scope,
                           None)


def _always_rebuilt(ctx: RuleContext, reg) -> bool:  # type: ignore[no-untyped-def]
    """Every read of the tables in this file follows a call that rebuilds them in float32 (``self._build_cache(n)``
    first in ``forward``): a module cast's rounding is overwritten before anything reads it."""
    if id(reg.ref.node) not in ctx.model.rebuilt_states:
        return False
    return not any(read.ref.name == reg.ref.name for read in ctx.model.state_reads)


def _embedding_class(ctx: RuleContext, reg) -> str | None:  # type: ignore[no-untyped-def]
    """The class, when the tables are the ``weight`` of an ``nn.Embedding`` subclass (RoFormer's sinusoidal table,
    which its ``forward`` looks up with the position ids)."""
    owner = ctx.model.classes.get(reg.scope.symbol.split(".")[0])
    if owner is None or reg.ref.name != "weight" or not any(b.rsplit(".", 1)[-1] == "Embedding" for b in owner.bases):
        return None
    return owner.name


def _rotates_with(ctx: RuleContext, class_name: str) -> bool:
    """Something in the file rotates with what the embedding returns: ``self.embed_positions = <class>(...)``,
    ``pos = self.embed_positions(...)``, then ``apply_rotary_position_embeddings(pos, q, k)``. Absolute sinusoidal
    embeddings (added to the tokens) are the same tables, and fine in the model's dtype."""
    for held in re.finditer(rf"self\.(\w+)\s*=\s*(?:[\w.]+\.)?{re.escape(class_name)}\(", ctx.source):
        for got in re.finditer(rf"(\w+)\s*=\s*self\.{held.group(1)}\(", ctx.source):
            if re.search(rf"\w*(?:rotary|(?<![a-z])rope)\w*\(\s*{got.group(1)}\b", ctx.source, re.IGNORECASE):
                return True
    return False
