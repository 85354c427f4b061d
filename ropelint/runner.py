"""Checking many files: the main process walks and answers unchanged files from the cache; workers
read, prefilter and check the rest."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from . import segments
from .cache import Cache, content_key
from .config import Settings
from .diagnostics import FileError, FileResult
from .source import SourceError, SourceFile, read_source
from .triage import prefilter_enabled, syntax_error

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
    path: Path
    display: str
    codes: frozenset[str]
    syntax_all: bool
    prefilter: bool
    use_cache: bool


@dataclass(frozen=True)
class Done:
    result: FileResult
    # The content key the result belongs under ("" when the file needs no parse, "-" when it was
    # also syntax-checked clean); None when nothing should be remembered.
    key: str | None
    source: SourceFile | None  # kept for reporters and fixes, only when there is something to show


# The cache a forked worker inherits: content lookups without sending the cache to each process.
_CACHE: Cache | None = None


def _run_task(task: Task) -> Done:
    """Read, prefilter and check one file: all of it in the worker, so the main process only walks."""
    try:
        source = read_source(task.path)
    except SourceError as exc:
        return Done(FileResult(task.display, error=FileError(task.display, exc.line, exc.column, str(exc))), None, None)
    # The file's bytes are its UTF-8 text unless a BOM or a coding cookie says otherwise: searched and
    # split as they are, without encoding the text again.
    data = source.raw if source.encoding == "utf-8" and not source.bom else None
    if task.prefilter and not segments.file_may_hold_rope(source.text if data is None else data):
        error = syntax_error(task.display, source.text) if task.syntax_all else None
        marker = None if error is not None else ("-" if task.syntax_all else "")
        return Done(FileResult(task.display, error=error), marker, None)
    key = None
    if task.use_cache:
        key = content_key(source.text if data is None else data) + ":" + ",".join(sorted(task.codes))
        if task.syntax_all:
            key += ":syntax"
        hit = _CACHE.get(key, task.display) if _CACHE is not None else None
        if hit is not None:
            return Done(hit, key, source if hit.diagnostics else None)
    from .engine import check_text

    result = check_text(task.display, source.text, task.codes, prefilter=task.prefilter, newline=source.newline,
                        syntax_all=task.syntax_all, prefiltered=task.prefilter, data=data)
    if not result.parsed:
        key = None if result.diagnostics or result.error is not None else ("-" if task.syntax_all else "")
    return Done(result, key, source if result.diagnostics else None)


def _display(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:
        return str(path)


def check_paths(files: list[Path], settings: Settings, *, jobs: int | None = None,
                cache: Cache | None = None) -> tuple[list[FileResult], dict[str, SourceFile]]:
    """Results in path order, and the sources of the files with findings."""
    global _CACHE
    results: dict[int, FileResult] = {}
    sources: dict[str, SourceFile] = {}
    pending: list[tuple[int, Task, tuple[str, int, int] | None]] = []
    use_prefilter = prefilter_enabled()
    syntax_all = len(files) <= SYNTAX_CHECK_ALL_MAX_FILES
    for index, path in enumerate(files):
        display = _display(path)
        stat = None
        if cache is not None:
            try:
                st = os.stat(path)
                stat = (os.path.abspath(path), st.st_size, st.st_mtime_ns)
                known = cache.lookup_stat(*stat)
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
        task = Task(path, display, settings.codes_for(path), syntax_all, use_prefilter, cache is not None)
        pending.append((index, task, stat))
    _CACHE = cache
    try:
        done = _map(_run_task, [task for _, task, _ in pending], jobs, chunks_per_job=16)
    finally:
        _CACHE = None
    for (index, task, stat), outcome in zip(pending, done):
        result = outcome.result
        results[index] = result
        if outcome.source is not None:
            sources[task.display] = outcome.source
        if cache is None or outcome.key is None:
            continue
        if result.parsed:
            cache.put(outcome.key, result)
        if stat is not None:
            cache.remember_stat(*stat, outcome.key)
    if cache is not None:
        cache.save()
    ordered = [results[i] for i in sorted(results)]
    ordered.sort(key=lambda r: r.path)
    return ordered, sources


def _fix_task(task: tuple[str, SourceFile, frozenset[str], bool]):  # type: ignore[no-untyped-def]
    from .fixer import fix_text

    display, source, codes, unsafe = task
    return fix_text(display, source.text, codes, unsafe=unsafe, newline=source.newline)


def fix_sources(tasks: list[tuple[str, SourceFile, frozenset[str], bool]], *, jobs: int | None = None) -> list:  # type: ignore[type-arg]
    """``fix_text`` for each (display path, source, codes, unsafe), on worker processes when there
    are enough files; results in the order given."""
    return _map(_fix_task, tasks, jobs, chunks_per_job=8)


def _map(fn, tasks: list, jobs: int | None, *, chunks_per_job: int) -> list:  # type: ignore[no-untyped-def, type-arg]
    """``fn`` over ``tasks`` in order, on forked worker processes when there are enough of them."""
    jobs = jobs or default_jobs()
    if jobs <= 1 or len(tasks) < POOL_THRESHOLD:
        return [fn(task) for task in tasks]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context("fork") if hasattr(os, "fork") else None
    with ProcessPoolExecutor(max_workers=min(jobs, len(tasks)), mp_context=context) as pool:
        return list(pool.map(fn, tasks, chunksize=max(1, len(tasks) // (jobs * chunks_per_job))))
