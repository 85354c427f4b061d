"""Checks that run before (or instead of) a LibCST parse; importable without LibCST."""

from __future__ import annotations

import ast
import os

from .diagnostics import FileError


def prefilter_enabled() -> bool:
    # The escape hatch measures the prefilter's miss rate: parse every file, whole.
    return os.environ.get("ROPELINT_NO_PREFILTER", "") in ("", "0")


def syntax_error(path: str, text: str) -> FileError | None:
    """CPython's own parser on the whole file: cheaper than LibCST, used where LibCST parses only a part."""
    try:
        compile(text, path, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as exc:
        return FileError(path, exc.lineno or 1, (exc.offset or 0) or 1, f"syntax error: {exc.msg}")
    except (ValueError, RecursionError, MemoryError) as exc:
        return FileError(path, 1, 1, f"cannot parse: {exc}")
    return None
