"""Cheap text triage: which files, and which definitions of them, can hold RoPE code.

A file the prefilter rejects costs a read and two regex searches. A file it keeps is split at
top-level statement boundaries by a line scan; only the definitions that can build inverse
frequencies, form or cast a phase, take its cos/sin, register rotary state or wrap autocast are
handed to LibCST, as one synthetic module whose lines map back to the file. Large classes are
pruned to their state-defining and rotary methods the same way. When the split is unsure (a parse
error in the synthetic module) the caller parses the whole file, so a wrong split can cost time
but never a finding.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Literal probes first (``in`` is a fast C search); regexes only confirm what a literal found.
_FILE_WORDS = ("freq", "arange", "autocast", "polar", "rotary", "rope", "Rotary", "RoPE")
_ROTARY_LITERALS = ("freq", "phase", "polar", "_cis", "rotary", "rope", "Rotary", "sincos", "theta", "omega")
# A power with an operand on the left (``**kwargs`` has none).
# Either spaced on both sides or on neither: markdown bold in docstrings (``are **not**``) is neither.
_WRAPPER = re.compile(r"return\s+[\w.]*autocast\(|\byield\b")
_DEF_NAME = re.compile(r"^\s*(?:async\s+)?(?:def|class)\s+(\w+)")
_ROTARY_NAME = re.compile(r"rotary|rope|freq|sincos|sinusoid|position|pos_?emb|\bcis\b", re.IGNORECASE)

WRAPPER_MAX_LINES = 40
CLASS_PRUNE_MIN_LINES = 120
# Kept whenever another method of the class is: they define state and how casts treat it.
_KEEP_METHODS = {"_apply"}


def file_may_hold_rope(text: str) -> bool:
    return "torch" in text and any(word in text for word in _FILE_WORDS)


# Words that are rotary values when used as code (``phase = ...``, ``theta**``), prose otherwise.
_CODE_WORDS = {
    word: re.compile(rf"(?:[=(\[,*+/-]\s*|^\s*){word}\b|\b{word}\s*(?:[=\[(),:*+/-]|\.\w)", re.MULTILINE)
    for word in ("phase", "theta", "omega", "angles")
}


def _rotary_vocabulary(segment: str) -> bool:
    if "freq" in segment:
        start = segment.find("freq")
        while start != -1:
            if not segment.startswith("freque", start):  # frequency, frequencies: not rotary words
                return True
            start = segment.find("freq", start + 1)
    if "sincos" in segment or "polar(" in segment or "_cis" in segment:
        return True
    return any(word in segment and _CODE_WORDS[word].search(segment) is not None for word in _CODE_WORDS)


_TRIG_LITERALS = (".cos(", ".sin(", " cos(", " sin(", "(cos(", "(sin(", "=cos(", "=sin(")


def _has_power(segment: str) -> bool:
    """A power with an operand on each side (not ``**kwargs``), spaced on both sides or on neither
    (not markdown bold), with a non-numeric exponent (not ``x ** 0.5``); or a pow/exp call.
    Scanned by ``str.find``: a regex without a literal prefix is slow on long segments."""
    for word in ("pow(", "exp("):
        start = segment.find(word)
        while start != -1:
            if start == 0 or not (segment[start - 1].isalnum() or segment[start - 1] == "_"):
                return True
            start = segment.find(word, start + 1)
    start = segment.find("**")
    while start != -1:
        before = segment[:start]
        after = segment[start + 2:start + 40]
        spaced_before = before.endswith((" ", "\t"))
        left = before.rstrip(" \t")[-1:]
        right_text = after.lstrip(" \t")
        spaced_after = len(right_text) != len(after)
        right = right_text[:1]
        if left and (left.isalnum() or left in "_)]") and spaced_before == spaced_after \
                and right and (right in "(-_" or right.isalpha()):
            return True
        start = segment.find("**", start + 2)
    return False


def _interesting(segment: str, first_line: str, lines: int, *, method: bool = False) -> bool:
    ranged = "arange(" in segment or "linspace(" in segment
    trig = any(token in segment for token in _TRIG_LITERALS)
    if _rotary_vocabulary(segment):
        if ranged or trig or "register_buffer" in segment or "Buffer(" in segment or "Parameter(" in segment \
                or " @ " in segment or "matmul" in segment or "einsum" in segment or "outer(" in segment:
            return True
    if ranged and _has_power(segment):
        return True
    name = None if method else _DEF_NAME.match(first_line)
    if name and (ranged or trig) and _ROTARY_NAME.search(name.group(1)):
        return True
    # A short function that returns (or yields inside) a disabled autocast may be a local guard wrapper.
    return lines <= WRAPPER_MAX_LINES and "autocast" in segment and first_line.lstrip().startswith(("def ", "@")) \
        and ("enabled" in segment or "float32" in segment) and _WRAPPER.search(segment) is not None


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
    # Synthetic line where each top-level statement starts (its first decorator or keyword line),
    # in order; lets positions be computed for one statement instead of the whole module.
    statement_lines: tuple[int, ...] = ()

    def to_file_line(self, line: int) -> int:
        for chunk in self.chunks:
            if chunk.synthetic_start <= line < chunk.synthetic_start + chunk.count:
                return chunk.file_start + (line - chunk.synthetic_start)
        return line


def whole(text: str) -> Selection:
    count = text.count("\n") + 1
    lines = text.splitlines(keepends=True)
    starts = [begin + 1 for begin, _ in _blocks(lines, _starts(lines, "", 0, len(lines)), len(lines))]
    return Selection(text, (Chunk(1, 1, count),), True, tuple(starts))


_CONTINUATION = ("else", "elif", "except", "finally")


def _starts(lines: list[str], indent: str, begin: int, end: int) -> list[int]:
    """Indices of lines in [begin, end) that start a statement at exactly ``indent``."""
    out = []
    width = len(indent)
    for i in range(begin, end):
        line = lines[i]
        ch = line[width:width + 1]
        if not ch or ch in " \t#\r\n)]}\\" or (width and not line.startswith(indent)):
            continue
        if ch in "ef" and line.startswith(_CONTINUATION, width):
            word = re.split(r"[\s:(]", line[width:], maxsplit=1)[0]
            if word in _CONTINUATION:
                continue
        out.append(i)
    return out


def _blocks(lines: list[str], starts: list[int], end: int) -> list[tuple[int, int]]:
    """Statement ranges from start lines; a decorator run joins the definition below it."""
    blocks: list[tuple[int, int]] = []
    pending: int | None = None
    for n, start in enumerate(starts):
        stop = starts[n + 1] if n + 1 < len(starts) else end
        if lines[start].lstrip().startswith("@"):
            pending = start if pending is None else pending
            continue
        blocks.append((pending if pending is not None else start, stop))
        pending = None
    if pending is not None:
        blocks.append((pending, end))
    return blocks


def _class_parts(lines: list[str], begin: int, end: int, kept_functions: list[str] = ()) -> list[tuple[int, int]]:  # type: ignore[assignment]
    """A class pruned to its header, non-method statements and the methods that can hold RoPE code."""
    header_end = begin
    while header_end < end and not lines[header_end].startswith("class "):
        header_end += 1
    while header_end < end and not lines[header_end].split("#", 1)[0].rstrip().endswith(":"):
        header_end += 1  # a header over several lines
    body_start = header_end + 1
    indent = None
    for i in range(body_start, end):
        stripped = lines[i].strip()
        if stripped and not stripped.startswith("#"):
            indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
            break
    if not indent or header_end >= end:
        return [(begin, end)]
    starts = _starts(lines, indent, body_start, end)
    if not starts:
        return [(begin, end)]
    # The header alone (decorators and ``class ...:``): a pruned class needs no docstring or attributes.
    kept = [(begin, header_end + 1)]
    any_method = False
    for start, stop in _blocks(lines, starts, end):
        first = lines[start:stop]
        head = next((ln for ln in first if not ln.lstrip().startswith("@")), "")
        name = _DEF_NAME.match(head)
        if name is None:
            continue
        text = "".join(first)
        # Inside a class, any method that speaks of frequencies or phases may carry them between
        # methods (``self._precompute_freqs_cis()``), so the vocabulary alone keeps it.
        if name.group(1) in _KEEP_METHODS or (_rotary_vocabulary(text) and "return" in text) \
                or any(call in text for call in kept_functions) or _interesting(text, head, stop - start, method=True):
            kept.append((start, stop))
            any_method = any_method or name.group(1) not in _KEEP_METHODS
    return kept if any_method else []


def select(text: str) -> Selection | None:
    """The segments worth parsing, or None when nothing in the file can hold RoPE code."""
    lines = text.splitlines(keepends=True)
    starts = _starts(lines, "", 0, len(lines))
    if not starts:
        return None
    blocks = _blocks(lines, starts, len(lines))
    if starts[0] != 0:
        blocks.insert(0, (0, starts[0]))
    # First pass: which blocks can hold RoPE code, and the names of the kept top-level functions:
    # a method that calls one of them (``self.bands = _build_bands(...)``) carries its values.
    triaged = []
    for begin, end in blocks:
        first = lines[begin]
        if first.startswith(("import ", "from ")):
            triaged.append((begin, end, None, False))
            continue  # aliases come from the text scan; fixes insert imports by offset
        segment = "".join(lines[begin:end])
        head = next((ln for ln in lines[begin:end] if ln.startswith(("class ", "def ", "async def "))), first)
        interesting = _interesting(segment, head, end - begin)
        name = _DEF_NAME.match(head)
        triaged.append((begin, end, (segment, head, name), interesting))
    # Functions that can hand rotary values to a caller: kept ones that speak of frequencies (by name
    # or vocabulary), and, transitively, functions that call those.
    functions = {info[2].group(1): (info[0], interesting) for _, _, info, interesting in triaged
                 if info is not None and info[2] is not None and not info[1].startswith("class ")}
    strong = {name for name, (segment, interesting) in functions.items()
              if interesting and (_ROTARY_NAME.search(name) or _rotary_vocabulary(segment))}
    changed = True
    while changed:
        changed = False
        for name, (segment, _) in functions.items():
            if name not in strong and _rotary_vocabulary(segment) and any(f"{s}(" in segment for s in strong):
                strong.add(name)
                changed = True
    kept_functions = [f"{name}(" for name in strong]
    triaged = [(b, e, info, interesting or (info is not None and info[2] is not None
                                          and info[2].group(1) in strong))
               for b, e, info, interesting in triaged]
    kept: list[tuple[int, int]] = []
    statement_index: list[int] = []  # index into kept where each top-level statement starts
    all_kept = True
    for begin, end, info, interesting in triaged:
        if info is None:
            all_kept = False
            continue
        segment, head, name = info
        is_class = head.startswith("class ")
        calls_kept = is_class and any(call in segment for call in kept_functions)
        if not interesting and not calls_kept:
            all_kept = False
            continue
        if is_class and not (interesting and name and _ROTARY_NAME.search(name.group(1))
                             and end - begin < CLASS_PRUNE_MIN_LINES):
            parts = _class_parts(lines, begin, end, kept_functions)
            if parts != [(begin, end)]:
                all_kept = False
            if parts:
                statement_index.append(len(kept))
            kept.extend(parts)
        else:
            statement_index.append(len(kept))
            kept.append((begin, end))
    if not kept:
        return None
    if all_kept:
        return whole(text)
    parts_text: list[str] = []
    chunks: list[Chunk] = []
    synthetic = 1
    for begin, end in kept:
        body = "".join(lines[begin:end])
        if not body.endswith("\n"):
            body += "\n"
        parts_text.append(body)
        count = end - begin
        chunks.append(Chunk(begin + 1, synthetic, count))
        synthetic += count
    return Selection("".join(parts_text), tuple(chunks), False,
                     tuple(chunks[i].synthetic_start for i in statement_index))
