from __future__ import annotations

import ast
import re

from ..diagnostics import DeleteLines, FixPlan, Replace
from ..model.interpreter import (
    ACTIVATION_PARAMS,
    INT_BY_NAME,
    POSITION_NAMES,
    allocator_name,
    dtype_fallback,
    dtype_keyword,
    same_file_callable,
)
from ..model.names import dotted
from ..model.events import Cast
from ..model.values import Dt, Role
from .boundary import cast_at_callers
from .callsite import calls_of
from .base import Rule, RuleContext, alone_in_block, append_keyword, calls_in_text, atom_code, cast_receiver, spelled_as_tensor


class IntegerTableCast(Rule):
    code = "RPL001"

    def check(self, ctx: RuleContext) -> None:
        for cast in ctx.model.casts:
            if not (cast.receiver.has(Role.TABLE) or cast.receiver.has(Role.PHASE)):
                continue
            maybe = cast.target.dtype is not Dt.INT and (positions_dtype(cast) or phase_source_dtype(ctx, cast))
            fallback = _integer_fallback(ctx, cast)
            # ``return buf.dtype`` in a loop over ``self.buffers()``, else the default dtype: integer on one path.
            # Not a dtype parameter with a fallback (``output_dtype = pos.dtype`` when left out): its calls decide,
            # and the calls that leave it out are reported where they are.
            some_path = cast.target.may_be_int and cast.target.has(Role.DTYPE) and not (
                isinstance(cast.target_expr, ast.Name) and cast.target_expr.id in cast.scope.params)
            if cast.target.dtype is not Dt.INT and not maybe and fallback is None and not some_path:
                continue
            what = "phase" if cast.receiver.has(Role.PHASE) else "cos/sin table"
            target = ctx.code(cast.target_expr) if cast.target_expr is not None else "an integer dtype"
            source = cast.target.param
            if fallback is not None:
                what = f"{what} cast to `{target}`, which without a dtype argument is"
                target = fallback.value.id  # type: ignore[attr-defined]
            elif source is not None and cast.target.has(Role.DTYPE) and source not in target:
                target = source  # ``dtype, device = ids.dtype, ids.device`` ... ``cos.to(dtype)``
            elif source is not None and target == f"{source}.dtype":
                target = source  # ``cos.to(position_ids.dtype)``: the dtype of ``position_ids``
            if fallback is None:
                what = f"{what} cast to"
            message = f"{what} the dtype of `{target}`, an integer tensor"
            tensor_target = cast.method in ("to", "type_as") and isinstance(cast.node, ast.Call) \
                and any(a is cast.target_expr for a in cast.node.args) and spelled_as_tensor(ctx, cast.target_expr)
            if fallback is None and source is None and cast.target.has(Role.DTYPE) and not tensor_target and (
                    isinstance(cast.target_expr, ast.Name) or _self_attribute(cast.target_expr)
                    or target.endswith(".dtype")):  # ``grid.dtype`` of a local that is int64 on some path
                kind = "an integer dtype" if cast.target.dtype is Dt.INT else "an integer dtype on some paths"
                message = f"{what} `{target}`, {kind}"  # ``dtype = ... else torch.int32`` ... ``.to(dtype)``
            if cast.method.startswith(("default:", "default-tensor:")):
                callee = ctx.code(cast.node.func).removeprefix("self.")
                name = cast.method.split(":", 1)[1]
                message = (f"`{callee}` casts its {what.removesuffix(' cast to')} to the dtype of "
                           f"`{ctx.code(cast.target_expr)}` when `{name}` is not passed, as here: an integer dtype")
            elif cast.method == "call":
                callee = ctx.code(cast.node.func).removeprefix("self.")
                message = (f"`{callee}` casts its {what.removesuffix(' cast to')} to the dtype passed here, "
                           f"`{ctx.code(cast.target_expr)}`, {_integer_kind(ctx, cast)}")
            elif cast.method.startswith("argument"):
                callee = ctx.code(cast.node.func).removeprefix("self.")
                message = (f"`{callee}` casts {'its' if cast.method == 'argument' else 'the'} "
                           f"{what.removesuffix(' cast to')} to the dtype of its `{cast.target.param}` argument, "
                           f"and `{ctx.code(cast.target_expr)}` passed here is an integer tensor (token or position ids)")
            if cast.method == "container":
                func = cast.node.func
                # ``pos.new_zeros(...)`` takes the dtype of ``pos``; ``torch.empty_like(pos)`` of its argument.
                owner = cast.node.args[0] if allocator_name(cast.node).endswith("_like") and cast.node.args else \
                    func.value if isinstance(func, ast.Attribute) else cast.node
                verb = "copied by" if allocator_name(cast.node) == "new_tensor" else "written into a tensor that"
                made = "into" if verb == "copied by" else "allocates in"
                message = (f"{what.removesuffix(' cast to')} {verb} `{ctx.code(cast.node)}` "
                           f"{made} the integer dtype of `{ctx.code(owner)}`")
            if maybe:
                named = cast.target.param or ctx.code(cast.target_expr).removesuffix(".dtype")
                message = (f"{what.removesuffix(' cast to')} cast to the dtype of `{named}`, positions that "
                           f"callers pass as integer ids (int64), and then an integer tensor")
            message += (": values truncate toward zero (cos and sin collapse to -1, 0 or 1: 99.96% of cos becomes 0 "
                        "over 4096 positions)")
            ctx.report(self.code, cast.node, message, cast.scope, self._fix(ctx, cast))

    def _fix(self, ctx: RuleContext, cast) -> FixPlan | None:  # type: ignore[no-untyped-def]
        if cast.method == "argument":
            # The rotary reads more than the dtype and device of what it is handed (its length), and the
            # activations it should get are often made after this call: no edit is certain.
            return None
        if cast.method == "argument-dtype-keyword":
            return _dtype_keyword_fix(ctx, cast)
        if cast.method.startswith("argument=~"):  # no activation in reach: float32 ids stand in
            like = cast.method.split("=~", 1)[1]
            return FixPlan("unsafe", f"pass `{like}` (the rotary reads only its dtype and device; the tables become "
                                     f"float32, and no activation here says whether callers want another dtype)",
                           (Replace(cast.target_expr, like),))
        if cast.method.startswith("argument="):  # the rotary reads only ``x.dtype``/``x.device``
            like = cast.method.split("=", 1)[1]
            return FixPlan("safe", f"pass `{like}` (the rotary reads only its dtype and device)",
                           (Replace(cast.target_expr, like),))
        if cast.method == "argument-drop":  # the callee only casts its first argument: keep that argument
            callee = ctx.code(cast.node.func)
            return FixPlan("safe", f"drop the call (`{callee}` only casts the table to the dtype of its argument)",
                           (Replace(cast.node, atom_code(ctx, cast.node.args[0], cast.node)),))
        if cast.method == "argument-device":  # ``_like(t, position_ids)`` ends in ``t.to(ref)``: move only
            code = ctx.code(cast.target_expr)
            return FixPlan("safe", f"pass `{code}.device` (the table stays float and still moves)",
                           (Replace(cast.target_expr, f"{code}.device"),))
        if cast.method == "container":  # ``sin = pos.new_zeros(...)``: make the container float32
            torch, imports = ctx.torch_name()
            return FixPlan("safe", f"allocate it as `{torch}.float32`",
                           (Replace(cast.node, append_keyword(ctx, cast.node, f"dtype={torch}.float32")), *imports))
        if cast.method.startswith("default-tensor:"):
            # ``like`` left out falls back to the positions: pass the activation the tables are meant for.
            act = cast.scope.activation
            name = cast.method.split(":", 1)[1]
            if act is None:
                return None
            return FixPlan("safe", f"pass `{name}={act}`",
                           (Replace(cast.node, append_keyword(ctx, cast.node, f"{name}={act}")),))
        if cast.method == "call" or cast.method.startswith("default:"):
            # The integer dtype reaches a same-file function that casts its tables to it: as an argument,
            # or as the fallback of a dtype argument the call leaves out.
            act = cast.scope.activation
            torch, imports = ctx.torch_name()
            replacement = f"{act}.dtype" if act is not None else f"{torch}.float32"
            extra = imports if act is None else ()
            if cast.method == "call":
                return FixPlan("safe", f"pass `{replacement}` instead", (Replace(cast.target_expr, replacement), *extra))
            name = cast.method.split(":", 1)[1]
            return FixPlan("safe", f"pass `{name}={replacement}`",
                           (Replace(cast.node, append_keyword(ctx, cast.node, f"{name}={replacement}")), *extra))
        branches = _integer_branch(ctx, cast)
        if branches:
            # ``out_dtype = x.dtype if x is not None else position_ids.dtype``: only the integer branch is wrong.
            torch, imports = ctx.torch_name()
            return FixPlan("safe", f"use `{torch}.float32` instead of `{ctx.code(branches[0])}` where the dtype is "
                                   f"chosen (the other branch still decides when it applies)",
                           (*(Replace(b, f"{torch}.float32") for b in branches), *imports))
        fallback = _integer_fallback(ctx, cast)
        if fallback is not None:
            torch, imports = ctx.torch_name()
            description = f"fall back to `{torch}.float32` instead of `{ctx.code(fallback)}` (a dtype the caller " \
                          f"passes still wins"
            param = (dtype_fallback(cast.scope, cast.target_expr) or ("", None))[0]
            if _left_out_in_file(ctx, cast, param):
                # ``cos, sin = self.rotary_emb(position_ids)``: those tables were integer and kept the queries'
                # dtype in ``q * cos``; float32 ones make 16-bit queries float32 (the attention then raises).
                return FixPlan("unsafe", f"{description}; calls here leave `{param}` out, and their float32 tables "
                                         f"would make 16-bit queries float32)",
                               (Replace(fallback, f"{torch}.float32"), *imports))
            return FixPlan("safe", f"{description})", (Replace(fallback, f"{torch}.float32"), *imports))
        act = cast.scope.activation
        receiver = cast_receiver(cast.node) or cast.node
        tensor = _tensor_target(ctx, cast)
        if act is None:
            # No activation here to take the dtype from: the callers that rotate with the tables cast them.
            at_callers = cast_at_callers(ctx, cast)
            if at_callers is not None:
                return at_callers
        if tensor is not None and cast.method == "to":
            # ``.to(positions)`` also moves the table to the positions' device: keep that part.
            # The table stays float32: a cast to the query dtype belongs at the attention boundary.
            code = ctx.code(tensor)
            return FixPlan("safe", f"keep only the move to `{code}.device` (the table stays float)",
                           (Replace(tensor, f"{code}.device"),))
        type_name = isinstance(cast.target_expr, ast.Call) and isinstance(cast.target_expr.func, ast.Attribute) \
            and cast.target_expr.func.attr == "type"
        if act is not None and cast.target_expr is not None:
            # ``t.type(ids.type())`` names a device too ("torch.cuda.LongTensor"): the activation's type keeps it.
            replacement = act if cast.method == "type_as" else f"{act}.type()" if type_name else f"{act}.dtype"
            return FixPlan("safe", f"cast to `{replacement}` (the activation dtype) instead",
                           (Replace(cast.target_expr, replacement),))
        if type_name and cast.method == "type":  # ``t.type(ids.type())`` without an activation: move only
            tensor = cast.target_expr.func.value  # type: ignore[union-attr]
        if tensor is not None:  # ``.type_as(position_ids)`` without an activation: the device move stays
            return FixPlan("safe", f"keep the table in float32 and only move it to `{ctx.code(tensor)}.device`",
                           (Replace(cast.node, f"{ctx.code(receiver)}.to({ctx.code(tensor)}.device)"),))
        kept_args = _other_arguments(ctx, cast)
        if kept_args:
            # ``cache.to(positions.device, dtype=positions.dtype)``: the device move stays.
            return FixPlan("safe", "keep only the device move (the table stays float)",
                           (Replace(cast.node, f"{ctx.code(cast.node.func)}({', '.join(kept_args)})"),))
        owner = ctx.model.statement_of.get(id(cast.node))
        if isinstance(owner, ast.Assign) and owner.value is cast.node and isinstance(receiver, ast.Name) \
                and [ctx.code(t) for t in owner.targets] == [receiver.id]:
            # ``cos = cos.to(dtype)`` would become ``cos = cos``: the line goes (``pass`` if it is all its block has).
            edit = Replace(owner, "pass") if alone_in_block(cast.scope.node, owner) else DeleteLines(owner)
            return FixPlan("safe", "keep the table in float32 (drop the integer cast)", (edit,))
        if cast.scope.node is not None and _FLOAT64.search(ctx.spans.text(cast.scope.node)):
            # Tables computed in float64 (Flux's ``rope``) would come back float64 without the cast: float32 is
            # what float positions gave before.
            return FixPlan("safe", "cast the table to float32 instead of the integer dtype",
                           (Replace(cast.node, f"{atom_code(ctx, receiver, cast.node)}.float()"),))
        return FixPlan("safe", "keep the table in float32 (drop the integer cast)",
                       (Replace(cast.node, atom_code(ctx, receiver, cast.node)),))


