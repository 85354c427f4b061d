from __future__ import annotations

import ast
import re
from collections import defaultdict

from ..diagnostics import DeleteLines, FixPlan, InsertBeforeStatement, NodeEdit, Replace
from ..model.events import Cast, Trig, TrigInHelper
from ..model.interpreter import (
    ACTIVATION_PARAMS,
    call_params,
    held_class,
    is_cast_call,
    is_trig_call,
    same_file_callable,
)
from ..model.names import dotted, qualname
from ..model.values import Dt, Role
from .base import (
    Rule,
    RuleContext,
    alone_in_block,
    atom_code,
    assigned_name,
    calls_in_text,
    cast_receiver,
    later_loads,
    names_in,
    only_read_by,
    shape_only_reads,
)
from .rpl001 import phase_source_dtype, positions_dtype


class TrigAfterDowncast(Rule):
    code = "RPL007"

    def check(self, ctx: RuleContext) -> None:
        # A cast to the dtype of positions parameters (int64 ids from most callers), or of the counts the phase
        # was made from, is RPL001's.
        phase_casts = {id(c.node): c for c in ctx.model.casts
                       if c.receiver.has(Role.PHASE) and c.target.dtype is not Dt.INT and not positions_dtype(c)
                       and not phase_source_dtype(ctx, c)}
        for cast, found in _by_cast(ctx.model.trigs, phase_casts):
            message = (f"phase cast to a dtype that can be 16-bit before cos/sin at line {ctx.line_of(found[0].node)}: "
                       f"the rounding of the angle is amplified by its size; take cos/sin in float32 and cast the tables")
            ctx.report(self.code, cast.node, message, cast.scope, self._fix(ctx, cast, found))
        for cast, calls in _by_cast(ctx.model.helper_trigs, phase_casts):
            message = (f"phase cast to a dtype that can be 16-bit, then passed to `{calls[0].callee}` which takes "
                       f"its cos/sin (line {ctx.line_of(calls[0].call)}); cast the tables instead")
            ctx.report(self.code, cast.node, message, cast.scope, self._helper_fix(ctx, cast, calls))
        # Casts whose angles reach a cos/sin this file takes (on any branch) are reported above, or not at all.
        seen = {id(site) for event in (*ctx.model.trigs, *ctx.model.helper_trigs) for site in event.arg.sites}
        for cast in phase_casts.values():
            if id(cast.node) in seen or cast.receiver.roles != {Role.PHASE} or not cast.target.dtype.can_be_16bit \
                    or cast.receiver.dtype is not Dt.UNKNOWN:
                continue
            # The angles of a module this file cannot see into (``self.target.rotary.phase_table(device)``), cast
            # for another model that takes their cos/sin out of sight (a speculative draft sharing the table).
            split = self._split(ctx, cast)
            fix = None
            if split is not None and cast.method == "to" and len(cast.node.args) == 1 and not cast.node.keywords:
                fix = FixPlan("unsafe", "keep the angles float32 (the module taking their cos/sin casts its tables; "
                                        "code elsewhere may depend on the cast dtype)",
                              (Replace(cast.node, split[0]),))
            ctx.report(self.code, cast.node,
                       f"phase cast to `{ctx.code(cast.target_expr) if cast.target_expr is not None else 'a dtype'}`, "
                       f"which can be 16-bit, and handed on for cos/sin: bfloat16 keeps 8 bits of angles that reach "
                       f"thousands of radians; cast the tables instead", cast.scope, fix)

    @staticmethod
    def _split(ctx: RuleContext, cast: Cast) -> tuple[str, str] | None:
        """(receiver source, cast tail such as ``.to(q.dtype)``) of ``receiver.to(...)``; for
        ``torch.as_tensor(rows, dtype=like.dtype)``, the call made float32 and ``.to(like.dtype)``."""
        if cast.method == "as_tensor" and isinstance(cast.node, ast.Call) and cast.target_expr is not None:
            prefix = (dotted(cast.node.func) or [""])[:-1]
            torch = ".".join(prefix) if prefix else "torch"
            parts = [ctx.code(a) for a in cast.node.args] + [
                f"dtype={torch}.float32" if k.value is cast.target_expr else ctx.code(k) for k in cast.node.keywords]
            return f"{ctx.code(cast.node.func)}({', '.join(parts)})", f".to({ctx.code(cast.target_expr)})"
        if not isinstance(cast.node.func, ast.Attribute):
            return None
        if (qualname(cast.node.func, ctx.imports) or "").startswith("torch.Tensor.") and cast.node.args:
            # ``torch.Tensor.to(phase, dtype)``: the method called unbound; its first argument is the receiver.
            rest = [ctx.code(a) for a in cast.node.args[1:]] + [ctx.code(k) for k in cast.node.keywords]
            return atom_code(ctx, cast.node.args[0], cast.node), f".{cast.node.func.attr}({', '.join(rest)})"
        receiver_code = ctx.code(cast.node.func.value)
        cast_code = ctx.code(cast.node)
        if cast_code.startswith(f"({receiver_code})"):
            receiver_code = f"({receiver_code})"  # ``(pos * inv_freq).type_as(x)``: the author's parentheses stay
        if not cast_code.startswith(receiver_code):
            return None
        # ``(torch.einsum(...)\n    .to(x.device, x.dtype))``: the line break before the cast only parses inside the
        # author's parentheses, not after the cos/sin the tail moves to.
        return receiver_code, re.sub(r"^[\s\\]+", "", cast_code[len(receiver_code):])

    def _fix(self, ctx: RuleContext, cast: Cast, trigs: list[Trig]) -> FixPlan | None:
        split = self._split(ctx, cast)
        if split is None:
            return None
        if any(t.scope.symbol != cast.scope.symbol for t in trigs):
            return _returned_fix(ctx, cast, trigs) or _stored_fix(ctx, cast, [t.scope.node for t in trigs], split[0]) \
                or _mirrored_fix(ctx, cast, trigs)
        owner = ctx.model.statement_of.get(id(cast.node))
        if owner is not None and alone_in_block(cast.scope.node, owner):
            # ``if x.dtype == torch.float16: angles = angles.half()`` (``elif ...: .bfloat16()``): a cast chosen per
            # branch, which one cast of the tables cannot stand for.
            return _branch_cast_fix(ctx, cast, owner, trigs)
        receiver_code, tail = split
        edits: list[NodeEdit] = []
        chained = all(isinstance(t.node.func, ast.Attribute) and t.node.func.value is cast.node for t in trigs)
        if chained:
            for t in trigs:
                edits.append(Replace(t.node, f"{receiver_code}.{t.node.func.attr}(){tail}"))  # type: ignore[attr-defined]
            return FixPlan("safe", "take cos/sin in float32, then cast the tables", tuple(edits))
        if _widened_at_once(cast):
            # ``freqs.to(x.dtype).float()``: float32 either way, only the rounding goes.
            return FixPlan("safe", "take cos/sin of the float32 phase (the cast and back only rounded it)",
                           (Replace(cast.node, receiver_code),))
        if len(trigs) == 1 and _is_complex(trigs[0].node) and any(n is cast.node for n in ast.walk(trigs[0].node)):
            # ``torch.exp(1j * phase.to(x.dtype))``: complex64 either way; only the rounding goes.
            return FixPlan("safe", "build the rotation from the float32 phase", (Replace(cast.node, receiver_code),))
        # ``phase.cos()`` reads its receiver, ``torch.cos(phase)`` its argument, ``torch.polar(r, phase)`` its last.
        receivers = [_angle(t.node) for t in trigs]
        names = [_widened(r)[0] for r in receivers]
        allowed = {id(n) for n in names} | shape_only_reads(cast.scope.node)
        allowed |= _rearranged_into(cast.scope.node, allowed)
        only_trig = only_read_by(ctx, cast.node, cast.scope.node, allowed)
        assigned = assigned_name(ctx, cast.node)
        if only_trig and assigned is not None and assigned[1] == receiver_code:
            edits.append(DeleteLines(assigned[0]))  # ``freqs = freqs.to(x.dtype)``: the line goes
        else:
            edits.append(Replace(cast.node, receiver_code))
        for t, r in zip(trigs, receivers):
            # The tables take the cast's dtype, unless the angle went back to float32 before the trig
            # (then they were float32 already) or the trig is ``polar`` (complex: the cast would drop it).
            if not _widened(r)[1] and not _is_complex(t.node):
                edits.append(Replace(t.node, f"{ctx.code(t.node)}{tail}"))
        if only_trig:
            return FixPlan("safe", "take cos/sin in float32, then cast the tables", tuple(edits))
        return FixPlan("unsafe", "take cos/sin in float32, then cast the tables "
                                 "(other uses of the cast phase stay float32)", tuple(edits))

    def _helper_fix(self, ctx: RuleContext, cast: Cast, calls: list[TrigInHelper]) -> FixPlan | None:
        """Drop the cast and cast what each helper call returns: ``apply_rotary(q, freqs).to(q.dtype)``."""
        split = self._split(ctx, cast)
        helper = _helper(ctx, cast, calls[0].callee)
        if split is not None and any(c.scope.symbol != cast.scope.symbol for c in calls):
            # Cached by one method, handed to the rotary by another: the cache can stay float32.
            return _stored_fix(ctx, cast, [_callee(ctx, c) for c in calls], split[0])
        if split is None or helper is None:
            return None
        if _casts_its_tables(helper):
            # ``self._set_tables(freqs, ..., dtype)`` casts every table it makes: the phase can stay float32.
            assigned = assigned_name(ctx, cast.node)
            receiver_code = split[0]
            edit = DeleteLines(assigned[0]) if assigned is not None and assigned[1] == receiver_code \
                else Replace(cast.node, receiver_code)
            return FixPlan("safe", f"pass the float32 phase to `{calls[0].callee}` (it casts the tables it makes)",
                           (edit,))
        if isinstance(calls[0].call.func, ast.Attribute):
            return None  # a method: casting what it returns is not known to be right
        if any(isinstance(n, ast.Return) and isinstance(n.value, (ast.Tuple, ast.List)) for n in ast.walk(helper)):
            return per_table_fix(ctx, cast, calls, helper, split)
        arguments = [arg for c in calls for arg in c.call.args if isinstance(arg, ast.Name)]
        if not only_read_by(ctx, cast.node, cast.scope.node, {id(a) for a in arguments}):
            return None
        receiver_code, tail = split
        target = cast.target_expr
        target_activation = (target.value.id if isinstance(target, ast.Attribute) and target.attr == "dtype"
                             and isinstance(target.value, ast.Name) else
                             target.id if isinstance(target, ast.Name) and cast.method == "type_as" else None)
        activations = cast.scope.params
        safe = target_activation is not None and ACTIVATION_PARAMS.match(target_activation) is not None
        edits: list[NodeEdit] = []
        assigned = assigned_name(ctx, cast.node)  # only_read_by above made sure there is one
        if assigned is not None and assigned[1] == receiver_code:
            edits.append(DeleteLines(assigned[0]))  # ``freqs = freqs.to(q.dtype)``: the line goes
        else:
            edits.append(Replace(cast.node, receiver_code))
        for c in calls:
            own = next((a.id for a in c.call.args if isinstance(a, ast.Name) and a.id in activations
                        and ACTIVATION_PARAMS.match(a.id)), None)
            if safe and own is not None:
                edits.append(Replace(c.call, f"{ctx.code(c.call)}.to({own}.dtype)"))
            else:
                safe = False
                edits.append(Replace(c.call, f"{ctx.code(c.call)}{tail}"))
        why = "" if safe else " (assumes the helper's result should take the cast's dtype)"
        return FixPlan("safe" if safe else "unsafe",
                       f"pass the float32 phase to `{calls[0].callee}` and cast what it returns to the activation's "
                       f"dtype{why}", tuple(edits))


