"""One file through the pipeline: prefilter -> segments -> parse -> RoPE model -> rules -> diagnostics."""

from __future__ import annotations


import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from . import segments, vendor
from .catalogue import INFO
from .diagnostics import (AddImport, DeleteLines, Diagnostic, FileError, FileResult, Finding, FixInfo,
                          InsertAfterStatement, Replace, TextEdit)
from .imports import ImportTable, scan_imports
from .model.interpreter import FileModel, analyse
from .rules import BY_CODE, RuleContext
from .triage import prefilter_enabled, syntax_error
from .suppression import suppressed


def _parse(text: str, selection: segments.Selection) -> tuple[cst.Module, segments.Selection]:
    try:
        return cst.parse_module(selection.code), selection
    except cst.ParserSyntaxError:
        if selection.whole_file:
            raise
    full = segments.whole(text)
    return cst.parse_module(full.code), full


class _Positions:
    """Positions computed only when something is reported, and only for the code involved.

    LibCST's PositionProvider costs a code generation of the whole module. A finding lies in a
    top-level statement that holds events, so positions are computed for that statement alone
    (as a one-statement module whose line 1 is the statement's first line), and inside a class
    for the one method that holds the node. Method positions are shifted by the class body's
    indentation and verified against the text; on any doubt the whole class is used.
    """

    def __init__(self, module: cst.Module, selection: segments.Selection, tops: list[cst.CSTNode],
                 statement_of: dict[int, cst.CSTNode] | None = None) -> None:
        self.module = module
        self.lines = selection.code.splitlines()
        self.maps: list[tuple[dict[cst.CSTNode, CodeRange], int, int]] = []
        # Statement-level maps: (mapping, line offset, column shift of the statement's first line).
        self.statement_maps: list[tuple[dict[cst.CSTNode, CodeRange], int, int]] = []
        self.statement_of = statement_of or {}
        self._spans: dict[int, tuple[int, int]] = {}  # id(function) -> [start, end) synthetic line indexes
        self._located: set[int] = set()
        self.hints: dict[int, cst.CSTNode] = {}
        self._full = False
        body = list(module.body)
        starts = selection.statement_lines
        self._pending: list[tuple[cst.CSTNode, int]] = []
        self._whole_classes: list[tuple[cst.CSTNode, int]] = []
        if len(body) == len(starts):
            line_of = {id(stmt): line for stmt, line in zip(body, starts)}
            ends = [*starts[1:], len(self.lines) + 1]
            for stmt, start, end in zip(body, starts, ends):
                if isinstance(stmt, cst.FunctionDef):
                    self._spans[id(stmt)] = (start - 1, end - 1)
            for top in tops:
                if id(top) not in line_of:
                    continue
                if isinstance(top, cst.ClassDef):
                    methods = self._methods(top, line_of[id(top)])
                    if methods is not None:
                        self._pending.extend(methods)
                        self._whole_classes.append((top, line_of[id(top)]))
                        continue
                self._pending.append((top, line_of[id(top)]))

    def _methods(self, cls: cst.ClassDef, first_line: int) -> list[tuple[cst.CSTNode, int]] | None:
        """(method, synthetic start line) for each statement of a class body, or None when unsure."""
        if not isinstance(cls.body, cst.IndentedBlock):
            return None
        stmts = list(cls.body.body)
        begin = first_line - 1
        header = begin
        while header < len(self.lines) and not self.lines[header].lstrip().startswith("class "):
            header += 1
        while header < len(self.lines) and not self.lines[header].split("#", 1)[0].rstrip().endswith(":"):
            header += 1
        indent = None
        for i in range(header + 1, len(self.lines)):
            text = self.lines[i]
            if text.strip() and not text.lstrip().startswith("#"):
                indent = text[: len(text) - len(text.lstrip())]
                break
        if not indent:
            return None
        end = header + 1
        while end < len(self.lines) and (not self.lines[end].strip() or self.lines[end].startswith(indent)
                                         or self.lines[end].lstrip().startswith("#")):
            end += 1
        blocks = segments._blocks(self.lines, segments._starts(self.lines, indent, header + 1, end), end)
        if len(blocks) != len(stmts):
            return None
        for stmt, (start, stop) in zip(stmts, blocks):
            if isinstance(stmt, cst.FunctionDef):
                self._spans[id(stmt)] = (start, stop)
        return [(stmt, start + 1) for stmt, (start, _) in zip(stmts, blocks) if isinstance(stmt, cst.FunctionDef)]

    def _compute(self, stmt: cst.CSTNode, first_line: int) -> None:
        bare = stmt.with_changes(leading_lines=())  # type: ignore[attr-defined]
        mini = self.module.with_changes(body=[bare], header=(), footer=())
        mapping = dict(MetadataWrapper(mini, unsafe_skip_copy=True).resolve(PositionProvider))
        mapping[stmt] = mapping[bare]
        shift = 0
        if not isinstance(stmt, (cst.ClassDef,)) and first_line - 1 < len(self.lines):
            line = self.lines[first_line - 1]
            shift = len(line) - len(line.lstrip())
        self.maps.append((mapping, first_line - 1, shift))

    def _compute_full(self) -> None:
        if not self._full:
            self._full = True
            wrapper = MetadataWrapper(self.module, unsafe_skip_copy=True)
            self.maps.append((dict(wrapper.resolve(PositionProvider)), 0, 0))

    def _verified(self, node: cst.CSTNode, rng: CodeRange) -> bool:
        """The text at the computed start is the node's own first characters."""
        if not 1 <= rng.start.line <= len(self.lines):
            return False
        expected = self.module.code_for_node(node).split("\n", 1)[0]
        # A node's own parentheses lie outside its range.
        expected = expected.lstrip("( ") if getattr(node, "lpar", None) else expected
        probe = expected[:16]
        return bool(probe) and self.lines[rng.start.line - 1].startswith(probe, rng.start.column)

    def hint(self, node: cst.CSTNode | None, owner: cst.CSTNode | None) -> None:
        """``node`` most likely lies in ``owner`` (a function or method): compute that one first."""
        if node is not None and owner is not None:
            self.hints.setdefault(id(node), owner)

    def _locate_statement(self, node: cst.CSTNode) -> CodeRange | None:
        """Find the node's statement by its exact text inside its function, then compute positions for
        that one statement. Statement text is unique far more often than an expression's."""
        stmt = self.statement_of.get(id(node))
        owner = self.hints.get(id(node))
        if stmt is None or owner is None or id(owner) not in self._spans or id(stmt) in self._located:
            return None
        self._located.add(id(stmt))
        if not isinstance(stmt, cst.SimpleStatementLine):
            return None
        start, end = self._spans[id(owner)]
        bare = stmt.with_changes(leading_lines=())
        code = self.module.code_for_node(bare).rstrip("\r\n")
        if not code:
            return None
        span = "\n".join(self.lines[start:end])
        first = span.find(code)
        if first == -1 or span.find(code, first + 1) != -1:
            return None  # absent or ambiguous: the method-level map decides
        line = start + span.count("\n", 0, first)
        column = first - (span.rfind("\n", 0, first) + 1)
        mini = self.module.with_changes(body=[bare], header=(), footer=())
        mapping = dict(MetadataWrapper(mini, unsafe_skip_copy=True).resolve(PositionProvider))
        mapping[stmt] = mapping[bare]
        self.statement_maps.append((mapping, line, column))
        return None

    def _from_statement_maps(self, node: cst.CSTNode) -> CodeRange | None:
        for mapping, offset, column in self.statement_maps:
            rng = mapping.get(node)
            if rng is None:
                continue
            # Only the statement's first line moves right; continuation lines are emitted verbatim.
            start = (rng.start.line + offset, rng.start.column + (column if rng.start.line == 1 else 0))
            end = (rng.end.line + offset, rng.end.column + (column if rng.end.line == 1 else 0))
            shifted = CodeRange(start, end)
            if self._verified(node, shifted):
                return shifted
        return None

    def range(self, node: cst.CSTNode) -> CodeRange:
        found = self._from_statement_maps(node)
        if found is None and id(self.statement_of.get(id(node))) not in self._located:
            self._locate_statement(node)
            found = self._from_statement_maps(node)
        if found is not None:
            return found
        owner = self.hints.get(id(node))
        if owner is not None:
            for i, (stmt, line) in enumerate(self._pending):
                if stmt is owner:
                    self._compute(*self._pending.pop(i))
                    break
        while True:
            for mapping, offset, shift in self.maps:
                rng = mapping.get(node)
                if rng is None:
                    continue
                rng = _shift(rng, offset, shift) if offset or shift else rng
                if not shift or self._verified(node, rng):
                    return rng
            if self._pending:
                self._compute(*self._pending.pop(0))
            elif self._whole_classes:
                self._compute(*self._whole_classes.pop(0))
            elif not self._full:
                self._compute_full()
            else:
                raise KeyError(node)

    def statements(self) -> list[CodeRange]:
        out = []
        for mapping, offset, column in self.statement_maps:
            for node, rng in mapping.items():
                if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
                    start = (rng.start.line + offset, rng.start.column + (column if rng.start.line == 1 else 0))
                    end = (rng.end.line + offset, rng.end.column + (column if rng.end.line == 1 else 0))
                    out.append(CodeRange(start, end))
        for mapping, offset, shift in self.maps:
            for node, rng in mapping.items():
                if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
                    out.append(_shift(rng, offset, shift) if offset or shift else rng)
        return out


