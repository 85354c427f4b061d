#!/usr/bin/env python3
"""Time ``ropelint fix`` (diff mode, nothing written) on the benchmark tree.

Runs on a fresh COPY of the tree that ``bench_check.py`` uses
(``transformers==5.24.0``, 2,912 ``.py`` files), cold (``--no-cache``), each
run timed ``--repeat`` times, and reports files, min/median wall, files per
second, peak memory, and how many files the diff would change (counted from
the ``+++`` headers of the unified diff ropelint prints).  It checks that
diff mode left the copy untouched.

``--write-check`` additionally runs ``ropelint fix --write`` once on a second
fresh copy and compares the files that really changed with the diff's count.
``--unsafe-fixes`` and ``--jobs N`` are passed through.

Usage::

    python benchmarks/bench_fix.py
    python benchmarks/bench_fix.py --repeat 1 --write-check --json benchmarks/.work/fix.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_check  # noqa: E402  (the pinned tree)
import common  # noqa: E402


def diff_files(diff: str, root: Path) -> set[str]:
    """Paths (relative to ``root``) named by the ``+++`` headers of a unified diff."""
    out = set()
    for line in diff.splitlines():
        if line.startswith("+++ "):
            path = line[4:].split("\t")[0].strip()
            if path == "/dev/null":
                continue
            if path.startswith("b/") and not (root / path).exists():
                path = path[2:]
            if os.path.isabs(path):
                path = os.path.relpath(path, root)
            out.add(os.path.normpath(path))
    return out


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in common.py_files(root)}


def changed_files(original: Path, copy: Path) -> set[str]:
    out = set()
    for p in common.py_files(original):
        rel = p.relative_to(original)
        q = copy / rel
        if not q.exists() or q.read_bytes() != p.read_bytes():
            out.add(str(rel))
    return out


def fresh_copy(src: Path, dst: Path) -> Path:
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".unpacked-ok"))
    common.isolate_tree(dst)
    return dst


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work-dir", type=Path, default=common.DEFAULT_WORK_DIR)
    ap.add_argument("--tree", type=Path, help="use this unpacked tree instead of downloading")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--jobs", type=int)
    ap.add_argument("--unsafe-fixes", action="store_true")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--write-check", action="store_true",
                    help="also run `fix --write` once on another copy and compare")
    ap.add_argument("--no-tree-mem", action="store_true")
    ap.add_argument("--json", type=Path, dest="json_out")
    args = ap.parse_args(argv)
    work = args.work_dir.resolve()

    if args.tree:
        src, label = args.tree.resolve(), str(args.tree)
    else:
        src = common.fetch_tree(bench_check.PACKAGE, bench_check.VERSION, work, bench_check.SHA256)
        label = f"{bench_check.PACKAGE}=={bench_check.VERSION}"
    copy = fresh_copy(src, work / "fix-copy")
    files = common.count_py_files(copy)
    print(f"tree: {label}, copied to {copy}  ({files} .py files)")
    common.warm_page_cache(copy)

    rl = common.ropelint_command(pycache_dir=work / "pycache")
    if rl is None:
        print("ropelint not runnable: no ropelint/__main__.py in this checkout and no `ropelint` on PATH")
        return 2
    rl_cmd, env = rl
    extra = (["--unsafe-fixes"] if args.unsafe_fixes else []) + (["--jobs", str(args.jobs)] if args.jobs is not None else [])
    cmd = [*rl_cmd, "fix", ".", "--no-cache", *extra]

    before = snapshot(copy)
    m = common.measure("ropelint-fix", cmd, files, args.repeat, cwd=copy, env=env,
                       timeout=args.timeout, sample_tree=not args.no_tree_mem)
    untouched = snapshot(copy) == before
    would_change = diff_files(m.runs[-1].stdout, copy) if m.ok else set()
    hunks = sum(1 for ln in m.runs[-1].stdout.splitlines() if ln.startswith("@@")) if m.ok else 0

    rows = [[m.name, files, m.wall_min, m.wall_median, m.files_per_s(), m.peak_mb,
             len(would_change) if m.ok else "-", hunks if m.ok else "-", "ok" if m.ok else "FAILED"]]
    written = None
    if args.write_check and m.ok:
        wcopy = fresh_copy(src, work / "fix-copy-write")
        w = common.measure("ropelint-fix --write", [*rl_cmd, "fix", ".", "--no-cache", "--write", *extra],
                           files, 1, cwd=wcopy, env=env, timeout=args.timeout,
                           sample_tree=not args.no_tree_mem)
        written = changed_files(src, wcopy) if w.ok else None
        rows.append([w.name, files, w.wall_min, w.wall_median, w.files_per_s(), w.peak_mb,
                     len(written) if written is not None else "-", "-", "ok" if w.ok else "FAILED"])
        if not w.ok:
            print(w.failure_text())
        shutil.rmtree(wcopy, ignore_errors=True)

    print()
    print(common.fmt_table(["run", "files", "wall min s", "wall med s", "files/s", "peak MB",
                            "files changed", "hunks", "status"], rows))
    if not m.ok:
        print(m.failure_text())
    if not untouched:
        print("PROBLEM: `ropelint fix` without --write modified files in the copy")
    if written is not None and written != would_change:
        print(f"PROBLEM: the diff names {len(would_change)} files, --write changed {len(written)}; "
              f"only in diff: {sorted(would_change - written)[:5]}, only written: {sorted(written - would_change)[:5]}")

    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(json.dumps(common.json_safe({
            "tree": {"label": label, "files": files}, "machine": common.machine_info(),
            "result": m.as_dict(), "files_would_change": sorted(would_change), "hunks": hunks,
            "diff_mode_left_tree_untouched": untouched,
            "files_written": sorted(written) if written is not None else None,
        }), indent=2))
        print(f"wrote {args.json_out}")
    shutil.rmtree(copy, ignore_errors=True)
    return 0 if m.ok and untouched else 1


if __name__ == "__main__":
    sys.exit(main())
