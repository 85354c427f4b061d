"""Shared fix builders for rules that make a dtype explicitly float32."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable

from ..diagnostics import FixPlan, Replace
from ..model.events import Scope, Trig, TrigInHelper
from ..model.interpreter import (
    ACTIVATION_PARAMS,
    SCALAR_PARAMS,
    call_params,
    held_class,
    in_file_mro,
    is_runtime_inv_freq,
    is_trig_call,
    same_file_callable,
    self_attr,
)
from ..model.names import TORCH_DTYPES_INT, dotted, qualname
from ..model.values import Dt, Role
from .base import (
    RuleContext,
    append_keyword,
    atom_code,
    assigned_name,
    calls_in_text,
    cast_receiver,
    is_atom,
    later_loads,
    only_read_by,
    shape_only_reads,
    spelled_as_tensor,
    under_reshapes,
)
from .callsite import caller_dtype_fix, calls_of, enclosing_function, table_valued, tables_kept_in
from .construction import assigned_value

# Calls that take integer indices: positions made float32 would break them.
INDEXING_CALLS = {"index_select", "gather", "embedding", "take", "take_along_dim", "scatter", "index_add",
                  "index_copy", "index_fill", "bincount", "one_hot"}


def float32_fix(ctx: RuleContext, site: ast.AST, what: str, scope: Scope) -> FixPlan | None:
    """``arange(..., dtype=X)`` -> ``dtype=torch.float32``; ``t.to(d)``/``t.type_as(b)``/``t.half()`` -> ``t.float()``."""
    if not isinstance(site, ast.Call):
        return None
    qn = qualname(site.func, ctx.imports) or ""
    # ``mask.cumsum(-1)`` / ``torch.cumsum(mask, -1)``: counted in the mask's dtype, which ``dtype=`` replaces (a
    # ``.float()`` afterwards would widen counts already rounded).
    built_by_method = isinstance(site.func, ast.Attribute) and site.func.attr in ("new_tensor", "cumsum")
    if built_by_method or (qn.rsplit(".", 1)[-1] in ("arange", "linspace", "tensor", "as_tensor", "full", "cumsum",
                                                     "zeros", "ones", "empty", "zeros_like", "ones_like",
                                                     "empty_like", "full_like")
                           and qn.startswith("torch")):
        torch, imports = ctx.torch_name()
        for kw in site.keywords:
            if kw.arg == "dtype":
                return plan_fix(ctx, site, kw.value, scope, what, f"build the {what} in float32",
                                (Replace(kw.value, f"{torch}.float32"), *imports))
        return plan_fix(ctx, site, None, scope, what, f"build the {what} in float32",
                        (Replace(site, append_keyword(ctx, site, f"dtype={torch}.float32")), *imports))
    receiver = cast_receiver(site)
    if receiver is not None and (qualname(receiver, ctx.imports) or "").split(".")[0] in ("torch", "numpy"):
        return None  # a library function (``torch.something(...)``), not a cast of a tensor
    if receiver is not None and isinstance(site.func, ast.Attribute) and site.func.attr == "to" \
            and any(k.arg is None for k in site.keywords):
        # ``t.to(**self._factory_kwargs)``: the device (and anything else) the dict carries stays, the dtype is
        # overridden where it is unpacked.
        torch, imports = ctx.torch_name()
        parts = [ctx.code(a) for a in site.args] + [
            f"**{{**{ctx.code(k.value)}, \"dtype\": {torch}.float32}}" if k.arg is None else ctx.code(k)
            for k in site.keywords]
        moved = f"{atom_code(ctx, receiver, site)}.to({', '.join(parts)})"
        return plan_fix(ctx, site, None, scope, what, f"cast the {what} to float32 (the unpacked keywords stay)",
                        (Replace(site, moved), *imports))
    if receiver is not None:
        text = ctx.code(receiver)
        args = site.args[1:] if site.args and receiver is site.args[0] else site.args  # unbound: t is args[0]
        target = args[0] if args else next((k.value for k in site.keywords if k.arg == "dtype"), site.func)
        if isinstance(site.func, ast.Attribute) and site.func.attr == "to" and len(args) >= 2:
            target = args[1]  # ``t.to(x.device, x.dtype)``: the device comes first, the dtype second
        if isinstance(receiver, ast.Call) and is_runtime_inv_freq(qualname(receiver.func, ctx.imports) or ""):
            # float32 already (an earlier RPL002 rebuild): the cast just goes
            return plan_fix(ctx, site, target, scope, what, f"keep the {what} float32", (Replace(site, text),))
        if isinstance(site.func, ast.Attribute) and site.func.attr == "to" and target is not site.func \
                and len(site.args) + len(site.keywords) > 1:
            # ``t.to(device=d, dtype=dt)``: the device move stays, only the dtype changes.
            torch, imports = ctx.torch_name()
            return plan_fix(ctx, site, target, scope, what, f"cast the {what} to float32",
                            (Replace(target, f"{torch}.float32"), *imports))
        if isinstance(site.func, ast.Attribute) and site.func.attr in ("to", "type_as") and args \
                and target is args[0] and not site.keywords and spelled_as_tensor(ctx, target) and not _placed(receiver):
            # A cast to another tensor also moves to its device: ``.to(self.decay)``, and ``.type_as(self.inv_freq)``
            # (``.type(self.inv_freq.type())``, which names ``torch.cuda.FloatTensor`` on a GPU; transformers'
            # Wav2Vec2-Conformer builds its positions on the CPU and relies on it). The move stays.
            torch, imports = ctx.torch_name()
            code = ctx.code(target)
            moved = f"{text}.to({code}.device, {torch}.float32)" if is_atom(receiver) \
                else f"({text}).to({code}.device, {torch}.float32)"
            return plan_fix(ctx, site, target, scope, what, f"cast the {what} to float32 (on `{code}`'s device)",
                            (Replace(site, moved), *imports))
        return plan_fix(ctx, site, target, scope, what, f"cast the {what} to float32",
                        (Replace(site, f"{text}.float()" if is_atom(receiver) else f"({text}).float()"),))
    return None


def float32_or_callers_fix(ctx: RuleContext, site: ast.AST, what: str, scope: Scope) -> FixPlan | None:
    """``float32_fix``, unless it is unsafe and the value is built in a dtype this file's calls pass: then
    passing float32 at those calls (which may be safe)."""
    fix = float32_fix(ctx, site, what, scope)
    if fix is not None and fix.safety == "unsafe":
        fix = caller_dtype_fix(ctx, site) or fix
    return fix


def _placed(node: ast.AST) -> bool:
    """A call that puts its result on a device itself: ``torch.arange(n, device=x.device)``."""
    return isinstance(node, ast.Call) and any(k.arg == "device" for k in node.keywords)


def plan_fix(ctx: RuleContext, site: ast.Call, dtype: ast.AST | None, scope: Scope, what: str, description: str,
             edits: tuple, cast_to: str | None = None) -> FixPlan:  # type: ignore[type-arg]
    """Safe when nothing but the precision can change: the dtype was the implicit default (float32
    unless a framework set a 16-bit default), or the cos/sin tables this function builds are cast
    back to a dtype of their own before they leave it, and the values are never used as indices."""
    why = _unsafe_because(ctx, site, dtype, scope)
    if not why and what == "positions" and _feeds_other_values(ctx, site, scope):
        why = "the values also feed other tensors (a mask, a returned value), whose dtype would change too"
    if why.startswith("the tables no longer follow") and isinstance(dtype, ast.Name):
        # Tables returned in the caller's dtype: compute in float32 and cast what is returned instead.
        to = cast_to or dtype.id
        casts = _return_casts(ctx, scope, to)
        if casts:
            return FixPlan("safe", f"{description}, and return the tables in `{to}`", (*edits, *casts))
        casts = _stored_casts(ctx, scope, to)
        if casts:
            return FixPlan("safe", f"{description}, and store the tables in `{to}`", (*edits, *casts))
        casts = _packed_casts(ctx, scope, to)
        if casts:
            return FixPlan("safe", f"{description}, and cast the tables to `{to}` where they are taken",
                           (*edits, *casts))
    if why:
        return FixPlan("unsafe", f"{description} ({why})", edits)
    consumers = [p for p in ctx.model.products if any(s is site for s in (*p.positions.sites, *p.freq.sites))]
    kept = boundary_casts(ctx, consumers) if dtype is not None else ()
    if kept is None:
        return FixPlan("unsafe", f"{description} ({NO_BOUNDARY_CAST})", edits)
    if kept:
        return FixPlan("safe", f"{description}, {BOUNDARY_CASTS}", (*edits, *kept))
    return FixPlan("safe", description, edits)


BOUNDARY_CASTS = "and cast the tables to the dtype of the activations they meet"
NO_BOUNDARY_CAST = ("the cos/sin tables would leave a function float32 where they had the model's dtype, beside other "
                    "values no cast can be placed for")


def boundary_casts(ctx: RuleContext, products: list) -> tuple[Replace, ...] | None:  # type: ignore[type-arg]
    """Casts to the activations' dtype for the cos/sin tables a function returns uncast, when the fix makes the
    phase they come from float32 where both its inputs could be 16-bit: they were in the model's dtype, and float32
    tables would make ``q * cos`` float32 queries, which the attention's matmul with 16-bit values rejects. None when
    such tables leave a function by a return that holds something else too (no cast can be placed for them)."""
    functions: dict[int, ast.AST] = {}
    for product in products:
        if product.positions.dtype is Dt.FULL or product.freq.dtype is Dt.FULL:
            continue
        trigs = [t for t in (*ctx.model.trigs, *ctx.model.helper_trigs)
                 if t.arg.product is product.node or (t.scope.symbol == product.scope.symbol and t.arg.has(Role.PHASE))]
        if not trigs:
            # The phase leaves its function (Megatron's ``return emb``) and the holder handing it on is out of
            # sight: the file's functions taking cos/sin of a phase parameter (``apply_rotary_pos_emb(t, freqs)``).
            trigs = [t for t in ctx.model.trigs if t.arg.product is None and t.arg.param is not None
                     and t.arg.has(Role.PHASE) and t.scope.symbol != product.scope.symbol]
        for t in trigs:
            if t.arg.dtype is Dt.FULL:
                continue
            # A phase handed to a helper (``apply_rotary_pos_emb(q, freqs)``) has its cos/sin taken there.
            fn = _function(ctx, t.scope.symbol) if not isinstance(t, TrigInHelper) else \
                ctx.model.functions.get(t.callee) or _function(ctx, f"{t.scope.symbol.split('.')[0]}.{t.callee}")
            if fn is not None:
                functions[id(fn)] = fn
    edits: list[Replace] = []
    stored: set[str] = set()
    for fn in functions.values():
        activation = _activation_param(fn)
        if activation is not None:
            kept_state = _table_state(fn)

            def is_table(node: ast.AST, kept_state: set[str] = kept_state) -> bool:
                # ``self.cos_cached, self.sin_cached = cos, sin`` then ``return self.cos_cached[:n], ...``
                return is_trig_call(node) or (isinstance(node, ast.Attribute) and node.attr in kept_state
                                              and isinstance(node.value, ast.Name) and node.value.id == "self")
            casts = tables_kept_in(ctx, fn, f"{activation}.dtype", is_table)
            if casts is None or (casts and any(isinstance(n, ast.Name) and n.id == activation
                                               and isinstance(n.ctx, ast.Store) for n in ast.walk(fn))):
                # Tables it returns would change dtype, and no cast can be placed for them (or only one to the
                # activation's dtype after ``tensor = tensor.float()``, which is not the caller's any more).
                return None
            edits += casts
        edits += _rotation_casts(ctx, fn)
        # ``self.cos_cached = emb.cos()[None, None]`` in a cache builder: the methods reading the cache hand on what
        # is now float32.
        stored.update(t.attr for node in ast.walk(fn) if isinstance(node, ast.Assign)
                      and is_trig_call(under_reshapes(node.value)) for t in node.targets
                      if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self")
    if stored:
        edits += [e for e in state_boundary_casts(ctx, stored) if all(e.node is not x.node for x in edits)]
    return tuple(edits)


def _table_state(fn: ast.AST) -> set[str]:
    """Attributes ``fn`` stores cos/sin tables in (``self.cos_cached = emb.cos()``, or ``self.cos_cached,
    self.sin_cached = cos_cached, sin_cached`` with those locals tables)."""
    found: set[str] = set()
    for node in ast.walk(fn):
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            pairs = zip(target.elts, node.value.elts) if isinstance(target, ast.Tuple) \
                and isinstance(node.value, ast.Tuple) and len(target.elts) == len(node.value.elts) \
                else [(target, node.value)]
            for t, v in pairs:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self" \
                        and table_valued(fn, v):
                    found.add(t.attr)
    return found


def _rotation_casts(ctx: RuleContext, fn: ast.AST, is_table: Callable[[ast.AST], bool] = is_trig_call) -> list[Replace]:
    """``t * freqs.cos()`` -> ``t * freqs.cos().to(t.dtype)`` (and ``q * cos`` with ``cos = emb.cos()``): where the
    function rotates a tensor by tables it takes itself, the tables meet it in its own dtype, as they did when the
    phase had the model's dtype. ``is_table`` as for ``tables_kept_in``."""
    if _casts_its_output(fn):
        return []  # ``return out.type(orig_dtype)``: rotated in float32 on purpose, handed back in the input's dtype
    table_locals = {name.id for t in ast.walk(fn) if isinstance(t, ast.Assign) and len(t.targets) == 1
                    and is_table(under_reshapes(t.value))
                    for name in (t.targets[0].elts if isinstance(t.targets[0], ast.Tuple) else [t.targets[0]])
                    if isinstance(name, ast.Name)}  # (``cos, sin = self.get_cos_sin(positions)`` too)
    edits: list[Replace] = []
    for node in ast.walk(fn):
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult)):
            continue
        for table, other in ((node.left, node.right), (node.right, node.left)):
            rotated = _rotated_name(other)
            if rotated is None or rotated.id in table_locals or is_table(under_reshapes(other)) \
                    or not _tensor_argument(fn, rotated.id):
                continue
            if is_table(under_reshapes(table)) or (isinstance(table, ast.Name) and table.id in table_locals):
                text = ctx.code(table)
                cast = f"{text}.to({rotated.id}.dtype)" if is_atom(table) else f"({text}).to({rotated.id}.dtype)"
                edits.append(Replace(table, cast))
                break
    for node in ast.walk(fn) if table_locals else ():
        # ``apply_rotary_pos_emb(k_rot, sin, cos)``: a same-file function multiplying its tensor by the tables it is
        # handed (and not casting what it returns) gets them in that tensor's dtype.
        callee = ctx.model.functions.get(node.func.id) if isinstance(node, ast.Call) \
            and isinstance(node.func, ast.Name) else None
        if callee is None or _casts_its_output(callee) or any(isinstance(a, ast.Starred) for a in node.args):
            continue
        params = [a.arg for a in (*callee.args.posonlyargs, *callee.args.args)]
        given = dict(zip(params, node.args)) | {k.arg: k.value for k in node.keywords if k.arg}
        tables = {p: a for p, a in given.items() if isinstance(a, ast.Name) and a.id in table_locals}
        rotated = [(p, base) for p, a in given.items() if isinstance(base := under_reshapes(a), ast.Name)
                   and base.id not in table_locals and any(_multiplies(callee, p, t) for t in tables)]
        if len(rotated) == 1:
            name = rotated[0][1].id  # ``q[..., :d]`` has ``q``'s dtype
            edits += [Replace(a, f"{a.id}.to({name}.dtype)") for p, a in tables.items()
                      if _multiplies(callee, rotated[0][0], p)]
    return edits