_FLOAT64 = re.compile(r"float64|\bdouble\b")


def _self_attribute(node: ast.expr | None) -> bool:
    """``self.dtype``: a dtype the module reports (a property, a config field), not a tensor's."""
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"


def _dtype_keyword_fix(ctx: RuleContext, cast) -> FixPlan | None:  # type: ignore[no-untyped-def]
    """``_expand(table, positions)`` ends in ``.to(device=positions.device, dtype=positions.dtype)``: drop the
    ``dtype=`` there, when the helper is private and every call of it in the file hands it integer positions
    (each such call is one of these findings), so no caller relied on the cast."""
    name = (dotted(cast.node.func) or [""])[-1]
    info = ctx.model.classes.get(cast.scope.symbol.split(".")[0])
    fn = same_file_callable(ctx.model, None, name) or same_file_callable(ctx.model, info, name, method=True)
    calls = {id(c.node) for c in ctx.model.casts if c.method == cast.method
             and (dotted(c.node.func) or [""])[-1] == name}
    found = dtype_keyword(fn, cast.target.param) if fn is not None and cast.target.param else None
    if found is None or not name.startswith("_") or calls_in_text(ctx.source, name) != len(calls):
        return None
    call, keyword = found
    kept = [ctx.code(a) for a in call.args] + [ctx.code(k) for k in call.keywords if k is not keyword]
    return FixPlan("safe", f"drop `dtype=` from `{name}`'s move (every call here hands it integer positions, "
                           f"so it only ever truncated the table)",
                   (Replace(call, f"{ctx.code(call.func)}({', '.join(kept)})"),))


