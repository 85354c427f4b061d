"""Torch aliases from a file's import statements, found by a text scan (no parse, no metadata).

LibCST's QualifiedNameProvider costs more than parsing itself; a file's imports are a handful of
lines whose grammar a regex covers, so the alias table is built from the raw text of the whole
file, including imports nested in functions or try blocks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Every pattern tolerates CRLF files: ``$`` stops before ``\n``, so a ``\r`` may come first.
_IMPORT = re.compile(r"^[ \t]*import[ \t]+([\w. \t,]+?)[ \t]*(?:#[^\r\n]*)?\r?$", re.MULTILINE)
_FROM = re.compile(
    r"^[ \t]*from[ \t]+([\w.]+)[ \t]+import[ \t]+(\([^)]*\)|[^\r\n#]*?(?:\\\r?\n[^\r\n#]*?)*)[ \t]*(?:#[^\r\n]*)?\r?$",
    re.MULTILINE,
)
_TOP_IMPORT_END = re.compile(r"^(?:import|from)[ \t][^\r\n]*(?:\r?\n(?=[ \t)])[^\r\n]*)*", re.MULTILINE)



@dataclass(frozen=True)
class ImportTable:
    """Local name -> fully qualified name (``th`` -> ``torch``, ``einsum`` -> ``torch.einsum``)."""

    names: dict[str, str] = field(default_factory=dict)
    # Offset just after the last top-level import line: where a fix inserts a new import.
    insert_offset: int = 0

    def resolve_root(self, name: str) -> str | None:
        return self.names.get(name)

    def alias_for(self, module: str) -> str | None:
        """A local name bound to ``module`` itself (e.g. ``th`` for torch), preferring the plain name."""
        candidates = [local for local, qual in self.names.items() if qual == module]
        if module in candidates:
            return module
        return sorted(candidates)[0] if candidates else None


def _split_names(body: str) -> list[tuple[str, str]]:
    body = body.replace("\r", "").strip().strip("()").replace("\\\n", " ")
    out: list[tuple[str, str]] = []
    for part in body.replace("\n", " ").split(","):
        part = part.split("#")[0].strip()
        if not part:
            continue
        bits = part.split()
        if len(bits) == 3 and bits[1] == "as":
            out.append((bits[0], bits[2]))
        elif len(bits) == 1:
            out.append((bits[0], bits[0]))
    return out


def _import_lines(text: str):  # type: ignore[no-untyped-def]
    """Start offsets of lines that may hold an import: found by a literal search, then anchored."""
    seen = -1
    start = text.find("import")
    while start != -1:
        line_start = text.rfind("\n", 0, start) + 1
        if line_start != seen:
            seen = line_start
            yield line_start
        start = text.find("import", start + 6)


def scan_imports(text: str) -> ImportTable:
    names: dict[str, str] = {}
    insert = 0
    for line_start in _import_lines(text):
        if text.startswith(("import ", "from "), line_start):
            top = _TOP_IMPORT_END.match(text, line_start)
            if top:
                insert = max(insert, top.end())
        match = _IMPORT.match(text, line_start)
        if match:
            for dotted, local in _split_names(match.group(1)):
                if local == dotted and "." in dotted:
                    # ``import torch.nn.functional`` binds ``torch``.
                    root = dotted.split(".")[0]
                    names.setdefault(root, root)
                else:
                    names[local] = dotted
            continue
        match = _FROM.match(text, line_start)
        if match:
            module = match.group(1)
            if module.startswith("."):
                module = module.lstrip(".")  # relative: keep the tail, enough for name heuristics
            for name, local in _split_names(match.group(2)):
                if name == "*":
                    continue
                names[local] = f"{module}.{name}" if module else name
    return ImportTable(names, insert)
