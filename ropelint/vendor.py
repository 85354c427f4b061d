"""``--helper vendor``: copy the runtime helper into the user's package so fixed code needs no ropelint.

The copy starts with a header that carries ropelint's version and the SHA-256 of the helper's
source; ``ropelint check`` compares it with the installed helper and reports a stale or edited
copy (RPL010), whose fix rewrites it.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from . import __version__

HEADER_MARK = "# ropelint-vendored-runtime:"
DEFAULT_NAME = "_rope_runtime.py"
IMPORT_MODULE = "from ropelint import runtime as rope_runtime"
_HEADER = re.compile(r"^# ropelint-vendored-runtime: version=(\S+) sha256=([0-9a-f]{64})\r?\n")


def runtime_source() -> str:
    return (Path(__file__).resolve().parent / "runtime.py").read_text(encoding="utf-8")


def _digest(text: str) -> str:
    return hashlib.sha256(text.replace("\r\n", "\n").encode("utf-8")).hexdigest()


def vendored_text() -> str:
    body = runtime_source()
    return (f"{HEADER_MARK} version={__version__} sha256={_digest(body)}\n"
            "# Copied by `ropelint fix --helper vendor`; do not edit (rerun that command to update).\n" + body)


@dataclass(frozen=True)
class Staleness:
    version: str
    reason: str


def staleness(text: str) -> Staleness | None:
    """Why a vendored copy differs from the installed helper, or None when it is current (or not vendored)."""
    match = _HEADER.match(text)
    if match is None:
        return None
    version, digest = match.groups()
    body = text.split("\n", 2)[2] if text.count("\n") >= 2 else ""
    if _digest(body) != digest:
        return Staleness(version, "its body was edited after vendoring")
    if digest != _digest(runtime_source()):
        return Staleness(version, f"it was vendored from ropelint {version}, and ropelint {__version__} ships a "
                                  "different helper")
    return None


def target_for(fixed_file: Path, mode: str, root: Path) -> Path:
    if mode.startswith("vendor="):
        target = Path(mode.split("=", 1)[1])
        return target if target.is_absolute() else root / target
    return fixed_file.parent / DEFAULT_NAME


def _package_path(folder: Path) -> list[str] | None:
    """Dotted package names from the outermost package down to ``folder``; None if not a package."""
    parts: list[str] = []
    current = folder.resolve()
    while (current / "__init__.py").exists():
        parts.insert(0, current.name)
        current = current.parent
    return parts or None


def import_line(fixed_file: Path, target: Path) -> str:
    name = target.stem
    here, there = fixed_file.resolve().parent, target.resolve().parent
    if here == there:
        if (here / "__init__.py").exists():
            return f"from . import {name} as rope_runtime"
        return f"import {name} as rope_runtime"
    package = _package_path(there)
    if package is None:
        return f"import {name} as rope_runtime"
    return f"from {'.'.join(package)} import {name} as rope_runtime"


def apply(fixed_text: str, original_text: str, fixed_file: Path, target: Path) -> str:
    """Point the fixed file's helper import at the vendored copy."""
    if IMPORT_MODULE not in fixed_text or IMPORT_MODULE in original_text:
        return fixed_text
    line = import_line(fixed_file, target)
    if line in original_text:  # already imported from an earlier vendoring: drop the new line
        return re.sub(rf"\r?\n{re.escape(IMPORT_MODULE)}(?=\r?\n)", "", fixed_text, count=1)
    return fixed_text.replace(IMPORT_MODULE, line, 1)
