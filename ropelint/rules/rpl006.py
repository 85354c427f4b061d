from __future__ import annotations

import ast
import re

from ..diagnostics import FixPlan, Replace
from ..model.events import Cast, TrigInHelper
from ..model.interpreter import POSITION_NAMES
from ..model.names import dotted, qualname, string_value
from ..model.values import Dt, Role
from .base import (
    Rule,
    RuleContext,
    append_keyword,
    assigned_name,
    atom_code,
    cast_receiver,
    later_loads,
    spelled_as_tensor,
)
from .casts import float32_or_callers_fix, plan_fix
from .rpl007 import handed_fix, returns_trig_tuples


class LowPrecisionInvFreq(Rule):
    code = "RPL006"

    def check(self, ctx: RuleContext) -> None:
        for built in ctx.model.inv_freqs:
            val = built.val
            if not val.dtype.can_be_16bit or val.site is None or val.read is not None:
                continue
            if _only_stored_unread(ctx, built) or _outside_rotary_code(ctx, built):
                continue
            for base in val.earlier_sites:  # ``torch.tensor(theta, dtype=dtype)`` raised to the exponent's power
                if _base_tensor(base):
                    ctx.report(self.code, base, _rounded_base_message(ctx, base), built.scope,
                               float32_or_callers_fix(ctx, base, "inverse frequencies", built.scope))
            message = ("inverse frequencies built from a tensor whose dtype is not fixed to float32: an integer "
                       "arange divided (or a float arange) takes `torch.get_default_dtype()`, which is bfloat16 "
                       "while many frameworks build models")
            chosen = next((k.value for k in val.site.keywords if k.arg == "dtype"), None) \
                if isinstance(val.site, ast.Call) else None
            if chosen is None and isinstance(val.site, ast.Call) and isinstance(val.site.func, ast.Attribute) \
                    and val.site.func.attr in ("to", "type") and len(val.site.args) == 1 \
                    and isinstance(val.site.args[0], (ast.Name, ast.Attribute)) \
                    and (dotted(val.site.args[0]) or [""])[-1].endswith("dtype"):
                chosen = val.site.args[0]  # ``torch.arange(0, d, 2).to(dtype)``
            if chosen is not None and not (qualname(chosen, ctx.imports) or "").startswith("torch."):
                # ``torch.arange(0, d, 2, dtype=args.dtype)``: the dtype is named, just not float32.
                message = (f"inverse frequencies built in `{ctx.code(chosen)}`, a dtype chosen at run time, not "
                           f"fixed to float32 (a model's bfloat16 or float16 reaches it): bfloat16 keeps 8 "
                           f"significant bits, and the phase error grows with the position")
            if _base_tensor(val.site):  # the base is the only part built in a 16-bit-able dtype
                message = _rounded_base_message(ctx, val.site)
            ctx.report(self.code, val.site, message, built.scope,
                       float32_or_callers_fix(ctx, val.site, "inverse frequencies", built.scope))
        for cast in ctx.model.casts:
            receiver = cast.receiver
            if not receiver.has(Role.INV_FREQ) or receiver.has(Role.PHASE):
                continue
            if any(read.follows_module_casts for read in receiver.reads):
                # Module state that casts convert is RPL002's (its fix keeps the state float32); a cast of it to the
                # activations' dtype on the way into a table-building helper would round the kept state again.
                handed = _handed_to_table_helper(ctx, cast) if cast.target.dtype.can_be_16bit else None
                if handed is not None:
                    ctx.report(self.code, cast.node, _CAST_MESSAGE + f"; `{handed.callee}` forms the phase from them",
                               cast.scope, handed_fix(ctx, cast, handed))
                continue
            if cast.method == "new_tensor" and cast.target.dtype is Dt.INT:
                owner = ctx.code(cast.target_expr) if cast.target_expr is not None else "an integer tensor"
                torch, imports = ctx.torch_name()
                ctx.report(self.code, cast.node,
                           f"inverse frequencies copied into a tensor in the integer dtype of `{owner}`: every "
                           f"frequency below 1 truncates to 0, so all but the first pair stop rotating",
                           cast.scope, FixPlan("safe", f"make the copy `{torch}.float32`",
                                               (Replace(cast.node, append_keyword(ctx, cast.node,
                                                                                  f"dtype={torch}.float32")),
                                                *imports)))
                continue
            if cast.method == "new_tensor" and cast.target.dtype.can_be_16bit:
                owner = ctx.code(cast.target_expr) if cast.target_expr is not None else "the receiver"
                torch, imports = ctx.torch_name()
                edits = (Replace(cast.node, append_keyword(ctx, cast.node, f"dtype={torch}.float32")), *imports)
                ctx.report(self.code, cast.node,
                           f"inverse frequencies made a tensor in the dtype of `{owner}` "
                           f"(`{cast.node.func.attr}` without `dtype=` takes it), the activations' bfloat16 or "
                           f"float16: bfloat16 keeps 8 significant bits, and the phase error grows with the position",
                           cast.scope,
                           plan_fix(ctx, cast.node, cast.target_expr, cast.scope, "inverse frequencies",
                                    f"make the tensor `{torch}.float32` (still on `{owner}`'s device)", edits,
                                    cast_to=f"{owner}.dtype"))
                continue
            if cast.method == "as_tensor" and cast.target.dtype is Dt.INT and cast.target_expr is not None:
                torch, imports = ctx.torch_name()
                ctx.report(self.code, cast.node,
                           f"inverse frequencies made a tensor in `{ctx.code(cast.target_expr)}`, an integer dtype: "
                           f"every frequency below 1 truncates to 0, so all but the first pair stop rotating",
                           cast.scope, FixPlan("safe", f"make the tensor `{torch}.float32`",
                                               (Replace(cast.target_expr, f"{torch}.float32"), *imports)))
                continue
            tensor = cast.target_expr
            if cast.method == "to" and isinstance(tensor, ast.Name) and cast.node.args and cast.node.args[0] is tensor \
                    and POSITION_NAMES.match(tensor.id) and cast.target.dtype in (Dt.RUNTIME, Dt.UNKNOWN) \
                    and tensor.id in cast.scope.params:
                # ``self.inv_freq.to(positions)``: the positions' device, and their dtype, int64 ids in most callers.
                ctx.report(self.code, cast.node,
                           f"inverse frequencies cast to the dtype of `{tensor.id}`, positions that callers pass "
                           f"as integer ids (int64): every frequency below 1 truncates to 0", cast.scope,
                           FixPlan("safe", f"keep only the move to `{tensor.id}.device`",
                                   (Replace(tensor, f"{tensor.id}.device"),)))
                continue
            if cast.target.dtype is Dt.INT and cast.method in ("to", "type_as", "type"):
                _integer_cast(ctx, self.code, cast)
                continue
            if not cast.target.dtype.can_be_16bit:
                continue
            message = _CAST_MESSAGE
            if cast.method == "as_tensor" and cast.target_expr is not None:
                message = (f"inverse frequencies made a tensor in `{ctx.code(cast.target_expr)}`, which can be "
                           f"16-bit: bfloat16 keeps 8 significant bits, and the phase error grows with the position")
            ctx.report(self.code, cast.node, message, cast.scope,
                       float32_or_callers_fix(ctx, cast.node, "inverse frequencies", cast.scope))