def _returned_fix(ctx: RuleContext, cast: Cast, trigs: list[Trig]) -> FixPlan | None:
    """A helper returns the phase cast to a dtype its caller passes (``return torch.cat((f, f), -1).to(dtype)``,
    ``.to(like)``, ``.type_as(like)``) and that caller takes cos/sin of it. A private helper called once returns the
    float32 phase; any other keeps what it returns and the call passes a float32 stand-in for the dtype
    (``like=x`` -> ``x.new_empty((), dtype=torch.float32)``). Either way the caller casts the tables to what it
    passed."""
    helper, caller = cast.scope.node, trigs[0].scope.node
    if not isinstance(helper, (ast.FunctionDef, ast.AsyncFunctionDef)) or caller is None \
            or len({t.scope.symbol for t in trigs}) != 1:
        return None
    casts = [r.value for r in ast.walk(helper) if isinstance(r, ast.Return)]
    if not any(c is cast.node for c in casts) or not all(
            isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.func.attr in ("to", "type_as")
            and len(c.args) == 1 and not c.keywords for c in casts):
        return None
    targets = {ctx.code(c.args[0]) for c in casts}  # type: ignore[union-attr]
    methods = {c.func.attr for c in casts}  # type: ignore[union-attr]
    target = casts[0].args[0]  # type: ignore[union-attr]
    name = target.value if isinstance(target, ast.Attribute) and target.attr == "dtype" else target
    calls = [n for n in ast.walk(caller) if isinstance(n, ast.Call) and (dotted(n.func) or [""])[-1] == helper.name]
    if len(targets) != 1 or len(methods) != 1 or not isinstance(name, ast.Name) or len(calls) != 1:
        return None
    call = calls[0]
    params = call_params(helper, is_method=isinstance(call.func, ast.Attribute))
    given = dict(zip(params, call.args)) | {k.arg: k.value for k in call.keywords if k.arg}
    arg = given.get(name.id)
    if arg is None or any(isinstance(a, ast.Starred) for a in call.args):
        return None
    passed = ctx.code(arg) if isinstance(arg, (ast.Name, ast.Attribute)) else f"({ctx.code(arg)})"
    type_as = methods == {"type_as"}
    tail = f".type_as({passed})" if type_as else f".to({passed}.dtype)" if name is not target else f".to({passed})"
    receivers = [_angle(t.node) for t in trigs]
    allowed = {id(_widened(r)[0]) for r in receivers} | shape_only_reads(caller)
    allowed |= _rearranged_into(caller, allowed) | _sliced_in_place(caller)
    if not only_read_by(ctx, call, caller, allowed):
        return None
    tables: list[NodeEdit] = [Replace(t.node, f"{ctx.code(t.node)}{tail}") for t, r in zip(trigs, receivers)
                              if not _widened(r)[1] and not _is_complex(t.node)]
    if helper.name.startswith("_") and calls_in_text(ctx.source, helper.name) == 1:
        edits: list[NodeEdit] = [Replace(c, ctx.code(c.func.value)) for c in casts]  # type: ignore[union-attr]
        return FixPlan("safe", f"return the float32 phase from `{helper.name}` and cast the tables its caller takes "
                               f"instead", (*edits, *tables))
    tensor = type_as or name is not target
    if not tensor and not (isinstance(arg, ast.Attribute) and arg.attr == "dtype"):
        return None  # ``.to(like)`` with a tensor: its device as well, which a stand-in would have to match
    stand_in = _float32_stand_in(ctx, helper, name.id, arg, tensor=tensor)
    if stand_in is None:
        return None
    code, imports = stand_in
    return FixPlan("safe", f"pass `{helper.name}` a float32 stand-in for `{name.id}` (it only takes that dtype from "
                           f"it) and cast the tables taken of what it returns instead", (Replace(arg, code), *tables,
                                                                                          *imports))


