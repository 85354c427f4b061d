"""An abstract interpreter over the rotary parts of one file.

It walks each class and function once, in source order, with an environment of abstract values
(see values.py), and records events (see events.py): products of positions and inverse
frequencies, dtype casts, trig calls, state registrations. Values flow across the methods of one
class through ``self`` state and method summaries, and across functions of the file through
return summaries. The analysis is deliberately context-insensitive: a function is analysed once,
with its parameters described by their names, so the result does not depend on call order.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from ..imports import ImportTable
from ..segments import ANGLES_METHOD
from ..spans import Spans
from .events import (
    Cast,
    Guard,
    InvFreqBuilt,
    Product,
    Registration,
    ScalePower,
    Scope,
    Trig,
    TrigInHelper,
)
from .names import (
    AUTOCAST,
    CUSTOM_FWD,
    TORCH_DTYPES_COMPLEX,
    TORCH_DTYPES_FULL,
    TORCH_DTYPES_INT,
    TORCH_DTYPES_LOW,
    bool_literal,
    dotted,
    is_none,
    is_numpy,
    number,
    qualname,
    string_value,
)
from .values import (
    UNKNOWN,
    Dt,
    Role,
    StateKind,
    StateRead,
    StateRef,
    Val,
    dtype_val,
    join,
)

POSITION_PARAMS = re.compile(
    r"^(position_ids|positions?|pos|pos_ids|position|cache_position|seq_pos|t|seq|timesteps?|offsets?"
    r"|(\w+_)?grid|(\w+_)?coords?|(?!num_|max_|n_|total_)[a-z]+_positions)$"
)
# Optional activations a model's ``forward`` takes in place of ids (float, in the model's dtype when given).
EMBEDS_PARAMS = re.compile(r"^(?:inputs?_embeds|embeds|embeddings)$")
# Parameters that name a phase by what it is (``apply_rotary(x, angles)``): a phase when the function takes cos/sin of them.
ANGLE_PARAMS = re.compile(r"^(?:angles?|phases?|rotary_angles|rope_angles)$")
# Buffer and parameter names such as ``freq_basis``, ``freqs_base_t``: frequencies (not ``freqs_cis``).
FREQ_NAMES = re.compile(r"^(?:_?freqs?_(?!cis|cos$|sin$)[a-z0-9]+|omegas?)$")  # ``omega``: angular frequencies
# llama2.c's ``freqs_cos``/``freqs_sin``, ``cos_cached``, ``sin_table``: cos/sin tables by name.
TABLE_NAMES = re.compile(r"^_?(?:\w+_)?(?:cos|sin)(?:_(?:cached|cache|table|tables|emb))?$")
# Index tensors, integer by convention; ``idx``/``tokens``: token indices handed around before the embedding
# lookup (nanoGPT's ``forward(self, idx)``).
# ``cu_seqlens`` (packed/varlen attention's cumulative lengths): int32 by the kernels' contract.
INT_BY_NAME = re.compile(r"^((\w+_)?(ids|index|indices|idx)|idx|tokens|input_idx|token_idx|cu_seq_?lens(_\w+)?)$")
# A tokenizer's mask: int64 (or bool) by convention.
MASK_NAMES = re.compile(r"^(attention_mask|attn_mask|padding_mask|key_padding_mask|mask)$")
# Names that only ever mean positions, whatever built them (``t``, ``seq`` or ``offsets`` also name activations
# and lengths): int64 ids from most callers when nothing else is known.
POSITION_NAMES = re.compile(r"^(positions?|pos|pos_ids|position_ids|seq_pos|pos_idx|position_index|timestamps"
                            r"|(?!num_|max_|n_|total_)[a-z]+_positions)$")  # ``patch_positions``, not a count
INT_POSITION_PARAMS = re.compile(r"^(position_ids|pos_ids|cache_position|input_pos)$")
ACTIVATION_PARAMS = re.compile(
    r"^(x|hidden_states?|hidden|q|k|v|query|key|value|xq|xk|query_states|key_states|inputs?|tensor|qk|like)$"
)
SCALAR_PARAMS = re.compile(
    r"(seq_len|seqlen|max_seq|max_position|^end$|(^|_)dim$|head_dim|channels|^base$|theta|^n_elem$|length|factor|scale)"
)
# Plural lengths and offsets are tensors (``cu_seqlens``, ``lengths``, ``seqlen_offsets``), not the scalar a
# ``seq_len`` is.
TENSOR_PARAMS = re.compile(r"^cu_|(?:seqlens|lengths|lens|offsets|timescales?)$")  # (JAX ports' wavelengths)
POSITION_ARGS = re.compile(r"seq|len|max|pos|end|ctx|cache|length|tokens|time|frame|^[thwTHWn]$|size|shape")
EXPONENT_ARGS = re.compile(r"dim|half|rot|n_elem|head|feat|channels|//\s*2\b")
SHAPE_METHODS = {
    "expand", "expand_as", "view", "reshape", "transpose", "permute", "contiguous", "unsqueeze",
    "squeeze", "repeat", "repeat_interleave", "flatten", "clone", "detach", "cpu", "cuda",
    "requires_grad_", "narrow", "flip", "roll", "chunk", "split", "t", "mT", "T", "to_dense",
    "__getitem__", "index_select", "gather", "tile", "movedim", "unflatten", "masked_fill", "masked_fill_",
}
_CONFIG_NAMES = ("config", "args", "cfg", "params")
PROMOTE_ORDER = [Dt.FULL, Dt.LOW, Dt.RUNTIME, Dt.INT, Dt.UNKNOWN]
# Methods whose name says they return the rotary angles (``phase_table``, ``get_angles``).
_PHASE_METHOD = re.compile(ANGLES_METHOD)
# The log of a base or timescale: ``math.log(10000)``, ``torch.log(base)``, ``log_timescale_increment``;
# not a tensor's own ``.log()`` (geometric interpolation, log-space sampling).
_LOG_OF_BASE = re.compile(r"\b(?:math|np|numpy|torch)\.log\d*\(|\blog_\w+|\w+_log\b")
FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef
FUNCTION_NODES = (ast.FunctionDef, ast.AsyncFunctionDef)
MATMUL_FUNCS = ("matmul", "mm", "bmm", "addmm", "baddbmm", "tensordot", "addbmm", "mv", "chain_matmul")


@dataclass
class StateEntry:
    ref: StateRef
    value: Val


@dataclass
class ClassInfo:
    name: str
    node: ast.ClassDef
    bases: list[str]
    methods: dict[str, FunctionNode] = field(default_factory=dict)
    state: dict[str, StateEntry] = field(default_factory=dict)
    repaired: set[str] = field(default_factory=set)
    # The source of the ``_apply`` overrides in its hierarchy: state they name keeps its dtype.
    apply_text: str | None = None
    # attribute name -> symbols of the methods that assign or register it
    writes: dict[str, set[str]] = field(default_factory=dict)
    # ``self.rope = RotaryEmbedding(...)``: attribute name -> the called name (its last dotted part)
    submodules: dict[str, str] = field(default_factory=dict)
    # ``self.register_buffer(name, tensor)`` with a name only known at run time (a ``_register(name, t)`` helper
    # fed from a dict): that call and whether it registers persistent buffers.
    dynamic_buffer: tuple[ast.Call, bool, Scope] | None = None
    # ``self.rotaries = nn.ModuleList(LayerRope(...) for ...)``: attribute name -> the names called inside
    elements: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # ``self.rotary_emb = A(...)`` on one branch and ``B(...)`` on another: attribute name -> every name called
    choices: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # ``self._batched = vmap(vmap(_angles, ...), ...)``: attribute name -> the function it maps (``_angles``)
    vmapped: dict[str, ast.expr] = field(default_factory=dict)
    # ``self._tables[n] = (cos, sin)``: what a dict (or list) held in ``self.<name>`` stores, and its items
    entries: dict[str, tuple[Val, tuple[Val, ...] | None]] = field(default_factory=dict)
    # Plain attributes its ``_apply`` override converts as ``nn.Module`` converts buffers (``self.x = fn(self.x)``)
    applied: frozenset[str] = frozenset()

    def set_only_in_init(self, attr: str) -> bool:
        """Only ``__init__`` writes ``self.<attr>``: forward reads what construction left there."""
        return all(w.endswith(".__init__") for w in self.writes.get(attr, ()))


def in_file_mro(classes: dict[str, ClassInfo], info: ClassInfo) -> list[ClassInfo]:
    """``info`` and its bases defined in the same file, nearest first."""
    out, todo, seen = [], [info], set()
    while todo:
        cur = todo.pop(0)
        if cur.name in seen:
            continue
        seen.add(cur.name)
        out.append(cur)
        todo.extend(classes[b] for b in cur.bases if b in classes)
    return out


def same_file_callable(model: FileModel, info: ClassInfo | None, name: str, *, method: bool = False) -> FunctionNode | None:
    """The function ``name`` of this file, or with ``method`` the method ``name`` of ``info`` or an in-file base."""
    if not method:
        return model.functions.get(name)
    for cls in in_file_mro(model.classes, info) if info is not None else ():
        if name in cls.methods:
            return cls.methods[name]
    return None


def _built_from(classes: dict[str, ClassInfo], info: ClassInfo, attr: str) -> str | None:
    """The name ``info`` (or a base) calls to build ``self.<attr>`` in ``__init__``."""
    return next((c.submodules[attr] for c in in_file_mro(classes, info) if attr in c.submodules), None)


def held_class(classes: dict[str, ClassInfo], info: ClassInfo, attr: str) -> ClassInfo | None:
    """The class of this file that ``info`` (or a base) builds ``self.<attr>`` from in ``__init__``."""
    made = _built_from(classes, info, attr)
    return classes.get(made) if made is not None else None


def held_factory(model: FileModel, info: ClassInfo, attr: str) -> str | None:
    """The same-file function ``info`` (or a base) calls to build ``self.<attr>`` in ``__init__``."""
    made = _built_from(model.classes, info, attr)
    return made if made is not None and made in model.functions else None


# (kind, persistent, held value, frozen, frozen by default) of an ``nn.Buffer``/``nn.Parameter`` call.
Holder = tuple[StateKind, bool, Val, bool, bool]


@dataclass
class Summary:
    """What a call of a function or method returns, and which parameters reach cos/sin."""

    returns: Val = UNKNOWN
    items: tuple[Val, ...] | None = None
    trig_params: frozenset[str] = frozenset()
    position_params: frozenset[str] = frozenset()
    params: tuple[str, ...] = ()
    freq_params: frozenset[str] = frozenset()
    # Nothing rotary happened in it as analysed from its parameter names (a call may still hand it some).
    inert: bool = False
    # Casts of a parameter to an integer dtype (``cache.to(position_ids)``): a table passed there truncates.
    int_casts: tuple[tuple[str, Cast], ...] = ()
    # Casts of a table to a dtype parameter (``emb.cos().to(dtype)``): a caller passing an integer dtype truncates.
    dtype_casts: tuple[tuple[str, Cast], ...] = ()
    # Casts of a table to a tensor parameter's dtype (``a.cos().type_as(p)``): a caller passing integers truncates.
    tensor_casts: tuple[tuple[str, Cast], ...] = ()
    # Casts of one parameter to another's dtype (``def _like(t, ref): return t.to(ref)``): (cast, target) names.
    param_casts: tuple[tuple[str, str, Cast], ...] = ()
    # ``dtype`` parameters defaulting to ``torch.float32``: a call that leaves one out gets float32.
    float32_defaults: frozenset[str] = frozenset()
    # Parameters the function writes into (``out[...] = freqs[0]``), with the parameter written (or None): a
    # caller's integer buffer there truncates what goes in.
    container_writes: tuple[tuple[str, str | None], ...] = ()
    # Parameters written into an integer buffer the function allocates (``out = positions.new_empty(...)``;
    # ``out.copy_(chunk[0])``), with that allocation: a caller passing the phase there has it truncated.
    int_buffer_writes: tuple[tuple[str, ast.Call], ...] = ()
    # ``def make_rotary(dim): ... def rope(pos, dtype=None): ...; return rope``: what a call of the closure it
    # hands back does (``self._rope = make_rotary(d)``; ``self._rope(position_ids)``).
    made: Summary | None = None
    # ``return {"inv_freq": inv_freq, "positions": positions}``: what each string key of the returned dict holds.
    keyed: tuple[tuple[str, Val], ...] | None = None

    @property
    def reaches_arguments(self) -> bool:
        """What a call passes can matter: the callee takes cos/sin of, multiplies or casts some parameter."""
        return bool(self.trig_params or self.position_params or self.freq_params or self.int_casts
                    or self.dtype_casts or self.tensor_casts or self.param_casts or self.container_writes
                    or self.int_buffer_writes)


@dataclass
class Frame:
    env: dict[str, Val]
    items: dict[str, tuple[Val, ...]]
    scope: Scope
    cls: ClassInfo | None
    guards: list[Guard]
    returns: list[Val] = field(default_factory=list)
    return_items: list[tuple[Val, ...]] = field(default_factory=list)
    trig_params: set[str] = field(default_factory=set)
    position_params: set[str] = field(default_factory=set)
    freq_params: set[str] = field(default_factory=set)
    int_casts: list[tuple[str, Cast]] = field(default_factory=list)
    dtype_casts: list[tuple[str, Cast]] = field(default_factory=list)
    tensor_casts: list[tuple[str, Cast]] = field(default_factory=list)
    param_casts: list[tuple[str, str, Cast]] = field(default_factory=list)
    # Functions defined in this one (closures): what a call of each returns, as analysed in place.
    nested: dict[str, Summary] = field(default_factory=dict)
    # The closure this function returns (``return rope``), if it returns one.
    made: Summary | None = None
    # ``self.<name> = value`` earlier in this function: later reads here get that value, not the state's
    # (``self.inv_freq = 1.0 / (ext_factors * ...)`` then ``self.inv_freq[None, :]`` in Phi-3's forward).
    written: dict[str, Val] = field(default_factory=dict)
    # ``self.inv_freq = 1.0 / (base ** (arange(...).float() / dim))`` into a registered buffer, outside
    # ``__init__``: reads later in the same block (not after it) get that float32 tensor (Qwen's dynamic NTK).
    fresh: dict[str, Val] = field(default_factory=dict)
    # ``self._build_cache(n)`` as a statement earlier in this function: state name -> the rebuilt state's
    # registering call, by ``id`` (see FileModel.rebuilt_states).
    rebuilt: dict[str, int] = field(default_factory=dict)
    # Parameters written into (``out[...] = freqs[0]``), with the parameter written: see Summary.
    container_writes: list[tuple[str, str | None]] = field(default_factory=list)
    int_buffer_writes: list[tuple[str, ast.Call]] = field(default_factory=list)
    # Dtype parameters every call of this function leaves float32: never None, so ``dtype or x.dtype`` is ``dtype``.
    pinned: set[str] = field(default_factory=set)
    # ``phase = lambda p, w: p[:, None] @ w[None]`` in this function: evaluated at each call with its arguments.
    lambdas: dict[str, ast.Lambda] = field(default_factory=dict)
    # ``arange = functools.partial(torch.arange, dtype=dtype)``: local name -> the ``partial(...)`` call
    partials: dict[str, ast.Call] = field(default_factory=dict)
    # ``for name, fn in zip(names, (torch.cos, torch.sin))``: loop names bound to cos/sin themselves.
    trig_names: set[str] = field(default_factory=set)
    # ``for i, rope in enumerate(self.rotaries)``: loop names bound to modules of a class of this file.
    instances: dict[str, ClassInfo] = field(default_factory=dict)
    # ``return {"inv_freq": inv_freq, ...}`` in this function: each key and what it holds.
    return_keys: list[tuple[tuple[str, Val], ...]] = field(default_factory=list)
    # ``for name, t in self._make_buffers().items()`` over such a dict: key name -> (value name, the entries).
    keyed_loops: dict[str, tuple[str, tuple[tuple[str, Val], ...]]] = field(default_factory=dict)


@dataclass
class FileModel:
    """Everything the rules read about one file."""

    products: list[Product] = field(default_factory=list)
    casts: list[Cast] = field(default_factory=list)
    # Weight names this file's quantised layers hold as integer tensors (``self.weight = nn.Parameter(..., int8)``).
    integer_weights: frozenset[str] = frozenset()
    trigs: list[Trig] = field(default_factory=list)
    helper_trigs: list[TrigInHelper] = field(default_factory=list)
    # Positions made 16-bit-able in a caller and used as positions by a same-file callee.
    helper_positions: list[TrigInHelper] = field(default_factory=list)
    # Position ids counted in a 16-bit-able dtype and assigned to ``position_ids``/``cache_position`` (``callee``
    # holds the name): handed on to a rotary the file may not connect to them.
    counted_ids: list[TrigInHelper] = field(default_factory=list)
    # Arguments (by id) a same-file function counts position ids over (``ids_from_mask(mask)``), with that call.
    counted_arguments: dict[int, ast.Call] = field(default_factory=dict)
    # Module state handed to a same-file function that uses it as the frequencies of its phase.
    helper_freqs: list[TrigInHelper] = field(default_factory=list)
    # Module state raised to a power that grows with the position (xPos scales).
    scale_powers: list[ScalePower] = field(default_factory=list)
    registrations: list[Registration] = field(default_factory=list)
    # Same-file function -> its calls through a dict of functions (``self.rope_init_fn = ROPE_INIT_FUNCTIONS[t]``).
    registry_calls: dict[str, list[ast.Call]] = field(default_factory=dict)
    # Dict of functions -> the picks from it the analysis saw (``REG[k]``, ``REG.get(k)``); a pick in code it
    # pruned would be a call it cannot see.
    registry_picks: dict[str, int] = field(default_factory=dict)
    inv_freqs: list[InvFreqBuilt] = field(default_factory=list)
    guards: list[Guard] = field(default_factory=list)
    classes: dict[str, ClassInfo] = field(default_factory=dict)
    functions: dict[str, FunctionNode] = field(default_factory=dict)
    # Every read of a buffer or Parameter, for fixes that must reroute all of them.
    state_reads: list[StateRead] = field(default_factory=list)
    # id(evaluated node) -> the statement it was evaluated in: suppression comments and inserted lines.
    statement_of: dict[int, ast.stmt] = field(default_factory=dict)
    # Same-file functions whose every return is float32/float64 whatever their arguments' dtypes.
    full_returns: set[str] = field(default_factory=set)
    # Same-file functions and methods (``Class.method``) that return a tensor built in the dtype one of
    # their parameters names (``torch.arange(n, dtype=dtype)``): symbol -> that parameter.
    dtype_params: dict[str, str] = field(default_factory=dict)
    # Same-file functions -> the parameters they use only as positions of a phase (never their dtype,
    # never returned): float32 positions passed there change the phase's precision and nothing else.
    phase_position_params: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # Registering calls of state that a method rebuilds in float32 before reading it (``self._build_cache(n)``
    # first in ``forward``), by ``id``: read there, what a module cast left is never read.
    rebuilt_states: set[int] = field(default_factory=set)


def _positions_only(fn: FunctionNode, params: frozenset[str]) -> set[str]:
    """The ``params`` whose dtype ``fn`` never reads and that it never returns as they are."""
    out = set(params)
    for node in ast.walk(fn):
        if isinstance(node, ast.Attribute) and node.attr == "dtype" and isinstance(node.value, ast.Name):
            out.discard(node.value.id)
        elif isinstance(node, ast.Return) and node.value is not None:
            for item in (node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]):
                if isinstance(item, ast.Name):
                    out.discard(item.id)
    return out


def dtype_fallback(scope: Scope, node: ast.AST | None) -> tuple[str, ast.Attribute | None] | None:
    """(the dtype parameter a cast target comes from, the ``pos.dtype`` of a tensor parameter that replaces
    it when the call leaves it out): ``.to(dtype)`` -> ("dtype", None); ``.to(out or pos.dtype)``,
    ``out = out or pos.dtype``, ``if out is None: out = pos.dtype`` and a local ``o = out or pos.dtype``
    -> ("out", ``pos.dtype``)."""
    fn = scope.node
    if fn is None or node is None:
        return None
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or) and len(node.values) == 2:
        first, second = node.values
        if isinstance(first, ast.Name) and first.id in scope.params:
            return first.id, _dtype_of_param(second, scope)
        return None
    if isinstance(node, ast.IfExp):  # ``dtype if dtype is not None else pos.dtype`` (either way round)
        chosen = _none_tested(node)
        if chosen is not None and chosen[0] in scope.params:
            return chosen[0], _dtype_of_param(chosen[1], scope)
        return None
    if not isinstance(node, ast.Name):
        return None
    if node.id not in scope.params:  # ``out = dtype or pos.dtype`` ... ``x.to(out)``: the one value it holds
        values = _assigned_values(fn, node.id)
        return dtype_fallback(scope, values[0]) if len(values) == 1 and isinstance(values[0], (ast.BoolOp, ast.IfExp)) \
            else None
    fallback = None
    for value in _assigned_values(fn, node.id):
        chosen = _none_tested(value) if isinstance(value, ast.IfExp) else None
        if isinstance(value, ast.BoolOp) and isinstance(value.op, ast.Or) and len(value.values) == 2 \
                and isinstance(value.values[0], ast.Name) and value.values[0].id == node.id:
            fallback = _dtype_of_param(value.values[1], scope)
        elif chosen is not None and chosen[0] == node.id:  # ``dtype = pos.dtype if dtype is None else dtype``
            fallback = _dtype_of_param(chosen[1], scope)
        else:
            fallback = fallback or _dtype_of_param(value, scope)  # ``if out is None: out = pos.dtype``
    return node.id, fallback


def _none_tested(node: ast.IfExp) -> tuple[str, ast.expr] | None:
    """(``a``, ``b``) for ``a if a is not None else b`` and ``b if a is None else a``: the optional argument
    ``a`` and what stands in for it when it is left out."""
    test = node.test
    if not (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and len(test.ops) == 1
            and is_none(test.comparators[0]) and isinstance(test.ops[0], (ast.Is, ast.IsNot))):
        return None
    name = test.left.id
    given, fallback = (node.orelse, node.body) if isinstance(test.ops[0], ast.Is) else (node.body, node.orelse)
    return (name, fallback) if isinstance(given, ast.Name) and given.id == name else None


def _defaulted_when_none(stmt: ast.If) -> str | None:
    """``name`` for ``if name is None: name = ...`` whose other branch leaves ``name`` as it is."""
    test = stmt.test
    if not (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and len(test.ops) == 1
            and isinstance(test.ops[0], ast.Is) and is_none(test.comparators[0])):
        return None
    name = test.left.id

    def stores(body: list[ast.stmt]) -> bool:
        return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)
                   for s in body for n in ast.walk(s))
    return name if stores(stmt.body) and not stores(stmt.orelse) else None


def _tensor_fallback(fn: ast.AST, name: str) -> str | None:
    """``p`` in ``name = p if name is None else name`` (or ``if name is None: name = p``), ``p`` a parameter
    of ``fn``: the tensor an optional tensor argument falls back to."""
    params = set(call_params(fn, is_method=False)) if isinstance(fn, FUNCTION_NODES) else set()
    for value in _assigned_values(fn, name):
        chosen = _none_tested(value) if isinstance(value, ast.IfExp) else None
        if chosen is not None and chosen[0] == name:
            value = chosen[1]
        if isinstance(value, ast.Name) and value.id != name and value.id in params:
            return value.id
    return None


def _assigned_values(fn: ast.AST, name: str) -> list[ast.expr]:
    """The values ``fn`` assigns to the local ``name`` (``name = value`` statements, in walk order)."""
    # Asked for many names of the same function: one walk, kept on the node (trees are not shared or edited).
    table = getattr(fn, "_ropelint_assigned", None)
    if table is None:
        table = {}
        for stmt in ast.walk(fn):
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                table.setdefault(stmt.targets[0].id, []).append(stmt.value)
        fn._ropelint_assigned = table  # type: ignore[attr-defined]
    return list(table.get(name, ()))


def _keyed_names(node: ast.expr) -> tuple[tuple[str, str], ...] | None:
    """``{"inv_freq": inv_freq, "positions": positions}``: (key, name) for a dict of string keys and names."""
    if not (isinstance(node, ast.Dict) and node.keys) or not all(
            isinstance(k, ast.Constant) and isinstance(k.value, str) and isinstance(v, ast.Name)
            for k, v in zip(node.keys, node.values)):
        return None
    return tuple((k.value, v.id) for k, v in zip(node.keys, node.values))  # type: ignore[union-attr]


def _dtype_of_param(node: ast.AST, scope: Scope) -> ast.Attribute | None:
    """``node`` when it is ``pos.dtype`` of a parameter ``pos`` of the scope."""
    if isinstance(node, ast.Attribute) and node.attr == "dtype" and isinstance(node.value, ast.Name) \
            and node.value.id in scope.params:
        return node
    return None


def _asserted_full_dtype(test: ast.expr) -> str | None:
    """``name`` in ``assert name in (torch.float32, torch.float64)`` or ``assert name == torch.float32``; ``x.dtype``
    in ``assert x.dtype == torch.float32`` (the tensor ``x`` is float32 past it)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    left = test.left
    if isinstance(left, ast.Name):
        name = left.id
    elif isinstance(left, ast.Attribute) and left.attr == "dtype" and isinstance(left.value, ast.Name):
        name = f"{left.value.id}.dtype"
    else:
        return None
    right = test.comparators[0]
    if isinstance(test.ops[0], ast.In) and isinstance(right, (ast.List, ast.Tuple, ast.Set)):
        options = right.elts
    elif isinstance(test.ops[0], ast.Eq):
        options = [right]
    else:
        return None
    full = ("float32", "float", "float64", "double")
    if options and all(isinstance(o, ast.Attribute) and o.attr in full for o in options):
        return name
    return None


def _defaults(fn: FunctionNode) -> list[tuple[str, ast.expr | None]]:
    """(parameter, default expression) for every parameter that has a default."""
    a = fn.args
    positional = [*a.posonlyargs, *a.args]
    pairs = [*zip(positional[len(positional) - len(a.defaults):], a.defaults), *zip(a.kwonlyargs, a.kw_defaults)]
    return [(p.arg, d) for p, d in pairs if d is not None]


_FULL_DTYPE_NAMES = ("float32", "float", "float64", "double")


def _full_dtype_expr(fn: FunctionNode | None, node: ast.expr, depth: int = 0) -> bool:
    """``torch.float32`` (or float64), a choice between such dtypes (``torch.float32 if mps else torch.float64``),
    or a local of ``fn`` assigned once from one of those (``freqs_dtype = torch.float32``)."""
    if isinstance(node, ast.Attribute):
        return node.attr in _FULL_DTYPE_NAMES and isinstance(node.value, ast.Name)
    if isinstance(node, ast.IfExp):
        return _full_dtype_expr(fn, node.body, depth) and _full_dtype_expr(fn, node.orelse, depth)
    if isinstance(node, ast.Name) and fn is not None and depth < 3:
        values = _assigned_values(fn, node.id)
        params = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}
        return len(values) == 1 and node.id not in params and _full_dtype_expr(fn, values[0], depth + 1)
    return False


def _cast_to_param(site: ast.AST | None, params: tuple[str, ...]) -> str | None:
    """The parameter ``p`` of a returned cast ``....to(p)``, ``.to(p.dtype)`` or ``.type_as(p)``."""
    if not (isinstance(site, ast.Call) and isinstance(site.func, ast.Attribute) and site.func.attr in ("to", "type_as")
            and len(site.args) == 1 and not site.keywords):
        return None
    target = site.args[0]
    if isinstance(target, ast.Attribute) and target.attr == "dtype":
        target = target.value
    return target.id if isinstance(target, ast.Name) and target.id in params else None


def _returned_dtype_param(summary: Summary) -> str | None:
    """The parameter choosing the dtype of what a function returns, or of the first item of a returned tuple
    that has one (``return inv_freq, attention_factor``)."""
    if summary.returns.dtype_param is not None:
        return summary.returns.dtype_param
    return next((v.dtype_param for v in summary.items or () if v.dtype_param is not None), None)


def call_argument(fn: FunctionNode, param: str, is_method: bool, call: ast.Call) -> ast.expr | None | bool:
    """The expression ``call`` passes as ``param`` of ``fn``; None when it passes none, False when an
    unpacked ``*args``/``**kwargs`` may hold it."""
    named = next((k.value for k in call.keywords if k.arg == param), None)
    if named is not None:
        return named  # whatever ``*args``/``**kwargs`` hold, they cannot pass it again
    keyword_only = {a.arg for a in fn.args.kwonlyargs}
    positional = [p for p in call_params(fn, is_method) if p not in keyword_only]
    leading = next((i for i, a in enumerate(call.args) if isinstance(a, ast.Starred)), len(call.args))
    if param in positional and positional.index(param) < leading:
        return call.args[positional.index(param)]  # passed in place: ``**kwargs`` cannot pass it again
    if leading < len(call.args) or any(k.arg is None for k in call.keywords):
        return False
    return None


def _plain_tensor_param(val: Val) -> bool:
    """A parameter nothing is known about, not named as ids or positions (``like``, ``ref``): a tensor whose
    dtype the caller decides, often the activations'."""
    return val.param is not None and not val.roles and val.dtype is Dt.UNKNOWN \
        and not INT_BY_NAME.match(val.param) and not POSITION_NAMES.match(val.param)


def _filled_with(fn: ast.AST | None, name: str) -> list[ast.expr]:
    """What ``fn`` puts into the local container ``name``: ``params[key] = value`` and ``params.append(value)``
    (``params = {}`` filled in a loop, then ``nn.ParameterDict(params)``)."""
    found: list[ast.expr] = []
    for node in ast.walk(fn) if fn is not None else ():
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Subscript) \
                and isinstance(node.targets[0].value, ast.Name) and node.targets[0].value.id == name:
            found.append(node.value)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "append" \
                and isinstance(node.func.value, ast.Name) and node.func.value.id == name and len(node.args) == 1:
            found.append(node.args[0])
    return found


def _picked_from(node: ast.expr) -> str | None:
    """``REG`` of ``REG[kind]`` or ``REG.get(kind)``, and ``_INIT`` of ``self._INIT[kind]`` (``Cls._INIT[kind]``)."""
    if isinstance(node, ast.Subscript):
        held = node.value
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
        held = node.func.value
    else:
        return None
    if isinstance(held, ast.Name):
        return held.id
    if isinstance(held, ast.Attribute) and isinstance(held.value, ast.Name):
        return held.attr
    return None


def float32_defaulted(fn: FunctionNode) -> set[str]:
    """Parameters whose default is ``torch.float32`` (or ``torch.float``, ``torch.float64``), or ``None`` that every
    assignment in the function turns into one (``dtype = torch.float32 if dtype is None else dtype``,
    ``dtype = dtype or torch.float32``, ``if dtype is None: dtype = torch.float32``)."""
    found = {p for p, d in _defaults(fn) if d is not None and _full_dtype_expr(None, d)}

    def resolved(p: str, value: ast.expr) -> bool:
        chosen = _none_tested(value) if isinstance(value, ast.IfExp) else None
        if chosen is not None and chosen[0] == p:
            value = chosen[1]
        elif isinstance(value, ast.BoolOp) and isinstance(value.op, ast.Or) and len(value.values) == 2 \
                and isinstance(value.values[0], ast.Name) and value.values[0].id == p:
            value = value.values[1]
        return _full_dtype_expr(None, value)

    for p in _none_defaulted(fn):
        values = _assigned_values(fn, p)
        if values and all(resolved(p, v) for v in values):
            found.add(p)
    return found


def _none_defaulted(fn: FunctionNode) -> set[str]:
    """Parameters whose default is ``None``."""
    return {p for p, d in _defaults(fn) if is_none(d)}


def _promote(a: Val, b: Val) -> tuple[Dt, ast.AST | None]:
    """Result dtype of a tensor op, following torch promotion where both sides are known."""
    tensors = [v for v in (a, b) if not v.has(Role.SCALAR)]
    if not tensors:
        return Dt.UNKNOWN, None
    if len(tensors) == 1:
        only = tensors[0]
        return only.dtype, only.site
    if any(v.dtype is Dt.FULL for v in tensors):
        return Dt.FULL, None
    best = min(tensors, key=lambda v: PROMOTE_ORDER.index(v.dtype))
    return best.dtype, best.site


