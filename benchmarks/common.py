"""Small helpers shared by the ropelint benchmark and survey scripts.

Standard library only, so the scripts run in any environment that has
``pip`` (for downloading wheels) and, for the comparison rows, ``ruff``.

Downloads
    ``fetch_tree(name, version)`` runs ``pip download --no-deps
    --only-binary=:all: NAME==VERSION`` into ``<work>/wheels`` (once), checks
    the sha256 if one is pinned, and unpacks the wheel into
    ``<work>/trees/NAME-VERSION`` (once).  ``<work>`` is ``benchmarks/.work``
    (git-ignored by ``benchmarks/.gitignore``) or whatever ``--work-dir`` says.
    The tree gets an empty ``pyproject.toml`` so that the configuration of the
    checkout around it does not apply (ruff is run with ``--isolated``).

Timing and memory
    ``run_timed(cmd)`` runs the command under a tiny Python launcher
    (``_LAUNCHER``) that ``posix_spawn``s it, reaps it with ``os.wait4(pid)``
    and reports wall time (measured around spawn+wait, so the launcher's own
    start is not counted), user/sys CPU and ``ru_maxrss``.  ``wait4`` returns
    the resource usage of *that* child (and the grandchildren it reaped), so
    ``ru_maxrss`` is the peak RSS of the largest single process of the run.

    Why not ``getrusage(RUSAGE_CHILDREN)`` deltas: ``ru_maxrss`` there is a
    running maximum over every child ever reaped, so a delta of it means
    nothing once an earlier, bigger child has run (CPU times would be fine).
    Why the launcher and not a direct ``wait4`` on our own child: on Linux a
    process's ``ru_maxrss`` also covers the address space it exec()ed from,
    and ``subprocess`` spawns via vfork from *this* process -- a ``/bin/true``
    spawned by a 500 MB Python reports 513 MB.  ``/usr/bin/time -v`` avoids
    that the same way (it is a small process that forks the command) but is
    not installed everywhere and prints wall time in 10 ms steps; the launcher
    gives the same numbers with the standard library only.  The floor it
    leaves is its own ~10 MB, below any Python linter's footprint.

    ``ru_maxrss`` under-counts a multi-process run (``--jobs N``): it is the
    largest process, not the sum.  So a sampler thread also walks the
    launcher's descendants every ``SAMPLE_INTERVAL`` seconds and sums their
    PSS (``/proc/PID/smaps_rollup``; RSS from ``/proc/PID/statm`` where that is
    missing).  PSS splits copy-on-write pages fairly between forked workers,
    so the sum is the honest "memory the run needs".  Processes shorter than
    the interval can be missed; the reported peak is the larger of the two
    numbers.  Linux only; elsewhere only ``ru_maxrss`` is reported.

    Output goes to temporary files, not pipes, so a chatty child can never
    block on a full pipe.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path
from typing import Iterable, Sequence

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
DEFAULT_WORK_DIR = BENCH_DIR / ".work"
SAMPLE_INTERVAL = 0.05  # seconds between process-tree memory samples

RUFF_INSTALL_HINT = (
    "ruff not found (neither `ruff` on PATH nor `python -m ruff`).\n"
    "Install it with:  pip install ruff"
)

# Environment variable the lead's linter honours: parse every file, skip the
# cheap textual prefilter.  Benchmarks must never inherit it by accident.
NO_PREFILTER_ENV = "ROPELINT_NO_PREFILTER"


# --------------------------------------------------------------------------
# downloading and unpacking wheels
# --------------------------------------------------------------------------


def _norm(name: str) -> str:
    """Wheel file names use the normalized project name with underscores."""
    return re.sub(r"[-_.]+", "_", name).lower()


def find_wheel(wheel_dir: Path, name: str, version: str) -> Path | None:
    prefix = f"{_norm(name)}-{version}-"
    for p in sorted(wheel_dir.glob("*.whl")):
        if p.name.lower().startswith(prefix):
            return p
    return None


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def download_wheel(
    name: str,
    version: str,
    work_dir: Path,
    sha256: str | None = None,
    extra_pip_args: Sequence[str] = (),
    quiet: bool = False,
) -> Path:
    """``pip download --no-deps --only-binary=:all:`` one pinned wheel (cached)."""
    wheel_dir = Path(work_dir) / "wheels"
    wheel_dir.mkdir(parents=True, exist_ok=True)
    wheel = find_wheel(wheel_dir, name, version)
    if wheel is None:
        cmd = [
            sys.executable, "-m", "pip", "download", "--no-deps",
            "--only-binary=:all:", "--disable-pip-version-check",
            "-d", str(wheel_dir), *extra_pip_args, f"{name}=={version}",
        ]
        if not quiet:
            print(f"+ {' '.join(cmd)}", file=sys.stderr)
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(
                f"pip download {name}=={version} failed:\n{tail(proc.stderr, 15)}"
            )
        wheel = find_wheel(wheel_dir, name, version)
        if wheel is None:
            raise RuntimeError(f"pip download {name}=={version} produced no wheel in {wheel_dir}")
    if sha256:
        got = sha256_of(wheel)
        if got != sha256:
            raise RuntimeError(
                f"{wheel.name}: sha256 {got} does not match the pinned {sha256}; "
                "delete it and re-run if the pin changed on purpose"
            )
    return wheel


ISOLATING_PYPROJECT = """\
# Written by benchmarks/common.py, not part of the wheel.  ropelint takes its
# settings (and its project root) from the nearest pyproject.toml; without this
# file that would be the pyproject.toml of the checkout the tree is unpacked in,
# and its [tool.ropelint] excludes or ignores would change what gets checked.
"""


def isolate_tree(root: Path) -> None:
    """Make ``root`` its own project: an empty pyproject.toml, unless it has one."""
    pyproject = Path(root) / "pyproject.toml"
    if not pyproject.exists():
        pyproject.write_text(ISOLATING_PYPROJECT)


def unpack_wheel(wheel: Path, dest: Path) -> Path:
    """Unpack ``wheel`` into ``dest`` once (a marker file records completion)
    and make it its own project root (``isolate_tree``)."""
    dest = Path(dest)
    marker = dest / ".unpacked-ok"
    if marker.exists():
        isolate_tree(dest)
        return dest
    if dest.exists():
        shutil.rmtree(dest)  # half-unpacked from an interrupted run
    dest.mkdir(parents=True)
    with zipfile.ZipFile(wheel) as z:
        z.extractall(dest)
    isolate_tree(dest)
    marker.write_text(wheel.name + "\n")
    return dest


def fetch_tree(
    name: str,
    version: str,
    work_dir: Path = DEFAULT_WORK_DIR,
    sha256: str | None = None,
    extra_pip_args: Sequence[str] = (),
    quiet: bool = False,
) -> Path:
    """Download and unpack a pinned wheel; return the unpacked tree."""
    wheel = download_wheel(name, version, work_dir, sha256, extra_pip_args, quiet)
    return unpack_wheel(wheel, Path(work_dir) / "trees" / f"{_norm(name)}-{version}")


def py_files(root: Path) -> list[Path]:
    root = Path(root)
    if root.is_file():
        return [root] if root.suffix == ".py" else []
    out = []
    for d, dirs, files in os.walk(root):
        dirs.sort()
        out.extend(Path(d) / f for f in sorted(files) if f.endswith(".py"))
    return out


def count_py_files(root: Path) -> int:
    return len(py_files(root))


def warm_page_cache(root: Path) -> int:
    """Read every .py file once so no timed run pays for cold disk reads."""
    n = 0
    for p in py_files(root):
        n += len(p.read_bytes())
    return n


# --------------------------------------------------------------------------
# timing a subprocess
# --------------------------------------------------------------------------


@dataclasses.dataclass
class RunResult:
    cmd: list[str]
    returncode: int
    wall_s: float
    user_s: float
    sys_s: float
    maxrss_mb: float  # largest single process (wait4 ru_maxrss)
    tree_mb: float  # sampled peak of summed PSS over the process tree (0 if unsupported)
    stdout: str
    stderr: str
    timed_out: bool = False

    @property
    def peak_mb(self) -> float:
        return max(self.maxrss_mb, self.tree_mb)


def _children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # the comm field may contain spaces and parentheses: split after the last ')'
        rest = stat[stat.rfind(b")") + 2:].split()
        try:
            kids.setdefault(int(rest[1]), []).append(int(entry.name))
        except (IndexError, ValueError):
            continue
    return kids


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _proc_mem_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE // 1024
    except (OSError, IndexError, ValueError):
        return 0


class _TreeSampler(threading.Thread):
    def __init__(self, pid: int, interval: float):
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval
        self.peak_kb = 0
        self._stop_evt = threading.Event()

    def run(self) -> None:
        while not self._stop_evt.is_set():
            kids = _children_map()
            todo, total = list(kids.get(self.pid, ())), 0  # the launcher itself is not counted
            while todo:
                p = todo.pop()
                total += _proc_mem_kb(p)
                todo.extend(kids.get(p, ()))
            self.peak_kb = max(self.peak_kb, total)
            self._stop_evt.wait(self.interval)

    def stop(self) -> None:
        self._stop_evt.set()
        self.join()


# The launcher: a minimal Python that posix_spawn()s the measured command,
# reaps it with wait4() and writes "wall user sys maxrss_kb status" to a file.
# Why not spawn the command straight from this (large) process: on Linux a
# process's ru_maxrss includes the RSS of the address space it exec()ed from,
# and subprocess spawns via vfork, i.e. from *our* address space -- a
# `/bin/true` spawned by a 500 MB Python reports ru_maxrss 513 MB.  The
# launcher is ~10 MB, so that floor drops below anything a linter uses.  The
# wall time is taken inside the launcher, around spawn+wait, so its own start
# is not counted.
_LAUNCHER = r"""
import os, sys, time
out, cmd = sys.argv[1], sys.argv[2:]
t0 = time.perf_counter()
try:
    pid = os.posix_spawnp(cmd[0], cmd, os.environ)
