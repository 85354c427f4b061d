"""A persistent cache of per-file results, keyed by file content, ropelint version and configuration.

One JSON file per (version, configuration): a map from content hash to the file's diagnostics.
Only files that needed a parse are stored: for the others the prefilter is as cheap as a lookup.
Concurrent runs each write a complete new file by atomic rename (last writer wins, nothing is
half-written); an unreadable or corrupt cache is ignored and rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import asdict
from pathlib import Path

from . import __version__
from .diagnostics import Diagnostic, FileError, FileResult, FixInfo, TextEdit

MAX_ENTRIES = 50_000


def content_key(text: str | bytes) -> str:
    """``text`` as a string or as its UTF-8 bytes: both give the same key."""
    data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _encode(result: FileResult) -> dict:
    return {
        "d": [
            {**{k: v for k, v in asdict(d).items() if k not in ("path", "fix")},
             "fix": None if d.fix is None else {"safety": d.fix.safety, "description": d.fix.description,
                                                "edits": [[e.start, e.end, e.text] for e in d.fix.edits]}}
            for d in result.diagnostics
        ],
        "e": None if result.error is None else [result.error.line, result.error.column, result.error.message],
    }


def _decode(path: str, data: dict) -> FileResult:
    diags = []
    for raw in data["d"]:
        item = dict(raw)
        fix = item.pop("fix")
        info = None if fix is None else FixInfo(fix["safety"], fix["description"],
                                                tuple(TextEdit(*e) for e in fix["edits"]))
        diags.append(Diagnostic(path=path, fix=info, **item))
    err = data["e"]
    error = None if err is None else FileError(path, err[0], err[1], err[2])
    return FileResult(path, tuple(diags), error, parsed=True)


def _code_stamp() -> str:
    """The size and modification time of ropelint's own modules: an editable install or a patched copy
    with the same version number must not be answered from results an older analysis produced."""
    package = Path(__file__).resolve().parent
    digest = hashlib.blake2b(digest_size=6)
    for source in sorted(package.rglob("*.py")):
        stat = source.stat()
        digest.update(f"{source.relative_to(package)}:{stat.st_size}:{stat.st_mtime_ns};".encode())
    return digest.hexdigest()


class Cache:
    """Results by content key, plus a stat index (path -> size, mtime, key) that lets an unchanged
    file be answered without reading it. The index is only a shortcut: a file whose size or mtime
    changed is read and looked up by content again."""

    def __init__(self, folder: Path, fingerprint: str) -> None:
        self.folder = folder
        self.file = folder / f"v{__version__}-{fingerprint}-{_code_stamp()}.json"
        self.entries: dict[str, dict] = {}
        self.index: dict[str, list] = {}
        self.dirty = False
        try:
            loaded = json.loads(self.file.read_text(encoding="utf-8"))
            if isinstance(loaded, dict) and isinstance(loaded.get("entries"), dict) \
                    and isinstance(loaded.get("index"), dict):
                self.entries, self.index = loaded["entries"], loaded["index"]
        except (OSError, ValueError):
            self.entries, self.index = {}, {}

    def lookup_stat(self, path: str, size: int, mtime_ns: int) -> str | None:
        """The key recorded for an unchanged file ("" or "-" for one that needs no parse), else None."""
        record = self.index.get(path)
        if isinstance(record, list) and len(record) == 3 and record[0] == size and record[1] == mtime_ns:
            key = record[2]
            if key in ("", "-") or key in self.entries:
                return key
        return None

    def remember_stat(self, path: str, size: int, mtime_ns: int, key: str) -> None:
        if self.index.get(path) != [size, mtime_ns, key]:
            self.index[path] = [size, mtime_ns, key]
            self.dirty = True

    def get(self, key: str, path: str) -> FileResult | None:
        data = self.entries.get(key)
        if data is None:
            return None
        try:
            return _decode(path, data)
        except (KeyError, TypeError, ValueError):
            self.entries.pop(key, None)  # a corrupt entry is dropped and recomputed
            return None

    def put(self, key: str, result: FileResult) -> None:
        self.entries[key] = _encode(result)
        self.dirty = True

    def save(self) -> None:
        if not self.dirty:
            return
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            gitignore = self.folder / ".gitignore"
            if not gitignore.exists():
                gitignore.write_text("# created by ropelint\n*\n", encoding="utf-8")
            if len(self.entries) > MAX_ENTRIES:
                self.entries = dict(list(self.entries.items())[-MAX_ENTRIES:])
            if len(self.index) > 4 * MAX_ENTRIES:
                self.index = dict(list(self.index.items())[-4 * MAX_ENTRIES:])
            fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".cache.", suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump({"entries": self.entries, "index": self.index}, handle, separators=(",", ":"))
            os.replace(tmp, self.file)
        except OSError:
            pass  # a read-only tree still gets its findings; only the speed-up is lost