def rotation_output_casts(ctx: RuleContext, cls_name: str, producer: str) -> list[Replace]:
    """xPos: ``sin, cos, scale = self.rotary_tables(n)`` then ``x = apply_rotary_pos_emb(x, sin, cos, scale)``. Once
    the state ``producer`` reads is kept float32, what it hands out is float32 and so is the rotated tensor, which
    the attention's next matmul with 16-bit values rejects: the rotation's result goes back to the activation's
    dtype (``apply_rotary_pos_emb(...).to(x.dtype)``), the dtype it had when the state was the model's."""
    info = ctx.model.classes.get(cls_name)
    edits: list[Replace] = []
    for method in info.methods.values() if info is not None else ():
        activation = _activation_param(method)
        if activation is None or method.name == producer:
            continue
        derived = {t.id for a in ast.walk(method) if isinstance(a, ast.Assign) and len(a.targets) == 1
                   and isinstance(a.value, ast.Call) and self_attr(a.value.func) == producer
                   for t in (a.targets[0].elts if isinstance(a.targets[0], ast.Tuple) else [a.targets[0]])
                   if isinstance(t, ast.Name)}
        for call in ast.walk(method) if derived else ():
            callee = ctx.model.functions.get(call.func.id) if isinstance(call, ast.Call) \
                and isinstance(call.func, ast.Name) else None
            if callee is None or _casts_its_output(callee):
                continue
            given = [*call.args, *(k.value for k in call.keywords)]
            if any(isinstance(a, ast.Name) and a.id == activation for a in given) \
                    and any(isinstance(a, ast.Name) and a.id in derived for a in given):
                edits.append(Replace(call, f"{ctx.code(call)}.to({activation}.dtype)"))
    return edits