def _other_arguments(ctx: RuleContext, cast) -> list[str]:  # type: ignore[no-untyped-def]
    """The arguments of a ``.to(...)`` cast other than its dtype (a device, ``non_blocking=``), as code."""
    node = cast.node
    if cast.method != "to" or not isinstance(node, ast.Call) or cast.target_expr is None:
        return []
    args = [ctx.code(a) for a in node.args if a is not cast.target_expr]
    args += [f"{k.arg}={ctx.code(k.value)}" for k in node.keywords if k.value is not cast.target_expr and k.arg]
    return args if len(args) < len(node.args) + len(node.keywords) else []


def _left_out_in_file(ctx: RuleContext, cast, param: str) -> bool:  # type: ignore[no-untyped-def]
    """A call in this file of the cast's ``forward``, through a module holding its class in code the prefilter left
    unparsed (so no fix of its own passes the dtype there), that passes nothing for ``param``."""
    fn = cast.scope.node
    if not param or not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    cls_name, _, name = cast.scope.symbol.rpartition(".")
    if any(True for _ in calls_of(ctx, cls_name or None, name, through_held=name in ("forward", "__call__"))):
        return False  # calls this file's analysis sees get a fix of their own (``dtype=x.dtype`` passed there)
    if not cls_name or name not in ("forward", "__call__"):
        return False
    # Holders the prefilter left unparsed: ``self.rotary_emb = RotaryEmbedding(...)`` then
    # ``self.rotary_emb(position_ids)``, read from the file's text.
    params = [a.arg for a in fn.args.args][1:]
    slot = params.index(param) if param in params else len(params)
    for attr in set(re.findall(rf"self\.(\w+)\s*=\s*(?:[\w.]+\.)?{re.escape(cls_name)}\(", ctx.source)):
        for given in re.findall(rf"self\.{re.escape(attr)}\(([^()]*)\)", ctx.source):
            parts = [g for g in given.split(",") if g.strip()]
            if f"{param}=" not in given.replace(" ", "") and len(parts) <= slot:
                return True
    return False