def _float32_stand_in(ctx: RuleContext, helper: ast.FunctionDef | ast.AsyncFunctionDef, param: str, arg: ast.expr,
                      *, tensor: bool) -> tuple[str, tuple[NodeEdit, ...]] | None:
    """What to pass as ``param`` so that the helper's casts to it give float32: ``torch.float32`` for a dtype
    (``dtype=x.dtype``), a float32 scalar tensor on the argument's device for a tensor (``x.new_empty((),
    dtype=torch.float32)``). Only where the helper reads ``param`` for nothing but its returned casts."""
    loads = [n for n in ast.walk(helper) if isinstance(n, ast.Name) and n.id == param and isinstance(n.ctx, ast.Load)]
    returned = [n for r in ast.walk(helper) if isinstance(r, ast.Return) and r.value is not None
                for n in ast.walk(r.value) if isinstance(n, ast.Name) and n.id == param]
    if not loads or len(loads) != len(returned):
        return None
    torch, imports = ctx.torch_name()
    if isinstance(arg, ast.Attribute) and arg.attr == "dtype" and not tensor:
        return f"{torch}.float32", imports
    if isinstance(arg, ast.Name) and tensor:
        return f"{arg.id}.new_empty((), dtype={torch}.float32)", imports
    return None


def _callee(ctx: RuleContext, call: TrigInHelper) -> ast.AST | None:
    """The function a helper call runs: a same-file function or method, or the entry method of the module
    ``self.<attr>`` holds (``self.rotary_emb(x, angles)`` runs its ``forward``)."""
    info = ctx.model.classes.get(call.scope.symbol.split(".")[0])
    func = call.call.func
    if info is not None and isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
            and func.value.id == "self":
        held = held_class(ctx.model.classes, info, func.attr)
        if held is not None:
            return held.methods.get("forward") or held.methods.get("__call__")
    return same_file_callable(ctx.model, None, call.callee) or same_file_callable(ctx.model, info, call.callee,
                                                                                  method=True)


