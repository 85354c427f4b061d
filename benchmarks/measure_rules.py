"""Measure every number cited in rules/RPL001.md ... rules/RPL009.md.

Run:  python benchmarks/measure_rules.py [--json OUT.json] [--only RPL003,DOCS]

Each measurement is printed as ``KEY = VALUE`` under the rule that cites it. The
rule documents quote these values (rounded); rerun this script after a torch
upgrade and update the documents if a value moves. CPU only: nothing here needs
a GPU, and nothing here says anything about CUDA autocast.

Reference values are computed in float64 from exact integer positions.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import pathlib
import re
import statistics
import sys
import time
import warnings

import torch
import torch.nn.functional as F
from torch import nn

RESULTS: dict[str, dict[str, object]] = {}


def record(rule: str, key: str, value: object) -> None:
    if isinstance(value, torch.Tensor):
        value = value.item() if value.numel() == 1 else value.tolist()
    if isinstance(value, torch.dtype):
        value = str(value)
    RESULTS.setdefault(rule, {})[key] = value
    print(f"  {key} = {value}")


def section(rule: str, title: str) -> None:
    print(f"\n[{rule}] {title}")


@contextlib.contextmanager
def default_dtype(dtype: torch.dtype):
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


def inv_freq64(dim: int, base: float) -> torch.Tensor:
    return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))


def inv_freq32(dim: int, base: float) -> torch.Tensor:
    return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))


def ref_cos(positions: torch.Tensor, dim: int, base: float) -> torch.Tensor:
    return (positions.to(torch.float64)[:, None] * inv_freq64(dim, base)[None, :]).cos()


def max_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.to(torch.float64) - b.to(torch.float64)).abs().max().item()


def sig(x: float, digits: int = 3) -> float:
    if x == 0 or not math.isfinite(x):
        return x
    return float(f"{x:.{digits}g}")


# ---------------------------------------------------------------------------
# modules used by several measurements


class BufferRope(nn.Module):
    """inverse frequencies in a buffer, elementwise phase (the RPL002 shape)."""

    def __init__(self, dim: int, base: float, persistent: bool = False):
        super().__init__()
        self.register_buffer("inv_freq", inv_freq32(dim, base), persistent=persistent)

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor):
        freqs = position_ids[..., None].float() * self.inv_freq.float()
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


class RecomputeRope(nn.Module):
    """the float32 recompute pattern: nothing in module state."""

    def __init__(self, dim: int, base: float):
        super().__init__()
        self.dim = dim
        self.base = base

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor):
        exponent = torch.arange(0, self.dim, 2, dtype=torch.float32, device=position_ids.device) / self.dim
        inv_freq = 1.0 / (self.base**exponent)
        freqs = position_ids[..., None].to(torch.float32) * inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


class GuardedMatmulRope(nn.Module):
    """transformers 4.40-era shape with a local float32 inv_freq: matmul under a disabled autocast."""

    def __init__(self, dim: int, base: float):
        super().__init__()
        self.dim = dim
        self.base = base

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor):
        exponent = torch.arange(0, self.dim, 2, dtype=torch.float32, device=x.device) / self.dim
        inv_freq = 1.0 / (self.base**exponent)
        inv_freq_expanded = inv_freq[None, :, None].expand(position_ids.shape[0], -1, 1)
        position_ids_expanded = position_ids[:, None, :].float()
        with torch.autocast(device_type=x.device.type, enabled=False):
            freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
            emb = torch.cat((freqs, freqs), dim=-1)
            cos, sin = emb.cos(), emb.sin()
        return cos.to(x.dtype), sin.to(x.dtype)


# ---------------------------------------------------------------------------


def exported_code(ep) -> str:
    """the code of an exported program, including nested submodules (e.g. under no_grad)."""
    return "\n".join(m.code for m in ep.graph_module.modules() if isinstance(m, torch.fx.GraphModule))


def measure_rpl001() -> None:
    section("RPL001", "cos/sin cast to the dtype of int64 position_ids (head_dim 128, base 10000, positions 0..4095)")
    position_ids = torch.arange(4096)[None, :]
    record("RPL001", "position_ids_dtype", position_ids.dtype)
    freqs = position_ids[..., None].float() * inv_freq32(128, 10000.0)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos = emb.cos().to(position_ids.dtype)
    sin = emb.sin().to(position_ids.dtype)
    record("RPL001", "cos_dtype_after_cast", cos.dtype)
    record("RPL001", "cos_distinct_values", sorted(cos.unique().tolist()))
    record("RPL001", "sin_distinct_values", sorted(sin.unique().tolist()))
    record("RPL001", "table_entries", cos.numel())
    record("RPL001", "cos_nonzero_entries", int(cos.ne(0).sum()))
    record("RPL001", "sin_nonzero_entries", int(sin.ne(0).sum()))
    record("RPL001", "sin_all_zero", bool(sin.eq(0).all()))
    record("RPL001", "cos_fraction_zero", sig(cos.eq(0).double().mean().item(), 5))
    # float32 cos/sin that are exactly +-1 survive truncation; everything else becomes 0
    f32 = emb.cos()
    record("RPL001", "cos_nonzero_equals_float32_exactly_pm1", int(f32.abs().eq(1).sum()) == int(cos.ne(0).sum()))
    # type_as(position_ids) behaves the same
    cos2 = emb.cos().type_as(position_ids)
    record("RPL001", "type_as_same_result", bool(torch.equal(cos, cos2)))
    # what the rotation does with these tables: q * cos + rotate_half(q) * sin
    torch.manual_seed(0)
    q = torch.randn(1, 4096, 128)
    q_rot = q * cos + torch.cat((-q[..., 64:], q[..., :64]), dim=-1) * sin
    record("RPL001", "rotated_q_fraction_zero", sig(q_rot.eq(0).double().mean().item(), 5))
    record("RPL001", "rotated_q_dtype", q_rot.dtype)


def measure_rpl002() -> None:
    section("RPL002", "inv_freq buffer round trip through a module cast (head_dim 128, base 500000)")
    inv32 = inv_freq32(128, 500000.0)
    for name, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
        rt = inv32.to(dtype).float()
        rel = ((rt.double() - inv32.double()).abs() / inv32.double()).max().item()
        record("RPL002", f"{name}_round_trip_max_rel_err", sig(rel, 2))
        for p in (4096, 32768, 131072):
            phase_err = (p * (rt.double() - inv32.double())).abs().max().item()
            record("RPL002", f"{name}_phase_err_rad_at_{p}", sig(phase_err))

    # module level: model.bfloat16() then .float(), then forward
    positions = torch.arange(0, 32770)
    ref = ref_cos(positions, 128, 500000.0)
    ref = torch.cat((ref, ref), dim=-1)
    x32 = torch.zeros(1, dtype=torch.float32)
    for name, conv in (("bfloat16", lambda m: m.bfloat16()), ("half", lambda m: m.half())):
        m = conv(BufferRope(128, 500000.0)).float()
        record("RPL002", f"buffer_dtype_after_{name}_then_float", m.inv_freq.dtype)
        cos, _ = m(x32, positions[None])
        record("RPL002", f"module_{name}_then_float_cos_max_err_0_32769", sig(max_err(cos[0], ref)))
    cos, _ = RecomputeRope(128, 500000.0).bfloat16().float()(x32, positions[None])
    record("RPL002", "recompute_bfloat16_then_float_cos_max_err_0_32769", sig(max_err(cos[0], ref), 2))

    try:
        sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
        from ropelint.runtime import inv_freq as runtime_inv_freq
    except ImportError:
        record("RPL002", "runtime_inv_freq_equals_float32_buffer", "ropelint.runtime not importable")
    else:
        same = all(
            torch.equal(runtime_inv_freq(d, b), BufferRope(d, b).inv_freq)
            for d, b in ((64, 10000.0), (128, 10000.0), (128, 500000.0))
        )
        record("RPL002", "runtime_inv_freq_equals_float32_buffer", same)

    section("RPL002", "meta-device construction, to_empty, load_state_dict(strict=True), forward")
    src = BufferRope(128, 500000.0, persistent=False)
    record("RPL002", "non_persistent_buffer_in_state_dict", "inv_freq" in src.state_dict())
    with torch.device("meta"):
        m = BufferRope(128, 500000.0, persistent=False)
    m = m.to_empty(device="cpu")
    m.load_state_dict(src.state_dict(), strict=True)
    record("RPL002", "meta_loaded_buffer_equals_expected", bool(torch.equal(m.inv_freq, src.inv_freq)))
    pos = torch.arange(0, 4096)
    ref4k = ref_cos(pos, 128, 500000.0)
    ref4k = torch.cat((ref4k, ref4k), dim=-1)
    cos, _ = m(x32, pos[None])
    finite = torch.isfinite(cos)
    record("RPL002", "meta_loaded_cos_fraction_finite", sig(finite.double().mean().item()))
    err = (cos[0].double() - ref4k).abs()
    err = err[torch.isfinite(err)]
    record("RPL002", "meta_loaded_cos_max_err_finite_entries", sig(err.max().item()) if err.numel() else "no finite entry")
    with torch.device("meta"):
        r = RecomputeRope(128, 500000.0)
    r = r.to_empty(device="cpu")
    r.load_state_dict({}, strict=True)
    cos, _ = r(x32, pos[None])
    record("RPL002", "meta_loaded_recompute_cos_max_err", sig(max_err(cos[0], ref4k), 2))


def autocast_dtype_table(low: torch.dtype) -> dict[str, str]:
    torch.manual_seed(0)
    a2, b2 = torch.randn(4, 4), torch.randn(4, 4)
    a3, b3 = torch.randn(2, 4, 4), torch.randn(2, 4, 4)
    u, v = torch.randn(4), torch.randn(4)
    ops = {
        "a @ b": lambda: a2 @ b2,
        "torch.matmul (batched)": lambda: torch.matmul(a3, b3),
        "torch.bmm": lambda: torch.bmm(a3, b3),
        "torch.mm": lambda: torch.mm(a2, b2),
        "torch.addmm": lambda: torch.addmm(a2, a2, b2),
        "torch.baddbmm": lambda: torch.baddbmm(a3, a3, b3),
        "torch.tensordot": lambda: torch.tensordot(a2, b2, dims=1),
        "F.linear": lambda: F.linear(a2, b2),
        'einsum "ij,jk->ik"': lambda: torch.einsum("ij,jk->ik", a2, b2),
        'einsum "bij,bjk->bik"': lambda: torch.einsum("bij,bjk->bik", a3, b3),
        'einsum "i,i->"': lambda: torch.einsum("i,i->", u, v),
        "torch.outer": lambda: torch.outer(u, v),
        "a[:, None] * b[None, :]": lambda: u[:, None] * v[None, :],
        'einsum "i,j->ij"': lambda: torch.einsum("i,j->ij", u, v),
        'einsum "bi,bj->bij"': lambda: torch.einsum("bi,bj->bij", a2, b2),
        'einsum "..., f -> ... f"': lambda: torch.einsum("..., f -> ... f", u, v),
        ".cos()": lambda: u.cos(),
        "torch.cat": lambda: torch.cat((u, v)),
        "(a @ b) with .float() inputs": lambda: a2.float() @ b2.float(),
    }
    out = {}
    with torch.autocast("cpu", dtype=low):
        for name, fn in ops.items():
            out[name] = str(fn().dtype)
    return out


def measure_rpl003() -> None:
    section("RPL003", "result dtype under torch.autocast('cpu', bfloat16 / float16), float32 inputs")
    for name, low in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
        for op, dt in autocast_dtype_table(low).items():
            record("RPL003", f"autocast_{name}: {op}", dt)

    section("RPL003", "phase at position 131071 under cpu bf16 autocast (head_dim 128, base 500000)")
    inv = inv_freq32(128, 500000.0)
    position_ids = torch.tensor([[131071]])
    ref = 131071.0 * inv_freq64(128, 500000.0)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        inv_exp = inv[None, :, None].expand(1, -1, 1)
        pos_exp = position_ids[:, None, :].float()
        mm = (inv_exp.float() @ pos_exp.float()).transpose(1, 2)
        record("RPL003", "matmul_phase_dtype", mm.dtype)
        mm = mm.float()
        ew = position_ids[:, :, None].float() * inv[None, None, :]
        record("RPL003", "elementwise_phase_dtype", ew.dtype)
        ou = torch.outer(position_ids[0].float(), inv)
        es = torch.einsum("i,j->ij", position_ids[0].float(), inv)
    ref32 = 131071.0 * inv.double()  # same float32 inv_freq, exact product: isolates the product rounding
    record("RPL003", "matmul_phase_err_rad_at_131071", sig(max_err(mm[0, 0], ref)))
    record("RPL003", "elementwise_product_rounding_rad_at_131071", sig(max_err(ew[0, 0], ref32), 2))
    record("RPL003", "elementwise_phase_err_rad_at_131071", sig(max_err(ew[0, 0], ref), 2))
    record("RPL003", "outer_phase_err_rad_at_131071", sig(max_err(ou[0], ref), 2))
    record("RPL003", "einsum_no_sum_phase_err_rad_at_131071", sig(max_err(es[0], ref), 2))
    # cos consequence over a long range
    positions = torch.arange(0, 32770)[None, :]
    refc = ref_cos(positions[0], 128, 500000.0)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        mm = (inv[None, :, None] @ positions[:, None, :].float()).transpose(1, 2)
        ew = positions[:, :, None].float() * inv[None, None, :]
        cos_mm, cos_ew = mm.float().cos(), ew.cos()
    record("RPL003", "matmul_cos_max_err_0_32769", sig(max_err(cos_mm[0], refc)))
    record("RPL003", "elementwise_cos_max_err_0_32769", sig(max_err(cos_ew[0], refc), 2))


def measure_rpl004() -> None:
    section("RPL004", "disabled-autocast guard")
    inv = inv_freq32(128, 500000.0)
    ref = 131071.0 * inv_freq64(128, 500000.0)
    position_ids = torch.tensor([[131071]])
    with torch.autocast("cpu", dtype=torch.bfloat16), torch.autocast("cpu", enabled=False):
        g = (inv[None, :, None] @ position_ids[:, None, :].float()).transpose(1, 2)
    record("RPL004", "guarded_matmul_phase_dtype", g.dtype)
    record("RPL004", "guarded_matmul_phase_err_rad_at_131071", sig(max_err(g[0, 0], ref), 2))

    try:
        with torch.autocast(device_type="meta", enabled=False):
            pass
        record("RPL004", "autocast_meta_raises", False)
    except Exception as exc:  # noqa: BLE001 - we record what is raised
        record("RPL004", "autocast_meta_raises", f"{type(exc).__name__}: {exc}")

    for name, cls in (("guarded", GuardedMatmulRope), ("recompute", RecomputeRope)):
        with torch.device("meta"):
            m = cls(128, 500000.0)
            x = torch.empty(1, 8, 128)
            pos = torch.arange(8)[None, :]
        try:
            cos, _ = m(x, pos)
            record("RPL004", f"meta_forward_{name}", f"ok, {cos.device.type} {tuple(cos.shape)}")
        except Exception as exc:  # noqa: BLE001
            record("RPL004", f"meta_forward_{name}", f"{type(exc).__name__}: {exc}")

    for name, cls in (("guarded", GuardedMatmulRope), ("recompute", RecomputeRope)):
        m = cls(128, 500000.0)
        x = torch.zeros(1, 8, 128)
        pos = torch.arange(8)[None, :]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ep = torch.export.export(m, (x, pos))
            graph = exported_code(ep)
            record("RPL004", f"export_{name}_has_wrap_with_autocast", "wrap_with_autocast" in graph)
        except Exception as exc:  # noqa: BLE001
            record("RPL004", f"export_{name}", f"{type(exc).__name__}: {str(exc).splitlines()[0]}")


def measure_rpl005() -> None:
    section("RPL005", "positions rounded to 16-bit dtypes")
    for lo, hi in ((257, 257), (2049, 2051), (8184, 8195)):
        vals = torch.arange(lo, hi + 1).to(torch.bfloat16).unique().tolist()
        record("RPL005", f"bf16_positions_{lo}_{hi}", [int(v) for v in vals])
    record("RPL005", "bf16_distinct_in_0_32767", torch.arange(32768).to(torch.bfloat16).unique().numel())
    record("RPL005", "fp16_distinct_in_0_32767", torch.arange(32768).to(torch.float16).unique().numel())
    record("RPL005", "fp16_largest_exact_run_end", int(torch.nonzero(torch.arange(70000).to(torch.float16).float() != torch.arange(70000).float())[0]) - 1)
    fp16 = torch.arange(70000).to(torch.float16)
    record("RPL005", "fp16_first_inf_position", int(torch.nonzero(torch.isinf(fp16))[0]))
    record("RPL005", "fp32_distinct_in_0_131071", torch.arange(131072).to(torch.float32).unique().numel())
    big = torch.arange(2**24 + 2)
    exact = torch.equal(big[: 2**24 + 1].to(torch.float32).to(torch.int64), big[: 2**24 + 1])
    record("RPL005", "fp32_exact_through_16777216", exact)
    record("RPL005", "fp32_16777217_becomes", int(big[2**24 + 1 : 2**24 + 2].to(torch.float32).to(torch.int64)))

    # the function in the Example: arange(seq_len, dtype=dtype) with dtype=bfloat16
    inv = inv_freq32(128, 10000.0)
    for name, dtype, n in (("bf16", torch.bfloat16, 8192), ("fp16", torch.float16, 8192)):
        t = torch.arange(n, dtype=dtype)
        phase = t[:, None] * inv[None, :]
        record("RPL005", f"{name}_positions_phase_dtype", phase.dtype)
        cos = phase.cos()
        record("RPL005", f"{name}_positions_cos_max_err_0_{n - 1}", sig(max_err(cos, ref_cos(torch.arange(n), 128, 10000.0))))
    t = torch.arange(8192, dtype=torch.float32)
    cos = (t[:, None] * inv[None, :]).cos()
    record("RPL005", "fp32_positions_cos_max_err_0_8191", sig(max_err(cos, ref_cos(torch.arange(8192), 128, 10000.0)), 2))


def measure_rpl006() -> None:
    section("RPL006", "inverse frequencies built under a 16-bit default dtype, phase and cos in float32, positions 0..2047")
    positions = torch.arange(2048)
    for dname, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
        with default_dtype(dtype):
            implicit = torch.arange(0, 128, 2) / 128
            float_arange = torch.arange(0.0, 128, 2.0)
            explicit = torch.arange(0, 128, 2, dtype=torch.int64).float() / 128
            explicit32 = torch.arange(0, 128, 2, dtype=torch.float32) / 128
        record("RPL006", f"default_{dname}: arange(0, dim, 2) / dim dtype", implicit.dtype)
        record("RPL006", f"default_{dname}: arange(0., dim, 2.) dtype", float_arange.dtype)
        record("RPL006", f"default_{dname}: arange(..., dtype=int64).float() / dim dtype", explicit.dtype)
        record("RPL006", f"default_{dname}: arange(..., dtype=float32) / dim dtype", explicit32.dtype)
        for dim, base in ((64, 10000.0), (128, 10000.0), (128, 500000.0)):
            with default_dtype(dtype):
                inv = 1.0 / (base ** (torch.arange(0, dim, 2) / dim))
            record("RPL006", f"default_{dname}_inv_freq_dtype", inv.dtype)
            t = positions.to(torch.float32)
            cos = torch.outer(t, inv.float()).cos()
            key = f"default_{dname}_dim{dim}_base{int(base)}_cos_max_err_0_2047"
            record("RPL006", key, sig(max_err(cos, ref_cos(positions, dim, base))))
    implicit = 1.0 / (10000.0 ** (torch.arange(0, 128, 2) / 128))
    fixed = 1.0 / (10000.0 ** (torch.arange(0, 128, 2).float() / 128))
    record("RPL006", "default_fp32_implicit_equals_float_fixed", torch.equal(implicit, fixed))
    for dim, base in ((64, 10000.0), (128, 10000.0), (128, 500000.0)):
        inv = inv_freq32(dim, base)
        cos = torch.outer(positions.float(), inv).cos()
        record("RPL006", f"float32_dim{dim}_base{int(base)}_cos_max_err_0_2047", sig(max_err(cos, ref_cos(positions, dim, base)), 2))


def measure_rpl007() -> None:
    section("RPL007", "trig of a phase cast to 16-bit vs trig in float32 then cast (head_dim 128, base 10000)")
    inv = inv_freq32(128, 10000.0)
    for n in (4096, 32768):
        positions = torch.arange(n)
        phase = positions.float()[:, None] * inv[None, :]
        ref = ref_cos(positions, 128, 10000.0)
        for name, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
            cast_first = phase.to(dtype).cos()
            trig_first = phase.cos().to(dtype)
            record("RPL007", f"{name}_cast_then_cos_max_err_0_{n - 1}", sig(max_err(cast_first, ref)))
            record("RPL007", f"{name}_cos_then_cast_max_err_0_{n - 1}", sig(max_err(trig_first, ref), 2))


class ComplexBufferRope(nn.Module):
    def __init__(self, dim: int, max_seq_len: int, theta: float, persistent: bool = True):
        super().__init__()
        freqs = torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv_freq32(dim, theta))
        self.register_buffer("freqs_cis", torch.polar(torch.ones_like(freqs), freqs), persistent=persistent)


class ComplexAttrRope(nn.Module):
    def __init__(self, dim: int, max_seq_len: int, theta: float):
        super().__init__()
        freqs = torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv_freq32(dim, theta))
        self.freqs_cis = torch.polar(torch.ones_like(freqs), freqs)


def measure_rpl008() -> None:
    section("RPL008", "complex freqs_cis buffer under module dtype conversion (head_dim 128, 4096 positions)")
    # the C++ warning is emitted once per process: only the first conversion shows it
    first_warning: list[str] = []
    to_real = 0
    warned = 0
    for persistent in (True, False):
        tag = "persistent" if persistent else "non_persistent"
        for name, conv in (
            ("to(torch.bfloat16)", lambda m: m.to(torch.bfloat16)),
            ("to(torch.float16)", lambda m: m.to(torch.float16)),
            ("bfloat16()", lambda m: m.bfloat16()),
            ("half()", lambda m: m.half()),
        ):
            m = ComplexBufferRope(128, 4096, 10000.0, persistent=persistent)
            before = m.freqs_cis.clone()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                m = conv(m)
            msgs = [str(w.message).split(" (Triggered")[0] for w in caught]
            after = m.freqs_cis
            record("RPL008", f"{tag} {name}: dtype", after.dtype)
            if msgs and not first_warning:
                first_warning.append(msgs[0])
                record("RPL008", "warning_on_first_conversion", msgs[0])
            warned += bool(msgs)
            if not after.is_complex():
                to_real += 1
                record("RPL008", f"{tag} {name}: max |imag| before", sig(before.imag.abs().max().item()))
                # rotating the unit vector (1, 0) by the stored "freqs_cis" now gives a real number:
                # the sin half of the rotation is gone
                err = (after.to(torch.complex64) - before).abs().max().item()
                record("RPL008", f"{tag} {name}: max |freqs_cis error|", sig(err))
    record("RPL008", "conversions_that_made_it_real", to_real)
    record("RPL008", "conversions_that_printed_a_warning", warned)
    m = ComplexAttrRope(128, 4096, 10000.0).to(torch.bfloat16)
    record("RPL008", "plain attribute to(torch.bfloat16): dtype", m.freqs_cis.dtype)


class PhaseBufferRope(nn.Module):
    def __init__(self, dim: int, max_pos: int, base: float):
        super().__init__()
        freqs = torch.outer(torch.arange(max_pos, dtype=torch.float32), inv_freq32(dim, base))
        self.register_buffer("freqs", torch.cat((freqs, freqs), dim=-1), persistent=False)

    def forward(self, x: torch.Tensor, seq_len: int):
        emb = self.freqs[:seq_len]
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


class TableBufferRope(nn.Module):
    def __init__(self, dim: int, max_pos: int, base: float):
        super().__init__()
        freqs = torch.outer(torch.arange(max_pos, dtype=torch.float32), inv_freq32(dim, base))
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos_cached", emb.cos(), persistent=False)
        self.register_buffer("sin_cached", emb.sin(), persistent=False)

    def forward(self, x: torch.Tensor, seq_len: int):
        return self.cos_cached[:seq_len].to(x.dtype), self.sin_cached[:seq_len].to(x.dtype)


def measure_rpl009() -> None:
    section("RPL009", "phase cached in a buffer vs cos/sin cached vs recompute, module .bfloat16() (head_dim 128, base 10000, 2048 positions)")
    positions = torch.arange(2048)
    ref = ref_cos(positions, 128, 10000.0)
    ref = torch.cat((ref, ref), dim=-1)
    xb = torch.zeros(1, dtype=torch.bfloat16)
    x32 = torch.zeros(1, dtype=torch.float32)
    m = PhaseBufferRope(128, 2048, 10000.0).bfloat16()
    record("RPL009", "phase_buffer_dtype_after_bfloat16", m.freqs.dtype)
    exact_phase = torch.outer(positions.double(), inv_freq64(128, 10000.0))
    exact_phase = torch.cat((exact_phase, exact_phase), dim=-1)
    record("RPL009", "phase_buffer_bfloat16_max_phase_err_rad", sig(max_err(m.freqs, exact_phase)))
    record("RPL009", "phase_at_2047_fastest_frequency_rad", sig(exact_phase[2047, 0].item(), 4))
    cos, _ = m(xb, 2048)
    record("RPL009", "phase_buffer_bfloat16_cos_max_err", sig(max_err(cos, ref)))
    cos, _ = m.float()(x32, 2048)
    record("RPL009", "phase_buffer_bfloat16_then_float_cos_max_err", sig(max_err(cos, ref)))
    t = TableBufferRope(128, 2048, 10000.0).bfloat16()
    cos, _ = t(xb, 2048)
    record("RPL009", "table_buffer_bfloat16_cos_max_err", sig(max_err(cos, ref), 2))
    cos, _ = t.float()(x32, 2048)
    record("RPL009", "table_buffer_bfloat16_then_float_cos_max_err", sig(max_err(cos, ref), 2))
    r = RecomputeRope(128, 10000.0).bfloat16()
    cos, _ = r(xb, positions[None])
    record("RPL009", "recompute_bf16_output_cos_max_err", sig(max_err(cos[0], ref), 2))
    cos, _ = r(x32, positions[None])
    record("RPL009", "recompute_fp32_output_cos_max_err", sig(max_err(cos[0], ref), 2))


def measure_recompute_pattern() -> None:
    section("ALL", "float32 recompute pattern: module .bfloat16()/.half(), cpu autocast bf16/fp16, head_dim 128, base 500000")
    positions = torch.cat((torch.arange(0, 32770), torch.tensor([131070, 131071])))
    ref = ref_cos(positions, 128, 500000.0)
    ref = torch.cat((ref, ref), dim=-1)
    worst = 0.0
    for conv in (lambda m: m.bfloat16(), lambda m: m.half(), lambda m: m):
        m = conv(RecomputeRope(128, 500000.0))
        for ac in (None, torch.bfloat16, torch.float16):
            ctx = torch.autocast("cpu", dtype=ac) if ac is not None else contextlib.nullcontext()
            with ctx:
                cos, _ = m(torch.zeros(1), positions[None])
            worst = max(worst, max_err(cos[0], ref))
    record("ALL", "recompute_worst_cos_err_float32_output", sig(worst, 2))


# ---------------------------------------------------------------------------
# the code in the rule documents themselves
#
# Every "## Example" and "## Use instead" block in rules/RPL00N.md is executed here and
# measured, so the documents can say what their own examples do. Skipped when the rule
# documents are not next to this script.

RULES_DIR = pathlib.Path(__file__).resolve().parent.parent / "rules"


def doc_block(rule: str, heading: str) -> str:
    text = (RULES_DIR / f"{rule}.md").read_text(encoding="utf-8")
    m = re.search(rf"^## {re.escape(heading)}\n```python\n(.*?)^```$", text, re.DOTALL | re.MULTILINE)
    if m is None:
        raise ValueError(f"{rule}: no python block under '## {heading}'")
    return m.group(1)


def doc_namespace(rule: str, heading: str) -> dict:
    ns: dict = {"__name__": f"{rule}_{heading.replace(' ', '_')}"}
    exec(compile(doc_block(rule, heading), f"rules/{rule}.md:{heading}", "exec"), ns)  # noqa: S102
    return ns


def tolerance(ref: torch.Tensor, positions: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
    """ROPE_NOTES section 4: float32 term, plus one ulp of the reference for 16-bit output."""
    tol = 2.0 * (positions.double()[:, None] + 1) * 2.0**-24 + 2.0**-23
    if out_dtype in (torch.bfloat16, torch.float16):
        r = ref.to(out_dtype).abs()
        ulp = (torch.nextafter(r, torch.full_like(r, math.inf)) - r).double()
        tol = tol + ulp
    return tol


PROBE_CONFIGS = ((64, 10000.0), (128, 500000.0))


def probe(make, label: str) -> tuple[int, int, float]:
    """the 24-case matrix of ROPE_NOTES section 4 for a module `forward(x, position_ids) -> (cos, sin)`."""
    positions = torch.cat((torch.arange(0, 32770), torch.tensor([131069, 131070, 131071])))
    passed = total = 0
    worst_ratio = 0.0
    for dim, base in PROBE_CONFIGS:
        ref = ref_cos(positions, dim, base)
        ref = torch.cat((ref, ref), dim=-1)
        for low in (torch.float16, torch.bfloat16):
            for back in (False, True):
                for ac in (None, torch.bfloat16, torch.float16):
                    total += 1
                    m = make(dim, base).to(low)
                    if back:
                        m = m.float()
                    out_dtype = torch.float32 if back else low
                    x = torch.zeros(1, 1, dim, dtype=out_dtype)
                    ctx = torch.autocast("cpu", dtype=ac) if ac is not None else contextlib.nullcontext()
                    try:
                        with ctx:
                            cos, _ = m(x, positions[None])
                    except Exception:  # noqa: BLE001, S112 - a crash is a failed case
                        continue
                    cos = cos.reshape(len(positions), dim)
                    if not cos.is_floating_point():
                        continue
                    err = (cos.double() - ref).abs()
                    ratio = (err / tolerance(ref, positions, cos.dtype)).max().item()
                    worst_ratio = max(worst_ratio, ratio if math.isfinite(ratio) else math.inf)
                    passed += ratio <= 1.0
    return passed, total, worst_ratio


def measure_doc_examples() -> None:
    if not RULES_DIR.is_dir():
        print(f"\n[DOCS] skipped: {RULES_DIR} not found")
        return
    section("DOCS", "the probe matrix of ROPE_NOTES section 4 on every module example with forward(x, position_ids)")
    for rule in ("RPL001", "RPL002", "RPL003", "RPL004", "RPL007"):
        for heading, tag in (("Example", "example"), ("Use instead", "use_instead")):
            cls = doc_namespace(rule, heading)["RotaryEmbedding"]
            passed, total, ratio = probe(lambda d, b, cls=cls: cls(d, b), f"{rule} {heading}")
            record("DOCS", f"{rule}_{tag}_probe_passed", f"{passed}/{total}")
            if passed == total:
                record("DOCS", f"{rule}_{tag}_probe_worst_err_over_tol", sig(ratio, 2))

    section("DOCS", "RPL001 Example / Use instead (head_dim 128, base 10000, int64 positions 0..4095)")
    pos = torch.arange(4096)[None]
    ref = ref_cos(pos[0], 128, 10000.0)
    ref = torch.cat((ref, ref), dim=-1)
    for heading, tag in (("Example", "example"), ("Use instead", "use_instead")):
        m = doc_namespace("RPL001", heading)["RotaryEmbedding"](128)
        cos, _ = m(torch.zeros(1, 1, 128), pos)
        record("DOCS", f"RPL001_{tag}_cos_dtype", cos.dtype)
        record("DOCS", f"RPL001_{tag}_cos_fraction_zero", sig(cos.eq(0).double().mean().item(), 4))
        record("DOCS", f"RPL001_{tag}_cos_max_err", sig(max_err(cos[0], ref), 2))

    section("DOCS", "RPL002 Example / Use instead (head_dim 128, base 500000)")
    pos = torch.arange(0, 32770)[None]
    ref = ref_cos(pos[0], 128, 500000.0)
    ref = torch.cat((ref, ref), dim=-1)
    for heading, tag in (("Example", "example"), ("Use instead", "use_instead")):
        cls = doc_namespace("RPL002", heading)["RotaryEmbedding"]
        m = cls(128, 500000.0).bfloat16().float()
        cos, _ = m(torch.zeros(1, 1, 128), pos)
        record("DOCS", f"RPL002_{tag}_bfloat16_then_float_cos_max_err_0_32769", sig(max_err(cos[0], ref), 2))
        src = cls(128, 500000.0)
        with torch.device("meta"):
            mm = cls(128, 500000.0)
        mm = mm.to_empty(device="cpu")
        mm.load_state_dict(src.state_dict(), strict=True)
        cos, _ = mm(torch.zeros(1, 1, 128), pos[:, :4096])
        err = (cos[0].double() - ref[:4096]).abs()
        finite = err[torch.isfinite(err)]
        record("DOCS", f"RPL002_{tag}_meta_to_empty_strict_load_cos_max_err_0_4095", sig(finite.max().item(), 2) if finite.numel() else "no finite entry")

    section("DOCS", "RPL003 Example / Use instead under cpu bf16 autocast (head_dim 128, base 500000)")
    for heading, tag in (("Example", "example"), ("Use instead", "use_instead")):
        m = doc_namespace("RPL003", heading)["RotaryEmbedding"](128, 500000.0)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            cos, _ = m(torch.zeros(1, 1, 128), pos)
        record("DOCS", f"RPL003_{tag}_autocast_bf16_cos_max_err_0_32769", sig(max_err(cos[0], ref), 2))
    # the fix: for [..., n, 1] @ [..., 1, m], `*` equals `@` bit for bit (no autocast)
    inv = inv_freq32(128, 500000.0)
    a = inv[None, :, None].expand(2, -1, 1)
    b = torch.arange(0, 32770)[None, None, :].expand(2, 1, -1).float()
    record("DOCS", "RPL003_fix_mul_equals_matmul_without_autocast", torch.equal(a @ b, a * b))

    section("DOCS", "RPL004 Example / Use instead: meta device, torch.export, bf16 autocast")
    for heading, tag in (("Example", "example"), ("Use instead", "use_instead")):
        cls = doc_namespace("RPL004", heading)["RotaryEmbedding"]
        with torch.device("meta"):
            m = cls(128, 500000.0)
            x = torch.empty(1, 8, 128)
            p8 = torch.arange(8)[None, :]
        try:
            cos, _ = m(x, p8)
            record("DOCS", f"RPL004_{tag}_meta_forward", f"ok, device {cos.device.type}")
        except Exception as exc:  # noqa: BLE001
            record("DOCS", f"RPL004_{tag}_meta_forward", f"{type(exc).__name__}: {exc}")
        m = cls(128, 500000.0)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ep = torch.export.export(m, (torch.zeros(1, 8, 128), torch.arange(8)[None, :]))
            record("DOCS", f"RPL004_{tag}_export_has_wrap_with_autocast", "wrap_with_autocast" in exported_code(ep))
        except Exception as exc:  # noqa: BLE001
            record("DOCS", f"RPL004_{tag}_export", f"{type(exc).__name__}: {str(exc).splitlines()[0]}")
        with torch.autocast("cpu", dtype=torch.bfloat16):
            cos, _ = m(torch.zeros(1, 1, 128), pos)
        record("DOCS", f"RPL004_{tag}_autocast_bf16_cos_max_err_0_32769", sig(max_err(cos[0], ref), 2))

    section("DOCS", "RPL005 Example / Use instead: build_rope_cache(8192, 128, dtype)")
    p = torch.arange(8192)
    ref = ref_cos(p, 128, 10000.0)
    ref = torch.cat((ref, ref), dim=-1)
    for heading, tag in (("Example", "example"), ("Use instead", "use_instead")):
        fn = doc_namespace("RPL005", heading)["build_rope_cache"]
        for dname, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16), ("fp32", torch.float32)):
            cos, _ = fn(8192, 128, dtype)
            record("DOCS", f"RPL005_{tag}_{dname}_cos_max_err_0_8191", sig(max_err(cos, ref), 2))

    section("DOCS", "RPL006 Example / Use instead: precompute_freqs_cis(dim, 2048) built under a default dtype")
    p = torch.arange(2048)
    for heading, tag in (("Example", "example"), ("Use instead", "use_instead")):
        fn = doc_namespace("RPL006", heading)["precompute_freqs_cis"]
        for dname, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16), ("fp32", torch.float32)):
            for dim in (64, 128):
                with default_dtype(dtype):
                    fc = fn(dim, 2048)
                record("DOCS", f"RPL006_{tag}_default_{dname}_dim{dim}_dtype", fc.dtype)
                record("DOCS", f"RPL006_{tag}_default_{dname}_dim{dim}_cos_max_err_0_2047", sig(max_err(fc.real, ref_cos(p, dim, 10000.0)), 2))
    ex = doc_namespace("RPL006", "Example")["precompute_freqs_cis"](128, 2048)
    ui = doc_namespace("RPL006", "Use instead")["precompute_freqs_cis"](128, 2048)
    record("DOCS", "RPL006_default_fp32_example_equals_use_instead", torch.equal(ex, ui))

    section("DOCS", "RPL007 Example / Use instead with a bfloat16 / float16 activation (head_dim 128, base 10000)")
    for n in (4096, 32768):
        p = torch.arange(n)[None]
        ref = ref_cos(p[0], 128, 10000.0)
        ref = torch.cat((ref, ref), dim=-1)
        for heading, tag in (("Example", "example"), ("Use instead", "use_instead")):
            m = doc_namespace("RPL007", heading)["RotaryEmbedding"](128)
            for dname, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
                cos, _ = m(torch.zeros(1, 1, 128, dtype=dtype), p)
                record("DOCS", f"RPL007_{tag}_{dname}_cos_max_err_0_{n - 1}", sig(max_err(cos[0], ref), 2))

    section("DOCS", "RPL008 Example / Use instead after module.to(torch.bfloat16) (head_dim 128, seq 256)")
    torch.manual_seed(0)
    xq = torch.randn(1, 256, 4, 128)
    expected = doc_namespace("RPL008", "Use instead")["RotaryEmbedding"](128)(xq)
    for heading, tag in (("Example", "example"), ("Use instead", "use_instead")):
        m = doc_namespace("RPL008", heading)["RotaryEmbedding"](128)
        record("DOCS", f"RPL008_{tag}_in_state_dict", "freqs_cis" in m.state_dict())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = m.to(torch.bfloat16)
        record("DOCS", f"RPL008_{tag}_freqs_cis_dtype_after_to_bf16", m.freqs_cis.dtype)
        try:
            out = m(xq.bfloat16())
            record("DOCS", f"RPL008_{tag}_output_dtype", out.dtype)
            rel = ((out.double() - expected.double()).norm() / expected.double().norm()).item()
            record("DOCS", f"RPL008_{tag}_output_rel_err", sig(rel, 2))
        except Exception as exc:  # noqa: BLE001
            record("DOCS", f"RPL008_{tag}_forward", f"{type(exc).__name__}: {exc}")

    section("DOCS", "RPL009 Example / Use instead after module.bfloat16() (head_dim 128, base 10000, seq 2048)")
    p = torch.arange(2048)
    ref = ref_cos(p, 128, 10000.0)
    ref = torch.cat((ref, ref), dim=-1)
    for heading, tag in (("Example", "example"), ("Use instead", "use_instead")):
        cls = doc_namespace("RPL009", heading)["RotaryEmbedding"]
        m = cls(128).bfloat16()
        cos, _ = m(torch.zeros(1, dtype=torch.bfloat16), 2048)
        record("DOCS", f"RPL009_{tag}_bf16_cos_max_err", sig(max_err(cos, ref), 2))
        cos, _ = m.float()(torch.zeros(1), 2048)
        record("DOCS", f"RPL009_{tag}_then_float_cos_max_err", sig(max_err(cos, ref), 2))
    # cost: forward of a float32 module at seq 4096 (median of 30 calls)
    times = {}
    for heading, tag in (("Example", "example"), ("Use instead", "use_instead")):
        m = doc_namespace("RPL009", heading)["RotaryEmbedding"](128, 4096)
        x = torch.zeros(1)
        samples = []
        for _ in range(30):
            t0 = time.perf_counter()
            m(x, 4096)
            samples.append(time.perf_counter() - t0)
        times[tag] = statistics.median(samples)
        record("DOCS", f"RPL009_{tag}_forward_ms_seq4096", sig(times[tag] * 1e3, 2))
    record("DOCS", "RPL009_use_instead_over_example_time_ratio", sig(times["use_instead"] / times["example"], 2))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="also write the results to this JSON file")
    parser.add_argument(
        "--only",
        help="comma-separated sections to run: RPL001..RPL009, ALL (the recompute pattern), DOCS "
        "(the rule documents' own examples, the slowest part); default: every section",
    )
    args = parser.parse_args(argv)
    sections = {
        "RPL001": measure_rpl001,
        "RPL002": measure_rpl002,
        "RPL003": measure_rpl003,
        "RPL004": measure_rpl004,
        "RPL005": measure_rpl005,
        "RPL006": measure_rpl006,
        "RPL007": measure_rpl007,
        "RPL008": measure_rpl008,
        "RPL009": measure_rpl009,
        "ALL": measure_recompute_pattern,
        "DOCS": measure_doc_examples,
    }
    wanted = [s.strip().upper() for s in args.only.split(",")] if args.only else list(sections)
    unknown = [s for s in wanted if s not in sections]
    if unknown:
        parser.error(f"unknown section(s): {', '.join(unknown)}")
    print(f"torch {torch.__version__}, python {sys.version.split()[0]}")
    RESULTS["env"] = {"torch": torch.__version__, "python": sys.version.split()[0]}
    for name in wanted:
        sections[name]()
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(RESULTS, fh, indent=2, default=str)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
