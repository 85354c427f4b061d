"""Fixes proven numerically: every fixed fixture module is imported and run through the probe matrix.

For each rotary class or function of a fixture that `ropelint fix --unsafe-fixes` rewrote:
- if the fixed symbol has no finding left, it passes all 24 cases and the 6 float32 controls
  (float64 reference, per-position tolerance of ROPE_NOTES section 4);
- the original fails somewhere when its findings include a numeric trap the matrix exercises.
"""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from fixture_expectations import FIXTURES  # noqa: E402

from ropelint.api import find_rotary_symbols  # noqa: E402
from ropelint.engine import check_text  # noqa: E402
from ropelint.probe import ProbeSetupError, run_matrix  # noqa: E402
from ropelint.probe.loader import load_file, resolve_symbol  # noqa: E402
from ropelint.rules import BY_CODE  # noqa: E402

ALL = frozenset(BY_CODE)
# Traps the 24-case matrix makes visible (RPL004 breaks export/meta, RPL006 needs a bf16 default dtype).
NUMERIC = {"RPL001", "RPL002", "RPL003", "RPL005", "RPL007", "RPL008", "RPL009"}


def _targets() -> list[tuple[str, str]]:
    out = []
    for fixed in sorted((FIXTURES / "fixed").glob("*.py")):
        for symbol in find_rotary_symbols(FIXTURES / "cases" / fixed.name):
            out.append((fixed.name, symbol))
    return out


def _codes_in(path: Path, symbol: str, skip_einsum: bool = False) -> set[str]:
    result = check_text(path.name, path.read_text(), ALL)
    return {d.code for d in result.diagnostics if d.symbol.split(".")[0] == symbol
            and not (skip_einsum and d.code == "RPL003" and "einsum" in d.message)}


def _probe(path: Path, symbol: str, warm_up: bool = False):
    module = load_file(str(path))
    try:
        return run_matrix(resolve_symbol(module, symbol, str(path)), symbol=symbol, warm_up=warm_up)
    except ProbeSetupError as exc:
        pytest.skip(f"the probe cannot build or call {symbol}: {str(exc).splitlines()[0]}")


@pytest.mark.parametrize(("name", "symbol"), _targets(), ids=lambda v: str(v))
def test_fixed_module_passes_the_matrix(name: str, symbol: str):
    fixed = FIXTURES / "fixed" / name
    left = _codes_in(fixed, symbol)
    if left & NUMERIC:
        pytest.skip(f"{symbol} keeps {sorted(left)} after fixing (no automatic fix)")
    report = _probe(fixed, symbol)
    if "wrong even in float32" in report.how:
        pytest.skip(f"the probe could not infer how to call {symbol}: {report.how}")
    assert report.total == 24 and report.controls_total == 6
    assert (report.passed, report.controls_passed) == (24, 6), report.verdict

    original = FIXTURES / "cases" / name
    # An einsum whose summed index has size 1 may run as a broadcast product on CPU (measured: the
    # original "bdk,bks->bds" fixture passes), so only the other traps must show in the original.
    if _codes_in(original, symbol, skip_einsum=True) & NUMERIC:
        before = _probe(original, symbol)
        if before.passed == 24 and before.controls_passed == 6:
            # State built lazily by the first forward is converted only in a model used before its cast.
            before = _probe(original, symbol, warm_up=True)
        assert before.passed < 24 or before.controls_passed < 6, before.verdict
        if "lazy" in name:
            assert _probe(fixed, symbol, warm_up=True).passed == 24


def _checks(path: Path, symbol: str) -> dict:
    module = load_file(str(path))
    try:
        report = run_matrix(resolve_symbol(module, symbol, str(path)), symbol=symbol, export=True, meta=True,
                            positions=list(range(0, 300, 7)))
    except ProbeSetupError as exc:
        pytest.skip(f"the probe cannot build or call {symbol}: {str(exc).splitlines()[0]}")
    return {check.name: check for check in report.checks}


@pytest.mark.parametrize(("name", "symbol"), _targets(), ids=lambda v: str(v))
def test_fixed_module_exports_and_loads_on_meta_whenever_the_original_does(name: str, symbol: str):
    """Every fixed module exports with a dynamic length and runs on meta, and survives meta -> to_empty ->
    load_state_dict -> forward with correct values, whenever its original did; a fix that rebuilds the
    state in forward (no `_apply` override) must pass both even where the original failed."""
    fixed = FIXTURES / "fixed" / name
    after, before = _checks(fixed, symbol), _checks(FIXTURES / "cases" / name, symbol)
    for check in ("export", "meta"):
        assert after[check].passed or not before[check].passed, (check, after[check].detail)
    # A fix that rebuilds the frequencies in forward (the symbol had an RPL002 finding and no `_apply`
    # override keeps its state) must load from meta even where the original could not.
    keeps_state = "apply_keeping_dtype" in fixed.read_text()
    if before["export"].passed and not keeps_state and "RPL002" in _codes_in(FIXTURES / "cases" / name, symbol):
        assert after["meta"].passed, after["meta"].detail


# Fixed modules that rebuild their state in forward, checked by name so that the claim above cannot
# become vacuous: they export and survive the meta-device load although some originals did not.
EXPORT_META = [("hf_matmul_438.py", "LlamaRotaryEmbedding"), ("hf_autocast_guard_440.py", "MistralRotaryEmbedding"),
               ("partial_rotary.py", "PhiRotaryEmbedding"), ("dspark_int_cast.py", "DraftRotaryEmbedding"),
               ("axial_2d_vision.py", "VisionRotaryEmbedding"), ("alias_torch_as_th.py", "AliasGuardedRotary"),
               ("nn_buffer_style.py", "RotaryEmbedding"), ("hf_matmul_438.py", "GemmaRotaryEmbedding"),
               ("lazy_inv_freq_registration.py", "GemmaRotaryEmbedding"),
               ("lazy_inv_freq_registration.py", "BaichuanRotaryEmbedding"),
               ("scaled_inline_constructions.py", "YarnRotaryEmbedding"),
               ("scaled_inline_constructions.py", "Llama3ScaledRotaryEmbedding"),
               ("mixed_axis_summing_einsum.py", "MixedAxisRotaryEmbedding"),
               ("per_layer_type_buffers.py", "Gemma3RotaryEmbedding"),
               ("per_layer_type_init_fns.py", "Gemma3RotaryEmbedding")]


@pytest.mark.parametrize(("name", "symbol"), EXPORT_META, ids=lambda v: str(v))
def test_fixed_module_exports_and_loads_on_meta(name: str, symbol: str):
    checks = _checks(FIXTURES / "fixed" / name, symbol)
    assert checks["meta"].passed, checks["meta"].detail
    if name != "nn_buffer_style.py":  # its original does not export either
        assert checks["export"].passed, checks["export"].detail


def test_the_autocast_guard_original_fails_on_meta():
    original = FIXTURES / "cases" / "hf_autocast_guard_440.py"
    module = load_file(str(original))
    report = run_matrix(resolve_symbol(module, "MistralRotaryEmbedding", str(original)), symbol="MistralRotaryEmbedding",
                        meta=True, positions=list(range(0, 300, 7)))
    meta = next(check for check in report.checks if check.name == "meta")
    assert meta.passed is False
