"""Applying fixes: text edits, re-parse, re-check until nothing changes; atomic writes."""

from __future__ import annotations

import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

import libcst as cst

from .diagnostics import Diagnostic, FileError, TextEdit
from .engine import FileResult, check_text

MAX_ROUNDS = 8


def applicable(diagnostics: tuple[Diagnostic, ...], unsafe: bool) -> list[Diagnostic]:
    return [d for d in diagnostics if d.fix is not None and d.fix.edits and (unsafe or d.fix.safety == "safe")]


def apply_edits(text: str, diagnostics: list[Diagnostic]) -> tuple[str, int]:
    """Apply whole fixes that do not overlap an earlier accepted fix; identical edits merge."""
    accepted: list[TextEdit] = []
    count = 0
    for diag in diagnostics:
        assert diag.fix is not None
        edits = [e for e in dict.fromkeys(diag.fix.edits) if e not in accepted]
        clash = any(e.start < a.end and a.start < e.end or (e.start == a.start and e.end == a.end == e.start)
                    for e in edits for a in accepted)
        if clash:
            continue
        accepted.extend(edits)
        count += 1
    # From the end backwards; insertions at one point end up in the order the fixes listed them.
    for _, edit in sorted(enumerate(accepted), key=lambda p: (p[1].start, p[1].end, p[0]), reverse=True):
        text = text[: edit.start] + edit.text + text[edit.end:]
    return text, count


@dataclass(frozen=True)
class FixOutcome:
    original: str
    fixed: str
    applied: int
    remaining: FileResult
    error: FileError | None = None

    @property
    def changed(self) -> bool:
        return self.fixed != self.original


def fix_text(path: str, text: str, codes: frozenset[str], *, unsafe: bool, newline: str = "\n") -> FixOutcome:
    current = text
    total = 0
    result = check_text(path, current, codes, newline=newline)
    for _ in range(MAX_ROUNDS):
        if result.error is not None:
            break
        todo = applicable(result.diagnostics, unsafe)
        if not todo:
            break
        candidate, count = apply_edits(current, todo)
        if candidate == current or count == 0:
            break
        problem = _invalid(candidate, full=False)
        if problem is not None:
            return _refused(path, text, codes, newline, problem)
        current = candidate
        total += count
        result = check_text(path, current, codes, newline=newline)
    if current != text:
        # The final text also goes through LibCST, a second parser: nothing is written that either rejects.
        problem = _invalid(current, full=True)
        if problem is not None:
            return _refused(path, text, codes, newline, problem)
    return FixOutcome(text, current, total, result)


def _refused(path: str, text: str, codes: frozenset[str], newline: str, problem: tuple[int, str]) -> FixOutcome:
    line, message = problem
    return FixOutcome(text, text, 0, check_text(path, text, codes, newline=newline),
                      FileError(path, line, 1, f"fix not applied: the fixed code would not parse ({message})"))


def _invalid(text: str, *, full: bool) -> tuple[int, str] | None:
    try:
        compile(text, "<fixed>", "exec", dont_inherit=True)
        if full:
            try:
                cst.parse_module(text)
            except cst.ParserSyntaxError as exc:
                return exc.raw_line, str(exc).splitlines()[0]
    except SyntaxError as exc:
        return exc.lineno or 1, exc.msg
    return None


def write_atomic(path: Path, data: bytes) -> None:
    """Write via a temporary file in the same folder and rename, keeping the file's mode."""
    mode = stat.S_IMODE(path.stat().st_mode) if path.exists() else None
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".ropelint-tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
