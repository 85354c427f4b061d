#!/usr/bin/env python3
"""Time ``ropelint check`` on a whole model library against ``ruff check``.

Tree: the ``transformers==5.24.0`` wheel (``py3-none-any``, sha256 pinned
below), which holds exactly 2,912 ``.py`` files -- the tree size named in the
speed goals.  (Counted: 4.51.3 has 1,799, 4.55.4 2,075, 4.57.6 2,214,
5.0.0 2,061, 5.10.4 2,433, 5.20.2 2,764, 5.24.0 2,912.)

In one run, on the same unpacked tree, each measured ``--repeat`` times in
interleaved rounds (ruff-F, ruff-default, cold, warm, small; then again), so
that load from other work on a shared machine hits reference and ropelint
alike; min and median wall reported:

  ruff-F          ruff check --no-cache --isolated --no-respect-gitignore --select F .
  ruff-default    ruff check --no-cache --isolated --no-respect-gitignore .
  ropelint-cold   ropelint check . --no-cache --format json
  ropelint-fill   ropelint check . --cache-dir FRESH --format json   (once, first: fills the cache)
  ropelint-warm   ropelint check . --cache-dir FRESH --format json   (cache filled)
  ropelint-small  ropelint check SMALL_FILE --no-cache               (one ~20-line rotary file)
  torchfix / fixit  if installed (``python -m torchfix`` / ``fixit`` on PATH), ``--other-repeat`` times

ropelint runs with ``PYTHONSAFEPATH=1`` and its bytecode cached under
``WORK/pycache`` (see ``common.ropelint_command``); the findings of the cold,
fill and warm runs must be identical (a difference is printed as CACHE
MISMATCH).  ``--isolated`` keeps ruff from reading a ``[tool.ruff]`` table of this
checkout (the tree lives under ``benchmarks/.work``); ``--no-respect-gitignore``
because ``benchmarks/.work`` is git-ignored.  Ruff exits 1 when it finds
something; that is expected.  ropelint exit 0/1 is success, anything else is
reported with the tail of its stderr and the script goes on.

Goals checked (from the speed issue): cold <= 3x ruff-F wall (median),
warm <= 1x ruff-F, peak memory of any ropelint tree run < 400 MB, small file
< 300 ms wall.  ``--fail-on-goals`` makes the exit status 1 when one fails.

Usage::

    python benchmarks/bench_check.py                  # download, run, print
    python benchmarks/bench_check.py --repeat 5 --json benchmarks/.work/check.json
    python benchmarks/bench_check.py --tree /some/unpacked/tree --jobs 2

Needs: pip (for the download), ruff (``pip install ruff``) for the reference
rows.  The wheel is cached under ``benchmarks/.work`` (or ``--work-dir``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

PACKAGE = "transformers"
VERSION = "5.24.0"
SHA256 = "ff5ebedf9359f94bb63772b6380eba6e7104d010cbbb2cb82c788817ea7486f6"
EXPECTED_FILES = 2912

GOAL_COLD_RATIO = 3.0
GOAL_WARM_RATIO = 1.0
GOAL_PEAK_MB = 400.0
GOAL_SMALL_S = 0.300

# A small rotary-embedding module for the single-file timing.  The position
# ids are cast to the activation dtype before the outer product, so in bf16
# the angles lose precision: a linter for this should have something to say.
SMALL_FILE_SOURCE = '''\
import torch
from torch import nn


class RotaryEmbedding(nn.Module):
    def __init__(self, dim: int, base: float = 10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor):
        freqs = position_ids[:, :, None].to(x.dtype) * self.inv_freq[None, None, :].to(x.dtype)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos(), emb.sin()
'''


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work-dir", type=Path, default=common.DEFAULT_WORK_DIR,
                    help="where wheels, trees and caches go (default: benchmarks/.work)")
    ap.add_argument("--tree", type=Path, help="use this unpacked tree instead of downloading")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per row (default 3)")
    ap.add_argument("--other-repeat", type=int, default=1,
                    help="timed runs for torchfix/fixit, which are slow (default 1)")
    ap.add_argument("--jobs", type=int, help="pass --jobs N to ropelint")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per run (default 600)")
    ap.add_argument("--small-file", type=Path, help="file for the single-file row (default: built-in snippet)")
    ap.add_argument("--no-ruff-default", action="store_true", help="skip the ruff default-rules row")
    ap.add_argument("--no-others", action="store_true", help="skip torchfix/fixit even if installed")
    ap.add_argument("--no-ropelint", action="store_true", help="only the reference rows (baseline numbers)")
    ap.add_argument("--no-tree-mem", action="store_true",
                    help="do not sample the process tree's PSS (report only ru_maxrss)")
    ap.add_argument("--json", type=Path, dest="json_out", help="write results to this JSON file")
    ap.add_argument("--fail-on-goals", action="store_true", help="exit 1 if a speed/memory goal fails")
    return ap.parse_args(argv)


def ruff_findings(stdout: str) -> int | None:
    m = re.search(r"Found (\d+) errors?", stdout)
    if m:
        return int(m.group(1))
    return 0 if "All checks passed" in stdout else None


def ropelint_findings(stdout: str) -> int | None:
    try:
        return len(common.parse_findings(stdout))
    except (ValueError, json.JSONDecodeError):
        return None


def main(argv=None) -> int:
    args = parse_args(argv)
    work = args.work_dir.resolve()
    sample = not args.no_tree_mem

    # ---- the tree -----------------------------------------------------------
    if args.tree:
        tree = args.tree.resolve()
        label = str(tree)
    else:
        tree = common.fetch_tree(PACKAGE, VERSION, work, SHA256)
        label = f"{PACKAGE}=={VERSION}"
    files = common.count_py_files(tree)
    print(f"tree: {label}  ({tree})")
    print(f"files: {files} .py")
    if not args.tree and files != EXPECTED_FILES:
        print(f"WARNING: expected {EXPECTED_FILES} .py files in {label}, found {files}")
    mb = common.warm_page_cache(tree) / 1e6
    print(f"page cache warmed: {mb:.1f} MB read")
    info = common.machine_info()
    print(f"machine: python {info['python']}, {info['usable_cpus']} usable CPUs, "
          f"load average {info['load_1min']}")
    if info["load_1min"] is not None and info["load_1min"] > 0.5:
        print("WARNING: the machine is busy; wall times will be noisy (compare the cpu s column too)")

    notes: list[str] = []
    versions: dict[str, str] = {}
    T = args.timeout
    specs: list[common.Spec] = []
    results: list[common.Measurement] = []

    # ---- ruff ---------------------------------------------------------------
    ruff = common.find_ruff()
    if ruff is None:
        print(common.RUFF_INSTALL_HINT)
        notes.append("ruff missing: no reference rows, no ratios")
    else:
        versions["ruff"] = common.tool_version(ruff)
        base = [*ruff, "check", "--no-cache", "--isolated", "--no-respect-gitignore"]
        shown = common.run_timed([*base, "--show-files", "--select", "F", "."], cwd=tree, sample_tree=False)
        ruff_files = sum(1 for ln in shown.stdout.splitlines() if ln.strip().endswith(".py"))
        if ruff_files != files:
            print(f"NOTE: ruff --show-files lists {ruff_files} .py files, the tree has {files}")
        specs.append(common.Spec("ruff-F", [*base, "--select", "F", "."], files, args.repeat, cwd=tree))
        if not args.no_ruff_default:
            specs.append(common.Spec("ruff-default", [*base, "."], files, args.repeat, cwd=tree))

    # ---- ropelint -----------------------------------------------------------
    rl = None if args.no_ropelint else common.ropelint_command(pycache_dir=work / "pycache")
    cache_dir = work / "cache" / f"check-{os.getpid()}-{int(time.time())}"
    if args.no_ropelint:
        pass
    elif rl is None:
        print("ropelint not runnable: no ropelint/__main__.py in this checkout and no `ropelint` on PATH")
        notes.append("ropelint missing")
    else:
        rl_cmd, rl_env = rl
        versions["ropelint"] = common.tool_version(rl_cmd, rl_env)  # also compiles its bytecode
        jobs = ["--jobs", str(args.jobs)] if args.jobs is not None else []
        cached = [*rl_cmd, "check", ".", "--cache-dir", str(cache_dir), "--format", "json", *jobs]
        # fill the cache first (timed once, reported), so the warm rows can join the rounds
        shutil.rmtree(cache_dir, ignore_errors=True)
        print("filling ropelint's cache ...")
        [fill] = common.measure_rounds([common.Spec("ropelint-fill", cached, files, 1, tree, rl_env)],
                                       timeout=T, sample_tree=sample)
        results.append(fill)
        specs.append(common.Spec("ropelint-cold", [*rl_cmd, "check", ".", "--no-cache", "--format", "json", *jobs],
                                 files, args.repeat, tree, rl_env))
        if fill.ok:
            specs.append(common.Spec("ropelint-warm", cached, files, args.repeat, tree, rl_env))
        small_file = args.small_file
        if small_file is None:
            small_file = work / "small" / "rope_small.py"
            small_file.parent.mkdir(parents=True, exist_ok=True)
            small_file.write_text(SMALL_FILE_SOURCE)
        small_file = small_file.resolve()
        specs.append(common.Spec("ropelint-small", [*rl_cmd, "check", str(small_file), "--no-cache"],
                                 1, max(args.repeat, 5), small_file.parent, rl_env))

    print(f"timing {', '.join(s.name for s in specs)}: {args.repeat} interleaved rounds ...")
    results[:0] = common.measure_rounds(specs, timeout=T, sample_tree=sample)
    shutil.rmtree(cache_dir, ignore_errors=True)

    # ---- optional other linters (slow: after the rounds) ----------------------
    if not args.no_others:
        for name, sub in (("torchfix", []), ("fixit", ["lint"])):
            cmd = common.optional_tool(name, name)
            if cmd is None:
                print(f"({name} not installed: skipped; `pip install {name}` to include it)")
                continue
            versions[name] = common.tool_version(cmd)
            print(f"running {name} ({args.other_repeat}x) ...")
            # these exit non-zero when they find something; only a timeout or a crash counts as failure
            results.append(common.measure(name, [*cmd, *sub, "."], files, args.other_repeat, cwd=tree,
                                          timeout=T, ok_codes=tuple(range(0, 64)), sample_tree=sample))

    order = ["ruff-F", "ruff-default", "ropelint-cold", "ropelint-fill", "ropelint-warm", "ropelint-small"]
    results.sort(key=lambda m: order.index(m.name) if m.name in order else len(order))
    by_name = {m.name: m for m in results}
    ruff_f, cold, warm = by_name.get("ruff-F"), by_name.get("ropelint-cold"), by_name.get("ropelint-warm")
    fill, small = by_name.get("ropelint-fill"), by_name.get("ropelint-small")
    findings: dict[str, int | None] = {}
    for m in results:
        if m.ok and m.name.startswith("ruff"):
            findings[m.name] = ruff_findings(m.runs[-1].stdout)
        elif m.ok and m.name in ("ropelint-cold", "ropelint-fill", "ropelint-warm"):
            findings[m.name] = ropelint_findings(m.runs[-1].stdout)
    sets = {}
    for m in (cold, fill, warm):
        if m is not None and m.ok:
            try:
                sets[m.name] = set(common.parse_findings(m.runs[-1].stdout))
            except ValueError as e:
                notes.append(f"{m.name}: ropelint JSON output not understood: {e}")
    if "ropelint-cold" in sets:
        for other in ("ropelint-fill", "ropelint-warm"):
            if other in sets and sets[other] != sets["ropelint-cold"]:
                a_, b_ = sets["ropelint-cold"], sets[other]
                msg = (f"CACHE MISMATCH: {other} reports {len(b_)} findings, cold {len(a_)}; "
                       f"{len(a_ - b_)} only cold, {len(b_ - a_)} only {other}")
                print(msg)
                notes.append(msg)

    # ---- report -------------------------------------------------------------
    ref = ruff_f.wall_median if ruff_f is not None and ruff_f.ok else float("nan")
    rows = []
    for m in results:
        ratio = m.wall_median / ref if m.ok and ref == ref else float("nan")
        f = findings.get(m.name)
        rows.append([m.name, m.files, m.wall_min if m.ok else float("nan"),
                     m.wall_median if m.ok else float("nan"), m.cpu_median if m.ok else float("nan"),
                     m.files_per_s() if m.ok else float("nan"),
                     m.peak_mb if m.ok else float("nan"),
                     ratio, "-" if f is None else f, "ok" if m.ok else "FAILED"])
    print()
    print("versions: " + ", ".join(versions.values()))
    print(common.fmt_table(
        ["tool", "files", "wall min s", "wall med s", "cpu s", "files/s", "peak MB", "x ruff-F", "findings", "status"],
        rows))
    print("(wall min/med: over the repeats; cpu s: median user+sys; files/s: files / median wall;\n"
          " peak MB: max of the largest process's RSS and the summed PSS of its process tree;\n"
          " x ruff-F: median wall / ruff-F median wall)")
    end_load = common.load_average()
    if end_load is not None and end_load > 1.5:
        print(f"WARNING: load average {end_load:.2f} at the end: other work shared the CPUs")

    for m in results:
        if not m.ok:
            print()
            print(m.failure_text())

    goals = []
    def goal(name: str, value: float, limit: float, unit: str, applicable: bool):
        status = "n/a" if not applicable or value != value else ("PASS" if value <= limit else "FAIL")
        goals.append({"goal": name, "value": value, "limit": limit, "unit": unit, "status": status})

    goal("cold / ruff-F", cold.wall_median / ref if cold and cold.ok else float("nan"),
         GOAL_COLD_RATIO, "x", bool(cold and cold.ok and ref == ref))
    goal("warm / ruff-F", warm.wall_median / ref if warm and warm.ok else float("nan"),
         GOAL_WARM_RATIO, "x", bool(warm and warm.ok and ref == ref))
    rl_runs = [m for m in (cold, fill, warm) if m is not None and m.ok]
    goal("ropelint peak memory", max((m.peak_mb for m in rl_runs), default=float("nan")),
         GOAL_PEAK_MB, "MB", bool(rl_runs))
    goal("single small file", small.wall_median if small and small.ok else float("nan"),
         GOAL_SMALL_S, "s", bool(small and small.ok))
    print()
    print(common.fmt_table(["goal", "value", "limit", "status"],
                           [[g["goal"], g["value"], f"{g['limit']:g} {g['unit']}", g["status"]] for g in goals]))
    for n in notes:
        print(f"note: {n}")

    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(json.dumps(common.json_safe({
            "tree": {"label": label, "path": str(tree), "files": files,
                     "package": None if args.tree else PACKAGE, "version": None if args.tree else VERSION},
            "machine": info, "versions": versions, "repeat": args.repeat, "jobs": args.jobs,
            "results": [dict(m.as_dict(), findings=findings.get(m.name)) for m in results],
            "reference": "ruff-F", "goals": goals, "notes": notes,
        }), indent=2))
        print(f"wrote {args.json_out}")

    if args.fail_on_goals and any(g["status"] == "FAIL" for g in goals):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
