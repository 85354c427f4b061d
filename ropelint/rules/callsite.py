"""Positions or frequencies built in a dtype the caller passes: make the callers pass float32.

rotary-embedding-torch's ``get_seq_pos(seq_len, device, dtype)`` returns
``torch.arange(seq_len, dtype=dtype)`` and its callers pass the activations' dtype (so does a
``_inv_freq_for_length(n, device, dtype)`` builder). Building the values in float32 inside the method
would change what it returns to everybody; passing ``torch.float32`` at the file's own calls changes
only what this file feeds to its phase, and the method keeps its contract.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Callable

from ..diagnostics import FixPlan, NodeEdit, Replace
from ..model.interpreter import call_argument, call_params, float32_defaulted, held_class, in_file_mro, is_trig_call
from ..model.names import qualname
from .base import RESHAPES, RuleContext, calls_in_text, is_atom, later_loads
from .construction import assigned_value


def caller_dtype_fix(ctx: RuleContext, site: ast.AST) -> FixPlan | None:
    """The fix for ``torch.arange(..., dtype=<a dtype parameter>)`` in a function the file calls with
    that argument: every call passes ``torch.float32`` instead. None where it does not apply."""
    if not isinstance(site, ast.Call):
        return None
    dtype_arg = next((k.value for k in site.keywords if k.arg == "dtype"), None)
    if dtype_arg is None and isinstance(site.func, ast.Attribute) and site.func.attr in ("to", "type") \
            and len(site.args) == 1:
        dtype_arg = site.args[0]  # ``return grid.to(dtype)``
    if dtype_arg is None and isinstance(site.func, ast.Attribute) and site.func.attr in ("to", "type") \
            and len(site.args) == 2 and (qualname(site.func, ctx.imports) or "").startswith("torch.Tensor."):
        dtype_arg = site.args[1]  # ``torch.Tensor.to(steps, dtype)``: the method called unbound
    owner = enclosing_function(ctx, site)
    if not isinstance(dtype_arg, ast.Name) or owner is None:
        return None
    cls_name, fn = owner
    params = call_params(fn, is_method=cls_name is not None)
    param = _parameter_behind(fn, dtype_arg, params)
    symbol = f"{cls_name}.{fn.name}" if cls_name is not None else fn.name
    # The analysis must see the same thing, or a caller passing float32 would not clear the finding.
    if param is None or ctx.model.dtype_params.get(symbol) != param:
        return None
    roots = _root_calls(ctx, cls_name, fn, param)
    if roots is None:
        return None
    torch, imports = ctx.torch_name()
    edits: list[NodeEdit] = []
    confined = True
    kept_dtype: dict[int, tuple[Replace, ...] | None] = {}
    for caller, call, given in {id(given): (caller, call, given) for caller, call, given in roots}.values():
        if ctx.code(given).endswith("float32"):
            continue
        edits.append(Replace(given, f"{torch}.float32"))
        confined = confined and _feeds_only_own_calls(ctx, caller, getattr(call, "written", call))
        if id(caller) not in kept_dtype:  # (one dtype per caller: the first call's, when it calls several times)
            kept_dtype[id(caller)] = tables_kept_in(ctx, caller, ctx.code(given))
    if not edits:
        return None
    if any(casts is None for casts in kept_dtype.values()):
        return None  # tables the callers return uncast would change dtype, and no cast can be placed for them
    edits += [cast for casts in kept_dtype.values() if casts for cast in casts]
    description = f"pass `{torch}.float32` as `{param}` where this file calls `{fn.name}` (its default stays)"
    indirect = sorted({(ctx.line_of(call), ctx.code(call.func)) for _, call, _ in roots
                       if _called_name(call) != fn.name})
    if indirect:  # through a dict of functions, or a caller handing on its own ``dtype``
        where = ", ".join(f"`{func}(...)` at line {line}" for line, func in indirect)
        description = f"pass `{torch}.float32` as `{param}` at the calls that reach `{fn.name}` ({where})"
    if confined:
        return FixPlan("safe", description, (*edits, *imports))
    return FixPlan("unsafe", f"{description} (a call's result is used beyond this file's own functions)",
                   (*edits, *imports))


_CASTS = frozenset({"to", "type", "type_as", "float", "double", "half", "bfloat16"})


def tables_kept_in(ctx: RuleContext, caller: ast.AST, dtype: str,
                   is_table: Callable[[ast.AST], bool] = is_trig_call) -> tuple[Replace, ...] | None:
    """Casts to ``dtype`` for the cos/sin tables ``caller`` returns uncast (``return emb.cos(), emb.sin()``): they
    took the dtype it passed from their inputs, and float32 inputs would hand float32 tables to 16-bit queries (the
    attention then raises on mixed dtypes). () when none is needed; None when one is needed but a return also
    holds something else. ``is_table``: what makes a node a table (a cos/sin call, or a read of kept state)."""
    values: list[ast.expr] = []
    for node in ast.walk(caller):
        if isinstance(node, ast.Return) and node.value is not None:
            values += node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
    tables = [v for v in values if table_valued(caller, v, is_table)]
    uncast = [v for v in tables if not _ends_in_cast(caller, v)]
    if not uncast:
        return ()
    if len(tables) != len(values):
        return None
    return tuple(Replace(v, f"{ctx.code(v)}.to({dtype})" if is_atom(v) else f"({ctx.code(v)}).to({dtype})")
                 for v in uncast)


def table_valued(fn: ast.AST, value: ast.expr, is_table: Callable[[ast.AST], bool] = is_trig_call,
                 depth: int = 0) -> bool:
    """``emb.cos()`` (under reshapes), or a local assigned one (``cos = emb.cos()``), through a few locals
    (``cos_sin = self.cache[positions]``, ``cos, sin = cos_sin.chunk(2, dim=-1)``)."""
    if any(is_table(n) for n in ast.walk(value)):
        return True
    if not isinstance(value, ast.Name) or depth > 3:
        return False
    found = assigned_value(fn, value.id, value)
    # Assigned on several lines (``cos = emb.cos()``, then ``cos = cos.bfloat16()`` on one branch): a table if one
    # of them makes one.
    sources = [found[0]] if found is not None else _assignments_before(fn, value.id, value)
    return any(is_table(n) or (isinstance(n, ast.Name) and n is not value and n.id != value.id
                               and table_valued(fn, n, is_table, depth + 1))
               for source in sources if source is not None for n in ast.walk(source))


def _assignments_before(fn: ast.AST, name: str, before: ast.AST) -> list[ast.expr]:
    limit = (before.lineno, before.col_offset)  # type: ignore[attr-defined]
    return [node.value for node in ast.walk(fn) if isinstance(node, ast.Assign)
            and (node.lineno, node.col_offset) < limit and any(isinstance(t, ast.Name) and t.id == name
                                                               for t in node.targets)]


_SPLITS = RESHAPES | {"split", "chunk", "unbind", "tensor_split"}


def _last_in_line(fn: ast.AST, name: ast.Name) -> ast.expr | None:
    """What the last of several assignments of ``name`` before this read assigns, when it stands in the same
    statement list as the read (``output = ...; output = output.to(orig_dtype); return output``), so every path
    reaching the read passes it; None when it sits on a branch of its own."""
    bodies = [getattr(node, field) for node in ast.walk(fn) for field in ("body", "orelse", "finalbody")
              if isinstance(getattr(node, field, None), list)]
    for body in bodies:
        reading = next((i for i, stmt in enumerate(body) if any(n is name for n in ast.walk(stmt))), None)
        if reading is None:
            continue
        for stmt in reversed(body[:reading]):
            if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name.id for t in stmt.targets):
                return stmt.value if len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) else None
            if any(isinstance(n, ast.Name) and n.id == name.id and isinstance(n.ctx, ast.Store) for n in ast.walk(stmt)):
                return None  # rebound inside a compound statement (a branch, a loop)
    return None


def _ends_in_cast(fn: ast.AST, value: ast.expr, depth: int = 0) -> bool:
    """The value is cast where it is made, or split or reshaped from a local that is (``sincos = ....to(x.dtype)``,
    ``sin, cos = torch.split(sincos, half, dim=-1)``)."""
    if isinstance(value, ast.Name):
        found = assigned_value(fn, value.id, value)
        value = found[0] if found is not None and found[0] is not None else _last_in_line(fn, value) or value
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in _CASTS:
        return True
    while isinstance(value, ast.Subscript):
        value = value.value
    if isinstance(value, ast.Call) and isinstance(value.func, (ast.Attribute, ast.Name)) and depth < 3:
        name = value.func.attr if isinstance(value.func, ast.Attribute) else value.func.id
        source = value.func.value if isinstance(value.func, ast.Attribute) and not (
            isinstance(value.func.value, ast.Name) and value.func.value.id in ("torch", "th")) \
            else (value.args[0] if value.args else None)
        if name in _SPLITS and isinstance(source, (ast.Name, ast.Call, ast.Subscript)):
            return _ends_in_cast(fn, source, depth + 1)
    return False


def _root_calls(ctx: RuleContext, cls_name: str | None, fn: ast.FunctionDef, param: str, depth: int = 0,
                ) -> list[tuple[ast.FunctionDef, ast.Call, ast.expr]] | None:
    """(calling function, call, what it passes as ``param``) for every call of ``fn`` that decides ``param``: a
    call through a dict of functions (``self.rope_init_fn(...)`` after ``self.rope_init_fn = REGISTRY[kind]``)
    counts, and a call handing on a parameter of its own function (``dtype=dtype``) is replaced by that
    function's calls. None when some call is out of sight, passes nothing, or unpacks its arguments."""
    calls = list(calls_of(ctx, cls_name, fn.name, inherited=True))
    if calls_in_text(ctx.source, fn.name) > len(calls):
        return None  # a call the analysis did not see (pruned, or through another receiver) would keep its dtype
    if cls_name is None or fn.name in ctx.model.registry_calls:  # a module's dict of functions, or a class's
        through = ctx.model.registry_calls.get(fn.name, [])
        for reg, seen in ctx.model.registry_picks.items() if through else ():
            if len(re.findall(rf"\b{reg}\s*(?:\[|\.get\()", ctx.source)) > seen:
                return None  # a pick from the dict in code the analysis pruned: calls it cannot see
        seen_calls = Counter(_called_name(call) for call in through)
        for call in through:
            called = _called_name(call)
            # (A call through ``functools.partial`` is seen with the partial's arguments first: the one written
            # in the file says where it is.)
            owner = enclosing_function(ctx, getattr(call, "written", call))
            if owner is None or (called is not None and calls_in_text(ctx.source, called) > seen_calls[called]):
                return None  # ``self.rope_init_fn(...)`` also called where the analysis does not look
            calls.append((owner[1], call))
    if not calls:
        return None
    found: list[tuple[ast.FunctionDef, ast.Call, ast.expr]] = []
    float32_default = param in float32_defaulted(fn)
    for caller, call in calls:
        given = call_argument(fn, param, cls_name is not None, call)
        if given is None and float32_default:
            continue  # ``self.rope_init_fn(config, device=device)``: the float32 default decides
        if given is None or given is False:
            return None  # the default (or an unpacked list) decides: nothing to rewrite at the call
        owner = enclosing_function(ctx, getattr(call, "written", call)) if isinstance(given, ast.Name) and depth < 3 \
            else None
        if owner is not None and given.id in call_params(owner[1], is_method=owner[0] is not None) \
                and not _assigns(owner[1], given.id) and _only_handed_on(ctx, owner[1], given.id):
            handed = _root_calls(ctx, owner[0], owner[1], given.id, depth + 1)  # ``dtype=dtype``
            if handed is None:
                return None
            found.extend(handed)
        else:
            found.append((caller, call, given))
    return found


