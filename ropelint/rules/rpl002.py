from __future__ import annotations

import ast
import dataclasses
import re

from ..diagnostics import AddImport, FixPlan, InsertAfterStatement, Replace
from ..model.events import Product, Registration
from ..model.names import dotted, string_value
from ..model.values import Dt, Role, StateKind, StateRead
from .base import Rule, RuleContext, tuple_code
from .builder import extract_builder
from .casts import BOUNDARY_CASTS, NO_BOUNDARY_CAST, boundary_casts, dtype_change, rotation_output_casts
from .construction import assigned_value, match_default
from .keep import construction_casts, keep_fix, rotary_siblings
from .lazy import lazy_default
from .rebuild import rebuild_call

RUNTIME_IMPORT = "from ropelint import runtime as rope_runtime"
# Decorators that run the method as written: they cannot update module state behind its back.
PLAIN_DECORATORS = {"no_grad", "inference_mode", "enable_grad", "staticmethod", "classmethod", "wraps",
                    "disable", "ignore", "unused", "autocast", "custom_fwd", "jit", "script", "compile"}


class InvFreqInModuleState(Rule):
    code = "RPL002"

    def check(self, ctx: RuleContext) -> None:
        for product in ctx.model.products:
            for read in product.freq.reads:
                if not (read.follows_module_casts and not self._repaired(ctx, product.scope.symbol, read.ref.name)
                        and not _integer_state(ctx, read.ref)):
                    continue
                if _through_submodule(read):
                    # ``self.freqs.inv_freq`` of a module this file defines: the fix keeps its dtype in that class.
                    self._report_kept(ctx, read, product.scope, "inverse frequencies",
                                      f"feed the phase at line {ctx.line_of(product.node)}; `module.bfloat16()`/"
                                      f"`.half()` round them and `.float()` at use restores nothing")
                else:
                    self._report(ctx, product, read)
        for power in ctx.model.scale_powers:
            for read in power.base.reads:
                if read.follows_module_casts and not self._repaired(ctx, power.scope.symbol, read.ref.name):
                    self._report_scale(ctx, power, read)
        for handed in ctx.model.helper_freqs:
            if handed.scope.symbol.endswith(".__init__"):
                continue  # read while the module is built, before any cast could round it
            for read in handed.arg.reads:
                if read.follows_module_casts and not self._repaired(ctx, handed.scope.symbol, read.ref.name):
                    self._report_handed(ctx, handed, read)

    def finish(self, ctx: RuleContext) -> None:
        rebuilds_that_can_fail(ctx)

    def _report_scale(self, ctx: RuleContext, power, read: StateRead) -> None:  # type: ignore[no-untyped-def]
        """xPos: ``self.scale ** power`` with ``power`` growing with the position; a cast rounds the base by up
        to 2**-9 (bfloat16), and the power multiplies that relative error (by 29 at position 30000 with
        ``scale_base=512``): the keep fix leaves the base as built."""
        cls_name, _, producer = power.scope.symbol.rpartition(".")
        self._report_kept(ctx, read, power.scope, "the scale base",
                          f"is raised to a power that grows with the position (line {ctx.line_of(power.node)}, "
                          f"an xPos scale); `module.bfloat16()`/`.half()` round it, and the power multiplies that "
                          f"relative error", noun="", also=tuple(rotation_output_casts(ctx, cls_name, producer)))

    def _report_handed(self, ctx: RuleContext, handed, read: StateRead) -> None:  # type: ignore[no-untyped-def]
        """State passed to a same-file function that forms the phase from it (``build_pos_embed(bands=self.bands)``):
        the forward rebuild cannot reach into the callee, so the fix keeps the state's dtype."""
        # Per-head bases (``head_thetas``, ``rope_bases``: 10000 becomes 9984); ``freqs_base_t`` holds frequencies.
        base = re.search(r"theta|(?:^|_)bases?$", read.ref.name.lower()) is not None
        self._report_kept(ctx, read, handed.scope, "the frequency base" if base else "inverse frequencies",
                          f"are handed to `{handed.callee}`, which forms the phase from them; "
                          f"`module.bfloat16()`/`.half()` round them and `.float()` at use restores nothing",
                          noun="frequency bases " if base else "inverse frequencies ")

    def _report_kept(self, ctx: RuleContext, read: StateRead, scope, what: str, says: str,  # type: ignore[no-untyped-def]
                     noun: str = "inverse frequencies ", also: tuple[Replace, ...] = ()) -> None:
        """A finding at ``read`` whose fix keeps the state's dtype through module casts (``_apply``); ``also``: casts
        that keep what the state reaches in the activations' dtype."""
        ref = read.ref
        spelled = ctx.code(read.node) if _through_submodule(read) else f"self.{ref.name}"
        message = f"{noun}`{spelled}` ({ref.describe()} registered at line {ctx.line_of(ref.node)}) {says}"
        fix, why = keep_fix(ctx, ref, what)
        if fix is not None and also:
            fix = dataclasses.replace(fix, description=f"{fix.description}; the rotation it reaches hands back the "
                                                       f"activations' dtype", edits=(*fix.edits, *also))
        if fix is None and why:
            message += f" (no automatic fix: {why})"
        ctx.report(self.code, read.node, message, scope, fix)

    def _report(self, ctx: RuleContext, product: Product, read: StateRead) -> None:
        ref = read.ref
        held = next((r.value for r in ctx.model.registrations if r.ref is ref), None)
        named = "freq" in ref.name.lower() or ref.name.lower() in ("theta", "omega", "bands")
        noun = "inverse frequencies" if held is None or held.has(Role.INV_FREQ) or named \
            else "factors of the inverse frequencies"
        message = (f"{noun} `self.{ref.name}` ({ref.describe()} registered at line "
                   f"{ctx.line_of(ref.node)}) feed the phase at line {ctx.line_of(product.node)}; "
                   f"`module.bfloat16()`/`.half()` round them and `.float()` at use restores nothing")
        fix, why, _ = self._fix(ctx, product, read)
        if fix is None or fix.safety == "unsafe" or rotary_siblings(ctx, ref) or construction_casts(ctx, ref):
            # Rebuilding in forward is not possible (or not provable), or cached tables built from the
            # state would still be rounded by a cast and back, or the construction itself casts to a
            # 16-bit-able dtype (a rebuild would copy the cast): keep the dtype of all of them instead.
            kept, why_not = keep_fix(ctx, ref, "inverse frequencies")
            if kept is not None and (fix is None or kept.safety == "safe"):
                fix, why = kept, ""
            elif fix is None:
                why = f"{why}; {why_not}" if why and why_not else why or why_not
        if fix is not None and fix.safety == "safe":
            readers = [p for p in ctx.model.products if any(r.ref is ref for r in p.freq.reads)]
            change = dtype_change(ctx, readers, product.scope)
            if change:
                fix = FixPlan("unsafe", f"{fix.description} ({change})", fix.edits)
            elif (kept := boundary_casts(ctx, readers)) is None:
                fix = FixPlan("unsafe", f"{fix.description} ({NO_BOUNDARY_CAST})", fix.edits)
            elif kept:
                fix = FixPlan("safe", f"{fix.description}, {BOUNDARY_CASTS}", (*fix.edits, *kept))
        if fix is None and why:
            message += f" (no automatic fix: {why})"
        ctx.report(self.code, read.node, message, product.scope, fix)

    @staticmethod
    def _repaired(ctx: RuleContext, symbol: str, name: str) -> bool:
        """The class ``symbol`` lies in repairs ``name`` itself (an ``_apply`` override, a dtype guard)."""
        info = ctx.model.classes.get(symbol.split(".")[0])
        return info is not None and name in info.repaired

    def _fix(self, ctx: RuleContext, product: Product, read: StateRead) -> tuple[FixPlan | None, str, bool]:
        """(fix, why there is none, whether the state is updated after construction)."""
        ref = read.ref
        if ref.kind is StateKind.PARAMETER and not ref.frozen:
            return None, "a Parameter may be learned, so it cannot be rebuilt from its construction", False
        lazy = self._lazy(ctx, product, read)
        if lazy is not None:
            return lazy, "", False
        if "{}" in ref.name:
            per_layer = self._per_layer_fix(ctx, product, read)
            if per_layer is not None:
                return per_layer, "", False
            return None, "the buffer's name is built at run time (one buffer per layer type or loop step)", False
        family = self._family(ctx, ref.node)
        registrations = [r for r in ctx.model.registrations
                         if r.ref.name == ref.name and r.scope.symbol.split(".")[0] in family]
        if len(registrations) != 1 or registrations[0].ref is not ref:
            return None, f"`{ref.name}` is registered more than once in this class hierarchy", True
        reg = registrations[0]
        if reg.scope.symbol.rsplit(".", 1)[-1] != "__init__" or not isinstance(reg.scope.node, ast.FunctionDef):
            return None, f"`{ref.name}` is (re)built outside `__init__`", True
        if self._assigned_elsewhere(ctx, ref.name, reg, family):
            return None, f"`self.{ref.name}` is reassigned after construction (e.g. dynamic scaling)", True
        decorator = self._updating_decorator(ctx, product)
        if decorator is not None:
            return None, f"`@{decorator}` on `{product.scope.symbol}` may update `{ref.name}` (e.g. dynamic scaling)", True
        writer = self._writing_function(ctx, ref.name)
        if writer is not None:
            return None, f"`{writer}` writes `{ref.name}` on a module it is given", True
        value = self._registered_expression(reg)
        if value is None:
            return None, "the registered value is not a single expression", False
        index = None
        local = value.id if isinstance(value, ast.Name) else None
        if local is not None:
            assigned = assigned_value(reg.scope.node, local, reg.node)
            if assigned is None or assigned[0] is None:
                built = self._builder_fix(ctx, product, read, reg, local)
                if built is not None:
                    return built, "", False
                return None, "the frequencies are assigned more than once before registration", False
            value, index = assigned
        device = self._device(product, read)
        spec = match_default_or_none(ctx, value) if index is None else None
        if spec is None:
            args_attr = f"_{ref.name.strip('_')}_args"
            again = rebuild_call(ctx, value, lambda i: f"self.{args_attr}[{i}]", index)
            if again is not None:
                rebuilt, captured = again
                call = (f"rope_runtime.inv_freq_from(lambda device: {rebuilt}, device={device})")
                edits: list = [Replace(read.node, call), AddImport(RUNTIME_IMPORT)]
                if captured:
                    edits.insert(0, InsertAfterStatement(
                        reg.node, f"self.{args_attr} = {tuple_code(captured)}  # ropelint: arguments to rebuild "
                                  f"`{ref.name}` in forward"))
                return FixPlan(
                    "safe",
                    f"rebuild `{ref.name}` in forward with the module's own construction on the positions' device "
                    f"(nothing updates it after `__init__`; the helper rejects a 16-bit result at run time)",
                    tuple(edits),
                ), "", False
            built = self._builder_fix(ctx, product, read, reg, local) if local is not None else None
            if built is not None:
                return built, "", False
            return None, ("the construction is not the default `1 / (base ** (arange(0, dim, 2) / dim))`; "
                          "rebuild it in float32 inside forward with the module's own code"), False
        dim_code, base_code = spec
        spec_attr = f"_{ref.name.strip('_')}_spec"
        init_line = f"self.{spec_attr} = ({dim_code}, {base_code})  # ropelint: float32 rebuild of `{ref.name}`"
        call = f"rope_runtime.inv_freq(*self.{spec_attr}, device={device})"
        return FixPlan(
            "safe",
            f"rebuild `{ref.name}` in float32 on the positions' device in forward (the buffer stays registered)",
            (InsertAfterStatement(reg.node, init_line), Replace(read.node, call), AddImport(RUNTIME_IMPORT)),
        ), "", False

    @staticmethod
    def _registered_expression(reg: Registration) -> ast.expr | None:
        node = reg.node
        if isinstance(node, ast.Call):
            args = node.args
            name = string_value(args[0]) if args else None
            if name is not None and len(args) >= 2:
                return args[1]
            return next((k.value for k in node.keywords if k.arg == "tensor"), None)
        value = getattr(node, "value", None)
        if isinstance(value, ast.Call) and value.args:  # self.x = nn.Buffer(expr, ...)
            return value.args[0]
        return None

    @staticmethod
    def _family(ctx: RuleContext, node: ast.AST) -> set[str]:
        """The class that registered ``node`` with its same-file bases and subclasses."""
        classes = ctx.model.classes
        owner = next((name for name, info in classes.items()
                      if any(r.node is node for r in ctx.model.registrations if r.scope.symbol.split(".")[0] == name)),
                     None)
        if owner is None:
            return set(classes)
        family = {owner}
        changed = True
        while changed:
            changed = False
            for name, info in classes.items():
                related = name in family or any(b in family for b in info.bases) \
                    or any(name in classes[f].bases for f in family if f in classes)
                if related and name not in family:
                    family.add(name)
                    changed = True
        return family

    @staticmethod
    def _assigned_elsewhere(ctx: RuleContext, name: str, reg: Registration, family: set[str]) -> bool:
        for cls_name in family:
            info = ctx.model.classes.get(cls_name)
            writers = info.writes.get(name, set()) if info else set()
            if writers - {reg.scope.symbol}:
                return True
        return False

    def _builder_fix(self, ctx: RuleContext, product: Product, read: StateRead, reg: Registration,
                     local: str) -> FixPlan | None:
        """Several statements of ``__init__`` compute the state: copy them into a builder method forward calls."""
        info = ctx.model.classes.get(reg.scope.symbol.split(".")[0])
        init = reg.scope.node
        if info is None or not isinstance(init, ast.FunctionDef):
            return None
        builder = extract_builder(ctx, info, init, reg.node, local, read.ref.name)
        if builder is None:
            return None
        args_attr = f"_{read.ref.name.strip('_')}_args"
        arguments = f"*self.{args_attr}, " if builder.args else ""
        call = (f"rope_runtime.inv_freq_from(lambda device: self.{builder.name}({arguments}device=device), "
                f"device={self._device(product, read)})")
        edits: list = [InsertAfterStatement(init, builder.code), Replace(read.node, call), AddImport(RUNTIME_IMPORT)]
        if builder.args:
            edits.insert(0, InsertAfterStatement(reg.node, f"self.{args_attr} = {tuple_code(builder.args)}  "
                                                           f"# ropelint: arguments to rebuild `{read.ref.name}` in forward"))
        return FixPlan("safe", f"rebuild `{read.ref.name}` in forward with a copy of the `__init__` statements that "
                               f"compute it (nothing updates it after `__init__`; the helper rejects a 16-bit result "
                               f"at run time)", tuple(edits))

    def _per_layer_fix(self, ctx: RuleContext, product: Product, read: StateRead) -> FixPlan | None:
        """One buffer per layer type, ``register_buffer(f"{layer_type}_inv_freq", init_fn(config, device, ...))`` in
        a loop of ``__init__``: the arguments of each call are recorded under the buffer's name, and forward calls
        the same function again for the name it reads."""
        ref = read.ref
        regs = [r for r in ctx.model.registrations if r.ref is ref]
        info = ctx.model.classes.get(product.scope.symbol.split(".")[0])
        if len(regs) != 1 or info is None or not isinstance(read.node, ast.Call) or len(read.node.args) != 2:
            return None
        reg = regs[0]
        init = reg.scope.node
        if not isinstance(init, ast.FunctionDef) or reg.scope.symbol.rsplit(".", 1)[-1] != "__init__":
            return None
        family = self._family(ctx, reg.node)
        writers = set().union(*(ctx.model.classes[c].writes.get(ref.name, set()) for c in family
                                if c in ctx.model.classes))
        if writers - {reg.scope.symbol} or self._updating_decorator(ctx, product) is not None:
            return None
        name_node, value = self._template_registration(reg.node)
        if name_node is None or not isinstance(value, ast.Name) \
                or string_value(name_node) != string_value(read.node.args[1]) or ref.name.count("{}") != 1:
            return None
        assigned = assigned_value(init, value.id, reg.node)
        if assigned is None or not isinstance(assigned[0], ast.Call):
            return None
        call, index = assigned
        again = rebuild_call(ctx, call, lambda i: f"args[{i}]", index)
        if again is None:
            return None
        rebuilt, captured = again
        attr = f"_{ref.name.replace('{}', '').strip('_')}_args"
        key = ctx.code(name_node)
        record = (f"self.{attr} = {{**getattr(self, {attr!r}, {{}}), {key}: {tuple_code(captured)}}}"
                  f"  # ropelint: arguments to rebuild `{ref.name}` in forward")
        lookup = f"self.{attr}[{ctx.code(read.node.args[1])}]"
        code = (f"rope_runtime.inv_freq_from(lambda device, args={lookup}: {rebuilt}, "
                f"device={self._device(product, read)})")
        return FixPlan("safe", f"rebuild each `{ref.name}` in forward with the call that built it in `__init__` "
                               f"(nothing updates them after `__init__`; the helper rejects a 16-bit result at run "
                               f"time)", (InsertAfterStatement(reg.node, record), Replace(read.node, code),
                                          AddImport(RUNTIME_IMPORT)))

    @staticmethod
    def _template_registration(node: ast.AST) -> tuple[ast.AST | None, ast.AST | None]:
        """(name expression, value) of ``self.register_buffer(f"...", value)`` or ``setattr(self, f"...", nn.Buffer(value))``."""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "register_buffer" \
                and len(node.args) >= 2:
            return node.args[0], node.args[1]
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "setattr" and len(node.args) == 3 \
                and isinstance(node.args[2], ast.Call) and node.args[2].args:
            return node.args[1], node.args[2].args[0]
        return None, None

    def _lazy(self, ctx: RuleContext, product: Product, read: StateRead) -> FixPlan | None:
        """State built on the first forward from the default construction: computed in forward instead."""
        name = read.ref.name
        info = ctx.model.classes.get(product.scope.symbol.split(".")[0])
        spec = lazy_default(ctx, info, name) if info is not None else None
        if spec is None:
            return None
        call = f"rope_runtime.inv_freq({spec[0]}, {spec[1]}, device={self._device(product, read)})"
        return FixPlan("safe", f"compute `{name}` in float32 on the positions' device in forward, as the first "
                               f"forward built it (the lazy build stays for other readers)",
                       (Replace(read.node, call), AddImport(RUNTIME_IMPORT)))

    @staticmethod
    def _updating_decorator(ctx: RuleContext, product: Product) -> str | None:
        """A decorator on the reading method (or on its class) that may rewrite module state before it
        runs, such as transformers' ``@dynamic_rope_update``; None when all of them run it as written."""
        node = product.scope.node
        cls = ctx.model.classes.get(product.scope.symbol.split(".")[0])
        decorators = list(getattr(node, "decorator_list", ())) + list(cls.node.decorator_list if cls else ())
        for dec in decorators:
            target = dec.func if isinstance(dec, ast.Call) else dec
            parts = dotted(target) or ["?"]
            if not any(part in PLAIN_DECORATORS for part in parts):
                return ".".join(parts)
        return None

    @staticmethod
    def _writing_function(ctx: RuleContext, name: str) -> str | None:
        """A same-file function (not a method) that registers or assigns ``name`` on a module it receives."""
        import re

        pattern = re.compile(rf"register_buffer\(\s*f?['\"]{re.escape(name)}['\"]|\.{re.escape(name)}\s*=[^=]"
                             rf"|setattr\([^,]+,\s*['\"]{re.escape(name)}['\"]")
        for fn_name, fn in ctx.model.functions.items():
            if pattern.search(ctx.spans.text(fn)):
                return fn_name
        return None

    @staticmethod
    def _device(product: Product, read: StateRead) -> str:
        scope = product.scope
        if scope.node is not None and not any(n is read.node for n in ast.walk(scope.node)):
            # Read in another method (``@property def inv_freq(self): return self.omega``): only the state
            # itself is certain to be there, and it follows ``.to(device)``.
            return f"self.{read.ref.name}.device"
        for param in scope.params:
            if param in ("position_ids", "positions", "pos", "position", "t", "seq", "cache_position"):
                return f"{param}.device"
        if scope.activation is not None:
            return f"{scope.activation}.device"
        if "device" in scope.params:
            return "device"
        return f"self.{product.freq.read.ref.name}.device" if product.freq.read else "None"


