"""One file through the pipeline: prefilter -> segments -> parse -> RoPE model -> rules -> diagnostics."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from . import segments
from .diagnostics import AddImport, DeleteLines, Diagnostic, FileError, Finding, FixInfo, Replace, TextEdit
from .imports import ImportTable, scan_imports
from .model.interpreter import FileModel, analyse
from .rules import BY_CODE, RuleContext
from .source import SourceError, SourceFile, read_source
from .suppression import suppressed


@dataclass(frozen=True)
class FileResult:
    path: str
    diagnostics: tuple[Diagnostic, ...] = ()
    error: FileError | None = None
    parsed: bool = False


def prefilter_enabled() -> bool:
    # The escape hatch measures the prefilter's miss rate: parse every file, whole.
    return os.environ.get("ROPELINT_NO_PREFILTER", "") in ("", "0")


def _parse(text: str, selection: segments.Selection) -> tuple[cst.Module, segments.Selection]:
    try:
        return cst.parse_module(selection.code), selection
    except cst.ParserSyntaxError:
        if selection.whole_file:
            raise
    full = segments.whole(text)
    return cst.parse_module(full.code), full


class _Positions:
    """Positions computed once per file, and only when something is reported."""

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self._map: dict[cst.CSTNode, CodeRange] | None = None

    def range(self, node: cst.CSTNode) -> CodeRange:
        if self._map is None:
            wrapper = MetadataWrapper(self.module, unsafe_skip_copy=True)
            self._map = dict(wrapper.resolve(PositionProvider))
        return self._map[node]

    def statements(self) -> list[CodeRange]:
        self.range(self.module)
        assert self._map is not None
        return [rng for node, rng in self._map.items()
                if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement))]


def check_text(path: str, text: str, codes: frozenset[str], *, prefilter: bool | None = None,
               newline: str = "\n") -> FileResult:
    use_prefilter = prefilter_enabled() if prefilter is None else prefilter
    if use_prefilter:
        if not segments.file_may_hold_rope(text):
            return FileResult(path)
        selection = segments.select(text)
        if selection is None:
            return FileResult(path)
    else:
        selection = segments.whole(text)
    try:
        module, selection = _parse(text, selection)
    except cst.ParserSyntaxError as exc:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else "invalid syntax"
        return FileResult(path, error=FileError(path, exc.raw_line, exc.raw_column + 1, f"syntax error: {message}"))
    except (RecursionError, Exception) as exc:  # noqa: BLE001 - a parser crash must not stop the run
        return FileResult(path, error=FileError(path, 1, 1, f"cannot parse: {type(exc).__name__}: {exc}"))
    imports = scan_imports(text)
    if "torch" not in {q.split(".")[0] for q in imports.names.values()}:
        return FileResult(path, parsed=True)
    model = analyse(module, imports)
    findings = run_rules(module, model, imports, codes, _Positions(module), selection)
    if not findings[0]:
        return FileResult(path, parsed=True)
    return FileResult(path, _to_diagnostics(path, text, findings[0], findings[1], selection, imports, newline),
                      parsed=True)


def run_rules(module: cst.Module, model: FileModel, imports: ImportTable, codes: frozenset[str],
              positions: _Positions, selection: segments.Selection) -> tuple[list[Finding], _Positions]:
    if not (model.products or model.casts or model.registrations or model.inv_freqs or model.trigs):
        return [], positions
    ctx = RuleContext(
        module, model, imports,
        line_of=lambda node: selection.to_file_line(positions.range(node).start.line),
        start_of=lambda node: (selection.to_file_line(positions.range(node).start.line),
                               positions.range(node).start.column),
    )
    for code in sorted(codes):
        BY_CODE[code]().check(ctx)
    return ctx.findings, positions


def _line_starts(text: str) -> list[int]:
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return starts


def _to_diagnostics(path: str, text: str, findings: list[Finding], positions: _Positions,
                    selection: segments.Selection, imports: ImportTable, newline: str) -> tuple[Diagnostic, ...]:
    lines = text.splitlines()
    starts = _line_starts(text)
    statements = positions.statements()
    out: list[Diagnostic] = []
    for finding in findings:
        rng = positions.range(finding.node)
        line = selection.to_file_line(rng.start.line)
        end_line = selection.to_file_line(rng.end.line)
        stmt_line = line
        best = None
        for srng in statements:
            if (srng.start.line, srng.start.column) <= (rng.start.line, rng.start.column) and \
                    (srng.end.line, srng.end.column) >= (rng.end.line, rng.end.column):
                if best is None or (srng.start.line, srng.start.column) > (best.start.line, best.start.column):
                    best = srng
        if best is not None:
            stmt_line = selection.to_file_line(best.start.line)
        if suppressed(finding.code, lines, line, stmt_line):
            continue
        fix = None
        if finding.fix is not None:
            edits = tuple(_text_edits(finding.fix.edits, positions, selection, starts, text, imports, newline))
            fix = FixInfo(finding.fix.safety, finding.fix.description, edits)
        rule = BY_CODE[finding.code]
        out.append(Diagnostic(finding.code, rule.name, finding.message, path, line, rng.start.column + 1,
                              end_line, rng.end.column + 1, finding.symbol, fix))
    return tuple(sorted(out, key=lambda d: d.sort_key))


def _text_edits(edits, positions: _Positions, selection: segments.Selection, starts: list[int], text: str,
                imports: ImportTable, newline: str):  # type: ignore[no-untyped-def]
    for edit in edits:
        if isinstance(edit, AddImport):
            if edit.statement in text:
                continue
            offset = imports.insert_offset
            if offset:
                yield TextEdit(offset, offset, newline + edit.statement)
            else:
                yield TextEdit(0, 0, edit.statement + newline)
            continue
        rng = positions.range(edit.node)
        first = selection.to_file_line(rng.start.line)
        last = selection.to_file_line(rng.end.line)
        if isinstance(edit, DeleteLines):
            yield TextEdit(starts[first - 1], starts[min(last, len(starts) - 1)], "")
        elif isinstance(edit, Replace):
            start = starts[first - 1] + rng.start.column
            end = starts[last - 1] + rng.end.column
            yield TextEdit(start, end, edit.code.replace("\n", newline) if newline != "\n" else edit.code)


def check_file(path: Path, codes: frozenset[str], display: str | None = None) -> tuple[FileResult, SourceFile | None]:
    shown = display or str(path)
    try:
        source = read_source(path)
    except SourceError as exc:
        return FileResult(shown, error=FileError(shown, exc.line, exc.column, str(exc))), None
    return check_text(shown, source.text, codes, newline=source.newline), source
