"""Text (rich table) and JSON output for probe reports. No torch needed."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ropelint.probe.results import CaseResult, ProbeReport


def _error_text(value: float | None) -> str:
    if value is None:
        return "-"
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf"
    return f"{value:.3g}"


def _case_row(result: CaseResult) -> tuple[str, ...]:
    verdict = "[green]pass[/green]" if result.passed else "[red]FAIL[/red]"
    first = "-" if result.first_failing_position is None else str(result.first_failing_position)
    if result.error:
        return (result.case.label, "-", "-", "-", "-", f"{verdict} {escape(result.error)}")
    return (result.case.label, result.output_dtype or "-", _error_text(result.max_error),
            _error_text(result.worst_ratio), first, verdict)


def render_text(report: ProbeReport, console: Console) -> None:
    table = Table(title=f"ropelint probe {report.symbol}", title_justify="left")
    table.add_column("case")
    table.add_column("output dtype")
    table.add_column("max error", justify="right")
    table.add_column("error/tolerance", justify="right")
    table.add_column("first failing position", justify="right")
    table.add_column("result")
    for result in report.cases:
        table.add_row(*_case_row(result))
    console.print(table)
    if report.how:
        console.print(f"called as: {report.how}", highlight=False, markup=False)
    for check in report.checks:
        state = {True: "[green]pass[/green]", False: "[red]FAIL[/red]",
                 None: "[yellow]n/a[/yellow]"}[check.passed]
        console.print(f"{check.name}: {state} {escape(check.detail)}", highlight=False)
    style = "green" if report.ok else "red"
    console.print(f"[{style}]{report.verdict}[/{style}]", highlight=False)


def render_error_text(symbol: str, message: str, console: Console) -> None:
    console.print(f"[red]ropelint probe {symbol}: cannot build or call it[/red]", highlight=False)
    console.print(message, highlight=False, markup=False)


def json_document(entries: Sequence[ProbeReport | tuple[str, str]]) -> str:
    """One object for one symbol, an array for several.

    An entry that could not be built or called is ``(symbol, message)`` and becomes
    ``{"symbol", "passed": 0, "total": 0, "cases": [], "error": message}``.
    """
    objects = []
    for entry in entries:
        if isinstance(entry, ProbeReport):
            objects.append(entry.to_json())
        else:
            symbol, message = entry
            objects.append({"symbol": symbol, "passed": 0, "total": 0, "cases": [],
                            "error": message})
    payload: object = objects[0] if len(objects) == 1 else objects
    return json.dumps(payload, indent=2, allow_nan=False)