def _stored_fix(ctx: RuleContext, cast: Cast, table_fns: list[ast.AST | None], receiver_code: str) -> FixPlan | None:
    """``self._angle_cache = self.rotary_emb.angles(positions).to(hidden_states.dtype)``, a plain attribute that a
    private method of the class only returns (or reads for its shape and device), and whose cos/sin are taken
    elsewhere and cast to a dtype of their own: the cache stays float32, and the tables come out as before."""
    stmt = ctx.model.statement_of.get(id(cast.node))
    fn = cast.scope.node
    if not (isinstance(stmt, ast.Assign) and stmt.value is cast.node and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Attribute) and isinstance(stmt.targets[0].value, ast.Name)
            and stmt.targets[0].value.id == "self" and isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
            and fn.name.startswith("_")):
        return None
    attr = stmt.targets[0].attr
    cls = ctx.model.classes.get(cast.scope.symbol.split(".")[0])
    if cls is None or any(attr in c.state and c.state[attr].ref.follows_module_casts  # a plain attribute only
                          for c in ctx.model.classes.values()) \
            or not all(table_fn is not None and _casts_its_tables(table_fn, returned_only=True)
                       for table_fn in table_fns):
        return None
    for method in cls.methods.values():
        for node in ast.walk(method):
            if isinstance(node, ast.Attribute) and node.attr == attr and isinstance(node.value, ast.Name) \
                    and node.value.id == "self" and isinstance(node.ctx, ast.Load) \
                    and not _returned_or_inspected(ctx, method, node):
                return None
    if len(re.findall(rf"\.{attr}\b", ctx.source)) != sum(1 for m in cls.methods.values() for n in ast.walk(m)
                                                         if isinstance(n, ast.Attribute) and n.attr == attr):
        return None  # used somewhere else in the file (or in code the analysis pruned)
    return FixPlan("safe", f"keep the cached phase `self.{attr}` float32 (the cos/sin taken of it are cast where "
                           f"they are taken)", (Replace(cast.node, receiver_code),))


