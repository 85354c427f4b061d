"""ropelint on real, pinned model packages from the package index (opt-in).

Run:  ROPELINT_NETWORK_TESTS=1 pytest -m network tests/test_real_packages.py

Each package's wheel is downloaded with ``pip download --no-deps`` (sha256
checked) and unpacked; ``ropelint check`` must then exit 0 or 1 (never 2),
report only documented codes (``rules/<CODE>.md``), and the prefilter must
drop no file that has a finding when every file is parsed
(``ROPELINT_NO_PREFILTER=1``).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.network,
    pytest.mark.skipif(os.environ.get("ROPELINT_NETWORK_TESTS") != "1",
                       reason="needs the package index: set ROPELINT_NETWORK_TESTS=1"),
]

_spec = importlib.util.spec_from_file_location(
    "ropelint_bench_common", Path(__file__).resolve().parents[1] / "benchmarks" / "common.py")
common = sys.modules[_spec.name] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(common)

PINNED = [  # small pure-python wheels with rotary-embedding code
    ("rotary-embedding-torch", "0.9.1", "489ef53e21ab4c4eb35c0c97b551d724f5eea71c2bca39acb8fee8d88b142a76"),
    ("x-transformers", "2.31.10", "40099be7b1f3043ffba67381288a35bdd932decf338dc69a01eb8024bea34d24"),
]


def _check(tree: Path, no_prefilter: bool) -> list:
    found = common.ropelint_command()
    assert found, "ropelint is not runnable (no ropelint/__main__.py, no `ropelint` on PATH)"
    cmd, env = found
    if no_prefilter:
        env[common.NO_PREFILTER_ENV] = "1"
    r = common.run_timed([*cmd, "check", ".", "--format", "json", "--no-cache"], cwd=tree, env=env,
                         timeout=600, sample_tree=False)
    assert r.returncode in (0, 1), f"exit {r.returncode} (no_prefilter={no_prefilter}):\n{r.stderr[-3000:]}"
    return common.parse_findings(r.stdout, cwd=tree, root=tree)


@pytest.mark.parametrize("name,version,sha256", PINNED, ids=[p[0] for p in PINNED])
def test_real_package(name, version, sha256, tmp_path_factory):
    tree = common.fetch_tree(name, version, tmp_path_factory.mktemp("work"), sha256, quiet=True)
    assert common.count_py_files(tree) > 0

    findings = _check(tree, no_prefilter=False)
    unknown = {f.code for f in findings} - common.known_codes()
    assert not unknown, f"codes without a rules/<CODE>.md: {sorted(unknown)}"

    full = _check(tree, no_prefilter=True)
    dropped = {f.path for f in full} - {f.path for f in findings}
    assert not dropped, "prefilter dropped files that have findings:\n" + "\n".join(
        f.render() for f in full if f.path in dropped)
