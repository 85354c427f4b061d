"""Reading the ``# expect: RPL003, RPL002`` comments that fixtures carry on their finding lines."""

from __future__ import annotations

import re
from pathlib import Path

EXPECT = re.compile(r"#\s*expect:\s*([A-Z0-9,\s]+?)\s*$")
ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"


def expected_findings(text: str) -> set[tuple[int, str]]:
    out: set[tuple[int, str]] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        match = EXPECT.search(line)
        if match:
            out.update((number, code.strip()) for code in match.group(1).split(",") if code.strip())
    return out


def case_files() -> list[Path]:
    return sorted((FIXTURES / "cases").glob("*.py")) + sorted((FIXTURES / "not_rope").glob("*.py"))