def _mirrored_fix(ctx: RuleContext, cast: Cast, trigs: list[Trig]) -> FixPlan | None:
    """``self._freqs = freqs.to(dtype)`` in one method, ``self._freqs.cos()`` in others (``@property`` tables): a
    float32 copy of the phase is kept beside the cast one (``self._freqs_float32 = freqs``) and the cos/sin are taken
    of it and cast to the cached phase's dtype, so the tables keep their dtype and every other reader of
    ``self._freqs`` (a dtype check, a shape, code elsewhere) sees what it saw before."""
    stmt = ctx.model.statement_of.get(id(cast.node))
    if not (isinstance(stmt, ast.Assign) and stmt.value is cast.node and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Attribute) and isinstance(stmt.targets[0].value, ast.Name)
            and stmt.targets[0].value.id == "self" and isinstance(cast_receiver(cast.node), ast.Name)):
        return None
    attr, owner = stmt.targets[0].attr, cast.scope.symbol.split(".")[0]
    cls = ctx.model.classes.get(owner)
    mirror = f"{attr}_float32"
    if cls is None or re.search(rf"\b{mirror}\b", ctx.source) \
            or any(attr in c.state and c.state[attr].ref.follows_module_casts for c in ctx.model.classes.values()) \
            or any(t.scope.symbol.split(".")[0] != owner or _is_complex(t.node) for t in trigs):
        return None
    stores = [n for m in cls.methods.values() for n in ast.walk(m) if isinstance(n, ast.Assign)
              and any(isinstance(t, ast.Attribute) and t.attr == attr for t in n.targets)]
    if len(re.findall(rf"\.{attr}\s*=[^=]", ctx.source)) != len(stores) or any(
            n is not stmt and not (len(n.targets) == 1 and isinstance(n.value, ast.Constant) and n.value.value is None)
            for n in stores):
        return None  # stored elsewhere, or another value: the copy could fall out of step
    edits: list[NodeEdit] = [InsertBeforeStatement(stmt, f"self.{mirror} = {ctx.code(cast_receiver(cast.node))}")]
    edits += [InsertBeforeStatement(n, f"self.{mirror} = None") for n in stores if n is not stmt]
    for t in trigs:
        code = ctx.code(t.node)
        if len(re.findall(rf"\bself\.{attr}\b", code)) != 1 or len(re.findall(r"\bself\.", code)) != 1:
            return None  # the angle mixes the cache with something else
        widened = _widened(_angle(t.node))[1]
        code = re.sub(rf"\bself\.{attr}\b", f"self.{mirror}", code)
        edits.append(Replace(t.node, code if widened else f"{code}.to(self.{attr}.dtype)"))
    return FixPlan("safe", f"take cos/sin of a float32 copy of the phase kept beside `self.{attr}` and cast them to "
                           f"its dtype (every other reader of `self.{attr}` sees it as before)", tuple(edits))


