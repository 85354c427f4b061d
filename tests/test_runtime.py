"""Behaviour of ropelint/runtime.py, the helper that fixed code calls.

Every value check compares with a float64 reference using the per-position tolerance from
ROPE_NOTES: ``2 * (pos + 1) * 2**-24 + 2**-23`` for float32 output. A correct float32
implementation measures about 1.34 * (pos + 1) * 2**-24, and each broken shape misses by
orders of magnitude, so the checks below can fail.
"""

from __future__ import annotations

import ast
import os
import shutil
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from ropelint import runtime  # noqa: E402
from ropelint.runtime import cos_sin, inv_freq, inv_freq_from, phase, rotary_cos_sin  # noqa: E402

PAIRS = [(64, 1e4), (128, 5e5)]
# Dense to 32769 (bfloat16 and float16 break well before), plus the far end near 2**17.
POSITIONS = torch.cat([torch.arange(0, 32770), torch.arange(131070, 131074)])


def reference_phase(positions: torch.Tensor, dim: int, base: float) -> torch.Tensor:
    exponents = torch.arange(0, dim, 2, dtype=torch.float64) / dim
    return positions.to(torch.float64)[..., None] * (1.0 / base**exponents)


def float32_tolerance(positions: torch.Tensor) -> torch.Tensor:
    """Per-position tolerance for float32 output, shape [S, 1] for broadcasting."""
    pos = positions.to(torch.float64)
    return (2.0 * (pos + 1.0) * 2.0**-24 + 2.0**-23)[..., None]


def worst_ratio(
    cos: torch.Tensor, sin: torch.Tensor, positions: torch.Tensor, dim: int, base: float
) -> float:
    """Largest error/tolerance over the table; below 1 passes. Expects half layout [S, dim]."""
    ref = reference_phase(positions, dim, base)
    ref = torch.cat((ref, ref), dim=-1)
    err = torch.maximum(
        (cos.to(torch.float64) - ref.cos()).abs(), (sin.to(torch.float64) - ref.sin()).abs()
    )
    return float((err / float32_tolerance(positions)).max())


# --- values -----------------------------------------------------------------------------


@pytest.mark.parametrize("dim,base", PAIRS)
def test_values_match_float64_reference(dim: int, base: float) -> None:
    cos, sin = rotary_cos_sin(POSITIONS, dim, base)
    assert cos.dtype == sin.dtype == torch.float32
    assert cos.shape == (POSITIONS.numel(), dim)
    assert worst_ratio(cos, sin, POSITIONS, dim, base) < 1.0