_CAST_MESSAGE = ("inverse frequencies cast to a dtype that can be 16-bit: bfloat16 keeps 8 significant bits, and the "
                 "phase error grows with the position (7.3 rad at 4096 for head_dim 128)")


def _handed_to_table_helper(ctx: RuleContext, cast: Cast) -> TrigInHelper | None:
    """``fixed_pos_embedding(position_ids, self.inv_freq.to(query.dtype))``: the cast is an argument of a call of a
    same-file function that returns a tuple of cos/sin tables on every path."""
    stmt = ctx.model.statement_of.get(id(cast.node))
    for call in (n for n in ast.walk(stmt) if isinstance(n, ast.Call)) if stmt is not None else ():
        if isinstance(call.func, ast.Name) and any(a is cast.node for a in call.args) \
                and (helper := ctx.model.functions.get(call.func.id)) is not None and returns_trig_tuples(helper):
            return TrigInHelper(call, cast.receiver, call.func.id, cast.scope)
    return None


def _base_tensor(site: ast.AST) -> bool:
    return isinstance(site, ast.Call) and (dotted(site.func) or [""])[-1] in ("tensor", "as_tensor", "full")


def _rounded_base_message(ctx: RuleContext, site: ast.Call) -> str:
    chosen = next((k.value for k in site.keywords if k.arg == "dtype"), None)
    named = f"`{ctx.code(chosen)}`" if chosen is not None else "the default dtype"
    return (f"the base of the inverse frequencies is a tensor built in {named}, not fixed to float32: bfloat16 "
            f"rounds it (10000 becomes 9984, 500000 becomes 499712) and float16 overflows past 65504, so every "
            f"frequency is off whatever the exponent's dtype")