def _returned_or_inspected(ctx: RuleContext, fn: ast.AST, node: ast.Attribute) -> bool:
    """``return self.<attr>``, or ``cache = self.<attr>`` with ``cache`` read only for its shape, device or
    ``is None``."""
    owner = ctx.model.statement_of.get(id(node))
    if isinstance(owner, ast.Return) and owner.value is node:
        return getattr(fn, "name", "").startswith("_")  # handed back by a private method of the class
    if isinstance(owner, ast.Assign) and owner.value is node and len(owner.targets) == 1 \
            and isinstance(owner.targets[0], ast.Name):
        inspected = shape_only_reads(fn)
        for n in ast.walk(fn):
            if isinstance(n, ast.Compare):
                inspected.update(id(c) for c in ast.walk(n) if isinstance(c, ast.Name))
        return all(id(load) in inspected for load in later_loads(fn, owner, owner.targets[0].id))
    return False


def _branch_cast_fix(ctx: RuleContext, cast: Cast, owner: ast.stmt, trigs: list[Trig]) -> FixPlan | None:
    """``angles = angles.half()`` alone in a branch (a dtype dispatch): keep the angle as it was before the
    branches in a new name and take cos/sin of that, cast to the dtype the branches chose
    (``angles_f32.cos().to(angles.dtype)``). Other readers of ``angles`` see what they saw before."""
    fn = cast.scope.node
    found = assigned_name(ctx, cast.node)
    receiver = cast_receiver(cast.node)
    if fn is None or found is None or not isinstance(receiver, ast.Name) or receiver.id != found[1]:
        return None
    name = found[1]
    angles = [_angle(t.node) for t in trigs]
    if not all(isinstance(a, ast.Name) and a.id == name for a in angles) or any(_is_complex(t.node) for t in trigs):
        return None
    first = min((ctx.model.statement_of.get(id(t.node)) for t in trigs), key=lambda st: st.lineno if st else 0)
    chain = _enclosing_statement(fn, owner, first)
    if chain is None:
        return None
    fresh = next(f"{name}{suffix}" for suffix in ("_f32", "_float32", "_full") if f"{name}{suffix}" not in names_in(fn))
    edits: list[NodeEdit] = [InsertBeforeStatement(chain, f"{fresh} = {name}  # ropelint: the angle before the "
                                                          f"branches below round it, for cos/sin")]
    for t, a in zip(trigs, angles):
        code = ctx.code(t.node)
        start = a.col_offset - t.node.col_offset if a.lineno == t.node.lineno else None  # type: ignore[union-attr]
        if start is None or code[start:start + len(name)] != name:
            return None
        edits.append(Replace(t.node, f"{code[:start]}{fresh}{code[start + len(name):]}.to({name}.dtype)"))
    return FixPlan("safe", f"take cos/sin of `{name}` as it was before the dtype branches, then cast the tables to the "
                           f"dtype they chose", tuple(edits))


