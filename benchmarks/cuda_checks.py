"""Checks that need a CUDA GPU, which CI (CPU only) cannot run.

    python benchmarks/cuda_checks.py [--quick] [--json OUT] [FIXED_FILE_OR_DIR ...]

1. The runtime helper on the GPU: ``rotary_cos_sin`` under CUDA autocast (bfloat16 and float16)
   against a float64 reference with the per-position tolerance of ROPE_NOTES section 4, next to
   the matmul outer product it replaces (which must fail there); ``torch.export`` with a dynamic
   sequence length and ``torch.compile(fullgraph=True)`` on the GPU, both equal to eager.
2. Every fixed fixture rotary (and every rotary of the files named on the command line) through
   the probe matrix, which adds the CUDA autocast cases when a GPU is present: 40 cases + 6
   controls. A fixed symbol with no finding left must pass all of them; the original's result is
   printed beside it.

Exit status 1 when a helper check or a fixed symbol fails, 2 without a GPU.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import multiprocessing
import os
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from ropelint.api import find_rotary_symbols  # noqa: E402
from ropelint.engine import check_text  # noqa: E402
from ropelint.probe import ProbeSetupError, run_matrix  # noqa: E402
from ropelint.probe.loader import load_file, resolve_symbol  # noqa: E402
from ropelint.probe.tolerance import float32_term  # noqa: E402
from ropelint.rules import BY_CODE  # noqa: E402
from ropelint.runtime import inv_freq, rotary_cos_sin  # noqa: E402

NUMERIC = {"RPL001", "RPL002", "RPL003", "RPL005", "RPL007", "RPL008", "RPL009"}
POSITIONS = [*range(0, 32770, 97), 32769, 131000, 131071]


def _reference(positions: torch.Tensor, dim: int, base: float) -> tuple[torch.Tensor, torch.Tensor]:
    exponent = torch.arange(0, dim, 2, dtype=torch.float64) / dim
    angles = positions.to(torch.float64)[:, None] * base ** -exponent
    return angles.cos(), angles.sin()


def _worst(got: tuple[torch.Tensor, ...], ref: tuple[torch.Tensor, ...], positions: torch.Tensor) -> float:
    """Largest error over the allowance (below 1 passes), over the first half-width columns."""
    allowed = float32_term(positions)[:, None]
    half = ref[0].shape[-1]
    return max(float(((g[..., :half].double().cpu() - r).abs() / allowed).max()) for g, r in zip(got, ref))


def helper_checks() -> list[tuple[str, bool, str]]:
    out: list[tuple[str, bool, str]] = []
    positions = torch.tensor(POSITIONS, device="cuda")
    for dim, base in ((64, 1e4), (128, 5e5)):
        ref = _reference(positions.cpu(), dim, base)
        for dtype in (torch.bfloat16, torch.float16):
            with torch.autocast("cuda", dtype=dtype):
                got = rotary_cos_sin(positions, dim, base)
                freqs = inv_freq(dim, base, device="cuda")
                angles = positions.float()[:, None] @ freqs[None, :]  # the pattern the fix replaces
            ratio = _worst(got, ref, positions.cpu())
            out.append((f"helper cuda autocast {dtype} dim {dim}", ratio < 1 and got[0].dtype == torch.float32,
                        f"max error / allowance {ratio:.3f}, dtype {got[0].dtype}"))
            bad = _worst((angles.cos(), angles.sin()), ref, positions.cpu())
            # NaN counts as failing: float16 overflows past position 65504.
            out.append((f"matmul under cuda autocast {dtype} dim {dim} fails", not bad <= 1,
                        f"max error / allowance {bad:.3g} (phase dtype {angles.dtype})"))

    class Rotary(torch.nn.Module):
        def forward(self, x: torch.Tensor, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return rotary_cos_sin(position_ids, 128, 5e5, dtype=x.dtype)

    module = Rotary()
    x = torch.zeros(1, 8, 128, device="cuda", dtype=torch.bfloat16)
    ids = torch.arange(8, device="cuda")[None]
    seq = torch.export.Dim("seq", min=2, max=1 << 17)
    exported = torch.export.export(module, (x, ids), dynamic_shapes=({1: seq}, {1: seq}))
    long_ids = torch.arange(30000, 30000 + 4096, device="cuda")[None]
    long_x = torch.zeros(1, 4096, 128, device="cuda", dtype=torch.bfloat16)
    eager = module(long_x, long_ids)
    got = exported.module()(long_x, long_ids)
    same = all(torch.equal(a, b) for a, b in zip(eager, got))
    out.append(("torch.export on cuda, dynamic seq, 4096 positions from 30000", same, f"equal to eager: {same}"))
    compiled = torch.compile(module, fullgraph=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        got = compiled(long_x, long_ids)
    diff = max(float((a.float() - b.float()).abs().max()) for a, b in zip(eager, got))
    # Fused float32 arithmetic may round differently before the final bfloat16 cast: one ulp near 1.
    out.append(("torch.compile(fullgraph=True) on cuda under bf16 autocast", diff <= 2.0**-7,
                f"max |compiled - eager| {diff:.3g} (bf16 output, allowance 2**-7)"))
    return out


def _probe(path: Path, symbol: str, autocasts: tuple[str, ...]) -> tuple[str, int, int, int, int] | str:
    try:
        report = run_matrix(resolve_symbol(load_file(str(path)), symbol, str(path)), symbol=symbol,
                            autocasts=autocasts)
    except ProbeSetupError as exc:
        return f"setup: {str(exc).splitlines()[0]}"
    except Exception as exc:  # noqa: BLE001 - a module that raises is a result to print, not a crash
        return f"raised {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    if "wrong even in float32" in report.how:
        return "probe could not infer the call"
    return report.how, report.passed, report.total, report.controls_passed, report.controls_total


def _codes_in(path: Path, symbol: str) -> set[str]:
    result = check_text(path.name, path.read_text(), frozenset(BY_CODE))
    return {d.code for d in result.diagnostics if d.symbol.split(".")[0] == symbol}


def _check_one(original: Path | None, fixed: Path, symbol: str, autocasts: tuple[str, ...]) -> dict:
    start = time.perf_counter()
    after = _probe(fixed, symbol, autocasts)
    before = _probe(original, symbol, autocasts) if original is not None else None
    row = {"file": fixed.name, "symbol": symbol, "fixed": after, "original": before,
           "seconds": round(time.perf_counter() - start, 1)}
    if isinstance(after, tuple):
        row["ok"] = after[1] == after[2] and after[3] == after[4]
    return row


def module_checks(pairs: list[tuple[Path | None, Path]], quick: bool, autocasts: tuple[str, ...],
                  jobs: int) -> list[dict]:
    work = []
    for original, fixed in pairs:
        for symbol in find_rotary_symbols(original or fixed):
            if not _codes_in(fixed, symbol) & NUMERIC:
                work.append((None if quick else original, fixed, symbol, autocasts))
    rows = []
    # Each probe runs single-threaded: processes use the cores (spawned, so each has its own CUDA context).
    with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        for row in pool.map(_check_one, *zip(*work)):
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("paths", nargs="*", type=Path, help="fixed files or folders to probe too")
    parser.add_argument("--quick", action="store_true", help="skip probing the fixture originals")
    parser.add_argument("--json", type=Path, default=None)
    # The CPU autocast cases run in CI; here the GPU's own autocast is what is new.
    parser.add_argument("--autocast", default="off,cuda-bf16,cuda-fp16")
    parser.add_argument("--jobs", type=int, default=max(1, min(8, (os.cpu_count() or 2) // 2)))
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device: these checks need one", file=sys.stderr)
        return 2
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}", flush=True)
    failed = 0
    helper = helper_checks()
    for name, ok, detail in helper:
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}", flush=True)
        failed += not ok
    fixtures = ROOT / "fixtures"
    pairs: list[tuple[Path | None, Path]] = [(fixtures / "cases" / f.name, f)
                                             for f in sorted((fixtures / "fixed").glob("*.py"))]
    for path in args.paths:
        pairs += [(None, f) for f in (sorted(path.glob("*.py")) if path.is_dir() else [path])]
    rows = module_checks(pairs, args.quick, tuple(args.autocast.split(",")), args.jobs)
    probed = [r for r in rows if "ok" in r]
    bad = [r for r in probed if not r["ok"]]
    failed += len(bad)
    print(f"fixed rotaries probed with CUDA autocast: {len(probed)}, all cases passed: {len(probed) - len(bad)}, "
          f"not probed (setup): {len(rows) - len(probed)}")
    for r in bad:
        print(f"FAIL {r['file']}::{r['symbol']}: {r['fixed']}")
    if args.json is not None:
        args.json.write_text(json.dumps({"helper": helper, "modules": rows}, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
