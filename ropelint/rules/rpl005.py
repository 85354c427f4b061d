from __future__ import annotations

import ast

from ..diagnostics import FixPlan, Replace
from ..model.interpreter import HANDED_ON_IDS, count_operand
from ..model.names import dotted
from ..model.values import Dt, Role
from .base import Rule, RuleContext, append_keyword, later_loads
from .callsite import caller_dtype_fix, calls_of, enclosing_function
from .casts import float32_fix
from .keep import keep_fix


class LowPrecisionPositions(Rule):
    code = "RPL005"

    def check(self, ctx: RuleContext) -> None:
        uses = [(p.positions, p.node, p.scope, "the phase at line") for p in ctx.model.products]
        uses += [(h.arg, h.call, h.scope, f"`{h.callee}`, which forms the phase from them, called at line")
                 for h in ctx.model.helper_positions]
        helper_calls = {id(h.call) for h in ctx.model.helper_positions}
        for pos, used_at, scope, what in uses:
            if not pos.dtype.can_be_16bit:
                continue
            for site in pos.sites:
                message = (f"positions get a dtype that can be 16-bit here and reach {what} "
                           f"{ctx.line_of(used_at)}: bfloat16 cannot tell 256 from 257 (8184..8195 all become 8192)")
                # Counted where the phase is formed: float32 positions for it; counted elsewhere (a model's helper
                # returning ids): int64 ids, as every other caller of that helper expects them.
                counted = _counted_fix(ctx, site) if _function_of(ctx, site) is not _function_of(ctx, used_at) \
                    else None
                fix = counted or float32_fix(ctx, site, "positions", scope)
                read = next((r for r in pos.reads if r.node is site and r.follows_module_casts), None)
                if fix is None and read is not None:
                    # ``self.position_range[start:end]`` of a float32 buffer of positions: module casts round it.
                    fix = keep_fix(ctx, read.ref, "positions")[0]
                if fix is not None and fix.safety == "unsafe" and _only_into_phase_helpers(ctx, site, helper_calls):
                    fix = FixPlan("safe", "build the positions in float32 (they only reach the helpers that form "
                                          "the phase)", fix.edits)
                elif fix is not None and fix.safety == "unsafe":
                    # Built in a dtype the callers pass: passing float32 at this file's calls may be safe.
                    fix = caller_dtype_fix(ctx, site) or _int64_ids_fix(ctx, site) or fix
                if id(site) in ctx.model.counted_arguments:
                    message, fix = _mask_argument_message(ctx, site), _mask_argument_fix(ctx, site)
                ctx.report(self.code, site, message, scope, fix)
        reported = {id(site) for pos, _, _, _ in uses if pos.dtype.can_be_16bit for site in pos.sites}
        for pos, used_at, scope, what in uses:
            # ``t = self.positions[a:b]`` then ``t.float()``: a float32 buffer of positions a module cast rounded
            # before the widening (which restores the dtype, not the digits).
            for read in pos.reads if not pos.dtype.can_be_16bit else ():
                registered = next((r.value for r in ctx.model.registrations if r.ref is read.ref), None)
                if not read.follows_module_casts or id(read.node) in reported or not pos.has(Role.POSITIONS) \
                        or registered is None or registered.dtype not in (Dt.FULL, Dt.RUNTIME):
                    continue  # (an integer buffer stays integer through module casts)
                reported.add(id(read.node))
                ctx.report(self.code, read.node,
                           f"positions read from the {read.ref.describe()} `self.{read.ref.name}`, which "
                           f"`module.bfloat16()`/`.half()` round, reach {what} {ctx.line_of(used_at)}; "
                           f"`.float()` at use restores nothing: bfloat16 cannot tell 256 from 257", scope,
                           keep_fix(ctx, read.ref, "positions")[0])
        for counted in ctx.model.counted_ids:
            site = counted.arg.site
            if site is None or id(site) in reported:
                continue
            reported.add(id(site))
            if id(site) in ctx.model.counted_arguments:
                ctx.report(self.code, site, _mask_argument_message(ctx, site), counted.scope,
                           _mask_argument_fix(ctx, site))
                continue
            message = (f"`{counted.callee}` counted in a dtype that can be 16-bit here and handed on as position ids: "
                       f"the rotary that takes them gets rounded positions (bfloat16 cannot tell 256 from 257; "
                       f"8184..8195 all become 8192)")
            ctx.report(self.code, site, message, counted.scope,
                       _int64_fix(ctx, site, "count the ids in int64 (what position ids are; the rotary widens them)"))