def _called_name(call: ast.Call) -> str | None:
    """``f`` of ``f(...)`` and of ``obj.f(...)``; None for ``REG[kind](...)``."""
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


def _only_handed_on(ctx: RuleContext, fn: ast.AST, name: str) -> bool:
    """Every read of the parameter ``name`` in ``fn`` is an argument of a call to this file's own functions:
    ``fn`` only hands the dtype on. One that also casts its result with it (``cos.to(dtype)``) keeps its
    parameter, and the call handing it on is the one to change."""
    handed: set[int] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and _own_callee(ctx, node.func):
            handed.update(id(a) for a in (*node.args, *(k.value for k in node.keywords)))
    return all(id(n) in handed for n in ast.walk(fn)
               if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load))


def _assigns(fn: ast.AST, name: str) -> bool:
    return any(isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store)
               for node in ast.walk(fn))


def enclosing_function(ctx: RuleContext, node: ast.AST) -> tuple[str | None, ast.FunctionDef] | None:
    """(class name or None, function) of the module-level function or method holding ``node``."""
    for fn_name, fn in ctx.model.functions.items():
        if isinstance(fn, ast.FunctionDef) and any(n is node for n in ast.walk(fn)):
            return None, fn
    for cls in ctx.model.classes.values():
        for method in cls.methods.values():
            if isinstance(method, ast.FunctionDef) and any(n is node for n in ast.walk(method)):
                return cls.name, method
    return None