def _multiplies(fn: ast.AST, tensor: str, table: str) -> bool:
    """``fn`` multiplies (something made of) its parameter ``tensor`` by its parameter ``table`` (``x * cos``, with
    ``cos`` perhaps reshaped into itself first)."""
    for node in ast.walk(fn):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            for side, other in ((node.left, node.right), (node.right, node.left)):
                inner = under_reshapes(side)  # (subscripts too: ``sin[:, :, None, :]``)
                if isinstance(inner, ast.Name) and inner.id == table \
                        and any(isinstance(n, ast.Name) and n.id == tensor for n in ast.walk(other)):
                    return True
    return False


def state_boundary_casts(ctx: RuleContext, names: set[str], phases: frozenset[str] | set[str] = frozenset(),
                         ) -> tuple[Replace, ...]:
    """``boundary_casts`` for tables kept float32 in module state (``self.cos_cached``): the methods reading them
    return them, or rotate with them, in the activations' dtype, as they did when a module cast rounded them. A
    reader with no activation to cast to (vLLM's ``get_cos_sin(positions)``) hands them on as they are, and its
    callers in the class cast them where they rotate (``query_rot * cos``). ``phases``: kept phases, whose readers'
    cos/sin are the tables (the phase itself is never cast)."""
    getters: set[str] = set()

    def is_table(node: ast.AST) -> bool:
        return is_trig_call(node) or (isinstance(node, ast.Attribute) and node.attr in names
                                      and isinstance(node.value, ast.Name) and node.value.id == "self") \
            or (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in getters
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "self")

    methods = [(name, method) for info in ctx.model.classes.values() for name, method in info.methods.items()]
    readers: dict[int, ast.AST] = {}
    for read in ctx.model.state_reads:
        if read.ref.name in names or read.ref.name in phases:
            owner = enclosing_function(ctx, read.node)
            if owner is not None:
                readers[id(owner[1])] = owner[1]
    # (Plain attributes a cache builder assigns are not tracked state: the methods that load them.)
    for _, method in methods:
        if id(method) not in readers and any(
                isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load) and isinstance(n.value, ast.Name)
                and n.value.id == "self" and (n.attr in names or n.attr in phases) for n in ast.walk(method)):
            readers[id(method)] = method
    edits: list[Replace] = []
    for fn in list(readers.values()):
        activation = _activation_param(fn)
        casts = tables_kept_in(ctx, fn, f"{activation}.dtype", is_table) or ()
        if activation is None and casts:
            getters.add(fn.name)  # returns the tables uncast, with nothing to cast them to
        elif activation is not None:
            edits += casts
        edits += _rotation_casts(ctx, fn, is_table)
    for _, method in methods if getters else ():
        if id(method) not in readers and any(is_table(n) for n in ast.walk(method)):
            edits += _rotation_casts(ctx, method, is_table)
    return tuple(edits)