def _integer_cast(ctx: RuleContext, code: str, cast) -> None:  # type: ignore[no-untyped-def]
    """``self.inv_freq = inv_freq.to(position_ids)`` (a dynamic-NTK refresh): ``Tensor.to(tensor)`` takes the
    dtype too."""
    target = ctx.code(cast.target_expr) if cast.target_expr is not None else "an integer dtype"
    tensor = cast.target_expr if spelled_as_tensor(ctx, cast.target_expr) and cast.method in ("to", "type_as") \
        and cast.node.args and cast.node.args[0] is cast.target_expr else None
    named = f"the dtype of `{target}`, an integer tensor" if tensor is not None else f"`{target}`, an integer dtype"
    message = (f"inverse frequencies cast to {named}: every frequency below 1 truncates to 0, so every later "
               f"phase, cos and sin is wrong")
    receiver = cast_receiver(cast.node) or cast.node
    if tensor is not None:
        moved = f"{atom_code(ctx, receiver, cast.node)}.to({ctx.code(tensor)}.device)"
        fix = FixPlan("safe", f"keep only the move to `{ctx.code(tensor)}.device` (the frequencies stay float)",
                      (Replace(cast.node, moved),))
    else:
        fix = FixPlan("safe", "keep the frequencies float (drop the integer cast)",
                      (Replace(cast.node, atom_code(ctx, receiver, cast.node)),))
    ctx.report(code, cast.node, message, cast.scope, fix)


def _only_stored_unread(ctx: RuleContext, built) -> bool:  # type: ignore[no-untyped-def]
    """``inv_freq = <construction>`` goes only into ``register_buffer("inv_freq", inv_freq)`` and no
    code reads that buffer's values (ChatGLM keeps it for its ``.dtype`` and ``.device``): the
    construction's precision reaches no phase."""
    found = assigned_name(ctx, built.node, whole=False)
    fn = built.scope.node
    if found is None or fn is None:
        return False
    stmt, name = found
    loads = later_loads(fn, stmt, name)
    stored: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "register_buffer" \
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Name) and node.args[1].id == name:
            buffer = string_value(node.args[0])
            if buffer is None:
                return False
            stored.add(buffer)
            loads = [n for n in loads if n is not node.args[1]]
    # Any value read of a buffer of that name in the file (conservative across classes).
    return bool(stored) and not loads and not any(read.ref.name in stored for read in ctx.model.state_reads)


_ROTARY_WORDS = re.compile(r"rope|rotar|freq|sincos|sinusoid|cis|phase|angle|theta|omega|pos|embed|ntk|yarn|llama|"
                           r"scal|band|period|harmonic|inv", re.IGNORECASE)


def _outside_rotary_code(ctx: RuleContext, built) -> bool:  # type: ignore[no-untyped-def]
    """A power of a range in a function that forms no phase, takes no cos/sin, hands nothing to one that does,
    whose name (or class's) says nothing rotary, and kept in a name that says nothing rotary either: a mel
    filterbank's ``hz_pts = 700.0 * (10 ** (mel_pts / 2595.0) - 1.0)``, not inverse frequencies."""
    symbol = built.scope.symbol
    events = (*ctx.model.products, *ctx.model.trigs, *ctx.model.helper_trigs, *ctx.model.helper_positions,
              *ctx.model.helper_freqs)
    if any(e.scope.symbol == symbol for e in events) or _ROTARY_WORDS.search(symbol):
        return False
    stmt = ctx.model.statement_of.get(id(built.node))
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(
        stmt, (ast.AnnAssign, ast.AugAssign)) else []
    names = [ctx.code(t) for t in targets]
    return not any(_ROTARY_WORDS.search(name) for name in names) and not isinstance(stmt, ast.Return)
