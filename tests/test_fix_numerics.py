"""Fixes proven numerically: every fixed fixture module is imported and run through the probe matrix.

For each rotary class or function of a fixture that `ropelint fix --unsafe-fixes` rewrote:
- if the fixed symbol has no finding left, it passes all 24 cases and the 6 float32 controls
  (float64 reference, per-position tolerance of ROPE_NOTES section 4);
- the original fails somewhere when its findings include a numeric trap the matrix exercises.
"""

from __future__ import annotations

import math
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


# Rotaries the probe's 1-D positions cannot drive (it tries every reading before giving up, 10-80 s each):
# a dedicated test below measures each that has a finding with inputs of its own.
PROBE_CANNOT_DRIVE = {
    ("holders_properties_and_ids.py", "ResidueRotary"): "positions are residue indices split into chains",
    ("offsets_grids_and_outer_forms.py", "AxialGridRotary"): "it takes a (row, col) grid",
    # (Found as rotary code since ``np.power`` counts as a power: no finding, nothing to fix.)
    ("numpy_float64_tables.py", "SinusoidalPositionalEmbedding"): "an nn.Embedding of precomputed sin/cos rows",
}


def _targets(matrix: bool = False) -> list[tuple[str, str]]:
    out = []
    for fixed in sorted((FIXTURES / "fixed").glob("*.py")):
        for symbol in find_rotary_symbols(FIXTURES / "cases" / fixed.name):
            if not (matrix and (fixed.name, symbol) in PROBE_CANNOT_DRIVE):
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


# Originals whose bug the matrix's calls do not reach: the probe passes `dtype=`, or raises the
# cache length to cover every probed position, so the integer path never runs.
MATRIX_DOES_NOT_REACH = {
    ("table_casts_across_functions.py", "DefaultDtypeRotary"): "called without `dtype`",
    ("table_casts_across_functions.py", "RegrowingRotary"): "a cache that must grow",
}
# Public builders that return the phase in the dtype their caller names: the probe names the case's
# 16-bit dtype, which the contract honours; this file's own call names float32 (no finding).
CALLER_NAMES_THE_DTYPE = {
    ("offsets_grids_and_outer_forms.py", "precompute_angles"): "precompute_angles(dim, max_len, base, dtype=torch.float32)",
}


@pytest.mark.parametrize(("name", "symbol"), _targets(matrix=True), ids=lambda v: str(v))
def test_fixed_module_passes_the_matrix(name: str, symbol: str):
    fixed = FIXTURES / "fixed" / name
    left = _codes_in(fixed, symbol)
    if left & NUMERIC:
        pytest.skip(f"{symbol} keeps {sorted(left)} after fixing (no automatic fix)")
    report = _probe(fixed, symbol)
    if "wrong even in float32" in report.how:
        pytest.skip(f"the probe could not infer how to call {symbol}: {report.how}")
    assert report.total == 24 and report.controls_total == 6
    if (name, symbol) in CALLER_NAMES_THE_DTYPE:
        assert CALLER_NAMES_THE_DTYPE[name, symbol] in fixed.read_text() and not left
        assert report.controls_passed == 6 and report.passed < 24, report.verdict
        return
    assert (report.passed, report.controls_passed) == (24, 6), report.verdict

    original = FIXTURES / "cases" / name
    if (name, symbol) in MATRIX_DOES_NOT_REACH:
        return  # the bug needs a call the matrix does not make; a dedicated test below shows it
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
    if "wrong even in float32" in report.how:
        pytest.skip(f"the probe could not infer how to call {symbol}: {report.how}")
    return {check.name: check for check in report.checks}