class Interpreter:
    def __init__(self, module: ast.Module, imports: ImportTable, spans: Spans,
                 integer_weights: frozenset[str] = frozenset()) -> None:
        self.module = module
        self.integer_weights = integer_weights
        self.imports = imports
        self.spans = spans
        self.model = FileModel(integer_weights=integer_weights)
        self.summaries: dict[str, Summary] = {}
        self.in_progress: set[str] = set()
        self.wrappers: dict[str, str] = {}  # function name -> "disabled" | "passthrough"
        self._tuple_items: dict[int, tuple[Val, ...]] = {}
        self._current: ast.stmt | None = None  # the statement being evaluated
        self._metadata_read = False
        self._calls_by_name: dict[str, list[ast.Call]] | None = None
        self._registry_table: dict[str, list[ast.Call]] | None = None  # function name -> calls through a dict
        self._registry_callees: dict[int, list[str]] | None = None  # call -> the functions it may run
        self._partials_found: set[str] | None = None  # same-file functions bound by ``functools.partial``
        self._class_registries: dict[str, set[str]] = {}  # class attribute -> the methods its dict names
        self._callers: dict[int, FunctionNode] | None = None  # call node id -> the innermost function holding it
        self._mros: dict[str, tuple[ClassInfo, list[ClassInfo]]] = {}
        self._analysing = False  # every class is registered (their in-file MROs no longer change)
        self._any_vmapped = self._any_choices = False
        self._specialized: dict[int, Summary] = {}  # call node -> its callee analysed with its arguments
        # ``vmap(self._phase_at)(ids)`` -> the plain call ``self._phase_at(ids)``, made once so ids stay unique.
        self._unwrapped: dict[int, ast.Call] = {}
        self._wrapped: dict[int, ast.Call] = {}  # and back: events name the call as the source has it
        self._range_wrappers: dict[str, ast.Call | None] = {}  # same-file function -> the range it only returns
        self._embedding_lookups: dict[tuple[int, str], str | None] = {}  # (function, ids name) -> embedding attr
        # Module-level ``NAME = {"dtype": torch.float32, ...}``: keyword arguments that ``**NAME`` passes.
        self._dict_constants: dict[str, dict[str, ast.expr]] = {}
        # Module-level ``DTYPE = torch.bfloat16``: the dtype a later ``dtype=DTYPE`` names.
        self._dtype_constants: dict[str, Val] = {}
        # ``torch.set_autocast_enabled(...)`` somewhere: only then are statements checked for the switch.
        self._toggles = "set_autocast_enabled" in spans.code
        # Expression kinds the analysis looks into; any other evaluates to UNKNOWN.
        self._handlers = {
            ast.Name: self._eval_name, ast.Constant: self._eval_constant, ast.Attribute: self._attribute,
            ast.Call: self._call, ast.BinOp: self._eval_binop, ast.UnaryOp: self._eval_unary,
            ast.Subscript: self._eval_subscript, ast.Tuple: self._eval_sequence, ast.List: self._eval_sequence,
            ast.IfExp: self._eval_ifexp, ast.Compare: self._eval_compare, ast.BoolOp: self._eval_boolop,
            ast.Starred: self._eval_starred, ast.ListComp: self._eval_comprehension,
            ast.GeneratorExp: self._eval_comprehension, ast.SetComp: self._eval_comprehension,
        }

    # ----------------------------------------------------------------- driver
    def run(self) -> FileModel:
        top = list(self._top_level(self.module.body))
        for stmt in top:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                self._module_constant(stmt.targets[0].id, stmt.value, stmt)
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
                self._module_constant(stmt.target.id, stmt.value, stmt)  # ``ROPE_INIT_FUNCTIONS: dict[str, Callable] = {...}``
            if isinstance(stmt, FUNCTION_NODES):
                self.model.functions[stmt.name] = stmt
                for inner in ast.walk(stmt) if "class " in self.spans.text(stmt) else ():
                    # ``def build_rope3d(kind): class _Rope3D(nn.Module): ...; return _Rope3D``: a class factory's
                    # class is analysed like one at the top level.
                    if isinstance(inner, ast.ClassDef) and inner.name not in self.model.classes:
                        self._register_class(inner)
            elif isinstance(stmt, ast.ClassDef):
                self._register_class(stmt)
        self._decorated_registries(top)
        for info in self.model.classes.values():
            for attr, made in list(info.submodules.items()):
                if made.endswith("[]"):
                    self._registry_class(info, attr, made[:-2])
                elif made in self.model.functions and made not in self.model.classes:
                    built = _built_class(self.model.functions[made], self.model.classes)
                    if built is not None:  # ``self.rotary_emb = gen_rotary_embedding(cfg)``: what that factory builds
                        info.submodules[attr] = built
        self._analysing = True
        self._any_vmapped = any(info.vmapped for info in self.model.classes.values())
        self._any_choices = any(info.choices for info in self.model.classes.values())
        for name, fn in self.model.functions.items():
            self.wrappers.update(self._wrapper_kind(name, fn))
        for info in self.model.classes.values() if "autocast" in self.spans.code else ():
            for name, fn in info.methods.items():
                if len(fn.body) <= 8 and "autocast" in self.spans.text(fn):
                    self.wrappers.update({f"self.{k}": v for k, v in self._wrapper_kind(name, fn).items()})
            init = info.methods.get("__init__")
            for stmt in ast.walk(init) if init is not None and "partial" in self.spans.text(init) else ():
                # ``self._no_amp = functools.partial(torch.autocast, "cuda", enabled=False)``, then ``with self._no_amp():``.
                if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 \
                        and isinstance(stmt.targets[0], ast.Attribute) and (dotted(stmt.targets[0]) or [])[:1] == ["self"] \
                        and self._partial_guard(stmt.value, stmt, stmt.targets[0].attr):
                    self.wrappers[f"self.{stmt.targets[0].attr}"] = "disabled"
        for name in self.model.functions:
            self._function_summary(name)
        done: set[str] = set()
        for info in list(self.model.classes.values()):
            self._analyse_with_parts(info, done)
        for stmt in top:
            if not isinstance(stmt, (*FUNCTION_NODES, ast.ClassDef)):
                frame = Frame({}, {}, Scope("<module>", None, (), None, stmt), None, [])
                self._stmt(stmt, frame)
        if self._has_registries():
            self.model.registry_calls = self.registry_calls()  # the fixes edit what these calls pass
        return self.model

    def _top_level(self, body):  # type: ignore[no-untyped-def]
        for stmt in body:
            if isinstance(stmt, (ast.If, ast.Try, ast.TryStar)):
                yield from self._top_level(stmt.body)
                yield from self._top_level(stmt.orelse)
                for handler in getattr(stmt, "handlers", ()):
                    yield from self._top_level(handler.body)
            else:
                yield stmt

    # ---------------------------------------------------------------- classes
    def _register_class(self, node: ast.ClassDef) -> None:
        bases = []
        for base in node.bases:
            parts = dotted(base)
            if parts:
                bases.append(parts[-1])
        info = ClassInfo(node.name, node, bases)
        for stmt in node.body:
            if isinstance(stmt, FUNCTION_NODES):
                info.methods[stmt.name] = stmt
                if stmt.name == "__init__":  # where submodules are built; walking every method costs too much
                    info.submodules.update(_submodules(stmt))
                    info.elements.update(_element_classes(stmt))
        for stmt in node.body:
            # ``_INIT = {"default": _default, "linear": _linear}`` of the class's own (static) methods, called as
            # ``self._INIT[kind](...)``: a dict of functions, as a module-level one is.
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                    and isinstance(stmt.value, ast.Dict):
                named = {v.id for v in stmt.value.values if isinstance(v, ast.Name)
                         and (v.id in info.methods or v.id in self.model.functions)}
                if named:
                    self._class_registries.setdefault(stmt.targets[0].id, set()).update(named)
        if "_apply" in info.methods:
            info.applied = _converted_like_buffers(info.methods["_apply"])
        init = info.methods.get("__init__")
        builders = [init] if init is not None else []
        if init is None:
            # ``__init__`` pruned away as plain: kept methods that build submodules (``_init_rope``) say what they are.
            for name, method in info.methods.items():
                if name not in ("forward", "__call__"):
                    for attr, made in _submodules(method).items():
                        info.submodules.setdefault(attr, made)
                    builders.append(method)
        for called in _self_calls(init) if init is not None else ():
            # ``self._init_rope()`` in ``__init__``: the method that builds ``self.rotary_emb``.
            if called in info.methods and called != "__init__":
                builders.append(info.methods[called])
                for attr, made in _submodules(info.methods[called]).items():
                    info.submodules.setdefault(attr, made)
        for fn in builders:
            for stmt in fn.body:
                if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and self_attr(stmt.targets[0]) \
                        and isinstance(stmt.value, ast.Call) and _is_vmap(qualname(stmt.value.func, self.imports)):
                    inner: ast.expr = stmt.value
                    while isinstance(inner, ast.Call) and _is_vmap(qualname(inner.func, self.imports)) and inner.args:
                        inner = inner.args[0]
                    info.vmapped[self_attr(stmt.targets[0])] = inner  # type: ignore[index]
            for attr, names in _submodule_choices(fn).items():
                if len(names) > 1:
                    info.choices[attr] = tuple(dict.fromkeys((*info.choices.get(attr, ()), *names)))
        self.model.classes[info.name] = info

    def _registry_class(self, info: ClassInfo, attr: str, registry: str) -> None:
        """``self.rope = ROPE_CLASSES[kind](...)``: the first class of this file the registry names stands for
        all of them (variants of one rotary that differ in how they build the frequencies)."""
        values = self._dict_constants.get(registry, {}).values()
        made = next((v.id for v in values if isinstance(v, ast.Name) and v.id in self.model.classes), None)
        if made is None:
            del info.submodules[attr]
        else:
            info.submodules[attr] = made

    def _mro(self, info: ClassInfo) -> list[ClassInfo]:
        # Asked on every ``self.<attr>`` read and call: once per class, after all classes are registered.
        found = self._mros.get(info.name) if self._analysing else None
        if found is None or found[0] is not info:
            found = (info, in_file_mro(self.model.classes, info))
            if self._analysing:
                self._mros[info.name] = found
        return found[1]

    def _find_method(self, info: ClassInfo, name: str) -> tuple[ClassInfo, FunctionNode] | None:
        for cls in self._mro(info):
            if name in cls.methods:
                return cls, cls.methods[name]
        return None

    def _find_state(self, info: ClassInfo, name: str) -> StateEntry | None:
        for cls in self._mro(info):
            if name in cls.state:
                return cls.state[name]
            for key, entry in cls.state.items():
                if "{}" in key and re.fullmatch(re.escape(key).replace(r"\{\}", ".*"), name):
                    return entry
        return None

    def _module_constant(self, name: str, value: ast.expr, stmt: ast.stmt) -> None:
        """``NAME = {"dtype": torch.float32}`` (keyword arguments ``**NAME`` passes) and ``_fp32_region =
        functools.partial(torch.autocast, enabled=False)`` (a guard: the partial's call is the region)."""
        if isinstance(value, ast.Dict) and all(isinstance(k, ast.Constant) and isinstance(k.value, str)
                                               for k in value.keys):
            self._dict_constants[name] = {k.value: v for k, v in zip(value.keys, value.values)}  # type: ignore[union-attr]
        elif isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "dict" \
                and not value.args and value.keywords and all(k.arg for k in value.keywords):
            self._dict_constants[name] = {k.arg: k.value for k in value.keywords}  # type: ignore[misc]
        elif self._partial_guard(value, stmt, name):
            self.wrappers[name] = "disabled"
        elif isinstance(value, ast.Attribute) and (qualname(value, self.imports) or "").startswith("torch.") \
                and (dtype := _torch_dtype(value.attr)) is not None:
            self._dtype_constants[name] = dtype

    def _decorated_registries(self, top: list[ast.stmt]) -> None:
        """``@register_rope("yarn") def yarn_rope(...)`` with ``register_rope`` storing what it wraps into the
        module-level ``ROPE_REGISTRY[name]``: that dict names the decorated functions, as a dict literal would."""
        stores: dict[str, str] = {}  # decorator function -> the dict it stores into
        empty = {name for name, values in self._dict_constants.items() if not values}  # ``ROPE_REGISTRY = {}``
        for name, fn in self.model.functions.items() if empty else ():
            if not any(f"{d}[" in self.spans.text(fn) for d in empty):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                        and isinstance(node.targets[0], ast.Subscript) and isinstance(node.targets[0].value, ast.Name) \
                        and node.targets[0].value.id in empty and isinstance(node.value, ast.Name):
                    stores[name] = node.targets[0].value.id
        for stmt in top if stores else ():
            for deco in getattr(stmt, "decorator_list", ()) if isinstance(stmt, FUNCTION_NODES) else ():
                if isinstance(deco, ast.Call) and isinstance(deco.func, ast.Name) and deco.func.id in stores:
                    key = string_value(deco.args[0]) if deco.args else None
                    self._dict_constants[stores[deco.func.id]][key or stmt.name] = ast.Name(id=stmt.name,
                                                                                             ctx=ast.Load())

    def _partial_guard(self, value: ast.expr, stmt: ast.stmt, name: str) -> bool:
        """``functools.partial(torch.autocast, "cuda", enabled=False)``: calling it opens a disabled region."""
        if not (isinstance(value, ast.Call) and value.args
                and (qualname(value.func, self.imports) or "") == "functools.partial"
                and qualname(value.args[0], self.imports) in AUTOCAST):
            return False
        bound = ast.Call(value.args[0], value.args[1:], value.keywords)
        return self._guard_for(bound, stmt, Scope(name, None, (), None, stmt)) is not None

    def _analyse_with_parts(self, info: ClassInfo, done: set[str]) -> None:
        """Classes a class holds as submodules first: a call ``self.rope(x)`` reads ``RoPE.forward``'s
        summary, which must see what ``RoPE.__init__`` registered."""
        if info.name in done:
            return
        done.add(info.name)
        for held in info.submodules.values():
            if held in self.model.classes:
                self._analyse_with_parts(self.model.classes[held], done)
        self._analyse_class(info)

    def _analyse_class(self, info: ClassInfo) -> None:
        for base in self._mro(info)[1:]:
            if not base.state and base.methods:
                self._analyse_class(base)
        if info.apply_text is None:
            info.apply_text = "\n".join(self.spans.text(cls.methods["_apply"]) for cls in self._mro(info)
                                        if "_apply" in cls.methods)
        order = sorted(info.methods, key=lambda n: n != "__init__")
        for name in order:
            self._method_summary(info, name)
        for name in self._dispatching_to(info):
            self._method_summary(info, name)
        for state in info.state:
            if self._kept(info, state):
                info.repaired.add(state)

    def _dispatching_to(self, info: ClassInfo) -> list[str]:
        """Inherited methods that call one this class overrides (``rotate_queries_or_keys`` calling
        ``self.get_seq_pos``): in this class they run the override, so they are analysed here as well."""
        own = [name for name in info.methods if name != "__init__" or len(self._mro(info)) > 1]
        if len(self._mro(info)) < 2 or not own:
            return []
        found: list[str] = []
        for base in self._mro(info)[1:]:
            for name, fn in base.methods.items():
                if name in info.methods or name in found:
                    continue
                text = self.spans.text(fn)
                if any(f"self.{o}(" in text for o in own):
                    found.append(name)
        return found

    def _kept(self, info: ClassInfo, state: str, seen: frozenset[str] = frozenset()) -> bool:
        """An ``_apply`` override in the class hierarchy names the state: module casts leave its dtype. One
        that only widens it after ``super()._apply`` (``self.inv_freq = self.inv_freq.float()``) keeps nothing:
        the values were rounded before; nor does one that restores it from other state the same cast rounded
        (``self.inv_freq = self._inv_freq_fp64.clone()`` with ``_inv_freq_fp64`` a buffer)."""
        if not info.apply_text:
            return False
        pattern = re.compile(rf"(?<![\w{{]){re.escape(state)}(?!\w)")
        overrides = [cls.methods["_apply"] for cls in self._mro(info) if "_apply" in cls.methods]
        # ``self._set_cos_sin_cache(n, device)`` after ``super()._apply``: the method that (re)registers the state.
        writers = {symbol.rsplit(".", 1)[-1] for cls in self._mro(info) for symbol in cls.writes.get(state, ())}

        def rounded_source(fn: FunctionNode) -> bool:
            sources = _restore_sources(fn, state)
            return bool(sources) and all(
                src not in seen and (entry := self._find_state(info, src)) is not None
                and entry.ref.follows_module_casts and not self._kept(info, src, seen | {state}) for src in sources)

        if any(state in cls.applied for cls in self._mro(info)):
            return False  # ``self._freqs = fn(self._freqs)``: converted as a buffer is, rounded with it
        return any((pattern.search(self.spans.text(fn)) is not None and not _only_widens(fn, state)
                    and not rounded_source(fn) and not _rebuilt_on_device_change_only(fn, state))
                   or _calls_self_method_after_super(fn, writers) for fn in overrides)

    def _method_summary(self, info: ClassInfo, name: str) -> Summary:
        found = self._find_method(info, name)
        if found is None:
            return Summary()
        owner, fn = found
        key = f"{info.name}.{name}"
        if key in self.summaries:
            return self.summaries[key]
        if key in self.in_progress:
            return Summary()
        self.in_progress.add(key)
        summary = self._analyse_function(fn, f"{owner.name}.{name}", info, is_method=True, top=owner.node)
        self.in_progress.discard(key)
        self.summaries[key] = summary
        if (chosen := _returned_dtype_param(summary)) is not None:
            self.model.dtype_params[f"{owner.name}.{name}"] = chosen
        if name == "forward" and summary.position_params:
            # ``self.rotary_emb(x, positions)`` from a model that holds it: positions that only enter the phase.
            used = _positions_only(fn, summary.position_params)
            if used:
                self.model.phase_position_params[f"{owner.name}.forward"] = tuple(
                    p if p in used else "" for p in summary.params)
        return summary

    def _function_summary(self, name: str) -> Summary:
        if name in self.summaries:
            return self.summaries[name]
        fn = self.model.functions.get(name)
        if fn is None or name in self.in_progress:
            return Summary()
        self.in_progress.add(name)
        summary = self._analyse_function(fn, name, None, is_method=False, top=fn)
        if _at_least_float32(fn):
            summary = dataclasses.replace(summary, returns=dtype_val(Dt.FULL))
        self.in_progress.discard(name)
        self.summaries[name] = summary
        if summary.returns.dtype is Dt.FULL or (summary.items and all(v.dtype is Dt.FULL for v in summary.items)):
            self.model.full_returns.add(name)
        if (chosen := _returned_dtype_param(summary)) is not None:
            self.model.dtype_params[name] = chosen
        used = _positions_only(fn, summary.position_params)
        if used:
            self.model.phase_position_params[name] = tuple(p if p in used else "" for p in summary.params)
        return summary

    # -------------------------------------------------------------- functions
    def _param_val(self, name: str, takes_trig: bool = False) -> Val:
        if INT_POSITION_PARAMS.match(name):
            return Val(frozenset({Role.POSITIONS}), Dt.INT, param=name)
        if POSITION_PARAMS.match(name):
            return Val(frozenset({Role.POSITIONS}), Dt.UNKNOWN, param=name)
        if ACTIVATION_PARAMS.match(name):
            return Val(frozenset({Role.ACTIVATION}), Dt.RUNTIME, param=name)
        if name == "dtype" or name.endswith("_dtype"):
            return dtype_val(Dt.RUNTIME).evolve(param=name)
        if INT_BY_NAME.match(name):
            return Val(frozenset(), Dt.INT, param=name)  # ``residue_index``, ``patch_ids``: index tensors
        if name == "device" or name.endswith("_device"):
            return Val(frozenset({Role.DEVICE}), param=name)
        if SCALAR_PARAMS.search(name) and not TENSOR_PARAMS.search(name):
            return Val(frozenset({Role.SCALAR}), param=name)
        # A parameter's name is part of an API: ``freqs_base`` means frequencies (a local ``freq_diff`` may not).
        named = Val(frozenset({Role.INV_FREQ})) if FREQ_NAMES.match(name.lower()) else self._named(name)
        if takes_trig and named.has(Role.INV_FREQ):
            # ``def apply_rope(x, freqs): ... freqs.cos()``: nobody takes the cosine of inverse
            # frequencies, so a "freqs" the function hands to cos/sin is the phase.
            return Val(frozenset({Role.PHASE}), Dt.UNKNOWN, param=name)
        return named.evolve(param=name)

    def _named(self, name: str) -> Val:
        """What a name says when nothing else is known."""
        low = name.lower()
        if "inv_freq" in low or low in ("freqs", "inv_freqs", "freq", "frequencies", "theta", "bands", "periods") \
                or low.endswith("_harmonics") \
                or low.removeprefix("inv_") in ("timescale", "timescales"):
            # ``lon_harmonics``: integer multiples of a base angle, per channel; ``timescale``: the wavelengths of JAX
            # ports (Gemma's ``positions / timescale``), inverse frequencies inverted.
            return Val(frozenset({Role.INV_FREQ}))
        if TABLE_NAMES.match(low):
            return Val(frozenset({Role.TABLE}))
        if low in ("phase", "phases", "angles"):
            return Val(frozenset({Role.PHASE}))  # ``def tables_from_phase(phase, dtype=None)``: what cos/sin take
        if low.endswith("_cis") or low.startswith("freqs_cis"):
            return Val(frozenset({Role.COMPLEX}), Dt.FULL)  # Meta's ``freqs_cis``: complex rotations
        if ACTIVATION_PARAMS.match(name):
            return Val(frozenset({Role.ACTIVATION}), Dt.RUNTIME)
        return UNKNOWN

    def _analyse_function(self, fn: FunctionNode, symbol: str, cls: ClassInfo | None, *, is_method: bool,
                          top: ast.AST | None = None, bound: dict[str, Val] | None = None) -> Summary:
        params = call_params(fn, is_method)
        # An activation that may be left out (``x: Optional[Tensor] = None``) cannot give fixes a dtype.
        optional = _none_defaulted(fn)
        activation = next((p for p in params if ACTIVATION_PARAMS.match(p) and p not in optional), None)
        scope = Scope(symbol, fn, tuple(params), activation, top)
        guards: list[Guard] = []
        for dec in fn.decorator_list:
            guard = self._guard_for(dec, fn, scope)
            if guard:
                guards.append(guard)
        # Only a parameter the name alone would call inverse frequencies needs the walk for cos/sin.
        env = {p: self._param_val(p) for p in params}
        for p, kind in _number_annotated(fn).items():
            # ``offset: int = 0``: a number, whatever the name says, so ``arange(n) + offset`` keeps one axis;
            # and an ``int`` one (``* q_stride``) keeps an integer tensor integer, as a Python int does.
            if p in env and env[p].roles <= {Role.POSITIONS} and env[p].dtype is Dt.UNKNOWN:
                env[p] = Val(frozenset({Role.SCALAR}), param=p, literal=0 if kind == "int" else 0.0)
        for p in _long_annotated(fn):
            if p in env and env[p].dtype is Dt.UNKNOWN:
                env[p] = env[p].evolve(dtype=Dt.INT)  # ``timestamps: torch.LongTensor``: int64 by contract
        named_ids = [p for p in params if env[p].dtype is Dt.INT and not env[p].roles]
        for p in _rotated_by_tables(fn, named_ids) if named_ids else ():
                # ``tokens * cos + rotate_half(tokens) * sin``: activations to rotate, whatever the name says.
                env[p] = Val(frozenset({Role.ACTIVATION}), Dt.RUNTIME, param=p)
        if any(v.has(Role.INV_FREQ) for v in env.values()):
            env.update({p: self._param_val(p, takes_trig=True) for p in _trig_operands(fn) if p in env})
        if any(ANGLE_PARAMS.match(p) for p in params):
            # ``def apply_rotary(x, angles): ... angles.cos()``: the phase a caller formed, whatever it casts it to.
            env.update({p: Val(frozenset({Role.PHASE}), param=p) for p in _trig_operands(fn)
                        if p in env and ANGLE_PARAMS.match(p) and not env[p].roles})
        frame = Frame(env, {}, scope, cls, guards)
        if fn.args.vararg is not None:  # ``def ndgrid(*tensors)``: what the caller unpacks into it
            frame.env[fn.args.vararg.arg] = Val(frozenset(), param=fn.args.vararg.arg)
        for name, val in (bound or {}).items():
            if name in frame.env and (val.roles or (MASK_NAMES.match(name) and val.dtype.can_be_16bit)):
                frame.env[name] = val.evolve(param=name)  # analysed for one call: what that call passes
        before = (len(self.model.products), len(self.model.trigs))
        for p in self._kept_params(fn, params):
            # ``dtype=torch.float32`` that no call overrides, or a required ``dtype`` every call passes as float32.
            if p in frame.env and frame.env[p].has(Role.DTYPE) and self._param_kept_full(fn, p, is_method):
                # ``def yarn_inv_freq(..., dtype=torch.float32)``: float32 unless a caller asks otherwise.
                frame.env[p] = frame.env[p].evolve(dtype=Dt.FULL)
                frame.pinned.add(p)
        caller_statement = self._current  # analysed in the middle of a caller's statement: it continues after
        self._block(fn.body, frame)
        self._current = caller_statement
        ret = _joined(frame.returns)
        if _is_long(fn.returns) and not ret.roles & {Role.TABLE, Role.PHASE, Role.INV_FREQ, Role.COMPLEX}:
            ret = ret.evolve(dtype=Dt.INT, site=None)  # ``-> torch.LongTensor``: ids or steps, int64 by contract
        items = None
        if frame.return_items:
            items = frame.return_items[0]
            for more in frame.return_items[1:]:
                if len(more) == len(items):
                    items = tuple(join(a, b) for a, b in zip(items, more))
        inert = (len(self.model.products), len(self.model.trigs)) == before
        return Summary(ret, items, frozenset(frame.trig_params), frozenset(frame.position_params), tuple(params),
                       frozenset(frame.freq_params), inert, tuple(frame.int_casts), tuple(frame.dtype_casts),
                       tuple(frame.tensor_casts), tuple(frame.param_casts), frozenset(float32_defaulted(fn)),
                       tuple(dict.fromkeys(frame.container_writes)), tuple(dict.fromkeys(frame.int_buffer_writes)),
                       frame.made, keyed=frame.return_keys[0] if len(frame.return_keys) == 1 else None)

    # ------------------------------------------------------------- statements
    def _block(self, body: list[ast.stmt], frame: Frame) -> None:
        opened: Guard | None = None
        for i, stmt in enumerate(body):
            toggle = self._autocast_toggle(stmt) if self._toggles else None
            if toggle is False and opened is None:
                # ``torch.set_autocast_enabled(False)`` ... ``torch.set_autocast_enabled(True)`` in one block: a region.
                closer = next((s for s in body[i + 1:] if self._autocast_toggle(s) is True), None)
                if closer is not None:
                    opened = Guard(stmt.value, stmt, frame.scope, closer)  # type: ignore[attr-defined]
                    frame.guards.append(opened)
                    continue
            if opened is not None and stmt is opened.closer:
                frame.guards.remove(opened)
                opened = None
                continue
            self._stmt(stmt, frame)
        if opened is not None and opened in frame.guards:
            frame.guards.remove(opened)

    def _autocast_toggle(self, stmt: ast.stmt) -> bool | None:
        """The value ``torch.set_autocast_enabled([device,] value)`` sets, for a statement that is one; else None."""
        if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and stmt.value.args
                and not stmt.value.keywords):
            return None
        if (qualname(stmt.value.func, self.imports) or "") != "torch.set_autocast_enabled":
            return None
        return bool_literal(stmt.value.args[-1])

    def _branch(self, frame: Frame, bodies: list[list[ast.stmt] | None]) -> None:
        base_env, base_items, base_fresh = dict(frame.env), dict(frame.items), frame.fresh
        results = []
        for body in bodies:
            frame.env, frame.items, frame.fresh = dict(base_env), dict(base_items), dict(base_fresh)
            if body:
                self._block(body, frame)
            results.append((frame.env, frame.items))
        frame.fresh = base_fresh
        merged: dict[str, Val] = {}
        for env, _ in results:
            for k, v in env.items():
                merged[k] = join(merged[k], v) if k in merged else v
        frame.env = merged
        frame.items = {k: v for _, items in results for k, v in items.items()}

    def _stmt(self, stmt: ast.stmt, frame: Frame) -> None:
        self._current = stmt
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets if isinstance(stmt.value, ast.Lambda) or frame.lambdas else ():
                if isinstance(target, ast.Name):
                    if isinstance(stmt.value, ast.Lambda):
                        frame.lambdas[target.id] = stmt.value
                    else:
                        frame.lambdas.pop(target.id, None)
            for target in stmt.targets if frame.partials or self._is_partial(stmt.value) else ():
                if isinstance(target, ast.Name):
                    if self._is_partial(stmt.value):
                        frame.partials[target.id] = stmt.value  # type: ignore[assignment]
                    else:
                        frame.partials.pop(target.id, None)
            val = self._eval(stmt.value, frame)
            items = self._items_of(stmt.value, frame)
            for target in stmt.targets:
                self._bind(target, val, items, frame, source=stmt)
                if isinstance(target, ast.Name) and (target.id in frame.instances
                                                     or isinstance(stmt.value, (ast.Subscript, ast.Attribute))):
                    # ``holder = self.variants[self.active]``, ``rotary_emb = self.layers[0].self_attn.rotary_emb``:
                    # a module of this file, held by a container or by another module.
                    held = self._element_of(stmt.value, frame) if isinstance(stmt.value, (ast.Subscript, ast.Attribute)) \
                        else None
                    if held is not None:
                        frame.instances[target.id] = held
                    else:
                        frame.instances.pop(target.id, None)
            if len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                # ``position_ids = attention_mask.cumsum(-1) - 1`` over a mask cast to the model's dtype, in a
                # ``prepare_inputs_for_generation`` that hands them to whichever forward takes them.
                self._handed_on_ids(stmt.targets[0].id, stmt.value, val, frame)
        elif isinstance(stmt, ast.AnnAssign):
            if stmt.value is not None:
                val = self._eval(stmt.value, frame)
                self._bind(stmt.target, val, self._items_of(stmt.value, frame), frame, source=stmt)
        elif isinstance(stmt, ast.AugAssign):
            right = self._eval(stmt.value, frame)
            left = self._eval(stmt.target, frame)
            val = self._arith(left, right, stmt.op, stmt, frame)
            self._bind(stmt.target, val, None, frame, source=stmt)
        elif isinstance(stmt, ast.Expr):
            self._eval(stmt.value, frame)
            self._rebuilt_by_call(stmt, frame)
        elif isinstance(stmt, ast.Assert):
            narrowed = _asserted_full_dtype(stmt.test)
            if narrowed is not None and narrowed.endswith(".dtype") and narrowed[:-6] in frame.env:
                tensor = narrowed[:-6]
                if frame.env[tensor].dtype in (Dt.RUNTIME, Dt.UNKNOWN, Dt.LOW):
                    frame.env[tensor] = frame.env[tensor].evolve(dtype=Dt.FULL, site=None, earlier_sites=())
            elif narrowed is not None and narrowed in frame.env and frame.env[narrowed].has(Role.DTYPE):
                # ``assert dtype in [torch.float64, torch.float32]``: past this line it is a full dtype.
                frame.env[narrowed] = frame.env[narrowed].evolve(dtype=Dt.FULL, site=None)
        elif isinstance(stmt, ast.Return):
            if isinstance(stmt.value, ast.Name) and stmt.value.id in frame.nested:
                frame.made = frame.nested[stmt.value.id]
            if stmt.value is not None:
                val = self._eval(stmt.value, frame)
                frame.returns.append(val)
                for key, value in zip(*((stmt.value.keys, stmt.value.values) if isinstance(stmt.value, ast.Dict)
                                        else ((), ()))):
                    # ``return {"position_ids": torch.cat(positions)[None], ...}`` from a packing collator.
                    if isinstance(key, ast.Constant) and isinstance(key.value, str) and key.value in HANDED_ON_IDS:
                        self._handed_on_ids(key.value, value, self._eval(value, frame), frame)
                items = self._items_of(stmt.value, frame)
                if items is not None:
                    frame.return_items.append(items)
                keyed = _keyed_names(stmt.value)
                if keyed is not None:
                    frame.return_keys.append(tuple((key, frame.env.get(name, UNKNOWN)) for key, name in keyed))
        elif isinstance(stmt, ast.If):
            self._eval(stmt.test, frame)
            dispatched = _number_dispatch(stmt.test)
            optional = _defaulted_when_none(stmt)
            if optional is not None and (frame.env.get(optional) or UNKNOWN).param != optional:
                optional = None
            before = frame.env.get(dispatched) if dispatched is not None else None
            self._branch(frame, [stmt.body, stmt.orelse or None])
            if optional is not None and optional in frame.env:
                # ``if bands is None: bands = freq_bands(...)``: the argument, when one is given (timm's
                # ``build_fourier_pos_embed(feat_shape, bands=self.bands)``).
                frame.env[optional] = frame.env[optional].evolve(param=optional)
            if before is not None and before.param == dispatched and dispatched in frame.env:
                # ``if isinstance(pos, int): pos = torch.arange(pos).float()``: a caller handing a tensor skips the
                # branch, so the name still holds that argument.
                frame.env[dispatched] = frame.env[dispatched].evolve(param=dispatched)
        elif isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
            if isinstance(stmt, ast.While):
                self._eval(stmt.test, frame)
            else:
                it = self._eval(stmt.iter, frame)
                frame.trig_names.update(self._trig_loop_names(stmt))
                self._loop_instances(stmt, frame)
                first = self._first_state(stmt.iter, frame)
                rows = _literal_rows(stmt.iter, stmt.target)
                columns = _zipped_columns(stmt.iter, stmt.target)
                if columns is not None:
                    # ``for axis, inv in enumerate(self._inv)``, ``for f, n in zip(freqs, sizes)``: each name takes
                    # (an element of) its own sequence; ``enumerate``'s counter is a number.
                    for target, column in zip(stmt.target.elts, columns):  # type: ignore[attr-defined]
                        val = Val(frozenset({Role.SCALAR}), literal=0) if column is None else self._eval(column, frame)
                        self._bind(target, val.evolve(roles=val.roles - {Role.ARANGE}) if column is not None else val,
                                   None, frame)
                elif rows is not None:
                    # ``for pos, f in ((bars, bar_freqs), (ticks, tick_freqs))``: each name takes its column.
                    for i, target in enumerate(stmt.target.elts):  # type: ignore[attr-defined]
                        self._bind(target, _joined([self._eval(row[i], frame) for row in rows]), None, frame)
                else:
                    self._bind(stmt.target, first if first is not None else it.evolve(roles=it.roles - {Role.ARANGE}),
                               None, frame)
                keyed = self._keyed_loop(stmt, frame)
                if keyed is not None:
                    frame.keyed_loops[keyed[0]] = (keyed[1], keyed[2])
            self._branch(frame, [stmt.body, None])
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            pushed = 0
            for item in stmt.items:
                guard = self._guard_for(item.context_expr, stmt, frame.scope)
                if guard:
                    frame.guards.append(guard)
                    pushed += 1
                else:
                    val = self._eval(item.context_expr, frame)
                    if item.optional_vars is not None:
                        self._bind(item.optional_vars, val, None, frame)
            self._block(stmt.body, frame)
            for _ in range(pushed):
                frame.guards.pop()
        elif isinstance(stmt, (ast.Try, ast.TryStar)):
            self._block(stmt.body, frame)
            for handler in stmt.handlers:
                self._block(handler.body, frame)
            self._block(stmt.orelse, frame)
            self._block(stmt.finalbody, frame)
        elif isinstance(stmt, FUNCTION_NODES):
            # A nested function (a decorator's wrapper, a closure): analyse it with the outer names, and
            # remember what it returns for the calls below it (``idx_theta = _phase(position_ids)``).
            own = call_params(stmt, is_method=False)
            inner_scope = Scope(f"{frame.scope.symbol}.{stmt.name}", stmt,
                                tuple(dict.fromkeys((*own, *frame.scope.params))), frame.scope.activation,
                                frame.scope.top)
            inner = Frame(dict(frame.env), dict(frame.items), inner_scope, frame.cls, list(frame.guards),
                          nested=dict(frame.nested), lambdas=dict(frame.lambdas), partials=dict(frame.partials))
            for dec in stmt.decorator_list:
                guard = self._guard_for(dec, stmt, inner_scope)
                if guard:
                    inner.guards.append(guard)
            for name in own:
                inner.env[name] = self._param_val(name)
            self._block(stmt.body, inner)
            mine = set(own)
            frame.nested[stmt.name] = Summary(
                _joined(inner.returns), None, frozenset(inner.trig_params), frozenset(inner.position_params),
                tuple(own), frozenset(inner.freq_params),
                # ``def rope(pos, dtype=None): ... .to(dtype or pos.dtype)``: reported where a call leaves it out.
                dtype_casts=tuple(c for c in inner.dtype_casts if c[0] in mine))
            frame.env.pop(stmt.name, None)

    def _rebuilt_by_call(self, stmt: ast.Expr, frame: Frame) -> None:
        """``self._build_cache(n, x.device)`` as a statement of the function's own body, calling a method that
        always (re)registers float32 state: the reads below get what it built, not what a module cast left."""
        call = stmt.value
        if frame.cls is None or not isinstance(call, ast.Call) or self_attr(call.func) is None \
                or frame.scope.node is None or not any(s is stmt for s in frame.scope.node.body):
            return
        found = self._find_method(frame.cls, call.func.attr)  # type: ignore[attr-defined]
        if found is None:
            return
        method = found[1]
        for cls in self._mro(frame.cls):
            for state, symbols in cls.writes.items():
                if not any(symbol.rsplit(".", 1)[-1] == method.name for symbol in symbols):
                    continue
                entry = self._find_state(frame.cls, state)
                if entry is not None and entry.ref.kind is not StateKind.ATTRIBUTE and entry.value.dtype is Dt.FULL \
                        and _writes_unconditionally(method, state):
                    frame.written[state] = entry.value
                    frame.rebuilt[state] = id(entry.ref.node)

    def _filled_state(self, name: str, val: Val, node: ast.AST, frame: Frame) -> None:
        """``self.freqs.copy_(torch.outer(t, inv_freq))`` into a buffer registered empty (torchtitan's
        ``reset_parameters`` after a meta-device build): the buffer holds the phase (or tables) from then on."""
        entry = self._find_state(frame.cls, name)  # type: ignore[arg-type]
        if entry is None or entry.ref.kind is StateKind.ATTRIBUTE:
            return
        held = val.roles & {Role.TABLE, Role.PHASE}
        if not entry.value.roles & held:
            self._registered(node, entry.ref, val.evolve(roles=held), frame)
            frame.cls.state[name] = StateEntry(entry.ref, val.evolve(roles=held))  # type: ignore[union-attr]

    def _updated_in_place(self, node: ast.expr, frame: Frame) -> None:
        """``self.inv_freq.copy_(...)``, ``self.inv_freq.data.mul_(...)``: state changed after construction, though
        no ``self.inv_freq = ...`` says so (a rebuild from ``__init__``'s recipe would miss the change)."""
        if isinstance(node, ast.Attribute) and node.attr == "data":
            node = node.value
        held = self_attr(node)
        if held is not None and frame.cls is not None:
            frame.cls.writes.setdefault(held, set()).add(frame.scope.symbol)

    def _entry(self, node: ast.Subscript, frame: Frame) -> tuple[Val, tuple[Val, ...] | None] | None:
        """What ``self.<name>[key]`` holds when this class stores tables or frequencies in it."""
        held = self_attr(node.value)
        if held is None or frame.cls is None:
            return None
        return next((cls.entries[held] for cls in self._mro(frame.cls) if held in cls.entries), None)

    def _items_of(self, node: ast.expr, frame: Frame) -> tuple[Val, ...] | None:
        if isinstance(node, (ast.Tuple, ast.List)):
            cached = self._tuple_items.get(id(node))
            return cached if cached is not None else tuple(self._eval(el, frame) for el in node.elts)
        if isinstance(node, ast.Name) and node.id in frame.items:
            return frame.items[node.id]
        if isinstance(node, ast.Subscript):
            entry = self._entry(node, frame)
            return entry[1] if entry is not None else None
        if isinstance(node, ast.Call):
            summary = self._callee_summary(node, frame)
            if summary is not None:
                return summary.items
            qn = qualname(node.func, self.imports) or ""
            if qn.rsplit(".", 1)[-1] in ("meshgrid", "broadcast_tensors") and qn.startswith("torch"):
                return tuple(self._eval(a, frame).evolve(last_is_one=False, second_last_is_one=False, vector=False)
                             for a in node.args if not isinstance(a, ast.Starred))
            pieces = self._pieces_of(node, qn, frame)
            if pieces is not None:
                return pieces
        return None

    def _pieces_of(self, node: ast.Call, qn: str, frame: Frame) -> tuple[Val, ...] | None:
        """``f_t, f_h, f_w = inv_freq.split(sections)`` (or ``chunk``, ``unbind``, ``torch.split(t, ...)``): each
        piece holds what the whole held (M-RoPE's per-axis frequencies)."""
        splits = ("split", "chunk", "unbind", "tensor_split")
        if isinstance(node.func, ast.Attribute) and node.func.attr in splits and not qn.startswith("torch."):
            whole = self._eval(node.func.value, frame)
        elif qn.rsplit(".", 1)[-1] in splits and qn.startswith("torch") and node.args:
            whole = self._eval(node.args[0], frame)
        else:
            return None
        if not whole.roles & {Role.INV_FREQ, Role.TABLE, Role.PHASE, Role.POSITIONS}:
            return None
        # As many as any unpacking takes: the target's length is not known here.
        piece = whole.evolve(last_is_one=False, second_last_is_one=False, vector=False, literal=None)
        return (piece,) * 16

    def _bind(self, target: ast.expr, val: Val, items: tuple[Val, ...] | None,
              frame: Frame, source: ast.stmt | None = None) -> None:
        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) \
                and (val.roles & {Role.TABLE, Role.PHASE, Role.INV_FREQ} or _bare_param_of(val, frame)):
            self._write_into(target.value.id, val, frame)
            return
        if isinstance(target, (ast.Subscript, ast.Attribute)) and frame.cls is not None \
                and (isinstance(target, ast.Subscript) or target.attr == "data"):
            self._updated_in_place(target.value, frame)  # ``self.inv_freq[:] = ...``, ``self.inv_freq.data = ...``
        held = self_attr(target.value) if isinstance(target, ast.Subscript) else None
        if held is not None and frame.cls is not None and val.roles & {Role.TABLE, Role.PHASE, Role.INV_FREQ}:
            # ``self._tables[n] = (cos_tab, sin_tab)``: a cache keyed by length or device; reads of it get these.
            frame.cls.entries[held] = (val.evolve(param=None), items)
            return
        if isinstance(target, ast.Name):
            if val is UNKNOWN:
                val = self._named(target.id)
            if not val.roles and val.dtype is Dt.UNKNOWN and SCALAR_PARAMS.search(target.id) \
                    and not TENSOR_PARAMS.search(target.id):
                val = Val(frozenset({Role.SCALAR}))  # ``dim = kv_channels``: a size, whatever it came from
            elif POSITION_NAMES.match(target.id) and (not val.roles or val.roles == {Role.ARANGE}):
                # ``pos = positions_from_chains(...).float()``: a helper the analysis does not follow made them;
                # ``positions = torch.arange(offset, N).to(dtype) * scale``: a scaled range its name calls positions.
                val = val.evolve(roles=frozenset({Role.POSITIONS}))
            frame.env[target.id] = val
            if items is not None:
                frame.items[target.id] = items
            else:
                frame.items.pop(target.id, None)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for i, el in enumerate(target.elts):
                sub = items[i] if items is not None and i < len(items) else UNKNOWN
                self._bind(el, sub, None, frame, source)
        elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                and target.value.id == "self" and frame.cls is not None:
            name = target.attr
            frame.cls.writes.setdefault(name, set()).add(frame.scope.symbol)
            frame.rebuilt.pop(name, None)
            if val.reads and val.roles & {Role.INV_FREQ} and frame.scope.symbol.rsplit(".", 1)[-1] != "__init__" \
                    and all(read.ref.name != name for read in val.reads):  # not ``self.x = self.x.float()``
                frame.written[name] = val
            frame.fresh.pop(name, None)
            if not val.reads and val.roles == {Role.INV_FREQ} and val.dtype is Dt.FULL \
                    and frame.scope.symbol.rsplit(".", 1)[-1] != "__init__":
                frame.fresh[name] = val
            existing = frame.cls.state.get(name)
            if existing is not None and isinstance(getattr(source, "value", None), ast.Constant) \
                    and source.value.value is None:  # type: ignore[union-attr]
                return  # ``else: self.grid = None``: the other branch's tensor keeps its dtype
            if existing is not None and existing.ref.kind is not StateKind.ATTRIBUTE:
                # Re-assigning a registered buffer keeps it a buffer: state module casts convert, registered
                # anew here (``register_buffer("cached_freqs", None)`` filled later by ``self.cached_freqs = freqs``).
                rotary = {Role.INV_FREQ, Role.PHASE, Role.TABLE, Role.COMPLEX}
                if val.roles & rotary and not existing.value.roles & rotary:
                    self._registered(source or target, existing.ref, val, frame)
                frame.cls.state[name] = StateEntry(existing.ref, val)
                return
            # Buffer(...)/Parameter(...) evaluate to their argument, so ``val`` is the held value.
            holder = self._holder_kind(source, val, frame.scope.node) or self._returned_holder(source, val, frame)
            entries = self._parameter_container(source, frame) if holder is None else None
            if entries is not None:
                holder = entries
            if holder is not None:
                kind, persistent, inner, frozen, by_default = holder
                ref = StateRef(name, kind, source, persistent, frozen, by_default,  # type: ignore[arg-type]
                               container=entries is not None)
                frame.cls.state[name] = StateEntry(ref, inner)
                self._registered(source, ref, inner, frame)  # type: ignore[arg-type]
            else:
                applied = any(name in cls.applied for cls in self._mro(frame.cls))
                if applied and frame.scope.symbol.endswith("._apply"):
                    return  # the conversion itself (``self._freqs = fn(self._freqs)``): the value stays what it was
                ref = StateRef(name, StateKind.APPLIED if applied else StateKind.ATTRIBUTE, source or target)
                if applied and val.roles & {Role.INV_FREQ, Role.PHASE, Role.TABLE, Role.COMPLEX}:
                    # Converted by module casts as a buffer is: registered for the rules as one.
                    self._registered(source or target, ref, val, frame)
                # Flow-insensitive across branches and methods: keep what every assignment allows.
                # ``self._cos = None`` in ``__init__`` and the tables later: the tables are what it holds.
                if existing is not None and existing.value is not UNKNOWN and val is not UNKNOWN \
                        and existing.value.literal != "None":
                    val = join(existing.value, val)
                frame.cls.state[name] = StateEntry(ref, val)

    def _write_into(self, name: str, val: Val, frame: Frame) -> None:
        """Tables or a phase written into part of the tensor ``name`` (``sin[:] = ...``, ``cos[:, :h].copy_(...)``)."""
        container = frame.env.get(name)
        if container is None:
            return
        if container.param == name and name in frame.scope.params and not container.roles - {Role.INV_FREQ}:
            # ``def interleave(freqs, out): out[...] = freqs[0]``: what the caller hands in as ``out`` decides.
            source = val.param if val.param in frame.scope.params else None
            frame.container_writes.append((name, source))
        int_buffer = _int_buffer(container)
        if int_buffer and not val.roles & {Role.TABLE, Role.PHASE} and _bare_param_of(val, frame):
            # ``out = positions.new_empty(...)``; ``out.copy_(chunk[0])``: what a caller passes as ``chunk`` decides.
            frame.int_buffer_writes.append((val.param, container.site))  # type: ignore[arg-type]
        elif int_buffer and val.roles & {Role.TABLE, Role.PHASE}:
            # ``sin[:] = torch.sin(pos * div)`` into ``sin = pos.new_zeros(...)``: the write casts to int64.
            self.model.casts.append(Cast(container.site, "container", val, dtype_val(Dt.INT), None, frame.scope))
        elif not container.roles & {Role.TABLE, Role.PHASE, Role.COMPLEX, Role.POSITIONS} and val.roles:
            # ``freqs = torch.empty(n, d); freqs[:, :h] = t[:, None] * inv_freq``: the tensor now holds the phase;
            # ``mat[a, lo:hi] = inv_freq`` makes a (block-diagonal) frequency matrix.
            roles = val.roles & {Role.TABLE, Role.PHASE} or val.roles & {Role.INV_FREQ}
            frame.env[name] = container.evolve(roles=roles)

    def _parameter_container(self, source: ast.stmt | None, frame: Frame) -> Holder | None:
        """``nn.ParameterList([nn.Parameter(a, requires_grad=False), ...])`` or ``nn.ParameterDict({k:
        nn.Parameter(...)})``: a module whose entries a dtype cast converts as it does the owner's own Parameters;
        held as one state of what the entries hold (frozen when every entry is)."""
        call = getattr(source, "value", None)
        name = (qualname(call.func, self.imports) or "") if isinstance(call, ast.Call) else ""
        tail = name.rsplit(".", 1)[-1]
        if isinstance(call, ast.Call) and call.args and (dotted(call.func) or [""])[-1] == "BufferDict" \
                and isinstance(call.args[0], ast.Dict):
            # peft's ``BufferDict`` (or a file's own): a module whose entries are buffers, which a cast converts.
            persistent = next((bool_literal(k.value) is not False for k in call.keywords if k.arg == "persistent"),
                              True)
            values = [self._eval(v, frame) for v in call.args[0].values]
            if not values:
                return None
            held = values[0]
            for more in values[1:]:
                held = join(held, more)
            return StateKind.BUFFER, persistent, held, False, False
        if tail not in ("ParameterList", "ParameterDict") or not name.startswith("torch") or not call.args:
            return None
        items = call.args[0]
        elements = items.elts if isinstance(items, (ast.List, ast.Tuple)) else \
            items.values if isinstance(items, ast.Dict) else \
            [items.elt] if isinstance(items, ast.ListComp) else \
            [items.value] if isinstance(items, ast.DictComp) else \
            _filled_with(frame.scope.node, items.id) if isinstance(items, ast.Name) else []
        holders = []
        for element in elements:
            if not isinstance(element, ast.Call):
                return None
            inner = self._eval(element.args[0], frame) if element.args else UNKNOWN
            holder = self._holder_call(element, inner, frame.scope.node)
            if holder is None or holder[0] is not StateKind.PARAMETER:
                return None
            holders.append(holder)
        if not holders:
            return None
        held = holders[0][2]
        for holder in holders[1:]:
            held = join(held, holder[2])
        return (StateKind.PARAMETER, True, held, all(h[3] for h in holders),
                all(h[3] or h[4] for h in holders) and any(h[4] for h in holders))

    def _returned_holder(self, source: ast.stmt | None, inner: Val, frame: Frame) -> Holder | None:
        """``self.weight = self._init_weight(self.weight)`` where every return of ``_init_weight`` is
        ``nn.Parameter(table, ...)``: registered as that Parameter would be (RoFormer's sinusoidal table)."""
        value = getattr(source, "value", None)
        if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
                and isinstance(value.func.value, ast.Name) and value.func.value.id == "self" and frame.cls is not None):
            return None
        found = self._find_method(frame.cls, value.func.attr)
        if found is None:
            return None
        fn = found[1]
        returns = [n.value for n in ast.walk(fn) if isinstance(n, ast.Return)]
        holders = [self._holder_call(r, inner, fn) if isinstance(r, ast.Call) else None for r in returns]
        if not holders or any(h is None for h in holders) or len({h[0] for h in holders}) != 1:  # type: ignore[index]
            return None
        return holders[0]

    def _holder_kind(self, source: ast.stmt | None, inner: Val, fn: ast.AST | None) -> Holder | None:
        """``nn.Buffer(v, persistent=...)`` / ``nn.Parameter(v)`` on the right-hand side."""
        value = getattr(source, "value", None)
        if not isinstance(value, ast.Call):
            return None
        return self._holder_call(value, inner, fn)

    def _holder_call(self, call: ast.Call, inner: Val, fn: ast.AST | None = None) -> Holder | None:
        """(kind, persistent, held value, frozen, frozen by default) of a Buffer/Parameter call; ``inner`` is
        its evaluated argument. Frozen: ``requires_grad=False``; frozen by default: ``requires_grad`` is an
        argument of ``fn`` that defaults to False (``nn.Parameter(freqs, requires_grad=learned_freq)``)."""
        name = qualname(call.func, self.imports) or ""
        tail = name.rsplit(".", 1)[-1]
        if tail not in ("Buffer", "Parameter") or not (name.startswith("torch") or name == tail):
            return None
        persistent, frozen, by_default = True, False, False
        for kw in call.keywords:
            if kw.arg == "persistent":
                persistent = bool_literal(kw.value) is not False
            if kw.arg == "requires_grad":
                frozen = bool_literal(kw.value) is False
                by_default = _defaults_to_false(kw.value, fn)
        kind = StateKind.BUFFER if tail == "Buffer" else StateKind.PARAMETER
        return kind, persistent, inner, frozen, by_default

    def _registered(self, node: ast.AST, ref: StateRef, value: Val, frame: Frame) -> None:
        if self._current is not None:
            self.model.statement_of.setdefault(id(node), self._current)
        self.model.registrations.append(Registration(node, ref, value, frame.scope))

    # ----------------------------------------------------------------- guards
    def _guard_for(self, expr: ast.expr, owner: ast.AST, scope: Scope) -> Guard | None:
        if isinstance(expr, ast.Name) and scope.node is not None:
            # ``amp_off = nullcontext() if not x.is_cuda else torch.autocast("cuda", enabled=False)``; ``with amp_off:``
            values = _assigned_values(scope.node, expr.id)
            value = values[0] if len(values) == 1 else None
            branches = [value.body, value.orelse] if isinstance(value, ast.IfExp) else [value]
            if any(isinstance(b, ast.Call) and self._guard_for(b, owner, scope) is not None for b in branches):
                return Guard(expr, owner, scope)
            return None
        if not isinstance(expr, ast.Call):
            return None
        name = qualname(expr.func, self.imports)
        parts = dotted(expr.func) or []
        local = parts[-1] if parts else ""
        kw = {k.arg: k.value for k in expr.keywords if k.arg}
        positional = [a for a in expr.args if not isinstance(a, ast.Starred)]
        enabled = kw.get("enabled")
        disabled = enabled is not None and bool_literal(enabled) is False
        if name in AUTOCAST:
            # torch.autocast(device_type, dtype, enabled); torch.cuda.amp.autocast(enabled, dtype)
            device_first = name in ("torch.autocast", "torch.amp.autocast", "torch.amp.autocast_mode.autocast")
            order = ("device_type", "dtype", "enabled") if device_first else ("enabled", "dtype")
            for slot, value in zip(order, positional):
                kw.setdefault(slot, value)
            enabled = kw.get("enabled")
            if enabled is not None and bool_literal(enabled) is False:
                disabled = True
            dtype = kw.get("dtype")
            if dtype is not None and (dotted(dtype) or [""])[-1] in TORCH_DTYPES_FULL:
                disabled = True
            return Guard(expr, owner, scope) if disabled else None
        if name in CUSTOM_FWD and "cast_inputs" in kw:
            return Guard(expr, owner, scope)
        if len(parts) == 2 and parts[0] == "self" and f"self.{local}" in self.wrappers:
            # ``with self._fp32_region(x.device.type):`` where the method returns ``autocast(enabled=False)``.
            return Guard(expr, owner, scope) if self.wrappers[f"self.{local}"] == "disabled" or disabled else None
        if local in self.wrappers and len(parts) == 1:
            kind = self.wrappers[local]
            if kind == "disabled" or disabled:
                return Guard(expr, owner, scope)
            return None
        if "autocast" in local.lower() and disabled:
            return Guard(expr, owner, scope)
        return None

    def _wrapper_kind(self, name: str, fn: FunctionNode) -> dict[str, str]:
        """Same-file helpers that only open an autocast region: ``def no_amp(): return autocast(..., enabled=False)``."""
        if len(fn.body) > 8:
            return {}  # wrappers are tiny; walking every call of every function costs more than parsing
        scope = Scope(name, fn, (), None, fn)
        kind = None
        for node in ast.walk(fn):
            if not isinstance(node, ast.Call):
                continue
            qn = qualname(node.func, self.imports)
            if qn not in AUTOCAST:
                continue
            if self._guard_for(node, fn, scope) is not None:
                kind = "disabled"
            else:
                for kw in node.keywords:
                    if kw.arg == "enabled" and isinstance(kw.value, ast.Name):
                        kind = kind or "passthrough"
        return {name: kind} if kind else {}

    # ------------------------------------------------------------ expressions
    def _eval(self, node: ast.expr, frame: Frame) -> Val:
        if self._current is not None:
            self.model.statement_of[id(node)] = self._current
        handler = self._handlers.get(type(node))
        return handler(node, frame) if handler is not None else UNKNOWN

    def _eval_name(self, node: ast.Name, frame: Frame) -> Val:
        value = frame.env.get(node.id)
        if value is None and node.id in self._dtype_constants:
            return self._dtype_constants[node.id]
        if value is None and node.id in self.imports.names:
            qn = qualname(node, self.imports) or ""
            if qn.startswith("torch.") and qn.count(".") == 1:  # ``from torch import float32, long``
                dtype = _torch_dtype(qn[6:])
                if dtype is not None:
                    return dtype
        return value if value is not None else self._named(node.id)

    @staticmethod
    def _eval_constant(node: ast.Constant, frame: Frame) -> Val:
        value = node.value
        if value is None or isinstance(value, bool):
            return Val(frozenset({Role.SCALAR}), literal=str(value))
        if isinstance(value, (int, float)):
            return Val(frozenset({Role.SCALAR}), literal=value)
        return UNKNOWN

    def _eval_binop(self, node: ast.BinOp, frame: Frame) -> Val:
        left = self._eval(node.left, frame)
        right = self._eval(node.right, frame)
        return self._binary_vals(node, left, right, node.op, frame)

    def _eval_unary(self, node: ast.UnaryOp, frame: Frame) -> Val:
        val = self._eval(node.operand, frame)
        if isinstance(node.op, (ast.USub, ast.UAdd)) and isinstance(val.literal, (int, float)) \
                and not isinstance(val.literal, bool):
            # ``-1`` stays an int literal: an integer tensor times -1 stays integer.
            return val.evolve(literal=-val.literal if isinstance(node.op, ast.USub) else val.literal)
        return val.evolve(literal=None)

    def _eval_subscript(self, node: ast.Subscript, frame: Frame) -> Val:
        entry = self._entry(node, frame)
        if entry is not None:
            self._eval(node.slice, frame)
            return entry[0]
        base = self._eval(node.value, frame)
        key = string_value(node.slice)
        if key is not None and not base.roles:
            # ``self.rope["inv_freq"]`` (an ``nn.ParameterDict``, a dict of tables): the key names the value.
            return self._named(key)
        elements = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        for el in elements:
            if not isinstance(el, ast.Slice):
                self._eval(el, frame)
        return self._subscript(elements, base)

    def _eval_sequence(self, node: ast.Tuple | ast.List, frame: Frame) -> Val:
        vals = [self._eval(el, frame) for el in node.elts]
        self._tuple_items[id(node)] = tuple(vals)  # read back by _items_of: evaluate once
        out = UNKNOWN
        for v in vals:
            out = v if out is UNKNOWN else join(out, v)
        return out.evolve(param=None)

    def _eval_comprehension(self, node: ast.ListComp | ast.GeneratorExp | ast.SetComp, frame: Frame) -> Val:
        """``[rope(ids[..., i], ...) for i in range(n)]``: the element, with the loop variables bound as
        a ``for`` statement binds them; they do not leak into the enclosing scope."""
        outer = dict(frame.env)
        exponents = False
        for gen in node.generators:
            it = self._eval(gen.iter, frame)
            ramp = self._range_of_exponents(gen.iter) if len(node.generators) == 1 and not gen.ifs else None
            exponents = ramp is not None
            if ramp is None and it.roles == {Role.ARANGE} and it.scaled and it.dtype is Dt.UNKNOWN:
                ramp = it  # ``for e in self._exponents``: a Python list of exponents (below)
            # (``enumerate`` only: through ``zip`` a comprehension would also give timm's Fourier features
            # ``[x / f * r for x, f, r in zip(t, feat_shape, ref)]`` positions, an absolute embedding, not a rotary.)
            columns = _zipped_columns(gen.iter, gen.target) if ramp is None and isinstance(gen.iter, ast.Call) \
                and isinstance(gen.iter.func, ast.Name) and gen.iter.func.id == "enumerate" else None
            # The enumerated sequence is ``enumerate``'s argument, which ``it`` above evaluated already.
            sequence = self._eval(columns[1], frame) if columns is not None and isinstance(columns[1], ast.Name) \
                else None
            if sequence is not None and sequence.param is None:
                # ``[c[i % 3] for i, c in enumerate(chunks)]`` (M-RoPE's section merge): the counter is a number and
                # the element is a piece of ``chunks``. (Not for a parameter's pieces, ``freq.split(...)`` in Qwen2-VL's
                # ``recomposition_frequencies(freq)``: what that name says is not what callers pass.)
                counter, element = gen.target.elts  # type: ignore[attr-defined]
                self._bind(counter, Val(frozenset({Role.SCALAR}), literal=0), None, frame)
                self._bind(element, sequence.evolve(roles=sequence.roles - {Role.ARANGE}), None, frame)
            else:
                self._bind(gen.target, ramp or it.evolve(roles=it.roles - {Role.ARANGE}), None, frame)
            for condition in gen.ifs:
                self._eval(condition, frame)
        val = self._eval(node.elt, frame)
        frame.env = outer
        if exponents and val.has(Role.INV_FREQ):
            # ``[theta ** (-2.0 * i / dim) for i in range(dim // 2)]``: the frequencies as Python floats, whatever
            # tensor they become (``torch.tensor(...)``, ``positions.new_tensor(...)``) decides their dtype.
            return val.evolve(param=None, dtype=Dt.UNKNOWN, site=None, earlier_sites=())
        if exponents and self._exponent_ratio(node):
            # ``[2.0 * i / head_dim for i in range(head_dim // 2)]``: the exponents as Python floats, which a later
            # ``theta ** -e for e in exponents`` turns into frequencies.
            return Val(frozenset({Role.ARANGE}), scaled=True, vector=True)
        if exponents:  # ``[1.0 + 0.1 * i for i in range(dim // 2)]``: per-channel factors, no range
            return Val(val.roles - {Role.ARANGE}) if val.roles - {Role.ARANGE} else UNKNOWN
        return val.evolve(param=None)

    def _exponent_ratio(self, node: ast.ListComp | ast.GeneratorExp | ast.SetComp) -> bool:
        """``2.0 * i / head_dim``: the loop variable divided by a channel count."""
        elt = node.elt
        loop = {n.id for n in ast.walk(node.generators[0].target) if isinstance(n, ast.Name)}
        return isinstance(elt, ast.BinOp) and isinstance(elt.op, ast.Div) \
            and any(isinstance(n, ast.Name) and n.id in loop for n in ast.walk(elt.left)) \
            and EXPONENT_ARGS.search(self.spans.text(elt.right)) is not None \
            and POSITION_ARGS.search(self.spans.text(elt.right)) is None

    def _range_of_exponents(self, node: ast.expr) -> Val | None:
        """``i`` in ``for i in range(0, dim, 2)`` / ``range(dim // 2)``: the channel index, an arange over the
        frequencies (never positions: a comprehension over positions keeps its loop variable plain)."""
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range"
                and node.args and not node.keywords):
            return None
        texts = [self.spans.text(a) for a in node.args]
        stop = texts[1] if len(texts) >= 2 else texts[0]
        if not EXPONENT_ARGS.search(stop) or POSITION_ARGS.search(stop):
            return None
        return Val(frozenset({Role.ARANGE}), Dt.INT, vector=True)

    def _eval_ifexp(self, node: ast.IfExp, frame: Frame) -> Val:
        self._eval(node.test, frame)
        body, orelse = self._eval(node.body, frame), self._eval(node.orelse, frame)
        if body.has(Role.DTYPE) and orelse.has(Role.DTYPE) and _none_tested(node) is None:
            # ``grid_thw.dtype if torch.jit.is_tracing() else torch.int32``: a dtype one branch makes integer is
            # what a table cast to it risks (as for ``dtype or position_ids.dtype``).
            return next((v for v in (body, orelse) if v.dtype is Dt.INT), None) or join(body, orelse)
        joined = join(body, orelse)
        if isinstance(node.body, ast.Name) and body.param is not None \
                and any(isinstance(n, ast.Name) and n.id == node.body.id for n in ast.walk(node.test)):
            # ``val if exists(val) else d`` (lucidrains' ``default``): the argument, when one is given; ``d`` is
            # what a caller gets that passes none.
            return joined.evolve(param=body.param, fallback_param=orelse.param if isinstance(node.orelse, ast.Name)
                                 else None)
        if _none_tested(node) is not None:
            # ``positions if like is None else like``: the argument, when one is given (its fallback otherwise).
            given = orelse if isinstance(node.test.ops[0], ast.Is) else body  # type: ignore[attr-defined]
            if given.param is not None:
                return joined.evolve(param=given.param)
        return joined

    def _eval_compare(self, node: ast.Compare, frame: Frame) -> Val:
        self._eval(node.left, frame)
        for child in node.comparators:
            self._eval(child, frame)
        return Val(frozenset({Role.SCALAR}))

    def _eval_boolop(self, node: ast.BoolOp, frame: Frame) -> Val:
        vals = [self._eval(child, frame) for child in node.values]
        first = node.values[0]
        if isinstance(node.op, ast.Or) and isinstance(first, ast.Name) and first.id in frame.pinned \
                and frame.env.get(first.id) is not None and frame.env[first.id].dtype is Dt.FULL:
            return vals[0]  # every call passes it: the fallback is never taken
        fn = frame.scope.node
        if isinstance(node.op, ast.Or) and len(vals) == 2 and isinstance(first, ast.Name) \
                and isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and first.id in _none_defaulted(fn) \
                and vals[0].has(Role.DTYPE) and vals[1].has(Role.DTYPE) and vals[1].dtype is Dt.FULL \
                and self._callers_keep_default(fn, first.id, frame.cls is not None) \
                and self._calls_named().get(fn.name):
            # ``dtype = dtype or compute_dtype(position_ids)`` where no call in the file passes ``dtype``: the
            # float32 fallback is what every call gets.
            return vals[1]
        if isinstance(node.op, ast.Or) and all(v.has(Role.DTYPE) for v in vals):
            # ``dtype or position_ids.dtype``: each operand is the dtype some call gets; the worst one decides.
            return next((v for v in vals if v.dtype is Dt.INT), None) \
                or next((v for v in vals if v.dtype.can_be_16bit), vals[-1])
        return Val(frozenset({Role.SCALAR}))

    def _eval_starred(self, node: ast.Starred, frame: Frame) -> Val:
        return self._eval(node.value, frame)

    def _attribute(self, node: ast.Attribute, frame: Frame) -> Val:
        attr = node.attr
        if isinstance(node.value, ast.Name) and node.value.id == "self":
            return self._state_read(attr, node, frame)
        qn = qualname(node, self.imports)
        if qn is not None and (qn.startswith("torch.") or qn.startswith("numpy.")):
            return _torch_dtype(attr) or UNKNOWN
        metadata_only = attr in ("device", "dtype", "shape", "ndim", "is_cuda")
        if metadata_only:
            self._metadata_read = True  # ``self.inv_freq.device`` reads no values: not a read to reroute
        try:
            base = self._eval(node.value, frame)
        finally:
            self._metadata_read = False
        if attr == "dtype":
            return UNKNOWN if base.has(Role.DTYPE) else _dtype_of(base)
        if attr in self.integer_weights and not base.roles and isinstance(node.value, ast.Attribute):
            # ``self.q_proj.weight`` in a file whose quantised layers hold an integer ``weight``: after
            # quantisation swapped the layer, its dtype is an integer one.
            return Val(may_be_int=True)
        if attr == "device":
            return Val(frozenset({Role.DEVICE}))
        if attr in ("real", "imag") and base.has(Role.COMPLEX):
            # The real and imaginary parts of a unit rotation are its cos and sin tables.
            return base.evolve(roles=(base.roles - {Role.COMPLEX}) | {Role.TABLE})
        if attr in ("T", "mT", "real", "imag"):
            return base
        if attr in ("shape", "ndim", "is_cuda"):
            return Val(frozenset({Role.SCALAR}))
        if attr.endswith("_dtype") and not base.roles:
            # ``config.torch_dtype``, ``cfg.params_dtype``: a dtype the configuration chooses (bfloat16 in most).
            return dtype_val(Dt.RUNTIME)
        if frame.cls is not None and isinstance(node.value, ast.Attribute) and self_attr(node.value) is not None:
            made = next((c.submodules[node.value.attr] for c in self._mro(frame.cls)
                         if node.value.attr in c.submodules), None)
            held = self._held_state(self.model.classes.get(made) if made is not None else None, attr, node)
            if held is not None:
                return held
        if frame.cls is not None and isinstance(node.value, (ast.Name, ast.Subscript)):
            # ``holder = self.variants[self.active]`` then ``holder.inv_freq``: a module a container holds.
            element = self._element_of(node.value, frame)
            held = self._held_state(element, attr, node) if element is not None else None
            if held is not None:
                return held
        if (isinstance(node.value, ast.Name) and node.value.id in _CONFIG_NAMES) or (
                isinstance(node.value, ast.Attribute) and node.value.attr in _CONFIG_NAMES
                and isinstance(node.value.value, ast.Name) and node.value.value.id == "self"):
            return Val(frozenset({Role.SCALAR}))  # ``config.rope_theta``, ``self.config.d_model``
        return self._named(attr) if base is UNKNOWN else UNKNOWN

    def _held_state(self, held: ClassInfo | None, attr: str, node: ast.AST) -> Val | None:
        """``self.freqs.inv_freq`` with ``self.freqs`` a module of this file (``held``) that registers ``inv_freq``:
        what the name says it holds, in the dtype module casts leave it (float32 when that class keeps it)."""
        entry = self._find_state(held, attr) if held is not None else None
        if entry is None or not entry.ref.follows_module_casts:
            return None
        roles = (entry.value.roles or self._named(attr).roles) - {Role.SCALAR}
        if entry.value.dtype is Dt.INT and entry.value.site is not None:
            return entry.value.evolve(roles=roles, read=None, alt_reads=())
        if self._kept(held, attr):  # type: ignore[arg-type]
            return Val(roles, Dt.FULL) if entry.value.dtype is Dt.FULL else None
        read = StateRead(entry.ref, node)
        if not self._metadata_read:
            self.model.state_reads.append(read)
        return Val(roles, Dt.RUNTIME, site=node, read=read)

    def _state_read(self, attr: str, node: ast.AST, frame: Frame) -> Val:
        if frame.cls is None:
            return self._named(attr)
        if attr in frame.fresh and not self._metadata_read:
            return frame.fresh[attr]
        if attr in frame.written and not self._metadata_read:
            if attr in frame.rebuilt:
                self.model.rebuilt_states.add(frame.rebuilt[attr])
            return frame.written[attr]
        entry = self._find_state(frame.cls, attr)
        if entry is None:
            found = self._find_method(frame.cls, attr)
            if found is not None and any((dotted(d) or [])[-1:] in (["property"], ["cached_property"])
                                         for d in found[1].decorator_list):
                # ``@property def inv_freq(self): return self.omega`` (or a ``functools.cached_property``):
                # what the property returns.
                return self._method_summary(frame.cls, attr).returns
            if SCALAR_PARAMS.search(attr) or attr in ("dim", "base"):
                return Val(frozenset({Role.SCALAR}))
            entry = self._dynamic_state(frame.cls, attr)
            if entry is None and INT_BY_NAME.match(attr) and not any(attr in c.writes for c in self._mro(frame.cls)):
                # ``self.position_ids`` registered where the analysis does not look (a pruned ``__init__``, a wrapped
                # embeddings module ``__getattr__`` fetches it from): ``torch.arange(n)``, int64 like every ``*_ids``
                # buffer.
                return Val(self._named(attr).roles, Dt.INT, site=node)
            if entry is None:
                return self._named(attr)
        ref = entry.ref
        read = StateRead(ref, node, kept=self._kept(frame.cls, ref.name))
        stored = entry.value
        roles = stored.roles or self._named(attr).roles
        if read.follows_module_casts and stored.dtype is Dt.INT and stored.site is not None:
            # ``register_buffer("slots", torch.arange(n, dtype=torch.long))``: module casts convert floating
            # tensors only, so an integer buffer stays integer.
            return stored.evolve(roles=roles - {Role.SCALAR}, read=read, alt_reads=())
        if read.follows_module_casts:
            # A buffer is a tensor even when built from numbers (``torch.tensor(config.long_factor)``).
            roles -= {Role.SCALAR}
            if not self._metadata_read:
                self.model.state_reads.append(read)
            return Val(roles, Dt.RUNTIME, site=node, read=read, scaled=stored.scaled, vector=stored.vector)
        if not roles or roles <= {Role.SCALAR}:
            return stored
        # ``self.inv_freq = <what a registry function returned>``: the name says what it holds.
        return stored.evolve(roles=roles, read=read, alt_reads=())

    def _dynamic_state(self, info: ClassInfo, attr: str) -> StateEntry | None:
        """``self.inv_freq``, never assigned in the class, which registers buffers under names known only at
        run time (``for name, t in self._make_buffers().items(): self._register(name, t)``): one of those."""
        dynamic = next((c.dynamic_buffer for c in self._mro(info) if c.dynamic_buffer is not None), None)
        named = self._named(attr)
        if dynamic is None or not named.has(Role.INV_FREQ) or any(attr in c.writes for c in self._mro(info)):
            return None
        node, persistent, scope = dynamic
        entry = StateEntry(StateRef(attr, StateKind.BUFFER, node, persistent), named)
        info.state[attr] = entry
        self.model.registrations.append(Registration(node, entry.ref, named, scope))
        return entry

    @staticmethod
    def _subscript(elements: list[ast.expr], base: Val) -> Val:
        kinds = []
        for el in elements:
            if isinstance(el, ast.Constant) and el.value is None:
                kinds.append("new")
            elif isinstance(el, ast.Slice) or (isinstance(el, ast.Constant) and el.value is Ellipsis):
                kinds.append("keep")
            elif isinstance(el, (ast.Constant, ast.Name)):
                kinds.append("drop")  # ``coords[:, axis, None]``: one axis picked out, the later ones stay in order
            else:
                kinds.append("index")
        if "new" in kinds and "index" not in kinds:
            return base.evolve(last_is_one=kinds[-1] == "new",
                               second_last_is_one=len(kinds) >= 2 and kinds[-2] == "new", literal=None, vector=False)
        # ``arange(0, dim, 2)[: dim // 2]``: a slice of one axis keeps it one axis.
        sliced = len(elements) == 1 and isinstance(elements[0], ast.Slice)
        return base.evolve(literal=None, vector=base.vector and sliced)

    # ------------------------------------------------------------------ calls
    def _callee_summary(self, node: ast.Call, frame: Frame) -> Summary | None:
        if id(node) in self._specialized:
            return self._specialized[id(node)]
        func = node.func
        if isinstance(func, ast.Name) and func.id in frame.nested:
            return frame.nested[func.id]
        if isinstance(func, ast.Name) and func.id in self.model.functions and func.id not in frame.env:
            return self._function_summary(func.id)
        picked = self._registry_pick(node, frame)
        if picked is not None:
            return picked
        element = self._element_of(func, frame)
        if element is not None:
            # ``rope(x, position_ids)`` for a module of ``self.rotaries``, or ``self.rotaries[i](x, position_ids)``.
            entry = self._entry_method(element)
            return self._method_summary(element, entry) if entry is not None else None
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self" \
                and frame.cls is not None:
            if self._find_method(frame.cls, func.attr):
                return self._method_summary(frame.cls, func.attr)
            held = self._held_entry(frame.cls, func.attr)
            if held is not None:
                return self._method_summary(*held)
            factory = held_factory(self.model, frame.cls, func.attr)
            if factory is not None and factory not in self.in_progress:
                # ``self._rope(position_ids)`` where ``__init__`` built ``self._rope = make_rotary(d)``.
                return self._function_summary(factory).made
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in self.model.classes \
                and func.value.id not in frame.env and self._find_method(self.model.classes[func.value.id], func.attr):
            # ``RopeEmbeddingUtils.create_sinusoidal_positions(...)``: a static or class method of this file.
            return self._method_summary(self.model.classes[func.value.id], func.attr)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Attribute) and frame.cls is not None \
                and isinstance(func.value.value, ast.Name) and func.value.value.id == "self":
            # ``self.rope_params.create_rope_const_params(...)`` on an object of a class of this file.
            owner = held_class(self.model.classes, frame.cls, func.value.attr)
            if owner is not None and owner is not frame.cls and self._find_method(owner, func.attr):
                return self._method_summary(owner, func.attr)
        return None

    def _float_or_float32(self, fn: FunctionNode, arg: ast.expr, frame: Frame) -> Val | None:
        """``def compute_dtype(x): return x.dtype if x.is_floating_point() else torch.float32`` called with ``arg``:
        float32 for integer ids and positions (what the test picks for them), ``arg``'s dtype otherwise."""
        params = call_params(fn, False)
        if len(params) != 1 or len(fn.body) != 1 or not isinstance(fn.body[0], ast.Return) \
                or not isinstance(fn.body[0].value, ast.IfExp):
            return None
        node, p = fn.body[0].value, params[0]
        test = node.test
        floating = isinstance(test, ast.Call) and not test.args and isinstance(test.func, ast.Attribute) \
            and test.func.attr == "is_floating_point" and isinstance(test.func.value, ast.Name) \
            and test.func.value.id == p
        own = isinstance(node.body, ast.Attribute) and node.body.attr == "dtype" \
            and isinstance(node.body.value, ast.Name) and node.body.value.id == p
        if not (floating and own and _full_dtype_expr(None, node.orelse)):
            return None
        val = self._eval(arg, frame)
        integer = val.dtype is Dt.INT or (val.dtype is Dt.UNKNOWN and val.has(Role.POSITIONS)) \
            or (val.param is not None and INT_BY_NAME.match(val.param) is not None)
        return dtype_val(Dt.FULL) if integer else _dtype_of(val)

    def _rewritten(self, node: ast.Call, build: Callable[[], ast.Call]) -> ast.Call:
        """The plain call a wrapped one stands for (``vmap(f)(x)`` -> ``f(x)``), built once per call node so that
        what the analysis records about it stays one node; it keeps the original's position and arguments."""
        if id(node) not in self._unwrapped:
            plain = self._unwrapped[id(node)] = ast.copy_location(build(), node)
            self._wrapped[id(plain)] = node
        return self._unwrapped[id(node)]

    def _activation_dtype(self, node: ast.expr, frame: Frame) -> bool:
        """``q.dtype``, ``hidden_states.dtype``: the dtype of an activation."""
        if not (isinstance(node, ast.Attribute) and node.attr == "dtype"):
            return False
        before, self._metadata_read = self._metadata_read, True
        try:
            return self._eval(node.value, frame).has(Role.ACTIVATION)
        finally:
            self._metadata_read = before

    def _is_partial(self, value: ast.expr) -> bool:
        """``functools.partial(torch.arange, ...)`` (or ``partial(...)`` imported from functools) of a torch
        function."""
        return isinstance(value, ast.Call) and bool(value.args) \
            and (qualname(value.func, self.imports) or "") == "functools.partial" \
            and (qualname(value.args[0], self.imports) or "").startswith("torch.")

    def _counted_over_argument(self, node: ast.Call, summary: Summary, bound: dict[str, Val], pos: list[ast.expr],
                               kw: dict[str, ast.expr]) -> Val | None:
        """``position_ids_from_padding_mask(mask)``: a same-file function counting ids over the mask it is handed
        (``mask.cumsum(-1) - 1``), handed one in a dtype that can be 16-bit (``attention_mask.to(embeds.dtype)``):
        the ids come back in that dtype. Their site is the argument, where an int64 mask is the fix."""
        returns = summary.returns
        if not (returns.has(Role.POSITIONS) and returns.dtype is Dt.INT and _counted(returns.site)):
            return None
        operand = count_operand(returns.site, self.imports)  # type: ignore[arg-type]
        if not (isinstance(operand, ast.Name) and operand.id in bound and bound[operand.id].dtype.can_be_16bit
                and not bound[operand.id].roles - {Role.SCALAR}):
            return None
        index = summary.params.index(operand.id)
        argument = kw.get(operand.id) or (pos[index] if index < len(pos) else None)
        if argument is None:
            return None
        self.model.counted_arguments[id(argument)] = node
        return returns.evolve(dtype=bound[operand.id].dtype, site=argument, earlier_sites=())

    def _handed_on_ids(self, name: str, node: ast.expr, val: Val, frame: Frame) -> None:
        """Position ids counted (a mask's cumsum, a range) in a 16-bit-able dtype and handed on under an ids name."""
        if name in HANDED_ON_IDS and val.has(Role.POSITIONS) and val.dtype.can_be_16bit \
                and (_counted(val.site) or id(val.site) in self.model.counted_arguments):
            self.model.counted_ids.append(TrigInHelper(node, val, name, frame.scope))  # type: ignore[arg-type]

    def _own_instance(self, name: str, frame: Frame) -> bool:
        """``rope = cls(...)`` (or ``RotaryEmbedding(...)``) assigned once in a method of that class: a classmethod
        factory registering state on the instance it builds (``rope.register_buffer("freqs_cis", ...)``)."""
        if frame.cls is None or frame.scope.node is None:
            return False
        values = _assigned_values(frame.scope.node, name)
        return len(values) == 1 and isinstance(values[0], ast.Call) and isinstance(values[0].func, ast.Name) \
            and values[0].func.id in ("cls", frame.cls.name)

    def _other_choices(self, func: ast.expr, frame: Frame) -> list[Summary]:
        """Entry-method summaries of the other classes ``self.<attr>`` may hold (built on another branch)."""
        if not self._any_choices or frame.cls is None or not (isinstance(func, ast.Attribute)
                                                              and self_attr(func) is not None):
            return []
        choices = next((c.choices[func.attr] for c in self._mro(frame.cls) if func.attr in c.choices), ())
        main = held_class(self.model.classes, frame.cls, func.attr)
        out = []
        for name in choices:
            info = self.model.classes.get(name)
            entry = self._entry_method(info) if info is not None and info is not main and info is not frame.cls else None
            if entry is not None and f"{name}.{entry}" not in self.in_progress:
                out.append(self._method_summary(info, entry))  # type: ignore[arg-type]
        return out

    def _element_class(self, cls: ClassInfo, attr: str) -> ClassInfo | None:
        """The class of this file whose modules ``self.<attr>`` (a ``ModuleList``/``ModuleDict``) holds."""
        names = next((c.elements[attr] for c in in_file_mro(self.model.classes, cls) if attr in c.elements), ())
        found = [self.model.classes[n] for n in self._made_classes(names) if n in self.model.classes and n != cls.name]
        return found[0] if found and all(f is found[0] for f in found) else None

    def _made_classes(self, names: tuple[str, ...]) -> list[str]:
        """Classes that ``names`` build: a class itself, a factory function returning ``Holder(...)``, or a dict
        of such factories (``{name: builder(d) for name, builder in _BUILDERS.items()}``)."""
        out: list[str] = []
        for name in names:
            if name in self._dict_constants:
                out += self._made_classes(tuple(v.id for v in self._dict_constants[name].values()
                                                if isinstance(v, ast.Name) and v.id not in self._dict_constants))
            elif name in self.model.functions:
                built = _built_class(self.model.functions[name], self.model.classes)
                out += [built] if built is not None else []
            else:
                out.append(name)
        return out

    def _inlined_range(self, node: ast.Call, name: str) -> ast.Call | None:
        """``_arange(0, dim, 2, dtype=dtype)`` into ``def _arange(start, end, step=1, *, device=None, dtype=None):
        return torch.arange(start, end, step, device=device, dtype=dtype)``: the range that call makes, with this
        call's arguments (what the range means depends on them: a step of 2 makes exponents). Made once per call."""
        if id(node) in self._unwrapped:
            return self._unwrapped[id(node)]
        if name not in self._range_wrappers:
            self._range_wrappers[name] = self._range_wrapped(self.model.functions[name])
        inner = self._range_wrappers[name]
        if inner is None or any(isinstance(a, ast.Starred) for a in node.args) \
                or any(k.arg is None for k in node.keywords):
            return None
        fn = self.model.functions[name]
        bound = _bind_arguments(fn, node)
        if bound is None:
            return None
        args, keywords = [], []
        for arg in inner.args:
            value = bound.get(arg.id, arg) if isinstance(arg, ast.Name) else arg
            if is_none(value) or isinstance(arg, ast.Starred):
                return None
            args.append(value)
        for kw in inner.keywords:
            value = bound.get(kw.value.id, kw.value) if isinstance(kw.value, ast.Name) else kw.value
            if kw.arg is None:
                return None
            if not is_none(value):
                keywords.append(ast.keyword(arg=kw.arg, value=value))
        made = ast.copy_location(ast.Call(func=inner.func, args=args, keywords=keywords), node)
        made.end_lineno, made.end_col_offset = node.end_lineno, node.end_col_offset
        self._unwrapped[id(node)] = made
        return made

    def _range_wrapped(self, fn: FunctionNode) -> ast.Call | None:
        """The ``torch.arange``/``torch.linspace`` call that is all ``fn`` does (``return torch.arange(...)``)."""
        body = [st for st in fn.body if not (isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant))]
        inner = body[0].value if len(body) == 1 and isinstance(body[0], ast.Return) else None
        qn = (qualname(inner.func, self.imports) or "") if isinstance(inner, ast.Call) else ""
        if qn.rsplit(".", 1)[-1] not in ("arange", "linspace") or not qn.startswith("torch") \
                or fn.args.vararg is not None or fn.args.kwarg is not None:
            return None
        return inner  # type: ignore[return-value]

    def _element_of(self, func: ast.expr, frame: Frame) -> ClassInfo | None:
        """The class of the module a call runs: ``rope`` bound by a loop over ``self.rotaries``, or
        ``self.rotaries[i]``."""
        if isinstance(func, ast.Name):
            return frame.instances.get(func.id)
        if frame.cls is None:
            return None
        if isinstance(func, ast.Subscript):
            attr = self_attr(func.value)
            if attr is not None:
                return self._element_class(frame.cls, attr)
            # ``self.layers[0].self_attn.layers[i]``: an element of a container another held module holds.
            owner = self._element_of(func.value.value, frame) if isinstance(func.value, ast.Attribute) else None
            return self._element_class(owner, func.value.attr) if owner is not None else None  # type: ignore[union-attr]
        if isinstance(func, ast.Attribute) and not (isinstance(func.value, ast.Name) and func.value.id == "self"):
            # ``self.layers[0].self_attn.rotary_emb``: a submodule of a module found so.
            owner = self._element_of(func.value, frame)
            held = held_class(self.model.classes, owner, func.attr) if owner is not None else None
            return held if held is not owner else None
        return None

    def _loop_instances(self, loop: ast.For | ast.AsyncFor, frame: Frame) -> None:
        """``for rope in self.rotaries`` / ``for i, rope in enumerate(self.rotaries)``: ``rope`` is one of the
        modules the container holds."""
        source, target = loop.iter, loop.target
        if isinstance(source, ast.Call) and isinstance(source.func, ast.Name) and source.func.id == "enumerate" \
                and source.args and isinstance(target, ast.Tuple) and len(target.elts) == 2:
            source, target = source.args[0], target.elts[1]
        attr = self_attr(source)
        if attr is None or frame.cls is None or not isinstance(target, ast.Name):
            return
        held = self._element_class(frame.cls, attr)
        if held is not None:
            frame.instances[target.id] = held
        else:
            frame.instances.pop(target.id, None)

    def _held_entry(self, cls: ClassInfo, attr: str) -> tuple[ClassInfo, str] | None:
        """``self.<attr>(...)`` where ``__init__`` built ``self.<attr> = RoPE(...)`` from a class of this file:
        that class and the method a call runs (an ``nn.Module``'s ``forward``, a plain object's ``__call__``)."""
        held = held_class(self.model.classes, cls, attr)
        if held is None or held is cls:
            return None
        entry = self._entry_method(held)
        return (held, entry) if entry is not None else None

    def _entry_method(self, cls: ClassInfo) -> str | None:
        """What calling an instance runs: an ``nn.Module``'s ``forward``, a plain object's ``__call__``."""
        return next((name for name in ("forward", "__call__") if self._find_method(cls, name)), None)

    def _call(self, node: ast.Call, frame: Frame) -> Val:
        func = node.func
        if isinstance(func, ast.Call) and func.args and not isinstance(func.args[0], ast.Starred) \
                and _is_vmap(qualname(func.func, self.imports)):
            # ``vmap(self._phase_at)(flat_ids)``: per element, the function does what a plain call does.
            return self._call(self._rewritten(node, lambda: ast.Call(func=func.args[0], args=node.args,
                                                                     keywords=node.keywords)), frame)
        if self._any_vmapped and isinstance(func, ast.Attribute) and frame.cls is not None \
                and self_attr(func) is not None:
            mapped = next((c.vmapped[func.attr] for c in self._mro(frame.cls) if func.attr in c.vmapped), None)
            if mapped is not None:
                # ``self._batched_angles(t, inv_freq)`` with ``__init__`` building it as ``vmap(vmap(_angles))``.
                return self._call(self._rewritten(node, lambda: ast.Call(func=mapped, args=node.args,
                                                                         keywords=node.keywords)), frame)
        pos = [a for a in node.args if not isinstance(a, ast.Starred)]
        kw = {k.arg: k.value for k in node.keywords if k.arg is not None}
        for k in node.keywords:
            if k.arg is None:
                kw = {**self._unpacked(k.value, frame), **kw}

        if isinstance(func, ast.Name) and func.id in frame.trig_names and len(pos) == 1:
            return self._trig(node, self._eval(pos[0], frame), frame, False)
        if isinstance(func, ast.Name) and func.id in self.model.functions and func.id not in frame.env:
            inlined = self._inlined_range(node, func.id)
            if inlined is not None:
                return self._call(inlined, frame)
        if isinstance(func, ast.Name) and func.id in frame.partials:
            # ``arange(start, stop)`` with ``arange = functools.partial(torch.arange, dtype=dtype)``: the function
            # with the bound arguments first (a call's keywords override the bound ones, as in ``partial``).
            bound, given = frame.partials[func.id], {k.arg for k in node.keywords}
            return self._call(self._rewritten(node, lambda: ast.Call(
                func=bound.args[0], args=[*bound.args[1:], *node.args],
                keywords=[*(k for k in bound.keywords if k.arg not in given), *node.keywords])), frame)
        if isinstance(func, ast.Name) and func.id in self.model.functions and len(pos) == 1 and not kw:
            chosen = self._float_or_float32(self.model.functions[func.id], pos[0], frame)
            if chosen is not None:
                return chosen
        if isinstance(func, ast.Name) and func.id in frame.scope.params \
                and isinstance(frame.scope.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            default = next((d for p, d in _defaults(frame.scope.node) if p == func.id), None)
            if default is not None and (qualname(default, self.imports) or "").startswith("torch."):
                # ``def phase_of(positions, inv_freq, fn=torch.outer): return fn(positions, inv_freq)``: what the
                # default does (a caller passing another function is analysed as calling this one).
                return self._call(self._rewritten(node, lambda: ast.Call(func=default, args=node.args,
                                                                         keywords=node.keywords)), frame)
        lam = func if isinstance(func, ast.Lambda) else \
            frame.lambdas.get(func.id) if isinstance(func, ast.Name) else None
        if lam is not None:
            return self._call_lambda(lam, pos, kw, frame)
        summary = self._callee_summary(node, frame)
        if summary is not None:
            vals = [self._eval(a, frame) for a in pos]
            bound = dict(zip(summary.params, vals))
            bound.update({k: self._eval(v, frame) for k, v in kw.items()})
            summary = self._specialize(node, summary, bound, frame)
            self._check_helper_trig(node, summary, bound, frame)
            for other in self._other_choices(func, frame):
                # ``self.rotary_emb(position_ids, seq_len=n)`` where ``self.rotary_emb`` is another class on some
                # configurations: that class's casts are checked against this call too.
                alt_bound = dict(zip(other.params, vals))
                alt_bound.update({k: self._eval(v, frame) for k, v in kw.items()})
                self._check_helper_trig(node, other, alt_bound, frame)
            chosen = bound.get(summary.returns.dtype_param) if summary.returns.dtype_param else None
            if chosen is None and summary.returns.dtype_param in summary.float32_defaults \
                    and not any(isinstance(a, ast.Starred) for a in node.args) \
                    and all(k.arg is not None for k in node.keywords):
                chosen = dtype_val(Dt.FULL)  # left out: the ``dtype=torch.float32`` default
            if chosen is not None and chosen.has(Role.DTYPE):
                # ``self.get_seq_pos(n, dtype=torch.float32)``: the dtype the caller passed.
                if chosen.dtype is Dt.FULL:
                    return summary.returns.evolve(dtype=Dt.FULL, site=None, earlier_sites=(), dtype_param=None)
                return summary.returns.evolve(dtype_param=chosen.param)
            via = _cast_to_param(summary.returns.site, summary.params)
            if via is not None and via in bound and bound[via].dtype is Dt.FULL:
                # ``def angles(p, f, like): return (p * f).type_as(like)`` handed a float32 ``like``: float32.
                return summary.returns.evolve(dtype=Dt.FULL, site=None, earlier_sites=(), dtype_param=None)
            returned = summary.returns.param
            vararg = self._vararg_of(node, frame)
            starred = [a.value for a in node.args if isinstance(a, ast.Starred)]
            if returned is not None and returned == vararg and len(starred) == 1:
                return self._eval(starred[0], frame).evolve(last_is_one=False, second_last_is_one=False, vector=False)
            if returned is not None and returned in summary.params:
                # The callee hands back (a reshaping of) one of its arguments: what the caller passed, not
                # what the parameter's name suggests (``def recompose(self, freq)`` called with cos tables).
                if returned in bound:
                    handed = bound[returned].evolve(last_is_one=False, second_last_is_one=False, vector=False)
                    other = summary.returns.fallback_param
                    if other is not None and other != returned and other in bound and not handed.roles \
                            and bound[other].roles:
                        # ``default(custom_freqs, 1.0 / theta ** ...)``: an optional argument, or (mostly) the
                        # fallback the caller built.
                        handed = join(handed, bound[other]).evolve(param=handed.param)
                    if summary.returns.dtype in (Dt.RUNTIME, Dt.LOW, Dt.FULL) and handed.dtype is Dt.UNKNOWN \
                            and summary.returns.site is not None:
                        # ``def _float_mask(h, mask): return mask.to(h.dtype)``: handed back in the dtype it cast to.
                        handed = handed.evolve(dtype=summary.returns.dtype, site=node)
                    elif summary.returns.dtype in (Dt.RUNTIME, Dt.LOW) and handed.dtype is Dt.INT \
                            and handed.has(Role.POSITIONS) and summary.returns.site is not None:
                        # ``def _positions(self, ids): return ids.type_as(self.inv_freq) / self.factor``: integer
                        # positions cast inside the callee, where a 16-bit dtype rounds them.
                        handed = handed.evolve(dtype=summary.returns.dtype, site=summary.returns.site)
                    return handed
            counted = self._counted_over_argument(node, summary, bound, pos, kw)
            if counted is not None:
                return counted
            rounded = tuple(r for v in vals if not v.roles - {Role.INV_FREQ, Role.SCALAR}
                            for r in v.reads if r.follows_module_casts)
            if summary.returns.has(Role.INV_FREQ) and not summary.returns.reads and rounded:
                # ``self._compute_inv_freq(self.long_factor)``: frequencies built from state a module cast rounds
                # (Phi-3 LongRoPE's factor buffers), however the callee widens it.
                return summary.returns.evolve(read=rounded[0], alt_reads=rounded[1:])
            return summary.returns

        qn = qualname(func, self.imports)
        if qn is not None and qn.startswith("torch.Tensor.") and qn.count(".") == 2 and pos:
            # ``torch.Tensor.type_as(position_ids, self.inv_freq)``: the method, called unbound.
            return self._method(node, qn.rsplit(".", 1)[1], self._eval(pos[0], frame), pos[1:], kw, frame,
                                receiver_node=pos[0])
        if qn is None and isinstance(func, ast.Name) and func.id in ("setattr", "getattr"):
            qn = func.id
        if qn is not None and (qn.startswith("torch") or is_numpy(qn) or qn.startswith("math.")
                               or qn in ("setattr", "getattr")):
            result = self._library_call(node, qn, pos, kw, frame)
            out = kw.get("out")
            written = out.value if isinstance(out, ast.Subscript) else out
            held = self_attr(written) if written is not None else None
            if held is not None and frame.cls is not None and result.roles & {Role.TABLE, Role.PHASE}:
                # ``torch.outer(t, inv_freq, out=self.phase_scratch[:n])``: written in the buffer's dtype, which a
                # module cast sets.
                self._filled_state(held, result, node, frame)
            return result
        if qn is not None and is_runtime_inv_freq(qn):
            # ropelint's own helper (imported or vendored): float32 inverse frequencies. Knowing it
            # lets a cast written after it (``rope_runtime.inv_freq(...).to(x.dtype)``) be seen.
            return Val(frozenset({Role.INV_FREQ}), Dt.FULL)
        if isinstance(func, ast.Attribute):
            receiver_node = func.value
            method = func.attr
            if isinstance(receiver_node, ast.Name) and method == "register_buffer" \
                    and (receiver_node.id == "self" or self._own_instance(receiver_node.id, frame)):
                return self._register_buffer(node, pos, kw, frame)
            if isinstance(receiver_node, ast.Name) and receiver_node.id == "self" and method == "register_parameter":
                return self._register_parameter(node, pos, kw, frame)
            if method.endswith("_") and not method.startswith("_") and frame.cls is not None:
                self._updated_in_place(receiver_node, frame)
            receiver = self._eval(receiver_node, frame)
            if method == "append" and len(pos) == 1 and isinstance(receiver_node, ast.Name) \
                    and receiver_node.id in frame.env:
                # ``pos_ids.append(torch.stack([h, w], -1))`` into a list: ``torch.cat(pos_ids)`` holds what it got.
                got = self._eval(pos[0], frame)
                frame.env[receiver_node.id] = got if receiver == UNKNOWN else join(receiver, got)
                frame.items.pop(receiver_node.id, None)
                return UNKNOWN
            if method in ("index_copy_", "copy_") and pos and isinstance(receiver_node, ast.Name) \
                    and receiver_node.id in frame.env and not receiver.roles:
                # ``pos = torch.zeros_like(q[:, 0, 0])`` then ``pos.index_copy_(0, idx, torch.arange(n, ...))``: the
                # buffer holds positions now, in its own dtype.
                src = self._eval(pos[-1], frame)
                if src.roles & {Role.POSITIONS, Role.ARANGE}:
                    frame.env[receiver_node.id] = receiver.evolve(roles=src.roles & {Role.POSITIONS, Role.ARANGE})
            return self._method(node, method, receiver, pos, kw, frame)
        arguments = [self._eval(a, frame) for a in (*pos, *kw.values())]
        if isinstance(func, ast.Name) and func.id == "next" and pos:
            first = self._first_state(pos[0], frame)  # ``next(self.buffers()).dtype``
            if first is not None:
                return first
        if qn in ("einops.rearrange", "einops.repeat") and arguments:
            # A reshaping: the values, their dtype and what they mean stay (``rearrange(power, 'n -> n 1')``).
            return arguments[0].evolve(last_is_one=False, second_last_is_one=False, vector=False)
        if isinstance(func, ast.Name) and func.id in ("int", "len", "round"):
            return Val(frozenset({Role.SCALAR}), literal=0)  # an int: adding it keeps an integer tensor integer
        if isinstance(func, ast.Name) and func.id[:1].isupper() and (pos or kw) and func.id not in self.model.classes:
            # ``RotaryTables(cos=emb.cos(), sin=emb.sin())``: a record of tables (a dataclass, a NamedTuple);
            # ``tables.to(position_ids)`` then casts what it holds.
            if all(v.has(Role.TABLE) for v in arguments):
                out = arguments[0]
                for v in arguments[1:]:
                    out = join(out, v)
                return Val(frozenset({Role.TABLE}), out.dtype, site=out.site)
        if isinstance(func, ast.Name) and func.id in ("float", "max", "min"):
            return Val(frozenset({Role.SCALAR}))
        return UNKNOWN

    def _unpacked(self, node: ast.expr, frame: Frame) -> dict[str, ast.expr]:
        """The keywords ``**node`` passes, as far as the source shows them: ``torch.arange(n, **_FP32)`` with
        ``_FP32 = {"dtype": torch.float32}`` at module level; ``**{**factory_kwargs, "dtype": torch.float32}``."""
        if isinstance(node, ast.Name) and node.id in self._dict_constants and node.id not in frame.env:
            return dict(self._dict_constants[node.id])
        held = self_attr(node)
        if held is not None and frame.cls is not None:
            # ``self._factory_kwargs = {"device": device, "dtype": params_dtype}`` in ``__init__``, then
            # ``torch.arange(n).to(**self._factory_kwargs)``: the dtype a module constructor was handed.
            init = self._find_method(frame.cls, "__init__")
            assigned = [st.value for st in ast.walk(init[1]) if isinstance(st, ast.Assign) and len(st.targets) == 1
                        and self_attr(st.targets[0]) == held] if init is not None else []
            if len(assigned) == 1 and isinstance(assigned[0], ast.Dict):
                found = self._unpacked(assigned[0], frame)
                if "dtype" in found and isinstance(found["dtype"], ast.Name) and found["dtype"].id not in frame.env:
                    # A constructor argument (``params_dtype``): the dtype the model is built in, read here as a
                    # configuration's ``*_dtype``; at the argument's own position, so findings and fixes can cite it.
                    found["dtype"] = ast.copy_location(ast.Attribute(value=ast.Name(id="config", ctx=ast.Load()),
                                                                     attr="chosen_dtype", ctx=ast.Load()),
                                                       found["dtype"])
                return found
        if isinstance(node, ast.Name) and frame.scope.node is not None and node.id not in frame.scope.params:
            # ``dd = {"device": device, "dtype": torch.float32}`` once in this function, then ``arange(0.5, H, **dd)``.
            assigned = _assigned_values(frame.scope.node, node.id)
            if len(assigned) == 1 and isinstance(assigned[0], ast.Dict):
                return self._unpacked(assigned[0], frame)
        out: dict[str, ast.expr] = {}
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if key is None:
                    out.update(self._unpacked(value, frame))
                elif isinstance(key, ast.Constant) and isinstance(key.value, str):
                    out[key.value] = value
        return out

    def _call_lambda(self, lam: ast.Lambda, pos: list[ast.expr], kw: dict[str, ast.expr], frame: Frame) -> Val:
        """A lambda's body, with its parameters bound to what this call passes; it sees the enclosing
        names, and its parameters do not leak out (as in a comprehension)."""
        names = [a.arg for a in (*lam.args.posonlyargs, *lam.args.args, *lam.args.kwonlyargs)]
        bound = {name: self._eval(a, frame) for name, a in zip(names, pos)}
        bound.update({k: self._eval(v, frame) for k, v in kw.items() if k in names})
        outer = dict(frame.env)
        for name in names:
            frame.env[name] = bound.get(name, UNKNOWN)
        val = self._eval(lam.body, frame)
        frame.env = outer
        return val.evolve(param=None)

    def _container_cast(self, site: ast.Call, written: Val | None, frame: Frame) -> None:
        """A phase or table written into the integer buffer ``site`` allocates: once per allocation."""
        if written is not None and written.roles & {Role.TABLE, Role.PHASE} \
                and not any(c.node is site for c in self.model.casts):
            self.model.casts.append(Cast(site, "container", written, dtype_val(Dt.INT), None, frame.scope))

    def _check_helper_trig(self, node: ast.Call, summary: Summary, bound: dict[str, Val], frame: Frame) -> None:
        if not summary.reaches_arguments:
            return
        nodes = _argument_nodes(node, summary)
        if summary.dtype_casts:
            for name, cast in summary.dtype_casts:
                val = bound.get(name)
                if val is not None and val.has(Role.DTYPE) and (val.dtype is Dt.INT or val.may_be_int) and name in nodes:
                    # ``self._set_cos_sin_cache(n, dtype=position_ids.dtype)``: the callee casts its tables to it.
                    self.model.casts.append(Cast(node, "call", cast.receiver, val, nodes[name], frame.scope))
                elif val is not None and val.has(Role.DTYPE) and val.param in frame.scope.params and name in nodes \
                        and isinstance(nodes[name], ast.Name) and nodes[name].id == val.param:
                    # ``def build(self, dtype): return Utils.tables(..., dtype=dtype)``: this function's own ``dtype``
                    # parameter decides, so its callers are checked as the inner function's are.
                    frame.dtype_casts.append((val.param, Cast(node, "call", cast.receiver, val, nodes[name],
                                                              frame.scope)))
                elif val is not None and val.has(Role.DTYPE) and name in nodes \
                        and isinstance(nodes[name], ast.Attribute) and nodes[name].attr == "dtype" \
                        and isinstance(nodes[name].value, ast.Name) and nodes[name].value.id in frame.scope.params:
                    # ``self._set_cos_sin_cache(n, dtype=ref.dtype)`` in ``_maybe_rebuild(self, ref)``: the tables take
                    # the dtype of whatever tensor this function's callers pass as ``ref``.
                    frame.tensor_casts.append((nodes[name].value.id, Cast(node, "call", cast.receiver, val,
                                                                          nodes[name], frame.scope)))
                fallback = cast.target.fallback_param
                if name not in nodes and fallback in nodes and not bound[fallback].has(Role.DTYPE) \
                        and (bound[fallback].dtype is Dt.INT or _ids_by_name(bound[fallback])):
                    # ``compute_cos_sin(cache_position, inv_freq)`` into ``out_dtype or positions.dtype``.
                    self.model.casts.append(Cast(node, f"default:{name}", cast.receiver, dtype_val(Dt.INT),
                                                 nodes[fallback], frame.scope))
        for name, cast in summary.int_casts:
            val = bound.get(name)
            if val is not None and val.roles & {Role.TABLE, Role.PHASE}:
                # ``_gather(self._cos_cached, position_ids)``: the helper's cast truncates this table.
                self.model.casts.append(dataclasses.replace(cast, receiver=val))
        for name, source in summary.container_writes:
            container = bound.get(name)
            written = bound.get(source) if source is not None else Val(frozenset({Role.PHASE}))
            if container is not None and _int_buffer(container):
                # ``apply_interleaved_mrope(freqs, section, position_ids.new_empty(...))``: the phase truncates.
                self._container_cast(container.site, written, frame)  # type: ignore[arg-type]
        for name, site in summary.int_buffer_writes:
            # ``_merge_mrope_sections(phase, positions, ...)`` copies the phase into ``positions.new_empty``.
            self._container_cast(site, bound.get(name), frame)
        for name, target_name, cast in summary.param_casts:
            val, target = bound.get(name), bound.get(target_name)
            arg = nodes.get(target_name)
            if val is not None and target is not None and arg is not None and val.roles & {Role.TABLE, Role.PHASE} \
                    and self._integer_tensor(arg, target, frame):
                # ``_like(emb.cos(), position_ids)`` into ``def _like(t, ref): return t.to(ref)``.
                fn = self._callee_node(node, frame)
                movable = fn is not None and _only_to_target(fn, target_name)
                # ``def _match(t, ref): return t.to(ref.dtype)`` does nothing but the cast: the call can go.
                droppable = fn is not None and node.args and not isinstance(node.args[0], ast.Starred) \
                    and _only_casts(fn, name, target_name)
                method = "argument-device" if movable else "argument-drop" if droppable else \
                    "argument-dtype-keyword" if fn is not None and dtype_keyword(fn, target_name) is not None \
                    else "argument"
                self.model.casts.append(Cast(node, method, val,
                                             dtype_val(Dt.INT).evolve(param=target_name), arg, frame.scope))
        for name, cast in summary.tensor_casts:
            val = bound.get(name)
            if isinstance(cast.target_expr, ast.Attribute):
                arg = nodes.get(name)
                if arg is None and val is None:
                    self._left_out_like(node, name, cast, bound, nodes, frame)
                    continue
                if val is not None and arg is not None and self._integer_tensor(arg, val, frame):
                    # ``self.rope(idx)`` into ``def forward(self, x): ... cos.to(x.dtype)``: reported at the call.
                    like = self._activation_like(node, name, arg, frame)
                    self.model.casts.append(Cast(node, "argument" if like is None else f"argument={like}",
                                                 cast.receiver, dtype_val(Dt.INT).evolve(param=name), arg,
                                                 frame.scope))
                continue
            if val is not None and val.dtype is Dt.INT and not val.has(Role.DTYPE):
                arg = nodes.get(name)
                like = self._activation_like(node, name, arg, frame) \
                    if arg is not None and cast.method == "to" and isinstance(node.func, ast.Attribute) else None
                if like is not None and not like.startswith("~"):
                    # ``self._refresh_cache(n, position_ids)`` into ``def _refresh_cache(self, n, ref)``, which reads
                    # ``ref`` only for its dtype and device (``fn(emb).to(ref)``): an activation serves it.
                    self.model.casts.append(Cast(node, f"argument={like}", cast.receiver,
                                                 dtype_val(Dt.INT).evolve(param=name), arg, frame.scope))
                    continue
                # ``_cs(grid, f)`` with an integer grid, where ``_cs`` ends in ``.type_as(p)``.
                self.model.casts.append(dataclasses.replace(cast, target=dtype_val(Dt.INT).evolve(param=name)))
        callee = (dotted(node.func) or ["?"])[-1]
        node = self._wrapped.get(id(node), node)  # ``vmap(f)(t)`` is reported, and fixed, as written
        for name, val in bound.items():
            if name in summary.freq_params:
                if val.param is not None:
                    frame.freq_params.add(val.param)
                if any(read.follows_module_casts for read in val.reads):
                    self.model.helper_freqs.append(TrigInHelper(node, val, callee, frame.scope))
            if name in summary.position_params:
                if val.param is not None:
                    frame.position_params.add(val.param)
                if val.dtype.can_be_16bit and val.site is not None and _is_positions(val, loose=True):
                    self.model.helper_positions.append(TrigInHelper(node, val, callee, frame.scope))
            if name in summary.trig_params:
                if val.param is not None:
                    frame.trig_params.add(val.param)
                if val.has(Role.PHASE):
                    self.model.helper_trigs.append(TrigInHelper(node, val, callee, frame.scope))

    def _left_out_like(self, node: ast.Call, name: str, cast: Cast, bound: dict[str, Val],
                       nodes: dict[str, ast.expr], frame: Frame) -> None:
        """``self.table(position_ids)`` into ``def __call__(self, positions, like=None): like = positions if like
        is None else like; ... cos.to(like.dtype)``: left out, the tables take the integer positions' dtype."""
        fn = self._callee_node(node, frame)
        fallback = _tensor_fallback(fn, name) if fn is not None else None
        arg = nodes.get(fallback) if fallback is not None else None
        if arg is not None and fallback in bound and self._integer_tensor(arg, bound[fallback], frame):
            self.model.casts.append(Cast(node, f"default-tensor:{name}", cast.receiver, dtype_val(Dt.INT),
                                         arg, frame.scope))

    def _callee_node(self, node: ast.Call, frame: Frame) -> FunctionNode | None:
        func = node.func
        element = self._element_of(func, frame)
        if element is not None:
            entry = self._entry_method(element)
            return same_file_callable(self.model, element, entry, method=True) if entry is not None else None
        if isinstance(func, ast.Name):
            return same_file_callable(self.model, None, func.id)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            found = same_file_callable(self.model, frame.cls, func.attr, method=True)
            held = self._held_entry(frame.cls, func.attr) if found is None and frame.cls is not None else None
            return same_file_callable(self.model, held[0], held[1], method=True) if held is not None else found
        return None

    def _activation_like(self, node: ast.Call, name: str, arg: ast.expr, frame: Frame) -> str | None:
        """What can replace the ids handed to a rotary as its activation argument ``name``, when the rotary
        reads that argument only for ``.dtype`` and ``.device``: an activation this function has already
        made at its top level (``value_states``), its own activation parameter, or the weight of the
        embedding it looks the ids up in (``self.embed_in.weight``: the dtype and device of the
        embeddings it makes). None when the rotary also reads the argument's shape or values."""
        callee, owner = self._callee_node(node, frame), frame.scope.node
        if callee is None or owner is None:
            return None
        params = call_params(callee, is_method=isinstance(node.func, ast.Attribute)
                             or self._element_of(node.func, frame) is not None)
        given = {k.arg for k in node.keywords if k.arg is not None and not is_none(k.value)}
        given |= {p for p, a in zip(params, node.args) if not isinstance(a, ast.Starred) and not is_none(a)}
        if not _dtype_and_device_only(callee, name, given):
            return None
        # Activations assigned by the function's own top-level statements before the call (so defined on every
        # path to it): the values first, as upstream code passes ``value_states``, then the latest made.
        made: list[str] = []
        for stmt in getattr(owner, "body", []):
            if isinstance(stmt, ast.Assign) and stmt.lineno < node.lineno:
                for target in stmt.targets:
                    for name_node in (target.elts if isinstance(target, ast.Tuple) else [target]):
                        if isinstance(name_node, ast.Name) and (ACTIVATION_PARAMS.match(name_node.id)
                                                                or name_node.id.endswith("_states")):
                            made.append(name_node.id)
        if made:
            return min(dict.fromkeys(made), key=lambda n: (not n.startswith(("value", "v")), made[::-1].index(n)))
        if frame.scope.activation is not None and not (isinstance(arg, ast.Name) and arg.id == frame.scope.activation):
            return frame.scope.activation
        ids = arg.body if isinstance(arg, ast.IfExp) else arg  # ``input_ids if ... else inputs_embeds``
        table = self._embedding_of(ids, frame) if isinstance(ids, ast.Name) else None
        if table is None and frame.cls is not None:
            # The one embedding table the module holds: its weight has the dtype of the activations it makes
            # (``hidden_states = self.embed_tokens(input_ids)`` in the model's ``forward``).
            tables = {attr for c in self._mro(frame.cls) for attr, made in c.submodules.items() if made == "Embedding"}
            table = tables.pop() if len(tables) == 1 else None
        if table is None:
            # Nothing here has the activations' dtype: float32 ids of the same shape and device (``~`` marks
            # the guess, as the callers' activations may want tables in their own dtype).
            return f"~{ids.id}.float()" if isinstance(arg, ast.Name) else None
        weight = f"self.{table}.weight"
        if isinstance(arg, ast.IfExp):  # only the ids branch changes
            return f"{weight} if {self.spans.text(arg.test)} else {self.spans.text(arg.orelse)}"
        return weight

    def _embedding_of(self, ids: ast.Name, frame: Frame) -> str | None:
        """The ``nn.Embedding`` attribute the function looks ``ids`` up in (``self.tok(idx)``), if any."""
        owner = frame.scope.node
        if owner is None or frame.cls is None:
            return None
        embeddings = {attr for c in self._mro(frame.cls) for attr, made in c.submodules.items() if made == "Embedding"}
        if not embeddings:
            return None
        key = (id(owner), ids.id)
        if key not in self._embedding_lookups:
            self._embedding_lookups[key] = next(
                (call.func.attr for call in ast.walk(owner)
                 if isinstance(call, ast.Call) and call.args and isinstance(call.args[0], ast.Name)
                 and call.args[0].id == ids.id and isinstance(call.func, ast.Attribute)
                 and isinstance(call.func.value, ast.Name) and call.func.value.id == "self"
                 and call.func.attr in embeddings), None)
        return self._embedding_lookups[key]

    def _integer_tensor(self, arg: ast.expr, val: Val, frame: Frame) -> bool:
        """Integer by what the analysis knows, by an index-like name (``idx``, ``input_ids``), or because
        the same function looks it up in an embedding table (``self.tok(idx)``)."""
        if val.has(Role.DTYPE):
            return False
        if val.dtype is Dt.INT:
            return True
        if isinstance(arg, ast.Name) and val.param == arg.id and val.roles <= {Role.ACTIVATION} \
                and self._embedding_of(arg, frame) is not None:
            return True  # Whisper's ``x`` before ``x = self.token_embedding(x)``: token ids, whatever the name says
        if val.dtype is not Dt.UNKNOWN or not isinstance(arg, ast.Name):
            return False
        if INT_BY_NAME.match(arg.id) or (val.param == arg.id and _ids_by_name(val)):
            return True  # ``positions``, ``pos_ids``: a parameter that only ever holds positions, int64 ids
        if arg.id in frame.scope.params and _ids_by_name(val.evolve(param=arg.id)):
            return True  # ``positions = (positions + offsets).flatten()``: still that parameter's ids
        if val.param != arg.id:
            return False  # ``src = self.embedding(src)`` first: the name no longer holds the ids
        return self._embedding_of(arg, frame) is not None

    def _register_buffer(self, node: ast.Call, pos: list, kw: dict, frame: Frame) -> Val:
        name_node = pos[0] if pos else kw.get("name")
        value_node = pos[1] if len(pos) > 1 else kw.get("tensor")
        persistent_node = pos[2] if len(pos) > 2 else kw.get("persistent")
        value = self._eval(value_node, frame) if value_node is not None else UNKNOWN
        name = string_value(name_node) if name_node is not None else None
        persistent = not (persistent_node is not None and bool_literal(persistent_node) is False)
        looped = frame.keyed_loops.get(name_node.id) if isinstance(name_node, ast.Name) else None
        if name is None and frame.cls is not None and looped is not None and isinstance(value_node, ast.Name) \
                and value_node.id == looped[0]:
            # ``for name, t in self._make_buffers().items(): self.register_buffer(name, t)``: each key a buffer.
            for key, held in looped[1]:
                self._register_named(node, key, held, value_node, persistent, frame)
            return UNKNOWN
        if name is None and frame.cls is not None and isinstance(name_node, ast.Name):
            frame.cls.dynamic_buffer = frame.cls.dynamic_buffer or (node, persistent, frame.scope)
        if name is None or frame.cls is None:
            return UNKNOWN
        self._register_named(node, name, value, value_node, persistent, frame)
        return UNKNOWN

    def _register_named(self, node: ast.Call, name: str, value: Val, value_node: ast.expr | None, persistent: bool,
                        frame: Frame) -> None:
        assert frame.cls is not None
        frame.cls.writes.setdefault(name, set()).add(frame.scope.symbol)
        named = self._state_roles(name)
        if not value.roles or (value.roles == {Role.SCALAR} and not isinstance(value_node, ast.Constant)) \
                or (Role.INV_FREQ in named and value.roles <= {Role.POSITIONS, Role.ARANGE}):
            # ``register_buffer("freq_basis", theta ** torch.linspace(...))``: a ramp the name calls frequencies;
            # ``register_buffer("inv_freq", self.config.inv_freq.clone())``: a buffer is a tensor, not a number.
            value = value.evolve(roles=named)
        ref = StateRef(name, StateKind.BUFFER, node, persistent)
        frame.cls.state[name] = StateEntry(ref, value)
        self._registered(node, ref, value, frame)

    def _keyed_loop(self, loop: ast.For | ast.AsyncFor,
                    frame: Frame) -> tuple[str, str, tuple[tuple[str, Val], ...]] | None:
        """``for name, t in self._make_buffers().items()`` where that method returns a dict with string keys:
        (key name, value name, what each key holds)."""
        it, target = loop.iter, loop.target
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr == "items"
                and not it.args and isinstance(it.func.value, ast.Call) and isinstance(target, ast.Tuple)
                and len(target.elts) == 2 and all(isinstance(e, ast.Name) for e in target.elts)):
            return None
        summary = self._callee_summary(it.func.value, frame)
        if summary is None or summary.keyed is None:
            return None
        return target.elts[0].id, target.elts[1].id, summary.keyed  # type: ignore[attr-defined]

    def _trig_loop_names(self, loop: ast.For | ast.AsyncFor) -> list[str]:
        """Loop targets that take cos and sin themselves: ``for fn in (torch.cos, torch.sin)`` and
        ``for name, fn in zip(names, (torch.cos, torch.sin))``."""
        def trig_tuple(node: ast.expr) -> bool:
            return isinstance(node, (ast.Tuple, ast.List)) and bool(node.elts) and all(
                (qualname(e, self.imports) or "").rsplit(".", 1)[-1] in ("cos", "sin") for e in node.elts)
        it, target = loop.iter, loop.target
        if trig_tuple(it) and isinstance(target, ast.Name):
            return [target.id]
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "zip" \
                and isinstance(target, ast.Tuple) and len(target.elts) == len(it.args):
            return [t.id for a, t in zip(it.args, target.elts) if trig_tuple(a) and isinstance(t, ast.Name)]
        return []

    def _first_state(self, node: ast.expr, frame: Frame) -> Val | None:
        """``self.buffers()`` (or ``iter(...)`` of it) as a loop's iterable or ``next``'s argument: the first buffer
        (parameter) the class registers, which a ``dtype`` property built this way reports (an int64 grid's)."""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "iter" \
                and len(node.args) == 1:
            node = node.args[0]
        if self.integer_weights and isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("buffers", "parameters") and not node.args \
                and not (isinstance(node.func.value, ast.Name) and node.func.value.id == "self"):
            # ``for b in module.buffers(): return b.dtype`` on any module: one that holds this file's quantised
            # layers reports their integer weight.
            return Val(may_be_int=True)
        if frame.cls is None or not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                                     and node.func.attr in ("buffers", "parameters") and not node.args
                                     and isinstance(node.func.value, ast.Name) and node.func.value.id == "self"):
            return None
        kind = StateKind.BUFFER if node.func.attr == "buffers" else StateKind.PARAMETER
        for cls in reversed(self._mro(frame.cls)):  # a base's ``__init__`` registers first (``super().__init__()``)
            for name, entry in cls.state.items():
                if entry.ref.kind is kind and "{}" not in name:
                    return self._state_read(name, node, frame)
        if kind is StateKind.PARAMETER and any(c.submodules for c in self._mro(frame.cls)):
            # ``next(self.parameters())`` of a module whose parameters are its layers' (``self.c_attn =
            # nn.Linear(...)``): float weights, in the dtype module casts set.
            return Val(frozenset(), Dt.RUNTIME, site=node)
        return None

    def _state_roles(self, name: str) -> frozenset[Role]:
        """A buffer's or parameter's name is chosen for what it holds: ``freq_basis``, ``freqs_h`` are frequencies."""
        return frozenset({Role.INV_FREQ}) if FREQ_NAMES.match(name.lower()) else self._named(name).roles

    def _register_parameter(self, node: ast.Call, pos: list, kw: dict, frame: Frame) -> Val:
        """``self.register_parameter("freqs", nn.Parameter(t, requires_grad=False))``."""
        name_node = pos[0] if pos else kw.get("name")
        param_node = pos[1] if len(pos) > 1 else kw.get("param")
        value = self._eval(param_node, frame) if param_node is not None else UNKNOWN
        name = string_value(name_node) if name_node is not None else None
        holder = self._holder_call(param_node, value, frame.scope.node) if isinstance(param_node, ast.Call) else None
        if name is None or frame.cls is None or holder is None:
            return UNKNOWN
        kind, persistent, inner, frozen, by_default = holder
        frame.cls.writes.setdefault(name, set()).add(frame.scope.symbol)
        if not inner.roles:
            inner = inner.evolve(roles=self._state_roles(name))
        ref = StateRef(name, kind, node, persistent, frozen, by_default)
        frame.cls.state[name] = StateEntry(ref, inner)
        self._registered(node, ref, inner, frame)
        return UNKNOWN

    def _library_call(self, node: ast.Call, qn: str, pos: list, kw: dict, frame: Frame) -> Val:
        tail = qn.rsplit(".", 1)[-1]
        numpy = is_numpy(qn)
        starred = [a.value for a in node.args if isinstance(a, ast.Starred)]
        if tail in ("meshgrid", "broadcast_tensors") and starred:
            # ``torch.meshgrid(*axes)``: each grid has the dtype and meaning of the axes it was made from.
            out = UNKNOWN
            for v in (*(self._eval(a, frame) for a in pos), *(self._eval(a, frame) for a in starred)):
                out = v if out is UNKNOWN else join(out, v)
            return out.evolve(last_is_one=False, second_last_is_one=False, vector=False)
        if tail in ("deg2rad", "rad2deg", "remainder", "fmod") and pos and qn.startswith("torch"):
            # ``torch.deg2rad(torch.remainder(lon_deg, 360.0))``: the same coordinates in other units.
            v = self._eval(pos[0], frame)
            for extra in (*pos[1:], *kw.values()):
                self._eval(extra, frame)
            if not v.roles and v.param is not None:
                return Val(frozenset(), v.dtype if v.dtype is not Dt.INT else Dt.RUNTIME, param=v.param,
                           last_is_one=v.last_is_one, second_last_is_one=v.second_last_is_one)
        if tail == "promote_types" and len(pos) == 2 and qn.startswith("torch"):
            # ``torch.promote_types(position_ids.dtype, cu_seqlens.dtype)``: integer when both are.
            a, b = self._eval(pos[0], frame), self._eval(pos[1], frame)
            if a.has(Role.DTYPE) and b.has(Role.DTYPE):
                if a.dtype is Dt.INT and b.dtype is Dt.INT:
                    return dtype_val(Dt.INT)
                floats = {v.dtype for v in (a, b) if v.dtype is not Dt.INT}
                return dtype_val(Dt.FULL if Dt.FULL in floats else Dt.RUNTIME)
            return dtype_val(Dt.RUNTIME)
        if tail == "cumsum" and pos and qn.startswith("torch"):
            counted = self._cumsum_positions(node, pos[0], self._eval(pos[0], frame),
                                             self._eval(kw["dtype"], frame) if "dtype" in kw else None)
            if counted is not None:
                return counted
        if qn in ("setattr",) and len(pos) >= 3 and isinstance(pos[0], ast.Name) and pos[0].id == "self":
            value_node = pos[2]
            holding = isinstance(value_node, ast.Call) and value_node.args \
                and (qualname(value_node.func, self.imports) or "").rsplit(".", 1)[-1] in ("Buffer", "Parameter")
            inner = self._eval(value_node.args[0] if holding else value_node, frame)  # type: ignore[union-attr]
            name = string_value(pos[1])
            if not holding:
                # ``setattr(self, name, fn(emb).to(ref))``: a plain attribute, written as ``self.<name> = ...`` is.
                if name is not None and frame.cls is not None:
                    self._bind(ast.Attribute(value=ast.Name(id="self", ctx=ast.Load()), attr=name, ctx=ast.Store()),
                               inner, None, frame)
                return UNKNOWN
            if name is not None and frame.cls is not None:
                frame.cls.writes.setdefault(name, set()).add(frame.scope.symbol)
            if name is not None and frame.cls is not None and isinstance(value_node, ast.Call):
                held = inner if inner.roles else inner.evolve(roles=self._named(name).roles)
                holder = self._holder_call(value_node, held, frame.scope.node)
                if holder is not None:
                    kind, persistent, val, frozen, by_default = holder
                    ref = StateRef(name, kind, node, persistent, frozen, by_default)
                    frame.cls.state[name] = StateEntry(ref, val)
                    self._registered(node, ref, val, frame)
            return UNKNOWN
        if qn == "getattr" and pos and isinstance(pos[0], ast.Name) and pos[0].id == "self" and len(pos) >= 2:
            name = string_value(pos[1])
            if name is None:
                return UNKNOWN
            if "{}" in name:
                return self._state_read_template(name, node, frame)
            return self._state_read(name, node, frame)
        if qn == "getattr" and len(pos) >= 2 and string_value(pos[1]) is not None \
                and string_value(pos[1]).isidentifier():  # type: ignore[union-attr]
            # ``getattr(config, "torch_dtype", None)``: the attribute, when the object has it.
            attribute = ast.copy_location(ast.Attribute(value=pos[0], attr=string_value(pos[1]), ctx=ast.Load()), node)
            found = self._attribute(attribute, frame)
            default = self._eval(pos[2], frame) if len(pos) > 2 else UNKNOWN
            return found if default is UNKNOWN or not default.roles else join(found, default)
        if tail in ("Buffer", "Parameter") and not numpy:
            return self._eval(pos[0], frame) if pos else UNKNOWN
        vals = [self._eval(a, frame) for a in pos]
        kvals = {k: self._eval(v, frame) for k, v in kw.items()}
        if tail in ("arange", "linspace") and not qn.startswith("math"):
            return self._arange(node, numpy, tail, pos, vals, kvals)
        if tail in ("float32", "float64", "bfloat16", "float16") and numpy:
            return dtype_val(Dt.FULL)
        if tail in ("outer", "ger") and len(vals) >= 2 and not numpy:
            return self._product_or_arith(node, "outer", vals[0], vals[1], frame, pos[:2]) \
                or _scaled_positions(vals[0], vals[1]) or UNKNOWN
        if tail == "einsum" and numpy and len(vals) == 3 and string_value(pos[0]) is not None \
                and not _einsum_sums(string_value(pos[0]) or "") \
                and any(_is_freq(f) and _is_positions(p, loose=True) for f, p in (vals[1:3], vals[2:0:-1])):
            # ``np.einsum("i,j->ij", t, freqs)``: numpy's outer product, float64 like ``np.outer``.
            return Val(frozenset({Role.PHASE}), Dt.FULL)
        if tail in ("outer", "multiply") and numpy and len(vals) >= 2 \
                and any(_is_freq(f) and _is_positions(p, loose=True) for f, p in (vals[:2], vals[1::-1])):
            # ``np.outer(t, inv_freq)``: a phase in float64 (numpy has no autocast), so no product to rewrite;
            # what matters is where it is stored.
            return Val(frozenset({Role.PHASE}), Dt.FULL)
        if tail == "einsum" and not numpy and pos:
            spec = string_value(pos[0])
            operands = vals[1:]
            opnodes = pos[1:]
            if len(operands) == 1 and isinstance(opnodes[0], (ast.Tuple, ast.List)):
                opnodes = list(opnodes[0].elts)
                operands = [self._eval(o, frame) for o in opnodes]
            if spec is not None and len(operands) == 2:
                form = "einsum-sum" if _einsum_sums(spec) else "einsum"
                if form == "einsum-sum" and _einsum_is_matmul(spec):
                    form = "einsum-matmul"  # "...ij,...jk->...ik": a matmul spelled as an einsum
                result = self._product_or_arith(node, form, operands[0], operands[1], frame, opnodes)
                if result is not None:
                    return result
            out = UNKNOWN
            for v in operands:
                out = v if out is UNKNOWN else self._arith(out, v, ast.Mult(), node, frame)
            return out
        if tail == "linear" and qn.endswith("functional.linear") and len(vals) == 2 and "bias" not in kw:
            # ``F.linear(pos.unsqueeze(-1), inv_freq.unsqueeze(-1))``: ``pos @ inv_freq.T``, on autocast's list too.
            return self._product_or_arith(node, "linear", vals[0], vals[1], frame, pos[:2]) or UNKNOWN
        if tail in MATMUL_FUNCS and not numpy:
            operands = vals[-2:] if tail in ("addmm", "baddbmm", "addbmm") else vals[:2]
            opnodes = pos[-2:] if tail in ("addmm", "baddbmm", "addbmm") else pos[:2]
            if len(operands) == 2:
                if tail == "mm":
                    operands = [self._matrix_operand(v, n) for v, n in zip(operands, opnodes)]
                if tail == "bmm":
                    operands = _batched_operands(*operands)
                # ``tensordot(a, b, dims=...)`` contracts axes its own way: a form of its own, so no matmul
                # rewrite is applied to it (``dims=0`` is the outer product, still on autocast's list).
                form = "tensordot" if tail == "tensordot" else "matmul"
                result = self._product_or_arith(node, form, operands[0], operands[1], frame, opnodes)
                if result is not None:
                    return result
            return UNKNOWN
        if tail in ("mul", "multiply") and len(vals) >= 2 and not numpy:
            result = self._product_or_arith(node, "elementwise", vals[0], vals[1], frame, pos[:2])
            return result or self._arith(vals[0], vals[1], ast.Mult(), node, frame)
        if tail in ("cos", "sin") and vals:
            return self._trig(node, vals[0], frame, numpy)
        if tail == "polar" and len(vals) >= 2:
            self._trig(node, vals[1], frame, numpy)
            return Val(frozenset({Role.COMPLEX}), Dt.FULL)
        if tail in ("view_as_complex", "complex"):
            return Val(frozenset({Role.COMPLEX}), Dt.FULL)
        if tail == "view_as_real" and vals and vals[0].has(Role.COMPLEX):
            return Val(frozenset({Role.TABLE}), Dt.FULL)  # (cos, sin) pairs of a rotation
        if tail in ("cat", "stack", "concat", "concatenate", "hstack", "vstack", "dstack"):
            items = self._items_of(pos[0], frame) if pos else None
            vals2 = list(items) if items else vals[:1]
            out = UNKNOWN
            for v in vals2:
                out = v if out is UNKNOWN else join(out, v)
            if numpy and out.roles:
                out = out.evolve(dtype=Dt.FULL)
            return out.evolve(last_is_one=False, second_last_is_one=False, vector=False)
        if tail in ("pow", "float_power", "power") and len(vals) >= 2:
            return self._power(node, vals[0], vals[1], frame)
        if tail == "exp" and vals:
            return self._exp(node, vals[0], frame, pos[0])
        if tail in ("log", "sqrt", "abs", "log2", "log10", "floor", "ceil") and qn.startswith("math."):
            return Val(frozenset({Role.SCALAR}))
        if tail in ("clamp", "clip") and vals and _unit_bounds(pos[1:3], kw):
            # ``torch.clamp((arange(n) - low) / (high - low), 0, 1)``: a ramp in [0, 1] (YaRN's mask), not positions.
            return Val(frozenset(), vals[0].dtype)
        if tail in ("where", "lerp", "clamp", "clip", "maximum", "minimum", "block_diag"):
            # (``torch.block_diag(f[None], f[None], f[None])``: per-axis frequencies as one (axes, d) matrix.)
            tensors = [v for v in vals if v.roles - {Role.SCALAR}]
            out = UNKNOWN
            for v in tensors:
                out = v if out is UNKNOWN else join(out, v)
            return out
        if tail in ("from_numpy", "as_tensor", "tensor") and vals:
            inner = vals[0]
            dt = kvals.get("dtype")
            if dt is not None and dt.has(Role.DTYPE) and inner.roles & {Role.INV_FREQ, Role.PHASE, Role.TABLE} \
                    and dt.dtype is Dt.INT and isinstance(kw["dtype"], ast.Attribute) and kw["dtype"].attr == "dtype":
                # ``torch.as_tensor(self.inv_freq, dtype=position_ids.dtype)``: a copy in another tensor's integer
                # dtype (an explicit ``dtype=torch.int32`` is a choice: TimesFM's ``freq`` is a category, not a rate).
                self.model.casts.append(Cast(node, "as_tensor", inner, dt, kw["dtype"], frame.scope))
            elif dt is not None and dt.has(Role.DTYPE) and dt.dtype.can_be_16bit \
                    and inner.roles & {Role.INV_FREQ, Role.PHASE} and not inner.has(Role.TABLE) \
                    and (dt.dtype is Dt.LOW or self._activation_dtype(kw["dtype"], frame)
                         or (inner.has(Role.PHASE) and dt.dtype is Dt.RUNTIME)
                         or (isinstance(kw["dtype"], ast.Name) and kw["dtype"].id in frame.scope.params
                             and getattr(frame.scope.node, "name", None) != "__init__")):
                # ``torch.tensor(freq_list, dtype=q.dtype)``: frequencies (or a phase) made in the activations' dtype,
                # or in a ``dtype`` its callers choose (ChatGLM's ``torch.tensor(self._theta, dtype=dtype)``); not
                # ``dtype=freqs.dtype``, Llama 3.1's ``apply_scaling`` keeping its input's dtype.
                self.model.casts.append(Cast(node, "as_tensor", inner, dt, kw["dtype"], frame.scope))
            if dt is not None and dt.has(Role.DTYPE):
                return inner.evolve(dtype=dt.dtype, site=node if dt.dtype.can_be_16bit else None)
            if tail == "from_numpy" or inner.dtype is Dt.FULL:
                return inner.evolve(dtype=Dt.FULL if inner.roles else inner.dtype)
            return inner
        if tail == "get_default_dtype":
            return dtype_val(Dt.RUNTIME, site=node)
        if tail in ("get_autocast_dtype", "get_autocast_gpu_dtype", "get_autocast_cpu_dtype"):
            return dtype_val(Dt.LOW, site=node)  # what autocast computes in: bfloat16 or float16
        if tail in ("LongTensor", "IntTensor") and not numpy:
            return Val(frozenset(), Dt.INT, site=node)  # ``torch.LongTensor(list(range(n)))``: int64 positions
        if tail in ("ones_like", "zeros_like", "empty_like", "full_like") and vals and "dtype" not in kvals \
                and vals[0].dtype is Dt.INT:
            # ``torch.empty_like(pos)``: a buffer in the integer dtype of ``pos``; tables written into it truncate.
            return Val(frozenset(), Dt.INT, site=node)
        if tail in ("ones_like", "zeros_like", "ones", "zeros", "empty", "full", "randn", "rand"):
            dt = kvals.get("dtype")
            if dt is not None and dt.has(Role.DTYPE) and dt.dtype is Dt.INT:
                # ``torch.full((b,), offset, dtype=torch.long)``: integers (a buffer of them stays integer)
                return Val(frozenset(), Dt.INT, site=node)
            if dt is not None and dt.has(Role.DTYPE) and dt.dtype is Dt.FULL and not tail.startswith("rand"):
                # ``torch.empty(n, dtype=_freq_buffer_dtype(dtype))`` (at least float32): a float32 buffer.
                return Val(frozenset(), Dt.FULL)
            if dt is not None and dt.has(Role.DTYPE) and dt.dtype.can_be_16bit and dt.param is not None \
                    and not tail.startswith("rand"):
                # ``ids = torch.zeros(shape, dtype=dtype); ids[...] = coords``: whatever is written into it takes the
                # dtype the caller chose (the latents', for Flux's image ids). (Only a dtype parameter: a dtype read
                # off a tensor, ``dtype=patch_idx.dtype``, is that tensor's, whose making is where a fix goes.)
                return Val(frozenset(), dt.dtype, site=node, dtype_param=dt.param)
            if tail.endswith("_like") and dt is None and vals and (vals[0].has(Role.ACTIVATION)
                                                                  or _embeds_node(pos[0] if pos else None)):
                # ``torch.zeros_like(q[:, 0, 0])``, ``torch.ones_like(inputs_embeds[..., 0])``: a buffer in the
                # activations' dtype.
                return Val(frozenset(), Dt.RUNTIME, site=node)
            return UNKNOWN
        if tail in SHAPE_METHODS and vals:
            return vals[0].evolve(last_is_one=False, second_last_is_one=False, vector=False)
        if qn == "torch.nn.functional.embedding" and len(vals) >= 2:
            # ``F.embedding(position_ids, cos_cached)``: rows of the table (the second argument).
            return vals[1].evolve(last_is_one=False, second_last_is_one=False, vector=False, literal=None)
        return UNKNOWN

    @staticmethod
    def _cumsum_positions(node: ast.Call, arg: ast.expr, mask: Val, dtype: Val | None) -> Val | None:
        """``torch.cumsum(attention_mask, -1)``: positions counted over a padding mask, in the mask's dtype (a bool
        or integer mask counts in int64; one converted to the activations' dtype counts in 16 bits), or in the
        ``dtype=`` it is given."""
        if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) and arg.func.attr in ("long", "int") \
                and not arg.args:
            arg = arg.func.value  # ``attention_mask.long().cumsum(-1)``: the mask, counted in int64
        name = mask.param or (arg.id if isinstance(arg, ast.Name) else "")
        # (A mask made by a comparison, ``input_ids != pad_id``, reads as a number: it counts the same.)
        named = MASK_NAMES.match(name) or (isinstance(arg, ast.Name) and MASK_NAMES.match(arg.id))
        # ``torch.cumsum(torch.ones_like(inputs_embeds[..., 0]), -1)``: counting ones, a mask of no padding.
        named = named or (isinstance(arg, ast.Call) and (dotted(arg.func) or [""])[-1] in ("ones_like", "new_ones"))
        if mask.roles - {Role.SCALAR} or not named:
            return None
        if dtype is not None and dtype.has(Role.DTYPE):
            mask = mask.evolve(dtype=dtype.dtype)
        if mask.dtype in (Dt.INT, Dt.UNKNOWN):
            return Val(frozenset({Role.POSITIONS}), Dt.INT, site=node)
        return Val(frozenset({Role.POSITIONS}), mask.dtype, site=node if mask.dtype.can_be_16bit else None)

    def _state_read_template(self, template: str, node: ast.AST, frame: Frame) -> Val:
        if frame.cls is None:
            return UNKNOWN
        for cls in self._mro(frame.cls):
            for key, entry in cls.state.items():
                if key == template or re.fullmatch(re.escape(template).replace(r"\{\}", ".*"), key):
                    return self._state_read(key, node, frame)
        return UNKNOWN

    def _arange(self, node: ast.Call, numpy: bool, tail: str, pos: list, vals: list[Val], kvals: dict[str, Val]) -> Val:
        texts = [self.spans.text(a) for a in pos]
        step2 = len(texts) >= 3 and texts[2].strip() in ("2", "2.0", "2.")
        stop = texts[1] if len(texts) >= 2 else (texts[0] if texts else "")
        role = Role.ARANGE
        if not step2 and POSITION_ARGS.search(stop) and not EXPONENT_ARGS.search(stop) \
                and not _LOG_OF_BASE.search(stop):  # ``linspace(log(1, theta), log(end, theta), n)``: exponents
            role = Role.POSITIONS
        if numpy:
            return Val(frozenset({role}), Dt.FULL, site=None, vector=True)
        # ``linspace(0, 1 - 2 / dim, dim // 2)``: a ramp of fractions already, the exponent of ``base ** e``.
        fractions = tail == "linspace" and role is Role.ARANGE and ("/" in stop or (number(pos[1]) or 2) <= 1
                                                                   if len(pos) >= 2 else False)
        dt = kvals.get("dtype")
        if dt is not None and dt.has(Role.DTYPE):
            dtype = dt.dtype
            site = node if dtype.can_be_16bit else (node if dtype is Dt.INT else None)
            # A float32 ramp from 0 is an exponent too (``linspace(0, 1, n, dtype=torch.float32)``); one from -1
            # is pixel coordinates.
            float32 = any(k.arg == "dtype" and (dotted(k.value) or [""])[-1] in ("float32", "float")
                          for k in node.keywords)
            return Val(frozenset({role}), dtype, site=site, literal=None, dtype_param=dt.param, vector=True,
                       scaled=fractions and float32 and bool(pos) and number(pos[0]) == 0)
        if tail == "linspace" or any(isinstance(v.literal, float) for v in vals) or any(
                isinstance(number(a), float) for a in pos):
            return Val(frozenset({role}), Dt.RUNTIME, site=node, scaled=fractions, vector=True)
        return Val(frozenset({role}), Dt.INT, site=node, vector=True)

    def _method(self, node: ast.Call, method: str, receiver: Val, pos: list, kw: dict, frame: Frame,
                receiver_node: ast.AST | None = None) -> Val:
        vals = [self._eval(a, frame) for a in pos]
        kvals = {k: self._eval(v, frame) for k, v in kw.items()}
        receiver_node = receiver_node or node.func.value  # type: ignore[attr-defined]
        if method == "cumsum" and receiver.roles <= {Role.SCALAR}:
            counted = self._cumsum_positions(node, receiver_node, receiver, kvals.get("dtype"))
            if counted is not None:
                return counted
        if method in ("new_zeros", "new_ones", "new_empty", "new_full") and "dtype" not in kvals \
                and (receiver.has(Role.ACTIVATION) or _embeds_node(receiver_node)) and receiver.dtype is not Dt.INT:
            # ``inputs_embeds.new_ones(b, s)``: a default padding mask in the activations' dtype.
            return Val(frozenset(), Dt.RUNTIME, site=node)
        if method in ("new_zeros", "new_ones", "new_empty", "new_full") and "dtype" not in kvals \
                and (receiver.dtype is Dt.INT or (receiver.dtype is Dt.UNKNOWN and receiver.has(Role.POSITIONS)
                                                  and POSITION_NAMES.match(receiver.param or ""))
                     or (receiver.dtype is Dt.UNKNOWN and isinstance(receiver_node, ast.Name)
                         and INT_BY_NAME.match(receiver_node.id))):
            # ``pos.new_zeros(n, d)``: a buffer in the integer dtype of ``pos``; tables written into it truncate.
            return Val(frozenset(), Dt.INT, site=node)
        if method in ("new_zeros", "new_ones", "new_empty", "new_full") and "dtype" in kvals \
                and kvals["dtype"].has(Role.DTYPE) and kvals["dtype"].dtype is not Dt.UNKNOWN:
            # ``x.new_empty((), dtype=torch.float32)``: the dtype named, on the receiver's device.
            return Val(frozenset(), kvals["dtype"].dtype, site=node)
        if method == "new_tensor" and pos and isinstance(pos[0], ast.Call) and isinstance(pos[0].func, ast.Name) \
                and pos[0].func.id == "range":
            # ``like.new_tensor(range(n))``: positions in ``like``'s dtype unless ``dtype=`` says otherwise.
            given = kvals.get("dtype")
            dt = given.dtype if given is not None and given.has(Role.DTYPE) else (
                Dt.RUNTIME if receiver.dtype in (Dt.UNKNOWN, Dt.RUNTIME) else receiver.dtype)
            return Val(frozenset({Role.POSITIONS}), dt, site=node if dt.can_be_16bit else None, vector=True)
        if method == "type" and not pos and not kw:
            # ``position_ids.type()``: "torch.LongTensor", a name that carries the dtype (and the device).
            return _dtype_of(receiver)
        if method == "copy_" and vals and vals[0].has(Role.INV_FREQ) and not vals[0].has(Role.PHASE) \
                and isinstance(receiver_node, ast.Call) and isinstance(receiver_node.func, ast.Attribute) \
                and receiver_node.func.attr in ("new_empty", "new_zeros", "new_ones") \
                and not any(k.arg == "dtype" for k in receiver_node.keywords) \
                and isinstance(receiver_node.func.value, ast.Name) \
                and not any(read.follows_module_casts for read in vals[0].reads):
            # ``x.new_empty(n).copy_(torch.from_numpy(rates))``: the rates copied into the activations' dtype.
            owner = frame.env.get(receiver_node.func.value.id, UNKNOWN)
            if owner.has(Role.ACTIVATION) or _plain_tensor_param(owner):
                dt = Dt.RUNTIME if owner.dtype in (Dt.UNKNOWN, Dt.RUNTIME) else owner.dtype
                if dt.can_be_16bit:
                    self.model.casts.append(Cast(receiver_node, "new_tensor", vals[0], dtype_val(dt),
                                                 receiver_node.func.value, frame.scope))
                    return vals[0].evolve(dtype=dt, site=receiver_node, read=None, alt_reads=())
        if method == "copy_" and vals and (vals[0].roles & {Role.TABLE, Role.PHASE} or _bare_param_of(vals[0], frame)) \
                and isinstance(node.func, ast.Attribute):
            written = node.func.value.value if isinstance(node.func.value, ast.Subscript) else node.func.value
            if isinstance(written, ast.Name):
                self._write_into(written.id, vals[0], frame)
            held = self_attr(written)
            if held is not None and frame.cls is not None and vals[0].roles & {Role.TABLE, Role.PHASE}:
                self._filled_state(held, vals[0], node, frame)
                # What the buffer was registered as, not what a later (guarded) reassignment left in the state.
                allocated = next((r.value for r in self.model.registrations if r.ref.name == held
                                  and r.scope.symbol.split(".")[0] == frame.cls.name and _int_buffer(r.value)), receiver)
                if _int_buffer(allocated):
                    # ``register_buffer("freqs_cis", position_ids.new_empty(...))`` then ``self.freqs_cis.copy_(t)``
                    # (a guard widening only 16-bit buffers leaves an int64 one as it is).
                    self._container_cast(allocated.site, vals[0], frame)  # type: ignore[arg-type]
            return receiver
        if method == "new_tensor" and vals and vals[0].roles & {Role.TABLE, Role.PHASE} and "dtype" not in kvals \
                and receiver.dtype is Dt.INT:
            # ``position_ids.new_tensor(cos_tab)``: the table copied in the ids' integer dtype.
            self._container_cast(node, vals[0], frame)
            return vals[0].evolve(dtype=Dt.INT, site=node, read=None, alt_reads=())
        if method == "new_tensor" and vals and vals[0].has(Role.INV_FREQ) and not vals[0].has(Role.PHASE):
            # ``position_ids.new_tensor(self.inv_freq)``: frequencies copied in ``position_ids``' dtype.
            given = kvals.get("dtype")
            dt = given.dtype if given is not None and given.has(Role.DTYPE) else receiver.dtype
            if given is None and dt is Dt.UNKNOWN and receiver.has(Role.POSITIONS) \
                    and POSITION_NAMES.match(receiver.param or ""):
                dt = Dt.INT  # ``positions.new_tensor([...])`` with ``positions`` a parameter: int64 ids from callers
            if dt is Dt.INT:
                self.model.casts.append(Cast(node, "new_tensor", vals[0], dtype_val(Dt.INT).evolve(
                    param=receiver.param), receiver_node, frame.scope))
            elif given is None and (receiver.has(Role.ACTIVATION) or _plain_tensor_param(receiver)) \
                    and not any(read.follows_module_casts for read in vals[0].reads):
                # ``x.new_tensor(self._freqs)``: a list of rates made a tensor in the activations' dtype.
                dt = Dt.RUNTIME if dt in (Dt.UNKNOWN, Dt.RUNTIME) else dt
                if dt.can_be_16bit:
                    self.model.casts.append(Cast(node, "new_tensor", vals[0], dtype_val(dt), receiver_node,
                                                 frame.scope))
            return vals[0].evolve(dtype=dt, site=node if dt is not Dt.FULL else None, read=None, alt_reads=())
        if method in ("float", "double"):
            if _rounded_positions(receiver):
                return receiver
            if receiver.dtype.can_be_16bit and receiver.has(Role.PHASE) and is_cast_call(receiver.site) \
                    and not receiver.roles & {Role.INV_FREQ, Role.TABLE, Role.COMPLEX}:
                # A phase cast down and back (``freqs.to(x.dtype).float()``): the angle stays rounded.
                return receiver
            return receiver.evolve(dtype=Dt.FULL, site=None, earlier_sites=())
        if method in ("half", "bfloat16"):
            target = dtype_val(Dt.LOW)
            self._cast(node, method, receiver, target, None, frame)
            return receiver.evolve(dtype=Dt.LOW, site=node)
        if method in ("long", "int"):
            return receiver.evolve(dtype=Dt.INT, site=node)
        if method in ("to", "type"):
            target, target_node = None, None
            if "dtype" in kvals:
                target, target_node = kvals["dtype"], kw["dtype"]
            else:
                for v, n in zip(vals, pos):
                    if v.has(Role.DTYPE):
                        target, target_node = v, n
            if method == "to" and target is None and vals and not vals[0].has(Role.DEVICE) \
                    and (vals[0].has(Role.ACTIVATION) or ((vals[0].roles or vals[0].param) and vals[0].dtype is not Dt.UNKNOWN
                                                          and not vals[0].has(Role.SCALAR))):
                # ``.to(other_tensor)`` takes that tensor's dtype.
                target, target_node = dtype_val(vals[0].dtype, read=vals[0].read), pos[0]
            elif method == "to" and target is None and vals and not vals[0].roles and vals[0].dtype is Dt.UNKNOWN \
                    and EMBEDS_PARAMS.match(vals[0].param or "") and receiver.roles & {Role.POSITIONS, Role.ARANGE}:
                # ``torch.arange(a, b).to(inputs_embeds)``: a device move that takes the embeddings' dtype too.
                target, target_node = dtype_val(Dt.RUNTIME), pos[0]
            elif method == "to" and target is None and vals and isinstance(pos[0], ast.Attribute) \
                    and any(read.follows_module_casts for read in vals[0].reads) and not vals[0].has(Role.DEVICE):
                # ``torch.arange(n).to(self.decay)``: the dtype of any float state, which a module cast sets.
                target, target_node = dtype_val(Dt.RUNTIME, read=vals[0].read), pos[0]
            if method == "to" and target is None and vals and vals[0].has(Role.POSITIONS) \
                    and self._indexed_by(node, pos[0]):
                # ``cache.to(positions)[positions]``: what indexes a tensor is integer, and ``.to`` takes its dtype.
                target, target_node = dtype_val(Dt.INT).evolve(param=vals[0].param), pos[0]
            elif method == "to" and target is None and vals and vals[0].has(Role.POSITIONS) \
                    and vals[0].dtype is Dt.UNKNOWN and isinstance(pos[0], ast.Name) and (
                        vals[0].param is not None or (pos[0].id in frame.scope.params
                                                      and POSITION_NAMES.match(pos[0].id) is not None)):
                # ``freqs.cos().to(positions)``: the dtype of a positions parameter (RPL001 decides what that means),
                # also after ``positions = (positions + offsets).flatten()``.
                target, target_node = dtype_val(Dt.RUNTIME).evolve(param=vals[0].param or pos[0].id), pos[0]
            elif method == "to" and target is None and vals and not vals[0].roles and vals[0].param is not None \
                    and _bare_param(receiver) and isinstance(pos[0], ast.Name) \
                    and pos[0].id in frame.scope.params:
                # ``def _like(t, ref): return t.to(ref)``: what it means depends on what callers pass.
                target, target_node = dtype_val(Dt.RUNTIME).evolve(param=vals[0].param), pos[0]
            elif method == "to" and target is None and vals and not vals[0].roles and vals[0].param is not None \
                    and vals[0].dtype is Dt.UNKNOWN and isinstance(pos[0], ast.Name) \
                    and (receiver.roles & {Role.TABLE, Role.PHASE} or (
                        receiver.has(Role.INV_FREQ) and read_as_tensor(frame.scope.node, pos[0].id))) \
                    and pos[0].id == vals[0].param and pos[0].id in frame.scope.params:
                # ``fn(emb).to(ref)``: the tables take the dtype of whatever tensor callers pass as ``ref``; so do
                # frequencies (``self.freqs = self.freqs.to(h)``, llama's move next to the hidden states).
                target, target_node = dtype_val(Dt.RUNTIME).evolve(param=vals[0].param), pos[0]
            if target is None or not target.has(Role.DTYPE):
                return receiver
            self._cast(node, method, receiver, target, target_node, frame)
            return self._cast_result(node, receiver, target)
        if method == "type_as" and vals:
            # ``t.type_as(ref)`` is ``t.to(ref.dtype)`` (and ref's device).
            target = _dtype_of(vals[0])
            self._cast(node, method, receiver, target, pos[0], frame)
            return self._cast_result(node, receiver, target)
        if method == "astype" and vals and vals[0].has(Role.DTYPE):
            # ``np.arange(0, dim, 2).astype(np.float64)``: numpy's cast (no autocast, no module casts reach it).
            return receiver.evolve(dtype=vals[0].dtype, site=node if vals[0].dtype.can_be_16bit else None)
        if method in ("cos", "sin"):
            return self._trig(node, receiver, frame, False)
        if method in ("outer", "ger") and vals:
            return self._product_or_arith(node, "outer", receiver, vals[0], frame, [receiver_node, pos[0]]) or UNKNOWN
        if method in ("mul", "multiply") and vals:
            res = self._product_or_arith(node, "elementwise", receiver, vals[0], frame, [receiver_node, pos[0]])
            return res or self._arith(receiver, vals[0], ast.Mult(), node, frame)
        if method == "mm" and vals:
            receiver, vals = self._matrix_operand(receiver, receiver_node), [self._matrix_operand(vals[0], pos[0])]
        if method == "bmm" and vals:
            receiver, other = _batched_operands(receiver, vals[0])
            vals = [other]
        if method in ("matmul", "mm", "bmm") and vals:
            res = self._product_or_arith(node, "matmul", receiver, vals[0], frame, [receiver_node, pos[0]])
            return res or UNKNOWN
        if method in ("exp",):
            return self._exp(node, receiver, frame, receiver_node)
        if method == "pow" and vals:
            return self._arith(receiver, vals[0], ast.Pow(), node, frame)
        if method in ("reciprocal",):
            return receiver
        if method in ("div", "true_divide", "divide") and vals:
            return self._binary_vals(node, receiver, vals[0], ast.Div(), frame)
        if method in ("unsqueeze",) and pos:
            text = self.spans.text(pos[0]).strip()
            if receiver.vector:  # [n] -> [1, n] or [n, 1]
                return receiver.evolve(last_is_one=text in ("1", "-1"), second_last_is_one=text in ("0", "-2"),
                                       literal=None, vector=False)
            return receiver.evolve(last_is_one=text == "-1", second_last_is_one=text == "-2", literal=None,
                                   vector=False)
        if method in ("expand", "view", "reshape", "repeat") and pos:
            texts = [self.spans.text(a).strip() for a in pos]
            return receiver.evolve(last_is_one=texts[-1] == "1",
                                   second_last_is_one=len(texts) >= 2 and texts[-2] == "1", literal=None,
                                   vector=False)
        if method in SHAPE_METHODS:
            keep = method in ("contiguous", "clone", "detach", "cpu", "cuda", "requires_grad_")
            if keep:
                return receiver
            return receiver.evolve(last_is_one=False, second_last_is_one=False, vector=False, literal=None)
        if method in ("clamp", "clip", "clamp_min", "clamp_max"):
            if _unit_bounds(pos[:2], kw):
                return Val(frozenset(), receiver.dtype)  # a ramp in [0, 1] (YaRN's mask), as ``torch.clamp``
            return receiver.evolve(literal=None)  # ``hops.clamp(max=self.max_hops)``: the same counts, bounded
        if method in ("max", "min", "amax", "amin") and not pos:
            return Val(frozenset(), receiver.dtype)  # a reduction keeps the dtype; what it means is gone
        if method in ("numel", "dim", "size") or (method == "item" and receiver.dtype is Dt.INT):
            return Val(frozenset({Role.SCALAR}), literal=0)
        if method == "item" and receiver.dtype in (Dt.FULL, Dt.LOW, Dt.RUNTIME):
            return Val(frozenset({Role.SCALAR}), literal=0.0)  # a Python float: added to an int arange, a float
        if method == "tolist" and receiver.roles == {Role.INV_FREQ}:
            # ``(1.0 / np.power(base, np.arange(0, d, 2) / d)).tolist()``: the rates as Python floats, whatever tensor
            # they become decides their dtype.
            return receiver.evolve(dtype=Dt.UNKNOWN, site=None, earlier_sites=(), read=None, alt_reads=())
        if method in ("item", "tolist"):
            return Val(frozenset({Role.SCALAR}))
        if receiver is UNKNOWN and self._named(method).has(Role.INV_FREQ):
            # ``rope.inv_freq(device)`` on a module the analysis cannot see into: what the method's name says.
            return Val(frozenset({Role.INV_FREQ}))
        if receiver is UNKNOWN and _PHASE_METHOD.fullmatch(method):
            # ``self.target.rotary.phase_table(device)``: the angles, from a module the analysis cannot see into.
            return Val(frozenset({Role.PHASE}))
        return UNKNOWN

    def _specialize(self, node: ast.Call, summary: Summary, bound: dict[str, Val], frame: Frame) -> Summary:
        """A same-file function whose parameters say nothing (``def _cs(p, f)``), called with positions and
        frequencies, or a method of this class whose unnamed parameter gets positions (``def _phase_at(self, p):
        return p.to(self.inv_freq.dtype) * self.inv_freq``): analysed once more for this call, with what it is
        handed."""
        func = node.func
        if not summary.inert or id(node) in self._specialized:
            return summary
        roles = frozenset().union(*(v.roles for v in bound.values())) if bound else frozenset()
        masks = {p for p, v in bound.items() if MASK_NAMES.match(p) and v.dtype.can_be_16bit and v.site is not None
                 and not v.roles - {Role.SCALAR}}
        if masks and summary.returns.has(Role.POSITIONS) \
                and isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                and func.value.id in ("self", "cls") and frame.cls is not None \
                and (found := self._find_method(frame.cls, func.attr)) is not None:
            # ``self.position_ids_from_mask(attention_mask)`` with a mask the caller made in the activations' dtype
            # (``inputs_embeds.new_ones(b, s)``): the ids it counts are in that dtype, not int64.
            owner, fn = found
            return self._analysed_for_call(node, summary, f"{owner.name}.{func.attr}", fn, frame.cls, True,
                                           owner.node, {p: bound[p] for p in masks})
        if not roles & {Role.POSITIONS, Role.ARANGE}:
            return summary
        if isinstance(func, ast.Name) and func.id in self.model.functions and func.id not in self.in_progress:
            if Role.INV_FREQ not in roles:
                return summary
            key, fn, cls, is_method, top = func.id, self.model.functions[func.id], None, False, None
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self" \
                and frame.cls is not None and (found := self._find_method(frame.cls, func.attr)) is not None \
                and any(v.roles & {Role.POSITIONS, Role.ARANGE} and not self._param_val(p).roles
                        for p, v in bound.items()) \
                and not {name for name, _ in (*summary.tensor_casts, *summary.int_casts)} & set(bound) \
                and not {name for name, _, _ in summary.param_casts} & set(bound):
            # (A parameter whose dtype the method casts tables to is judged at this call instead:
            # ``self._maybe_rebuild(position_ids)`` into ``_set_cache(n, dtype=ref.dtype)`` -> hand it ``x``.)
            owner, fn = found
            key, cls, is_method, top = f"{owner.name}.{func.attr}", frame.cls, True, owner.node
        else:
            return summary
        return self._analysed_for_call(node, summary, key, fn, cls, is_method, top or fn, bound)

    def _analysed_for_call(self, node: ast.Call, summary: Summary, key: str, fn: FunctionNode, cls: ClassInfo | None,
                           is_method: bool, top: ast.AST, bound: dict[str, Val]) -> Summary:
        """``fn`` analysed once more for the call ``node``, with what it hands it (``summary`` while in progress)."""
        if key in self.in_progress:
            return summary
        self.in_progress.add(key)
        try:
            special = self._analyse_function(fn, key, cls, is_method=is_method, top=top, bound=bound)
        finally:
            self.in_progress.discard(key)
        self._specialized[id(node)] = special
        return special

    def _vararg_of(self, node: ast.Call, frame: Frame) -> str | None:
        """The ``*args`` name of the same-file function ``node`` calls, if it has one."""
        func = node.func
        fn = None
        if isinstance(func, ast.Name):
            fn = self.model.functions.get(func.id)
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self" \
                and frame.cls is not None:
            found = self._find_method(frame.cls, func.attr)
            fn = found[1] if found is not None else None
        vararg = getattr(getattr(fn, "args", None), "vararg", None)
        return vararg.arg if vararg is not None else None

    def _matrix_operand(self, val: Val, node: ast.AST | None) -> Val:
        """An operand of ``mm``, which takes exactly two axes: ``t.unsqueeze(1)`` is then [n, 1] and
        ``f.unsqueeze(0)`` is [1, m] whatever is known about ``t`` and ``f``."""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "unsqueeze" \
                and len(node.args) == 1:
            axis = self.spans.text(node.args[0]).strip()
            if axis in ("1", "-1"):
                return val.evolve(last_is_one=True, second_last_is_one=False)
            if axis in ("0", "-2"):
                return val.evolve(last_is_one=False, second_last_is_one=True)
        return val

    @staticmethod
    def _kept_params(fn: FunctionNode, params: list[str] | tuple[str, ...]) -> set[str]:
        """Parameters a caller may pin to float32: defaulted to float32 or ``None``, or required."""
        defaulted = {name for name, _ in _defaults(fn)}
        return {*float32_defaulted(fn), *_none_defaulted(fn), *(q for q in params if q not in defaulted)}

    def _param_kept_full(self, fn: FunctionNode, param: str, is_method: bool, depth: int = 0) -> bool:
        """Every call of ``fn`` the file makes leaves ``param`` float32: its float32 default, or a float32 dtype
        passed (always passed, where the default is ``None``: what ``None`` means is up to the function)."""
        if param in float32_defaulted(fn):
            return self._callers_keep_default(fn, param, is_method, depth=depth)
        return self._callers_keep_default(fn, param, is_method, explicit=True, depth=depth)

    def _callers_keep_default(self, fn: FunctionNode, param: str, is_method: bool, *, explicit: bool = False,
                              depth: int = 0) -> bool:
        """``fn`` is private (or a public builder named for inverse frequencies), the file calls it, and no
        call passes ``param`` (or each passes a float32 dtype); with ``explicit``, every call passes one. A call
        through a dict of functions (``self.rope_init_fn = ROPE_INIT_FUNCTIONS[kind]``) counts, and so does a
        call handing on a parameter of its own function that that function's callers keep float32."""
        name = fn.name
        public = not name.startswith("_") or name.startswith("__")
        if public and not re.search(r"inv_freq|freq|rope|rotary|_cis|sincos|cos_sin|_t_|grid|coord|pos", name):
            # Callers elsewhere may pass any dtype. A public builder of inverse frequencies or rotary tables
            # (``yarn_inv_freq(..., dtype=torch.float32)``, ``precompute_freqs_cis(..., dtype=torch.float32)``)
            # returns them in that dtype by contract.
            return False
        calls = [*self._calls_named().get(name, []), *self.registry_calls().get(name, [])]
        for call in calls:
            given = call_argument(fn, param, is_method, call)
            if given is False:
                return False
            if given is None:
                if explicit:
                    return False
                continue
            caller = self._caller_of(call) if isinstance(given, (ast.Name, ast.IfExp)) else None
            if not _full_dtype_expr(caller, given) and not self._float32_property(given) \
                    and not (depth < 3 and self._handed_on(caller, given, depth)):
                return False
        return bool(calls)

    def _handed_on(self, caller: FunctionNode | None, given: ast.expr, depth: int) -> bool:
        """``given`` is a parameter of ``caller``, never reassigned there, that ``caller``'s own callers keep
        float32 (``_linear(config, device, dtype=None)`` handing ``dtype=dtype`` to ``_default(...)``)."""
        if caller is None or not isinstance(given, ast.Name) or _assigned_values(caller, given.id):
            return False
        is_method = bool(caller.args.args) and caller.args.args[0].arg in ("self", "cls")
        params = call_params(caller, is_method)
        if given.id not in params or given.id not in self._kept_params(caller, params):
            return False
        return self._param_kept_full(caller, given.id, is_method, depth + 1)

    def _calls_named(self) -> dict[str, list[ast.Call]]:
        """Calls by the name called: ``f(...)`` under ``f``, ``obj.f(...)`` under ``f`` (one walk, when first asked)."""
        if self._calls_by_name is None:
            self._calls_by_name = {}
            for node in ast.walk(self.module):
                if isinstance(node, ast.Call):
                    name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
                    if name is not None:
                        self._calls_by_name.setdefault(name, []).append(node)
        return self._calls_by_name

    def registry_calls(self) -> dict[str, list[ast.Call]]:
        """Calls of same-file functions through a module-level dict naming them: ``REG[kind](...)``, or
        ``self.rope_init_fn(...)``/``fn(...)`` after ``self.rope_init_fn = REG[kind]`` (or ``REG.get(kind)``)."""
        if self._registry_table is None:
            self._registry_table = {}
            registries = {reg: {v.id for v in values.values() if isinstance(v, ast.Name)}
                          for reg, values in self._dict_constants.items()}
            registries = {reg: names for reg, names in registries.items() if names}
            for attr, names in self._class_registries.items():
                registries.setdefault(attr, set()).update(names)
            # ``self.inv_freq_fn = functools.partial(_default_inv_freq, dim, base)``: a one-function registry, so its
            # calls (``self.inv_freq_fn(device=d, dtype=x.dtype)``) are calls of that function.
            for name in self._partial_functions():
                registries[f"partial:{name}"] = {name}
            # ``def get_rope_fn(name): return _ROPE_FNS[name]``: a call of it picks from that dict.
            getters = {name: regs.pop() for name, fn in self.model.functions.items()
                       if len(regs := {_picked_from(r.value) for r in ast.walk(fn) if isinstance(r, ast.Return)
                                       and r.value is not None}) == 1 and next(iter(regs)) in registries}
            picked: dict[str, set[tuple[str, ast.Call | None]]] = {}  # name the pick is stored under -> registries
            direct: list[tuple[str, ast.Call]] = []
            for node in ast.walk(self.module) if registries else ():
                if isinstance(node, ast.expr) and (reg := _picked_from(node)) in registries:
                    self.model.registry_picks[reg] = self.model.registry_picks.get(reg, 0) + 1  # type: ignore[index]
                if isinstance(node, ast.Assign) and (pick := self._pick(node.value, getters)) and pick[0] in registries:
                    for target in node.targets:
                        key = target.id if isinstance(target, ast.Name) else \
                            target.attr if self_attr(target) else None  # type: ignore[union-attr]
                        if key is not None:
                            picked.setdefault(key, set()).add(pick)
                elif isinstance(node, ast.Call) and (reg := _picked_from(node.func)) in registries:
                    direct.append((reg, node))  # type: ignore[arg-type]
            for key, picks in picked.items():
                for call in self._calls_named().get(key, []):
                    for reg, bound in picks:
                        # Through ``partial(pick, dim, base, **kw)``: the call gets the partial's arguments first.
                        made = call if bound is None else ast.copy_location(ast.Call(
                            func=call.func, args=[*bound.args[1:], *call.args],
                            keywords=[*bound.keywords, *call.keywords]), call)
                        if made is not call:
                            made.written = call  # type: ignore[attr-defined]  # the call in the file, for its fix
                        for fn_name in registries[reg]:
                            self._registry_table.setdefault(fn_name, []).append(made)
            for reg, call in direct:
                for fn_name in registries[reg]:
                    self._registry_table.setdefault(fn_name, []).append(call)
        return self._registry_table

    def _has_registries(self) -> bool:
        """The file names its functions in a dict (module-level or a class's) or binds one with ``partial``."""
        return bool(self._class_registries or self._partial_functions()
                    or any(isinstance(v, ast.Name) for values in self._dict_constants.values() for v in values.values()))

    def _registry_pick(self, node: ast.Call, frame: Frame) -> Summary | None:
        """``self.rope_init_fn(config, device)`` after ``self.rope_init_fn = ROPE_INIT_FUNCTIONS[kind]``, a dict of
        this file's functions: what the first of them (by position in the file) that returns a rotary value returns.
        (Not through ``functools.partial``: the call's arguments would not be the function's.)"""
        func = node.func
        if not ((isinstance(func, ast.Attribute) and self_attr(func) and frame.cls is not None
                 and not self._find_method(frame.cls, func.attr))
                or (isinstance(func, ast.Name) and func.id not in self.model.functions)):
            return None
        if self._registry_callees is None:  # once per file, and a walk only where it has a dict of functions
            self._registry_callees = {}
            for name, calls in (self.registry_calls() if self._has_registries() else {}).items():
                for call in calls:
                    self._registry_callees.setdefault(id(call), []).append(name)
        names = sorted(self._registry_callees.get(id(node), ()),
                       key=lambda n: self.model.functions[n].lineno if n in self.model.functions else 0)
        summaries = [self._function_summary(n) for n in names if n in self.model.functions and n not in self.in_progress]
        return next((s for s in summaries if s.returns.roles or (s.items and any(v.roles for v in s.items))), None)

    def _partial_functions(self) -> set[str]:
        """Same-file functions some ``functools.partial(<name>, ...)`` binds (found in the text first: most files
        that say ``partial`` bind a library function or none)."""
        if self._partials_found is None:
            named = {m for m in re.findall(r"partial\(\s*(\w+)\s*[,)]", self.spans.code) if m in self.model.functions}
            # (No walk of the module without such a name: the filter inside a comprehension would still walk it.)
            self._partials_found = {node.args[0].id for node in (ast.walk(self.module) if named else ()) if isinstance(
                node, ast.Call) and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id in named
                and (qualname(node.func, self.imports) or "") == "functools.partial"}
        return self._partials_found

    def _pick(self, node: ast.expr, getters: dict[str, str]) -> tuple[str, ast.Call | None] | None:
        """(registry, the ``functools.partial`` call binding arguments to the pick, if any) for ``REG[kind]``,
        ``get_rope_fn(kind)`` (a getter returning ``REG[name]``) and ``partial(<either>, ...)``."""
        bound = None
        if isinstance(node, ast.Call) and node.args and (qualname(node.func, self.imports) or "") == "functools.partial":
            bound, node = node, node.args[0]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in getters:
            return getters[node.func.id], bound
        if bound is not None and isinstance(node, ast.Name) and node.id in self.model.functions:
            return f"partial:{node.id}", bound
        reg = _picked_from(node)
        return (reg, bound) if reg is not None else None

    def _caller_of(self, call: ast.Call) -> FunctionNode | None:
        """The innermost function holding ``call`` (one pass over the module, when first asked)."""
        if self._callers is None:
            self._callers = {}
            todo: list[tuple[ast.AST, FunctionNode | None]] = [(self.module, None)]
            while todo:
                node, owner = todo.pop()
                if isinstance(node, ast.Call) and owner is not None:
                    self._callers[id(node)] = owner
                inner = node if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else owner
                todo.extend((child, inner) for child in ast.iter_child_nodes(node))
        return self._callers.get(id(call))

    def _float32_property(self, node: ast.expr) -> bool:
        """``self.dtype`` where every class of the file that defines ``dtype`` makes it a property returning
        ``torch.float32`` (timm's rotary classes pin their tables' dtype this way)."""
        if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"):
            return False
        found = [info.methods[node.attr] for info in self.model.classes.values() if node.attr in info.methods]
        return bool(found) and all(
            any((dotted(d) or [])[-1:] == ["property"] for d in fn.decorator_list) and len(fn.body) >= 1
            and isinstance(fn.body[-1], ast.Return) and isinstance(fn.body[-1].value, ast.Attribute)
            and fn.body[-1].value.attr in ("float32", "float")
            and all(isinstance(st, (ast.Expr, ast.Return)) for st in fn.body)  # a docstring at most
            for fn in found)

    def _indexed_by(self, call: ast.Call, arg: ast.expr) -> bool:
        """``call`` is subscripted with ``arg`` itself (the same name) in the statement being evaluated."""
        if self._current is None or not isinstance(arg, ast.Name):
            return False
        return any(isinstance(n, ast.Subscript) and n.value is call and isinstance(n.slice, ast.Name)
                   and n.slice.id == arg.id for n in ast.walk(self._current))

    @staticmethod
    def _cast_result(node: ast.Call, receiver: Val, target: Val) -> Val:
        dt = target.dtype
        if dt is Dt.UNKNOWN:
            return receiver.evolve(dtype=Dt.UNKNOWN, site=None, earlier_sites=())
        if dt is Dt.FULL and _rounded_positions(receiver):
            return receiver
        if dt is Dt.FULL:
            return receiver.evolve(dtype=dt, site=None, earlier_sites=())
        earlier = receiver.sites if receiver.dtype.can_be_16bit and dt.can_be_16bit else ()
        # ``return phase.to(dtype)`` with ``dtype`` a parameter: a caller passing ``dtype=torch.float32`` gets float32.
        chosen_by = target.param if target.param is not None and (target.param == "dtype" or target.param.endswith(
            "_dtype")) and target.has(Role.DTYPE) else receiver.dtype_param
        return receiver.evolve(dtype=dt, site=node, earlier_sites=earlier, dtype_param=chosen_by)

    def _cast(self, node: ast.Call, method: str, receiver: Val, target: Val,
              target_node: ast.expr | None, frame: Frame) -> None:
        if receiver.roles & {Role.PHASE, Role.TABLE, Role.POSITIONS, Role.ARANGE, Role.INV_FREQ, Role.COMPLEX} \
                or receiver.param is not None:
            cast = Cast(node, method, receiver, target, target_node, frame.scope)
            self.model.casts.append(cast)
            if receiver.param is not None and target.dtype is Dt.INT and not receiver.roles:
                frame.int_casts.append((receiver.param, cast))
            # ``def _like(x, ref): return x.to(device=ref.device, dtype=ref.dtype)``: ``x`` names an activation, but
            # whatever a caller hands over takes ``ref``'s dtype.
            bare = _bare_param(receiver) or (receiver.roles <= {Role.ACTIVATION} and receiver.param is not None
                                             and receiver.param in frame.scope.params)
            if bare and target.param is not None \
                    and target.param != receiver.param and target.param in frame.scope.params:
                frame.param_casts.append((receiver.param, target.param, cast))
            if receiver.roles & {Role.TABLE, Role.PHASE} and target.dtype is not Dt.INT \
                    and method in ("type_as", "to") and isinstance(target_node, ast.Name) \
                    and target_node.id in frame.scope.params and target.param == target_node.id:
                # ``a.cos().type_as(p)``: the tables take the dtype of whatever tensor the caller passes as ``p``.
                frame.tensor_casts.append((target_node.id, cast))
            elif receiver.roles & {Role.TABLE, Role.PHASE} and target.dtype is not Dt.INT \
                    and isinstance(target_node, ast.Attribute) and target_node.attr == "dtype" \
                    and isinstance(target_node.value, ast.Name) and target_node.value.id in frame.scope.params \
                    and target.param == target_node.value.id:
                # ``emb.cos().to(x.dtype)``: right for activations, wrong for a caller that passes token ids as ``x``.
                frame.tensor_casts.append((target_node.value.id, cast))
            if receiver.roles & {Role.TABLE, Role.PHASE} and target.dtype is not Dt.INT:
                found = dtype_fallback(frame.scope, target_node)
                if found is not None:
                    name, fallback = found
                    tensor = fallback.value.id if fallback is not None else None  # type: ignore[attr-defined]
                    frame.dtype_casts.append((name, dataclasses.replace(
                        cast, target=target.evolve(param=name, fallback_param=tensor))))

    def _trig(self, node: ast.Call, arg: Val, frame: Frame, numpy: bool) -> Val:
        if arg.has(Role.PHASE) and not numpy:
            guard = frame.guards[-1] if frame.guards else None
            self.model.trigs.append(Trig(node, arg, frame.scope, guard))
            if guard is not None and guard not in self.model.guards:
                self.model.guards.append(guard)
        if arg.param is not None:
            frame.trig_params.add(arg.param)
        roles = frozenset({Role.TABLE}) if arg.has(Role.PHASE) or arg.has(Role.INV_FREQ) else arg.roles
        return arg.evolve(roles=roles, param=None, product=None)

    # ------------------------------------------------------------- arithmetic
    def _binary_vals(self, node: ast.AST, left: Val, right: Val, op: ast.operator, frame: Frame) -> Val:
        operands = [node.left, node.right] if isinstance(node, ast.BinOp) else []
        if isinstance(op, ast.MatMult):
            return self._product_or_arith(node, "matmul", left, right, frame, operands) or UNKNOWN
        if isinstance(op, ast.Mult):
            res = self._product_or_arith(node, "elementwise", left, right, frame, operands)
            if res is not None:
                return res
        if isinstance(op, ast.Div) and _is_positions(left) and right.has(Role.INV_FREQ) and not right.has(Role.PHASE):
            res = self._product_or_arith(node, "elementwise", left, right, frame, operands)
            if res is not None:
                return res
        if isinstance(op, ast.Pow):
            return self._power(node, left, right, frame)
        return self._arith(left, right, op, node, frame)

    def _power(self, node: ast.AST, base: Val, exponent: Val, frame: Frame) -> Val:
        # ``theta ** torch.linspace(math.log(lo, theta), math.log(hi, theta), n)``: log-spaced frequencies (LTX-Video).
        log_spaced = exponent.has(Role.ARANGE) and isinstance(node, ast.BinOp) \
            and _LOG_OF_BASE.search(self.spans.text(node.right)) is not None
        # ``base ** (-torch.arange(n) / n)``: a range divided in an exponent is a frequency ramp, whatever its
        # stop made the range look like (``arange(n)`` reads as positions).
        ramp = exponent.has(Role.POSITIONS) and isinstance(node, ast.BinOp) and not base.roles - {Role.SCALAR} \
            and (_ramp_ratio(node.right) or self._named_ramp(node.right, frame))
        if exponent.has(Role.POSITIONS) and any(read.follows_module_casts for read in base.reads) \
                and not base.roles & {Role.PHASE, Role.TABLE} and not self._metadata_read:
            # ``self.scale ** power`` with ``power = (t - n // 2) / scale_base`` (xPos).
            self.model.scale_powers.append(ScalePower(node, base, frame.scope))
        if (exponent.has(Role.ARANGE) and (exponent.scaled or log_spaced) or ramp) and not base.has(Role.ARANGE):
            dt, site = exponent.dtype, exponent.site
            if dt is Dt.INT:
                dt = Dt.RUNTIME
            # The base of inverse frequencies is a number by convention (``theta``, ``config.rope_theta``).
            # ``base = torch.tensor(theta, dtype=dtype)``: a base tensor built in a 16-bit-able dtype rounds theta
            # (10000 is 9984 in bfloat16) before the power, whatever the exponent's dtype.
            rounded_base = base.site is not None and base.dtype.can_be_16bit and not base.roles - {Role.SCALAR} \
                and not base.reads
            if rounded_base and not dt.can_be_16bit:
                dt, site = base.dtype, base.site
            # ``thetas[:, None] ** exps`` with ``thetas`` a buffer (per-head bases), or handed in as a parameter
            # a caller fills from one: module casts round the base (10000 is 9984 in bfloat16).
            state_base = base.read if base.read is not None and base.read.follows_module_casts else None
            val = Val(frozenset({Role.INV_FREQ}), dt, site=site if dt.can_be_16bit else None,
                      read=exponent.read or state_base,
                      vector=exponent.vector and (base is UNKNOWN or base.has(Role.SCALAR)),
                      dtype_param=exponent.dtype_param,
                      earlier_sites=(base.site,) if rounded_base and base.site is not site else ())
            self.model.inv_freqs.append(InvFreqBuilt(node, val, frame.scope))
            if base.param is not None and base.param in frame.scope.params and not exponent.read:
                # ``thetas[:, None] ** exps``: a caller handing module state as ``thetas`` hands the frequencies'
                # source, which module casts round.
                frame.freq_params.add(base.param)
            return val
        return self._arith(base, exponent, ast.Pow(), node, frame)

    @staticmethod
    def _named_ramp(node: ast.expr, frame: Frame) -> bool:
        """``pos = torch.arange(0, dim, 2) / dim`` (one assignment) then ``base ** pos``: a ramp under a name."""
        if not isinstance(node, ast.Name) or frame.scope.node is None:
            return False
        values = _assigned_values(frame.scope.node, node.id)
        return len(values) == 1 and _ramp_ratio(values[0])

    def _exp(self, node: ast.AST, arg: Val, frame: Frame, arg_node: ast.AST | None = None) -> Val:
        # ``exp(-log(base) * arange / half)``: without the log it is a decay or a slope, not a frequency.
        has_log = arg_node is not None and _LOG_OF_BASE.search(self.spans.text(arg_node)) is not None
        if not has_log and isinstance(arg_node, ast.Name) and arg.has(Role.ARANGE) and frame.scope.node is not None:
            # ``exponent = arange(half) * (-math.log(theta) / half)``, then ``exponent.exp()``.
            has_log = any(_LOG_OF_BASE.search(self.spans.text(v))
                          for v in _assigned_values(frame.scope.node, arg_node.id))
        # ``np.exp(np.arange(num_timescales) * -log_timescale_increment)`` (Lingvo's timing signal): an arange the
        # name calls no channel count, under the log of a base, is the frequency ramp all the same.
        ramp = (arg.has(Role.ARANGE) and arg.scaled) or (arg.has(Role.POSITIONS) and isinstance(arg_node, ast.BinOp)
                                                         and "arange(" in self.spans.text(arg_node))
        if ramp and has_log and "timestep" not in frame.scope.symbol.lower():
            # (A diffusion timestep embedding's frequencies, as its phase (see _product_or_arith), rotate nothing.)
            dt = Dt.RUNTIME if arg.dtype is Dt.INT else arg.dtype
            val = Val(frozenset({Role.INV_FREQ}), dt, site=arg.site if dt.can_be_16bit else None, vector=arg.vector,
                      dtype_param=arg.dtype_param)
            self.model.inv_freqs.append(InvFreqBuilt(node, val, frame.scope))
            return val
        if arg.has(Role.PHASE) and arg_node is not None and "1j" in self.spans.text(arg_node):
            # ``torch.exp(1j * phase)``: the rotation itself, as ``torch.polar(ones, phase)`` builds it.
            self._trig(node, arg, frame, False)
            return Val(frozenset({Role.COMPLEX}), Dt.FULL)
        return arg.evolve(literal=None)

    def _arith(self, left: Val, right: Val, op: ast.operator, node: ast.AST, frame: Frame) -> Val:
        if left is UNKNOWN and right is UNKNOWN:
            return UNKNOWN
        if left.has(Role.SCALAR) and right.has(Role.SCALAR):
            return Val(frozenset({Role.SCALAR}))
        if isinstance(op, (ast.Mult, ast.Add, ast.Sub)) and any(v.has(Role.ACTIVATION) for v in (left, right)) \
                and any(v.roles & {Role.INV_FREQ, Role.TABLE} for v in (left, right)):
            # ``x0 * cos - x1 * sin``: the activation rotated, not a table (casting it back is the boundary).
            return Val(frozenset({Role.ACTIVATION}), Dt.RUNTIME)
        roles = (left.roles | right.roles) - {Role.SCALAR, Role.DTYPE, Role.DEVICE, Role.ACTIVATION}
        if Role.PHASE in roles:
            roles = frozenset({Role.PHASE})
        elif Role.INV_FREQ in roles:
            roles = frozenset({Role.INV_FREQ})
        elif Role.TABLE in roles:
            roles = frozenset({Role.TABLE})
        dtype, site = _promote(left, right)
        counted = left if left.has(Role.POSITIONS) and left.dtype is Dt.INT and _counted(left.site) else \
            right if right.has(Role.POSITIONS) and right.dtype is Dt.INT and _counted(right.site) else None
        if counted is not None and isinstance(op, ast.Mult) and dtype.can_be_16bit:
            # ``(attention_mask.long().cumsum(-1) - 1) * attention_mask`` with a mask in the activations' dtype:
            # int64 ids promoted to it by the product; the count is where the ids are made (and fixed).
            site = counted.site
        true_div = isinstance(op, ast.Div)
        # An unknown number added to integer positions is an offset (``+ past_seen_tokens``, ``+ start_pos``):
        # an int in practice. Scaling by one is usually a float factor (``* self.scale``).
        shifted = isinstance(op, (ast.Add, ast.Sub))
        float_scalar = any(isinstance(v.literal, float) or (v.has(Role.SCALAR) and v.literal is None and not shifted)
                           for v in (left, right) if v.has(Role.SCALAR))
        if dtype is Dt.INT and (true_div or float_scalar or isinstance(op, ast.Pow)):
            # An integer tensor divided, or scaled by a Python float, takes the default dtype.
            dtype = Dt.RUNTIME
        scaled = left.scaled or right.scaled
        arange = left if left.has(Role.ARANGE) else right if right.has(Role.ARANGE) else None
        other = right if arange is left else left
        if arange is not None and isinstance(op, (ast.Div, ast.Mult, ast.FloorDiv)) \
                and not other.has(Role.ARANGE):
            scaled = True
        tensor_reads = tuple(dict.fromkeys(v_read for v in (left, right) if not v.has(Role.SCALAR) for v_read in v.reads))
        earlier = tuple(s for v in (left, right) for s in v.earlier_sites) if dtype.can_be_16bit else ()
        return Val(frozenset(roles), dtype, site=site if dtype is not Dt.FULL else None,
                   read=tensor_reads[0] if tensor_reads else None, alt_reads=tensor_reads[1:],
                   earlier_sites=earlier, scaled=scaled,
                   last_is_one=left.last_is_one or right.last_is_one,
                   second_last_is_one=left.second_last_is_one or right.second_last_is_one,
                   vector=(left.vector or right.vector) and all(v.vector or v.has(Role.SCALAR) for v in (left, right)),
                   param=left.param or right.param if not roles else _scaled_positions_param(left, right, op),
                   dtype_param=next((v.dtype_param for v in (left, right) if not v.has(Role.SCALAR)), None))

    def _product_or_arith(self, node: ast.AST, form: str, a: Val, b: Val, frame: Frame,
                          operand_nodes: list) -> Val | None:
        """A product of positions and inverse frequencies forms the phase; anything else is None."""
        freq, positions = None, None
        if _is_freq(a) and _is_positions(b, loose=form != "elementwise"):
            freq, positions = a, b
        elif _is_freq(b) and _is_positions(a, loose=form != "elementwise"):
            freq, positions = b, a
        elif form == "elementwise" and _is_freq(a) and _outer_operand(b, a):
            freq, positions = a, b
        elif form == "elementwise" and _is_freq(b) and _outer_operand(a, b):
            freq, positions = b, a
        if freq is None or positions is None or (("timestep" in frame.scope.symbol.lower()
                                                  or "timestep" in (positions.param or ""))
                                                 and not _ROTARY_NAMED.search(frame.scope.symbol)):
            # A diffusion model's sinusoidal timestep embedding has a phase's arithmetic but rotates nothing
            # (a ``TimestepRotary`` over a policy's timesteps does rotate).
            return None
        guard = frame.guards[-1] if frame.guards else None
        if positions.param is not None:
            frame.position_params.add(positions.param)
        if freq.param is not None:
            frame.freq_params.add(freq.param)
        self.model.products.append(Product(node, form, freq, positions, guard, frame.scope,
                                           tuple(operand_nodes), (a, b)))
        if guard is not None and guard not in self.model.guards:
            self.model.guards.append(guard)
        dtype, site = _promote(a, b)
        if {a.dtype, b.dtype} == {Dt.INT} or (Dt.INT in (a.dtype, b.dtype) and dtype is Dt.INT):
            dtype = Dt.RUNTIME
        return Val(frozenset({Role.PHASE}), dtype, site=site if dtype is not Dt.FULL else None,
                   read=freq.read, product=node)


