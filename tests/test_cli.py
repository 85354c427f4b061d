"""The command line, through click's runner and through the installed executable."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_cli

from ropelint import __version__

EXE = shutil.which("ropelint")


run = run_cli


def test_version():
    result = run("--version")
    assert result.exit_code == 0
    assert result.output.strip() == f"ropelint {__version__}"


def test_check_finds_matmul_phase_and_exits_1(bad_file: Path):
    result = run("check", "--no-cache", str(bad_file))
    assert result.exit_code == 1
    assert f"{bad_file.name}:22:18: RPL003" in result.output.replace(str(bad_file), bad_file.name)
    assert "Found 2 findings (2 fixable) in 1 file." in result.output
    assert "Traceback" not in result.output


def test_check_clean_pattern_exits_0(good_file: Path):
    result = run("check", "--no-cache", str(good_file))
    assert result.exit_code == 0, result.output
    assert "All checks passed" in result.output


def test_json_output_lists_finding_with_path_and_line(bad_file: Path):
    result = run("check", "--no-cache", "--format", "json", str(bad_file))
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    codes = {(d["code"], d["line"]) for d in data}
    assert ("RPL003", 22) in codes and ("RPL002", 20) in codes
    rpl003 = next(d for d in data if d["code"] == "RPL003")
    assert rpl003["path"].endswith("rotary.py")
    assert rpl003["name"] == "rope-matmul-phase"
    assert rpl003["symbol"] == "LlamaRotaryEmbedding.forward"
    assert (rpl003["column"], rpl003["end_line"], rpl003["end_column"]) == (18, 22, 59)
    assert rpl003["fix"] == {"safety": "safe", "description": "form the phase as an elementwise float32 product"}
    rpl002 = next(d for d in data if d["code"] == "RPL002")
    assert rpl002["fix"]["safety"] == "safe" and "float32" in rpl002["fix"]["description"]


def test_syntax_error_beside_bad_file(tmp_path: Path, bad_file: Path):
    broken = tmp_path / "broken.py"
    broken.write_text("import torch\n\ndef rotary(x:\n    return x\n")
    result = run("check", "--no-cache", str(tmp_path))
    assert result.exit_code == 2
    assert "broken.py:3:" in result.output and "error: syntax error" in result.output
    assert "RPL003" in result.output  # the other file is still reported
    assert "Traceback" not in result.output


def test_syntax_error_in_rotary_code_is_reported(tmp_path: Path):
    broken = tmp_path / "rope.py"
    broken.write_text("import torch\n\nclass R:\n    def f(self):\n        inv_freq = 1 / (10000 ** (torch.arange(0, 8, 2) / 8)\n")
    result = run("check", "--no-cache", str(tmp_path))
    assert result.exit_code == 2
    assert "rope.py:" in result.output and "error:" in result.output


def test_unreadable_file_is_an_error_and_others_still_checked(tmp_path: Path, bad_file: Path):
    latin = tmp_path / "latin.py"
    latin.write_bytes(b"# -*- coding: utf-8 -*-\nx = '\xff\xfe'\n")
    result = run("check", "--no-cache", str(tmp_path))
    assert result.exit_code == 2
    assert "latin.py:2:1: error: cannot decode" in result.output
    assert "RPL003" in result.output


def test_fix_without_write_prints_diff_and_writes_nothing(bad_file: Path):
    before = bad_file.read_bytes()
    result = run("fix", "--no-cache", str(bad_file))
    assert result.exit_code == 1
    assert "-        freqs = (inv_freq_expanded @ position_ids_expanded).transpose(1, 2)" in result.output
    assert "+        freqs = (inv_freq_expanded * position_ids_expanded).transpose(1, 2)" in result.output
    assert bad_file.read_bytes() == before


def test_fix_write_then_idempotent_then_check_clean_of_rpl003(bad_file: Path):
    mode = 0o640
    bad_file.chmod(mode)
    first = run("fix", "--no-cache", "--write", str(bad_file))
    fixed = bad_file.read_text()
    assert "inv_freq_expanded * position_ids_expanded" in fixed
    assert "rope_runtime.inv_freq(*self._inv_freq_spec, device=position_ids.device)" in fixed
    assert first.exit_code == 0, first.output  # every finding had a safe fix: nothing remains
    assert (bad_file.stat().st_mode & 0o777) == mode
    second = run("fix", "--no-cache", "--write", str(bad_file))
    assert bad_file.read_text() == fixed
    assert "Fixed 0 findings" in second.output
    check = run("check", "--no-cache", "--format", "json", str(bad_file))
    assert check.exit_code == 0 and json.loads(check.stdout) == []
    compile(fixed, str(bad_file), "exec")


def test_explain_and_rules():
    result = run("explain", "RPL001")
    assert result.exit_code == 0
    assert "RPL001" in result.output and "What it does" in result.output
    table = run("rules")
    for n in range(1, 10):
        assert f"RPL00{n}" in table.output
    assert run("explain", "RPL999").exit_code == 2


def test_select_ignore_and_exit_zero(bad_file: Path):
    only = run("check", "--no-cache", "--format", "json", "--select", "RPL003", str(bad_file))
    assert {d["code"] for d in json.loads(only.stdout)} == {"RPL003"}
    ignored = run("check", "--no-cache", "--ignore", "RPL002,RPL003", str(bad_file))
    assert ignored.exit_code == 0
    assert run("check", "--no-cache", "--exit-zero", str(bad_file)).exit_code == 0
    bad = run("check", "--no-cache", "--select", "RPL123", str(bad_file))
    assert bad.exit_code == 2 and "RPL123" in bad.output


def test_config_in_pyproject(tmp_path: Path, bad_file: Path):
    (tmp_path / "pyproject.toml").write_text('[tool.ropelint]\nignore = ["RPL002"]\n')
    result = run("check", "--no-cache", "--format", "json", str(bad_file))
    assert {d["code"] for d in json.loads(result.stdout)} == {"RPL003"}
    (tmp_path / "pyproject.toml").write_text('[tool.ropelint]\nselekt = ["RPL002"]\n')
    result = run("check", "--no-cache", str(bad_file))
    assert result.exit_code == 2 and "selekt" in result.output
    (tmp_path / "pyproject.toml").write_text('[tool.ropelint]\nper-file-ignores = {"rot*.py" = ["RPL003"]}\n')
    result = run("check", "--no-cache", "--format", "json", str(bad_file))
    assert {d["code"] for d in json.loads(result.stdout)} == {"RPL002"}


def test_excludes_gitignore_and_explicit_files(tmp_path: Path, bad_file: Path):
    for folder in ("build", ".venv", "ignored"):
        (tmp_path / folder).mkdir()
        shutil.copy(bad_file, tmp_path / folder / "copy.py")
    (tmp_path / ".venv" / "pyvenv.cfg").write_text("home = /usr\n")
    (tmp_path / ".gitignore").write_text("ignored/\n")
    result = run("check", "--no-cache", "--format", "json", str(tmp_path))
    assert {Path(d["path"]).parent.name for d in json.loads(result.stdout)} == {tmp_path.name}
    explicit = run("check", "--no-cache", "--format", "json", str(tmp_path / "build" / "copy.py"))
    assert {d["code"] for d in json.loads(explicit.stdout)} == {"RPL002", "RPL003"}
    (tmp_path / "pyproject.toml").write_text('[tool.ropelint]\nextend-exclude = ["rotary.py"]\n')
    assert run("check", "--no-cache", str(tmp_path)).exit_code == 0


def test_inline_suppression(tmp_path: Path, bad_file: Path):
    text = bad_file.read_text()
    text = text.replace(".transpose(1, 2)\n", ".transpose(1, 2)  # ropelint: ignore[RPL003]\n", 1)
    text = text.replace("expand(position_ids.shape[0], -1, 1)\n", "expand(position_ids.shape[0], -1, 1)  # noqa: RPL002\n")
    bad_file.write_text(text)
    assert run("check", "--no-cache", str(bad_file)).exit_code == 0


def test_no_colour_when_not_a_tty_and_no_markup_injection(bad_file: Path):
    result = run("check", "--no-cache", str(bad_file), env={"NO_COLOR": "1"})
    assert "\x1b[" not in result.output
    assert "self.inv_freq[None, :, None]" in result.output  # brackets survive: no rich markup


@pytest.mark.skipif(EXE is None, reason="ropelint executable not installed")
def test_installed_executable_subprocess(tmp_path: Path, bad_file: Path, good_file: Path):
    env = {**os.environ, "NO_COLOR": "1"}
    out = subprocess.run([EXE, "check", "--no-cache", "--format", "json", str(bad_file)], capture_output=True,
                         text=True, env=env, cwd=tmp_path)
    assert out.returncode == 1 and json.loads(out.stdout)[0]["path"] == "rotary.py"
    assert subprocess.run([EXE, "check", "--no-cache", str(good_file)], capture_output=True, env=env).returncode == 0
    diff = subprocess.run([EXE, "fix", "--no-cache", str(bad_file)], capture_output=True, text=True, env=env)
    assert diff.returncode == 1 and "+++ b/" in diff.stdout
    write = subprocess.run([EXE, "fix", "--no-cache", "--write", str(bad_file)], capture_output=True, text=True)
    assert write.returncode == 0 and "inv_freq_expanded * position_ids_expanded" in bad_file.read_text()
    again = subprocess.run([EXE, "check", "--no-cache", str(bad_file)], capture_output=True, text=True)
    assert again.returncode == 0, again.stdout
    version = subprocess.run([sys.executable, "-m", "ropelint", "--version"], capture_output=True, text=True)
    assert version.stdout.strip() == f"ropelint {__version__}"


@pytest.mark.skipif(EXE is None or shutil.which("git") is None, reason="needs the executable and git")
def test_diff_mode_stdout_is_a_patch_git_applies(tmp_path: Path, bad_file: Path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    diff = subprocess.run([EXE, "fix", "--no-cache", "rotary.py"], capture_output=True, text=True, cwd=tmp_path)
    assert diff.returncode == 1 and diff.stdout.startswith("--- a/rotary.py")
    assert "Would fix 2 findings" in diff.stderr
    (tmp_path / "fix.patch").write_text(diff.stdout)
    subprocess.run(["git", "apply", "fix.patch"], check=True, cwd=tmp_path)
    after = subprocess.run([EXE, "check", "--no-cache", "rotary.py"], capture_output=True, text=True, cwd=tmp_path)
    assert after.returncode == 0, after.stdout


def test_an_analysis_crash_is_reported_per_file_and_the_run_goes_on(tmp_path: Path, bad_file: Path, monkeypatch):
    import ropelint.engine as engine

    real = engine.analyse

    def flaky(module, imports, spans, *rest):  # type: ignore[no-untyped-def]
        if "Broken" in spans.code:
            raise ValueError("boom")
        return real(module, imports, spans, *rest)

    monkeypatch.setattr(engine, "analyse", flaky)
    odd = tmp_path / "odd.py"
    odd.write_text(bad_file.read_text().replace("LlamaRotaryEmbedding", "BrokenRotaryEmbedding"))
    result = run("check", "--no-cache", "-j", "1", str(tmp_path))
    assert result.exit_code == 2
    assert "odd.py:1:1: error: ropelint internal error" in result.output and "boom" in result.output
    assert "rotary.py:22:18: RPL003" in result.output.replace(str(tmp_path) + "/", "")
    assert "Traceback" not in result.output
