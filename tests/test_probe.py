"""``ropelint probe``: tolerance maths, the matrix, inference, scores of known shapes, CLI.

The scores follow ROPE_NOTES section 4: every buffer-based shape fails all 24 cases (its
float32 controls pass), the int-cast shape fails its controls too, and the float32
recompute pattern passes 24/24. Each module under tests/probe_modules is probed once.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from click.testing import CliRunner  # noqa: E402

from ropelint.probe import ProbeReport, ProbeSetupError, run_matrix  # noqa: E402
from ropelint.probe.command import TORCH_MISSING, probe  # noqa: E402
from ropelint.probe.compare import Reference, compare  # noqa: E402
from ropelint.probe.loader import (  # noqa: E402
    heuristic_symbols,
    load_file,
    resolve_symbol,
    split_target,
)
from ropelint.probe.matrix import (  # noqa: E402
    CPU_AUTOCASTS,
    DEFAULT_PAIRS,
    build_cases,
    default_positions,
    pairs_from,
    parse_positions,
)
from ropelint.probe.readings import Table  # noqa: E402
from ropelint.probe.tolerance import (  # noqa: E402
    float32_term,
    trig_tolerance,
    ulp,
    wrapped_angle_error,
)

MODULES = Path(__file__).parent / "probe_modules"
REPO = Path(__file__).resolve().parents[1]
# Explicit, so a CUDA machine (which adds CUDA autocast cases by default) scores the same.
CPU = ",".join(CPU_AUTOCASTS)


# Targets that take a length build the whole 0..131073 table in every case (about 0.1 s
# each on a 2-core CPU). Where the far end is not the point, stop them at 32769.
NEAR = tuple(p for p in default_positions() if p <= 32769)
NEAR_ONLY = {"InterleavedRotary", "build_rope_cache", "build_rope_cache_fixed",
             "ComplexBufferRotary"}


@functools.cache
def report_for(file: str, symbol: str) -> ProbeReport:
    module = load_file(str(MODULES / file))
    positions = NEAR if symbol in NEAR_ONLY else None
    return run_matrix(getattr(module, symbol), autocasts=CPU_AUTOCASTS, symbol=symbol,
                      positions=positions)


# --- tolerance maths -------------------------------------------------------------------


def test_float32_term_matches_the_notes() -> None:
    positions = torch.tensor([0, 1, 32767, 131071])
    got = float32_term(positions)
    assert got.dtype == torch.float64
    assert got[0] == 2 * 2.0**-24 + 2.0**-23  # 2**-22
    assert got[2] == 2 * 32768 * 2.0**-24 + 2.0**-23
    # The notes' bound for correct float32 code, 1.34 * (pos + 1) * 2**-24, fits inside.
    assert (1.34 * (positions + 1) * 2.0**-24 < got).all()


@pytest.mark.parametrize(
    "value,dtype,expected",
    [
        (1.0, torch.bfloat16, 2.0**-7),
        (0.999, torch.bfloat16, 2.0**-8),
        (0.5, torch.bfloat16, 2.0**-8),
        (0.4999, torch.bfloat16, 2.0**-9),
        (-0.75, torch.float16, 2.0**-11),
        (1.0, torch.float16, 2.0**-10),
        (1e-5, torch.float16, 2.0**-24),  # float16 subnormal spacing
        (0.0, torch.float16, 2.0**-24),
        (0.0, torch.bfloat16, 2.0**-133),
    ],
)
def test_ulp_known_values(value: float, dtype: torch.dtype, expected: float) -> None:
    assert float(ulp(torch.tensor([value], dtype=torch.float64), dtype)[0]) == expected


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_ulp_is_the_gap_to_the_next_representable_number(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    values = (torch.rand(2000, dtype=torch.float64) * 2).to(dtype)  # representable in dtype
    values = values[values > 0]
    gap = torch.nextafter(values, torch.full_like(values, math.inf)).double() - values.double()
    assert torch.equal(ulp(values.double(), dtype), gap)


def test_trig_tolerance_adds_an_ulp_only_for_16_bit_output() -> None:
    ref = torch.tensor([[1.0, 0.3]], dtype=torch.float64)
    positions = torch.tensor([10])
    f32 = trig_tolerance(ref, positions, torch.float32)
    bf16 = trig_tolerance(ref, positions, torch.bfloat16)
    assert torch.equal(f32, float32_term(positions)[:, None].expand(1, 2))
    assert torch.equal(bf16 - f32, ulp(ref, torch.bfloat16))


def test_wrapped_angle_error() -> None:
    f64 = torch.float64
    got = wrapped_angle_error(torch.tensor([2 * math.pi - 1e-3, math.pi + 0.1, 0.5], dtype=f64),
                              torch.tensor([0.0, -math.pi + 0.1, 0.25], dtype=f64))
    assert torch.allclose(got, torch.tensor([1e-3, 0.0, 0.25], dtype=torch.float64), atol=1e-12)


def _reference_table(positions: torch.Tensor, dtype: torch.dtype) -> tuple[Reference, Table]:
    reference = Reference(positions, 64, 1e4)
    cos, sin = reference.trig("half")
    table = Table("trig", cos.to(dtype).double(), sin.to(dtype).double(), dtype)
    return reference, table


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_rounded_reference_passes_two_ulps_off_fails(dtype: torch.dtype) -> None:
    positions = torch.arange(0, 3000)
    reference, rounded = _reference_table(positions, dtype)
    assert compare(rounded, "half", reference).passed
    # Move one element two steps of `dtype` away from its rounded value.
    cos = rounded.first.to(dtype)
    row = 1234
    step = torch.nextafter(cos[row, 3:4], torch.tensor([math.inf], dtype=dtype))
    twice = torch.nextafter(step, torch.tensor([math.inf], dtype=dtype))
    if dtype == torch.float32:
        # float32's own allowance covers many ulps; exceed it by construction instead.
        twice = cos[row, 3:4] + 3 * float(float32_term(torch.tensor([row]))[0])
    bad = cos.clone()
    bad[row, 3] = twice[0]
    result = compare(Table("trig", bad.double(), rounded.second, dtype), "half", reference)
    assert not result.passed
    assert result.first_failing_position == row


def test_nan_fails_instead_of_comparing_false() -> None:
    positions = torch.arange(0, 100)
    reference, table = _reference_table(positions, torch.float32)
    first = table.first.clone()
    first[70, 0] = math.nan
    result = compare(Table("trig", first, table.second, torch.float32), "half", reference)
    assert not result.passed
    assert result.first_failing_position == 70
    assert math.isinf(result.max_error)


def test_layout_matters() -> None:
    positions = torch.arange(0, 500)
    reference, table = _reference_table(positions, torch.float32)
    assert compare(table, "half", reference).passed
    assert not compare(table, "interleaved", reference).passed


# --- matrix ----------------------------------------------------------------------------


def test_default_matrix_is_24_cases_plus_6_controls() -> None:
    cases = build_cases(DEFAULT_PAIRS, CPU_AUTOCASTS)
    matrix = [c for c in cases if not c.control]
    controls = [c for c in cases if c.control]
    assert len(matrix) == 24 and len(set(matrix)) == 24
    assert len(controls) == 6
    assert {c.module_dtype for c in matrix} == {"float16", "bfloat16"}
    assert {c.module_dtype for c in controls} == {"float32"}
    assert {(c.head_dim, c.base) for c in cases} == {(64, 1e4), (128, 5e5)}


def test_default_positions_cover_the_edges_and_stay_small() -> None:
    positions = default_positions()
    assert list(positions) == sorted(set(positions))
    assert set(range(0, 2113)) <= set(positions)  # 257 (bfloat16) and 2049 (float16) inside
    assert {8192, 32767, 32768, 32769, 131070, 131073} <= set(positions)
    assert len(positions) < 2600


def test_parse_positions() -> None:
    assert parse_positions("0-10:5,7") == (0, 5, 7, 10)
    assert parse_positions("3") == (3,)
    widened = parse_positions("default,262143")
    assert widened[-1] == 262143 and len(widened) == len(default_positions()) + 1
    for bad in ("", "5-1", "a", "1-4:0"):
        with pytest.raises(ValueError):
            parse_positions(bad)


def test_pairs_from() -> None:
    assert pairs_from(None, None) == DEFAULT_PAIRS
    assert pairs_from((256,), None) == ((256, 1e4), (256, 5e5))
    assert pairs_from((64,), (1e6,)) == ((64, 1e6),)


# --- scores of known shapes (ROPE_NOTES section 4) ----------------------------------------

BUGGY_CLASSES = [
    ("a_cached_tables.py", "CachedRotaryEmbedding"),
    ("b_matmul_guard.py", "GuardedRotaryEmbedding"),
    ("c_elementwise_buffer.py", "ConfigRotaryEmbedding"),
    ("d_einsum_type_as.py", "NeoXRotaryEmbedding"),
]
CORRECT = [
    ("f_float32_recompute.py", "Float32RotaryEmbedding"),
    ("f_float32_recompute.py", "Float32ConfigRotary"),
    ("f_float32_recompute.py", "InterleavedRotary"),
    ("f_float32_recompute.py", "PhaseRotary"),
    ("f_float32_recompute.py", "HelperRotary"),
    ("g_freqs_cis.py", "precompute_freqs_cis"),
    ("h_rope_cache.py", "build_rope_cache_fixed"),
]


def _assert_separated(report: ProbeReport) -> None:
    """Passing cases sit well below their tolerance, failing ones far above (the notes)."""
    for result in report.cases:
        if result.error is not None:
            continue
        assert result.worst_ratio is not None
        if result.passed:
            assert result.worst_ratio < 0.99, result
        else:
            assert result.worst_ratio > 600, result


@pytest.mark.parametrize("file,symbol", BUGGY_CLASSES)
def test_buffer_based_shapes_fail_every_case(file: str, symbol: str) -> None:
    report = report_for(file, symbol)
    assert (report.passed, report.total) == (0, 24)
    assert (report.controls_passed, report.controls_total) == (6, 6)
    for result in report.matrix:
        # The rounded inverse frequencies bite almost at once.
        if result.error is None:
            assert result.first_failing_position is not None
            assert result.first_failing_position < 300
    _assert_separated(report)


def test_cast_to_integer_dtype_fails_the_controls_too() -> None:
    report = report_for("e_cast_to_positions.py", "IntCastRotaryEmbedding")
    assert (report.passed, report.controls_passed) == (0, 0)
    assert "wrong even in float32" in report.how


@pytest.mark.parametrize("file,symbol", CORRECT)
def test_float32_recompute_shapes_pass_24_of_24(file: str, symbol: str) -> None:
    report = report_for(file, symbol)
    assert (report.passed, report.total) == (24, 24)
    assert (report.controls_passed, report.controls_total) == (6, 6)
    assert report.ok
    _assert_separated(report)


def test_reading_and_call_inference() -> None:
    how = {symbol: report_for(file, symbol).how for file, symbol in CORRECT}
    assert "forward(x={x}, position_ids={positions})" in how["Float32RotaryEmbedding"]
    assert "config={config}" in how["Float32ConfigRotary"]
    assert "seq_len={seq_len}" in how["InterleavedRotary"]
    assert "interleaved" in how["InterleavedRotary"]
    assert "the phase" in how["PhaseRotary"]
    assert "end={seq_len}" in how["precompute_freqs_cis"]
    assert "complex" in how["precompute_freqs_cis"]
    assert "stack((cos, sin), -1)" in how["build_rope_cache_fixed"]
    neox = report_for("d_einsum_type_as.py", "NeoXRotaryEmbedding").how
    assert "forward(x={x})" in neox  # (x, seq_dim) with the default seq_dim


def test_position_cast_fails_exactly_where_the_dtype_stops_being_exact() -> None:
    report = report_for("i_positions_to_x_dtype.py", "PositionCastRotary")
    assert (report.passed, report.controls_passed) == (12, 6)
    for result in report.matrix:
        if result.case.cast_back:
            assert result.passed  # float32 state again: nothing is cast
        elif result.case.module_dtype == "bfloat16":
            assert result.first_failing_position == 257  # 257 -> 256
        else:
            assert result.first_failing_position == 2049  # 2049 -> 2048
    _assert_separated(report)


def test_complex_buffer_loses_its_imaginary_part() -> None:
    report = report_for("g_freqs_cis.py", "ComplexBufferRotary")
    assert (report.passed, report.controls_passed) == (0, 6)
    assert all("complex" in (r.error or "") for r in report.matrix)


def test_functions_take_the_case_dtype_as_their_dtype_argument() -> None:
    """lit-gpt style: positions and inverse frequencies built in `dtype`. Functions hold no
    state, so the cast-back cases call them with float32 and pass."""
    report = report_for("h_rope_cache.py", "build_rope_cache")
    assert (report.passed, report.controls_passed) == (12, 6)
    assert all(r.passed == r.case.cast_back for r in report.matrix)
    low = {r.output_dtype for r in report.matrix if not r.case.cast_back}
    assert low == {"float16", "bfloat16"}


def test_narrowed_matrix_and_literal_init() -> None:
    module = load_file(str(MODULES / "f_float32_recompute.py"))
    report = run_matrix(module.Float32RotaryEmbedding, positions=range(0, 600, 7),
                        head_dims_bases=[(32, 1e6)], autocasts=["off"])
    assert (report.passed, report.total, report.controls_total) == (4, 4, 1)
    pinned = run_matrix(module.Float32RotaryEmbedding, positions=range(100),
                        autocasts=["off"], init="dim=128,base=5e5")
    assert {(r.case.head_dim, r.case.base) for r in pinned.cases} == {(128, 5e5)}
    assert pinned.ok


# --- inference failures and overrides ---------------------------------------------------

ODD = textwrap.dedent(
    """
    import torch
    from torch import nn


    class OddRotary(nn.Module):
        def __init__(self, size, freq):
            super().__init__()
            self.size, self.freq = size, freq

        def forward(self, scale, ids, extra):
            exponent = torch.arange(0, self.size, 2, dtype=torch.float32) / self.size
            angles = ids[..., None].float() * (1.0 / self.freq ** exponent)
            return (angles.cos() * scale, angles.sin() * scale)
    """
)


@pytest.fixture()
def odd_file(tmp_path: Path) -> Path:
    path = tmp_path / "odd.py"
    path.write_text(ODD)
    return path


def test_uninferable_constructor_says_what_it_tried(odd_file: Path) -> None:
    module = load_file(str(odd_file))
    with pytest.raises(ProbeSetupError) as info:
        run_matrix(module.OddRotary, positions=range(10), autocasts=["off"])
    message = str(info.value)
    assert "size" in message and "--init" in message and "head_dim" in message


def test_uninferable_call_lists_attempts_then_init_and_call_work(odd_file: Path) -> None:
    module = load_file(str(odd_file))
    with pytest.raises(ProbeSetupError) as info:
        run_matrix(module.OddRotary, positions=range(10), autocasts=["off"],
                   init="size={head_dim},freq={base}")
    assert "--call" in str(info.value)
    report = run_matrix(module.OddRotary, positions=range(0, 3000, 3), autocasts=CPU_AUTOCASTS,
                        init="size={head_dim},freq={base}",
                        call="scale=1.0,ids={positions_1d},extra=None")
    assert (report.passed, report.total) == (24, 24)
    assert "plain" not in report.how and "one column per frequency" in report.how


# --- --export / --meta ------------------------------------------------------------------


def test_export_and_meta_checks() -> None:
    correct = load_file(str(MODULES / "f_float32_recompute.py"))
    guarded = load_file(str(MODULES / "b_matmul_guard.py"))
    cached = load_file(str(MODULES / "a_cached_tables.py"))
    kwargs = dict(positions=range(50), autocasts=["off"], head_dims_bases=[(64, 1e4)],
                  export=True, meta=True)
    ok = run_matrix(correct.Float32RotaryEmbedding, **kwargs)
    assert [(c.name, c.passed) for c in ok.checks] == [("export", True), ("meta", True)]
    bad = {c.name: c for c in run_matrix(guarded.GuardedRotaryEmbedding, **kwargs).checks}
    assert bad["meta"].passed is False and "meta device" in bad["meta"].detail
    assert "autocast node" in bad["export"].detail
    stale = {c.name: c for c in run_matrix(cached.CachedRotaryEmbedding, **kwargs).checks}
    assert stale["meta"].passed is False and "load_state_dict" in stale["meta"].detail


# --- CLI ---------------------------------------------------------------------------------

CASE_SCHEMA = {
    "type": "object",
    "required": ["module_dtype", "cast_back", "head_dim", "base", "autocast", "control", "activation_dtype",
                 "passed", "max_error", "first_failing_position", "error"],
    "additionalProperties": False,
    "properties": {
        "module_dtype": {"enum": ["float16", "bfloat16", "float32"]},
        "cast_back": {"type": "boolean"},
        "head_dim": {"type": "integer"},
        "base": {"type": "number"},
        "autocast": {"enum": ["off", "cpu-bf16", "cpu-fp16", "cuda-bf16", "cuda-fp16"]},
        "control": {"type": "boolean"},
        "activation_dtype": {"enum": ["float16", "bfloat16", "float32"]},
        "passed": {"type": "boolean"},
        "max_error": {"type": ["number", "null"]},
        "first_failing_position": {"type": ["integer", "null"]},
        "error": {"type": ["string", "null"]},
    },
}
REPORT_SCHEMA = {
    "type": "object",
    "required": ["symbol", "passed", "total", "cases"],
    "additionalProperties": False,
    "properties": {
        "symbol": {"type": "string"},
        "passed": {"type": "integer", "minimum": 0},
        "total": {"type": "integer", "minimum": 0},
        "cases": {"type": "array", "items": CASE_SCHEMA},
        "error": {"type": "string"},
        "checks": {"type": "array", "items": {
            "type": "object", "required": ["name", "passed", "detail"],
            "properties": {"name": {"enum": ["export", "meta"]},
                           "passed": {"type": ["boolean", "null"]},
                           "detail": {"type": "string"}}}},
    },
}


def _invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(probe, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_cli_text_table_and_verdict() -> None:
    code, out, _ = _invoke(f"{MODULES / 'f_float32_recompute.py'}::Float32RotaryEmbedding",
                           "--autocast", CPU)
    assert code == 0
    for column in ("case", "output dtype", "max error", "first failing position", "result"):
        assert column in out
    assert "24/24 cases pass (controls 6/6)" in out


def test_cli_json_schema_and_exit_one() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    code, out, _ = _invoke(f"{MODULES / 'c_elementwise_buffer.py'}::ConfigRotaryEmbedding",
                           "--autocast", CPU, "--format", "json")
    assert code == 1
    data = json.loads(out)
    jsonschema.validate(data, REPORT_SCHEMA)
    assert (data["passed"], data["total"], len(data["cases"])) == (0, 24, 30)
    assert sum(c["passed"] for c in data["cases"] if c["control"]) == 6


def test_cli_several_symbols_give_an_array() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    file = MODULES / "h_rope_cache.py"
    code, out, _ = _invoke(f"{file}::build_rope_cache", f"{file}::build_rope_cache_fixed",
                           "--autocast", "off", "--positions", "0-3000:3", "--format", "json")
    assert code == 1
    data = json.loads(out)
    jsonschema.validate(data, {"type": "array", "items": REPORT_SCHEMA})
    assert [(d["passed"], d["total"]) for d in data] == [(4, 8), (8, 8)]


def test_cli_path_without_symbol_probes_the_rotary_symbols() -> None:
    code, out, _ = _invoke(str(MODULES / "i_positions_to_x_dtype.py"), "--autocast", "off",
                           "--format", "json")
    data = json.loads(out)
    assert code == 1
    assert data["symbol"].endswith("::PositionCastRotary")


def test_cli_exit_two_when_it_cannot_build(odd_file: Path) -> None:
    code, out, err = _invoke(f"{odd_file}::OddRotary", "--format", "json")
    assert code == 2
    data = json.loads(out)
    assert data["cases"] == [] and "--init" in data["error"]
    assert "cannot build or call" in err


def test_cli_init_and_call_options(odd_file: Path) -> None:
    code, out, _ = _invoke(f"{odd_file}::OddRotary", "--init", "size={head_dim},freq={base}",
                           "--call", "scale=1.0,ids={positions_1d},extra=None",
                           "--autocast", "off", "--positions", "0-200")
    assert code == 0, out
    assert "8/8 cases pass (controls 2/2)" in out


def test_cli_missing_file_and_symbol(tmp_path: Path) -> None:
    assert _invoke(f"{tmp_path / 'none.py'}::X")[0] == 2
    assert _invoke(f"{MODULES / 'h_rope_cache.py'}::nothing_here")[0] == 2


def test_cli_bad_option_values_are_usage_errors() -> None:
    target = f"{MODULES / 'h_rope_cache.py'}::build_rope_cache"
    assert _invoke(target, "--positions", "9-1")[0] == 2
    assert _invoke(target, "--head-dims", "63")[0] == 2
    assert _invoke(target, "--autocast", "tpu-bf16")[0] == 2


def test_cli_without_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` raise ImportError
    code, out, err = _invoke(f"{MODULES / 'h_rope_cache.py'}::build_rope_cache")
    assert code == 2
    assert err.strip() == TORCH_MISSING
    assert out == ""


def test_cli_help_warns_that_probing_runs_the_file() -> None:
    code, out, _ = _invoke("--help")
    assert code == 0
    assert "runs its code" in out


def test_importing_the_command_does_not_import_torch() -> None:
    code = ("import sys, ropelint.probe, ropelint.probe.command; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


# --- loading ----------------------------------------------------------------------------


def test_split_target() -> None:
    assert split_target("a/b.py::Rotary") == ("a/b.py", "Rotary")
    assert split_target("a/b.py") == ("a/b.py", None)
    assert split_target("c:/x.py::Outer.Inner") == ("c:/x.py", "Outer.Inner")


def test_heuristic_symbols(tmp_path: Path) -> None:
    path = tmp_path / "model.py"
    path.write_text(textwrap.dedent(
        """
        import torch
        from torch import nn

        def rotate_half(x): ...
        def apply_rotary_pos_emb(q, k, cos, sin, position_ids=None): ...
        def _rope_init(dim, base): ...
        def precompute_freqs_cis(dim, end, theta=10000.0): ...
        def make_table(seq_len, dim):
            inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
        class MyRoPE(nn.Module):
            def forward(self, x, position_ids): ...
        class Attention(nn.Module):
            def forward(self, x): ...
        class PropertyHolder(nn.Module):
            def forward(self, x): ...
        class RopeConfig:
            theta = 1e4
        """
    ))
    assert heuristic_symbols(str(path)) == ["precompute_freqs_cis", "make_table", "MyRoPE"]


# --- held-out-style modules against an independent reference probe ------------------------
#
# tests/probe_modules j..v hold rotaries in the constructor and call shapes real code uses,
# each buggy and correct. The harness below is a second, hand-written probe: it knows how to
# build, call and read each of them explicitly, runs the 24 matrix cases of ROPE_NOTES
# section 4 against its own float64 reference and tolerance, and counts passes. It shares no
# code with ropelint.probe; `ropelint probe --format json` must report the same count.

# Where bfloat16 (257) and float16 (2049) positions break, and the bfloat16 collapse at 8192;
# short enough that targets building a table for 0..N-1 stay cheap. (The full default matrix
# gives the same counts for these modules; it is slower.)
HELD_OUT_POSITIONS = "0-300,1000,2040-2060,4097,8184-8195"


def _ref_positions() -> torch.Tensor:
    picked = {*range(301), 1000, *range(2040, 2061), 4097, *range(8184, 8196)}
    return torch.tensor(sorted(picked), dtype=torch.long)


def _ref_load(file: str) -> object:
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"_reference_{Path(file).stem}",
                                                  MODULES / file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _ref_phase(positions: torch.Tensor, dim: int, base: float, layout: str) -> torch.Tensor:
    inv = torch.tensor([base ** (-i / dim) for i in range(0, dim, 2)], dtype=torch.float64)
    phase = positions.double()[:, None] * inv[None, :]
    if layout == "half":
        return torch.cat([phase, phase], dim=1)
    if layout == "interleaved":
        return torch.stack([phase, phase], dim=2).reshape(phase.shape[0], -1)
    return phase


def _ref_allowed(ref: torch.Tensor, positions: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    allowed = (2.0 * (positions.double() + 1.0) * 2.0**-24 + 2.0**-23)[:, None]
    if dtype in (torch.float16, torch.bfloat16):
        info = torch.finfo(dtype)
        magnitude = ref.abs()
        exponent = torch.floor(torch.log2(magnitude.clamp_min(info.tiny)))
        allowed = allowed + torch.where(magnitude < info.tiny, info.tiny * info.eps,
                                        torch.pow(2.0, exponent) * info.eps)
    return allowed


def _ref_ok(kind: str, first: torch.Tensor, second: torch.Tensor | None, dtype: torch.dtype,
            layout: str, positions: torch.Tensor, dim: int, base: float) -> bool:
    phase = _ref_phase(positions, dim, base, layout)
    first = first.detach().double()
    if first.shape != phase.shape:
        return False
    if kind == "phase":
        diff = torch.remainder(first - phase + math.pi, 2 * math.pi) - math.pi
        bound = (2.0 * (positions.double() + 1.0) * 2.0**-24 + 2.0**-23)[:, None]
        return bool((diff.abs() < bound).all())
    assert second is not None
    for got, want in ((first, phase.cos()), (second.detach().double(), phase.sin())):
        if not bool(((got - want).abs() < _ref_allowed(want, positions, dtype)).all()):
            return False  # NaN compares false: a NaN fails here too
    return True


def _basis(dim: int, pairs: str, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """Ones in the first channel of every rotated pair: the rotation returns cos and sin."""
    row = torch.zeros(dim, dtype=dtype)
    if pairs == "half":
        row[: dim // 2] = 1
    else:
        row[0::2] = 1
    return row.expand(shape).contiguous()


def _rows(t: torch.Tensor, width: int) -> torch.Tensor:
    return t.reshape(-1, width)


# Each entry: file, symbols, then make(target, dim, base, length, loaded file) -> module
# (None: a function), run(callable, dim, base, dtype, positions, length) -> output, and
# read(output, positions, dim) -> (kind, cos-or-phase [P, W], sin or None, layout).
def _pos2(p: torch.Tensor) -> torch.Tensor:
    return p[None, :]


def _x(p: torch.Tensor, d: int, dt: torch.dtype) -> torch.Tensor:
    return torch.zeros(1, p.shape[0], d, dtype=dt)


def _pair(out, p, d, layout="half"):  # type: ignore[no-untyped-def]
    width = d // 2 if layout == "plain" else d
    return "trig", _rows(out[0], width), _rows(out[1], width), layout, out[0].dtype


REFERENCE_SPECS = {
    "j": (
        "j_positional_only.py", ("PosOnlyBufferRotary", "PosOnlyRotary"),
        lambda cls, d, b, n, mod: cls(d, b),
        lambda m, d, b, dt, p, n: m(_x(p, d, dt), _pos2(p)),
        _pair,
    ),
    "k": (
        "k_keyword_only.py", ("KwOnlyStackedPositionCast", "KwOnlyStacked"),
        lambda cls, d, b, n, mod: cls(rotary_dim=d, theta=b),
        lambda m, d, b, dt, p, n: m(_x(p, d, dt), positions=p),
        lambda out, p, d: ("trig", _rows(out[0], d), _rows(out[1], d), "half", out.dtype),
    ),
    "l": (
        "l_megatron_phase.py", ("LegacyPhaseRotary", "CorePhaseRotary"),
        lambda cls, d, b, n, mod: cls(d, rotary_base=b),
        lambda m, d, b, dt, p, n: m(n),
        lambda out, p, d: ("phase", _rows(out, d)[p], None, "half", out.dtype),
    ),
    "m": (
        "m_litgpt_tuple.py", ("rope_cache_in_dtype", "rope_cache"),
        lambda fn, d, b, n, mod: None,
        lambda fn, d, b, dt, p, n: fn(n, d, dt, base=b),
        lambda out, p, d: ("trig", out[0][p], out[1][p], "half", out[0].dtype),
    ),
    "n": (
        "n_config_objects.py", ("ConfigMatmulRotary", "ConfigRotary"),
        lambda cls, d, b, n, mod: cls(
            mod.TinyConfig(hidden_size=d, num_attention_heads=1, partial_rotary_factor=1.0,
                           rope_theta=b)
            if cls.__name__ == "ConfigMatmulRotary" else
            types.SimpleNamespace(hidden_size=d, num_attention_heads=1, rope_theta=b)),
        lambda m, d, b, dt, p, n: m(_x(p, d, dt), _pos2(p)),
        _pair,
    ),
    "o": (
        "o_complex_class.py", ("ComplexBufferFreqRotary", "ComplexRotary"),
        lambda cls, d, b, n, mod: cls(d, rope_theta=b),
        lambda m, d, b, dt, p, n: m(_pos2(p)),
        lambda out, p, d: ("trig", _rows(out.real, d // 2), _rows(out.imag, d // 2), "plain",
                           out.dtype),
    ),
    "p": (
        "p_rotate_interleaved.py", ("InterleavedApplyBuffer", "InterleavedApply"),
        lambda cls, d, b, n, mod: cls(d, base=b),
        lambda m, d, b, dt, p, n: m(_basis(d, "interleaved", (1, p.shape[0], 1, d), dt),
                                 _basis(d, "interleaved", (1, p.shape[0], 1, d), dt), _pos2(p)),
        lambda out, p, d: ("trig", _rows(out[0], d)[:, 0::2], _rows(out[0], d)[:, 1::2],
                           "plain", out[0].dtype),
    ),
    "q": (
        "q_rotate_half_cached.py", ("CachedApplyRotary", "RecomputeApplyRotary"),
        lambda cls, d, b, n, mod: cls(d, rope_theta=b),
        lambda m, d, b, dt, p, n: m(_basis(d, "half", (1, 1, n, d), dt),
                                 _basis(d, "half", (1, 1, n, d), dt)),
        lambda out, p, d: ("trig", _rows(out[0], d)[p, : d // 2], _rows(out[0], d)[p, d // 2:],
                           "plain", out[0].dtype),
    ),
    "r": (
        "r_leading_dims_theta.py", ("PhaseDowncastRotary", "ThetaRotary"),
        lambda cls, d, b, n, mod: cls(d, theta=b),
        lambda m, d, b, dt, p, n: m(torch.zeros(1, p.shape[0], 1, d, dtype=dt), _pos2(p)),
        _pair,
    ),
    "s": (
        "s_width_heads.py", ("ParamFreqRotary", "WidthHeadsRotary"),
        lambda cls, d, b, n, mod: cls(d * 4, 4, rope_theta=b),
        lambda m, d, b, dt, p, n: m(_x(p, d, dt), _pos2(p)),
        lambda out, p, d: ("trig", _rows(out[..., 0], d // 2), _rows(out[..., 1], d // 2),
                           "plain", out.dtype),
    ),
    "t": (
        "t_function_concat.py", ("rope_table_in_dtype", "rope_table"),
        lambda fn, d, b, n, mod: None,
        lambda fn, d, b, dt, p, n: fn(p, d, b, dt),
        lambda out, p, d: ("trig", out[:, : d // 2], out[:, d // 2:], "plain", out.dtype),
    ),
    "u": (
        "u_partial_factor.py", ("PartialNeoXRotary", "PartialRotary"),
        lambda cls, d, b, n, mod: cls(d, partial_rotary_factor=1.0, rotary_emb_base=b),
        lambda m, d, b, dt, p, n: m(torch.zeros(1, n, d, dtype=dt), n),
        lambda out, p, d: ("trig", out[0][p], out[1][p], "half", out[0].dtype),
    ),
    "v": (
        "v_dict_config.py", ("DictConfigBufferRotary", "DictConfigRotary"),
        lambda cls, d, b, n, mod: cls({"head_dim": d, "rope_theta": b}),
        lambda m, d, b, dt, p, n: m(_x(p, d, dt), p),
        lambda out, p, d: ("trig", out[1], out[0], "half", out[0].dtype),
    ),
    # Scaled rotaries, built with their scaling switched off (see w_scaled.py).
    "w_llama3": (
        "w_scaled.py", ("Llama3BufferRotary", "Llama3Rotary"),
        lambda cls, d, b, n, mod: cls(d, base=b, scale_factor=1.0),
        lambda m, d, b, dt, p, n: m(_x(p, d, dt), _pos2(p)),
        _pair,
    ),
    "w_yarn": (
        "w_scaled.py", ("YarnBufferRotary", "YarnRotary"),
        lambda cls, d, b, n, mod: cls(d, base=b, scaling_factor=1.0),
        lambda m, d, b, dt, p, n: m(_x(p, d, dt), _pos2(p)),
        _pair,
    ),
    "w_longrope": (
        "w_scaled.py", ("LongRopeBufferRotary", "LongRopeRotary"),
        lambda cls, d, b, n, mod: cls(mod.LongRopeConfig(
            hidden_size=d, num_attention_heads=1, rope_theta=b, rope_scaling=None,
            max_position_embeddings=4096, original_max_position_embeddings=4096)),
        lambda m, d, b, dt, p, n: m(_x(p, d, dt), _pos2(p)),
        _pair,
    ),
    "w_ntk": (
        "w_scaled.py", ("DynamicNTKBufferRotary", "DynamicNTKRotary"),
        lambda cls, d, b, n, mod: cls(d, max_position_embeddings=n, base=b, scaling_factor=1.0),
        lambda m, d, b, dt, p, n: m(torch.zeros(1, n, d, dtype=dt), n),
        lambda out, p, d: ("trig", out[0][p], out[1][p], "half", out[0].dtype),
    ),
}
HELD_OUT = [(key, file, symbol) for key, (file, symbols, *_rest) in REFERENCE_SPECS.items()
            for symbol in symbols]


def reference_pass_count(key: str, symbol: str) -> int:
    """The 24 matrix cases, built, called and read by hand."""
    file, _, make, run, read_out = REFERENCE_SPECS[key]
    loaded = _ref_load(file)
    target = getattr(loaded, symbol)
    positions = _ref_positions()
    length = int(positions.max()) + 1
    passed = 0
    torch.set_num_threads(1)
    for module_dtype in (torch.float16, torch.bfloat16):
        for cast_back in (False, True):
            for dim, base in ((64, 1e4), (128, 5e5)):
                for autocast in (None, torch.bfloat16, torch.float16):
                    dtype = torch.float32 if cast_back else module_dtype
                    module = make(target, dim, base, length, loaded)
                    if module is not None:
                        module.to(module_dtype)
                        if cast_back:
                            module.float()
                    context = (torch.autocast("cpu", dtype=autocast) if autocast is not None
                               else contextlib.nullcontext())
                    try:
                        with torch.no_grad(), context:
                            out = run(module if module is not None else target, dim, base,
                                      dtype, positions, length)
                        kind, first, second, layout, out_dtype = read_out(out, positions, dim)
                    except Exception:  # raising is failing
                        kind = "raised"
                    if kind != "raised":
                        passed += _ref_ok(kind, first, second, out_dtype, layout, positions,
                                          dim, base)
    return passed


@functools.cache
def _cli_held_out(file: str) -> dict[str, dict]:
    """`ropelint probe --format json` on every held-out symbol of one file, in one run."""
    symbols = [s for f, ss, *_ in REFERENCE_SPECS.values() if f == file for s in ss]
    code, out, _ = _invoke(*(f"{MODULES / file}::{s}" for s in symbols), "--autocast", CPU,
                           "--positions", HELD_OUT_POSITIONS, "--format", "json")
    assert code in (0, 1), out
    data = json.loads(out)
    return {d["symbol"].rpartition("::")[2]: d for d in data}


# The pass counts the two probes must both give (a buggy and a correct module per file).
EXPECTED_HELD_OUT = {
    "PosOnlyBufferRotary": 0, "PosOnlyRotary": 24,
    "KwOnlyStackedPositionCast": 12, "KwOnlyStacked": 24,
    "LegacyPhaseRotary": 0, "CorePhaseRotary": 24,
    "rope_cache_in_dtype": 12, "rope_cache": 24,
    "ConfigMatmulRotary": 8, "ConfigRotary": 24,
    "ComplexBufferFreqRotary": 0, "ComplexRotary": 24,
    "InterleavedApplyBuffer": 0, "InterleavedApply": 24,
    "CachedApplyRotary": 0, "RecomputeApplyRotary": 24,
    "PhaseDowncastRotary": 12, "ThetaRotary": 24,
    "ParamFreqRotary": 0, "WidthHeadsRotary": 24,
    "rope_table_in_dtype": 12, "rope_table": 24,
    "PartialNeoXRotary": 0, "PartialRotary": 24,
    "DictConfigBufferRotary": 0, "DictConfigRotary": 24,
    "Llama3BufferRotary": 0, "Llama3Rotary": 24,
    "YarnBufferRotary": 0, "YarnRotary": 24,
    "LongRopeBufferRotary": 0, "LongRopeRotary": 24,
    "DynamicNTKBufferRotary": 0, "DynamicNTKRotary": 24,
}


@pytest.mark.parametrize("key,file,symbol", HELD_OUT, ids=[s for _, _, s in HELD_OUT])
def test_probe_agrees_with_the_independent_reference(key: str, file: str, symbol: str) -> None:
    data = _cli_held_out(file)[symbol]
    assert "error" not in data, data.get("error")
    assert data["total"] == 24
    expected = reference_pass_count(key, symbol)
    assert data["passed"] == expected
    assert expected == EXPECTED_HELD_OUT[symbol]  # the harness itself still sees the bug


def test_held_out_calls_are_read_the_right_way() -> None:
    """Discovery alone (cheap): how each awkward shape is built, called and read."""
    from ropelint.probe.invoke import discover

    def how(file: str, symbol: str) -> str:
        target = getattr(load_file(str(MODULES / file)), symbol)
        return discover(target, symbol, pair=(64, 1e4)).describe()

    assert "PosOnlyRotary({head_dim}, {base})" in how("j_positional_only.py", "PosOnlyRotary")
    assert "stack((cos, sin), 0)" in how("k_keyword_only.py", "KwOnlyStacked")
    legacy = how("l_megatron_phase.py", "LegacyPhaseRotary")
    assert "forward(max_seq_len={seq_len})" in legacy and "the phase, half-split" in legacy
    assert "TinyConfig() overlaid" in how("n_config_objects.py", "ConfigMatmulRotary")
    assert "config: ProbeConfig" in how("n_config_objects.py", "ConfigRotary")
    interleaved = how("p_rotate_interleaved.py", "InterleavedApply")
    assert "activation rotated" in interleaved and "interleaved pairs" in interleaved
    rotate_half = how("q_rotate_half_cached.py", "RecomputeApplyRotary")
    assert "rotate-half pairs" in rotate_half and "forward(q={x}, k={x})" in rotate_half
    assert "stack((cos, sin), -1), one column" in how("s_width_heads.py", "WidthHeadsRotary")
    assert "num_heads=1" in how("s_width_heads.py", "WidthHeadsRotary")
    assert "partial_rotary_factor=1.0" in how("u_partial_factor.py", "PartialRotary")
    assert "(sin, cos)" in how("v_dict_config.py", "DictConfigRotary")
    assert "scale_factor=1.0" in how("w_scaled.py", "Llama3Rotary")
    assert "raised to cover every probed position" in how("w_scaled.py", "DynamicNTKRotary")
    assert "per-layer-type" in how("x_layer_types.py", "LayerTypeRotary")


def test_per_layer_type_config() -> None:
    module = load_file(str(MODULES / "x_layer_types.py"))
    report = run_matrix(module.LayerTypeRotary, positions=range(0, 600, 3),
                        autocasts=CPU_AUTOCASTS)
    assert (report.passed, report.controls_passed) == (24, 6)


def test_config_overlay_switches_scaling_off() -> None:
    from dataclasses import dataclass, field

    from ropelint.probe.config import ProbeConfig, build_annotated, neutral_rope_dict

    flat = neutral_rope_dict({"rope_type": "llama3", "factor": 8.0, "rope_theta": 5e5,
                              "low_freq_factor": 1.0, "high_freq_factor": 4.0}, 64, 1e4, None)
    assert flat == {"rope_type": "default", "factor": 1.0, "rope_theta": 1e4,
                    "low_freq_factor": 1.0, "high_freq_factor": 4.0}
    layered = neutral_rope_dict({"full": {"rope_theta": 1e6, "factor": 8.0},
                                 "sliding": {"rope_theta": 1e4}}, 64, 5e5, None)
    assert layered == {"full": {"rope_theta": 5e5, "factor": 1.0}, "sliding": {"rope_theta": 5e5}}

    @dataclass(frozen=True)
    class Frozen:
        hidden_size: int = 512
        num_attention_heads: int = 8
        rope_theta: float = 1e6
        partial_rotary_factor: float = 0.5
        max_position_embeddings: int = 131072
        original_max_position_embeddings: int = 4096
        short_factor: list = field(default_factory=lambda: [2.0] * 4)
        rope_scaling: dict = field(default_factory=lambda: {"type": "yarn", "factor": 4.0})

    built = build_annotated(Frozen, 64, 1e4, None)
    assert (built.hidden_size // built.num_attention_heads, built.rope_theta) == (64, 1e4)

    @dataclass
    class ConformerConfig:  # wav2vec2-conformer's name for the base
        hidden_size: int = 1024
        num_attention_heads: int = 16
        rotary_embedding_base: int = 10000

    assert build_annotated(ConformerConfig, 128, 5e5, None).rotary_embedding_base == 5e5
    assert built.partial_rotary_factor == 1.0 and built.short_factor == [1.0] * 32
    assert built.rope_scaling == {"type": "default", "factor": 1.0}
    # Lengths keep their defaults unless raised; the extension ratio becomes 1.
    assert built.max_position_embeddings == built.original_max_position_embeddings == 131072
    assert build_annotated(Frozen, 64, 1e4, 9000).max_position_embeddings == 9000

    config = ProbeConfig(128, 5e5)
    assert config["rope_theta"] == config.get("rope_theta") == 5e5 and "head_dim" in config
    assert config.hidden_size // config.num_attention_heads == config.dim == 128
    assert getattr(config, "no_such_field", "own default") == "own default"
    with pytest.raises(KeyError):
        config["no_such_field"]


def _inline(tmp_path: Path, source: str) -> object:
    path = tmp_path / "inline_rotary.py"
    path.write_text(textwrap.dedent(source))
    return load_file(str(path))


def test_hard_coded_base_is_found_and_pins_every_case(tmp_path: Path) -> None:
    module = _inline(tmp_path, """
        import torch
        from torch import nn

        class FixedBase(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.dim = dim

            def forward(self, x, position_ids):
                steps = torch.arange(0, self.dim, 2, dtype=torch.float32) / self.dim
                angles = position_ids[..., None].float() * (1.0 / 10000.0 ** steps)
                emb = torch.cat((angles, angles), dim=-1)
                return emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        """)
    report = run_matrix(module.FixedBase, positions=range(0, 3000, 7), autocasts=CPU_AUTOCASTS)
    assert (report.passed, report.total) == (24, 24)
    assert {(r.case.head_dim, r.case.base) for r in report.cases} == {(64, 1e4), (128, 1e4)}
    assert "base 10000 fixed in the code" in report.how


DIAGNOSED = {
    "multi-axis": ("""
        import torch
        from torch import nn

        class Grid2D(nn.Module):
            def __init__(self, head_dim, theta=10000.0, side=4096):
                super().__init__()
                self.head_dim, self.theta, self.side = head_dim, theta, side

            def forward(self, patch_ids):
                inv = 1.0 / self.theta ** (torch.arange(0, self.head_dim, 2).float()
                                           / self.head_dim)
                rows = (patch_ids // self.side).float()[..., None] * inv[::2]
                cols = (patch_ids % self.side).float()[..., None] * inv[1::2]
                angles = torch.cat((rows, cols), dim=-1)
                return angles.cos(), angles.sin()
        """, "multi-axis (2-D/3-D) rotary"),
    "amplitude": ("""
        import torch
        from torch import nn

        class Magnified(nn.Module):
            def __init__(self, dim, base=10000.0):
                super().__init__()
                self.dim, self.base, self.mag = dim, base, 1.25

            def forward(self, position_ids):
                inv = 1.0 / self.base ** (torch.arange(0, self.dim, 2).float() / self.dim)
                angles = position_ids.float()[..., None] * inv
                return angles.cos() * self.mag, angles.sin() * self.mag
        """, "carry a factor of 1.25"),
    "not rotary": ("""
        import torch
        from torch import nn

        class Mixer(nn.Module):
            def __init__(self, dim, base=10000.0):
                super().__init__()
                torch.manual_seed(0)
                self.proj = nn.Linear(dim, dim)

            def forward(self, x, position_ids):
                return self.proj(x) + position_ids[..., None].float()
        """, "holds learned layers (proj): it is not a rotary module"),
    "short table": ("""
        import torch
        from torch import nn

        class ShortTable(nn.Module):
            def __init__(self, dim, base=10000.0, table_rows=300):
                super().__init__()
                inv = 1.0 / base ** (torch.arange(0, dim, 2).float() / dim)
                angles = torch.outer(torch.arange(table_rows).float(), inv)
                self.table = torch.cat((angles, angles), dim=-1)

            def forward(self, position_ids):
                return self.table[position_ids].cos(), self.table[position_ids].sin()
        """, "works for positions below 64"),
}


@pytest.mark.parametrize("kind", list(DIAGNOSED))
def test_outputs_that_are_not_the_reference_rotary_are_explained(tmp_path: Path,
                                                                  kind: str) -> None:
    source, phrase = DIAGNOSED[kind]
    module = _inline(tmp_path, source)
    target = next(v for k, v in vars(module).items()
                  if isinstance(v, type) and issubclass(v, torch.nn.Module)
                  and v.__module__ == module.__name__)
    with pytest.raises(ProbeSetupError) as info:
        run_matrix(target, positions=range(0, 5000, 7), autocasts=["off"])
    assert phrase in str(info.value)


def test_wrong_frequencies_are_measured_and_explained(tmp_path: Path) -> None:
    """A 1-D rotary with the wrong frequencies is still a rotary: measured, every case and
    control failing, with the mismatch named (an independent probe scores it 0 too)."""
    module = _inline(tmp_path, """
        import torch
        from torch import nn

        class HalvedFrequencies(nn.Module):
            def __init__(self, dim, base=10000.0):
                super().__init__()
                self.dim, self.base = dim, base

            def forward(self, x, position_ids):
                steps = torch.arange(0, self.dim, 2, dtype=torch.float32) / self.dim
                angles = position_ids[..., None].float() * 0.5 / self.base**steps
                emb = torch.cat((angles, angles), dim=-1)
                return emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        """)
    report = run_matrix(module.HalvedFrequencies, positions=range(0, 3000, 7),
                        autocasts=CPU_AUTOCASTS)
    assert (report.passed, report.total, report.controls_passed) == (0, 24, 0)
    assert "wrong even in float32" in report.how
    assert "frequencies are not the reference's" in report.how


def test_default_lengths_first_raised_only_when_they_cannot_serve() -> None:
    """A cache that regrows keeps its default length (its regrowth is what the cases
    measure); a table too short for the probed positions gets a longer one."""
    cached = report_for("a_cached_tables.py", "CachedRotaryEmbedding")
    assert "max_position_embeddings" not in cached.how
    scaled = load_file(str(MODULES / "w_scaled.py"))
    invocation = run_matrix(scaled.DynamicNTKRotary, positions=range(0, 5000, 7),
                            autocasts=["off"])
    assert "max_position_embeddings={max_positions}" in invocation.how
    assert invocation.ok


# --- the repository's fixture corpus --------------------------------------------------------

FIXTURES = REPO / "fixtures" / "cases"
FIXTURE_POSITIONS = tuple(sorted({*range(300), 2049, 4097, *range(8186, 8196)}))
# (file, symbol): (cases passed of 8 with autocast off, controls passed of 2, words in `how`)
FIXTURE_EXPECTATIONS = {
    ("nn_buffer_style.py", "RotaryEmbedding"): (0, 2, "activation rotated"),
    ("megatron_lm_legacy_buffer.py", "RotaryEmbedding"): (0, 2, "forward(max_seq_len={seq_len})"),
    ("gpt_neox_einsum.py", "RotaryEmbedding"): (0, 2, "forward(x={x}, seq_len={seq_len})"),
    ("llama3_piecewise_scaling.py", "Llama3ScaledRoPE"): (4, 2, "scale_factor=1.0"),
    ("per_layer_type_buffers.py", "Gemma3RotaryEmbedding"): (0, 2, "Gemma3TextConfig()"),
    ("per_layer_type_buffers.py", "Gemma3PlainAttributeRotaryEmbedding"): (8, 2, "layer_type"),
    ("default_dtype_inv_freq.py", "rope_angles_like"): (4, 2, "x={x}, positions="),
    ("gptj_interleaved.py", "create_sinusoidal_positions"): (8, 2, "cat((sin, cos), -1)"),
    ("longrope_factors.py", "Phi3LongRoPEScaledRotaryEmbedding"): (0, 2, "Phi3Config()"),
    ("hf_elementwise_buffer_5x.py", "QwenRotaryEmbedding"): (0, 2, "QwenConfig()"),
}


@pytest.mark.parametrize("file,symbol", list(FIXTURE_EXPECTATIONS),
                         ids=[f"{f}::{s}" for f, s in FIXTURE_EXPECTATIONS])
def test_fixture_corpus_builds_calls_and_reads(file: str, symbol: str) -> None:
    path = FIXTURES / file
    if not path.is_file():
        pytest.skip(f"{path} is not in this checkout")
    passed, controls, words = FIXTURE_EXPECTATIONS[(file, symbol)]
    target = resolve_symbol(load_file(str(path)), symbol, str(path))
    report = run_matrix(target, positions=FIXTURE_POSITIONS, autocasts=["off"])
    assert (report.passed, report.controls_passed) == (passed, controls), report.how
    assert words in report.how
    assert "wrong even in float32" not in report.how


@pytest.mark.parametrize("file,symbol,phrase", [
    ("torchtitan_freqs_cis_buffer.py", "VisionRotary2D", "multi-axis"),
    ("video_3d_rope.py", "RotaryPosEmbed3D", "could not call"),
])
def test_fixture_multi_axis_rotaries_are_refused_clearly(file: str, symbol: str,
                                                         phrase: str) -> None:
    path = FIXTURES / file
    if not path.is_file():
        pytest.skip(f"{path} is not in this checkout")
    target = resolve_symbol(load_file(str(path)), symbol, str(path))
    with pytest.raises(ProbeSetupError) as info:
        run_matrix(target, positions=FIXTURE_POSITIONS, autocasts=["off"])
    assert phrase in str(info.value)


def test_warm_up_catches_state_built_on_the_first_forward() -> None:
    """A Gemma-style module fills its `inv_freq` buffer on the first forward: converted cold, the buffer
    is built after the cast (float32, all cases pass); used once before `.half()` it is rounded too."""
    path = str(Path(__file__).resolve().parent.parent / "fixtures" / "cases" / "lazy_inv_freq_registration.py")
    args = [f"{path}::GemmaRotaryEmbedding", "--positions", "0-4096:97,32768", "--format", "json"]
    cold = CliRunner().invoke(probe, args)
    warm = CliRunner().invoke(probe, [*args, "--warm-up"])
    cold_doc, warm_doc = json.loads(cold.output), json.loads(warm.output)
    assert cold.exit_code == 0 and warm.exit_code == 1
    assert cold_doc["passed"] == 24 and warm_doc["passed"] < 24


ROTATE_HALF_CORRECT = """
import torch
from torch import nn


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class CorrectRotary(nn.Module):
    def __init__(self, dim, base=10000.0):
        super().__init__()
        self.dim, self.base = dim, base

    def forward(self, q, position_ids):
        inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2, dtype=torch.float32, device=q.device) / self.dim))
        freqs = position_ids.float()[..., None] * inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos()[:, :, None, :].to(q.dtype), emb.sin()[:, :, None, :].to(q.dtype)
        return q * cos + rotate_half(q) * sin