def _activation_param(fn: ast.AST) -> str | None:
    """The function's first parameter named like an activation (``x``, ``q``, ``hidden_states``)."""
    args = fn.args  # type: ignore[attr-defined]
    return next((a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs) if ACTIVATION_PARAMS.match(a.arg)),
                None)


_OUTPUT_CASTS = frozenset({"type", "to", "type_as"})


def _casts_its_output(fn: ast.AST) -> bool:
    """Every value the function returns is cast (``out.type(dtype)``), directly or as the last assignment of the
    returned name before the return."""
    returns = [r for r in ast.walk(fn) if isinstance(r, ast.Return) and r.value is not None]

    def cast(value: ast.expr, before: int) -> bool:
        if isinstance(value, ast.Name):
            last = max((a for a in ast.walk(fn) if isinstance(a, ast.Assign) and a.lineno < before
                        and any(isinstance(t, ast.Name) and t.id == value.id for t in a.targets)),
                       key=lambda a: a.lineno, default=None)
            value = last.value if last is not None else value
        return isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
            and value.func.attr in _OUTPUT_CASTS
    return bool(returns) and all(
        all(cast(v, r.lineno) for v in (r.value.elts if isinstance(r.value, ast.Tuple) else [r.value]))
        for r in returns)


def _tensor_argument(fn: ast.AST, name: str, depth: int = 0) -> bool:
    """``name`` is a parameter that holds a tensor to rotate (not a number: ``mscale``, ``scale=1.0``), or a local
    sliced or reshaped from one (``t, t_pass = t[..., :d], t[..., d:]``)."""
    args = fn.args  # type: ignore[attr-defined]
    positional = [*args.posonlyargs, *args.args]
    defaults = dict(zip([a.arg for a in positional][len(positional) - len(args.defaults):], args.defaults))
    defaults.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None})
    if name in {a.arg for a in (*positional, *args.kwonlyargs)}:
        default = defaults.get(name)
        return SCALAR_PARAMS.search(name) is None and not (isinstance(default, ast.Constant)
                                                          and isinstance(default.value, (int, float)))
    if depth > 3:
        return False
    for node in ast.walk(fn):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target, value = node.targets[0], node.value
        pairs = zip(target.elts, value.elts) if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) \
            and len(target.elts) == len(value.elts) else [(target, value)]
        for t, v in pairs:
            source = under_reshapes(v)
            if isinstance(t, ast.Name) and t.id == name and isinstance(source, ast.Name) and source.id != name \
                    and _tensor_argument(fn, source.id, depth + 1):
                return True
            if isinstance(t, ast.Name) and t.id == name and isinstance(source, ast.Name) and source.id == name:
                continue  # ``t = t[..., :d]``: still the parameter
    return False


def _rotated_name(node: ast.expr) -> ast.Name | None:
    """``t``, ``q[..., :d]``, ``rotate_half(t)``, ``self._rotate(t)``: the tensor a table multiplies (through a
    rotation helper's first argument)."""
    node = under_reshapes(node)
    while isinstance(node, ast.Call) and node.args and (isinstance(node.func, ast.Name) or (
            isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "self")):
        node = under_reshapes(node.args[0])
    return node if isinstance(node, ast.Name) else None


def _return_casts(ctx: RuleContext, scope: Scope, dtype: str) -> tuple[Replace, ...]:
    """``return cos, sin`` -> ``return cos.to(dtype), sin.to(dtype)`` for every return of cos/sin tables."""
    fn = scope.node
    if fn is None:
        return ()
    edits = []
    for node in ast.walk(fn):
        if not isinstance(node, ast.Return) or node.value is None:
            continue
        values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
        for value in values:
            if not any(is_trig_call(n) for n in ast.walk(value)):
                return ()  # something else is returned too: leave the returns alone
            text = ctx.code(value)
            edits.append(Replace(value, f"{text}.to({dtype})" if is_atom(value) else f"({text}).to({dtype})"))
    return tuple(edits)


def _default_dtype(ctx: RuleContext, dtype: ast.AST, scope: Scope) -> bool:
    """``torch.get_default_dtype()``, or a local assigned only that: the default dtype spelled out."""
    if isinstance(dtype, ast.Name) and scope.node is not None and dtype.id not in scope.params:
        found = assigned_value(scope.node, dtype.id, dtype)
        dtype = found[0] if found is not None and found[1] is None and found[0] is not None else dtype
    return isinstance(dtype, ast.Call) and (qualname(dtype.func, ctx.imports) or "").endswith("get_default_dtype")