except OSError as e:
    sys.stderr.write("cannot run %s: %s\n" % (cmd[0], e))
    sys.exit(127)
_, status, ru = os.wait4(pid, 0)
wall = time.perf_counter() - t0
code = os.waitstatus_to_exitcode(status)
with open(out, "w") as f:
    f.write("%r %r %r %d %d\n" % (wall, ru.ru_utime, ru.ru_stime, ru.ru_maxrss, code))
sys.exit(code if code >= 0 else 128 - code)
"""


def run_timed(
    cmd: Sequence[str],
    cwd: Path | str | None = None,
    env: dict[str, str] | None = None,
    timeout: float | None = None,
    sample_tree: bool = True,
) -> RunResult:
    """Run ``cmd``; return wall time, CPU time, peak memory and its output."""
    cmd = [str(c) for c in cmd]
    can_sample = sample_tree and os.path.isdir("/proc/self")
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.TemporaryDirectory() as tmp:
        result_file = os.path.join(tmp, "rusage")
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _LAUNCHER, result_file, *cmd],
            cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
            start_new_session=True,  # so a timeout can kill the whole group
        )
        sampler = _TreeSampler(proc.pid, SAMPLE_INTERVAL) if can_sample else None
        if sampler:
            sampler.start()
        timed_out = False

        def _kill() -> None:
            nonlocal timed_out
            timed_out = True
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass

        timer = threading.Timer(timeout, _kill) if timeout else None
        if timer:
            timer.start()
        try:
            proc.wait()
        finally:
            outer_wall = time.perf_counter() - t0
            if timer:
                timer.cancel()
            if sampler:
                sampler.stop()
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode("utf-8", "replace")
        stderr = err.read().decode("utf-8", "replace")
        try:
            with open(result_file) as f:
                wall_s, user_s, sys_s, rss, code = f.read().split()
            wall, user, sys_t, rss_kb, rc = float(wall_s), float(user_s), float(sys_s), int(rss), int(code)
        except (OSError, ValueError):  # killed, or could not start
            wall, user, sys_t, rss_kb, rc = outer_wall, 0.0, 0.0, 0, proc.returncode
    if sys.platform == "darwin":  # ru_maxrss is bytes there, KiB on Linux
        rss_kb //= 1024
    return RunResult(
        cmd=cmd, returncode=rc, wall_s=wall, user_s=user, sys_s=sys_t, maxrss_mb=rss_kb / 1024,
        tree_mb=(sampler.peak_kb / 1024 if sampler else 0.0),
        stdout=stdout, stderr=stderr, timed_out=timed_out,
    )


@dataclasses.dataclass
class Measurement:
    """``repeat`` runs of one command, summarised."""

    name: str
    cmd: list[str]
    files: int
    runs: list[RunResult]
    ok_codes: tuple[int, ...] = (0, 1)
    note: str = ""

    @property
    def ok(self) -> bool:
        return bool(self.runs) and all(
            r.returncode in self.ok_codes and not r.timed_out for r in self.runs
        )

    @property
    def walls(self) -> list[float]:
        return [r.wall_s for r in self.runs]

    @property
    def wall_min(self) -> float:
        return min(self.walls) if self.runs else float("nan")

    @property
    def wall_median(self) -> float:
        return statistics.median(self.walls) if self.runs else float("nan")

    @property
    def cpu_median(self) -> float:
        """Median user+sys CPU seconds: steadier than wall on a shared machine."""
        return statistics.median(r.user_s + r.sys_s for r in self.runs) if self.runs else float("nan")

    @property
    def peak_mb(self) -> float:
        return max((r.peak_mb for r in self.runs), default=float("nan"))

    @property
    def maxrss_mb(self) -> float:
        return max((r.maxrss_mb for r in self.runs), default=float("nan"))

    @property
    def tree_mb(self) -> float:
        return max((r.tree_mb for r in self.runs), default=float("nan"))

    def files_per_s(self) -> float:
        m = self.wall_median
        return self.files / m if self.runs and m > 0 else float("nan")

    def failure_text(self) -> str:
        bad = next((r for r in self.runs if r.returncode not in self.ok_codes or r.timed_out), None)
        if bad is None:
            return ""
        why = "timed out" if bad.timed_out else f"exit {bad.returncode}"
        return f"{self.name}: {why}: {' '.join(bad.cmd)}\n{tail(bad.stderr or bad.stdout, 20)}"

    def as_dict(self) -> dict:
        return {
            "name": self.name, "cmd": self.cmd, "files": self.files, "ok": self.ok,
            "note": self.note, "walls_s": self.walls, "wall_min_s": self.wall_min,
            "wall_median_s": self.wall_median, "cpu_median_s": self.cpu_median,
            "files_per_s": self.files_per_s(),
            "peak_mb": self.peak_mb, "maxrss_mb": self.maxrss_mb, "tree_pss_mb": self.tree_mb,
            "returncodes": [r.returncode for r in self.runs],
            "user_s": [r.user_s for r in self.runs], "sys_s": [r.sys_s for r in self.runs],
        }


@dataclasses.dataclass
class Spec:
    """One row of a benchmark: a command and how often to time it."""

    name: str
    cmd: list[str]
    files: int
    repeat: int
    cwd: Path | str | None = None
    env: dict[str, str] | None = None
    ok_codes: tuple[int, ...] = (0, 1)


def measure_rounds(specs: Sequence[Spec], timeout: float | None = None, sample_tree: bool = True,
                   progress=None) -> list[Measurement]:
    """Time every spec, interleaved: round 1 runs each spec once, then round 2...

    On a machine shared with other work the load drifts over a run; with the
    rows interleaved the reference (ruff) and ropelint see the same drift, so
    their ratio stays meaningful.  A spec that fails is not run again.
    """
    ms = [Measurement(s.name, [str(c) for c in s.cmd], s.files, [], s.ok_codes) for s in specs]
    for rnd in range(max((s.repeat for s in specs), default=0)):
        for s, m in zip(specs, ms):
            if rnd >= s.repeat or (m.runs and not m.ok):
                continue
            if progress:
                progress(f"  round {rnd + 1}: {s.name}")
            m.runs.append(run_timed(s.cmd, cwd=s.cwd, env=s.env, timeout=timeout, sample_tree=sample_tree))
    return ms


def measure(
    name: str,
    cmd: Sequence[str],
    files: int,
    repeat: int,
    cwd: Path | str | None = None,
    env: dict[str, str] | None = None,
    timeout: float | None = None,
    ok_codes: tuple[int, ...] = (0, 1),
    stop_on_failure: bool = True,
    sample_tree: bool = True,
) -> Measurement:
    m = Measurement(name, [str(c) for c in cmd], files, [], ok_codes)
    for _ in range(max(1, repeat)):
        r = run_timed(cmd, cwd=cwd, env=env, timeout=timeout, sample_tree=sample_tree)
        m.runs.append(r)
        if stop_on_failure and (r.returncode not in ok_codes or r.timed_out):
            break
    return m


# --------------------------------------------------------------------------
# finding the tools
# --------------------------------------------------------------------------


def find_ruff() -> list[str] | None:
    """The ruff binary: ``ruff`` on PATH, else the one the ``ruff`` wheel ships.

    The binary is preferred to ``python -m ruff``, which would add a Python
    start-up (~40 ms) to every ruff timing.
    """
    exe = shutil.which("ruff")
    if exe:
        return [exe]
    if importlib.util.find_spec("ruff") is not None:
        try:
            from ruff.__main__ import find_ruff_bin  # type: ignore

            return [os.fsdecode(find_ruff_bin())]
        except Exception:
            return [sys.executable, "-m", "ruff"]
    return None


def tool_version(cmd: Sequence[str], env: dict[str, str] | None = None) -> str:
    try:
        p = subprocess.run([*cmd, "--version"], capture_output=True, text=True, timeout=60,
                           env=env, cwd=tempfile.gettempdir())
        return (p.stdout or p.stderr).strip().splitlines()[0] if (p.stdout or p.stderr).strip() else "?"
    except Exception as e:  # noqa: BLE001
        return f"? ({e})"


def ropelint_command(pycache_dir: Path | str | None = None) -> tuple[list[str], dict[str, str]] | None:
    """How to run ropelint, and the environment to run it in.

    ``python -m ropelint`` from this checkout (``ropelint/__main__.py``, put
    first on PYTHONPATH so the working tree is what gets measured), else the
    ``ropelint`` executable on PATH.  With ``pycache_dir``, bytecode is
    written and read there (``PYTHONPYCACHEPREFIX``), so no run pays for
    compiling ropelint and the checkout stays untouched.  The environment never carries
    ``ROPELINT_NO_PREFILTER``; callers add it explicitly.  It sets
    ``PYTHONSAFEPATH=1`` (Python >= 3.11) because the scripts run ropelint
    with the linted tree as working directory, and ``python -m`` would
    otherwise put that tree first on ``sys.path``, where a package inside it
    could shadow one of ropelint's own imports.
    """
    env = dict(os.environ)
    env.pop(NO_PREFILTER_ENV, None)
    env["PYTHONSAFEPATH"] = "1"
    if pycache_dir is not None:
        # An installed ropelint has its bytecode compiled; a checkout run with
        # PYTHONDONTWRITEBYTECODE=1 (set on some machines) would recompile every
        # module at every start, ~70 ms on the small-file timing.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(pycache_dir)
    if (REPO_ROOT / "ropelint" / "__main__.py").exists():
        env["PYTHONPATH"] = os.pathsep.join(
            [str(REPO_ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
        )
        return [sys.executable, "-m", "ropelint"], env
    try:
        installed = importlib.util.find_spec("ropelint.__main__") is not None
    except ImportError:  # no ropelint package at all
        installed = False
    if installed:
        return [sys.executable, "-m", "ropelint"], env
    exe = shutil.which("ropelint")
    if exe:
        return [exe], env
    return None


def optional_tool(module: str, exe: str) -> list[str] | None:
    """A tool runnable as ``python -m module`` or as ``exe`` on PATH."""
    if importlib.util.find_spec(module) is not None:
        return [sys.executable, "-m", module]
    found = shutil.which(exe)
    return [found] if found else None


# --------------------------------------------------------------------------
# ropelint's JSON output
# --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Finding:
    path: str
    line: int
    code: str
    message: str

    def render(self) -> str:
        return f"{self.path}:{self.line} {self.code} {self.message}"


def _first(d: dict, *keys, default=None):
    for k in keys:
        if k in d and d[k] is not None:
            return d[k]
    return default


def parse_findings(text: str, cwd: Path | str | None = None, root: Path | str | None = None) -> list[Finding]:
    """Findings from ``ropelint check --format json`` output.

    Accepted shapes: a JSON list of findings; an object holding the list under
    ``findings``, ``diagnostics``, ``results`` or ``violations``; or JSON
    Lines (one finding per line).  A finding needs a path (``path``,
    ``filename`` or ``file``), a line (``line``, ``row``, or
    ``location``/``start``/``range.start`` with ``line``/``row``), a ``code``
    (or ``rule``/``rule_id``) and a ``message`` (or ``msg``).  Paths are made
    relative to ``root`` when given (resolved against ``cwd``).
    Raises ``ValueError`` on output it cannot read.
    """
    text = text.strip()
    if not text:
        return []
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = [json.loads(line) for line in text.splitlines() if line.strip()]
    if isinstance(data, dict):
        data = _first(data, "findings", "diagnostics", "results", "violations", default=None)
        if data is None:
            raise ValueError("JSON object without a findings/diagnostics/results list")
    if not isinstance(data, list):
        raise ValueError(f"unexpected JSON top level: {type(data).__name__}")
    out = []
    for item in data:
        if not isinstance(item, dict):
            raise ValueError(f"finding is not an object: {item!r}")
        path = str(_first(item, "path", "filename", "file", default="?"))
        line = _first(item, "line", "row")
        if line is None:
            loc = _first(item, "location", "start", default=None)
            if loc is None and isinstance(item.get("range"), dict):
                loc = item["range"].get("start")
            if isinstance(loc, dict):
                line = _first(loc, "line", "row")
        code = str(_first(item, "code", "rule", "rule_id", default="?"))
        msg = str(_first(item, "message", "msg", default=""))
        if root is not None:
            p = Path(path)
            if not p.is_absolute() and cwd is not None:
                p = Path(cwd) / p
            try:
                path = os.path.relpath(p, root)
            except ValueError:
                pass
        out.append(Finding(path, int(line) if line is not None else 0, code, msg))
    return out


def known_codes() -> set[str]:
    """Rule codes documented in ``rules/<CODE>.md`` (the shipped rule docs)."""
    return {
        p.stem for p in (REPO_ROOT / "rules").glob("*.md")
        if re.fullmatch(r"[A-Z]+[0-9]+", p.stem)
    }


# --------------------------------------------------------------------------
# printing
# --------------------------------------------------------------------------


def tail(text: str, n: int = 20) -> str:
    lines = (text or "").rstrip().splitlines()
    return "\n".join(("    " + line) for line in lines[-n:]) or "    (no output)"


def fmt_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    rows = [[_cell(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    def line(cells):
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    sep = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), sep, *(line(r) for r in rows)])


def _cell(c: object) -> str:
    if isinstance(c, float):
        if c != c:  # nan
            return "-"
        return f"{c:.3f}" if abs(c) < 10 else f"{c:.1f}"
    return str(c)


def load_average() -> float | None:
    try:
        return os.getloadavg()[0]
    except (OSError, AttributeError):
        return None


def json_safe(obj):
    """NaN -> None, so the JSON files are standard JSON."""
    if isinstance(obj, float) and obj != obj:
        return None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


def machine_info() -> dict:
    return {
        "load_1min": load_average(),
        "python": sys.version.split()[0],
        "platform": sys.platform,
        "cpus": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
    }