"""


def test_activations_in_the_autocast_dtype_avoid_the_mixed_dtype_autocast_error(tmp_path):
    """A correct rotate-half module: fed activations in the module's dtype, a float16 module under CPU
    bfloat16 autocast (and the reverse) raises in its own `torch.cat` of 16-bit halves. Those 4 cases are
    run again with activations in the autocast dtype, as autocast's linear layers produce them (the label
    and the JSON say so), and pass; asked for from the start, all 24 pass the same way."""
    path = tmp_path / "rotary.py"
    path.write_text(ROTATE_HALF_CORRECT)
    target = resolve_symbol(load_file(str(path)), "CorrectRotary", str(path))
    positions = list(range(0, 2000, 37))
    by_module = run_matrix(target, symbol="CorrectRotary", positions=positions)
    assert (by_module.passed, by_module.controls_passed) == (24, 6)
    retried = [c for c in by_module.cases if c.case.activations == "autocast"]
    assert {(c.case.module_dtype, c.case.autocast) for c in retried} == {("float16", "cpu-bf16"),
                                                                        ("bfloat16", "cpu-fp16")}
    assert len(retried) == 4 and all(c.case.label.endswith(" in") for c in retried)
    assert {c.to_json()["activation_dtype"] for c in retried} == {"bfloat16", "float16"}
    assert all(c.case.activations == "module" for c in by_module.cases if c not in retried)
    by_autocast = run_matrix(target, symbol="CorrectRotary", positions=positions, activations="autocast")
    assert (by_autocast.passed, by_autocast.controls_passed) == (24, 6)


@pytest.mark.skipif(torch.cuda.is_available() or not sys.platform.startswith("linux"),
                    reason="the cap is for CPU runs on Linux")
def test_the_probe_caps_its_address_space_below_the_physical_memory():
    """A module that allocates something quadratic in the probe's 131074 positions must fail inside the
    candidate loop, not take the machine's memory: the command caps the address space (CPU only)."""
    code = ("import os, resource; from ropelint.probe.command import cap_address_space, MEMORY_SHARE; "
            "cap = cap_address_space(); soft = resource.getrlimit(resource.RLIMIT_AS)[0]; "
            "total = os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES'); "
            "import torch; big = None\n"
            "try:\n    big = torch.empty(int(total * 0.9) // 4, dtype=torch.float32)\nexcept RuntimeError:\n    pass\n"
            "print(cap is not None, soft <= total * MEMORY_SHARE, big is None)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "True", "True"]


ENGINE = textwrap.dedent(
    """
    import torch
    from torch import nn


    class EngineRotary(nn.Module):
        def __init__(self, head_size: int, rotary_dim: int, max_position_embeddings: int, base: float,
                     is_neox_style: bool, dtype: torch.dtype):
            super().__init__()
            self.rotary_dim, self.is_neox_style = rotary_dim, is_neox_style
            inv_freq = 1.0 / base ** (torch.arange(0, rotary_dim, 2, dtype=torch.float32) / rotary_dim)
            angles = torch.arange(max_position_embeddings, dtype=torch.float32)[:, None] * inv_freq
            self.cos_sin_cache = torch.cat((angles.cos(), angles.sin()), dim=-1)

        def forward(self, positions, query):
            cos, sin = self.cos_sin_cache.to(positions.device)[positions].chunk(2, dim=-1)
            if self.is_neox_style:
                cos, sin = torch.cat((cos, cos), -1), torch.cat((sin, sin), -1)
            else:
                cos, sin = cos.repeat_interleave(2, -1), sin.repeat_interleave(2, -1)
            x1, x2 = query.float().chunk(2, dim=-1)
            return (query.float() * cos + torch.cat((-x2, x1), -1) * sin).to(query.dtype)
    """
)


def test_a_required_layout_switch_is_set_and_the_engine_rotary_is_probed(tmp_path: Path) -> None:
    """vLLM-style constructors require `is_neox_style` (and a build `dtype`): the probe sets the switch to True
    and reads the layout from the output, so the correct rotary passes the narrowed matrix."""
    path = tmp_path / "engine.py"
    path.write_text(ENGINE)
    module = load_file(str(path))
    report = run_matrix(module.EngineRotary, positions=range(0, 600, 7), head_dims_bases=[(32, 1e4)],
                        autocasts=["off"])
    assert report.total == 4 and report.passed == 4 and "is_neox_style=True" in report.how
