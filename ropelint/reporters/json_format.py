"""``--format json``: a JSON array, one object per finding."""

from __future__ import annotations

import json

from ..diagnostics import Diagnostic


def diagnostic_dict(d: Diagnostic) -> dict:
    return {
        "code": d.code,
        "name": d.name,
        "message": d.message,
        "path": d.path,
        "line": d.line,
        "column": d.column,
        "end_line": d.end_line,
        "end_column": d.end_column,
        "symbol": d.symbol,
        "fix": None if d.fix is None else {"safety": d.fix.safety, "description": d.fix.description},
    }


def render(diagnostics: list[Diagnostic]) -> str:
    return json.dumps([diagnostic_dict(d) for d in diagnostics], indent=2)
