"""Reading a Python file faithfully: bytes -> text with encoding, BOM and newline style kept."""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass, field
from pathlib import Path

# PEP 263: the cookie may sit on line 1 or 2.
_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)", re.MULTILINE)


class SourceError(Exception):
    """A file that cannot be read or decoded; carries the 1-based line where it broke."""

    def __init__(self, message: str, line: int = 1, column: int = 1) -> None:
        super().__init__(message)
        self.line = line
        self.column = column


@dataclass(frozen=True)
class SourceFile:
    path: Path
    text: str
    encoding: str
    bom: bool
    newline: str
    # The bytes after any BOM, which ``text`` decodes; not compared (the text says the same).
    raw: bytes = field(default=b"", compare=False, repr=False)

    def encode(self, text: str) -> bytes:
        data = text.encode(self.encoding)
        return codecs.BOM_UTF8 + data if self.bom else data


def _detect_encoding(data: bytes) -> tuple[str, bool]:
    if data.startswith(codecs.BOM_UTF8):
        return "utf-8", True
    first = data.find(b"\n")
    second = data.find(b"\n", first + 1) if first != -1 else -1
    head = data[:second] if second != -1 else data  # lines 1 and 2, without copying the rest
    match = _COOKIE.search(head)
    if match:
        name = match.group(1).decode("ascii")
        try:
            return codecs.lookup(name).name, False
        except LookupError:
            raise SourceError(f"unknown encoding {name!r} in coding cookie") from None
    return "utf-8", False


def decode(path: Path, data: bytes) -> SourceFile:
    encoding, bom = _detect_encoding(data)
    raw = data[len(codecs.BOM_UTF8):] if bom else data
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise SourceError(f"cannot decode as {encoding}: {exc.reason}", line) from None
    newline = "\r\n" if "\r\n" in text[:4096] else "\n"
    return SourceFile(path, text, encoding, bom, newline, raw)


def read_source(path: Path) -> SourceFile:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SourceError(f"cannot read file: {exc.strerror or exc}") from None
    return decode(path, data)
