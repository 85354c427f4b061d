"""Float32 rotary tables that survive module casts, autocast, export and meta loading.

This file imports only ``torch`` and the standard library (nothing from ``ropelint``), so it
can be copied into a project as a single vendored file. Code rewritten by ``ropelint fix``
calls these functions from ``forward``.

Why the functions look the way they do:

* Inverse frequencies are rebuilt in float32 on every call instead of being read from a
  buffer. A floating buffer is converted by ``module.to(torch.bfloat16)``/``.half()``, and
  ``.float()`` afterwards restores the dtype, never the lost digits. A non-persistent buffer
  is also left unfilled when a model is built on the meta device and loaded with
  ``to_empty`` + ``load_state_dict``.
* The phase is an elementwise (broadcast) product of float32 tensors. Autocast leaves
  elementwise multiplication alone but runs matmul, ``bmm`` and summing ``einsum`` in 16
  bits, so no autocast guard is needed (and none is used: a guard becomes a graph node
  under ``torch.export`` and fails on the meta device).
* The cast to a low-precision dtype happens once, after cos/sin, so the angle never passes
  through 16 bits.
"""

from __future__ import annotations

import inspect
import warnings
import weakref
from collections.abc import Callable, Iterable
from fnmatch import fnmatchcase
from typing import Any, Literal

import torch

__all__ = [
    "Layout",
    "cos_sin",
    "apply_keeping_dtype",
    "converted_keeping_dtype",
    "freqs_cis",
    "inv_freq",
    "inv_freq_from",
    "phase",
    "remember_arguments",
    "rotary_cos_sin",
]

Layout = Literal["half", "interleaved"]

DeviceLike = torch.device | str | int | None

# Constructor arguments ``remember_arguments`` recorded, by module. Kept outside the module so that
# pickling, ``copy.deepcopy``, TorchScript and ``state_dict`` never see them (an argument such as a
# lambda would make ``torch.save(model)`` fail).
_ARGUMENTS: weakref.WeakKeyDictionary[torch.nn.Module, dict[str, Any]] = weakref.WeakKeyDictionary()

# Dtypes that cannot hold the inverse frequencies without visible phase error.
_LOW_PRECISION = (torch.float16, torch.bfloat16)


def inv_freq(dim: int, base: float, *, device: DeviceLike = None) -> torch.Tensor:
    """Return the ``dim // 2`` float32 inverse frequencies ``base ** (-2i / dim)``.

    Built on ``device`` (pass the positions' device) with an explicit float32 ``arange``,
    so neither ``torch.get_default_dtype()`` nor a module cast can change the result.
    """
    if dim <= 0 or dim % 2:
        raise ValueError(f"rotary dim must be a positive even number, got {dim}")
    exponents = torch.arange(0, dim, 2, dtype=torch.float32, device=device) / dim
    return 1.0 / (base**exponents)


def inv_freq_from(
    builder: Callable[[DeviceLike], torch.Tensor], *, device: DeviceLike
) -> torch.Tensor:
    """Call ``builder(device)`` for scaled variants (linear, NTK, YaRN, llama3, ...).

    The builder must compute in float32 (or float64). A float64 result is rounded to
    float32 once; a 16-bit result is rejected, because casting it up would hide digits that
    are already gone.
    """
    freqs = builder(device)
    if not isinstance(freqs, torch.Tensor):
        raise TypeError(f"inverse-frequency builder returned {type(freqs).__name__}, not a tensor")
    if freqs.dtype in _LOW_PRECISION:
        raise TypeError(
            f"inverse-frequency builder returned {freqs.dtype}; build it in float32 "
            "(casting up afterwards does not restore the lost digits)"
        )
    if not freqs.is_floating_point():
        raise TypeError(f"inverse-frequency builder returned {freqs.dtype}, expected float32")
    if device is not None:
        freqs = freqs.to(device=device)
    return freqs.to(torch.float32)