def _parameter_behind(fn: ast.FunctionDef, name: ast.Name, params: list[str]) -> str | None:
    """``name`` is a parameter, or a local assigned once from ``default(<parameter>, ...)``-style calls."""
    if name.id in params:
        found = assigned_value(fn, name.id, name)
        if found is None:  # never reassigned before the use
            return name.id
        value = found[0]
        if isinstance(value, ast.Call) and value.args and isinstance(value.args[0], ast.Name) \
                and value.args[0].id == name.id:
            return name.id  # ``dtype = default(dtype, self.cached_freqs.dtype)``
        if isinstance(value, ast.IfExp) and any(isinstance(v, ast.Name) and v.id == name.id
                                                for v in (value.body, value.orelse)):
            return name.id  # ``dtype = dtype if dtype is not None else torch.float32``
        if isinstance(value, ast.BoolOp) and isinstance(value.op, ast.Or) and isinstance(value.values[0], ast.Name) \
                and value.values[0].id == name.id:
            return name.id  # ``dtype = dtype or torch.get_default_dtype()``
    return None


def calls_of(ctx: RuleContext, cls_name: str | None, name: str, *, through_held: bool = False,  # type: ignore[no-untyped-def]
             inherited: bool = False):
    """(calling function, call) for ``self.<name>(...)`` in the methods of the class and its in-file subclasses,
    or ``<name>(...)`` for a function; with ``through_held``, also ``self.rope(...)`` in any class whose
    ``rope`` holds the class (``name`` being its ``forward`` or ``__call__``); with ``inherited``, also in the
    methods of its in-file bases, which run the override on the class's instances."""
    bases = {c.name for c in in_file_mro(ctx.model.classes, ctx.model.classes[cls_name])} \
        if inherited and cls_name in ctx.model.classes else set()
    for info in ctx.model.classes.values():
        own = cls_name is not None and (any(c.name == cls_name for c in in_file_mro(ctx.model.classes, info))
                                        or info.name in bases)
        for caller in info.methods.values() if own or cls_name is None or through_held else ():
            for node in ast.walk(caller):
                if not isinstance(node, ast.Call):
                    continue
                func = node.func
                if isinstance(func, ast.Name) and cls_name is None and func.id == name:
                    yield caller, node
                elif cls_name is not None and isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                        and func.value.id == "self":
                    if own and func.attr == name:
                        yield caller, node
                    elif through_held and getattr(held_class(ctx.model.classes, info, func.attr), "name", None) \
                            == cls_name:
                        yield caller, node
    for caller in ctx.model.functions.values() if cls_name is None else ():
        for node in ast.walk(caller):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name:
                yield caller, node