def _integer_fallback(ctx: RuleContext, cast) -> ast.expr | None:  # type: ignore[no-untyped-def]
    """In ``x.to(dtype or position_ids.dtype)`` (or ``out = dtype or position_ids.dtype`` ... ``x.to(out)``),
    the ``position_ids.dtype`` operand: the dtype a call without ``dtype`` gets."""
    found = dtype_fallback(cast.scope, cast.target_expr)
    fallback = found[1] if found is not None else None
    if fallback is None:
        return None
    name = fallback.value.id  # type: ignore[attr-defined]
    if name == cast.target.param or (cast.target.dtype is not Dt.INT and name in cast.scope.params
                                     and _made_float_for_the_phase(cast, name)):
        return fallback
    return None


def _integer_branch(ctx: RuleContext, cast) -> list[ast.expr]:  # type: ignore[no-untyped-def]
    """In ``out = a.dtype if cond else ids.dtype`` (or ``out`` assigned ``a.dtype`` on one path and ``ids.dtype`` on
    another) ... ``t.to(out)``, the expressions that name the integer tensor's dtype (``ids`` being the integer
    tensor the finding names); empty unless another path assigns something else."""
    expr, source, fn = cast.target_expr, cast.target.param, cast.scope.node
    if not isinstance(expr, ast.Name) or fn is None or expr.id in cast.scope.params:
        return []
    values = []
    for node in ast.walk(fn):
        if isinstance(node, (ast.AugAssign, ast.AnnAssign)) and isinstance(node.target, ast.Name) \
                and node.target.id == expr.id:
            return []
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id == expr.id:
            values.append(node.value)
    candidates = [b for v in values for b in ((v.body, v.orelse) if isinstance(v, ast.IfExp) else (v,))]
    # The integer tensor the finding names, or (``integer dtype on some paths``) ids or positions by name.
    integer = [b for b in candidates if isinstance(b, ast.Attribute) and b.attr == "dtype"
               and isinstance(b.value, ast.Name) and (b.value.id == source if source is not None
                                                      else bool(POSITION_NAMES.match(b.value.id)
                                                                or INT_BY_NAME.match(b.value.id)))]
    return integer if integer and len(integer) < len(candidates) else []


