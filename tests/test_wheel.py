"""A normal (non-editable) install from the built wheel: the rule documents ship, the CLI works."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("wheel")
    dist = work / "dist"
    source = work / "src"
    # Build from a copy so no build artefact lands in the checkout.
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".git", "*.egg-info", "build", "dist", "__pycache__",
                                                                ".ropelint_cache", ".pytest_cache", "benchmarks"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(source)], check=True)
    wheel = next(dist.glob("ropelint-*.whl"))
    env_dir = work / "venv"
    # System site packages provide libcst/click/rich without a download; the wheel itself goes into the venv.
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q", str(wheel)],
                   check=True)
    return env_dir


def _run(env_dir: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1", "PYTHONPATH": ""}
    return subprocess.run([str(env_dir / "bin" / "ropelint"), *args], capture_output=True, text=True, cwd=cwd, env=env)


def test_installed_from_wheel_not_from_checkout(installed: Path, tmp_path: Path):
    where = subprocess.run([str(installed / "bin" / "python"), "-c", "import ropelint, sys; print(ropelint.__file__)"],
                           capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "PYTHONPATH": ""})
    assert str(installed) in where.stdout, where.stdout + where.stderr


def test_explain_from_wheel(installed: Path, tmp_path: Path):
    result = _run(installed, "explain", "RPL001", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "rope-integer-table-cast" in result.stdout and "What it does" in result.stdout


def test_check_from_wheel(installed: Path, tmp_path: Path):
    shutil.copy(ROOT / "examples" / "llama_rotary_438.py", tmp_path / "rotary.py")
    result = _run(installed, "check", "--no-cache", "rotary.py", cwd=tmp_path)
    assert result.returncode == 1
    assert "rotary.py:22:18: RPL003" in result.stdout
    assert _run(installed, "--version", cwd=tmp_path).stdout.strip().startswith("ropelint ")