def _stored_casts(ctx: RuleContext, scope: Scope, dtype: str) -> tuple[Replace, ...]:
    """``self.cos_cached = emb.cos()`` -> ``emb.cos().to(dtype)`` when the function returns no tables and
    stores them in attributes of ``self`` instead (a cache a later call reads)."""
    fn = scope.node
    if fn is None or any(isinstance(n, ast.Return) and n.value is not None for n in ast.walk(fn)):
        return ()
    edits = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Attribute) \
                and isinstance(node.targets[0].value, ast.Name) and node.targets[0].value.id == "self" \
                and _stored_table(fn, node.value):
            text = ctx.code(node.value)
            edits.append(Replace(node.value, f"{text}.to({dtype})"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "register_buffer" \
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "self" and len(node.args) >= 2 \
                and _stored_table(fn, node.args[1]):
            # ``self.register_buffer("cos_cached", emb.cos(), persistent=False)``: stored the same way.
            edits.append(Replace(node.args[1], f"{ctx.code(node.args[1])}.to({dtype})"))
    return tuple(edits)


def _stored_table(fn: ast.AST, value: ast.expr) -> bool:
    """``emb.cos()``, or ``torch.cat((cos, sin), dim=-1)`` of tables taken earlier (vLLM's ``cos_sin_cache``)."""
    if is_trig_call(value):
        return True
    return isinstance(value, ast.Call) and (dotted(value.func) or [""])[-1] in ("cat", "concat", "stack") \
        and bool(value.args) and isinstance(value.args[0], (ast.Tuple, ast.List)) and bool(value.args[0].elts) \
        and all(table_valued(fn, el) for el in value.args[0].elts)


def _packed_casts(ctx: RuleContext, scope: Scope, dtype: str) -> tuple[Replace, ...]:
    """``entry = (n, emb.cos(), emb.sin())`` -> ``emb.cos().to(dtype)``: every cos/sin the function takes is
    packed as it is into a tuple or list (a cache entry it stores and returns, ``torch.cat([sin, cos])``), so
    casting each one keeps what leaves the function in ``dtype``."""
    fn = scope.node
    if fn is None:
        return ()
    trigs = [n for n in ast.walk(fn) if is_trig_call(n)]
    # (Through a reshaping chain: ``(freqs.cos().repeat(1, 2), ...)`` keeps the dtype of the cos it repeats.)
    packed = {id(under_reshapes(el)) for n in ast.walk(fn) if isinstance(n, (ast.Tuple, ast.List)) for el in n.elts}
    if not trigs or any(id(t) not in packed for t in trigs):
        return ()
    return tuple(Replace(t, f"{ctx.code(t)}.to({dtype})") for t in trigs)


def _unsafe_because(ctx: RuleContext, site: ast.Call, dtype: ast.AST | None, scope: Scope) -> str:
    if _used_as_index(ctx, site, scope):
        return "the values are also used as indices, which must stay integers"
    if dtype is None or (dotted(dtype) or [""])[-1] in TORCH_DTYPES_INT or _default_dtype(ctx, dtype, scope):
        return ""  # the dtype was the default's: float32 unless a framework set a 16-bit default
    consumers = [p for p in ctx.model.products
                 if any(s is site for s in (*p.positions.sites, *p.freq.sites))]
    if not consumers:
        if _widened_downstream(ctx, site, scope) or _only_fed_to_full_helpers(ctx, site, scope) \
                or _kept_in_self_read_widened(ctx, site, scope) or _kept_in_self_for_float32_phases(ctx, site, scope) \
                or _restored_as_float32_state(ctx, site, scope) \
                or (not (isinstance(dtype, ast.Name) and dtype.id in scope.params)  # else: passed float32 at the call
                    and _returned_to_a_widening_caller(ctx, site, scope)):
            return ""
        return "the values leave this function; code elsewhere may depend on their dtype"
    caller = dtype.id if isinstance(dtype, ast.Name) and dtype.id in scope.params else None
    return dtype_change(ctx, consumers, scope, caller)


def _feeds_other_values(ctx: RuleContext, site: ast.Call, scope: Scope) -> bool:
    """``index = <site>`` is read, directly or through locals computed from it (``t = t / factor``), by
    something other than this function's phase products, the helper calls that form a phase, shape reads
    and comparisons: ``mask = index[:, None] - index[None, :]`` then returned (RetNet's decay mask)."""
    found = assigned_name(ctx, site)
    fn = scope.node
    if found is None or fn is None:
        return False
    inside = shape_only_reads(fn)
    for node in ast.walk(fn):  # a comparison gives booleans whatever the positions' dtype
        if isinstance(node, ast.Compare):
            inside.update(id(n) for n in ast.walk(node) if isinstance(n, ast.Name))
    for node in (*(p.node for p in ctx.model.products if p.scope.node is fn),
                 *(h.call for h in ctx.model.helper_positions if h.scope.node is fn)):
        inside.update(id(n) for n in ast.walk(node) if isinstance(n, ast.Name))
    todo, seen = [found], set()
    while todo:
        stmt, name = todo.pop()
        if (id(stmt), name) in seen:
            continue
        seen.add((id(stmt), name))
        for load in later_loads(fn, stmt, name):
            if id(load) in inside:
                continue
            owner = ctx.model.statement_of.get(id(load))
            if isinstance(owner, ast.Expr) and isinstance(owner.value, ast.Call) \
                    and isinstance(owner.value.func, ast.Attribute) and owner.value.func.attr == "append" \
                    and isinstance(owner.value.func.value, ast.Name) and owner.value.args \
                    and owner.value.args[0] is load:
                # ``axes_grids.append(grid)`` in a loop, then ``torch.meshgrid(*axes_grids)``: follow the list.
                todo.append((owner, owner.value.func.value.id))
                continue
            targets = owner.targets[0] if isinstance(owner, ast.Assign) and len(owner.targets) == 1 else None
            names = [t for t in (targets.elts if isinstance(targets, ast.Tuple) else [targets])
                     if isinstance(t, ast.Name)]
            if targets is not None and names and len(names) == len(getattr(targets, "elts", [targets])):
                # A local computed from it (``t = t / factor``, ``gw, gh = torch.meshgrid(gw, gh)``): follow it.
                todo.extend((owner, n.id) for n in names)
                continue
            return True
    return False


def dtype_change(ctx: RuleContext, products: list, scope: Scope, caller: str | None = None) -> str:  # type: ignore[type-arg]
    """Why making these products' inputs float32 changes a dtype that matters ("" if it does not).

    A rotary module that returns float32 tables or a float32 phase where it returned them in the
    module's dtype is what the fix is for: the attention code casts them at its boundary. It
    matters when the function itself multiplies activations by the tables (the rotated queries
    and keys would come out float32 and meet bfloat16 values in the attention), or when its
    tables or phase were meant to follow a ``dtype`` argument of the caller's."""
    reaching: list = []
    leaving = False
    for product in products:
        if product.positions.dtype is Dt.FULL or product.freq.dtype is Dt.FULL:
            continue  # a float32 operand makes the phase float32 already (type promotion)
        # The trig calls of phases in the same function (a phase can be joined with others on the way),
        # and same-file helpers the phase is handed to for its cos/sin.
        trigs = [t for t in (*ctx.model.trigs, *ctx.model.helper_trigs) if t.arg.product is product.node
                 or (t.scope.symbol == product.scope.symbol and t.arg.has(Role.PHASE))]
        if not trigs:
            leaving = True
        reaching += [t for t in trigs if t.arg.dtype is not Dt.FULL]
    if not reaching and not leaving:
        return ""
    cast_in = {c.scope.symbol for c in ctx.model.casts
               if (c.receiver.has(Role.TABLE) or c.receiver.has(Role.COMPLEX)) and c.target.dtype is not Dt.FULL}
    if reaching and not leaving and all(_trig_home(t) in cast_in for t in reaching):
        return ""
    if reaching and not leaving and all(_tables_returned_float32(ctx, t.scope.symbol) for t in reaching):
        return ""  # ``freqs.cos().repeat_interleave(2, dim=1).float()``: float32 tables whatever the inputs' dtype
    if caller is not None:
        return f"the tables no longer follow `{caller}`, the caller's choice of dtype"
    rotating = _rotates_activations(ctx, {t.scope.symbol for t in reaching} | {scope.symbol})
    if rotating:
        return (f"`{rotating}` is multiplied by the tables in this function and would come out float32, "
                f"meeting 16-bit tensors in the attention")
    return ""


def _trig_home(trig: Trig | TrigInHelper) -> str:
    """Where the cos/sin is taken: the helper a phase is handed to (``apply_rotary_pos_emb(q, freqs)``), or the
    function itself."""
    return trig.callee if isinstance(trig, TrigInHelper) else trig.scope.symbol


def _tables_returned_float32(ctx: RuleContext, symbol: str) -> bool:
    """Every value the function returns, or assigns and then returns, that takes a cos/sin ends in ``.float()``:
    its tables are float32 whatever dtype its phase had."""
    fn = _function(ctx, symbol)
    if fn is None:
        return False
    returned = {id(v) for r in ast.walk(fn) if isinstance(r, ast.Return) and r.value is not None
                for v in (r.value.elts if isinstance(r.value, ast.Tuple) else [r.value])}
    names = {n.id for r in ast.walk(fn) if isinstance(r, ast.Return) and r.value is not None
             for n in ast.walk(r.value) if isinstance(n, ast.Name)}
    found = False
    for node in ast.walk(fn):
        values = []
        if isinstance(node, ast.Return) and node.value is not None:
            values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id in names:
            values = [node.value]
        for value in values:
            if any(isinstance(n, ast.Call) and (dotted(n.func) or [""])[-1] == "polar" for n in ast.walk(value)):
                return False  # ``torch.polar(torch.ones_like(freqs), freqs)``: complex in the phase's own dtype
            if not any(is_trig_call(n) for n in ast.walk(value)):
                continue
            widened = isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
                and value.func.attr in ("float", "double") and not value.args
            if not widened and not (id(value) in returned and isinstance(value, ast.Name)):
                return False
            found = found or widened
    return found


def _rotates_activations(ctx: RuleContext, symbols: set[str]) -> str | None:
    """An activation parameter of one of these functions that is multiplied there (``x * cos``)."""
    for symbol in symbols:
        fn = _function(ctx, symbol)
        if fn is None:
            continue
        names = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}
        for node in ast.walk(fn):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
                for side in (node.left, node.right):
                    if isinstance(side, ast.Name) and side.id in names and ACTIVATION_PARAMS.match(side.id):
                        return side.id
    return None


def _function(ctx: RuleContext, symbol: str):  # type: ignore[no-untyped-def]
    parts = symbol.split(".")
    if len(parts) == 1:
        return ctx.model.functions.get(parts[0])
    info = ctx.model.classes.get(parts[0])
    return info.methods.get(parts[1]) if info is not None else None


def _widened_downstream(ctx: RuleContext, site: ast.Call, scope: Scope) -> bool:
    """``x = <site>`` read only as ``x.float()``; or, through local assignments, ``scale = torch.arange(...,
    dtype=dtype) / dim``, ``omega = torch.pow(base, -scale)``, then only ``omega.float()``: every value computed
    from the site ends widened, so the dtype goes no further than this function's phase."""
    fn = scope.node
    found = assigned_name(ctx, site, whole=False)
    if found is None or fn is None:
        return False
    widened = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("float", "double") \
                and not node.args:
            receiver = node.func.value
            while isinstance(receiver, ast.Subscript) or (  # ``inv_freq[None, None, :].float()``
                    isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Attribute)
                    and receiver.func.attr in ("unsqueeze", "view", "reshape", "expand", "contiguous")):
                receiver = receiver.value if isinstance(receiver, ast.Subscript) else receiver.func.value
            widened.add(id(receiver))
    todo, seen, ends = [found], set(), 0
    while todo:
        stmt, name = todo.pop()
        if (id(stmt), name) in seen:
            continue
        if len(seen) > 8:
            return False  # a long chain: not worth proving
        seen.add((id(stmt), name))
        loads = _until_rebound(fn, stmt, name, later_loads(fn, stmt, name))
        if not loads:
            return False  # kept as it is (returned, stored): not widened
        for load in loads:
            if id(load) in widened:
                ends += 1
                continue
            user = ctx.model.statement_of.get(id(load))
            if isinstance(user, ast.Assign) and len(user.targets) == 1 and isinstance(user.targets[0], ast.Name) \
                    and user is not stmt:
                todo.append((user, user.targets[0].id))  # ``omega = torch.pow(base, -scale)``: follow ``omega``
                continue
            return False
    return ends > 0