# Fixture symbols whose forward itself cannot run on meta or export, for reasons no precision fix
# touches; their originals fail the same checks (asserted below, so the list cannot go stale).
OUTSIDE_THE_FIX = {
    # forward reads `int(position_ids.max())` to choose the long or short factors: data-dependent.
    ("longrope_factors.py", "Phi3LongRoPEScaledRotaryEmbedding"): ("export", "meta"),
    # a plain tensor attribute (no finding: module casts do not reach it) that `to_empty` never moves.
    ("per_layer_type_buffers.py", "Gemma3PlainAttributeRotaryEmbedding"): ("meta",),
    # `torch.from_numpy` tables are CPU tensors even under a meta-device context, so nothing is on meta
    # to materialise: `to_empty` hands back uninitialised memory for real tables, fixed or not.
    ("numpy_float64_tables.py", "NumpyRotaryEmbedding"): ("meta",),
    # plain tensor attributes built in `__init__` (no finding: module casts do not reach them) stay on
    # meta through `to_empty`, which materialises only parameters and buffers.
    ("framework_phase_shapes.py", "RegistryRotary"): ("meta",),
    ("framework_phase_shapes.py", "PackedRotary"): ("meta",),
    ("framework_phase_shapes.py", "YarnRotary"): ("meta",),
    ("offsets_grids_and_outer_forms.py", "StoredAngleRotary"): ("meta",),
    ("table_casts_across_functions.py", "StaticCacheRotary"): ("meta",),
    ("helper_dtype_flows.py", "ExpRotary"): ("meta",),
    ("helper_dtype_flows.py", "AssertedDtypeRotary"): ("meta",),
    # forward reads `int(position_ids.max())` to decide whether the cache must grow.
    ("table_casts_across_functions.py", "RegrowingRotary"): ("export", "meta"),
    ("helper_dtype_flows.py", "CastingTablesRotary"): ("export", "meta"),
    ("offsets_grids_and_outer_forms.py", "SequenceFirstAngles"): ("meta",),
}


@pytest.mark.parametrize(("name", "symbol"), _targets(), ids=lambda v: str(v))
def test_fixed_module_exports_and_loads_on_meta(name: str, symbol: str):
    """Every fixed module exports with a dynamic length (bounded only where its own cache guards the
    length), runs forward on meta, and survives meta -> to_empty -> load_state_dict -> forward with
    correct values: state the fix keeps through casts is rebuilt when `to_empty` materialises it."""
    after = _checks(FIXTURES / "fixed" / name, symbol)
    outside = OUTSIDE_THE_FIX.get((name, symbol), ())
    for check in ("export", "meta"):
        if check in outside:
            before = _checks(FIXTURES / "cases" / name, symbol)
            assert not before[check].passed and not after[check].passed, (check, after[check].detail)
        else:
            assert after[check].passed, (check, after[check].detail)


def test_the_meta_load_of_cached_tables_fails_in_the_original_and_passes_fixed():
    """The cached-table shape: non-persistent cos/sin are in no state dict, so `to_empty` leaves them
    unfilled; the fixed module's `_apply` rebuilds them from the recorded constructor arguments."""
    for folder, passed in (("cases", False), ("fixed", True)):
        for symbol in ("LlamaRotaryEmbedding", "LlamaLinearScalingRotaryEmbedding"):
            meta = _checks(FIXTURES / folder / "hf_cached_tables_437.py", symbol)["meta"]
            assert meta.passed is passed, (folder, symbol, meta.detail)


def test_the_autocast_guard_original_fails_on_meta():
    original = FIXTURES / "cases" / "hf_autocast_guard_440.py"
    module = load_file(str(original))
    report = run_matrix(resolve_symbol(module, "MistralRotaryEmbedding", str(original)), symbol="MistralRotaryEmbedding",
                        meta=True, positions=list(range(0, 300, 7)))
    meta = next(check for check in report.checks if check.name == "meta")
    assert meta.passed is False


def test_a_parameter_frozen_by_default_is_kept_only_while_frozen():
    """`nn.Parameter(freqs, requires_grad=learned_freq)`: the safe `_apply` fix keeps it float32 through
    `.bfloat16()` while it does not require grad; asked to learn, it converts like every other parameter."""
    module = load_file(str(FIXTURES / "fixed" / "lucidrains_frozen_by_argument.py"))
    frozen = module.RotaryEmbedding(64).bfloat16()
    learned = module.RotaryEmbedding(64, learned_freq=True).bfloat16()
    assert frozen.freqs.dtype == torch.float32 and not frozen.freqs.requires_grad
    assert learned.freqs.dtype == torch.bfloat16 and learned.freqs.requires_grad


