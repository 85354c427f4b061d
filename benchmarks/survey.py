#!/usr/bin/env python3
"""Run ropelint over real model libraries, for hand-judging its findings.

Downloads each package's wheel (``pip download --no-deps --only-binary=:all:``,
pinned versions, sha256 checked for the defaults), unpacks it, runs
``ropelint check . --format json --exit-zero --no-cache`` in it, and writes

* a summary table to stdout: files, wall, findings per code per package;
* a report file (default ``benchmarks/.work/survey-report.txt``) with the same
  table and every finding as ``path:line CODE message`` (paths relative to
  the directory you ran the script from), so true/false positives can be
  judged by reading the code;
* optionally ``--json OUT`` with everything.

``--miss-rate`` also runs each package with ``ROPELINT_NO_PREFILTER=1``
(ropelint then parses every file instead of skipping the ones its textual
prefilter rules out) and reports files that have findings in that full run
but none in the normal run: files the prefilter dropped.  That number must be
zero; the script exits 1 if it is not.  It also lists single findings that
differ between the two runs.

Only pure-python wheels are used unless a package is listed with pinned
platform tags (megatron-core below: its wheel is CPython-specific but small,
and only its .py files are read) or ``--allow-platform-wheels`` is given.  For
packages named with ``--packages`` the wheel's tags are checked first with a
metadata-only ``pip install --dry-run --report``; after the download, wheels
over ``--max-mb`` (default 60) are deleted and skipped.

Size check of the candidates (this machine, when the defaults were pinned):

  package                 version   wheel MB  .py files
  transformers            4.38.2       8.5      1560
  transformers            4.45.2       9.9      1781
  transformers            4.57.6      12.0      2214
  timm                    1.0.31       2.8       304
  open_clip_torch         3.3.0        1.5        34
  x-transformers          2.31.10      0.14       23
  rotary-embedding-torch  0.9.1        0.02        4
  litgpt                  0.5.13       0.2        60
  peft                    0.21.2       0.8       249
  diffusers               0.42.1       6.4      1105
  sentence-transformers   6.2.0        0.8       212
  torchtune               0.6.1        0.9       235
  lightning-thunder       0.2.6        1.0       197
  megatron-core           0.16.1       2.6       366   (cp311 manylinux wheel)
  skipped: vllm 0.33.0 and xformers 0.0.35 (platform wheels with compiled
  kernels, large; not downloaded), mamba-ssm and flash-attn (no wheel on the
  index: sdist only, need a CUDA build).

Usage::

    python benchmarks/survey.py                       # all defaults
    python benchmarks/survey.py --miss-rate           # + prefilter miss rate
    python benchmarks/survey.py --packages timm==1.0.31 peft==0.21.2 --report /tmp/r.txt
    python benchmarks/survey.py --list                # show the defaults
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

CP311_LINUX = ("--python-version", "3.11", "--implementation", "cp", "--abi", "cp311",
               "--platform", "manylinux_2_28_x86_64")


@dataclasses.dataclass
class Package:
    name: str
    version: str
    sha256: str | None = None
    pip_args: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.name}=={self.version}"


DEFAULT_PACKAGES = [
    Package("transformers", "4.38.2", "c4029cb9f01b3dd335e52f364c52d2b37c65b4c78e02e6a08b1919c5c928573e"),
    Package("transformers", "4.45.2", "c551b33660cfc815bae1f9f097ecfd1e65be623f13c6ee0dda372bd881460210"),
    Package("transformers", "4.57.6", "4c9e9de11333ddfe5114bc872c9f370509198acf0b87a832a0ab9458e2bd0550"),
    Package("timm", "1.0.31", "5bd50f7d0fe6d09bf9285ac2523234a1b7e6bf075c0be3e7aed09139fcb617c7"),
    Package("open_clip_torch", "3.3.0", "c549ad5ed6bfc119cc11105033c0a2b9d7a2a4afeb40a58a09aab3da1a0043ce"),
    Package("x-transformers", "2.31.10", "40099be7b1f3043ffba67381288a35bdd932decf338dc69a01eb8024bea34d24"),
    Package("rotary-embedding-torch", "0.9.1", "489ef53e21ab4c4eb35c0c97b551d724f5eea71c2bca39acb8fee8d88b142a76"),
    Package("litgpt", "0.5.13", "da044b76c52cd44fc0564f6177ed6cf186dde24f711ce8e71e1fd9e9da5f02b2"),
    Package("peft", "0.21.2", "106ab6077ff72c54d21577f9af5970e34bac7582cb14209f7b2b511e322a4eae"),
    Package("diffusers", "0.42.1", "9154faa704ce00e0b77f568e0d64786064368528aab5fc14eeea92f87d788014"),
    Package("sentence-transformers", "6.2.0", "ffb51ccfef65427cfa61776d0eeeb257600b0099cf0c7533ae9a6856d31e4665"),
    Package("torchtune", "0.6.1", "bcbc4ee9774b5c5829a5ff13df851e0b0e32416c018af8db53faa3472ac256e7"),
    Package("lightning-thunder", "0.2.6", "7b0bb904e5a162b0a2b762ce4652e1ad993b467f45f714b159b78d3bc94e2b9c"),
    Package("megatron-core", "0.16.1", "38f6bef63cd4ebc4c39c1eccbaf578596accba5c47d012faffa0670913aec131",
            CP311_LINUX),
]

SKIPPED = {
    "vllm": "platform wheel with compiled CUDA kernels, hundreds of MB",
    "xformers": "platform wheel with compiled kernels, large",
    "mamba-ssm": "no wheel on the index (sdist only, needs a CUDA build)",
    "flash-attn": "no wheel on the index (sdist only, needs a CUDA build)",
}


def parse_spec(spec: str) -> Package:
    m = re.fullmatch(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([^\s=]+)\s*", spec)
    if not m:
        raise SystemExit(f"--packages wants NAME==VERSION, got {spec!r}")
    for p in DEFAULT_PACKAGES:  # reuse a known pin (hash, platform args)
        if common._norm(p.name) == common._norm(m.group(1)) and p.version == m.group(2):
            return p
    return Package(m.group(1), m.group(2))


def wheel_tags_ok(pkg: Package, allow_platform: bool) -> tuple[bool, str]:
    """Metadata-only look at which wheel pip would pick (no wheel download)."""
    if allow_platform or pkg.pip_args:
        return True, ""
    with tempfile.TemporaryDirectory() as d:
        report = Path(d) / "report.json"
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-deps",
             "--only-binary=:all:", "--disable-pip-version-check", "-q", "--report", str(report), pkg.label],
            capture_output=True, text=True)
        if proc.returncode != 0 or not report.exists():
            return False, "no wheel: " + (proc.stderr.strip().splitlines() or ["pip failed"])[-1]
        url = json.loads(report.read_text())["install"][0]["download_info"]["url"]
    fname = url.rsplit("/", 1)[-1]
    if not fname.endswith("-none-any.whl"):
        return False, f"platform wheel {fname} (use --allow-platform-wheels)"
    return True, ""


@dataclasses.dataclass
class PackageResult:
    pkg: Package
    tree: str = ""
    files: int = 0
    wheel_mb: float = 0.0
    skipped: str = ""
    error: str = ""
    checked: bool = False  # the normal run went through
    wall_s: float = float("nan")
    findings: list = dataclasses.field(default_factory=list)
    full_wall_s: float = float("nan")
    full_findings: list | None = None

    def files_with_findings(self, full: bool = False) -> set[str]:
        return {f.path for f in (self.full_findings if full else self.findings) or ()}

    @property
    def dropped(self) -> set[str]:
        if self.full_findings is None:
            return set()
        return self.files_with_findings(True) - self.files_with_findings(False)


def run_check(rl_cmd, env, tree: Path, jobs, timeout, no_prefilter: bool):
    env = dict(env)
    if no_prefilter:
        env[common.NO_PREFILTER_ENV] = "1"
    cmd = [*rl_cmd, "check", ".", "--format", "json", "--exit-zero", "--no-cache",
           *(["--jobs", str(jobs)] if jobs is not None else [])]
    r = common.run_timed(cmd, cwd=tree, env=env, timeout=timeout, sample_tree=False)
    if r.timed_out or r.returncode != 0:
        why = "timed out" if r.timed_out else f"exit {r.returncode}"
        return None, r.wall_s, f"{why}: {' '.join(cmd)}\n{common.tail(r.stderr or r.stdout, 15)}"
    try:
        return common.parse_findings(r.stdout, cwd=tree, root=tree), r.wall_s, ""
    except ValueError as e:
        return None, r.wall_s, f"cannot read ropelint's JSON: {e}\n{common.tail(r.stdout, 5)}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--packages", nargs="+", metavar="NAME==VERSION", help="instead of the defaults")
    ap.add_argument("--work-dir", type=Path, default=common.DEFAULT_WORK_DIR)
    ap.add_argument("--report", type=Path, help="default: WORK_DIR/survey-report.txt")
    ap.add_argument("--json", type=Path, dest="json_out")
    ap.add_argument("--miss-rate", action="store_true",
                    help=f"also run with {common.NO_PREFILTER_ENV}=1 and report files the prefilter dropped")
    ap.add_argument("--max-mb", type=float, default=60.0, help="skip wheels larger than this (default 60)")
    ap.add_argument("--allow-platform-wheels", action="store_true")
    ap.add_argument("--jobs", type=int)
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--list", action="store_true", help="print the default packages and exit")
    args = ap.parse_args(argv)

    if args.list:
        for p in DEFAULT_PACKAGES:
            print(p.label + ("   (pinned cp311 manylinux wheel)" if p.pip_args else ""))
        for name, why in SKIPPED.items():
            print(f"# skipped: {name}: {why}")
        return 0

    work = args.work_dir.resolve()
    report_path = args.report or work / "survey-report.txt"
    pkgs = [parse_spec(s) for s in args.packages] if args.packages else DEFAULT_PACKAGES
    rl = common.ropelint_command(pycache_dir=work / "pycache")
    if rl is None:
        print("ropelint not runnable: no ropelint/__main__.py in this checkout and no `ropelint` on PATH")
        return 2
    rl_cmd, env = rl
    version = common.tool_version(rl_cmd, env)
    here = Path.cwd()

    results: list[PackageResult] = []
    for pkg in pkgs:
        res = PackageResult(pkg)
        results.append(res)
        if common._norm(pkg.name) in {common._norm(n) for n in SKIPPED}:
            res.skipped = SKIPPED[next(n for n in SKIPPED if common._norm(n) == common._norm(pkg.name))]
            print(f"{pkg.label}: skipped: {res.skipped}")
            continue
        ok, why = wheel_tags_ok(pkg, args.allow_platform_wheels)
        if not ok:
            res.skipped = why
            print(f"{pkg.label}: skipped: {why}")
            continue
        try:
            wheel = common.download_wheel(pkg.name, pkg.version, work, pkg.sha256, pkg.pip_args, quiet=True)
        except RuntimeError as e:
            res.skipped = f"download failed: {str(e).splitlines()[-1].strip()}"
            print(f"{pkg.label}: {res.skipped}")
            continue
        res.wheel_mb = wheel.stat().st_size / 1e6
        if res.wheel_mb > args.max_mb:
            wheel.unlink()
            res.skipped = f"wheel is {res.wheel_mb:.0f} MB > --max-mb {args.max_mb:g}"
            print(f"{pkg.label}: skipped: {res.skipped}")
            continue
        tree = common.unpack_wheel(wheel, work / "trees" / f"{common._norm(pkg.name)}-{pkg.version}")
        res.tree, res.files = str(tree), common.count_py_files(tree)
        found, res.wall_s, err = run_check(rl_cmd, env, tree, args.jobs, args.timeout, False)
        if found is None:
            res.error = err
            print(f"{pkg.label}: ropelint failed: {err}")
            continue
        res.findings = sorted(found, key=lambda f: (f.path, f.line, f.code))
        res.checked = True
        line = f"{pkg.label}: {res.files} files, {len(res.findings)} findings, {res.wall_s:.2f} s"
        if args.miss_rate:
            full, res.full_wall_s, err = run_check(rl_cmd, env, tree, args.jobs, args.timeout, True)
            if full is None:
                res.error = f"[{common.NO_PREFILTER_ENV}=1] {err}"
                print(f"{pkg.label}: ropelint (no prefilter) failed: {err}")
                continue
            res.full_findings = sorted(full, key=lambda f: (f.path, f.line, f.code))
            line += (f"; no prefilter: {len(res.full_findings)} findings, {res.full_wall_s:.2f} s, "
                     f"{len(res.dropped)} files dropped by the prefilter")
        print(line)

    # ---- summary ------------------------------------------------------------
    ran = [r for r in results if not r.skipped and not r.error]
    codes = sorted({f.code for r in results for f in r.findings}
                   | {f.code for r in ran for f in (r.full_findings or ())})
    rows = []
    for r in results:
        counts = collections.Counter(f.code for f in r.findings)
        status = "skipped" if r.skipped else "ERROR" if r.error else "ok"
        rows.append([r.pkg.label, r.files or "-", r.wall_s, len(r.findings) if r.checked else "-",
                     *[counts.get(c, 0) if r.checked else "-" for c in codes], status])
    summary = common.fmt_table(["package", "files", "wall s", "findings", *codes, "status"], rows)

    miss_table = ""
    if args.miss_rate:
        mrows = []
        for r in ran:
            full_files = r.files_with_findings(True)
            lost = set(r.full_findings or ()) - set(r.findings)
            extra = set(r.findings) - set(r.full_findings or ())
            mrows.append([r.pkg.label, r.files, len(full_files), len(r.files_with_findings()), len(r.dropped),
                          f"{len(r.dropped) / len(full_files):.1%}" if full_files else "0.0%",
                          len(lost), len(extra), r.wall_s, r.full_wall_s])
        miss_table = common.fmt_table(
            ["package", "files", "files w/ findings (full)", "(prefiltered)", "dropped", "miss rate",
             "findings lost", "findings extra", "wall s", "wall s full"], mrows)

    print()
    print(summary)
    if miss_table:
        print()
        print("prefilter miss rate (must be 0):")
        print(miss_table)

    # ---- report file ----------------------------------------------------------
    def show(r: PackageResult, f: common.Finding) -> common.Finding:
        p = Path(r.tree) / f.path
        try:
            rel = os.path.relpath(p, here)
        except ValueError:
            rel = str(p)
        return dataclasses.replace(f, path=rel)

    out = [f"ropelint survey, {time.strftime('%Y-%m-%d %H:%M')}, {version}", "", summary, ""]
    if miss_table:
        out += ["prefilter miss rate (must be 0):", miss_table, ""]
    for r in results:
        out.append(f"== {r.pkg.label}  ({r.files} files)  {r.tree}")
        if r.skipped or r.error:
            out.append(f"   {r.skipped or r.error}")
        if not r.checked:
            out.append("")
            continue
        for code, n in sorted(collections.Counter(f.code for f in r.findings).items()):
            out.append(f"   {code}: {n}")
        out += [show(r, f).render() for f in r.findings]
        if r.full_findings is not None:
            for path in sorted(r.dropped):
                out.append(f"DROPPED BY PREFILTER: {os.path.relpath(Path(r.tree) / path, here)}")
            for f in sorted(set(r.full_findings) - set(r.findings), key=lambda f: (f.path, f.line)):
                out.append(f"only without prefilter: {show(r, f).render()}")
            for f in sorted(set(r.findings) - set(r.full_findings), key=lambda f: (f.path, f.line)):
                out.append(f"only with prefilter: {show(r, f).render()}")
        out.append("")
    report_path.parent.mkdir(parents=True, exist_ok=True)
    report_path.write_text("\n".join(out) + "\n")
    print(f"\nreport: {report_path}")

    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(json.dumps(common.json_safe({
            "ropelint": version, "machine": common.machine_info(),
            "packages": [{
                "package": r.pkg.name, "version": r.pkg.version, "tree": r.tree, "files": r.files,
                "wheel_mb": r.wheel_mb, "skipped": r.skipped, "error": r.error, "wall_s": r.wall_s,
                "counts": dict(collections.Counter(f.code for f in r.findings)),
                "findings": [dataclasses.asdict(f) for f in r.findings],
                **({"no_prefilter_wall_s": r.full_wall_s,
                    "no_prefilter_findings": [dataclasses.asdict(f) for f in r.full_findings],
                    "dropped_files": sorted(r.dropped)} if r.full_findings is not None else {}),
            } for r in results],
        }), indent=2))
        print(f"wrote {args.json_out}")

    if any(r.error for r in results):
        return 2
    if args.miss_rate and any(r.dropped for r in ran):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