@pytest.mark.parametrize("autocast_dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("dim,base", PAIRS)
def test_autocast_keeps_float32(dim: int, base: float, autocast_dtype: torch.dtype) -> None:
    with torch.autocast("cpu", dtype=autocast_dtype):
        freqs = inv_freq(dim, base)
        angles = phase(POSITIONS, freqs)
        cos, sin = cos_sin(angles)
    assert freqs.dtype == angles.dtype == cos.dtype == sin.dtype == torch.float32
    assert worst_ratio(cos, sin, POSITIONS, dim, base) < 1.0


def test_tolerance_catches_a_matmul_phase_under_autocast() -> None:
    """The check above has teeth: the 4.40-era matmul phase under autocast fails it."""
    dim, base = 128, 5e5
    freqs = inv_freq(dim, base)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        bad = (freqs[:, None] @ POSITIONS[None, :].float()).transpose(0, 1).float()
    cos, sin = cos_sin(bad)
    assert worst_ratio(cos, sin, POSITIONS, dim, base) > 100.0


def test_inv_freq_is_float32_on_requested_device_whatever_the_default_dtype() -> None:
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        freqs = inv_freq(128, 5e5, device="meta")
    finally:
        torch.set_default_dtype(previous)
    assert freqs.dtype == torch.float32
    assert freqs.device.type == "meta"
    assert freqs.shape == (64,)


def test_inv_freq_values() -> None:
    freqs = inv_freq(128, 5e5)
    expected = 1.0 / 5e5 ** (torch.arange(0, 128, 2, dtype=torch.float64) / 128)
    rel = ((freqs.double() - expected) / expected).abs().max()
    assert freqs[0] == 1.0
    assert rel < 4 * 2.0**-24


@pytest.mark.parametrize("dim", [0, 7, -2])
def test_inv_freq_rejects_odd_or_empty_dim(dim: int) -> None:
    with pytest.raises(ValueError):
        inv_freq(dim, 1e4)


def test_phase_keeps_leading_batch_shape() -> None:
    positions = torch.tensor([[0, 1, 2], [5, 6, 7]])
    freqs = inv_freq(8, 1e4)
    angles = phase(positions, freqs)
    assert angles.shape == (2, 3, 4)
    assert angles.dtype == torch.float32
    assert torch.equal(angles[1, 2], 7.0 * freqs)


def test_layouts() -> None:
    angles = phase(torch.arange(5), inv_freq(8, 1e4))
    cos_h, sin_h = cos_sin(angles, layout="half")
    cos_i, sin_i = cos_sin(angles, layout="interleaved")
    assert torch.equal(cos_h[:, :4], cos_h[:, 4:])
    assert torch.equal(sin_i[:, 0::2], sin_i[:, 1::2])
    assert torch.equal(cos_h[:, :4], cos_i[:, 0::2])
    assert torch.equal(sin_h[:, :4], angles.sin())
    with pytest.raises(ValueError):
        cos_sin(angles, layout="rotate")  # type: ignore[arg-type]


def test_dtype_is_applied_last_and_scaling_multiplies() -> None:
    angles = phase(torch.arange(40000), inv_freq(64, 1e4))
    cos32, sin32 = cos_sin(angles, attention_scaling=0.5)
    cos16, sin16 = cos_sin(angles, attention_scaling=0.5, dtype=torch.bfloat16)
    assert cos16.dtype == torch.bfloat16
    # Rounding once at the end: bit-identical to casting the float32 result.
    assert torch.equal(cos16, cos32.to(torch.bfloat16))
    assert torch.equal(sin16, sin32.to(torch.bfloat16))
    plain, _ = cos_sin(angles)
    assert torch.allclose(cos32, 0.5 * plain, rtol=0, atol=1e-7)


def test_inv_freq_from_accepts_float32_and_float64_rejects_16_bit() -> None:
    def scaled(device: object) -> torch.Tensor:
        return inv_freq(64, 1e4, device=device) / 4.0  # linear scaling

    got = inv_freq_from(scaled, device="cpu")
    assert got.dtype == torch.float32
    assert torch.equal(got, inv_freq(64, 1e4) / 4.0)

    as64 = inv_freq_from(lambda device: torch.ones(4, dtype=torch.float64) / 3, device=None)
    assert as64.dtype == torch.float32

    with pytest.raises(TypeError, match="bfloat16"):
        inv_freq_from(lambda device: torch.ones(4, dtype=torch.bfloat16), device=None)
    with pytest.raises(TypeError):
        inv_freq_from(lambda device: torch.arange(4), device=None)


def test_freqs_cis_is_complex64_on_the_unit_circle() -> None:
    angles = phase(POSITIONS, inv_freq(128, 5e5))
    rot = runtime.freqs_cis(angles)
    assert rot.dtype == torch.complex64
    ref = reference_phase(POSITIONS, 128, 5e5)
    err = torch.maximum(
        (rot.real.double() - ref.cos()).abs(), (rot.imag.double() - ref.sin()).abs()
    )
    assert float((err / float32_tolerance(POSITIONS)).max()) < 1.0


def test_runtime_imports_only_torch_and_stdlib() -> None:
    """The file is vendored on its own: no ropelint imports, no autocast, no matmul."""
    source = Path(runtime.__file__).read_text()
    tree = ast.parse(source)
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
        assert not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult))
        name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", None)
        assert name not in {"autocast", "matmul", "einsum", "bmm", "mm", "outer", "tensordot"}
    assert imported - set(sys.stdlib_module_names) == {"torch"}


# --- modules using the helper: export, compile, meta -----------------------------------


