"""``--export`` and ``--meta``: the two tracing/loading paths that break buffer-based code."""

from __future__ import annotations

import contextlib
import logging
import re
import warnings
from collections.abc import Callable, Iterator
from dataclasses import replace

import torch
from torch import nn

from ropelint.probe.compare import Reference, compare
from ropelint.probe.invoke import DISCOVERY_POSITIONS, CallContext, Invocation, one_line
from ropelint.probe.results import CheckResult
from ropelint.probe.signature import Arg, Slot

EXPORT_TRACE_LENGTH = 16
EXPORT_CHECK_LENGTH = 37  # a length the trace never saw
_SUGGESTED_MAX = re.compile(r"seq = Dim\('seq', max=(\d+)\)")
EXPORT_ATOL = 1e-6


class _TensorInputs(nn.Module):
    """Calls the target with ``x`` and ``positions`` as the only tensor inputs.

    A length-taking target gets ``x.shape[axis]`` as its length, so the length stays
    symbolic under ``torch.export`` instead of being baked in as a constant.
    """

    def __init__(self, invocation: Invocation, inner: nn.Module | None, ctx: CallContext) -> None:
        super().__init__()
        self.invocation = invocation
        self.inner = inner
        self.ctx = ctx

    def _value(self, arg: Arg, x: torch.Tensor, positions: torch.Tensor) -> object:
        if isinstance(arg, Slot):
            if arg.name == "x":
                return x
            if arg.name == "positions":
                return positions
            if arg.name == "positions_1d":
                return positions[0]
            if arg.name == "seq_len":
                return x.shape[_seq_axis(self.invocation)]
        return self.invocation.resolve(arg, self.ctx)

    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> object:
        binding = self.invocation.plan.binding
        args = [self._value(a, x, positions) for a in binding.args]
        kwargs = {k: self._value(a, x, positions) for k, a in binding.kwargs}
        fn = self.inner if self.inner is not None else self.invocation.target
        return fn(*args, **kwargs)  # type: ignore[operator]


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Export failures are reported in one line; keep torch's own warnings and logs out."""
    logger = logging.getLogger("torch")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


def _seq_axis(invocation: Invocation) -> int:
    return invocation.plan.seq_axis


def _inputs(invocation: Invocation, ctx: CallContext) -> tuple[torch.Tensor, torch.Tensor]:
    return invocation.make_x(ctx), ctx.positions[None, :]


def _context(invocation: Invocation, head_dim: int, base: float, positions: torch.Tensor,
             device: str = "cpu") -> CallContext:
    return replace(invocation.context(head_dim, base, positions, torch.float32, device),
                   materialize=True)


def export_check(invocation: Invocation, pair: tuple[int, float]) -> CheckResult:
    """Export with a dynamic sequence length, then run the program at an unseen length."""
    head_dim, base = pair
    trace_ctx = _context(invocation, head_dim, base, torch.arange(EXPORT_TRACE_LENGTH))
    check_ctx = _context(invocation, head_dim, base, torch.arange(EXPORT_CHECK_LENGTH))
    bound = None
    while True:
        seq = torch.export.Dim("seq", min=2, max=bound or 1 << 20)
        dynamic = {"x": {_seq_axis(invocation): seq}, "positions": {1: seq}}
        try:
            with _quiet():
                wrapper = _TensorInputs(invocation,
                                        invocation.instantiate(head_dim, base, torch.device("cpu")),
                                        trace_ctx)
                program = torch.export.export(wrapper, _inputs(invocation, trace_ctx),
                                              dynamic_shapes=dynamic)
                got = program.module()(*_inputs(invocation, check_ctx))
            break
        except Exception as exc:  # export failures come in many types
            # A module that caches tables for N positions guards the length to <= N, and torch
            # suggests that bound; exporting with it is what its users do, so try once more.
            suggested = _SUGGESTED_MAX.search(str(exc))
            if bound is None and suggested and int(suggested.group(1)) >= EXPORT_CHECK_LENGTH:
                bound = int(suggested.group(1))
                continue
            return CheckResult("export", False, f"torch.export with a dynamic length failed: "
                                                f"{one_line(exc)}")
    try:
        table = invocation.read(got, check_ctx)
    except Exception as exc:
        return CheckResult("export", False, f"exported output not readable: {one_line(exc)}")
    with torch.no_grad():
        eager = invocation.read(
            _TensorInputs(invocation, invocation.instantiate(head_dim, base, torch.device("cpu")),
                          check_ctx)(*_inputs(invocation, check_ctx)),
            check_ctx,
        )
    drift = max(float((table.first - eager.first).abs().max()),
                float((table.second - eager.second).abs().max()) if table.second is not None
                else 0.0)
    if not drift <= EXPORT_ATOL:
        return CheckResult("export", False,
                           f"exported program differs from eager by {drift:.3g} at length "
                           f"{EXPORT_CHECK_LENGTH}")
    graphs = [m for m in program.graph_module.modules() if isinstance(m, torch.fx.GraphModule)]
    note = ("; the graph holds an autocast node" if any("autocast" in g.code for g in graphs)
            else "")
    upto = f" up to {bound} (the module's own guard)" if bound else ""
    return CheckResult("export", True,
                       f"exported with a dynamic length{upto}; matches eager at length "
                       f"{EXPORT_CHECK_LENGTH}{note}")


def _empty_poisoned(device: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """What ``to_empty`` hands ``_apply`` (``empty_like`` on ``device``), with the uninitialised
    memory made visibly wrong; going through ``_apply`` like ``to_empty`` lets a module's own
    ``_apply`` fill what no state dict will."""
    def empty(tensor: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(tensor, device=device)
        if out.is_floating_point() or out.is_complex():
            return out.fill_(float("nan"))
        return out.fill_(False if out.dtype == torch.bool else -(2**31))
    return empty


def meta_check(invocation: Invocation, pair: tuple[int, float]) -> CheckResult:
    """Forward on the meta device; then meta -> to_empty -> load_state_dict -> forward."""
    head_dim, base = pair
    meta = torch.device("meta")
    meta_ctx = _context(invocation, head_dim, base, torch.arange(EXPORT_TRACE_LENGTH), "meta")
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            with meta:
                module = invocation.instantiate(head_dim, base, meta)
                invocation.call(module, meta_ctx)
    except Exception as exc:
        return CheckResult("meta", False, f"forward on the meta device failed: {one_line(exc)}")
    if module is None:
        return CheckResult("meta", True, "runs on the meta device (a function holds no state)")
    positions = torch.tensor(DISCOVERY_POSITIONS, dtype=torch.long)
    ctx = _context(invocation, head_dim, base, positions)
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            reference_module = invocation.instantiate(head_dim, base, torch.device("cpu"))
            assert reference_module is not None
            loaded = module._apply(_empty_poisoned("cpu"))  # module.to_empty(device="cpu")
            loaded.load_state_dict(reference_module.state_dict())
            table = invocation.read(invocation.call(loaded, ctx), ctx)
    except Exception as exc:
        return CheckResult("meta", False, f"meta -> to_empty -> load_state_dict -> forward "
                                          f"failed: {one_line(exc)}")
    result = compare(table, invocation.reading.compare_layout,
                     Reference(positions, head_dim, base))
    if not result.passed:
        return CheckResult("meta", False,
                           "after meta -> to_empty -> load_state_dict the output is wrong "
                           f"(max error {result.max_error:.3g}): state outside the state dict "
                           "was never filled")
    return CheckResult("meta", True, "meta forward runs; meta -> to_empty -> load_state_dict "
                                     "-> forward matches the reference")