def _scaled_positions(a: Val, b: Val) -> Val | None:
    """``torch.outer(t, 1.0 / ext_factors)`` (LongRoPE): positions spread over per-frequency factors, still
    positions (in their own dtype) until the frequencies multiply them."""
    for positions, factors in ((a, b), (b, a)):
        if positions.has(Role.POSITIONS) and not factors.roles - {Role.SCALAR}:
            return positions.evolve(last_is_one=False, second_last_is_one=False, vector=False)
    return None


def _outer_operand(v: Val, freq: Val) -> bool:
    """``lat.float()[:, None] * inv_freq[None, :]``: an argument of no known meaning given a trailing axis of one
    against the frequencies' last axis, an outer product by broadcasting: the coordinates of a phase. (Not any
    tensor: RoPE-Mixed builds 2-D frequencies as ``mag[None, :] * direction[:, None]``.)"""
    # An index parameter (``frame_idx[:, None] * self.inv_freq[None, :]``, int64 frame numbers) is coordinates too.
    return v.last_is_one and not freq.last_is_one and not v.roles and v.param is not None \
        and (v.dtype is not Dt.INT or INT_BY_NAME.match(v.param) is not None)


def _literal_rows(source: ast.expr, target: ast.expr) -> list[list[ast.expr]] | None:
    """The rows of ``((a, b), (c, d))`` looped over by ``for x, y in ...``: each a literal of the target's arity."""
    if not isinstance(source, (ast.Tuple, ast.List)) or not isinstance(target, ast.Tuple) or not source.elts:
        return None
    rows = [row.elts for row in source.elts if isinstance(row, (ast.Tuple, ast.List))]
    if len(rows) != len(source.elts) or any(len(row) != len(target.elts) for row in rows) \
            or any(isinstance(el, ast.Starred) for row in rows for el in row):
        return None
    return rows


