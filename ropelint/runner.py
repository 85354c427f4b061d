"""Checking many files: read and prefilter in the main process, parse cache misses in parallel."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from . import segments
from .cache import Cache, content_key
from .config import Settings
from .diagnostics import FileError
from .diagnostics import FileResult
from .triage import prefilter_enabled, syntax_error
from .source import SourceError, SourceFile, read_source

# Below this many files to parse, a process pool costs more than it saves.
POOL_THRESHOLD = 6
# Runs of up to this many files (pre-commit, a folder) also syntax-check the files that cannot
# hold RoPE code; on a whole repository that check would cost more than everything else.
SYNTAX_CHECK_ALL_MAX_FILES = 256


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


@dataclass(frozen=True)
class Task:
    display: str
    text: str
    newline: str
    codes: frozenset[str]
    syntax_all: bool = False


def _run_task(task: Task) -> FileResult:
    from .engine import check_text  # LibCST is imported only when something needs parsing

    return check_text(task.display, task.text, task.codes, newline=task.newline, syntax_all=task.syntax_all)


def _display(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:
        return str(path)


def check_paths(files: list[Path], settings: Settings, *, jobs: int | None = None,
                cache: Cache | None = None) -> tuple[list[FileResult], dict[str, SourceFile]]:
    results: dict[int, FileResult] = {}
    sources: dict[str, SourceFile] = {}
    pending: list[tuple[int, Task, str, tuple[str, int, int] | None]] = []
    use_prefilter = prefilter_enabled()
    syntax_all = len(files) <= SYNTAX_CHECK_ALL_MAX_FILES
    st = os.stat_result((0,) * 10)
    for index, path in enumerate(files):
        display = _display(path)
        stat_key = ""
        if cache is not None:
            try:
                st = os.stat(path)
                stat_key = os.path.abspath(path)
                known = cache.lookup_stat(stat_key, st.st_size, st.st_mtime_ns)
            except OSError:
                known = None
            # "" : nothing to parse; "-": nothing to parse and syntax-checked clean.
            if known == "-" or (known == "" and not syntax_all):
                results[index] = FileResult(display)
                continue
            if known and known.endswith(":syntax") == syntax_all:
                hit = cache.get(known, display)
                if hit is not None:
                    results[index] = hit
                    continue
        try:
            source = read_source(path)
        except SourceError as exc:
            results[index] = FileResult(display, error=FileError(display, exc.line, exc.column, str(exc)))
            continue
        if use_prefilter and not segments.file_may_hold_rope(source.text):
            error = syntax_error(display, source.text) if syntax_all else None
            results[index] = FileResult(display, error=error)
            if cache is not None and stat_key and error is None:
                cache.remember_stat(stat_key, st.st_size, st.st_mtime_ns, "-" if syntax_all else "")
            continue
        sources[display] = source
        codes = settings.codes_for(path)
        key = ""
        if cache is not None:
            key = content_key(source.text) + ":" + ",".join(sorted(codes))
            if syntax_all:
                key += ":syntax"
            hit = cache.get(key, display)
            if hit is not None:
                results[index] = hit
                if stat_key:
                    cache.remember_stat(stat_key, st.st_size, st.st_mtime_ns, key)
                continue
        pending.append((index, Task(display, source.text, source.newline, codes, syntax_all), key,
                        (stat_key, st.st_size, st.st_mtime_ns) if cache is not None and stat_key else None))
    jobs = jobs or default_jobs()
    if jobs > 1 and len(pending) >= POOL_THRESHOLD:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        context = multiprocessing.get_context("fork") if hasattr(os, "fork") else None
        with ProcessPoolExecutor(max_workers=min(jobs, len(pending)), mp_context=context) as pool:
            chunk = max(1, len(pending) // (jobs * 8))
            done = list(pool.map(_run_task, [task for _, task, _, _ in pending], chunksize=chunk))
    else:
        done = [_run_task(task) for _, task, _, _ in pending]
    for (index, _, key, stat), result in zip(pending, done):
        results[index] = result
        if cache is not None and result.parsed:
            cache.put(key, result)
            if stat is not None:
                cache.remember_stat(*stat, key)
        elif cache is not None and stat is not None and not result.diagnostics and result.error is None:
            cache.remember_stat(*stat, "-" if syntax_all else "")
    if cache is not None:
        cache.save()
    ordered = [results[i] for i in sorted(results)]
    ordered.sort(key=lambda r: r.path)
    return ordered, sources