def match_default_or_none(ctx: RuleContext, value: ast.expr) -> tuple[str, str] | None:
    spec = match_default(value, ctx.spans, ctx.imports)
    if spec is None:
        return None
    return ctx.code(spec.dim), ctx.code(spec.base)


def _integer_state(ctx: RuleContext, ref) -> bool:  # type: ignore[no-untyped-def]
    """``register_buffer("freq_exponents", torch.arange(0, dim, 2, dtype=torch.int64))``: module casts convert
    floating tensors only, so frequencies computed from an integer buffer in forward are exact."""
    held = [r.value for r in ctx.model.registrations if r.ref is ref]
    return bool(held) and all(v.dtype is Dt.INT and v.site is not None for v in held)


def rebuilds_that_can_fail(ctx: RuleContext) -> None:
    """A safe RPL002 fix that rebuilds the frequencies with the module's own construction
    (``rope_runtime.inv_freq_from(lambda device: ...)``) relies on that construction being float32: the helper
    rejects a 16-bit result at run time. While an RPL006 finding in a builder function of this file (or a method of
    the same class) has no safe fix, that construction can still be 16-bit, so the rebuild is unsafe until it has
    been fixed."""
    open_builds = [f for f in ctx.findings if f.code == "RPL006" and (f.fix is None or f.fix.safety != "safe")]
    if not open_builds:
        return
    for i, finding in enumerate(ctx.findings):
        fix = finding.fix
        if finding.code != "RPL002" or fix is None or fix.safety != "safe" \
                or not any("inv_freq_from(" in getattr(edit, "code", "") for edit in fix.edits):
            continue
        owner = finding.symbol.split(".")[0]
        blocking = [f for f in open_builds if "." not in f.symbol or f.symbol.split(".")[0] == owner]
        if blocking:
            line = ctx.line_of(blocking[0].node)
            ctx.findings[i] = dataclasses.replace(finding, fix=dataclasses.replace(
                fix, safety="unsafe", description=f"{fix.description}; unsafe while the construction can build them in "
                                                  f"16 bits (RPL006 at line {line} has no safe fix), which the helper "
                                                  f"would reject"))


def _through_submodule(read: StateRead) -> bool:
    """Read as ``self.<module>.<state>``: state another class of this file registered."""
    node = read.node
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) \
        and isinstance(node.value.value, ast.Name) and node.value.value.id == "self"


__all__ = ["InvFreqInModuleState", "Role"]