def _bind_arguments(fn: FunctionNode, node: ast.Call) -> dict[str, ast.expr] | None:
    """Each parameter of ``fn`` -> the expression ``node`` passes (or its default); None when one is missing."""
    positional = [*fn.args.posonlyargs, *fn.args.args]
    if len(node.args) > len(positional):
        return None
    bound: dict[str, ast.expr] = {a.arg: v for a, v in zip(positional, node.args)}
    defaults = dict(zip([a.arg for a in positional][len(positional) - len(fn.args.defaults):], fn.args.defaults))
    defaults.update({a.arg: d for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults) if d is not None})
    names = {a.arg for a in (*positional, *fn.args.kwonlyargs)}
    for kw in node.keywords:
        if kw.arg not in names or kw.arg in bound:
            return None
        bound[kw.arg] = kw.value
    for name in names:
        if name not in bound:
            if name not in defaults:
                return None
            bound[name] = defaults[name]
    return bound


def _is_vmap(qn: str | None) -> bool:
    return qn is not None and qn.rsplit(".", 1)[-1] == "vmap" and qn.startswith(("torch", "functorch"))


def _is_freq(v: Val) -> bool:
    return v.has(Role.INV_FREQ) and not v.has(Role.PHASE) and not v.has(Role.TABLE)


