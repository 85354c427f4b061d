"""Every rule document: its structure, and its examples executed through the linter."""

from __future__ import annotations

import pytest

from ropelint import docs
from ropelint.engine import check_text
from ropelint.fixer import fix_text
from ropelint.rules import ALL_RULES, BY_CODE

ALL = frozenset(BY_CODE)
FIX_LINE = {"always": "safe", "sometimes": "sometimes", "none": "none"}
SECTIONS = ("## What it does", "## Why is this bad", "## Example", "## Use instead", "## Fix safety")


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda r: r.code)
def test_document_structure(rule):
    doc = docs.load(rule.code)
    assert doc is not None
    assert doc.text.startswith(f"# {rule.code}: {rule.name}\n")
    for section in SECTIONS:
        assert section in doc.text
    assert doc.fix_line == FIX_LINE[rule.fix_availability]


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda r: r.code)
def test_bad_example_triggers_exactly_its_rule(rule):
    bad = docs.load(rule.code).bad_example
    result = check_text("example.py", bad, ALL, prefilter=False)
    assert result.error is None
    assert {d.code for d in result.diagnostics} == {rule.code}


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda r: r.code)
def test_good_example_triggers_nothing(rule):
    good = docs.load(rule.code).good_example
    result = check_text("example.py", good, ALL, prefilter=False)
    assert result.error is None and result.diagnostics == ()
    # The bundled prefilter must not hide what the whole-file parse sees.
    assert check_text("example.py", good, ALL).diagnostics == ()


@pytest.mark.parametrize("rule", [r for r in ALL_RULES if r.fix_availability != "none"], ids=lambda r: r.code)
def test_fixing_the_bad_example_removes_the_finding(rule):
    bad = docs.load(rule.code).bad_example
    outcome = fix_text("example.py", bad, ALL, unsafe=True)
    assert outcome.error is None and outcome.changed
    compile(outcome.fixed, "example.py", "exec")
    assert rule.code not in {d.code for d in outcome.remaining.diagnostics}