def remember_arguments(module: torch.nn.Module, arguments: dict[str, Any]) -> None:
    """Record the arguments ``module`` is being constructed with: call it first thing in
    ``__init__`` as ``remember_arguments(self, locals())``. ``apply_keeping_dtype`` uses them to
    rebuild kept state that a meta-device load leaves unfilled. The first call wins, so a subclass
    ``__init__`` that records before calling ``super().__init__`` keeps its own arguments. Nothing
    is stored on the module itself (a copy made with ``copy.deepcopy`` has no record).
    """
    if module not in _ARGUMENTS:
        # A copy of each container: ``__init__`` may go on to pop from its ``**kwargs``.
        _ARGUMENTS[module] = {name: (value.copy() if isinstance(value, (dict, list)) else value)
                              for name, value in arguments.items() if value is not module}


def apply_keeping_dtype(
    module: torch.nn.Module,
    apply: Callable[..., Any],
    fn: Callable[[torch.Tensor], torch.Tensor],
    names: Iterable[str],
    *args: Any,
    learnable: Iterable[str] = (),
    **kwargs: Any,
) -> Any:
    """Run ``nn.Module._apply`` (the bound ``super()._apply``) so that the tensors ``module`` holds
    under ``names`` keep their dtype: ``module.half()``, ``.bfloat16()``, ``.to(dtype)`` move them
    to the new device but no longer round them. ``names`` are attribute names of ``module``'s own
    buffers and parameters; ``{}`` in a name stands for any text (``"{}_inv_freq"``), and a dotted
    name reaches into a child container (``"inv_freqs.{}"``: every entry of an ``nn.ParameterList``
    or ``nn.ParameterDict`` held as ``self.inv_freqs``).

    A Parameter that requires grad is kept only if ``learnable`` names it too: a learned tensor
    left float32 while the other parameters convert means mixed parameter dtypes (FSDP and ZeRO
    flat parameters need one), so that is asked for explicitly; a frozen one is always kept.

    Everything else converts as before, and device moves (``.to(device)``, ``.cuda()``,
    ``to_empty``) still apply to the kept tensors. When ``to_empty`` materialises them from the
    meta device (their memory is then uninitialised, and a non-persistent buffer is in no state
    dict), they are rebuilt on the new device by constructing the module again from the arguments
    ``remember_arguments`` recorded; without recorded arguments they stay as ``to_empty`` left them.
    """
    patterns = _parametrized([name.replace("{}", "*") for name in names], module)
    learned = _parametrized([name.replace("{}", "*") for name in learnable], module)
    kept: set[int] = set()
    for owner, leaf, prefix in _owners(module, patterns):
        learned_here = [p.rsplit(".", 1)[-1] for p in learned if p.rpartition(".")[0] == prefix]
        for table in (owner._buffers, owner._parameters):
            for name, tensor in table.items():
                if tensor is not None and _named(name, [leaf]) \
                        and not (table is owner._parameters and tensor.requires_grad and not _named(name, learned_here)):
                    kept.add(id(tensor))
                    grad = getattr(tensor, "grad", None)
                    if grad is not None:
                        kept.add(id(grad))
    materialised: list[torch.device] = []

    def convert(tensor: torch.Tensor) -> torch.Tensor:
        out = fn(tensor)
        if id(tensor) in kept and isinstance(out, torch.Tensor):
            if out.dtype != tensor.dtype:
                out = tensor.to(device=out.device)
            if tensor.is_meta and not out.is_meta:
                materialised.append(out.device)
        return out

    result = apply(convert, *args, **kwargs)
    if materialised:
        _rebuild_kept(module, patterns, materialised[0])
    return result


def converted_keeping_dtype(fn: Callable[[torch.Tensor], torch.Tensor], tensor: torch.Tensor) -> torch.Tensor:
    """What ``fn``, the conversion ``nn.Module._apply`` hands an override, makes of ``tensor``, keeping its dtype:
    for a plain attribute that a user's ``_apply`` converts like a buffer (``self._freqs = fn(self._freqs)``),
    ``module.half()`` then moves the float32 table to the new device and no longer rounds it. A tensor on the meta
    device gets what ``fn`` made of it (there are no values to keep)."""
    out = fn(tensor)
    if isinstance(out, torch.Tensor) and out.dtype != tensor.dtype and not tensor.is_meta:
        return tensor.to(device=out.device)
    return out