def _is_positions(v: Val, loose: bool = False) -> bool:
    if v.has(Role.INV_FREQ) or v.has(Role.PHASE) or v.has(Role.TABLE) or v.has(Role.SCALAR) or v.has(Role.DTYPE):
        return False
    if v.has(Role.POSITIONS):
        return True
    if v.has(Role.ARANGE):
        return loose or not v.scaled
    return loose and (v.param is not None or v is UNKNOWN or not v.roles) and not v.has(Role.ACTIVATION)


def _einsum_sums(spec: str) -> bool:
    spec = spec.replace(" ", "").replace("...", "")
    if "->" in spec:
        inputs, output = spec.split("->", 1)
    else:
        inputs = spec
        letters = [c for c in inputs if c.isalpha()]
        output = "".join(c for c in letters if letters.count(c) == 1)
    in_letters = {c for c in inputs if c.isalpha()}
    return any(c not in output for c in in_letters)


def _einsum_is_matmul(spec: str) -> bool:
    spec = spec.replace(" ", "")
    if "->" not in spec or "." in spec:
        return False
    inputs, out = spec.split("->", 1)
    parts = inputs.split(",")
    if len(parts) != 2:
        return False
    a, b = parts
    if not (len(a) == len(b) == len(out) >= 2):
        return False
    j = a[-1]
    return (a[:-2] == b[:-2] == out[:-2] and b[-2] == j and out[-2] == a[-2] and out[-1] == b[-1]
            and j not in out and len(set(a + b)) == len(a) + 1)