def _tensor_target(ctx: RuleContext, cast) -> ast.expr | None:  # type: ignore[no-untyped-def]
    """The tensor in ``t.to(positions)`` / ``t.type_as(positions)``, whose device the cast also takes;
    None when the argument is a dtype (``.to(pos.dtype)``, ``.to(out_dtype)``, ``.to(torch.long)``)."""
    node, expr = cast.node, cast.target_expr
    if cast.method not in ("to", "type_as") or expr is None or not node.args or node.args[0] is not expr:
        return None
    return expr if spelled_as_tensor(ctx, expr) else None


def phase_source_dtype(ctx: RuleContext, cast) -> bool:  # type: ignore[no-untyped-def]
    """``cos.to(grid_coord.dtype)`` where ``grid_coord`` is the parameter this function's own phase takes its
    positions from (``grid_coord[:, a, None].float() * inv_freq``): whatever the name, positions that the
    function had to convert to float for the phase, so not a floating dtype the tables belong in."""
    target = cast.target
    name = target.param
    if not (target.has(Role.DTYPE) and target.dtype in (Dt.RUNTIME, Dt.UNKNOWN)) or name is None \
            or name not in cast.scope.params or ACTIVATION_PARAMS.match(name):
        return False
    # ``(hops.unsqueeze(-1) * self.inv_freq).type_as(hops)``: the phase cast back to the dtype of the very
    # counts it was made from (not converted first) is a no-op for float ones and a truncation for integer ones.
    return any(p.scope.symbol == cast.scope.symbol and p.positions.param == name
               and (p.positions.dtype is Dt.FULL or (p.positions.dtype is Dt.UNKNOWN and cast.receiver.has(Role.PHASE)
                                                     and p.node is cast.receiver.product))
               for p in ctx.model.products)


