"""Findings as rules report them (nodes) and as users see them (file positions)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Union

if TYPE_CHECKING:  # nodes only appear in annotations: a warm cached run never imports LibCST
    import ast

Safety = Literal["safe", "unsafe"]


@dataclass(frozen=True)
class Replace:
    """Replace the source of ``node`` with ``code``."""

    node: ast.AST
    code: str


@dataclass(frozen=True)
class DeleteLines:
    """Delete the whole lines ``node`` stands on (a decorator, a statement)."""

    node: ast.AST


@dataclass(frozen=True)
class AddImport:
    """Ensure a top-level import statement, e.g. ``from ropelint.runtime import inv_freq``."""

    statement: str


@dataclass(frozen=True)
class InsertAfterStatement:
    """Insert ``code`` as new lines after the statement that holds ``node``, each line at the
    statement's indentation plus its own (blank lines stay blank)."""

    node: ast.AST
    code: str


@dataclass(frozen=True)
class InsertBeforeStatement:
    """Insert ``code`` as new lines before the statement ``node``, at its indentation."""

    node: ast.stmt
    code: str


NodeEdit = Union["Replace", "DeleteLines", "AddImport", "InsertAfterStatement", "InsertBeforeStatement"]


@dataclass(frozen=True)
class FixPlan:
    safety: Safety
    description: str
    edits: tuple[NodeEdit, ...]


@dataclass(frozen=True)
class Finding:
    """What a rule reports, before positions are known."""

    code: str
    node: ast.AST
    message: str
    symbol: str
    fix: FixPlan | None = None


@dataclass(frozen=True)
class TextEdit:
    """A replacement of file text ``[start, end)`` (character offsets) by ``text``."""

    start: int
    end: int
    text: str


@dataclass(frozen=True)
class FixInfo:
    safety: Safety
    description: str
    edits: tuple[TextEdit, ...]


@dataclass(frozen=True)
class Diagnostic:
    code: str
    name: str
    message: str
    path: str
    line: int  # 1-based
    column: int  # 1-based
    end_line: int
    end_column: int  # 1-based, exclusive
    symbol: str
    fix: FixInfo | None = None

    @property
    def sort_key(self) -> tuple[str, int, int, str]:
        return (self.path, self.line, self.column, self.code)


@dataclass(frozen=True)
class FileError:
    """A file that could not be read or parsed."""

    path: str
    line: int
    column: int
    message: str


@dataclass(frozen=True)
class FileResult:
    path: str
    diagnostics: tuple[Diagnostic, ...] = ()
    error: FileError | None = None
    parsed: bool = False
