"""Start-up: the linter never imports torch, and neither `--version` nor `check` imports LibCST (only fixes do)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import EXAMPLE

PROBE = """
import sys
from click.testing import CliRunner
from ropelint.cli import cli
result = CliRunner().invoke(cli, {args!r})
heavy = sorted(m for m in ("torch", "numpy", "libcst") if m in sys.modules)
print(result.exit_code, ",".join(heavy))
"""


def _modules_after(args: list[str]) -> tuple[int, set[str]]:
    out = subprocess.run([sys.executable, "-c", PROBE.format(args=args)], capture_output=True, text=True, check=True)
    code, _, heavy = out.stdout.strip().partition(" ")
    return int(code), set(filter(None, heavy.split(",")))


def test_version_imports_nothing_heavy():
    code, heavy = _modules_after(["--version"])
    assert code == 0 and heavy == set()


def test_check_of_one_file_never_imports_torch(tmp_path: Path):
    target = tmp_path / "rotary.py"
    target.write_text(EXAMPLE.read_text())
    code, heavy = _modules_after(["check", "--no-cache", str(target)])
    assert code == 1
    assert "torch" not in heavy and "numpy" not in heavy
    assert "libcst" not in heavy  # checking parses with ast; LibCST is for fixes
