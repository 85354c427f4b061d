"""Abstract values: what the interpreter knows about an expression.

Dtype facts are three-valued, as the rules need them: known full precision (float32/float64),
known low precision or integer, or decided at run time (the module's dtype, an argument,
``torch.get_default_dtype()``). Unknown is a fourth state that no rule acts on.
"""

from __future__ import annotations

import ast
import enum
from dataclasses import dataclass


class Dt(enum.Enum):
    FULL = "float32"  # float32 or float64: exact enough for positions up to 2**24
    LOW = "16-bit"  # bfloat16 / float16
    INT = "integer"
    RUNTIME = "run-time"  # follows the module dtype, an argument or the default dtype
    UNKNOWN = "unknown"

    @property
    def can_be_16bit(self) -> bool:
        return self in (Dt.LOW, Dt.RUNTIME)


class Role(str, enum.Enum):  # str: hashed in C, values live in frozensets
    INV_FREQ = "inverse frequencies"
    ARANGE = "arange"  # a range not yet known to be positions or exponent
    POSITIONS = "positions"
    PHASE = "phase"
    TABLE = "cos/sin table"
    COMPLEX = "complex rotation"
    ACTIVATION = "activation"
    DTYPE = "dtype"
    DEVICE = "device"
    SCALAR = "scalar"


class StateKind(enum.Enum):
    BUFFER = "buffer"
    PARAMETER = "Parameter"
    ATTRIBUTE = "attribute"
    # A plain attribute the class's ``_apply`` override converts like a buffer (``self._freqs = fn(self._freqs)``).
    APPLIED = "attribute its `_apply` override converts"


@dataclass(frozen=True)
class StateRef:
    """A tensor held on ``self``: where it was registered and how a module cast treats it."""

    name: str  # attribute name; f-string names keep their static text with ``{}`` holes
    kind: StateKind
    node: ast.AST  # the registering statement's call or assignment
    persistent: bool = True
    frozen: bool = False  # a Parameter built with requires_grad=False: it cannot be learned
    # requires_grad follows a constructor argument that defaults to False: frozen unless asked to learn
    frozen_by_default: bool = False
    # ``nn.ParameterList([...])`` / ``nn.ParameterDict({...})`` of Parameters, a ``BufferDict`` of buffers: the
    # entries are the state
    container: bool = False

    @property
    def follows_module_casts(self) -> bool:
        return self.kind in (StateKind.BUFFER, StateKind.PARAMETER, StateKind.APPLIED)

    def describe(self) -> str:
        if self.container:
            return "container of buffers" if self.kind is StateKind.BUFFER else "container of Parameters"
        if self.kind is StateKind.BUFFER:
            return "buffer" if self.persistent else "non-persistent buffer"
        return self.kind.value


@dataclass(frozen=True)
class StateRead:
    """Where a method read module state: the node a fix rewrites and a finding points at."""

    ref: StateRef
    node: ast.AST
    # The class keeps this state's dtype through module casts (an ``_apply`` override naming it).
    kept: bool = False

    @property
    def follows_module_casts(self) -> bool:
        return self.ref.follows_module_casts and not self.kept


@dataclass(frozen=True)
class Val:
    roles: frozenset[Role] = frozenset()
    dtype: Dt = Dt.UNKNOWN
    # The node that left ``dtype`` open or low (an arange without float dtype, a cast), if any.
    site: ast.AST | None = None
    # Module state this value was read from, through any chain of dtype/shape operations.
    read: StateRead | None = None
    # Other reads merged in from branches (``a = self.x if c else self.y``).
    alt_reads: tuple[StateRead, ...] = ()
    # Earlier nodes that also made this value 16-bit-able (a cast of an already cast value).
    earlier_sites: tuple[ast.AST, ...] = ()
    # Arange-derived and divided or scaled: the exponent of an inverse-frequency construction.
    scaled: bool = False
    # Shape facts for the matmul -> broadcast rewrite: [..., n, 1] and [..., 1, m].
    last_is_one: bool = False
    second_last_is_one: bool = False
    # Known to have exactly one axis (an arange, and elementwise arithmetic of it with scalars), so
    # ``unsqueeze(0)`` makes it [1, n] and ``unsqueeze(1)`` makes it [n, 1].
    vector: bool = False
    # For function summaries: the parameter this value is (or is derived from by shape ops).
    param: str | None = None
    # Set on a phase: the product that formed it.
    product: ast.AST | None = None
    literal: object = None
    # For function summaries: the ``dtype`` parameter this value's dtype comes from
    # (``torch.arange(n, dtype=dtype)``), so a caller passing ``torch.float32`` gets float32.
    dtype_param: str | None = None
    # On a dtype that is ``dtype or positions.dtype``: the tensor parameter whose dtype a call without
    # the dtype argument gets.
    fallback_param: str | None = None
    # Integer on some path (``grid = arange(...)``, rescaled to float only ``if`` the shapes differ): its
    # ``.dtype`` can be an integer dtype even though the join says run time.
    may_be_int: bool = False

    @property
    def reads(self) -> tuple[StateRead, ...]:
        return ((self.read,) if self.read is not None else ()) + self.alt_reads

    @property
    def sites(self) -> tuple[ast.AST, ...]:
        return ((self.site,) if self.site is not None else ()) + self.earlier_sites

    def has(self, role: Role) -> bool:
        return role in self.roles

    def evolve(self, **changes: object) -> "Val":
        # dataclasses.replace re-runs __init__ and costs a tenth of the analysis; a frozen value's
        # fields can be copied directly.
        new = object.__new__(Val)
        fields = new.__dict__
        fields.update(self.__dict__)
        for name, value in changes.items():
            if name not in fields:
                raise TypeError(f"Val has no field {name!r}")
            fields[name] = value
        return new


UNKNOWN = Val()


def dtype_val(dt: Dt, site: ast.AST | None = None, read: StateRead | None = None) -> Val:
    return Val(roles=frozenset({Role.DTYPE}), dtype=dt, site=site, read=read)


def join(a: Val, b: Val) -> Val:
    """Merge two branches: keep what either knows, prefer the riskier dtype."""
    if a is b:
        return a
    order = [Dt.LOW, Dt.RUNTIME, Dt.INT, Dt.FULL, Dt.UNKNOWN]
    dtype = min(a.dtype, b.dtype, key=order.index)
    site = a.site if a.dtype is dtype else b.site
    reads = tuple(dict.fromkeys(a.reads + b.reads))
    risky = [v for v in (a, b) if v.dtype.can_be_16bit]
    other_sites = tuple(s for s in dict.fromkeys(s for v in risky for s in v.sites) if s is not site)
    return Val(
        roles=a.roles | b.roles,
        dtype=dtype,
        site=site,
        read=reads[0] if reads else None,
        alt_reads=reads[1:],
        earlier_sites=other_sites,
        scaled=a.scaled or b.scaled,
        last_is_one=a.last_is_one and b.last_is_one,
        second_last_is_one=a.second_last_is_one and b.second_last_is_one,
        vector=a.vector and b.vector,
        param=a.param if a.param == b.param else None,
        product=a.product or b.product,
        dtype_param=a.dtype_param if a.dtype_param == b.dtype_param else None,
        may_be_int=dtype is not Dt.INT and any((v.dtype is Dt.INT or v.may_be_int) and not v.has(Role.SCALAR)
                                               for v in (a, b)),
    )
