"""The result cache and parallel checking: same findings, stable order, corruption tolerated."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from conftest import EXAMPLE, run_cli

from ropelint.cache import Cache
from ropelint.config import load_settings
from ropelint.runner import check_paths


def _tree(root: Path, copies: int) -> list[Path]:
    files = []
    for i in range(copies):
        target = root / f"pkg{i % 3}" / f"rotary_{i}.py"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(EXAMPLE, target)
        files.append(target)
    (root / "plain.py").write_text("import torch\n\nx = torch.ones(3)\n")
    return sorted(files) + [root / "plain.py"]


def _json(args: list[str], cwd: Path) -> tuple[int, list[dict]]:
    result = run_cli(*args, cwd=cwd)
    return result.exit_code, json.loads(result.stdout)


def test_parallel_equals_serial_and_order_is_stable(tmp_path: Path):
    _tree(tmp_path, 12)
    code1, serial = _json(["check", "--no-cache", "--format", "json", "-j", "1", "."], tmp_path)
    code2, parallel = _json(["check", "--no-cache", "--format", "json", "-j", "2", "."], tmp_path)
    assert code1 == code2 == 1
    assert serial == parallel
    assert len(serial) == 24
    assert [d["path"] for d in serial] == sorted(d["path"] for d in serial)


def test_cache_hit_gives_identical_results_and_fixes(tmp_path: Path):
    files = _tree(tmp_path, 3)
    settings = load_settings(tmp_path)
    cache_dir = tmp_path / "cache"
    cold, _ = check_paths(files, settings, jobs=1, cache=Cache(cache_dir, settings.fingerprint()))
    assert any(cache_dir.glob("*.json"))
    warm_cache = Cache(cache_dir, settings.fingerprint())
    assert len(warm_cache.entries) == 1  # three identical files share one content key
    warm, _ = check_paths(files, settings, jobs=1, cache=warm_cache)
    assert [r.diagnostics for r in cold] == [r.diagnostics for r in warm]
    assert all(d.fix is not None and d.fix.edits for r in warm for d in r.diagnostics)


def test_cache_key_follows_content_and_configuration(tmp_path: Path):
    files = _tree(tmp_path, 1)
    settings = load_settings(tmp_path)
    cache_dir = tmp_path / "cache"
    check_paths(files, settings, jobs=1, cache=Cache(cache_dir, settings.fingerprint()))
    files[0].write_text(files[0].read_text().replace("@", "*"))  # the matmul is gone
    after, _ = check_paths(files, settings, jobs=1, cache=Cache(cache_dir, settings.fingerprint()))
    assert {d.code for r in after for d in r.diagnostics} == {"RPL002"}
    narrow = load_settings(tmp_path, select=("RPL003",))
    assert narrow.fingerprint() != settings.fingerprint()


def test_corrupt_cache_is_ignored_and_rebuilt(tmp_path: Path):
    files = _tree(tmp_path, 1)
    settings = load_settings(tmp_path)
    cache_dir = tmp_path / "cache"
    check_paths(files, settings, jobs=1, cache=Cache(cache_dir, settings.fingerprint()))
    cache_file = next(cache_dir.glob("*.json"))
    cache_file.write_text("{not json")
    results, _ = check_paths(files, settings, jobs=1, cache=Cache(cache_dir, settings.fingerprint()))
    assert {d.code for r in results for d in r.diagnostics} == {"RPL002", "RPL003"}
    assert json.loads(cache_file.read_text())  # rewritten whole
    # A well-formed file with a broken entry: that entry is dropped and recomputed.
    data = json.loads(cache_file.read_text())
    key = next(iter(data))
    data[key] = {"d": [{"bogus": 1}], "e": None}
    cache_file.write_text(json.dumps(data))
    results, _ = check_paths(files, settings, jobs=1, cache=Cache(cache_dir, settings.fingerprint()))
    assert {d.code for r in results for d in r.diagnostics} == {"RPL002", "RPL003"}


def test_no_cache_writes_nothing_and_cache_dir_option(tmp_path: Path):
    _tree(tmp_path, 1)
    _json(["check", "--no-cache", "--format", "json", "."], tmp_path)
    assert not (tmp_path / ".ropelint_cache").exists()
    _json(["check", "--format", "json", "--cache-dir", "elsewhere", "."], tmp_path)
    assert any((tmp_path / "elsewhere").glob("*.json"))
    assert (tmp_path / "elsewhere" / ".gitignore").read_text().strip().endswith("*")


def test_warm_run_reads_no_unchanged_file_and_notices_edits(tmp_path: Path, monkeypatch):
    import ropelint.runner as runner

    files = _tree(tmp_path, 3)
    settings = load_settings(tmp_path)
    cache_dir = tmp_path / "cache"
    cold, _ = check_paths(files, settings, jobs=1, cache=Cache(cache_dir, settings.fingerprint()))
    reads: list[Path] = []
    real = runner.read_source
    monkeypatch.setattr(runner, "read_source", lambda p: reads.append(p) or real(p))
    warm, _ = check_paths(files, settings, jobs=1, cache=Cache(cache_dir, settings.fingerprint()))
    assert reads == [] and [r.diagnostics for r in warm] == [r.diagnostics for r in cold]
    # An edit changes size and mtime: that file (and only it) is read and checked again.
    files[0].write_text(files[0].read_text().replace("@", "*"))
    again, _ = check_paths(files, settings, jobs=1, cache=Cache(cache_dir, settings.fingerprint()))
    assert reads == [files[0]]
    first = next(r for r in again if r.path.endswith(files[0].name) and "pkg0" in r.path)
    assert {d.code for d in first.diagnostics} == {"RPL002"}


def test_cache_written_by_other_ropelint_code_is_not_read(tmp_path: Path, monkeypatch):
    # An editable install keeps its version number while its analysis changes: results the older code
    # produced must not answer for the newer one.
    import ropelint.cache as cache_module

    files = _tree(tmp_path, 1)
    settings = load_settings(tmp_path)
    cache_dir = tmp_path / "cache"
    monkeypatch.setattr(cache_module, "_code_stamp", lambda: "aaaaaaaaaaaa")
    check_paths(files, settings, jobs=1, cache=Cache(cache_dir, settings.fingerprint()))
    assert len(Cache(cache_dir, settings.fingerprint()).entries) == 1
    monkeypatch.setattr(cache_module, "_code_stamp", lambda: "bbbbbbbbbbbb")
    assert Cache(cache_dir, settings.fingerprint()).entries == {}


def test_code_stamp_follows_the_package_sources(tmp_path: Path, monkeypatch):
    import ropelint.cache as cache_module

    package = tmp_path / "ropelint"
    package.mkdir()
    module = package / "cache.py"
    module.write_text("x = 1\n")
    monkeypatch.setattr(cache_module, "__file__", str(module))
    before = cache_module._code_stamp()
    (package / "rules.py").write_text("y = 2\n")
    assert cache_module._code_stamp() != before


def test_without_a_configuration_the_cache_goes_to_the_current_folder(tmp_path: Path):
    """Checking another folder that has no pyproject.toml must not write into it (a vendored tree, a read-only
    checkout): the cache goes to the current folder, as ruff's does. With a configuration it sits next to it."""
    checked = tmp_path / "checked"
    checked.mkdir()
    _tree(checked, 1)
    here = tmp_path / "here"
    here.mkdir()
    _json(["check", "--format", "json", str(checked)], here)
    assert not (checked / ".ropelint_cache").exists()
    assert any((here / ".ropelint_cache").glob("*.json"))
    (checked / "pyproject.toml").write_text("[tool.ropelint]\n")
    _json(["check", "--format", "json", str(checked)], here)
    assert any((checked / ".ropelint_cache").glob("*.json"))