def _enclosing_statement(fn: ast.AST, inner: ast.stmt, later: ast.stmt | None) -> ast.stmt | None:
    """The statement of the block that holds ``later`` which contains ``inner`` and comes before ``later``."""
    for node in ast.walk(fn):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and later in block:
                for stmt in block[:block.index(later)]:
                    if any(n is inner for n in ast.walk(stmt)):
                        return stmt
    return None


def _sliced_in_place(fn: ast.AST) -> set[int]:
    """Reads in ``ang = ang[None, None]``: the name re-bound to a view of itself."""
    found: set[int] = set()
    for stmt in ast.walk(fn):
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                and isinstance(stmt.value, ast.Subscript) and isinstance(stmt.value.value, ast.Name) \
                and stmt.value.value.id == stmt.targets[0].id:
            found.add(id(stmt.value.value))
    return found


def returns_trig_tuples(helper: ast.AST) -> bool:
    """Every return of ``helper`` is one tuple (or every one a list) of cos/sin tables."""
    returns = [n.value for n in ast.walk(helper) if isinstance(n, ast.Return)]
    return len({type(r) for r in returns}) == 1 and all(
        isinstance(r, (ast.Tuple, ast.List)) and r.elts and all(any(is_trig_call(m) for m in ast.walk(e))
                                                                for e in r.elts) for r in returns)


def handed_fix(ctx: RuleContext, cast: Cast, handed: TrigInHelper) -> FixPlan | None:
    """RPL006's frequencies cast on their way into a table helper: passed uncast, each returned table cast."""
    split = TrigAfterDowncast._split(ctx, cast)
    helper = ctx.model.functions.get(handed.callee)
    if split is None or helper is None:
        return None
    fix = per_table_fix(ctx, cast, [handed], helper, split)
    return FixPlan(fix.safety, fix.description.replace("the float32 phase", "the frequencies uncast"), fix.edits) \
        if fix is not None else None


def per_table_fix(ctx: RuleContext, cast: Cast, calls: list[TrigInHelper], helper: ast.AST,
                   split: tuple[str, str]) -> FixPlan | None:
    """``_sincos(phase.to(dtype))`` with ``_sincos`` returning ``emb.cos(), emb.sin()`` on every path:
    ``tuple(table.to(dtype) for table in _sincos(phase))``, the same tuple of tables in the same dtype, taken from
    the float32 phase (or from float32 frequencies: RPL006's ``fixed_pos_embedding(ids, inv_freq.to(q.dtype))``)."""
    if len(calls) != 1 or not returns_trig_tuples(helper):
        return None
    call = calls[0].call
    receiver_code, tail = split
    kind = "tuple" if any(isinstance(n, ast.Return) and isinstance(n.value, ast.Tuple) for n in ast.walk(helper)) \
        else "list"
    if "table" in tail:
        return None  # the cast's text would be shadowed
    if not any(a is cast.node for a in call.args):
        # ``freqs = self.rotary(n).type_as(q)``, then ``return rotary_cos_sin(freqs)``: a local read by that call only.
        assigned = assigned_name(ctx, cast.node)
        passed = {id(a) for a in call.args if isinstance(a, ast.Name) and assigned is not None and a.id == assigned[1]}
        if assigned is None or not passed or not only_read_by(ctx, cast.node, cast.scope.node, passed):
            return None
        dropped: NodeEdit = DeleteLines(assigned[0]) if assigned[1] == receiver_code \
            else Replace(cast.node, receiver_code)
        return FixPlan("safe", f"pass the float32 phase to `{calls[0].callee}` and cast each table it returns",
                       (dropped, Replace(call, f"{kind}(table{tail} for table in {ctx.code(call)})")))
    text, cast_text = ctx.code(call), ctx.code(cast.node)
    if text.count(cast_text) != 1:
        return None
    inner = text.replace(cast_text, receiver_code)
    return FixPlan("safe", f"pass the float32 phase to `{calls[0].callee}` and cast each table it returns",
                   (Replace(call, f"{kind}(table{tail} for table in {inner})"),))


