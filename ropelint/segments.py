"""Cheap text triage: which files, and which top-level definitions of them, can hold RoPE code.

A file the prefilter rejects costs a read and two regex searches. A file it keeps is split at
top-level statement boundaries by a line scan; only the definitions that mention rotary
vocabulary are handed to LibCST, as one synthetic module whose lines map back to the file.
When the split is unsure (a parse error in the synthetic module) the caller falls back to the
whole file, so a wrong split can cost time but never a finding.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A file must mention torch and at least one thing a rule can fire on.
_FILE_TORCH = re.compile(r"\btorch\b")
_FILE_ROPE = re.compile(r"inv_freq|freq|theta|autocast|polar|arange|rotary|rope\b")

# A top-level segment is parsed when it can build frequencies, form a phase, take its trig,
# register state, or guard autocast.
_SEGMENT = re.compile(
    r"inv_freq|freq|theta|autocast|polar|\bcis\b|_cis\b"
    r"|\b(?:cos|sin)\(|\.(?:cos|sin)\("
    r"|\*\*\s*\(|(?<![.\w])pow\(|\btorch\.pow\(|\bexp\(|\beinsum\b|\bouter\("
)

# Lines that start a new top-level statement: code at column 0 that does not continue one.
_BOUNDARY = re.compile(r"^(?![ \t#\r\n)\]}])(?!(?:else|elif|except|finally)\b)", re.MULTILINE)


def file_may_hold_rope(text: str) -> bool:
    return _FILE_TORCH.search(text) is not None and _FILE_ROPE.search(text) is not None


@dataclass(frozen=True)
class Chunk:
    """Lines [file_start, file_start + count) of the file appear at synthetic_start."""

    file_start: int  # 1-based
    synthetic_start: int  # 1-based
    count: int


@dataclass(frozen=True)
class Selection:
    """The synthetic module text and the line map back into the file."""

    code: str
    chunks: tuple[Chunk, ...]
    whole_file: bool

    def to_file_line(self, line: int) -> int:
        for chunk in self.chunks:
            if chunk.synthetic_start <= line < chunk.synthetic_start + chunk.count:
                return chunk.file_start + (line - chunk.synthetic_start)
        return line


def whole(text: str) -> Selection:
    count = text.count("\n") + 1
    return Selection(text, (Chunk(1, 1, count),), True)


def select(text: str) -> Selection | None:
    """The segments worth parsing, or None when nothing in the file can hold RoPE code."""
    lines = text.splitlines(keepends=True)
    starts = [text.count("\n", 0, m.start()) for m in _BOUNDARY.finditer(text)]
    if not starts:
        return None
    # Decorators belong to the definition below them.
    merged: list[int] = []
    for start in starts:
        if merged and lines[merged[-1]].startswith("@") and start == _next_after_decorators(lines, merged[-1]):
            continue
        merged.append(start)
    bounds = list(zip(merged, merged[1:] + [len(lines)]))
    if merged[0] != 0:
        bounds.insert(0, (0, merged[0]))
    kept: list[tuple[int, int]] = []
    for begin, end in bounds:
        first = lines[begin] if begin < len(lines) else ""
        if first.startswith(("import ", "from ")):
            continue  # aliases come from the text scan; fixes insert imports by offset
        segment = "".join(lines[begin:end])
        if _SEGMENT.search(segment):
            kept.append((begin, end))
    if not kept:
        return None
    if len(kept) == len(bounds):
        return whole(text)
    parts: list[str] = []
    chunks: list[Chunk] = []
    synthetic = 1
    for begin, end in kept:
        body = "".join(lines[begin:end])
        if not body.endswith("\n"):
            body += "\n"
        parts.append(body)
        count = end - begin
        chunks.append(Chunk(begin + 1, synthetic, count))
        synthetic += count
    return Selection("".join(parts), tuple(chunks), False)


def _next_after_decorators(lines: list[str], index: int) -> int:
    """Index of the first line at column 0 after a decorator run that starts at ``index``."""
    i = index + 1
    while i < len(lines):
        line = lines[i]
        if line[:1] not in (" ", "\t", "#", "\r", "\n", ")", "]", "}", "") and not line.startswith("@"):
            return i
        i += 1
    return i
