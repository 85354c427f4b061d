"""Run the probe matrix on a loaded class or function: ``run_matrix``."""

from __future__ import annotations

import dataclasses

import contextlib
import copy
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence

import torch

from ropelint.probe.checks import export_check, meta_check
from ropelint.probe.compare import Reference, compare
from ropelint.probe.invoke import Invocation, discover, one_line
from ropelint.probe.matrix import (
    DEFAULT_PAIRS,
    autocast_context,
    build_cases,
    default_autocasts,
    default_positions,
    device_of,
)
from ropelint.probe.readings import ReadError, dtype_name
from ropelint.probe.results import Case, CaseResult, ProbeReport


@contextlib.contextmanager
def single_threaded() -> Iterator[None]:
    """Run with one intra-op thread, then restore the caller's setting.

    The probe's tensors are small. On a busy 2-core machine, OpenMP workers waiting at
    every small op made one 30-case probe take 5.6 s instead of 0.23 s.
    """
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def run_matrix(
    target: object,
    *,
    positions: Sequence[int] | None = None,
    head_dims_bases: Sequence[tuple[int, float]] | None = None,
    autocasts: Sequence[str] | None = None,
    init: str | Mapping[str, object] | None = None,
    call: str | None = None,
    export: bool = False,
    meta: bool = False,
    symbol: str | None = None,
    warm_up: bool = False,
    activations: str = "module",
) -> ProbeReport:
    """Probe ``target`` (a rotary ``nn.Module`` class or a table-building function).

    Defaults: the notes' 24 cases + 6 controls over ``default_positions()``; CUDA autocast
    cases are added when CUDA is available. ``init``/``call`` take the same text as the
    ``--init``/``--call`` options. ``warm_up``: run one float32 forward before the module is
    converted, as a model used before ``.half()`` is (state built lazily on the first forward is
    then converted too). ``activations``: "module" feeds activations in the module's dtype, "autocast"
    in the autocast dtype under autocast. Raises ``ProbeSetupError`` when it cannot build or call.
    """
    with single_threaded():
        return _run_matrix(target, positions=positions, head_dims_bases=head_dims_bases,
                           autocasts=autocasts, init=init, call=call, export=export, meta=meta,
                           symbol=symbol, warm_up=warm_up, activations=activations)


def _run_matrix(
    target: object,
    *,
    positions: Sequence[int] | None,
    head_dims_bases: Sequence[tuple[int, float]] | None,
    autocasts: Sequence[str] | None,
    init: str | Mapping[str, object] | None,
    call: str | None,
    export: bool,
    meta: bool,
    symbol: str | None,
    warm_up: bool = False,
    activations: str = "module",
) -> ProbeReport:
    name = symbol or getattr(target, "__qualname__", repr(target))
    pos = tuple(default_positions() if positions is None else positions)
    if not pos or min(pos) < 0:
        raise ValueError("positions must be non-negative and non-empty")
    pairs = tuple(head_dims_bases) if head_dims_bases else DEFAULT_PAIRS
    chosen = tuple(autocasts) if autocasts else default_autocasts(torch.cuda.is_available())
    invocation = discover(target, name, pair=pairs[0], init=init, call=call, far=max(pos))
    if invocation.fixed_head_dim or invocation.fixed_base:
        # A literal from --init pins the module; the reference must use the same values.
        # Values the code hard-codes pin it too, but keep the matrix its usual size.
        pinned = tuple((invocation.fixed_head_dim or d, invocation.fixed_base or b)
                       for d, b in pairs)
        pairs = pinned if invocation.inferred_pair else tuple(dict.fromkeys(pinned))
    position_tensor = torch.tensor(pos, dtype=torch.long)
    references = {pair: Reference(position_tensor, *pair) for pair in dict.fromkeys(pairs)}
    built: dict[tuple[object, ...], torch.nn.Module | None] = {}
    results = tuple(
        run_case(invocation, case, references[(case.head_dim, case.base)], built, warm_up=warm_up)
        for case in build_cases(pairs, chosen, activations)
    )
    checks = []
    if export:
        checks.append(export_check(invocation, pairs[0]))
    if meta:
        checks.append(meta_check(invocation, pairs[0]))
    return ProbeReport(name, results, invocation.describe(), tuple(checks))


def prepare_module(invocation: Invocation, case: Case, device: torch.device, length: int,
                   built: dict[tuple[object, ...], torch.nn.Module | None] | None = None,
                   warm: Callable[[torch.nn.Module], object] | None = None) -> torch.nn.Module | None:
    """Build in float32, then convert the way mixed-precision setups do.

    ``length`` (the largest probed position + 1) goes to maximum-length parameters.
    ``built`` keeps one pristine float32 module per (head_dim, base, device): each case
    converts a deep copy of it, which is the same state as a fresh build and much cheaper
    for modules that precompute long tables.
    """
    key = (case.head_dim, case.base, str(device), length)
    if built is None or key not in built:
        module = invocation.instantiate(case.head_dim, case.base, device, length)
        if built is not None:
            built[key] = module
    if built is not None:
        pristine = built[key]
        try:
            module = copy.deepcopy(pristine)
        except Exception:  # some state cannot be copied: build afresh
            module = invocation.instantiate(case.head_dim, case.base, device, length)
    if module is None:
        return None  # functions hold no state; the case dtype reaches them as ``dtype``
    module.to(device)
    if warm is not None:
        with torch.no_grad():
            warm(module)
    if not case.control:
        module.to(getattr(torch, case.module_dtype))
        if case.cast_back:
            module.float()
    return module


def _mixed_16bit_autocast(exc: Exception, case: Case) -> bool:
    return "autocast::prioritize" in str(exc) and case.activations == "module" and case.autocast != "off" \
        and not case.control and case.activation_dtype != dataclasses.replace(case, activations="autocast").activation_dtype


def run_case(invocation: Invocation, case: Case, reference: Reference,
             built: dict[tuple[object, ...], torch.nn.Module | None] | None = None,
             *, warm_up: bool = False) -> CaseResult:
    device = torch.device(device_of(case.autocast))
    try:
        with warnings.catch_warnings():
            # Casting a complex buffer to bfloat16 warns; the comparison reports it better.
            warnings.simplefilter("ignore")
            ctx = invocation.context(case.head_dim, case.base, reference.positions,
                                     getattr(torch, case.activation_dtype), device)
            warm = None
            if warm_up:
                float32_ctx = invocation.context(case.head_dim, case.base, reference.positions, torch.float32, device)
                warm = lambda m: invocation.call(m, float32_ctx)  # noqa: E731
            module = prepare_module(invocation, case, device, ctx.length, built, warm)
            with torch.no_grad(), autocast_context(case.autocast):
                output = invocation.call(module, ctx)
            table = invocation.read(output, ctx)
    except ReadError as exc:
        return CaseResult(case, False,
                          error=f"output not readable as {invocation.reading.describe()}: {exc}")
    except Exception as exc:  # the user's code raising under this case is a failed case
        if _mixed_16bit_autocast(exc, case):
            # A float16 module's own ``torch.cat`` of float16 activations raises under CPU bfloat16 autocast
            # (and the reverse): in a model, q and k come out of autocast's linear layers in its dtype.
            return run_case(invocation, dataclasses.replace(case, activations="autocast"), reference, built,
                            warm_up=warm_up)
        return CaseResult(case, False, error=one_line(exc))
    result = compare(table, invocation.reading.compare_layout, reference)
    return CaseResult(case, result.passed, dtype_name(table.dtype), result.max_error,
                      result.worst_ratio, result.first_failing_position)
