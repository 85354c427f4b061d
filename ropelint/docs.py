"""The rule documents (rules/RPLxxx.md), shipped in the wheel as ``ropelint/ruledocs``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

_FENCE = re.compile(r"^## (Example|Use instead)\s*\n+```python\n(.*?)^```", re.MULTILINE | re.DOTALL)
_FIX = re.compile(r"^Fix:\s*(safe|unsafe|sometimes|none)\b", re.MULTILINE | re.IGNORECASE)


@dataclass(frozen=True)
class RuleDoc:
    code: str
    text: str

    @property
    def bad_example(self) -> str | None:
        return self._example("Example")

    @property
    def good_example(self) -> str | None:
        return self._example("Use instead")

    @property
    def fix_line(self) -> str | None:
        match = _FIX.search(self.text)
        return match.group(1).lower() if match else None

    def _example(self, heading: str) -> str | None:
        for match in _FENCE.finditer(self.text):
            if match.group(1) == heading:
                return match.group(2)
        return None


def _candidates(code: str) -> list[Path]:
    out = []
    try:
        out.append(Path(str(resources.files("ropelint") / "ruledocs" / f"{code}.md")))
    except (ModuleNotFoundError, TypeError):
        pass
    # A source checkout without an install: the documents live in the top-level rules/ folder.
    out.append(Path(__file__).resolve().parent.parent / "rules" / f"{code}.md")
    return out


def load(code: str) -> RuleDoc | None:
    for path in _candidates(code.upper()):
        if path.is_file():
            return RuleDoc(code.upper(), path.read_text(encoding="utf-8"))
    return None