def analyse(module: ast.Module, imports: ImportTable, spans: Spans,
            integer_weights: frozenset[str] = frozenset()) -> FileModel:
    """``integer_weights``: weight names some module of the file holds as integer tensors (a quantised layer)."""
    return Interpreter(module, imports, spans, integer_weights).run()


_TRIG = frozenset({"cos", "sin", "polar"})


def _trig_operands(fn: ast.AST) -> frozenset[str]:
    """Names a function hands to cos/sin (``n.cos()``, ``torch.sin(n)``, ``torch.polar(r, n)``) and
    only ever rebinds to something made from themselves (``freqs = freqs.to(x.dtype)``, a slice)."""
    found, rebound = set(), set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _TRIG:
            operand = node.func.value if not node.args else node.args[-1]
            if isinstance(operand, ast.Name):
                found.add(operand.id)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name) and not _made_from(node.value, name.id):
                        rebound.add(name.id)
    return frozenset(found - rebound)


def _joined(vals: list[Val]) -> Val:
    """What a function returns over all its ``return`` statements."""
    out = UNKNOWN
    for val in vals:
        out = val if out is UNKNOWN else join(out, val)
    return out


def _argument_nodes(node: ast.Call, summary: Summary) -> dict[str, ast.expr]:
    """The argument expression each parameter of the callee receives at ``node``."""
    nodes = {param: arg for param, arg in zip(summary.params, node.args) if not isinstance(arg, ast.Starred)}
    nodes.update({k.arg: k.value for k in node.keywords if k.arg is not None})
    return nodes


