"""Which files to check: walk folders for ``*.py``, honouring .gitignore and excludes.

Explicit file arguments are always checked, whatever the excludes say.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from .config import Settings


@dataclass(frozen=True)
class _Pattern:
    regex: re.Pattern[str]
    negate: bool
    dir_only: bool


def _translate(pattern: str) -> str:
    """A gitignore glob as a regex over a path relative to the .gitignore's folder."""
    anchored = "/" in pattern.rstrip("/")
    pattern = pattern.strip("/")
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("/**", i) and i + 3 == len(pattern):
            out.append("/.*")
            i += 3
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[":
            j = pattern.find("]", i)
            if j == -1:
                out.append(re.escape("["))
                i += 1
            else:
                out.append(pattern[i : j + 1].replace("[!", "[^"))
                i = j + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    body = "".join(out)
    return f"^{body}$" if anchored else f"^(?:.*/)?{body}$"


class GitIgnore:
    def __init__(self, base: Path, lines: list[str]) -> None:
        self.base = base
        self.patterns: list[_Pattern] = []
        for raw in lines:
            line = raw.rstrip("\n").rstrip()
            if not line or line.startswith("#"):
                continue
            negate = line.startswith("!")
            if negate:
                line = line[1:]
            if line.startswith("\\"):
                line = line[1:]
            dir_only = line.endswith("/")
            self.patterns.append(_Pattern(re.compile(_translate(line)), negate, dir_only))

    @classmethod
    def load(cls, folder: Path) -> "GitIgnore | None":
        file = folder / ".gitignore"
        if not file.is_file():
            return None
        try:
            return cls(folder, file.read_text(encoding="utf-8", errors="replace").splitlines())
        except OSError:
            return None

    def decision(self, path: Path, is_dir: bool) -> bool | None:
        """True: ignored; False: re-included; None: no pattern speaks."""
        try:
            rel = path.relative_to(self.base).as_posix()
        except ValueError:
            return None
        result = None
        for pattern in self.patterns:
            if pattern.dir_only and not is_dir:
                continue
            if pattern.regex.match(rel):
                result = not pattern.negate
        return result


def _is_virtualenv(folder: Path) -> bool:
    return (folder / "pyvenv.cfg").is_file()


def discover(paths: list[Path], settings: Settings) -> Iterator[tuple[Path, bool]]:
    """Yield (path, explicit) for every file to check, in a stable order."""
    seen: set[Path] = set()
    root = settings.root.resolve()
    for start in paths:
        if start.is_file() or not start.exists():
            if start not in seen:
                seen.add(start)
                yield start, True
            continue
        absolute = start.resolve()
        ignores = _inherited_ignores(absolute)
        try:
            rel = absolute.relative_to(root).as_posix()
            rel = "" if rel == "." else rel
        except ValueError:
            rel = None
        yield from _walk(start, absolute, rel, ignores, settings, seen)


def _inherited_ignores(root: Path) -> list[GitIgnore]:
    """.gitignore files of the folders above ``root`` up to the repository top."""
    found: list[GitIgnore] = []
    for folder in (root, *root.parents):
        if folder != root:
            ignore = GitIgnore.load(folder)
            if ignore is not None:
                found.insert(0, ignore)
        if (folder / ".git").exists():
            break
    return found


def _walk(folder: Path, absolute: Path, rel: str | None, ignores: list[GitIgnore], settings: Settings,
          seen: set[Path]) -> Iterator[tuple[Path, bool]]:
    """``absolute`` is ``folder`` resolved once; children are joined by string, never resolved again."""
    local = GitIgnore.load(absolute)
    active = ignores + [local] if local is not None else ignores
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        name = entry.name
        is_dir = entry.is_dir(follow_symlinks=False)
        if not is_dir and not name.endswith(".py"):
            continue
        child_rel = None if rel is None else (f"{rel}/{name}" if rel else name)
        path = Path(entry.path)
        if settings.is_excluded(path, child_rel if child_rel is not None else path.as_posix()):
            continue
        child_abs = absolute / name
        ignored = None
        for ignore in active:
            decision = ignore.decision(child_abs, is_dir)
            if decision is not None:
                ignored = decision
        if ignored:
            continue
        if is_dir:
            if name == ".git" or _is_virtualenv(path):
                continue
            yield from _walk(path, child_abs, child_rel, active, settings, seen)
        elif path not in seen:
            seen.add(path)
            yield path, False