def _feeds_only_own_calls(ctx: RuleContext, caller: ast.AST, call: ast.Call) -> bool:
    """``seq = self.f(...)`` and every later read of ``seq`` is an argument of a call to this file's
    own functions or methods (``self.forward(seq, ...)``): the positions go nowhere else."""
    owner = ctx.model.statement_of.get(id(call))
    if isinstance(owner, ast.Assign) and owner.value is call and len(owner.targets) == 1 \
            and isinstance(owner.targets[0], ast.Attribute) and isinstance(owner.targets[0].value, ast.Name) \
            and owner.targets[0].value.id == "self" and not re.search(r"pos|ids|idx|index|step", owner.targets[0].attr):
        # ``self.inv_freq = self._INIT[kind](...)``: the module's own frequencies, float32 as they should be (not
        # positions kept on the module, which other code may use as indices).
        return True
    if isinstance(owner, ast.Assign) and owner.value is call and len(owner.targets) == 1 \
            and isinstance(owner.targets[0], ast.Tuple):
        # ``inv_freq, self.attention_scaling = self.rope_init_fn(...)``: each name goes to the module's own state.
        names = [e.id for e in owner.targets[0].elts if isinstance(e, ast.Name)]
        return bool(names) and all(_only_kept(caller, later_loads(caller, owner, name), _phase_operands(ctx, caller))
                                   for name in names)
    value = owner.value if isinstance(owner, ast.Assign) else None
    while isinstance(value, ast.Subscript):
        value = value.value  # ``seq = self.get_seq_pos(n, ...)[positions]``: some of the same positions
    if not (isinstance(owner, ast.Assign) and value is call and len(owner.targets) == 1
            and isinstance(owner.targets[0], ast.Name)):
        return False
    name = owner.targets[0].id
    loads = later_loads(caller, owner, name)
    # An operand of this function's own phase (``pos[..., None] * inv_freq.float()``) goes nowhere else.
    allowed = _phase_operands(ctx, caller)
    for node in ast.walk(caller):
        if isinstance(node, ast.Call) and _own_callee(ctx, node.func):
            for arg in (*node.args, *(k.value for k in node.keywords)):
                # A slice or reshape of the positions (``seq[-q_len:]``, ``grid[i].reshape(-1)``).
                while isinstance(arg, ast.Subscript) or (
                        isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute)
                        and arg.func.attr in ("reshape", "view", "flatten", "squeeze", "unsqueeze", "contiguous")):
                    arg = arg.value if isinstance(arg, ast.Subscript) else arg.func.value  # type: ignore[union-attr]
                if isinstance(arg, ast.Attribute) and arg.attr in ("dtype", "device"):
                    arg = arg.value  # ``make_positions(ids, dtype=inv_freq.dtype)``: its dtype, to this file's own
                if isinstance(arg, ast.Name) and arg.id == name:
                    allowed.add(id(arg))
    return bool(loads) and all(id(n) in allowed for n in loads)


def _phase_operands(ctx: RuleContext, fn: ast.AST) -> set[int]:
    """The name nodes inside the operands of the phase products ``fn`` forms."""
    return {id(n) for product in ctx.model.products if product.scope.node is fn
            for operand in product.operands for n in ast.walk(operand) if isinstance(n, ast.Name)}


def _only_kept(fn: ast.AST, loads: list[ast.Name], operands: frozenset[int] | set[int] = frozenset()) -> bool:
    """Every read registers the value as module state, assigns it to ``self`` or is an operand of ``fn``'s own
    phase: the module's rotary reads it, and a float32 value is what it should be."""
    kept: set[int] = set(operands)
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "register_buffer" and len(node.args) >= 2:
            kept.add(id(node.args[1]))
        elif isinstance(node, ast.Assign) and all(isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                                                  and t.value.id == "self" for t in node.targets):
            kept.add(id(node.value))
    return all(id(n) in kept for n in loads)


def _own_callee(ctx: RuleContext, func: ast.AST) -> bool:
    if isinstance(func, ast.Name):
        return func.id in ctx.model.functions
    return isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self"