def positions_dtype(cast) -> bool:  # type: ignore[no-untyped-def]
    """``.to(positions.dtype)`` where ``positions`` is a positions parameter whose dtype the analysis does not
    know: integer ids in most callers, and a table in the positions' dtype is never the attention's."""
    target = cast.target
    if not (target.has(Role.DTYPE) and target.dtype in (Dt.RUNTIME, Dt.UNKNOWN)):
        return False
    name = target.param
    expr = cast.target_expr
    if name is None and isinstance(expr, ast.Attribute) and expr.attr == "dtype" and isinstance(expr.value, ast.Name):
        # ``positions = positions.flatten()`` (or ``+ offsets``) first: the name still holds the parameter's ids.
        name = expr.value.id
    return name is not None and POSITION_NAMES.match(name) is not None and name in cast.scope.params


def _made_float_for_the_phase(cast, name: str) -> bool:  # type: ignore[no-untyped-def]
    """In a ``forward`` (called from outside the file, so no call site says what it gets), the parameter is
    converted to float32 for the phase (``coords.float() * scale``) and is no activation: coordinates or ids
    that callers pass as integers, as the conversion says."""
    fn = cast.scope.node
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or fn.name != "forward" \
            or ACTIVATION_PARAMS.match(name) or not cast.receiver.has(Role.TABLE):
        return False
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "float" \
                and not node.args and isinstance(node.func.value, ast.Name) and node.func.value.id == name:
            return True
    return False


def _integer_kind(ctx: RuleContext, cast: Cast) -> str:
    """How a dtype passed to a table-casting callee is integer: always, on some paths, or once a quantised layer
    of this file (one holding an integer weight) replaced the layer it is read from (``self.q_proj.weight.dtype``)."""
    target = cast.target_expr
    if isinstance(target, ast.Attribute) and target.attr == "dtype" and isinstance(target.value, ast.Attribute) \
            and target.value.attr in ctx.model.integer_weights:
        return (f"an integer dtype once quantisation has replaced that layer (this file's quantised layers hold an "
                f"integer `{target.value.attr}`)")
    if cast.target.dtype is Dt.INT:
        return "an integer dtype"
    if ctx.model.integer_weights:
        held = ", ".join(f"`{name}`" for name in sorted(ctx.model.integer_weights))
        return f"an integer dtype on some paths (this file's quantised layers hold an integer {held})"
    return "an integer dtype on some paths"