def _parametrized(patterns: list[str], module: torch.nn.Module) -> list[str]:
    """``patterns`` plus, for a name ``torch.nn.utils.parametrize`` has taken over, the tensors it stores in its
    place (``parametrizations.omega.original``, or ``original0``, ``original1``, ...): a dtype cast rounds those,
    and the name itself is then a property computed from them."""
    out = list(patterns)
    for pattern in patterns:
        prefix, _, leaf = pattern.rpartition(".")
        found = _owner(module, pattern)
        chosen = getattr(found[0], "parametrizations", None) if found is not None else None
        for name in getattr(chosen, "keys", lambda: ())():
            if fnmatchcase(name, leaf):
                out.append(f"{prefix + '.' if prefix else ''}parametrizations.{name}.original*")
    return out


def _named(name: str, patterns: list[str]) -> bool:
    return any(fnmatchcase(name, pattern) for pattern in patterns)


def _owner(module: torch.nn.Module, pattern: str) -> tuple[torch.nn.Module, str, str] | None:
    """(module holding the tensors, pattern for their own names, path to it): a dotted ``"inv_freqs.*"``
    names the entries of a child container (``nn.ParameterList``/``nn.ParameterDict``)."""
    prefix, _, leaf = pattern.rpartition(".")
    try:
        return (module.get_submodule(prefix) if prefix else module), leaf, prefix
    except AttributeError:  # the container is not there (yet): nothing of it to keep
        return None


def _owners(module: torch.nn.Module, patterns: list[str]) -> list[tuple[torch.nn.Module, str, str]]:
    return [found for found in (_owner(module, p) for p in patterns) if found is not None]


def _constructor_call(
    cls: type, recorded: dict[str, Any], device: torch.device
) -> tuple[list[Any], dict[str, Any]] | None:
    """Arguments to construct ``cls`` again from what ``remember_arguments`` recorded, or None when
    the recording ``__init__`` is not ``cls``'s (a subclass whose ``__init__`` records nothing)."""
    init = inspect.unwrap(cls.__init__)
    parameters = list(inspect.signature(init).parameters.values())[1:]
    # ``locals()`` at the top of ``__init__`` also holds its free variables (``__class__``).
    free = set(getattr(getattr(init, "__code__", None), "co_freevars", ()))
    if {p.name for p in parameters} != set(recorded) - free:
        return None
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for p in parameters:
        value = recorded[p.name]
        if _is_meta_device(value):  # a module built with ``device="meta"`` is rebuilt where it now lives
            value = device
        if p.kind is p.VAR_POSITIONAL:
            args.extend(value)
        elif p.kind is p.VAR_KEYWORD:
            kwargs.update(value)
        elif p.kind is p.KEYWORD_ONLY:
            kwargs[p.name] = value
        else:
            args.append(value)
    return args, kwargs


def _is_meta_device(value: object) -> bool:
    return (isinstance(value, torch.device) and value.type == "meta") or (isinstance(value, str) and value == "meta")


def _rebuild_kept(module: torch.nn.Module, patterns: list[str], device: torch.device) -> None:
    """Fill the kept tensors (and tensor attributes still on meta) from a module constructed anew."""
    recorded = _ARGUMENTS.get(module)
    call = None if recorded is None else _constructor_call(type(module), recorded, device)
    if call is None:
        return
    try:
        # The constructor's random draws (if any) must not shift the caller's random stream.
        with torch.random.fork_rng(devices=[]), torch.device(device), torch.no_grad():
            fresh = type(module)(*call[0], **call[1])
    except Exception as exc:  # the load itself must not fail because of the rebuild
        warnings.warn(f"{type(module).__name__}: rotary state left unfilled after a meta-device load; "
                      f"constructing it again failed: {type(exc).__name__}: {exc}", RuntimeWarning, stacklevel=4)
        return
    with torch.no_grad():
        for pattern in patterns:
            mine, theirs_found = _owner(module, pattern), _owner(fresh, pattern)
            if mine is None or theirs_found is None:
                continue
            owner, leaf, other = mine[0], mine[1], theirs_found[0]
            for table, theirs in ((owner._buffers, other._buffers), (owner._parameters, other._parameters)):
                for name, tensor in list(table.items()):
                    source = theirs.get(name)
                    if tensor is None or source is None or source.is_meta or not _named(name, [leaf]):
                        continue
                    source = source.to(device=tensor.device)
                    if source.shape == tensor.shape and source.dtype == tensor.dtype:
                        tensor.copy_(source)
                    elif table is owner._buffers:
                        table[name] = source
        # Plain tensor attributes (``self.original_inv_freq = inv_freq``) are not moved by ``to_empty``.
        for name, value in list(vars(module).items()):
            source = vars(fresh).get(name)
            if isinstance(value, torch.Tensor) and value.is_meta and isinstance(source, torch.Tensor) \
                    and not source.is_meta:
                module.__dict__[name] = source