def _patch_grid_reference(ids: torch.Tensor, dim: int, base: float) -> torch.Tensor:
    half = dim // 2
    omega = 1.0 / (base ** (torch.arange(0, half, 2, dtype=torch.float64) / half))
    axes = []
    for axis in (0, 1):
        angles = ids[..., axis].to(torch.float64)[..., None] * omega
        axes += [angles, angles]
    return torch.cat(axes, dim=-1)


def test_two_axis_patch_ids_tables_truncate_in_the_original_and_stay_exact_fixed():
    """`PatchGridRotary` takes (row, col) int64 patch ids the probe's 1-D positions cannot feed, so it is
    measured here: the original's cast to `ids.dtype` truncates every value to -1, 0 or 1; the fixed
    tables are float32 and within the float32 tolerance of a float64 reference, also under CPU
    autocast and after `.bfloat16()` (the module holds no state to round)."""
    ids = torch.stack([torch.arange(0, 4000, 3), torch.arange(4000, 0, -3)], dim=-1)[None]  # [1, N, 2]
    reference = _patch_grid_reference(ids, 64, 1e4)
    position = ids.max(dim=-1).values.to(torch.float64)[..., None]
    allowed = 2 * (position + 1) * 2**-24 + 2**-23
    original = load_file(str(FIXTURES / "cases" / "cached_dict_and_patch_ids.py")).PatchGridRotary(64)
    cos, _ = original(ids)
    assert cos.dtype == torch.int64 and set(cos.unique().tolist()) <= {-1, 0, 1}
    fixed_module = load_file(str(FIXTURES / "fixed" / "cached_dict_and_patch_ids.py"))
    _tables_stay_exact(lambda: fixed_module.PatchGridRotary(64), ids, reference, allowed)


def _tables_stay_exact(make, inputs, angles: torch.Tensor, allowed) -> None:  # type: ignore[no-untyped-def]
    """``make()`` as built and converted to bfloat16, under CPU autocast off, bfloat16 and float16: float32
    cos/sin tables within ``allowed`` of the float64 reference ``angles``' cos and sin."""
    for convert in (lambda m: m, lambda m: m.bfloat16()):
        for autocast in (None, torch.bfloat16, torch.float16):
            rotary = convert(make())
            with torch.autocast("cpu", dtype=autocast or torch.bfloat16, enabled=autocast is not None):
                cos, sin = rotary(inputs)
            assert cos.dtype == torch.float32
            assert ((cos.double() - angles.cos()).abs() <= allowed).all()
            assert ((sin.double() - angles.sin()).abs() <= allowed).all()