def _mask_argument_message(ctx: RuleContext, site: ast.AST) -> str:
    helper = ast.unparse(ctx.model.counted_arguments[id(site)].func)
    return (f"`{ctx.code(site)}` has a dtype that can be 16-bit and `{helper}` counts position ids over it: the "
            f"rotary gets rounded positions (bfloat16 cannot tell 256 from 257; 8184..8195 all become 8192)")


def _mask_argument_fix(ctx: RuleContext, site: ast.AST) -> FixPlan:
    """``ids_from_mask(mask.long())``: the helper counts over an int64 mask (a 0/1 mask converts exactly; the ids
    come back int64, and a product with the mask inside the helper stays int64); the caller's own mask keeps its
    dtype for the attention bias."""
    text = ctx.code(site)
    wrapped = text if isinstance(site, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)) else f"({text})"
    return FixPlan("safe", "hand the count an int64 mask (a 0/1 mask converts exactly; the ids come back int64, "
                           "what position ids are)", (Replace(site, f"{wrapped}.long()"),))


def _only_into_phase_helpers(ctx: RuleContext, site: ast.AST, helper_calls: set[int]) -> bool:
    """The positions go nowhere but into same-file helpers that form the phase from them: ``site`` is itself
    an argument of such a call (``self._axis_freqs(torch.arange(n, dtype=...))``); or a local that is only
    reshaped and handed to such calls (``t_pos = ...``, ``self._section_angles(t_pos, ...)``); or what a private
    function returns (``t = torch.arange(...)``, rescaled, ``return t + offset``) and every call of that function
    in the file is such an argument (``self._axis_freqs(self._axis_positions(h, ...))``)."""
    stmt = ctx.model.statement_of.get(id(site))
    for call in _calls_in(stmt):
        if id(call) in helper_calls and any(a is site for a in call.args):
            return True
    owner = enclosing_function(ctx, stmt) if stmt is not None else None
    if owner is None or not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1 \
            or not isinstance(stmt.targets[0], ast.Name) or stmt.value is not site:
        return False
    cls_name, fn = owner
    name = stmt.targets[0].id
    returned = handed = False
    for load in later_loads(fn, stmt, name):
        user = ctx.model.statement_of.get(id(load))
        rebinds = isinstance(user, ast.Assign) and [ast.unparse(t) for t in user.targets] == [name]
        # ``t_pos = t_pos[:, :, None].expand(...)`` then ``self._section_angles(t_pos, ...)``: straight in.
        into = any(id(c) in helper_calls and load in c.args for c in _calls_in(user))
        # ``return self.forward(t)`` hands the positions to the phase; only a bare ``return t`` gives them away.
        returned = returned or (isinstance(user, ast.Return) and not into)
        handed = handed or into
        if not (isinstance(user, ast.Return) or rebinds or into or _in_test(fn, load)):
            return False
    if not returned:
        return handed
    if not fn.name.startswith("_"):
        return False
    calls = list(calls_of(ctx, cls_name, fn.name))
    return bool(calls) and all(any(id(c) in helper_calls and call in c.args for c in ast.walk(caller)
                                   if isinstance(c, ast.Call)) for caller, call in calls)


def _calls_in(stmt: ast.AST | None) -> list[ast.Call]:
    return [n for n in ast.walk(stmt) if isinstance(n, ast.Call)] if stmt is not None else []


def _in_test(fn: ast.AST, node: ast.AST) -> bool:
    """``node`` sits in an ``if``/``while`` test or a comparison: it decides a branch, not a value."""
    return any(isinstance(n, (ast.If, ast.While, ast.Compare)) and any(m is node for m in ast.walk(
        n.test if isinstance(n, (ast.If, ast.While)) else n)) for n in ast.walk(fn))


# Where position ids live: the interpreter's names for ids handed on, and the plain ``positions``.
_IDS_NAMES = (*HANDED_ON_IDS, "positions")