def _helper(ctx: RuleContext, cast: Cast, name: str) -> ast.AST | None:
    """The same-file function, or method of the cast's class (or an in-file base), called ``name``."""
    info = ctx.model.classes.get(cast.scope.symbol.split(".")[0])
    return same_file_callable(ctx.model, None, name) or same_file_callable(ctx.model, info, name, method=True)


def _casts_its_tables(fn: ast.AST, returned_only: bool = False) -> bool:
    """Every value ``fn`` assigns or returns that takes a cos/sin is cast as its last step (``.to(dtype)``); with
    ``returned_only``, every returned one, also inside a returned tuple (``return cos.to(d), sin.to(d)``)."""
    found = False
    for node in ast.walk(fn):
        value = node.value if isinstance(node, ast.Return) or (isinstance(node, ast.Assign) and not returned_only) \
            else None
        values = value.elts if returned_only and isinstance(value, ast.Tuple) else [value]
        for value in values if value is not None else ():
            if not any(is_trig_call(n) for n in ast.walk(value)):
                continue
            if not is_cast_call(value):
                return False
            found = True
    return found


def _widened_at_once(cast: Cast) -> bool:
    """The cast is the receiver of ``.float()``/``.double()``."""
    fn = cast.scope.node
    return fn is not None and any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("float", "double")
        and n.func.value is cast.node and not n.args for n in ast.walk(fn))


def _is_polar(call: ast.Call) -> bool:
    return isinstance(call.func, ast.Attribute) and call.func.attr == "polar"


# Calls that only rearrange the phase (copies, joins, reshapes): its values reach the result unchanged.
_REARRANGE = frozenset({"cat", "concat", "stack", "repeat", "repeat_interleave", "flatten", "reshape", "view",
                        "unsqueeze", "expand", "transpose", "permute", "contiguous", "split", "chunk", "unbind"})


def _rearranged_into(fn: ast.AST | None, allowed: set[int]) -> set[int]:
    """Reads in ``y = torch.cat((freqs, freqs), dim=-1)`` (or another rearrangement) whose target ``y`` is only
    read where ``allowed`` says: the cast phase reaches the trig through them and nowhere else."""
    found: set[int] = set()
    changed = True
    while changed:  # ``chunks = freqs.split(s)``, then ``freqs = torch.cat([c[i % 3] for i, c in enumerate(chunks)])``
        changed = False
        for stmt in ast.walk(fn) if fn is not None else ():
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
                continue
            calls = [n for n in ast.walk(stmt.value) if isinstance(n, ast.Call)]
            if not calls or any(not (isinstance(c.func, ast.Attribute) and c.func.attr in _REARRANGE)
                                and not (isinstance(c.func, ast.Name) and c.func.id in ("enumerate", "zip"))
                                for c in calls):
                continue
            loads = later_loads(fn, stmt, stmt.targets[0].id)
            names = {id(n) for n in ast.walk(stmt.value) if isinstance(n, ast.Name)}
            if loads and all(id(n) in allowed | found for n in loads) and not names <= found:
                found |= names
                changed = True
    return found


def _is_complex(call: ast.Call) -> bool:
    """``torch.polar(r, phase)`` or ``torch.exp(1j * phase)``: the trig builds a complex rotation."""
    return _is_polar(call) or (isinstance(call.func, ast.Attribute) and call.func.attr == "exp")


def _angle(call: ast.Call) -> ast.AST | None:
    if _is_polar(call):
        return call.args[-1] if len(call.args) >= 2 else None
    if call.args:
        return call.args[0]
    return call.func.value if isinstance(call.func, ast.Attribute) else None


def _widened(node: ast.AST | None) -> tuple[ast.AST | None, bool]:
    """(the name under ``name.float()``/``.double()`` calls, whether there were any)."""
    widened = False
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("float", "double") \
            and not node.args:
        node, widened = node.func.value, True
    return node, widened


def _by_cast(events, phase_casts: dict[int, Cast]):  # type: ignore[no-untyped-def]
    """Trig events (in place or in a helper) whose argument was made 16-bit-able by one of the casts, grouped by cast."""
    grouped: dict[int, list] = defaultdict(list)  # type: ignore[type-arg]
    for event in events:
        site = event.arg.site
        if event.arg.dtype.can_be_16bit and site is not None and id(site) in phase_casts:
            grouped[id(site)].append(event)
    return [(phase_casts[key], found) for key, found in grouped.items()]
