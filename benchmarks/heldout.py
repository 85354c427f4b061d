#!/usr/bin/env python3
"""Score ropelint on a held-out round: detection, the safe fix, and the numbers after it.

A round is a folder written by someone who never read ropelint's code::

    ROUND/cases/NN_name.py      model source files, buggy or correct
    ROUND/harness/NN_name.py    build(mod, head_dim, base) -> object a user would convert
                                tables(mod, obj, positions, x_dtype) -> (cos, sin), [S, head_dim // 2]
                                optional inv_freq64(head_dim, base) for frequencies that are not
                                base ** (-arange(0, d, 2) / d)
    ROUND/MANIFEST.json         [{"file": "cases/NN_name.py", "verdict": "buggy" | "correct", ...}]
    ROUND/e2e/NN_name.py        optional: run(mod, dtype) -> the output of the largest piece of the model using
                                the rotary (a block, the model), converted to dtype, called as its code calls it

For each round the script

1. checks the originals (``ropelint check --format json``), with this checkout and, with
   ``--base DIR``, with another checkout (a ``git worktree`` of an earlier commit);
2. copies the cases to ``--work``, runs ``ropelint fix --write`` (safe fixes only), then a
   second ``ropelint fix`` that must change nothing, ``py_compile``s every file and checks
   the fixed files again;
3. drives every case through its harness, original and fixed, in the matrix of ROPE_NOTES
   section 4: the object converted to float16/bfloat16, converted back or not, autocast
   off/cpu-bf16/cpu-fp16, at (64, 1e4) and (128, 5e5): 24 cases, plus 6 float32 controls,
   against float64 cos/sin with the per-position tolerance of ``ropelint probe``.

4. where the round has an ``e2e`` harness, runs the model piece in float32, bfloat16 and float16, original and
   fixed: a fix must not make it raise where the original ran, nor change the dtype of what it returns (a fix
   that hands float32 tables to 16-bit queries makes the attention raise on mixed dtypes), nor change what the
   float32 piece computes. (The harness converts with ``.to(dtype)``, float32 included: a complex ``freqs_cis``
   buffer loses its imaginary part to ``.to(torch.float32)`` in the original, and a fix keeping it complex then
   shows as a changed float32 output that is the original's bug; read those by hand.)

One line per file goes to stdout (``ok``, ``MISS``, ``FLAG``, ``LEFT``, ``NUM``, ``MIXED``,
``SECOND``, ``COMPILE``, ``E2E``); ``--json OUT`` keeps everything. ``MIXED``: the fixed file passes every case
but those of a float16 model under bfloat16 autocast (or the reverse), where it either raised in
``torch.cat`` of the two 16-bit dtypes (the line is named: usually the activations' ``rotate_half``,
which raises for the original too) or came out within one bfloat16 rounding (tables made in the model's
16-bit dtype, promoted to float32 by the other's queries or cast to float16 ones). Each numeric run is a subprocess
with a time limit, so a harness that hangs or crashes costs one line, not the round.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import py_compile
import shutil
import subprocess
import sys
import traceback
import uuid
from pathlib import Path
from typing import Any

PAIRS = ((64, 1e4), (128, 5e5))
CONVERSIONS = ("float16", "bfloat16")
AUTOCASTS = ("off", "cpu-bf16", "cpu-fp16")


def _ropelint(args: list[str], cwd: Path, base: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if base is not None:
        env["PYTHONPATH"] = str(base)
    return subprocess.run([sys.executable, "-m", "ropelint", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def _findings(folder: Path, base: Path | None = None) -> dict[str, list[str]]:
    done = _ropelint(["check", ".", "--format", "json", "--no-cache", "--exit-zero"], folder, base)
    if done.returncode not in (0, 1):
        raise SystemExit(f"ropelint check failed in {folder}:\n{done.stderr}")
    found: dict[str, list[str]] = {}
    for item in json.loads(done.stdout or "[]"):
        safety = (item.get("fix") or {}).get("safety", "none")
        found.setdefault(Path(item["path"]).name, []).append(
            f"{item['code']}:{item['line']}:{safety}")
    return found


# --- the numeric matrix (runs in a child process per case file) --------------------------


def _load(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(f"heldout_{uuid.uuid4().hex}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _matrix(case: Path, harness_path: Path) -> dict[str, Any]:
    import torch

    from ropelint.probe.matrix import default_positions
    from ropelint.probe.tolerance import trig_tolerance

    harness = _load(harness_path)
    positions = torch.tensor(default_positions(), dtype=torch.int64)
    dtypes = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}
    rows: list[dict[str, Any]] = []
    for head_dim, base in PAIRS:
        if hasattr(harness, "inv_freq64"):
            inv = harness.inv_freq64(head_dim, base).to(torch.float64)
        else:
            inv = 1.0 / (float(base) ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
        phase = positions.to(torch.float64)[:, None] * inv
        ref_cos, ref_sin = phase.cos(), phase.sin()
        cases = [("float32", False, a) for a in AUTOCASTS]
        cases += [(c, back, a) for c in CONVERSIONS for back in (False, True) for a in AUTOCASTS]
        for conversion, back, autocast in cases:
            row: dict[str, Any] = {"pair": [head_dim, base], "conversion": conversion,
                                   "back": back, "autocast": autocast}
            try:
                module = _load(case)
                obj = harness.build(module, head_dim, base)
                if conversion != "float32":
                    obj = obj.to(dtypes[conversion])
                    if back:
                        obj = obj.float()
                x_dtype = dtypes[conversion] if conversion != "float32" and not back else torch.float32
                with torch.no_grad():
                    if autocast == "off":
                        cos, sin = harness.tables(module, obj, positions, x_dtype)
                    else:
                        dtype = torch.bfloat16 if autocast == "cpu-bf16" else torch.float16
                        with torch.autocast("cpu", dtype=dtype):
                            cos, sin = harness.tables(module, obj, positions, x_dtype)
                out_dtype = cos.dtype
                cos = cos.detach().to("cpu", torch.float64).reshape(ref_cos.shape)
                sin = sin.detach().to("cpu", torch.float64).reshape(ref_sin.shape)
                allowed_cos = trig_tolerance(ref_cos, positions, out_dtype)
                allowed_sin = trig_tolerance(ref_sin, positions, out_dtype)
                err_cos = torch.nan_to_num((cos - ref_cos).abs(), nan=float("inf"))
                err_sin = torch.nan_to_num((sin - ref_sin).abs(), nan=float("inf"))
                ratio = torch.maximum(err_cos / allowed_cos, err_sin / allowed_sin)
                row.update(ratio=float(ratio.max()), error=float(torch.maximum(err_cos, err_sin).max()),
                           dtype=str(out_dtype).removeprefix("torch."))
                row["passed"] = row["ratio"] < 1.0
                mixed = conversion != "float32" and not back and autocast != "off" \
                    and (conversion == "float16") == (autocast == "cpu-bf16")
                if mixed and not row["passed"] and out_dtype in (torch.float32, torch.float16):
                    # A float16 model under bfloat16 autocast (or the reverse): tables made in the model's 16-bit
                    # dtype meet activations of the other and come out promoted to float32 (or a bfloat16 model's
                    # tables are cast to the float16 queries); within one bfloat16 rounding they are what that
                    # model computes, not a lost phase.
                    coarse = torch.maximum((cos - ref_cos).abs() / trig_tolerance(ref_cos, positions, torch.bfloat16),
                                           (sin - ref_sin).abs() / trig_tolerance(ref_sin, positions, torch.bfloat16))
                    row["mixed"] = bool(coarse.max() < 1.0)
            except Exception as exc:  # a harness or module failure is one failed case
                row.update(passed=False, raised=f"{type(exc).__name__}: {exc}"[:300])
                # Where in the case file it raised (the innermost frame there): a float16 model under bfloat16
                # autocast (or the reverse) makes ``torch.cat`` of 16-bit tensors raise wherever the file
                # concatenates activations, outside the rotary as well as in it.
                frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == case]
                if frames:
                    row["raised_at"] = f"line {frames[-1].lineno}: {frames[-1].line}"
                mixed = conversion != "float32" and not back and autocast != "off" \
                    and (conversion == "float16") == (autocast == "cpu-bf16")
                if mixed and "autocast::prioritize" in str(exc):
                    row["mixed"] = True
            rows.append(row)
    controls = [r for r in rows if r["conversion"] == "float32"]
    converted = [r for r in rows if r["conversion"] != "float32"]
    return {"controls": sum(r["passed"] for r in controls), "cases": sum(r["passed"] for r in converted),
            "mixed": sum(bool(r.get("mixed")) for r in converted),
            "mixed_at": sorted({r.get("raised_at", "no raise: within one bfloat16 rounding")
                                for r in converted if r.get("mixed")})[:3],
            "worst": max((r.get("ratio", float("inf")) for r in converted), default=0.0),
            "raised": sorted({r["raised"] for r in rows if "raised" in r})[:3], "rows": rows}


def _e2e(case: Path, harness_path: Path) -> dict[str, Any]:
    import torch

    harness = _load(harness_path)
    out: dict[str, Any] = {}
    for name in ("float32", "bfloat16", "float16"):
        try:
            with torch.no_grad():
                result = harness.run(_load(case), getattr(torch, name))
            out[name] = str(result.dtype).removeprefix("torch.")
            if name == "float32":  # what the model computes, to compare original and fixed (a fix must not change it)
                flat = result.detach().to(torch.float64).flatten()
                out["float32_values"] = [float(v) for v in flat[:: max(1, flat.numel() // 64)][:64]]
        except Exception as exc:  # what the original does is the reference: raising is recorded, not fatal
            out[name] = f"raised {type(exc).__name__}: {exc}"[:200]
    return out


def _child(mode: str, case: Path, harness: Path, timeout: float) -> tuple[dict[str, Any] | None, str]:
    """(what ``heldout.py MODE CASE HARNESS`` printed, or None and why it printed nothing): each run in a child
    process with a time limit, so a harness that hangs or crashes costs one line, not the round."""
    try:
        done = subprocess.run([sys.executable, __file__, mode, str(case), str(harness)],
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timeout after {timeout:.0f} s"
    if done.returncode != 0 or not done.stdout.strip():
        return None, (done.stderr.strip().splitlines() or ["no output"])[-1]
    return json.loads(done.stdout.strip().splitlines()[-1]), ""


def _numeric(case: Path, harness: Path, timeout: float) -> dict[str, Any]:
    result, why = _child("--numeric", case, harness, timeout)
    return result if result is not None else {"controls": 0, "cases": 0, "raised": [why]}


# --- one round ---------------------------------------------------------------------------


def _round(folder: Path, work: Path, base: Path | None, numeric: bool, timeout: float,
           select: set[str]) -> list[dict[str, Any]]:
    manifest = {Path(e["file"]).name: e for e in json.loads((folder / "MANIFEST.json").read_text())}
    originals = folder / "cases"
    found = _findings(originals)
    found_base = _findings(originals, base) if base else None
    fixed = work / folder.name
    shutil.rmtree(fixed, ignore_errors=True)
    shutil.copytree(originals, fixed)
    _ropelint(["fix", "--write", "--no-cache", "-q", "."], fixed)
    second = _ropelint(["fix", "--no-cache", "."], fixed)
    left = _findings(fixed)
    results = []
    for name, entry in sorted(manifest.items()):
        if select and not any(s in f"{folder.name}/{name}" for s in select):
            continue
        case = originals / name
        out: dict[str, Any] = {"round": folder.name, "file": name, "verdict": entry.get("verdict"),
                               "found": found.get(name, []), "left": left.get(name, []),
                               "second": f"+++ {name}" in second.stdout or f"/{name}" in second.stdout}
        if found_base is not None:
            out["found_base"] = found_base.get(name, [])
        try:
            py_compile.compile(str(fixed / name), doraise=True)
            out["compiles"] = True
        except py_compile.PyCompileError as exc:
            out["compiles"] = False
            out["compile_error"] = str(exc)[:300]
        out["changed"] = (fixed / name).read_bytes() != case.read_bytes()
        harness = folder / "harness" / name
        if numeric and harness.exists():
            out["original"] = _numeric(case, harness, timeout)
            out["fixed"] = _numeric(fixed / name, harness, timeout) if out["changed"] else out["original"]
        e2e = folder / "e2e" / name
        if numeric and e2e.exists() and out["changed"]:
            out["e2e_original"] = _child("--e2e", case, e2e, timeout)[0]
            out["e2e_fixed"] = _child("--e2e", fixed / name, e2e, timeout)[0]
        results.append(out)
    return results


def _line(r: dict[str, Any]) -> str:
    buggy = r["verdict"] == "buggy"
    tags = []
    if buggy and not r["found"]:
        tags.append("MISS")
    if not buggy and r["found"]:
        tags.append("FLAG")
    if r["left"]:
        tags.append("LEFT")
    if r["second"]:
        tags.append("SECOND")
    if not r["compiles"]:
        tags.append("COMPILE")
    num = ""
    if "fixed" in r:
        o, f = r["original"], r["fixed"]
        num = f" orig {o['cases']}/24+{o['controls']}/6 fixed {f['cases']}/24+{f['controls']}/6"
        if f.get("mixed") and f["cases"] + f["mixed"] == 24 and f["controls"] == 6:
            # Every failure is a mixed float16/bfloat16 autocast case: reported, not counted.
            num += f" ({f['mixed']} mixed-autocast cases: {'; '.join(f['mixed_at']) or '?'})"
            tags.append("MIXED")
        elif f["cases"] != 24 or f["controls"] != 6:
            tags.append("NUM")
        if buggy and o["cases"] == 24 and o["controls"] == 6:
            tags.append("HARNESS-PASSES-ORIGINAL")
        if f.get("raised"):
            num += f" raised {f['raised'][0]}"
    base = ""
    if "found_base" in r and sorted(r["found_base"]) != sorted(r["found"]):
        base = f" base={','.join(r['found_base']) or '-'}"
    if "e2e_fixed" in r:
        o, f = r["e2e_original"] or {}, r["e2e_fixed"] or {}
        worse = [d for d in ("float32", "bfloat16", "float16") if o.get(d, "").split(" ")[0] != "raised"
                 and f.get(d) != o.get(d)]
        before, after = o.get("float32_values"), f.get("float32_values")
        # Float32 with positions 0..15: the fix may reorder float32 arithmetic, not change the result.
        moved = before is not None and after is not None and (len(before) != len(after) or any(
            abs(a - b) > 1e-4 * (1.0 + abs(b)) for a, b in zip(after, before)))
        if worse or moved:
            tags.append("E2E")
            changes = [f"{d} {o.get(d)} -> {f.get(d)}" for d in worse] + (["float32 output changed"] if moved else [])
            num += " e2e: " + "; ".join(changes)
    verdict = "ok" if not tags else " ".join(tags)
    return (f"{verdict:<12} {r['round']}/{r['file']} [{r['verdict']}] found={','.join(r['found']) or '-'}"
            f"{base} left={','.join(r['left']) or '-'}{num}")


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--numeric":
        print(json.dumps(_matrix(Path(sys.argv[2]), Path(sys.argv[3]))))
        return
    if len(sys.argv) == 4 and sys.argv[1] == "--e2e":
        print(json.dumps(_e2e(Path(sys.argv[2]), Path(sys.argv[3]))))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rounds", nargs="+", type=Path)
    ap.add_argument("--work", type=Path, default=Path("benchmarks/.work/heldout"))
    ap.add_argument("--base", type=Path, help="another checkout to compare detection with")
    ap.add_argument("--no-numeric", action="store_true")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per numeric run")
    ap.add_argument("--only", action="append", default=[], help="substring of ROUND/FILE to keep")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    everything = []
    for folder in args.rounds:
        for r in _round(folder.resolve(), args.work.resolve(), args.base, not args.no_numeric,
                        args.timeout, set(args.only)):
            print(_line(r), flush=True)
            everything.append(r)
    if args.json:
        args.json.write_text(json.dumps(everything, indent=1))


if __name__ == "__main__":
    main()
