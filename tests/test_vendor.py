"""`--helper vendor`: the helper is copied into the user's package, imported from there, and kept current."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import EXAMPLE, run_cli

from ropelint import vendor


def _run(cwd: Path, *args: str):
    return run_cli(*args, cwd=cwd)


@pytest.fixture
def package(tmp_path: Path) -> Path:
    pkg = tmp_path / "mymodel"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    shutil.copy(EXAMPLE, pkg / "rotary.py")
    return pkg


def test_vendor_copies_helper_and_imports_it(package: Path):
    result = _run(package.parent, "fix", "--no-cache", "--write", "--helper", "vendor", "mymodel")
    assert result.exit_code == 0, result.output
    fixed = (package / "rotary.py").read_text()
    assert "from . import _rope_runtime as rope_runtime" in fixed
    assert "from ropelint import" not in fixed
    copy = (package / "_rope_runtime.py").read_text()
    assert copy.startswith(vendor.HEADER_MARK) and vendor.staleness(copy) is None
    # The fixed package runs with the vendored copy alone: ropelint is not importable here.
    code = ("import sys; sys.modules['ropelint'] = None; import torch; from mymodel.rotary import LlamaRotaryEmbedding as R;"
            "m = R(64); c, s = m(torch.zeros(1, 1, 4, 64), torch.arange(4)[None]); print(c.shape[-1])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=package.parent)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "64"
    # Idempotent: nothing left to fix, the copy is current.
    again = _run(package.parent, "fix", "--no-cache", "--write", "--helper", "vendor", "mymodel")
    assert again.exit_code == 0 and "Fixed 0 findings" in again.output


def test_stale_or_edited_copy_is_reported_and_fixed(package: Path):
    _run(package.parent, "fix", "--no-cache", "--write", "--helper", "vendor", "mymodel")
    copy = package / "_rope_runtime.py"
    copy.write_text(copy.read_text().replace("dtype=torch.float32", "dtype=None", 1))
    check = _run(package.parent, "check", "--no-cache", "--format", "json", "mymodel")
    found = json.loads(check.stdout)
    assert [(d["code"], d["line"]) for d in found] == [("RPL010", 1)] and "edited" in found[0]["message"]
    _run(package.parent, "fix", "--no-cache", "--write", "mymodel")
    assert vendor.staleness(copy.read_text()) is None
    assert _run(package.parent, "check", "--no-cache", "mymodel").exit_code == 0


def test_vendor_to_a_chosen_path_uses_an_absolute_import(package: Path):
    (package / "utils").mkdir()
    (package / "utils" / "__init__.py").write_text("")
    result = _run(package.parent, "fix", "--no-cache", "--write", "--helper", "vendor=mymodel/utils/rope_rt.py", "mymodel")
    assert result.exit_code == 0, result.output
    assert "from mymodel.utils import rope_rt as rope_runtime" in (package / "rotary.py").read_text()
    assert (package / "utils" / "rope_rt.py").exists()