def _int64_ids_fix(ctx: RuleContext, site: ast.AST) -> FixPlan | None:
    """``cache_position = torch.arange(past, past + n, dtype=inputs_embeds.dtype)``: position ids that also index
    caches and build masks elsewhere, made in the activations' dtype. Such ids are int64 everywhere else (the
    range's default), which the rotary widens and caches and masks take as they are; float32 would not index."""
    stmt = ctx.model.statement_of.get(id(site))
    if not (isinstance(stmt, ast.Assign) and stmt.value is site and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name) and stmt.targets[0].id in _IDS_NAMES):
        return None
    moved = site.func.value if isinstance(site, ast.Call) and isinstance(site.func, ast.Attribute) \
        and site.func.attr == "to" and len(site.args) == 1 and not site.keywords \
        and isinstance(site.args[0], ast.Name) else None
    if isinstance(moved, ast.Call) and (dotted(moved.func) or [""])[-1] == "arange" \
            and not any(k.arg == "dtype" for k in moved.keywords):
        # ``torch.arange(past, past + n).to(inputs_embeds)``: meant as a device move; the ids stay int64.
        return FixPlan("safe", f"move the ids to `{site.args[0].id}.device` only (int64, what position ids are "
                               f"everywhere else; the rotary widens them)",
                       (Replace(site.args[0], f"{site.args[0].id}.device"),))
    if not (isinstance(site, ast.Call) and (dotted(site.func) or [""])[-1] == "arange"):
        return None
    chosen = next((k for k in site.keywords if k.arg == "dtype"), None)
    if chosen is None or not (isinstance(chosen.value, ast.Attribute) and chosen.value.attr == "dtype"):
        return None
    return _int64_fix(ctx, site, "build the ids as int64 (what position ids are everywhere else; the rotary widens "
                                 "them)")


def _function_of(ctx: RuleContext, node: ast.AST) -> ast.AST | None:
    found = enclosing_function(ctx, node)
    return found[1] if found is not None else None


def _counted_fix(ctx: RuleContext, site: ast.AST) -> FixPlan | None:
    """Positions counted over a mask (``attention_mask.cumsum(-1) - 1``, a mask in the activations' dtype, or ones
    like them): counted in int64, what position ids are; the rotary widens them, and indexing still works."""
    if not (isinstance(site, ast.Call) and count_operand(site, ctx.imports) is not None):
        return None
    return _int64_fix(ctx, site, "count the positions in int64 (what position ids are; the rotary widens them)")


def _int64_fix(ctx: RuleContext, site: ast.AST, description: str) -> FixPlan | None:
    """The range or count ``site`` made in int64: its ``dtype=`` becomes ``torch.long``, or is added
    (``attention_mask.cumsum(-1, dtype=torch.long)``: counted in int64, as an integer mask counts; a float mask stays
    as it is for the attention bias)."""
    if not isinstance(site, ast.Call):
        return None
    torch, imports = ctx.torch_name()
    chosen = next((k for k in site.keywords if k.arg == "dtype"), None)
    if chosen is None and count_operand(site, ctx.imports) is not _counted_name(ctx, site):
        # ``attention_mask.long().cumsum(-1)``: already counted in int64; only the product with the mask promotes.
        again = _masked_again(ctx, site)
        return FixPlan("safe", description, tuple(again)) if again else None
    edit = Replace(chosen.value, f"{torch}.long") if chosen is not None else \
        Replace(site, append_keyword(ctx, site, f"dtype={torch}.long"))
    return FixPlan("safe", description, (edit, *_masked_again(ctx, site), *imports))


def _counted_name(ctx: RuleContext, site: ast.Call) -> ast.AST | None:
    """The mask a count runs over, through an integer cast (``attention_mask.long().cumsum(-1)``)."""
    counted = count_operand(site, ctx.imports)
    if isinstance(counted, ast.Call) and isinstance(counted.func, ast.Attribute) \
            and counted.func.attr in ("long", "int") and not counted.args:
        return counted.func.value
    return counted


def _masked_again(ctx: RuleContext, site: ast.Call) -> list[Replace]:
    """``(mask.cumsum(-1) - 1).clamp_min(0) * mask``: the count multiplied by the float mask it counted promotes
    back to the mask's dtype, so that operand is taken as int64 too (``* mask.long()``)."""
    counted = _counted_name(ctx, site)
    stmt = ctx.model.statement_of.get(id(site))
    if not isinstance(counted, ast.Name) or stmt is None:
        return []
    edits = []
    for node in ast.walk(stmt):
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Add, ast.Sub)):
            for side, other in ((node.left, node.right), (node.right, node.left)):
                if isinstance(other, ast.Name) and other.id == counted.id \
                        and any(n is site for n in ast.walk(side)):
                    edits.append(Replace(other, f"{other.id}.long()"))
    return edits