def phase(positions: torch.Tensor, inv_freq: torch.Tensor) -> torch.Tensor:
    """Return the float32 angles ``positions[..., None] * inv_freq``.

    ``positions`` has any leading batch shape ``[..., S]`` (integer or float32); the result
    has shape ``[..., S, dim // 2]``. Integer positions are exact in float32 up to 2**24.
    The product is elementwise on purpose: a matmul here would run in 16 bits under autocast.
    """
    return positions.to(torch.float32)[..., None] * inv_freq.to(torch.float32)


def cos_sin(
    phase: torch.Tensor,
    *,
    attention_scaling: float = 1.0,
    layout: Layout = "half",
    dtype: torch.dtype | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(cos, sin)`` of ``phase``, widened to the full rotary dim.

    ``layout="half"`` repeats the table as ``cat((f, f), -1)`` (rotate-half models such as
    Llama); ``layout="interleaved"`` repeats each frequency twice in place (GPT-J style).
    ``attention_scaling`` multiplies both tables (YaRN, LongRoPE). ``dtype`` is applied
    last, after the trigonometry, and only if given.
    """
    angles = phase.to(torch.float32)
    # Trig on the half-width angles, then widen: same values, half the cos/sin work.
    cos = angles.cos()
    sin = angles.sin()
    if layout == "half":
        cos = torch.cat((cos, cos), dim=-1)
        sin = torch.cat((sin, sin), dim=-1)
    elif layout == "interleaved":
        cos = cos.repeat_interleave(2, dim=-1)
        sin = sin.repeat_interleave(2, dim=-1)
    else:
        raise ValueError(f"layout must be 'half' or 'interleaved', got {layout!r}")
    if attention_scaling != 1.0:
        cos = cos * attention_scaling
        sin = sin * attention_scaling
    if dtype is not None:
        cos = cos.to(dtype)
        sin = sin.to(dtype)
    return cos, sin


def freqs_cis(phase: torch.Tensor) -> torch.Tensor:
    """Return ``exp(i * phase)`` as complex64, for code that rotates with complex numbers.

    Keep the result as a plain attribute or recompute it: a complex buffer loses its
    imaginary part under ``module.to(torch.bfloat16)``.
    """
    angles = phase.to(torch.float32)
    return torch.polar(torch.ones_like(angles), angles)


def rotary_cos_sin(
    positions: torch.Tensor,
    dim: int,
    base: float,
    *,
    device: DeviceLike = None,
    dtype: torch.dtype | None = None,
    attention_scaling: float = 1.0,
    layout: Layout = "half",
) -> tuple[torch.Tensor, torch.Tensor]:
    """One call from positions to ``(cos, sin)`` of shape ``[..., S, dim]``.

    ``device`` defaults to the positions' device. ``dtype`` (for example the query dtype)
    is applied after cos/sin; leave it ``None`` to keep float32.
    """
    target = positions.device if device is None else device
    freqs = inv_freq(dim, base, device=target)
    angles = phase(positions.to(device=target), freqs)
    return cos_sin(angles, attention_scaling=attention_scaling, layout=layout, dtype=dtype)
