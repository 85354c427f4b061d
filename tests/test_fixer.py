"""Fix application: encodings, BOM, line endings and mode survive; a fix that would not parse is never written."""

from __future__ import annotations

import codecs
from pathlib import Path

import pytest
from conftest import EXAMPLE, run_cli

from ropelint.diagnostics import Diagnostic, FixInfo, TextEdit
from ropelint.fixer import apply_edits, fix_text, write_atomic
from ropelint.rules import BY_CODE

ALL = frozenset(BY_CODE)


def _fix_write(path: Path) -> int:
    return run_cli("fix", "--no-cache", "--write", path.name, cwd=path.parent).exit_code


def test_crlf_bom_and_mode_are_kept(tmp_path: Path):
    target = tmp_path / "rotary.py"
    text = EXAMPLE.read_text().replace("\n", "\r\n")
    target.write_bytes(codecs.BOM_UTF8 + text.encode("utf-8"))
    target.chmod(0o751)
    assert _fix_write(target) == 0
    data = target.read_bytes()
    assert data.startswith(codecs.BOM_UTF8)
    body = data[len(codecs.BOM_UTF8):].decode("utf-8")
    assert "\r\n" in body and "\n" not in body.replace("\r\n", "")
    assert "inv_freq_expanded * position_ids_expanded" in body
    assert "from ropelint import runtime as rope_runtime\r\n" in body
    assert (target.stat().st_mode & 0o777) == 0o751


def test_latin1_cookie_is_kept(tmp_path: Path):
    target = tmp_path / "rotary.py"
    text = "# -*- coding: latin-1 -*-\n# auteur: Jos\xe9\n" + EXAMPLE.read_text()
    target.write_bytes(text.encode("latin-1"))
    assert _fix_write(target) == 0
    fixed = target.read_bytes().decode("latin-1")
    assert "Jos\xe9" in fixed and "inv_freq_expanded * position_ids_expanded" in fixed


def test_fix_that_would_not_parse_is_not_applied():
    text = EXAMPLE.read_text()
    start = text.index("@")
    bogus = Diagnostic("RPL003", "rope-matmul-phase", "m", "x.py", 1, 1, 1, 2, "",
                       FixInfo("safe", "break it", (TextEdit(start, start + 1, "@@ ("),)))
    broken, count = apply_edits(text, [bogus])
    assert count == 1 and broken != text
    with pytest.raises(SyntaxError):
        compile(broken, "x.py", "exec")
    # The fixer's own path checks the result before accepting it.
    from ropelint import fixer

    assert fixer._invalid(broken, full=True) is not None


def test_fix_text_refuses_a_round_whose_result_would_not_parse(monkeypatch):
    from ropelint import fixer

    text = EXAMPLE.read_text()
    start = text.index("@")

    def bogus(diagnostics, unsafe):  # type: ignore[no-untyped-def]
        return [Diagnostic("RPL003", "rope-matmul-phase", "m", "x.py", 1, 1, 1, 2, "",
                           FixInfo("safe", "break it", (TextEdit(start, start + 1, "@@ ("),)))]

    monkeypatch.setattr(fixer, "applicable", bogus)
    outcome = fixer.fix_text("x.py", text, ALL, unsafe=False)
    assert outcome.fixed == text and not outcome.changed
    assert outcome.error is not None and "would not parse" in outcome.error.message
    assert {d.code for d in outcome.remaining.diagnostics} == {"RPL002", "RPL003"}


def test_overlapping_fixes_apply_one_at_a_time_and_converge():
    text = EXAMPLE.read_text()
    outcome = fix_text("x.py", text, ALL, unsafe=True)
    assert outcome.applied == 2 and outcome.remaining.diagnostics == ()
    assert fix_text("x.py", outcome.fixed, ALL, unsafe=True).fixed == outcome.fixed


def test_write_atomic_leaves_no_temp_files(tmp_path: Path):
    target = tmp_path / "f.py"
    target.write_text("x = 1\n")
    write_atomic(target, b"x = 2\n")
    assert target.read_text() == "x = 2\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.py"]


def test_inserted_lines_take_the_files_own_indentation():
    """A tab-indented module gets tab-indented insertions (spaces there would be a TabError)."""
    import re

    tabbed = "\n".join(re.sub(r"^((?:    )+)", lambda m: "\t" * (len(m.group(1)) // 4), line)
                       for line in EXAMPLE.read_text().split("\n"))
    outcome = fix_text("rotary.py", tabbed, ALL, unsafe=False)
    assert outcome.error is None and outcome.applied == 2
    compile(outcome.fixed, "rotary.py", "exec")
    inserted = next(line for line in outcome.fixed.split("\n") if "_inv_freq_spec = (" in line)
    assert inserted.startswith("\t\tself._inv_freq_spec")


LEARNED_SCALE = '''\
import torch
from torch import nn


class ScaledRotary(nn.Module):
    def __init__(self, dim, base=10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
        self.inv_freq = nn.Buffer(inv_freq, persistent=False)
        self.original_inv_freq = nn.Buffer(inv_freq.clone(), persistent=False)
        self.alpha = nn.Parameter(torch.zeros_like(inv_freq))

    def update(self, factor):
        self.inv_freq = self.original_inv_freq / factor

    def forward(self, x, position_ids):
        scaled = self.inv_freq.to(dtype=torch.float) * self.alpha.to(dtype=torch.float).exp()
        freqs = position_ids[..., None].float() * scaled
        return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)
'''


def test_a_learnable_parameter_joins_the_override_through_learnable_names():
    """The buffers get one `_apply` override (safe); the learnable `alpha` joins it only with
    `--unsafe-fixes`, named in `learnable=` as well, and a second run changes nothing."""
    safe = fix_text("scaled.py", LEARNED_SCALE, ALL, unsafe=False)
    assert '("inv_freq", "original_inv_freq")' in safe.fixed and "learnable=" not in safe.fixed
    assert [d.code for d in safe.remaining.diagnostics] == ["RPL002"]  # alpha: unsafe only
    unsafe = fix_text("scaled.py", LEARNED_SCALE, ALL, unsafe=True)
    assert unsafe.remaining.diagnostics == ()
    assert unsafe.fixed.count("def _apply") == 1
    assert '("inv_freq", "original_inv_freq", "alpha"), *args, learnable=("alpha",), **kwargs)' in unsafe.fixed
    assert fix_text("scaled.py", unsafe.fixed, ALL, unsafe=True).fixed == unsafe.fixed


def test_a_coding_cookie_counts_on_line_one_or_two_only():
    from ropelint.source import SourceError, decode

    second = decode(Path("a.py"), b"#!/usr/bin/env python\n# -*- coding: latin-1 -*-\nx = '\xe9'\n")
    assert second.encoding == "iso8859-1" and second.text.endswith("x = '\xe9'\n")
    assert second.raw.endswith(b"'\xe9'\n")
    with pytest.raises(SourceError) as third:
        decode(Path("a.py"), b"#!/usr/bin/env python\n\n# -*- coding: latin-1 -*-\nx = '\xe9'\n")
    assert third.value.line == 4