def _shift(rng: CodeRange, offset: int, columns: int = 0) -> CodeRange:
    return CodeRange((rng.start.line + offset, rng.start.column + columns),
                     (rng.end.line + offset, rng.end.column + columns))


def check_text(path: str, text: str, codes: frozenset[str], *, prefilter: bool | None = None,
               newline: str = "\n", syntax_all: bool = False) -> FileResult:
    """Check one file's text. ``syntax_all``: also report syntax errors outside the parsed RoPE parts."""
    if text.startswith(vendor.HEADER_MARK):
        return _vendored(path, text, codes)
    use_prefilter = prefilter_enabled() if prefilter is None else prefilter
    if use_prefilter:
        selection = segments.select(text) if segments.file_may_hold_rope(text) else None
        if selection is None:
            error = syntax_error(path, text) if syntax_all else None
            return FileResult(path, error=error)
        if syntax_all and not selection.whole_file:
            error = syntax_error(path, text)
            if error is not None:
                return FileResult(path, error=error)
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
    try:
        model = analyse(module, imports)
        positions = _Positions(module, selection, model.event_tops(), model.statement_of)
        _hint_events(positions, model)
        findings = run_rules(module, model, imports, codes, positions, selection)
        if not findings[0]:
            return FileResult(path, parsed=True)
        return FileResult(path, _to_diagnostics(path, text, findings[0], findings[1], selection, imports, newline),
                          parsed=True)
    except (RecursionError, Exception) as exc:  # noqa: BLE001 - one odd file must not stop the run
        return FileResult(path, error=FileError(path, 1, 1, f"ropelint internal error while analysing this file "
                                                          f"({type(exc).__name__}: {exc}); please report it"))