def _bare_param_of(val: Val, frame: Frame) -> bool:
    """``val`` is (a view of) a parameter of the function being analysed, nothing known about it."""
    return not val.roles and val.param is not None and val.param in frame.scope.params


def allocator_name(site: ast.AST | None) -> str:
    """``new_zeros`` in ``pos.new_zeros(...)``, ``empty_like`` in ``torch.empty_like(pos)``; "" otherwise."""
    func = site.func if isinstance(site, ast.Call) else None
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _int_buffer(val: Val) -> bool:
    """A tensor allocated in another's integer dtype (``pos.new_zeros(...)``, ``torch.empty_like(pos)``)."""
    name = allocator_name(val.site)
    return val.dtype is Dt.INT and isinstance(val.site, ast.Call) and (name.startswith("new_") or name.endswith("_like"))


def _rounded_positions(val: Val) -> bool:
    """Positions already rounded by a 16-bit-able cast: widening them (``.float()``, ``.to(torch.float32)``)
    restores the dtype, not the digits."""
    return val.dtype.can_be_16bit and val.site is not None and val.read is None \
        and (val.has(Role.POSITIONS) or val.has(Role.ARANGE)) and not val.roles & {Role.INV_FREQ, Role.PHASE, Role.TABLE}


def _dtype_of(base: Val) -> Val:
    """``t.dtype`` (and ``t.type()``, a type name that carries it) for a tensor ``t`` known as ``base``."""
    dt = base.dtype
    plain_attribute = base.read is not None and base.read.ref.kind is StateKind.ATTRIBUTE
    if dt is Dt.UNKNOWN and base.param is not None and INT_BY_NAME.match(base.param):
        dt = Dt.INT  # ``ids``, ``patch_ids``: index tensors, integer by convention
    if dt is Dt.UNKNOWN and base.param is not None and MASK_NAMES.match(base.param) and not base.roles:
        # A tokenizer's ``attention_mask`` is int64 (or bool); a float additive mask has the activations'
        # dtype, which is where tables belong anyway (RPL001's fix casts to the activation).
        dt = Dt.INT
    if dt is Dt.UNKNOWN and not base.has(Role.SCALAR) and not plain_attribute:
        # The dtype of a tensor nothing is known about is decided at run time.
        dt = Dt.RUNTIME
    if dt is Dt.RUNTIME and base.may_be_int and not base.roles & {Role.INV_FREQ, Role.PHASE, Role.TABLE}:
        dt = Dt.INT  # integer on one of the paths that reach here: a table cast to it truncates there
    if base.read is not None and base.read.follows_module_casts and dt is not Dt.INT:
        dt = Dt.RUNTIME
    return dtype_val(dt, site=None, read=base.read).evolve(param=base.param)


