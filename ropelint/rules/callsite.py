"""Positions or frequencies built in a dtype the caller passes: make the callers pass float32.

rotary-embedding-torch's ``get_seq_pos(seq_len, device, dtype)`` returns
``torch.arange(seq_len, dtype=dtype)`` and its callers pass the activations' dtype (so does a
``_inv_freq_for_length(n, device, dtype)`` builder). Building the values in float32 inside the method
would change what it returns to everybody; passing ``torch.float32`` at the file's own calls changes
only what this file feeds to its phase, and the method keeps its contract.
"""

from __future__ import annotations

import ast

from ..diagnostics import FixPlan, NodeEdit, Replace
from ..model.interpreter import call_params, held_class, in_file_mro
from .base import RuleContext, calls_in_text, later_loads
from .construction import assigned_value


def caller_dtype_fix(ctx: RuleContext, site: ast.AST) -> FixPlan | None:
    """The fix for ``torch.arange(..., dtype=<a dtype parameter>)`` in a function the file calls with
    that argument: every call passes ``torch.float32`` instead. None where it does not apply."""
    if not isinstance(site, ast.Call):
        return None
    dtype_arg = next((k.value for k in site.keywords if k.arg == "dtype"), None)
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
    calls = list(calls_of(ctx, cls_name, fn.name, inherited=True))
    if not calls or calls_in_text(ctx.source, fn.name) > len(calls):
        return None  # a call the analysis did not see (pruned, or through another receiver) would keep its dtype
    torch, imports = ctx.torch_name()
    edits: list[NodeEdit] = []
    confined = True
    for caller, call in calls:
        given = next((k.value for k in call.keywords if k.arg == param), None)
        positional = params.index(param) if param in params[:len(params) - len(fn.args.kwonlyargs)] else None
        if given is None and positional is not None and positional < len(call.args):
            given = call.args[positional]
        if given is None or any(isinstance(a, ast.Starred) for a in call.args):
            return None  # the default (or an unpacked list) decides: nothing to rewrite at the call
        if ctx.code(given).endswith("float32"):
            continue
        edits.append(Replace(given, f"{torch}.float32"))
        confined = confined and _feeds_only_own_calls(ctx, caller, call)
    if not edits:
        return None
    description = f"pass `{torch}.float32` as `{param}` where this file calls `{fn.name}` (its default stays)"
    if confined:
        return FixPlan("safe", description, (*edits, *imports))
    return FixPlan("unsafe", f"{description} (a call's result is used beyond this file's own functions)",
                   (*edits, *imports))


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
    if not (isinstance(owner, ast.Assign) and owner.value is call and len(owner.targets) == 1
            and isinstance(owner.targets[0], ast.Name)):
        return False
    name = owner.targets[0].id
    loads = later_loads(caller, owner, name)
    allowed: set[int] = set()
    # An operand of this function's own phase (``pos[..., None] * inv_freq.float()``) goes nowhere else.
    for product in ctx.model.products:
        for operand in product.operands if product.scope.node is caller else ():
            allowed.update(id(n) for n in ast.walk(operand) if isinstance(n, ast.Name) and n.id == name)
    for node in ast.walk(caller):
        if isinstance(node, ast.Call) and _own_callee(ctx, node.func):
            for arg in (*node.args, *(k.value for k in node.keywords)):
                if isinstance(arg, ast.Subscript):  # a slice of the positions (``seq[-q_len:]``)
                    arg = arg.value
                if isinstance(arg, ast.Name) and arg.id == name:
                    allowed.add(id(arg))
    return bool(loads) and all(id(n) in allowed for n in loads)


def _own_callee(ctx: RuleContext, func: ast.AST) -> bool:
    if isinstance(func, ast.Name):
        return func.id in ctx.model.functions
    return isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self"