def _reference_tables(positions: torch.Tensor, dim: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    angles = positions.to(torch.float64)[..., None] * inv_freq
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos(), angles.sin()


def test_integer_paths_the_matrix_does_not_reach_truncate_in_the_original_and_not_fixed():
    """`DefaultDtypeRotary` called without `dtype` and `RegrowingRotary` made to grow its cache: every
    value of the originals' tables is -1, 0 or 1; the fixed ones return float tables within the
    float32 tolerance of a float64 reference (position 30000 included)."""
    position_ids = torch.tensor([[0, 1, 255, 257, 4095, 8191, 30000]])
    cos_ref, sin_ref = _reference_tables(position_ids, 64)
    allowed = 2 * (position_ids.to(torch.float64)[..., None] + 1) * 2**-24 + 2**-23
    x = torch.zeros(1, position_ids.shape[1], 64)
    for folder, fixed in (("cases", False), ("fixed", True)):
        module = load_file(str(FIXTURES / folder / "table_casts_across_functions.py"))
        outputs = {"default dtype": module.DefaultDtypeRotary(64)(position_ids),
                   "regrown cache": module.RegrowingRotary(64, max_position_embeddings=16)(x, position_ids)}
        for what, (cos, sin) in outputs.items():
            if not fixed:
                assert set(cos.unique().tolist()) <= {-1, 0, 1}, what  # the regrown cache is cast back to x's dtype
                continue
            assert cos.dtype == torch.float32, what
            assert ((cos.double() - cos_ref).abs() <= allowed).all(), what
            assert ((sin.double() - sin_ref).abs() <= allowed).all(), what


def test_a_cache_object_built_in_the_callers_dtype_is_fixed_to_float32_math():
    """`SharedRotaryCache` (not an nn.Module, so the probe cannot convert it) builds its tables in the
    dtype it is handed. With bfloat16 the original's positions and frequencies round (cos error near 2
    at position 30000); the fixed one computes in float32 and only stores bfloat16 tables, within one
    bfloat16 ulp of the reference plus the float32 term."""
    n = 30001
    cos_ref, _ = _reference_tables(torch.arange(n), 64)
    picked = torch.tensor([0, 257, 8191, 30000])
    allowed = 2 * (picked.to(torch.float64)[:, None] + 1) * 2**-24 + 2**-23 + 2**-8 * cos_ref[picked].abs()
    errors = {}
    for folder in ("cases", "fixed"):
        cache = load_file(str(FIXTURES / folder / "framework_phase_shapes.py")).SharedRotaryCache(64)
        cache.update(n, torch.device("cpu"), torch.bfloat16)
        assert cache.cos_cached.dtype == torch.bfloat16
        errors[folder] = (cache.cos_cached[picked].double() - cos_ref[picked]).abs()
    assert errors["cases"].max() > 1.0
    assert (errors["fixed"] <= allowed).all()


def test_grid_rotaries_keep_their_positions_and_bands_float32_after_the_fix():
    """The 2D shapes the probe cannot call (`vision_bands_and_grids.py`), measured against float64:
    `RotaryEmbeddingCat` after `.bfloat16()` on a 300 x 2 grid (its bands rounded and its axes made in
    their dtype: error near 1 in the original), and SAM 2-style `compute_axial_cis` handed bfloat16
    activations (its token index rounded past 256). The fixed forms stay within the float32 tolerance."""
    rows, cols, dim, base = 300, 2, 64, 10000.0
    n_bands = dim // 4
    bands = 1.0 / (base ** (torch.arange(0, n_bands, dtype=torch.float64) / n_bands))
    grid = torch.stack(torch.meshgrid(torch.arange(rows, dtype=torch.float64), torch.arange(cols, dtype=torch.float64),
                                      indexing="ij"), dim=-1).reshape(rows * cols, 2)
    angles = (grid[..., None] * bands).reshape(rows * cols, -1).repeat_interleave(2, -1)
    cat_reference = torch.cat([angles.sin(), angles.cos()], dim=-1)
    cat_allowed = 2 * (rows + 1) * 2**-24 + 2**-23
    end_x, end_y = 300, 2
    token = torch.arange(end_x * end_y, dtype=torch.float64)
    axial_freqs = 1.0 / (base ** (torch.arange(0, dim, 4, dtype=torch.float64)[: dim // 4] / dim))
    axial_reference = torch.cat([torch.outer(token % end_x, axial_freqs), torch.outer(token // end_x, axial_freqs)], -1)
    errors = {}
    for folder in ("cases", "fixed"):
        module = load_file(str(FIXTURES / folder / "vision_bands_and_grids.py"))
        rotary = module.RotaryEmbeddingCat(dim, feat_shape=[rows, cols]).bfloat16()
        table = rotary(torch.zeros(1, rows * cols, dim))
        cis = module.compute_axial_cis(dim, end_x, end_y, torch.zeros(2, dtype=torch.bfloat16))
        errors[folder] = ((table.double() - cat_reference).abs().max().item(),
                          (torch.angle(cis).double() - axial_reference).remainder(2 * math.pi).sub(math.pi).abs()
                          .sub(math.pi).abs().max().item())
    assert errors["cases"][0] > 0.1 and errors["cases"][1] > 0.1
    assert errors["fixed"][0] <= cat_allowed
    assert errors["fixed"][1] <= 2 * (end_x + 1) * 2**-24 + 2**-23


def test_offset_and_grid_rotaries_the_probe_cannot_call_are_exact_after_the_fix():
    """`apply_rotary_with_offsets` (KV-cache offsets, int or int64 tensor) and `AxialGridRotary` (an int64
    (row, col) grid) take inputs the probe's 1-D positions cannot feed, so they are measured here: the
    originals' tables are int64 (rotated queries off by whole units, tables of -1, 0 and 1); the fixed
    ones are within the float32 tolerance of a float64 reference, also under CPU autocast."""
    original = load_file(str(FIXTURES / "cases" / "offsets_grids_and_outer_forms.py"))
    fixed = load_file(str(FIXTURES / "fixed" / "offsets_grids_and_outer_forms.py"))
    torch.manual_seed(0)
    q = torch.randn(3, 2, 2, 64)
    offsets = torch.tensor([1000, 8190, 30000])
    positions = offsets[:, None] + torch.arange(2)
    cos_ref, sin_ref = _reference_tables(positions, 64)
    q64 = q.double()
    half = torch.cat((-q64[..., 32:], q64[..., :32]), dim=-1)
    rotated_ref = q64 * cos_ref[:, :, None] + half * sin_ref[:, :, None]
    allowed = (2 * (30001 + 1) * 2**-24 + 2**-23) * 2 * q.abs().max().item()
    assert (original.apply_rotary_with_offsets(q, offsets).double() - rotated_ref).abs().max() > 0.5
    for autocast in (None, torch.bfloat16):
        with torch.autocast("cpu", dtype=autocast or torch.bfloat16, enabled=autocast is not None):
            for given in (offsets, 1000):
                out = fixed.apply_rotary_with_offsets(q, given)
                want = rotated_ref if given is offsets else (
                    q64 * _reference_tables(1000 + torch.arange(2), 64)[0][None, :, None]
                    + half * _reference_tables(1000 + torch.arange(2), 64)[1][None, :, None])
                assert out.dtype == torch.float32 and (out.double() - want).abs().max().item() <= allowed

    grid = original.AxialGridRotary.grid(96, 96)
    bands = 1.0 / (100.0 ** (torch.arange(0, 32, 2, dtype=torch.float64) / 32))
    angles = (grid.double()[..., None] * bands).repeat(1, 1, 2).flatten(-2)
    assert set(original.AxialGridRotary(64)(grid)[0].unique().tolist()) <= {-1, 0, 1}
    _tables_stay_exact(lambda: fixed.AxialGridRotary(64), grid, angles, 2 * (95 + 1) * 2**-24 + 2**-23)


def test_residue_rotary_tables_are_integer_before_the_fix_and_exact_after():
    """`ResidueRotary` counts positions from residue indices, a new chain (a jump in the index) starting
    ``chain_gap`` further on: the original casts its tables to the indices' int64 (every value -1, 0 or 1);
    the fixed one keeps them float32 within the float32 tolerance of a float64 reference, through
    ``.bfloat16()`` and CPU autocast."""
    original = load_file(str(FIXTURES / "cases" / "holders_properties_and_ids.py"))
    fixed = load_file(str(FIXTURES / "fixed" / "holders_properties_and_ids.py"))
    residue_index = torch.cat([torch.arange(0, 3000), torch.arange(3005, 6000)])[None]
    positions = torch.cat([torch.arange(0, 3000), torch.arange(3005, 6000) + 1024])[None]
    angles = torch.cat((_angles(positions, 64),) * 2, dim=-1)
    cos, sin = original.ResidueRotary(64)(residue_index)
    assert set(cos.unique().tolist()) <= {-1, 0, 1} and set(sin.unique().tolist()) <= {-1, 0, 1}
    _tables_stay_exact(lambda: fixed.ResidueRotary(64), residue_index, angles, 2 * (7024 + 1) * 2**-24 + 2**-23)


def _angles(positions: torch.Tensor, dim: int, base: float = 10000.0) -> torch.Tensor:
    return positions.to(torch.float64)[..., None] * (1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)))