class HelperRotary(nn.Module):
    """Minimal rotary module built on the helper: tables in the activation dtype."""

    def __init__(self, dim: int, base: float) -> None:
        super().__init__()
        self.dim = dim
        self.base = base

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return rotary_cos_sin(position_ids, self.dim, self.base, dtype=x.dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


class TinyQuery(nn.Module):
    """A query projection followed by rotary: has real state to load, plus the helper."""

    def __init__(self, hidden: int = 32, heads: int = 2, base: float = 5e5) -> None:
        super().__init__()
        self.heads = heads
        self.head_dim = hidden // heads
        self.base = base
        self.q_proj = nn.Linear(hidden, hidden, bias=False)

    def forward(self, hidden: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = hidden.shape
        q = self.q_proj(hidden).view(batch, seq, self.heads, self.head_dim).transpose(1, 2)
        cos, sin = rotary_cos_sin(position_ids, self.head_dim, self.base, dtype=q.dtype)
        cos, sin = cos[:, None], sin[:, None]
        return q * cos + rotate_half(q) * sin


class BufferQuery(TinyQuery):
    """The pre-fix shape: non-persistent inv_freq buffer (used to show the meta test bites)."""

    def __init__(self, hidden: int = 32, heads: int = 2, base: float = 5e5) -> None:
        super().__init__(hidden, heads, base)
        self.register_buffer("inv_freq", inv_freq(self.head_dim, base), persistent=False)

    def forward(self, hidden: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = hidden.shape
        q = self.q_proj(hidden).view(batch, seq, self.heads, self.head_dim).transpose(1, 2)
        cos, sin = cos_sin(phase(position_ids, self.inv_freq), dtype=q.dtype)
        cos, sin = cos[:, None], sin[:, None]
        return q * cos + rotate_half(q) * sin


def test_export_with_dynamic_sequence_length() -> None:
    module = HelperRotary(128, 5e5)
    seq = torch.export.Dim("seq", min=2, max=1 << 18)
    x = torch.zeros(1, 16, 128)
    positions = torch.arange(16)[None]
    program = torch.export.export(
        module, (x, positions), dynamic_shapes={"x": {1: seq}, "position_ids": {1: seq}}
    )
    code = program.graph_module.code
    assert "autocast" not in code
    assert len(program.constants) == 0  # nothing precomputed was baked in
    # Run at a length the trace never saw, including the far positions.
    long_positions = torch.cat([torch.arange(0, 4096), torch.arange(131070, 131074)])[None]
    long_x = torch.zeros(1, long_positions.shape[1], 128)
    got_cos, got_sin = program.module()(long_x, long_positions)
    want_cos, want_sin = module(long_x, long_positions)
    assert got_cos.shape == (1, long_positions.shape[1], 128)
    assert torch.allclose(got_cos, want_cos, rtol=0, atol=1e-6)
    assert torch.allclose(got_sin, want_sin, rtol=0, atol=1e-6)
    assert worst_ratio(got_cos[0], got_sin[0], long_positions[0], 128, 5e5) < 1.0


def _compile_unavailable() -> str | None:
    if os.environ.get("ROPELINT_SKIP_COMPILE"):
        return "ROPELINT_SKIP_COMPILE is set"
    if not hasattr(torch, "compile"):
        return "torch.compile is missing"
    if not (shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")):
        return "inductor needs a C compiler"
    return None


@pytest.mark.compile
@pytest.mark.skipif(_compile_unavailable() is not None, reason=str(_compile_unavailable()))
def test_compile_fullgraph_matches_eager() -> None:
    """Cold inductor compile of this graph took ~15 s on a 2-core CPU, ~6 s warm."""
    torch._dynamo.reset()
    module = HelperRotary(64, 1e4)
    compiled = torch.compile(module, fullgraph=True, dynamic=False)
    positions = torch.cat([torch.arange(0, 1024), torch.arange(131070, 131074)])[None]
    x = torch.zeros(1, positions.shape[1], 64)
    got_cos, got_sin = compiled(x, positions)
    want_cos, want_sin = module(x, positions)
    # Notes measured 1.2e-7; inductor may fuse and reorder, 1e-6 leaves room, 1e-3 would not.
    assert float((got_cos - want_cos).abs().max()) <= 1e-6
    assert float((got_sin - want_sin).abs().max()) <= 1e-6
    assert worst_ratio(got_cos[0], got_sin[0], positions[0], 64, 1e4) < 1.0


def test_meta_forward_builds_shapes() -> None:
    with torch.device("meta"):
        module = TinyQuery()
        hidden = torch.empty(2, 7, 32)
        positions = torch.arange(7).expand(2, 7)
    out = module(hidden, positions)
    assert out.device.type == "meta"
    assert out.shape == (2, 2, 7, 16)


def _load_through_meta(cls: type[TinyQuery], reference: TinyQuery) -> TinyQuery:
    with torch.device("meta"):
        module = cls()
    module = module.to_empty(device="cpu")
    # to_empty leaves memory uninitialised; poison it so anything load_state_dict
    # does not restore is visibly wrong instead of wrong only by chance.
    with torch.no_grad():
        for tensor in [*module.parameters(), *module.buffers()]:
            tensor.fill_(float("nan"))
    module.load_state_dict(reference.state_dict())
    return module


def test_meta_to_empty_load_state_dict_gives_correct_values() -> None:
    torch.manual_seed(0)
    reference = TinyQuery()
    loaded = _load_through_meta(TinyQuery, reference)
    positions = torch.cat([torch.arange(0, 64), torch.arange(131070, 131074)])[None]
    hidden = torch.randn(1, positions.shape[1], 32)
    got = loaded(hidden, positions)
    assert torch.isfinite(got).all()
    assert torch.equal(got, reference(hidden, positions))
    # And the rotation itself is right: rotary preserves the norm of each head vector.
    q = reference.q_proj(hidden).view(1, -1, 2, 16).transpose(1, 2)
    assert torch.allclose(got.norm(dim=-1), q.norm(dim=-1), rtol=1e-5, atol=1e-6)


def test_meta_load_check_catches_an_unsaved_buffer() -> None:
    torch.manual_seed(0)
    reference = BufferQuery()
    loaded = _load_through_meta(BufferQuery, reference)
    positions = torch.arange(8)[None]
    out = loaded(torch.randn(1, 8, 32), positions)
    assert not torch.isfinite(out).all()


class _Kept(torch.nn.Module):
    """Inverse frequencies in a buffer, kept float32 by the `_apply` override the codemod inserts."""

    def __init__(self, dim: int = 64, base: float = 10000.0) -> None:
        super().__init__()
        self.register_buffer("inv_freq", runtime.inv_freq(dim, base), persistent=True)
        self.register_buffer("local_inv_freq", runtime.inv_freq(dim, 10.0), persistent=False)
        self.register_buffer("cos_cached", torch.ones(3), persistent=False)
        self.scale = torch.nn.Parameter(torch.full((4,), 1.0 / 3.0))
        self.learned = torch.nn.Parameter(torch.full((4,), 1.0 / 3.0))  # named, requires grad, not `learnable`
        self.proj = torch.nn.Linear(4, 4)

    def _apply(self, fn, *args, **kwargs):  # type: ignore[no-untyped-def]
        return runtime.apply_keeping_dtype(self, super()._apply, fn, ("inv_freq", "{}_inv_freq", "scale", "learned"),
                                           *args, learnable=("scale",), **kwargs)

    def forward(self, position_ids: torch.Tensor) -> torch.Tensor:
        return position_ids[..., None].float() * self.inv_freq


def test_apply_keeping_dtype_keeps_named_state_through_casts_only() -> None:
    module = _Kept()
    built = module.inv_freq.clone()
    module.scale.grad = torch.ones(4)
    module.bfloat16()
    assert module.inv_freq.dtype == torch.float32 and torch.equal(module.inv_freq, built)
    assert module.local_inv_freq.dtype == torch.float32  # "{}_inv_freq" matches local_inv_freq
    assert module.scale.dtype == torch.float32 and module.scale.grad.dtype == torch.float32
    assert module.cos_cached.dtype == torch.bfloat16 and module.proj.weight.dtype == torch.bfloat16
    assert module.learned.dtype == torch.bfloat16  # a Parameter that requires grad converts unless `learnable`
    frozen = _Kept()
    frozen.learned.requires_grad_(False)
    assert frozen.bfloat16().learned.dtype == torch.float32  # the same Parameter frozen: kept
    module.half().float()
    assert torch.equal(module.inv_freq, built)
    assert module.proj.weight.dtype == torch.float32


def test_apply_keeping_dtype_still_moves_devices_and_loads_from_meta() -> None:
    reference = _Kept()
    with torch.device("meta"):
        module = _Kept()
    module.bfloat16()
    assert module.inv_freq.device.type == "meta" and module.inv_freq.dtype == torch.float32
    module.to_empty(device="cpu")
    module.load_state_dict(reference.state_dict(), strict=False)
    assert module.inv_freq.device.type == "cpu" and module.inv_freq.dtype == torch.float32
    positions = torch.arange(4096)[None]
    torch.testing.assert_close(module(positions), reference(positions), rtol=0.0, atol=1e-6)


class _ConvertedAttribute(torch.nn.Module):
    """A plain attribute its own `_apply` converts (`self._angles = fn(self._angles)`), through the helper."""

    def __init__(self) -> None:
        super().__init__()
        self._angles = torch.arange(8192, dtype=torch.float32)[:, None] * runtime.inv_freq(64, 1e4)
        self.proj = torch.nn.Linear(4, 4)

    def _apply(self, fn, recurse=True):  # type: ignore[no-untyped-def]
        self._angles = runtime.converted_keeping_dtype(fn, self._angles)
        return super()._apply(fn, recurse)


def test_converted_keeping_dtype_moves_a_plain_attribute_without_rounding_it() -> None:
    module = _ConvertedAttribute()
    built = module._angles.clone()
    module.bfloat16()
    assert module._angles.dtype == torch.float32 and torch.equal(module._angles, built)
    assert module.proj.weight.dtype == torch.bfloat16
    # What the plain conversion would have done: bfloat16 keeps 8 bits of angles up to 8191 rad.
    assert float((built.bfloat16().double() - built.double()).abs().max()) > 1.0
    module.to("meta")
    assert module._angles.device.type == "meta" and module._angles.dtype == torch.float32
    module.to_empty(device="cpu")  # from the meta device: what `fn` made of it (no values to keep)
    assert module._angles.device.type == "cpu" and module._angles.shape == built.shape


class _KeptEntries(torch.nn.Module):
    """Frequencies held as the entries of a ParameterList and a ParameterDict (Gemma-style local/global)."""

    def __init__(self, dim: int = 64, learn: bool = False) -> None:
        runtime.remember_arguments(self, locals())
        super().__init__()
        local, glob = runtime.inv_freq(dim, 1e4), runtime.inv_freq(dim, 1e6) / 8
        self.inv_freqs = torch.nn.ParameterList([torch.nn.Parameter(local, requires_grad=learn),
                                                 torch.nn.Parameter(glob, requires_grad=learn)])
        self.named = torch.nn.ParameterDict({"inv_freq": torch.nn.Parameter(local.clone(), requires_grad=False)})
        self.proj = torch.nn.Linear(4, 4)

    def _apply(self, fn, *args, **kwargs):  # type: ignore[no-untyped-def]
        return runtime.apply_keeping_dtype(self, super()._apply, fn, ("inv_freqs.{}", "named.inv_freq"),
                                           *args, **kwargs)


def test_apply_keeping_dtype_reaches_the_entries_of_parameter_containers() -> None:
    """`"inv_freqs.{}"` keeps every entry of the child ParameterList float32 (and `"named.inv_freq"` one
    entry of a ParameterDict) through `.bfloat16()`; other parameters convert; entries that require grad
    convert unless named as learnable; a meta-device load rebuilds the kept entries."""
    reference = _KeptEntries()
    module = _KeptEntries().bfloat16()
    assert [p.dtype for p in module.inv_freqs] == [torch.float32, torch.float32]
    assert module.named["inv_freq"].dtype == torch.float32 and module.proj.weight.dtype == torch.bfloat16
    assert all(torch.equal(a, b) for a, b in zip(module.inv_freqs, reference.inv_freqs))
    learned = _KeptEntries(learn=True).bfloat16()
    assert [p.dtype for p in learned.inv_freqs] == [torch.bfloat16, torch.bfloat16]
    with torch.device("meta"):
        lazy = _KeptEntries()
    lazy.to_empty(device="cpu")
    assert all(torch.equal(a, b) for a, b in zip(lazy.inv_freqs, reference.inv_freqs))


def test_apply_keeping_dtype_module_exports_with_a_dynamic_length() -> None:
    module = _Kept().bfloat16()
    positions = torch.arange(16)[None]
    length = torch.export.Dim("length", min=2, max=65536)
    exported = torch.export.export(module, (positions,), dynamic_shapes=({1: length},))
    longer = torch.arange(300)[None]
    torch.testing.assert_close(exported.module()(longer), _Kept()(longer), rtol=0.0, atol=1e-6)


class _CachedTables(torch.nn.Module):
    """The codemod's keep fix on a cached-table module: non-persistent tables, a plain tensor
    attribute, and the constructor-argument line first in `__init__`."""

    def __init__(self, dim: int, max_positions: int = 64, *, base: float = 10000.0,  # type: ignore[no-untyped-def]
                 device=None, **extra) -> None:
        runtime.remember_arguments(self, locals())
        super().__init__()
        self.extra = extra.pop("tag", None)
        inv_freq = runtime.inv_freq(dim, base, device=device)
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.original_inv_freq = inv_freq
        angles = runtime.phase(torch.arange(max_positions, device=device), inv_freq)
        self.register_buffer("cos_cached", angles.cos(), persistent=False)
        self.draw = torch.rand(())  # a constructor that draws random numbers

    def _apply(self, fn, *args, **kwargs):  # type: ignore[no-untyped-def]
        return runtime.apply_keeping_dtype(self, super()._apply, fn, ("inv_freq", "cos_cached"), *args, **kwargs)


class _ScaledCachedTables(_CachedTables):
    def __init__(self, dim: int, scale: float) -> None:
        runtime.remember_arguments(self, locals())
        self.scale = scale
        super().__init__(dim, 32, base=500000.0 * scale)


class _UnrecordedSubclass(_CachedTables):
    def __init__(self, width: int) -> None:
        super().__init__(width * 2)


def _through_meta(build):  # type: ignore[no-untyped-def]
    with torch.device("meta"):
        module = build()
    module.bfloat16()
    return module.to_empty(device="cpu")


def test_meta_load_rebuilds_kept_state_from_the_recorded_arguments() -> None:
    reference = _CachedTables(64, 48, base=500000.0, tag="x")
    module = _through_meta(lambda: _CachedTables(64, 48, base=500000.0, tag="x"))
    assert module.cos_cached.dtype == torch.float32 and module.cos_cached.device.type == "cpu"
    torch.testing.assert_close(module.cos_cached, reference.cos_cached, rtol=0.0, atol=1e-7)
    torch.testing.assert_close(module.inv_freq, reference.inv_freq, rtol=0.0, atol=1e-12)
    # a plain tensor attribute stays on meta after `to_empty`; the rebuild fills it too
    assert module.original_inv_freq.device.type == "cpu"
    torch.testing.assert_close(module.original_inv_freq, reference.inv_freq, rtol=0.0, atol=1e-12)
    assert module.extra == "x"  # `**extra` was recorded before `__init__` popped from it


def test_meta_load_rebuild_uses_the_outermost_constructor_and_keeps_the_random_stream() -> None:
    torch.manual_seed(0)
    module = _through_meta(lambda: _ScaledCachedTables(32, 2.0))
    after_load = torch.rand(())
    torch.manual_seed(0)
    with torch.device("meta"):
        _ScaledCachedTables(32, 2.0)
    assert torch.equal(torch.rand(()), after_load)  # the rebuild drew nothing from the caller's stream
    torch.testing.assert_close(module.cos_cached, _ScaledCachedTables(32, 2.0).cos_cached, rtol=0.0, atol=1e-7)


def test_meta_load_of_a_subclass_that_records_nothing_leaves_the_state_alone() -> None:
    module = _through_meta(lambda: _UnrecordedSubclass(16))  # recorded: the base's (dim, max_positions, ...)
    assert module.cos_cached.shape == (64, 16) and module.original_inv_freq.device.type == "meta"


def test_meta_load_rebuild_that_fails_warns_and_the_load_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    with torch.device("meta"):
        module = _CachedTables(16)

    def broken(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise RuntimeError("no config here")

    monkeypatch.setattr(runtime, "inv_freq", broken)
    with pytest.warns(RuntimeWarning, match="_CachedTables: rotary state left unfilled.*no config here"):
        module.to_empty(device="cpu")
    assert module.cos_cached.device.type == "cpu"


def test_recorded_arguments_stay_off_the_module_and_moves_between_devices_rebuild_nothing() -> None:
    import pickle

    module = _through_meta(lambda: _CachedTables(16, device="meta", tag=lambda: None))
    assert module.cos_cached.device.type == "cpu"  # an explicit device="meta" is rebuilt where it lives
    assert not any("ropelint" in name for name in vars(module))
    # an argument pickle cannot take (the lambda) does not stop the module from pickling
    assert pickle.loads(pickle.dumps(_CachedTables(16, note=lambda: None))).cos_cached.shape == (64, 8)
    with torch.no_grad():
        module.cos_cached.fill_(2.0)
    module.to("cpu")  # not from meta: nothing is rebuilt
    assert torch.equal(module.cos_cached, torch.full_like(module.cos_cached, 2.0))


def test_meta_load_rebuild_of_a_class_defined_in_a_function_with_a_free_variable() -> None:
    scale = 4.0

    class Local(torch.nn.Module):
        def __init__(module, dim: int) -> None:  # noqa: N805 (the first parameter is not called self)
            runtime.remember_arguments(module, locals())
            super().__init__()
            module.register_buffer("inv_freq", runtime.inv_freq(dim, 10000.0) * scale, persistent=False)

        def _apply(self, fn, *args, **kwargs):  # type: ignore[no-untyped-def]
            return runtime.apply_keeping_dtype(self, super()._apply, fn, ("inv_freq",), *args, **kwargs)

    module = _through_meta(lambda: Local(8))
    torch.testing.assert_close(module.inv_freq, runtime.inv_freq(8, 10000.0) * scale, rtol=0.0, atol=1e-7)


def test_apply_keeping_dtype_keeps_what_a_parametrization_stores_in_place_of_the_name() -> None:
    """``parametrize.register_parametrization(self, "omega", Exp())`` moves the tensor to
    ``parametrizations.omega.original`` (the log rates): keeping ``omega`` keeps that one."""
    from torch.nn.utils import parametrize

    class Exp(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.exp(x)

        def right_inverse(self, y: torch.Tensor) -> torch.Tensor:
            return torch.log(y)

    class Rates(nn.Module):
        def __init__(self, dim: int = 64, base: float = 5e5) -> None:
            super().__init__()
            self.omega = nn.Parameter(inv_freq(dim, base), requires_grad=False)
            parametrize.register_parametrization(self, "omega", Exp())
            self.proj = nn.Linear(4, 4)

        def _apply(self, fn, *args, **kwargs):  # type: ignore[no-untyped-def]
            return runtime.apply_keeping_dtype(self, super()._apply, fn, ("omega",), *args, **kwargs)

    module = Rates().bfloat16()
    assert module.proj.weight.dtype == torch.bfloat16  # everything else converts
    assert module.parametrizations.omega.original.dtype == torch.float32
    expected = 1.0 / (5e5 ** (torch.arange(0, 64, 2, dtype=torch.float64) / 64))
    assert torch.allclose(module.omega.double(), expected, rtol=1e-6, atol=0.0)
    # Without the keep the log rates round to 8 bits: the rates move by up to ~2.5%.
    plain = nn.Module()
    plain.omega = nn.Parameter(inv_freq(64, 5e5), requires_grad=False)
    parametrize.register_parametrization(plain, "omega", Exp())
    plain = plain.bfloat16()
    assert not torch.allclose(plain.omega.double(), expected, rtol=1e-3, atol=0.0)
