"""Machine formats: JSON fields, SARIF valid against the official 2.1.0 schema, GitHub annotations."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from conftest import run_cli

SCHEMA = Path(__file__).resolve().parents[2] / "shared" / "data" / "sarif-schema-2.1.0.json"


_invoke = run_cli


@pytest.mark.skipif(not SCHEMA.exists(), reason="shared/data/sarif-schema-2.1.0.json not beside the checkout")
def test_sarif_validates_against_schema(bad_file: Path, tmp_path: Path):
    broken = tmp_path / "broken.py"
    broken.write_text("import torch\ndef f(:\n")
    result = _invoke("check", "--no-cache", "--format", "sarif", ".", cwd=tmp_path)
    assert result.exit_code == 2
    doc = json.loads(result.stdout)
    jsonschema.validate(doc, json.loads(SCHEMA.read_text()))
    run = doc["runs"][0]
    assert {r["ruleId"] for r in run["results"]} == {"RPL002", "RPL003"}
    region = next(r for r in run["results"] if r["ruleId"] == "RPL003")["locations"][0]["physicalLocation"]["region"]
    assert (region["startLine"], region["startColumn"]) == (22, 18)
    assert run["invocations"][0]["executionSuccessful"] is False
    assert [rule["id"] for rule in run["tool"]["driver"]["rules"]] == [f"RPL{i:03d}" for i in range(1, 12)]


def test_json_field_set(bad_file: Path, tmp_path: Path):
    result = _invoke("check", "--no-cache", "--format", "json", ".", cwd=tmp_path)
    for item in json.loads(result.stdout):
        assert set(item) == {"code", "name", "message", "path", "line", "column", "end_line", "end_column",
                             "symbol", "fix"}
        assert item["line"] >= 1 and item["column"] >= 1 and item["end_line"] >= item["line"]


def test_github_annotations(bad_file: Path, tmp_path: Path):
    result = _invoke("check", "--no-cache", "--format", "github", ".", cwd=tmp_path)
    lines = result.stdout.strip().splitlines()
    assert any(line.startswith("::error title=ropelint RPL003,file=rotary.py,line=22,col=18") for line in lines)
