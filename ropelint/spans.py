"""Where a parsed node lies in the text it was parsed from, in characters, and its exact source.

CPython's ``ast`` gives every node its start and end line and its columns in UTF-8 bytes; a
column is converted to characters only on the rare line that is not ASCII. Line offsets are
computed once, on the first question, so a file with nothing to report pays nothing.
"""

from __future__ import annotations

import ast
from itertools import accumulate


class Spans:
    def __init__(self, code: str) -> None:
        self.code = code
        self._starts: list[int] | None = None

    def _line_starts(self) -> list[int]:
        if self._starts is None:
            self._starts = [0, *accumulate(len(line) + 1 for line in self.code.split("\n"))][:-1]
        return self._starts

    def line_text(self, line: int) -> str:
        starts = self._line_starts()
        begin = starts[line - 1]
        end = starts[line] - 1 if line < len(starts) else len(self.code)
        return self.code[begin:end]

    def _column(self, line: int, byte_column: int) -> int:
        text = self.line_text(line)
        if text.isascii():
            return byte_column
        return len(text.encode("utf-8")[:byte_column].decode("utf-8", errors="replace"))

    def start(self, node: ast.AST) -> tuple[int, int]:
        """(1-based line, 0-based character column) of the node's first character."""
        line = node.lineno  # type: ignore[attr-defined]
        return line, self._column(line, node.col_offset)  # type: ignore[attr-defined]

    def end(self, node: ast.AST) -> tuple[int, int]:
        """(1-based line, 0-based character column) just past the node's last character."""
        line = node.end_lineno  # type: ignore[attr-defined]
        return line, self._column(line, node.end_col_offset)  # type: ignore[attr-defined]

    def offset(self, line: int, column: int) -> int:
        return self._line_starts()[line - 1] + column

    def start_offset(self, node: ast.AST) -> int:
        return self.offset(*self.start(node))

    def end_offset(self, node: ast.AST) -> int:
        return self.offset(*self.end(node))

    def text(self, node: ast.AST) -> str:
        """The node's exact source (a parenthesised expression's own parentheses excluded)."""
        return self.code[self.start_offset(node):self.end_offset(node)]