def _batched_operands(a: Val, b: Val) -> tuple[Val, Val]:
    """``bmm`` takes exactly three axes and contracts ``a``'s last with ``b``'s second-to-last: when one of
    them is one (``pos.unsqueeze(-1)``), so is the other, and the product is an outer product."""
    if a.last_is_one or b.second_last_is_one:
        return a.evolve(last_is_one=True), b.evolve(second_last_is_one=True)
    return a, b


def _embeds_node(node: ast.AST | None) -> bool:
    """``inputs_embeds`` or a slice of it (``inputs_embeds[..., 0]``): the activations by their name."""
    while isinstance(node, ast.Subscript):
        node = node.value
    return isinstance(node, ast.Name) and EMBEDS_PARAMS.match(node.id) is not None


def _ids_by_name(val: Val) -> bool:
    """Positions whose dtype nothing shows, in a parameter that only ever holds positions (``pos``): int64
    ids from most callers."""
    return val.dtype is Dt.UNKNOWN and val.has(Role.POSITIONS) and bool(POSITION_NAMES.match(val.param or ""))


def _torch_dtype(attr: str) -> Val | None:
    """``torch.<attr>`` (or ``numpy.<attr>``) as a dtype value, if it names one."""
    if attr in TORCH_DTYPES_FULL or attr in TORCH_DTYPES_COMPLEX:
        return dtype_val(Dt.FULL)
    if attr in TORCH_DTYPES_LOW:
        return dtype_val(Dt.LOW)
    if attr in TORCH_DTYPES_INT:
        return dtype_val(Dt.INT)
    return None


def _dtype_and_device_only(fn: FunctionNode, name: str, given: set[str]) -> bool:
    """``fn`` reads its parameter ``name`` only as ``name.dtype`` and ``name.device``, apart from branches
    that a call passing the parameters ``given`` never takes (``seq_len if seq_len is not None else
    x.shape[-2]`` with ``seq_len`` given)."""
    allowed = {id(n.value) for n in ast.walk(fn) if isinstance(n, ast.Attribute) and n.attr in ("dtype", "device")
               and isinstance(n.value, ast.Name)}
    # ``t.to(ref)``, ``t.type_as(ref)``: a cast that takes only the dtype and device of ``ref``.
    allowed |= {id(n.args[0]) for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and n.func.attr in ("to", "type_as") and len(n.args) == 1 and not n.keywords
                and isinstance(n.args[0], ast.Name)}
    for n in ast.walk(fn):
        if isinstance(n, (ast.IfExp, ast.If)):
            branch = _none_branch(n.test, given)
            if branch is not None:
                skipped = (n.orelse if branch == "orelse" else n.body)
                for part in (skipped if isinstance(skipped, list) else [skipped]):
                    allowed.update(id(m) for m in ast.walk(part) if isinstance(m, ast.Name))
    loads = [n for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id == name]
    return bool(loads) and all(id(n) in allowed for n in loads)


def _none_branch(test: ast.expr, given: set[str]) -> str | None:
    """For ``p is not None`` ("orelse") or ``p is None`` ("body") with ``p`` passed by the call: the branch
    the call never takes."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Name) \
            and test.left.id in given and is_none(test.comparators[0]):
        if isinstance(test.ops[0], ast.IsNot):
            return "orelse"
        if isinstance(test.ops[0], ast.Is):
            return "body"
    return None


def _bare_param(val: Val) -> bool:
    """A parameter the function knows nothing about but its name (``t``, ``x``): what callers pass decides."""
    return val.param is not None and val.dtype is Dt.UNKNOWN and val.roles <= {Role.POSITIONS}


def _only_to_target(fn: FunctionNode, param: str) -> bool:
    """``param`` appears in ``fn`` only as the argument of ``.to(param)``: a device there does the same move."""
    uses = [n for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id == param]
    targets = [c.args[0] for c in ast.walk(fn) if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
               and c.func.attr == "to" and len(c.args) == 1 and not c.keywords
               and isinstance(c.args[0], ast.Name) and c.args[0].id == param]
    return bool(uses) and len(uses) == len(targets)


def dtype_keyword(fn: FunctionNode, param: str) -> tuple[ast.Call, ast.keyword] | None:
    """The ``.to(device=param.device, dtype=param.dtype)`` call of ``fn`` and its ``dtype=`` keyword, when that is
    the only place ``fn`` reads ``param.dtype`` and the call moves to a device too (positional or keyword)."""
    found = None
    for node in ast.walk(fn):
        if isinstance(node, ast.Attribute) and node.attr == "dtype" and isinstance(node.value, ast.Name) \
                and node.value.id == param:
            if found is not None:
                return None
            found = node
    if found is None:
        return None
    for call in ast.walk(fn):
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "to":
            keyword = next((k for k in call.keywords if k.arg == "dtype" and k.value is found), None)
            if keyword is not None and (call.args or any(k.arg == "device" for k in call.keywords)):
                return call, keyword
    return None


def _only_casts(fn: FunctionNode, value: str, like: str) -> bool:
    """``fn`` is ``def f(value, like): return value.to(like.dtype)`` (or ``.type(like.dtype)``): nothing but the cast,
    with ``value`` its first parameter."""
    params = call_params(fn, is_method=False)
    body = [stmt for stmt in fn.body if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant))]
    if not params or params[0] != value or len(body) != 1 or not isinstance(body[0], ast.Return):
        return False
    call = body[0].value
    return isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in ("to", "type") \
        and isinstance(call.func.value, ast.Name) and call.func.value.id == value and len(call.args) == 1 \
        and not call.keywords and isinstance(call.args[0], ast.Attribute) and call.args[0].attr == "dtype" \
        and isinstance(call.args[0].value, ast.Name) and call.args[0].value.id == like


def _element_classes(fn: FunctionNode) -> dict[str, tuple[str, ...]]:
    """``self.rotaries = nn.ModuleList(LayerRope(d, t) for t in thetas)`` in ``fn``: {"rotaries": ("LayerRope",)}."""
    out = {}
    todo = list(fn.body)
    while todo:  # statements only, as in ``_submodules``
        node = todo.pop()
        for name in ("body", "orelse", "finalbody", "handlers"):
            todo.extend(getattr(node, name, ()))
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                and (dotted(node.value.func) or [""])[-1] in ("ModuleList", "ModuleDict"):
            # Classes by name; factory functions and dicts of them (``builder(d) for _, builder in REG.items()``)
            # resolve to the classes they build once the module's functions are known (``_made_classes``).
            called = tuple(dict.fromkeys(
                [n.func.id for arg in node.value.args for n in ast.walk(arg)
                 if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
                + [n.iter.func.value.id for arg in node.value.args for n in ast.walk(arg)
                   if isinstance(n, ast.comprehension) and isinstance(n.iter, ast.Call)
                   and isinstance(n.iter.func, ast.Attribute) and n.iter.func.attr in ("items", "values")
                   and isinstance(n.iter.func.value, ast.Name)]))
            for target in node.targets:
                attr = self_attr(target)
                if attr is not None and called:
                    out[attr] = called
    return out


def _submodule_choices(fn: FunctionNode) -> dict[str, list[str]]:
    """Every name ``fn`` calls to build each ``self.<attr>`` (``if scaling is None: self.rotary_emb = A(...)``
    ``else: self.rotary_emb = B(...)``), in statement order."""
    out: dict[str, list[str]] = {}
    todo = list(reversed(fn.body))
    while todo:
        node = todo.pop()
        for name in ("handlers", "finalbody", "orelse", "body"):
            todo.extend(reversed(getattr(node, name, ())))
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name):
            for target in node.targets:
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
                    out.setdefault(target.attr, []).append(node.value.func.id)
    return out


def _self_calls(fn: FunctionNode) -> list[str]:
    """Methods ``fn`` calls on ``self`` as statements of its own body (``self._init_rope()``)."""
    return [stmt.value.func.attr for stmt in fn.body if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Attribute) and isinstance(stmt.value.func.value, ast.Name)
            and stmt.value.func.value.id == "self"]


def _built_class(fn: FunctionNode, classes: dict[str, ClassInfo]) -> str | None:
    """The one class of this file a factory function returns an instance of (``return RotaryEmbedding(...)`` on
    every path that returns); None for a function that hands back anything else (a closure, a tensor)."""
    made = {r.value.func.id for r in ast.walk(fn) if isinstance(r, ast.Return) and isinstance(r.value, ast.Call)
            and isinstance(r.value.func, ast.Name)}
    returns = [r for r in ast.walk(fn) if isinstance(r, ast.Return)]
    if len(made) != 1 or not all(isinstance(r.value, ast.Call) for r in returns):
        return None
    name = next(iter(made))
    return name if name in classes else None


def _submodules(fn: FunctionNode) -> dict[str, str]:
    """``self.rope = RoPE(dim)`` in ``fn``: {"rope": "RoPE"}; also ``self.params = params`` for a parameter
    annotated ``params: RopeParams``."""
    out = {}
    annotated = {a.arg: a.annotation for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)
                 if a.annotation is not None}
    for node in fn.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id in annotated:
            kind = annotated[node.value.id]
            name = kind.id if isinstance(kind, ast.Name) else string_value(kind)
            for target in node.targets:
                if name and isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                        and target.value.id == "self":
                    out[target.attr] = name
    todo = list(fn.body)
    while todo:  # statements only: a submodule is built by an assignment statement, never inside an expression
        node = todo.pop()
        for name in ("body", "orelse", "finalbody", "handlers"):
            todo.extend(getattr(node, name, ()))
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            func = node.value.func
            # ``ROPE_CLASSES[rope_type](...)``: resolved against the module's class registries (``"REG[]"``).
            called = [f"{func.value.id}[]"] if isinstance(func, ast.Subscript) and isinstance(func.value, ast.Name) \
                else dotted(func)
            for target in node.targets:
                if called and isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                        and target.value.id == "self":
                    out[target.attr] = called[-1]
    return out


def _made_from(value: ast.AST, name: str) -> bool:
    """``value`` is ``name`` cast, sliced or reshaped: a method chain or subscript on it, or a call
    that takes it first (``slice_at_dim(freqs, ...)``)."""
    root = value
    while isinstance(root, (ast.Call, ast.Attribute, ast.Subscript)):
        if isinstance(root, ast.Call):
            if isinstance(root.func, ast.Attribute):
                root = root.func.value
            elif root.args:
                root = root.args[0]
            else:
                return False
        else:
            root = root.value
    return isinstance(root, ast.Name) and root.id == name


def _defaults_to_false(node: ast.AST, fn: ast.AST | None) -> bool:
    """``node`` is a parameter of ``fn`` whose default is ``False``."""
    if not isinstance(node, ast.Name) or not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    return any(name == node.id and bool_literal(default) is False for name, default in _defaults(fn))


def _is_long(ann: ast.expr | None) -> bool:
    """``torch.LongTensor`` (or ``IntTensor``), also inside ``Optional[...]``."""
    if isinstance(ann, ast.Subscript) and (dotted(ann.value) or [""])[-1] == "Optional":
        ann = ann.slice
    return ann is not None and (dotted(ann) or [""])[-1] in ("LongTensor", "IntTensor")


def _long_annotated(fn: FunctionNode) -> list[str]:
    """Parameters annotated ``torch.LongTensor`` (or ``Optional[torch.LongTensor]``)."""
    a = fn.args
    return [arg.arg for arg in (*a.posonlyargs, *a.args, *a.kwonlyargs) if _is_long(arg.annotation)]


def _number_annotated(fn: FunctionNode) -> dict[str, str]:
    """Parameters annotated ``int``, ``float``, ``Optional[int]`` or ``int | None``: name -> "int" or "float"."""
    a = fn.args
    out = {}
    for arg in (*a.posonlyargs, *a.args, *a.kwonlyargs):
        ann = arg.annotation
        if isinstance(ann, ast.Subscript) and (dotted(ann.value) or [""])[-1] == "Optional":
            ann = ann.slice
        elif isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr) and isinstance(ann.right, ast.Constant):
            ann = ann.left
        if isinstance(ann, ast.Name) and ann.id in ("int", "float"):
            out[arg.arg] = ann.id
    return out


def call_params(fn: FunctionNode, is_method: bool) -> list[str]:
    """The parameters a call fills: a method's first one (``self``) is not, unless it is a staticmethod."""
    a = fn.args
    params = [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    if is_method and params and not any((dotted(d) or [""])[-1] == "staticmethod" for d in fn.decorator_list):
        params = params[1:]
    return params


def is_runtime_inv_freq(qn: str) -> bool:
    """``qn`` names ropelint's float32 inverse-frequency helper, imported or vendored."""
    return qn.rsplit(".", 1)[-1] in ("inv_freq", "inv_freq_from") and ("ropelint.runtime" in qn or "rope_runtime" in qn)


def _writes_unconditionally(fn: FunctionNode, state: str) -> bool:
    """A statement of ``fn``'s own body registers or assigns ``self.<state>`` (no branch can skip it)."""
    for stmt in fn.body:
        if isinstance(stmt, ast.Assign) and any(self_attr(t) == state for t in stmt.targets):
            return True
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "register_buffer" \
                and call.args and string_value(call.args[0]) == state:
            return True
    return False


def _calls_self_method_after_super(fn: FunctionNode, names: set[str]) -> bool:
    """``fn`` calls ``self.<one of names>(...)`` in a statement after its ``super()._apply(...)`` one."""
    seen_super = False
    for stmt in fn.body:
        calls = [n for n in ast.walk(stmt) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)]
        if any(c.func.attr == "_apply" and isinstance(c.func.value, ast.Call)  # type: ignore[union-attr]
               and isinstance(c.func.value.func, ast.Name) and c.func.value.func.id == "super" for c in calls):
            seen_super = True
            continue
        if seen_super and any(c.func.attr in names and self_attr(c.func) is not None for c in calls):  # type: ignore[union-attr]
            return True
    return False


def _rebuilt_on_device_change_only(fn: ast.AST, state: str) -> bool:
    """Every ``self.<state> = ...`` in ``fn`` sits under an ``if`` that compares devices only (``if
    self.inv_freq.device != self._inv_freq_device:``): a dtype cast leaves the device, so nothing is rebuilt."""
    assigns = [n for n in ast.walk(fn) if isinstance(n, ast.Assign) and any(self_attr(t) == state for t in n.targets)]
    if not assigns or any(isinstance(n, ast.Constant) and n.value == state for n in ast.walk(fn)):
        return False  # (named in a string: ``apply_keeping_dtype(self, super()._apply, fn, ("inv_freq",))`` keeps it)
    guarded: set[int] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.If) and not node.orelse:
            test = ast.unparse(node.test)
            if ".device" in test and "dtype" not in test and "is_floating_point" not in test:
                guarded.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return all(id(a) in guarded for a in assigns)


def _at_least_float32(fn: FunctionNode) -> bool:
    """timm's ``_freq_buffer_dtype``: ``return torch.float32`` where a test sizes the dtype (``finfo(dtype).bits <
    32``, ``itemsize``, or names both 16-bit dtypes), the dtype it was given otherwise: a dtype of 32 bits or more."""
    returns = [n for n in ast.walk(fn) if isinstance(n, ast.Return)]
    widened = [r for r in returns if r.value is not None and len(dotted(r.value) or []) == 2
               and (dotted(r.value) or [""])[-1] in ("float32", "float")]  # ``torch.float32`` under any alias
    if not widened or any(r not in widened and not isinstance(r.value, ast.Name) for r in returns):
        return False
    for ret in widened:
        test = next((ast.unparse(n.test) for n in ast.walk(fn) if isinstance(n, ast.If)
                     and any(r is ret for stmt in n.body for r in ast.walk(stmt))), "")
        if not ("bits" in test or "itemsize" in test or ("bfloat16" in test and "float16" in test.replace("bfloat16", ""))):
            return False
    return True


def _restore_sources(fn: ast.AST, state: str) -> set[str]:
    """The other ``self`` attributes whose values every assignment of ``self.<state>`` in ``fn`` copies
    (``self.inv_freq = self._inv_freq_fp64.clone()``); empty when one assignment builds it otherwise."""
    sources: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and any(self_attr(t) == state for t in node.targets):
            metadata = {id(n.value) for n in ast.walk(node.value) if isinstance(n, ast.Attribute)
                        and n.attr in ("device", "dtype", "shape")}
            read = {self_attr(n) for n in ast.walk(node.value)
                    if isinstance(n, ast.Attribute) and id(n) not in metadata and self_attr(n) is not None}
            if not read or state in read or any(isinstance(n, ast.Call) and (dotted(n.func) or [""])[-1]
                                                in ("arange", "tensor", "linspace", "pow") for n in ast.walk(node.value)):
                return set()
            sources |= read  # type: ignore[arg-type]
    return sources


def _scaled_positions_param(left: Val, right: Val, op: ast.operator) -> str | None:
    """``pos * interpolation_factor``: positions scaled by a number are still the argument's positions (a caller's
    16-bit positions reach the phase through it)."""
    if not isinstance(op, (ast.Mult, ast.Div)):
        return None
    for positions, factor in ((left, right), (right, left)):
        if positions.roles == {Role.POSITIONS} and positions.param is not None and factor.has(Role.SCALAR):
            return positions.param
    return None


HANDED_ON_IDS = frozenset({"position_ids", "cache_position"})


def count_operand(site: ast.Call, imports: ImportTable) -> ast.expr | None:
    """What a count runs over: ``mask`` of ``torch.cumsum(mask, -1)`` (under any alias) or of ``mask.cumsum(-1)``."""
    if qualname(site.func, imports) == "torch.cumsum":
        return site.args[0] if site.args else None
    return site.func.value if isinstance(site.func, ast.Attribute) and site.func.attr == "cumsum" else None


def _counted(site: ast.AST | None) -> bool:
    """A count over a mask (``mask.cumsum(-1)``, ``torch.cumsum(mask, -1)``) or a range: how ids are made."""
    if not isinstance(site, ast.Call):
        return False
    name = site.func.attr if isinstance(site.func, ast.Attribute) else (dotted(site.func) or [""])[-1]
    return name in ("cumsum", "arange")  # (``mask.long().cumsum(-1)``: a method of a call's result too)


def _zipped_columns(it: ast.expr, target: ast.expr) -> list[ast.expr | None] | None:
    """``enumerate(seq)`` -> [None, seq] and ``zip(a, b)`` -> [a, b] for a tuple target of that many names (None:
    the counter); None for any other loop."""
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and isinstance(target, ast.Tuple)
            and not it.keywords and all(not isinstance(a, ast.Starred) for a in it.args)):
        return None
    if it.func.id == "enumerate" and len(it.args) == 1 and len(target.elts) == 2 \
            and isinstance(target.elts[1], ast.Name):
        return [None, it.args[0]]
    if it.func.id == "zip" and len(it.args) == len(target.elts) \
            and all(isinstance(t, ast.Name) for t in target.elts):
        return list(it.args)
    return None


def _number_dispatch(test: ast.expr) -> str | None:
    """``isinstance(pos, int)`` (or ``(int, float)``, ``numbers.Number``): the name a number-or-tensor
    parameter is tested by."""
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id == "isinstance" \
            and len(test.args) == 2 and isinstance(test.args[0], ast.Name):
        kinds = test.args[1].elts if isinstance(test.args[1], ast.Tuple) else [test.args[1]]
        if kinds and all((dotted(k) or [""])[-1] in ("int", "float", "Number", "Integral", "Real") for k in kinds):
            return test.args[0].id
    return None


def _converted_like_buffers(fn: FunctionNode) -> frozenset[str]:
    """Attributes an ``_apply(self, fn, ...)`` override converts with the conversion it is handed
    (``self._freqs = fn(self._freqs)``), and names nowhere else: module casts round them as they round buffers."""
    params = call_params(fn, is_method=True)
    if not params:
        return frozenset()
    converted: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and (name := self_attr(node.targets[0])) \
                and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name) \
                and node.value.func.id == params[0] and len(node.value.args) == 1 and not node.value.keywords \
                and self_attr(node.value.args[0]) == name:
            converted.add(name)
    mentions = [n.attr for n in ast.walk(fn) if isinstance(n, ast.Attribute) and self_attr(n) in converted]
    # Named elsewhere in the override too (``if self._freqs is not None``, a rebuild after it): only the plain form.
    return frozenset(name for name in converted
                     if mentions.count(name) == 2 + sum(1 for n in ast.walk(fn) if isinstance(n, ast.Compare)
                                                        and any(self_attr(c) == name for c in ast.walk(n))))


_TENSOR_READS = frozenset({"device", "dtype", "shape", "ndim", "is_cuda", "is_meta", "size", "dim", "numel"})


def read_as_tensor(fn: ast.AST | None, name: str) -> bool:
    """``fn`` reads ``name`` as a tensor somewhere (``h.device``, ``x.shape``, ``x.size(1)``): a ``.to(name)`` then
    takes that tensor's dtype and device, where a parameter named like anything (``precision=torch.half``) may be a
    dtype."""
    return fn is not None and any(
        isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == name
        and isinstance(n.ctx, ast.Load) and n.attr in _TENSOR_READS for n in ast.walk(fn))


_TABLE_OPERAND = re.compile(r"^(?:cos|sin)(?:_\w*)?$")


def _rotated_by_tables(fn: FunctionNode, params: list[str]) -> list[str]:
    """Parameters ``fn`` multiplies by a local named as a cos/sin table (``tokens * cos``)."""
    found = []
    for node in ast.walk(fn):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            for side, other in ((node.left, node.right), (node.right, node.left)):
                if isinstance(side, ast.Name) and side.id in params and side.id not in found \
                        and isinstance(other, ast.Name) and _TABLE_OPERAND.match(other.id):
                    found.append(side.id)
    return found


def _only_widens(fn: ast.AST, state: str) -> bool:
    """``fn`` mentions ``self.<state>`` only in ``self.<state> = self.<state>.float()`` (or ``.to(float32)``,
    ``.double()``): a cast of values the conversion already rounded. False when it names the state otherwise
    (or not at all)."""
    allowed: set[int] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and self_attr(node.targets[0]) == state \
                and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Attribute) \
                and self_attr(node.value.func.value) == state and (
                    node.value.func.attr in ("float", "double")
                    or (node.value.func.attr == "to" and all(
                        # a widening, or a device move (``.to(self.inv_freq.device)``): neither restores values
                        (dotted(a) or [""])[-1] in ("float32", "float", "float64", "double", "device")
                        for a in (*node.value.args, *(k.value for k in node.value.keywords if k.arg in ("dtype", "device")))))):
            allowed.update(id(n) for n in (node.targets[0], node.value.func.value))
        elif isinstance(node, ast.Attribute) and node.attr == "dtype" and self_attr(node.value) == state:
            allowed.add(id(node.value))  # ``if self.inv_freq.dtype != torch.float32:`` reads the dtype only
        elif isinstance(node, ast.Assign) and node.targets and all(
                self_attr(t) not in (None, state) for t in node.targets):
            # ``self.inv_freq = self._master.clone()``: copied into other state, not restored itself.
            allowed.update(id(n) for n in ast.walk(node.value) if isinstance(n, ast.Attribute) and self_attr(n) == state)
    if any(isinstance(n, ast.Constant) and isinstance(n.value, str) and state in n.value for n in ast.walk(fn)):
        return False  # named in a string: ``apply_keeping_dtype(self, super()._apply, fn, ("inv_freq",))``
    mentions = [n for n in ast.walk(fn) if isinstance(n, ast.Attribute) and self_attr(n) == state]
    return bool(mentions) and all(id(n) in allowed for n in mentions)


def _unit_bounds(bounds: list, kw: dict) -> bool:
    """A clamp to [0, 1]: ``(0, 1)`` passed positionally or as ``min=0, max=1``."""
    return [number(a) for a in bounds] == [0, 1] or [number(kw[k]) if k in kw else None for k in ("min", "max")] == [0, 1]


def _ramp_ratio(node: ast.expr) -> bool:
    """``-torch.arange(n) / n``, ``torch.arange(0, d, 2).float() / d``: a range divided by a size."""
    while isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)):
        return False
    left = node.left.operand if isinstance(node.left, ast.UnaryOp) else node.left
    return any(isinstance(n, ast.Call) and (dotted(n.func) or [""])[-1] in ("arange", "linspace")
               for n in ast.walk(left))


_ROTARY_NAMED = re.compile(r"rope|rotar", re.IGNORECASE)


def is_trig_call(node: ast.AST) -> bool:
    """``t.cos()``, ``torch.sin(t)``, ``cos(t)``: a cos/sin call by any spelling."""
    return isinstance(node, ast.Call) and (getattr(node.func, "attr", None) or getattr(node.func, "id", None)) \
        in ("cos", "sin")


def is_cast_call(node: ast.AST | None) -> bool:
    """``t.to(...)``, ``.type(...)``, ``.type_as(...)``, ``.half()``, ``.bfloat16()``: a cast that can round."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
        and node.func.attr in ("to", "type", "type_as", "half", "bfloat16")


def self_attr(node: ast.expr) -> str | None:
    """``name`` in ``self.<name>``."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None
