"""The fixture corpus: exact findings, exact fixed forms, idempotent fixes, and no parse for non-RoPE files."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixture_expectations import FIXTURES, case_files, expected_findings

from ropelint.engine import check_text
from ropelint.fixer import fix_text
from ropelint.rules import BY_CODE

ALL = frozenset(BY_CODE)
CASES = case_files()
FIXABLE = sorted((FIXTURES / "fixed").glob("*.py"))


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.name)
def test_exact_findings(path: Path):
    text = path.read_text()
    result = check_text(path.name, text, ALL, prefilter=True)
    assert result.error is None
    assert {(d.line, d.code) for d in result.diagnostics} == expected_findings(text)


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.name)
def test_prefilter_and_segments_lose_nothing(path: Path):
    """Segment parsing finds exactly what a whole-file parse finds, at the same positions."""
    text = path.read_text()
    fast = check_text(path.name, text, ALL, prefilter=True)
    full = check_text(path.name, text, ALL, prefilter=False)
    strip = lambda r: [(d.code, d.line, d.column, d.end_line, d.end_column, d.message) for d in r.diagnostics]  # noqa: E731
    assert strip(fast) == strip(full)


@pytest.mark.parametrize("path", sorted((FIXTURES / "not_rope").glob("*.py")) + [
    FIXTURES / "cases" / "plain_mlp_buffers.py"], ids=lambda p: p.name)
def test_files_that_are_not_rope_code_cost_no_parse(path: Path):
    if "jax" in path.name:
        pytest.skip("rotary code in JAX is RoPE code: parsed, then dropped for want of torch")
    result = check_text(path.name, path.read_text(), ALL)
    assert not result.parsed and not result.diagnostics


@pytest.mark.parametrize("path", [p for p in CASES if (FIXTURES / "fixed" / p.name).exists()], ids=lambda p: p.name)
def test_fixed_form_exact_idempotent_and_compiles(path: Path):
    expected = (FIXTURES / "fixed" / path.name).read_text()
    outcome = fix_text(path.name, path.read_text(), ALL, unsafe=True)
    assert outcome.error is None
    assert outcome.fixed == expected
    compile(outcome.fixed, path.name, "exec")
    again = fix_text(path.name, outcome.fixed, ALL, unsafe=True)
    assert again.fixed == outcome.fixed and again.applied == 0
    # What remains has no fix at all: every offered fix was applied.
    assert all(d.fix is None for d in again.remaining.diagnostics)


def test_every_case_with_fixable_findings_has_a_fixed_form():
    for path in CASES:
        result = check_text(path.name, path.read_text(), ALL)
        if any(d.fix is not None for d in result.diagnostics):
            assert (FIXTURES / "fixed" / path.name).exists(), f"fixtures/fixed/{path.name} missing"


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.name)
def test_crlf_files_give_the_same_findings(path: Path):
    text = path.read_text()
    lf = check_text(path.name, text, ALL)
    crlf = check_text(path.name, text.replace("\n", "\r\n"), ALL, newline="\r\n")
    key = lambda r: [(d.code, d.line, d.column, d.end_line, d.end_column, d.fix is not None) for d in r.diagnostics]  # noqa: E731
    assert key(crlf) == key(lf)
