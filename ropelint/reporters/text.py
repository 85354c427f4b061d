"""Text output: ``path:line:col: CODE message``, a short code frame, and a summary line."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.text import Text

from ..diagnostics import Diagnostic, FileError
from ..source import SourceError, SourceFile, read_source


def _frame(d: Diagnostic, source: SourceFile | None) -> Text | None:
    if source is None:  # answered from the cache without reading the file
        try:
            source = read_source(Path(d.path))
        except SourceError:
            return None
    lines = source.text.splitlines()
    if not 1 <= d.line <= len(lines):
        return None
    line = lines[d.line - 1].expandtabs(4) if "\t" not in lines[d.line - 1] else lines[d.line - 1]
    gutter = str(d.line)
    width = len(gutter)
    end = d.end_column if d.end_line == d.line else len(line) + 1
    carets = max(1, end - d.column)
    text = Text()
    text.append(f"{' ' * width} |\n", style="blue")
    text.append(f"{gutter} | ", style="blue")
    text.append(line + "\n")
    text.append(f"{' ' * width} | ", style="blue")
    text.append(" " * (d.column - 1) + "^" * carets, style="bold red")
    if d.fix is not None:
        text.append(f"\n{' ' * width} = fix ({d.fix.safety}): {d.fix.description}", style="cyan")
    return text


def render(console: Console, diagnostics: list[Diagnostic], errors: list[FileError],
           sources: dict[str, SourceFile], *, quiet: bool, files_checked: int) -> None:
    for d in diagnostics:
        head = Text()
        head.append(f"{d.path}:{d.line}:{d.column}:", style="bold")
        head.append(" ")
        head.append(d.code, style="bold red")
        head.append(f" {d.message}")
        console.print(head, soft_wrap=True)
        if not quiet:
            frame = _frame(d, sources.get(d.path))
            if frame is not None:
                console.print(frame, soft_wrap=True)
                console.print()
    if quiet:
        return
    fixable = sum(1 for d in diagnostics if d.fix is not None)
    files = len({d.path for d in diagnostics})
    if diagnostics:
        noun = "finding" if len(diagnostics) == 1 else "findings"
        summary = f"Found {len(diagnostics)} {noun} ({fixable} fixable) in {files} file{'s' if files != 1 else ''}."
        console.print(Text(summary, style="bold"), soft_wrap=True)
        if fixable:
            console.print(Text("Run `ropelint fix --write` to apply the safe fixes "
                               "(`--unsafe-fixes` for the rest).", style="dim"), soft_wrap=True)
    elif not errors:
        console.print(Text(f"All checks passed ({files_checked} file{'s' if files_checked != 1 else ''} checked).",
                           style="bold green"), soft_wrap=True)


def render_errors(console: Console, errors: list[FileError]) -> None:
    for e in errors:
        line = Text()
        line.append(f"{e.path}:{e.line}:{e.column}:", style="bold")
        line.append(" error:", style="bold red")
        line.append(f" {e.message}")
        console.print(line, soft_wrap=True)