def _until_rebound(fn: ast.AST, stmt: ast.stmt, name: str, loads: list[ast.Name]) -> list[ast.Name]:
    """The loads of ``name`` up to (and inside) the first later statement that assigns it again at the function's
    top level (``freqs = torch.outer(pos.float(), freqs.float())``): reads after it read the new value."""
    body = getattr(fn, "body", [])
    rebound = next((s for s in body if isinstance(s, ast.Assign) and s.lineno > stmt.end_lineno  # type: ignore[operator]
                    and any(isinstance(t, ast.Name) and t.id == name for t in s.targets)), None)
    if rebound is None:
        return loads
    end = (rebound.end_lineno, rebound.end_col_offset)
    return [n for n in loads if (n.lineno, n.col_offset) <= end]


def _restored_as_float32_state(ctx: RuleContext, site: ast.Call, scope: Scope) -> bool:
    """``inv_freq = 1.0 / (base ** arange(..., dtype=dtype) ...)`` then ``self.register_buffer("inv_freq", inv_freq)``
    (Falcon's dynamic NTK rebuild), where the class registers that state elsewhere in float32 (its ``__init__``): in
    float32 the rebuilt state has the dtype the module's own construction gives it."""
    stmt = ctx.model.statement_of.get(id(site))
    fn = scope.node
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
            and any(n is site for n in ast.walk(stmt.value)) and fn is not None):
        return False
    local = stmt.targets[0].id
    stored = {r.ref.name for r in ctx.model.registrations if r.scope.symbol == scope.symbol
              and isinstance(r.node, ast.Call) and len(r.node.args) >= 2 and isinstance(r.node.args[1], ast.Name)
              and r.node.args[1].id == local}
    return bool(stored) and all(any(r.ref.name == name and r.scope.symbol != scope.symbol and r.value.dtype is Dt.FULL
                                    for r in ctx.model.registrations) for name in stored)


