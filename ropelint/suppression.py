"""Inline suppression: ``# ropelint: ignore[RPL003]``, ``# ropelint: ignore``, ``# noqa: RPL003``, ``# noqa``."""

from __future__ import annotations

import re

_IGNORE = re.compile(r"#\s*ropelint:\s*ignore(?:\[([A-Za-z0-9_,\s]*)\])?", re.IGNORECASE)
_NOQA = re.compile(r"#\s*noqa(?::\s*([A-Za-z0-9_,\s]+))?", re.IGNORECASE)

ALL = "*"


def codes_on_line(line: str) -> set[str]:
    """Codes (or ALL) that a comment on this line suppresses."""
    if "#" not in line:
        return set()
    out: set[str] = set()
    for pattern in (_IGNORE, _NOQA):
        for match in pattern.finditer(line):
            listed = match.group(1)
            if listed is None:
                out.add(ALL)
            else:
                out.update(code.strip().upper() for code in re.split(r"[,\s]+", listed) if code.strip())
    return out


def suppressed(code: str, lines: list[str], reported_line: int, statement_line: int) -> bool:
    for line_no in {reported_line, statement_line}:
        if 1 <= line_no <= len(lines):
            codes = codes_on_line(lines[line_no - 1])
            if ALL in codes or any(code.startswith(c) for c in codes):
                return True
    return False