def _hint_events(positions: _Positions, model: FileModel) -> None:
    for product in model.products:
        owner = product.scope.node
        positions.hint(product.node, owner)
        for read in product.freq.reads:
            positions.hint(read.node, owner)
        for site in product.positions.sites:
            positions.hint(site, owner)
        if product.guard is not None:
            positions.hint(product.guard.node, owner)
            positions.hint(product.guard.owner, owner)
    for cast in model.casts:
        positions.hint(cast.node, cast.scope.node)
        positions.hint(cast.target_expr, cast.scope.node)
    for trig in model.trigs:
        positions.hint(trig.node, trig.scope.node)
    for reg in model.registrations:
        positions.hint(reg.node, reg.scope.node)
    for built in model.inv_freqs:
        positions.hint(built.node, built.scope.node)
        positions.hint(built.val.site, built.scope.node)


def _vendored(path: str, text: str, codes: frozenset[str]) -> FileResult:
    """A vendored runtime helper is checked for staleness only: its code is the helper's own."""
    stale = vendor.staleness(text)
    if stale is None or "RPL010" not in codes:
        return FileResult(path, parsed=False)
    lines = text.split("\n", 1)[0]
    fix = FixInfo("safe", "replace it with the installed ropelint's helper", (TextEdit(0, len(text), vendor.vendored_text()),))
    info = INFO["RPL010"]
    message = f"vendored runtime helper is out of date: {stale.reason}"
    return FileResult(path, (Diagnostic("RPL010", info.name, message, path, 1, 1, 1, len(lines) + 1, "", fix),),
                      parsed=False)


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
        if code in BY_CODE:
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
        best = _statement_of(rng, statements)
        stmt_line = selection.to_file_line(best.start.line) if best is not None else line
        if suppressed(finding.code, lines, line, stmt_line):
            continue
        fix = None
        if finding.fix is not None:
            edits = tuple(_text_edits(finding.fix.edits, positions, selection, starts, text, imports, newline))
            fix = FixInfo(finding.fix.safety, finding.fix.description, edits)
        out.append(Diagnostic(finding.code, INFO[finding.code].name, finding.message, path, line, rng.start.column + 1,
                              end_line, rng.end.column + 1, finding.symbol, fix))
    return tuple(sorted(out, key=lambda d: d.sort_key))


def _statement_of(rng: CodeRange, statements: list[CodeRange]) -> CodeRange | None:
    """The innermost statement whose range holds ``rng``."""
    best = None
    for srng in statements:
        if (srng.start.line, srng.start.column) <= (rng.start.line, rng.start.column) and \
                (srng.end.line, srng.end.column) >= (rng.end.line, rng.end.column):
            if best is None or (srng.start.line, srng.start.column) > (best.start.line, best.start.column):
                best = srng
    return best


def _text_edits(edits, positions: _Positions, selection: segments.Selection, starts: list[int], text: str,
                imports: ImportTable, newline: str):  # type: ignore[no-untyped-def]
    for edit in edits:
        if isinstance(edit, InsertAfterStatement):
            stmt = _statement_of(positions.range(edit.node), positions.statements())
            if stmt is None:
                continue
            last = selection.to_file_line(stmt.end.line)
            offset = starts[min(last, len(starts) - 1)]
            yield TextEdit(offset, offset, " " * stmt.start.column + edit.code + newline)
            continue
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