def _kept_in_self_read_widened(ctx: RuleContext, site: ast.Call, scope: Scope) -> bool:
    """``self.inv_freqs = [<site> for theta in thetas]`` (or ``= <site>``) in ``__init__``, a plain attribute,
    and every read of ``self.inv_freqs`` in the class widens what it reads (``self.inv_freqs[i].to(d).float()``):
    the class's own code is the only consumer, and it wants float32."""
    stmt = ctx.model.statement_of.get(id(site))
    fn = scope.node
    if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1 or not isinstance(fn, ast.FunctionDef) \
            or fn.name != "__init__" or "." not in scope.symbol:
        return False
    target = stmt.targets[0]
    if not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self"):
        return False
    value = stmt.value.elt if isinstance(stmt.value, (ast.ListComp, ast.GeneratorExp)) else stmt.value
    if not any(n is site for n in ast.walk(value)):
        return False
    info = ctx.model.classes.get(scope.symbol.split(".")[0])
    if info is None:
        return False
    reads = [node for node in ast.walk(info.node) if isinstance(node, ast.Attribute) and node is not target
             and node.attr == target.attr and isinstance(node.value, ast.Name) and node.value.id == "self"]
    parents = {id(child): parent for parent in ast.walk(info.node) for child in ast.iter_child_nodes(parent)}
    return bool(reads) and all(not isinstance(node.ctx, ast.Store) and _widened(ctx, node, parents) for node in reads)


def _kept_in_self_for_float32_phases(ctx: RuleContext, site: ast.Call, scope: Scope) -> bool:
    """``self.freqs = self.freqs.to(h)`` (llama's move of a plain float32 attribute next to the hidden states), where
    every read of ``self.freqs`` in the class inspects it (``.dtype``, ``.device``, ``.shape``), is the cast's own
    receiver, or is handed to a same-file function whose parameter only meets float32 positions in an elementwise
    product: that phase is float32 whatever the frequencies' dtype, so keeping them float32 changes no dtype."""
    stmt = ctx.model.statement_of.get(id(site))
    if not (isinstance(stmt, ast.Assign) and stmt.value is site and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Attribute) and isinstance(stmt.targets[0].value, ast.Name)
            and stmt.targets[0].value.id == "self" and "." in scope.symbol):
        return False
    attr = stmt.targets[0].attr
    info = ctx.model.classes.get(scope.symbol.split(".")[0])
    if info is None or any(attr in c.state and c.state[attr].ref.follows_module_casts
                           for c in ctx.model.classes.values()):
        return False
    nodes = [n for n in ast.walk(info.node) if isinstance(n, ast.Attribute) and n.attr == attr
             and isinstance(n.value, ast.Name) and n.value.id == "self"]
    if len(re.findall(rf"\.{attr}\b", ctx.source)) != len(nodes):
        return False  # read somewhere else in the file
    parents = {id(child): parent for parent in ast.walk(info.node) for child in ast.iter_child_nodes(parent)}
    inside = {id(n) for n in ast.walk(site)}
    handed = False
    for node in nodes:
        parent = parents.get(id(node))
        if isinstance(node.ctx, ast.Store) or id(node) in inside \
                or (isinstance(parent, ast.Attribute) and parent.attr in ("dtype", "device", "shape")):
            continue
        if not (isinstance(parent, ast.Call) and node in parent.args and _float32_phase_param(ctx, info, parent,
                                                                                              parent.args.index(node))):
            return False
        handed = True
    return handed


def _float32_phase_param(ctx: RuleContext, info, call: ast.Call, index: int) -> bool:  # type: ignore[no-untyped-def]
    """The ``index``-th argument of ``call`` (a same-file function or method) is read only inside elementwise
    products with float32 positions (and for its shape)."""
    name = (dotted(call.func) or [""])[-1]
    method = isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name) \
        and call.func.value.id == "self"
    fn = same_file_callable(ctx.model, info, name, method=True) if method else ctx.model.functions.get(name)
    if fn is None or any(isinstance(a, ast.Starred) for a in call.args[:index + 1]):
        return False
    params = call_params(fn, is_method=method)
    if index >= len(params):
        return False
    param = params[index]
    products = [p for p in ctx.model.products if p.scope.node is fn and p.freq.param == param]
    if not products or any(p.form != "elementwise" or p.positions.dtype is not Dt.FULL for p in products):
        return False
    allowed = shape_only_reads(fn) | {id(n) for p in products for n in ast.walk(p.node)}
    return all(id(n) in allowed for n in ast.walk(fn)
               if isinstance(n, ast.Name) and n.id == param and isinstance(n.ctx, ast.Load))


def _widened(ctx: RuleContext, node: ast.AST, parents: dict[int, ast.AST]) -> bool:
    """``node`` reaches ``.float()``/``.double()`` through subscripts and device-only moves (``.to(d)``)."""
    cur = node
    while True:
        parent = parents.get(id(cur))
        if isinstance(parent, ast.Subscript) and parent.value is cur:
            cur = parent
            continue
        if isinstance(parent, ast.Attribute) and parent.value is cur:
            call = parents.get(id(parent))
            if not (isinstance(call, ast.Call) and call.func is parent):
                return False
            if parent.attr in ("float", "double") and not call.args:
                return True
            device_only = parent.attr == "to" and all(k.arg in ("device", "non_blocking") for k in call.keywords) \
                and all("device" in ctx.code(a) and "dtype" not in ctx.code(a) for a in call.args)
            if not device_only:
                return False
            cur = call
            continue
        return False


def _returned_to_a_widening_caller(ctx: RuleContext, site: ast.Call, scope: Scope) -> bool:
    """A private function returns what ``site`` builds (``return 1.0 / (base ** (arange(..., dtype=x.dtype) /
    d))``), the file calls it once, as ``f = self._dynamic_inv_freq(...)``, and reads ``f`` only widened
    (``f.float()``): its dtype goes no further than that caller."""
    fn = scope.node
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or not fn.name.startswith("_") \
            or calls_in_text(ctx.source, fn.name) != 1:
        return False
    returns = [n for n in ast.walk(fn) if isinstance(n, ast.Return) and n.value is not None]
    if len(returns) != 1 or not any(n is site for n in ast.walk(returns[0].value)):  # type: ignore[arg-type]
        return False
    cls_name = scope.symbol.split(".")[0] if "." in scope.symbol else None
    calls = list(calls_of(ctx, cls_name, fn.name))
    if len(calls) != 1:
        return False
    caller, call = calls[0]
    widened = {id(n.func.value) for n in ast.walk(caller) if isinstance(n, ast.Call)
               and isinstance(n.func, ast.Attribute) and n.func.attr in ("float", "double")}
    return only_read_by(ctx, call, caller, widened)


def _only_fed_to_full_helpers(ctx: RuleContext, site: ast.Call, scope: Scope) -> bool:
    """``ids = <site>``, and every later read of ``ids`` is its metadata (``ids.ndim``), a reshaping
    assigned back to ``ids`` (``ids = ids[..., None]``) or an argument of a same-file function that
    returns float32 whatever it is given (Flux's ``rope(pos, ...)`` ends in ``.float()``)."""
    owner = ctx.model.statement_of.get(id(site))
    if isinstance(owner, ast.Assign) and isinstance(owner.value, ast.BinOp) \
            and isinstance(owner.value.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)) and site in (owner.value.left, owner.value.right):
        site = owner.value  # ``pos = <site> + offset``, ``<site> / factor``: the result is what the name holds
    found = assigned_name(ctx, site)
    fn = scope.node
    if found is None and fn is not None:
        return _handed_straight_to_a_phase(ctx, site, scope, fn)
    if found is None or fn is None:
        return False
    stmt, name = found
    allowed = shape_only_reads(fn)  # not ``.dtype``: that is what changes
    fed = False
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id == name and node is not stmt:
            value = node.value
            while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
                    and value.func.attr in _RESHAPES:  # ``ids = ids[None].expand(b, -1)``
                value = value.func.value
            if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name):
                allowed.add(id(value.value))
            elif isinstance(value, ast.Name) and value is not node.value:
                allowed.add(id(value))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ctx.model.full_returns:
            for arg in (*node.args, *(k.value for k in node.keywords)):
                for inner in ast.walk(arg):
                    if isinstance(inner, ast.Name) and inner.id == name:
                        allowed.add(id(inner))
                        fed = True
        elif isinstance(node, ast.Call) and (slots := _phase_slots(ctx, node, scope)) is not None:
            # ``apply_rope(x, positions)`` whose ``positions`` only ever enter its phase.
            given = [*zip(slots, node.args), *((k.arg, k.value) for k in node.keywords if k.arg in slots)]
            for slot, arg in given:
                if slot and isinstance(arg, ast.Name) and arg.id == name:
                    allowed.add(id(arg))
                    fed = True
    return fed and only_read_by(ctx, site, fn, allowed)


def _handed_straight_to_a_phase(ctx: RuleContext, site: ast.AST, scope: Scope, fn: ast.AST) -> bool:
    """``return self.forward(pos.type(dtype) / self.interpolate_factor)``: the values (scaled by a number at most)
    are an argument of a same-file callee whose parameter there only enters its phase."""
    for call in ast.walk(fn):
        if not isinstance(call, ast.Call) or not call.args:
            continue
        for i, arg in enumerate(call.args):
            scaled = isinstance(arg, ast.BinOp) and isinstance(arg.op, (ast.Mult, ast.Div)) and arg.left is site \
                and not any(isinstance(n, ast.Call) for n in ast.walk(arg.right))
            if arg is site or scaled:
                slots = _phase_slots(ctx, call, scope)
                return slots is not None and i < len(slots) and bool(slots[i])
    return False


def _phase_slots(ctx: RuleContext, call: ast.Call, scope: Scope) -> tuple[str, ...] | None:
    """The parameters of a same-file callee used only as phase positions: ``apply_rope(...)``, or
    ``self.rotary_emb(...)`` where ``__init__`` built ``self.rotary_emb`` from a class of this file."""
    func = call.func
    if isinstance(func, ast.Name):
        return ctx.model.phase_position_params.get(func.id)
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
        info = ctx.model.classes.get(scope.symbol.split(".")[0])
        mapped = next((c.vmapped[func.attr] for c in in_file_mro(ctx.model.classes, info)
                       if func.attr in c.vmapped), None) if info is not None else None
        if isinstance(mapped, ast.Name):  # ``self._batched = vmap(vmap(_angles))`` runs ``_angles``
            return ctx.model.phase_position_params.get(mapped.id)
        own = next((ctx.model.phase_position_params[f"{c.name}.{func.attr}"]
                    for c in in_file_mro(ctx.model.classes, info)
                    if f"{c.name}.{func.attr}" in ctx.model.phase_position_params), None) if info is not None else None
        if own is not None:  # ``self.forward(positions / factor)``: the class's own method
            return own
        held = held_class(ctx.model.classes, info, func.attr) if info is not None else None
        if held is not None:
            for cls in in_file_mro(ctx.model.classes, held):
                if f"{cls.name}.forward" in ctx.model.phase_position_params:
                    return ctx.model.phase_position_params[f"{cls.name}.forward"]
    return None


_RESHAPES = ("expand", "expand_as", "view", "reshape", "unsqueeze", "flatten", "contiguous", "repeat")


def _used_as_index(ctx: RuleContext, site: ast.Call, scope: Scope) -> bool:
    found = assigned_name(ctx, site, whole=False)
    fn = scope.node
    if found is None or fn is None:
        return False
    name = found[1]
    for node in ast.walk(fn):
        if isinstance(node, ast.Subscript) and any(isinstance(n, ast.Name) and n.id == name
                                                   for n in ast.walk(node.slice)):
            return True
        if isinstance(node, ast.Call):
            callee = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if callee in INDEXING_CALLS and any(isinstance(n, ast.Name) and n.id == name
                                                for arg in node.args for n in ast.walk(arg)):
                return True
    return False
