"""What the analysis recognises in less common source shapes, and the fixes it then offers: each case
with a variant that must not change the outcome the other way."""

from __future__ import annotations

import textwrap

import pytest

from ropelint.engine import check_text
from ropelint.fixer import fix_text
from ropelint.rules import BY_CODE

ALL = frozenset(BY_CODE)


def _found(source: str) -> dict[tuple[int, str], str | None]:
    """(line, code) -> fix safety (None without a fix)."""
    result = check_text("rotary.py", textwrap.dedent(source), ALL)
    assert result.error is None
    return {(d.line, d.code): (d.fix.safety if d.fix else None) for d in result.diagnostics}


def _fixed(source: str, unsafe: bool = False) -> str:
    """The source after ``ropelint fix --write`` (safe fixes only unless ``unsafe``)."""
    return fix_text("rotary.py", textwrap.dedent(source), ALL, unsafe=unsafe).fixed


# A correct rotary (float32 frequencies and positions, tables cast to the activation): several tests hand it
# something wrong from a holder.
_CORRECT_ROTARY = '''\
        import torch
        from torch import nn


        class Rotary(nn.Module):
            def __init__(self, dim=32, base=10000.0):
                super().__init__()
                self.dim, self.base = dim, base

            def forward(self, x, position_ids):
                inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2, dtype=torch.float32) / self.dim))
                freqs = position_ids[..., None].float() * inv_freq
                return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)
'''


def test_dtype_names_imported_from_torch_are_dtypes():
    """`from torch import arange, float32`: `arange(0, d, 2, dtype=float32)` is float32 (no RPL006), and
    `dtype=bfloat16` positions are 16-bit (RPL005, fixed with an added `import torch`)."""
    source = textwrap.dedent('''\
        from torch import arange, bfloat16, float32, outer


        def _inv_freq(d: int, theta: float):
            return 1.0 / (theta ** (arange(0, d, 2, dtype=float32) / d))


        def tables(n: int, d: int = 64):
            t = arange(n, dtype=float32)
            f = outer(t, _inv_freq(d, 10000.0))
            return f.cos(), f.sin()
        ''')
    assert _found(source) == {}
    rounded = source.replace("t = arange(n, dtype=float32)", "t = arange(n, dtype=bfloat16)")
    assert _found(rounded) == {(9, "RPL005"): "safe"}
    fixed = fix_text("rotary.py", rounded, ALL, unsafe=False).fixed
    assert "import torch\n" in fixed and "t = arange(n, dtype=torch.float32)" in fixed
    compile(fixed, "rotary.py", "exec")


def test_a_plain_callable_object_held_by_the_module_gives_its_call_result():
    """`self.freqs = SinusoidalFrequencies(...)`, a plain class with `__call__` (no `nn.Module`):
    `self.freqs(q.device)` returns float32 frequencies, so positions cast to `q.dtype` before the product
    are RPL005 (safe: the rotated output is cast back to `q.dtype`)."""
    source = '''\
        import math
        import torch as T


        class SinusoidalFrequencies:
            def __init__(self, head_dim: int, base: float):
                self.head_dim, self.base = head_dim, float(base)

            def __call__(self, device) -> T.Tensor:
                exponent = T.arange(0, self.head_dim, 2, device=device, dtype=T.float32) / self.head_dim
                return T.exp(-math.log(self.base) * exponent)


        class RoFormerRotary(T.nn.Module):
            def __init__(self, head_dim: int = 64, base: float = 10000.0):
                super().__init__()
                self.freqs = SinusoidalFrequencies(head_dim, base)

            def forward(self, q: T.Tensor, offset: int = 0):
                pos = T.arange(offset, offset + q.shape[-2], device=q.device).to(q.dtype)
                ang = pos[:, None] * self.freqs(q.device)[None, :]
                cos = T.repeat_interleave(ang.cos(), 2, dim=-1)
                sin = T.repeat_interleave(ang.sin(), 2, dim=-1)
                return (q * cos + q * sin).to(q.dtype)
        '''
    assert _found(source) == {(20, "RPL005"): "safe"}
    in_float = source.replace(".to(q.dtype)\n                ang", ".float()\n                ang")
    assert in_float != source and _found(in_float) == {}


def test_a_closure_that_casts_the_phase_to_its_positions_dtype_is_found_and_fixed():
    """GLM-style `def _phase(pos): return (pos.unsqueeze(-1).float() * theta).to(pos.dtype)` inside
    `forward`, called with `position_ids`: RPL001 (not also RPL007) in the closure, fixed by dropping the
    cast; the call's result is the phase whose cos/sin the forward takes."""
    source = '''\
        import torch
        from torch import nn


        class GLMRotary(nn.Module):
            def __init__(self, dim=64, base=10000.0):
                super().__init__()
                self.dim, self.base = dim, base

            def _theta(self, device):
                return 1.0 / (self.base ** (torch.arange(0, self.dim, 2, dtype=torch.float, device=device) / self.dim))

            def forward(self, position_ids):
                def _phase(pos):
                    return (pos.unsqueeze(-1).float() * self._theta(pos.device)).to(pos.dtype)

                idx_theta = _phase(position_ids)
                return torch.stack([torch.cos(idx_theta), torch.sin(idx_theta)], dim=-1)
        '''
    assert _found(source) == {(15, "RPL001"): "safe"}
    fixed = fix_text("rotary.py", textwrap.dedent(source), ALL, unsafe=False)
    assert "return pos.unsqueeze(-1).float() * self._theta(pos.device)\n" in fixed.fixed
    assert fixed.remaining.diagnostics == ()
    kept_float = source.replace(".to(pos.dtype)", "")
    assert _found(kept_float) == {}


def test_a_guard_with_its_body_on_the_header_line_is_removed_with_the_rewrite():
    """`with torch.autocast(..., enabled=False): freqs = torch.matmul(...)  # comment` on one line: the
    statement, rewritten elementwise, takes the `with`'s place and the comment stays."""
    source = textwrap.dedent('''\
        import torch


        def angles(max_seq_len: int, dim: int = 64):
            inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
            seq = torch.arange(max_seq_len, dtype=torch.float32)
            with torch.autocast(device_type=seq.device.type, enabled=False): freqs = torch.matmul(seq.unsqueeze(-1), inv_freq.unsqueeze(0))  # (s, d/2)
            return freqs.cos()
        ''')
    assert _found(source) == {(7, "RPL004"): "safe"}
    fixed = fix_text("rotary.py", source, ALL, unsafe=False)
    assert "    freqs = (seq.unsqueeze(-1) * inv_freq.unsqueeze(0))  # (s, d/2)\n" in fixed.fixed
    assert fixed.remaining.diagnostics == () and "autocast" not in fixed.fixed
    assert fix_text("rotary.py", fixed.fixed, ALL, unsafe=False).fixed == fixed.fixed


def test_positions_cast_to_a_float_buffer_are_16_bit_and_keep_its_device_when_fixed():
    """RetNet: `index = torch.arange(slen).to(self.decay)` takes the dtype a module cast gives the float
    `decay` buffer (RPL005). The fix keeps the device move: `.to(self.decay.device, torch.float32)`; it is
    safe while `index` only reaches the phase (and comparisons), unsafe when it also builds the returned
    decay mask, whose dtype would change with it."""
    source = textwrap.dedent('''\
        import torch
        from torch import nn


        class RotaryRelPos(nn.Module):
            def __init__(self, dim=64, heads=4):
                super().__init__()
                self.dim = dim
                self.register_buffer("decay", torch.log(1 - 2 ** (-5 - torch.arange(heads, dtype=torch.float))))

            def forward(self, slen: int):
                angle = 1.0 / (10000 ** (torch.arange(0, self.dim, 2, dtype=torch.float32) / self.dim))
                index = torch.arange(slen).to(self.decay)
                sin = torch.sin(index[:, None] * angle[None, :])
                cos = torch.cos(index[:, None] * angle[None, :])
                return sin, cos
        ''')
    assert _found(source) == {(13, "RPL005"): "safe"}
    fixed = fix_text("rotary.py", source, ALL, unsafe=False)
    assert "index = torch.arange(slen).to(self.decay.device, torch.float32)\n" in fixed.fixed
    assert fixed.remaining.diagnostics == ()
    with_mask = source.replace("        return sin, cos\n",
                               "        mask = torch.exp((index[:, None] - index[None, :]) * self.decay[:, None, None])\n"
                               "        return sin, cos, mask\n")
    assert with_mask != source and _found(with_mask) == {(13, "RPL005"): "unsafe"}
    compared = source.replace("        return sin, cos\n", "        keep = index[:, None] >= index[None, :]\n"
                                                            "        return sin, cos, keep\n")
    assert compared != source and _found(compared) == {(13, "RPL005"): "safe"}


def test_a_float32_linspace_ramp_from_zero_is_an_exponent():
    """`1.0 / (10000 ** torch.linspace(0, 1, n, dtype=torch.float32))` (torchscale's `angle`) builds inverse
    frequencies with or without the dtype argument: bfloat16 positions multiplied by them are RPL005."""
    source = textwrap.dedent('''\
        import torch
        from torch import nn


        class RotaryRelPos(nn.Module):
            def __init__(self, dim=64):
                super().__init__()
                self.angle = 1.0 / (10000 ** torch.linspace(0, 1, dim // 2, dtype=torch.float32))

            def forward(self, slen: int):
                index = torch.arange(slen).to(torch.bfloat16)
                return torch.sin(index[:, None] * self.angle[None, :])
        ''')
    assert set(_found(source)) == {(11, "RPL005")}
    untyped = source.replace(", dtype=torch.float32))", "))")
    assert untyped != source and (11, "RPL005") in _found(untyped)


def test_state_written_earlier_in_forward_is_read_as_the_value_written():
    """Phi-3 LongRoPE: `self.inv_freq = 1.0 / (ext_factors.float() * self.base**shape)` in forward, then
    `self.inv_freq[None, :, None]`: the read is the value just written, so the rounding comes from the
    float factor buffers (RPL002 at their reads), not from the `inv_freq` buffer registered as `None`."""
    source = textwrap.dedent('''\
        import torch
        from torch import nn


        class LongRoPE(nn.Module):
            def __init__(self, dim, short_factor, long_factor, base=10000.0, original_max=4096):
                super().__init__()
                self.dim, self.base, self.original_max = dim, base, original_max
                self.register_buffer("inv_freq", None, persistent=False)
                self.register_buffer("short_factor", torch.tensor(short_factor, dtype=torch.float32), persistent=False)
                self.register_buffer("long_factor", torch.tensor(long_factor, dtype=torch.float32), persistent=False)

            def forward(self, x, position_ids):
                if position_ids.max() + 1 > self.original_max:
                    ext_factors = self.long_factor
                else:
                    ext_factors = self.short_factor
                shape = torch.arange(0, self.dim, 2, dtype=torch.int64, device=x.device).float() / self.dim
                self.inv_freq = 1.0 / (ext_factors.float() * self.base**shape)
                freqs = position_ids[:, :, None].float() * self.inv_freq[None, None, :]
                return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)
        ''')
    result = check_text("rotary.py", source, ALL)
    assert {(d.line, d.code) for d in result.diagnostics} == {(15, "RPL002"), (17, "RPL002")}
    assert all("factors of the inverse frequencies" in d.message for d in result.diagnostics)


def test_freqs_cos_and_freqs_sin_are_tables_not_frequencies():
    """llama2.c's `apply_rotary_emb(xq, xk, freqs_cos, freqs_sin)`: the rotated queries cast back with
    `.type_as(xq)` are no inverse frequencies (no RPL006); Wan-style `freqs_cos` buffers are cos/sin tables
    a module cast rounds (RPL011)."""
    source = textwrap.dedent('''\
        import torch
        from torch import nn


        def apply_rotary_emb(xq, freqs_cos, freqs_sin):
            xq_r, xq_i = xq.float().reshape(xq.shape[:-1] + (-1, 2)).unbind(-1)
            out_r = xq_r * freqs_cos - xq_i * freqs_sin
            out_i = xq_r * freqs_sin + xq_i * freqs_cos
            return torch.stack([out_r, out_i], dim=-1).flatten(3).type_as(xq)


        class TableRotary(nn.Module):
            def __init__(self, dim=64, max_len=4096):
                super().__init__()
                inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
                freqs = torch.outer(torch.arange(max_len, dtype=torch.float64), inv_freq)
                self.register_buffer("freqs_cos", freqs.cos(), persistent=False)
                self.register_buffer("freqs_sin", freqs.sin(), persistent=False)

            def forward(self, x):
                n = x.shape[1]
                return self.freqs_cos[:n], self.freqs_sin[:n]
        ''')
    assert {code for _, code in _found(source)} == {"RPL011"}


def test_positions_made_on_the_cpu_keep_the_move_type_as_makes():
    """Wav2Vec2-Conformer: `torch.arange(n).type_as(self.inv_freq)` builds positions on the CPU and relies on
    `type_as` (`.type(self.inv_freq.type())`, which names `torch.cuda.FloatTensor` on a GPU) to move them: the
    fix keeps the move, `.to(self.inv_freq.device, torch.float32)`. An arange placed with `device=` itself
    only needs `.float()`."""
    source = textwrap.dedent('''\
        import torch
        from torch import nn


        class ConformerRotary(nn.Module):
            def __init__(self, dim=64, base=10000.0):
                super().__init__()
                inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
                self.register_buffer("inv_freq", inv_freq, persistent=False)

            def forward(self, hidden_states):
                time_stamps = torch.arange(hidden_states.shape[1]).type_as(self.inv_freq)
                freqs = torch.einsum("i,j->ij", time_stamps, self.inv_freq)
                return freqs.cos().to(hidden_states.dtype), freqs.sin().to(hidden_states.dtype)
        ''')
    fixed = fix_text("rotary.py", source, ALL, unsafe=False).fixed
    assert "time_stamps = torch.arange(hidden_states.shape[1]).to(self.inv_freq.device, torch.float32)\n" in fixed
    placed = source.replace("torch.arange(hidden_states.shape[1])",
                            "torch.arange(hidden_states.shape[1], device=hidden_states.device)")
    assert placed != source
    assert ("time_stamps = torch.arange(hidden_states.shape[1], device=hidden_states.device).float()\n"
            in fix_text("rotary.py", placed, ALL, unsafe=False).fixed)


def test_a_lambda_is_analysed_at_its_call_with_the_arguments_it_gets():
    """A matmul phase inside a lambda, called in place or through a local name, is RPL003; its left operand
    ends in an axis of one (`p.unsqueeze(-1)`) and the right one has at least two axes (`w.unsqueeze(0)`),
    so the matmul contracts one element and the elementwise rewrite is exact (safe). A lambda never called
    is not analysed."""
    source = '''\
        import torch


        def omega(d: int, theta: float = 10000.0) -> torch.Tensor:
            return 1.0 / theta ** (torch.arange(0, d, 2, dtype=torch.float32) / d)


        def phases(ids: torch.Tensor, dims: list[int]):
            omegas = [omega(d) for d in dims]
            return [(lambda p, w: p.unsqueeze(-1) @ w.unsqueeze(0))(ids[..., i].float(), omegas[i])
                    for i in range(len(dims))]


        def named(pos: torch.Tensor, d: int):
            outer = lambda p, w: p.unsqueeze(-1) @ w.unsqueeze(0)
            angles = outer(pos.float(), omega(d))
            return angles.cos(), angles.sin()
        '''
    assert _found(source) == {(10, "RPL003"): "safe", (15, "RPL003"): "safe"}
    fixed = _fixed(source)
    assert fixed.count("p.unsqueeze(-1) * w.unsqueeze(0)") == 2 and "@" not in fixed
    assert _found(fixed) == {}
    uncalled = source.replace("angles = outer(pos.float(), omega(d))",
                              "angles = pos.float()[:, None] * omega(d)")
    assert _found(uncalled) == {(10, "RPL003"): "safe"}
    # Without a proof of two axes on the right, `w` may be 1-D and `@` then drops the last axis.
    unproven = source.replace("@ w.unsqueeze(0))(", "@ w)(")
    assert _found(unproven)[(10, "RPL003")] == "unsafe"


def test_tables_allocated_from_named_ids_truncate_what_is_written_into_them():
    """`cos = bar_ids.new_zeros(...)`: `*_ids` are index tensors (int64), so cos/sin written into slices of it
    truncate (RPL001 at the allocation, fixed by allocating float32). A float allocation is clean."""
    source = '''\
        import torch


        def tables(bar_ids: torch.Tensor, dim: int = 16, theta: float = 10000.0):
            bar_ids = bar_ids.clamp(0, 511)
            inv_freq = 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim)
            cos = bar_ids.new_zeros(*bar_ids.shape, dim // 2)
            angle = bar_ids.unsqueeze(-1).float() * inv_freq
            cos[..., :] = angle.cos()
            return cos
        '''
    assert _found(source) == {(7, "RPL001"): "safe"}
    fixed = _fixed(source)
    assert "bar_ids.new_zeros(*bar_ids.shape, dim // 2, dtype=torch.float32)" in fixed
    assert _found(fixed) == {}
    # An unnamed float tensor claims nothing.
    assert _found(source.replace("bar_ids", "coords")) == {}


def test_a_table_attribute_first_set_to_none_and_gathered_with_embedding_keeps_its_meaning():
    """`self._cos = None` in `__init__`, the tables assigned in a builder, then
    `F.embedding(position_ids, self._cos).type_as(position_ids)` in forward: a table cast to the ids' dtype."""
    source = '''\
        import torch
        import torch.nn.functional as F
        from torch import nn


        class Rotary(nn.Module):
            def __init__(self, dim: int):
                super().__init__()
                self.dim = dim
                self._cos = None

            def _build(self, n: int, device):
                inv_freq = 1.0 / (10000 ** (torch.arange(0, self.dim, 2, device=device, dtype=torch.float32) / self.dim))
                t = torch.arange(n, device=device, dtype=torch.float32)
                self._cos = (t[:, None] * inv_freq[None, :]).cos()

            def forward(self, x: torch.Tensor, position_ids: torch.Tensor):
                if self._cos is None:
                    self._build(4096, x.device)
                return F.embedding(position_ids, self._cos).type_as(position_ids)
        '''
    assert _found(source) == {(20, "RPL001"): "safe"}
    fixed = _fixed(source)
    assert "F.embedding(position_ids, self._cos).type_as(x)" in fixed
    assert _found(source.replace(".type_as(position_ids)", ".type_as(x)")) == {}


def test_positions_appended_to_a_list_keep_their_dtype_through_cat():
    """`pos_ids.append(torch.stack([h, w], -1))` for integer aranges, then `torch.cat(pos_ids)`: integer
    positions, so `emb.cos().to(pos_ids)` casts the tables to int64 (RPL001; the fix keeps the device move)."""
    source = '''\
        import torch


        def patch_tables(grid_hw: torch.Tensor, dim: int = 32, theta: float = 10000.0):
            pos_ids = []
            for h, w in grid_hw.tolist():
                hpos = torch.arange(h).unsqueeze(1).expand(-1, w).flatten()
                wpos = torch.arange(w).unsqueeze(0).expand(h, -1).flatten()
                pos_ids.append(torch.stack([hpos, wpos], dim=-1))
            pos_ids = torch.cat(pos_ids, dim=0)
            inv_freq = 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim)
            emb = (pos_ids.unsqueeze(-1).float() * inv_freq).flatten(1)
            return emb.cos().to(pos_ids), emb.sin().to(pos_ids)
        '''
    assert _found(source) == {(13, "RPL001"): "safe"}
    fixed = _fixed(source)
    assert "emb.cos().to(pos_ids.device)" in fixed and _found(fixed) == {}


def test_a_frequency_matrix_filled_block_by_block_forms_the_phase_of_its_einsum():
    """`mat[a, lo:hi] = inv_freq` into a zeros matrix makes a (block-diagonal) frequency matrix; the einsum of
    coordinates with it sums over the axes: RPL003. Nothing in the file bounds the contracted size (the
    coordinates' last axis), so the safe fix sums one elementwise term per coordinate; it parenthesises an
    operand that is an expression."""
    source = '''\
        import math
        import torch


        def coord_phase(coords: torch.Tensor, axis_dim: int = 16, axes: int = 3):
            n = axis_dim // 2
            inv_freq = torch.exp(-math.log(10000.0) * torch.arange(0, axis_dim, 2, dtype=torch.float32) / axis_dim)
            mat = torch.zeros(axes, axes * n, dtype=torch.float32)
            for a in range(axes):
                mat[a, a * n:(a + 1) * n] = inv_freq
            phase = torch.einsum("bnc,cf->bnf", coords.float() * 100.0, mat)
            return phase.cos(), phase.sin()
        '''
    assert _found(source) == {(11, "RPL003"): "safe"}
    fixed = _fixed(source)
    assert "phase = sum((coords.float() * 100.0)[:, :, k][:, :, None] * mat[k][None, None, :] " \
           "for k in range((coords.float() * 100.0).shape[2]))" in fixed
    assert _found(fixed) == {}


def test_bmm_with_an_axis_of_one_is_an_outer_product_and_an_added_term_is_never_dropped():
    """`torch.bmm(pos, inv)` with `pos = rank.float().unsqueeze(-1)`: bmm takes three axes, so the other operand's
    contracted axis is one too; guarded by `torch.cuda.amp.autocast(enabled=False)`, RPL004's fix (remove the
    guard, elementwise product) is safe. `torch.baddbmm(bias, pos, inv)` adds a term: reported, no fix."""
    source = '''\
        import torch


        def angles(rank: torch.Tensor, dim: int = 32):
            inv_freq = 1.0 / (10000.0 ** (torch.arange(0, dim, 2).float() / dim))
            with torch.cuda.amp.autocast(enabled=False):
                pos = rank.float().unsqueeze(-1)
                inv = inv_freq.float().view(1, 1, -1).expand(rank.shape[0], -1, -1)
                freqs = torch.bmm(pos, inv)
            return freqs.cos(), freqs.sin()
        '''
    assert _found(source) == {(6, "RPL004"): "safe"}
    fixed = _fixed(source)
    assert "freqs = (pos * inv)" in fixed and "autocast" not in fixed and _found(fixed) == {}
    unguarded = textwrap.dedent(source).replace("    with torch.cuda.amp.autocast(enabled=False):\n", "    if True:\n")
    added = unguarded.replace("torch.bmm(pos, inv)", "torch.baddbmm(torch.zeros(1), pos, inv)")
    assert {(d.line, d.code, d.fix) for d in check_text("rotary.py", added, ALL).diagnostics} \
        == {(9, "RPL003", None)}


def test_a_dtype_added_to_a_call_that_unpacks_keywords_goes_into_the_unpacked_dict():
    """`torch.arange(0, d, 2, **factory_kwargs)` with `factory_kwargs = {"device": ..., "dtype": dtype}`: a
    `dtype=` beside the unpacking would raise "got multiple values" at run time, so the fix writes
    `**{**factory_kwargs, "dtype": torch.float32}`; the analysis reads that dict, so a second fix adds nothing."""
    torch = pytest.importorskip("torch")
    source = textwrap.dedent('''\
        import torch


        def inv_freq(dim: int, base: float = 10000.0, device=None, dtype=None):
            factory_kwargs = {"device": device, "dtype": dtype}
            return 1.0 / (base ** (torch.arange(0, dim, 2, **factory_kwargs) / dim))


        def tables(n: int, dim: int = 64, dtype=None):
            t = torch.arange(n, dtype=torch.float32)
            freqs = torch.outer(t, inv_freq(dim, dtype=dtype))
            return freqs.cos(), freqs.sin()
        ''')
    assert {code for _, code in _found(source)} == {"RPL006"}
    fixed = fix_text("rotary.py", source, ALL, unsafe=False).fixed
    assert 'torch.arange(0, dim, 2, **{**factory_kwargs, "dtype": torch.float32})' in fixed
    assert fix_text("rotary.py", fixed, ALL, unsafe=False).fixed == fixed and _found(fixed) == {}
    namespace: dict = {}
    exec(compile(fixed, "rotary.py", "exec"), namespace)  # noqa: S102 - the test's own source
    cos, _ = namespace["tables"](40000, dtype=torch.bfloat16)
    assert cos.dtype == torch.float32
    t = torch.arange(40000, dtype=torch.float64)
    expected = torch.outer(t, 1.0 / 10000.0 ** (torch.arange(0, 64, 2, dtype=torch.float64) / 64)).cos()
    torch.testing.assert_close(cos.double(), expected, rtol=0, atol=5e-3)


def test_a_float64_table_cast_to_integer_positions_becomes_float32_not_float64():
    """Flux's `rope` computes in float64 and returns `out.to(pos.dtype)`: float32 for float coordinates,
    int64 (truncated) for ids. Dropping the cast would return float64; the fix casts to float32."""
    source = '''\
        import torch


        def rope(pos: torch.Tensor, dim: int, theta: float) -> torch.Tensor:
            scale = torch.arange(0, dim, 2, dtype=torch.float64, device=pos.device) / dim
            omega = 1.0 / (theta**scale)
            out = torch.einsum("...n,d->...nd", pos.to(torch.float64), omega)
            out = torch.stack([torch.cos(out), -torch.sin(out), torch.sin(out), torch.cos(out)], dim=-1)
            return out.to(pos.dtype)
        '''
    assert _found(source) == {(9, "RPL001"): "safe"}
    fixed = _fixed(source)
    assert "return out.float()" in fixed and _found(fixed) == {}


def test_a_type_name_of_ids_casts_the_tables_and_the_fix_keeps_the_activations_device():
    """`sin.type(position_ids.type())` ("torch.LongTensor", or "torch.cuda.LongTensor" on a GPU) truncates;
    the fix names the activation's type, which carries its device as the original carried the ids'."""
    source = '''\
        import torch


        def rotate(query: torch.Tensor, position_ids: torch.Tensor, dim: int = 32):
            inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
            angles = position_ids.float()[..., None] * inv_freq
            sin, cos = angles.sin(), angles.cos()
            sin, cos = sin.type(position_ids.type()), cos.type(position_ids.type())
            return query * cos.repeat_interleave(2, -1) + query * sin.repeat_interleave(2, -1)
        '''
    assert _found(source) == {(8, "RPL001"): "safe"}
    fixed = _fixed(source)
    assert "sin, cos = sin.type(query.type()), cos.type(query.type())" in fixed and _found(fixed) == {}


def test_tables_allocated_like_integer_positions_or_cast_to_a_tokenizer_mask_truncate():
    """`torch.empty_like(pos)` of integer positions, then `sin.copy_(...)`: RPL001 at the allocation (float32
    added). `.to(attention_mask.dtype)`: a tokenizer mask is int64 or bool, RPL001 (the cast goes)."""
    source = '''\
        import torch


        def tables(input_ids: torch.Tensor, attention_mask=None, dim: int = 32):
            inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
            position_ids = torch.arange(input_ids.shape[-1], device=input_ids.device)
            if attention_mask is not None:
                angles = position_ids[..., None].float() * inv_freq
                return angles.sin().to(attention_mask.dtype)
            pos = position_ids[..., None].expand(-1, dim // 2)
            sin = torch.empty_like(pos, memory_format=torch.contiguous_format)
            sin.copy_(torch.sin(position_ids[..., None].float() * inv_freq))
            return sin
        '''
    assert _found(source) == {(9, "RPL001"): "safe", (11, "RPL001"): "safe"}
    fixed = _fixed(source)
    assert "torch.empty_like(pos, memory_format=torch.contiguous_format, dtype=torch.float32)" in fixed
    assert "return angles.sin()\n" in fixed and _found(fixed) == {}


def test_a_helper_that_only_casts_to_its_second_argument_is_dropped_when_handed_positions():
    """`def _match(t, ref): return t.to(ref.dtype)` called with a `positions` parameter (int64 ids by
    convention): RPL001 at the call, fixed by keeping only the table. A helper that does more keeps the
    finding without a fix."""
    source = '''\
        import torch


        def _match(t: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
            return t.to(ref.dtype)


        def tables(positions: torch.Tensor, dim: int = 32):
            inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
            angles = positions.float()[..., None] * inv_freq
            return _match(torch.cos(angles), positions), _match(torch.sin(angles), positions)
        '''
    assert _found(source) == {(11, "RPL001"): "safe"}
    fixed = _fixed(source)
    assert "return torch.cos(angles), torch.sin(angles)" in fixed and _found(fixed) == {}
    busier = source.replace("return t.to(ref.dtype)", "assert t.dim() >= 1\n            return t.to(ref.dtype)")
    assert set(_found(busier).values()) == {None}


def test_guards_held_in_an_attribute_or_chosen_by_a_conditional_expression_are_guards():
    """`self._no_amp = functools.partial(torch.autocast, "cuda", enabled=False)` then `with self._no_amp():`,
    and `amp_off = nullcontext() if ... else torch.autocast("cuda", enabled=False)` then `with amp_off:`:
    both RPL004, fixed by removing the `with` and making the product elementwise."""
    source = '''\
        import contextlib
        import functools

        import torch
        from torch import nn


        class Rotary(nn.Module):
            def __init__(self, dim: int = 32):
                super().__init__()
                self.dim = dim
                self._no_amp = functools.partial(torch.autocast, "cuda", enabled=False)

            def forward(self, x: torch.Tensor, position_ids: torch.Tensor):
                inv_freq = 1.0 / (10000 ** (torch.arange(0, self.dim, 2, device=x.device, dtype=torch.float32) / self.dim))
                with self._no_amp():
                    freqs = position_ids.float()[:, :, None] @ inv_freq[None, None, :]
                return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)

            def angles(self, x: torch.Tensor, t: torch.Tensor):
                inv_freq = 1.0 / (10000 ** (torch.arange(0, self.dim, 2, device=x.device, dtype=torch.float32) / self.dim))
                amp_off = contextlib.nullcontext() if not x.is_cuda else torch.autocast("cuda", enabled=False)
                with amp_off:
                    freqs = torch.matmul(t.float()[:, None], inv_freq[None, :])
                return freqs
        '''
    assert _found(source) == {(16, "RPL004"): "safe", (23, "RPL004"): "safe"}
    fixed = _fixed(source)
    assert "with " not in fixed and "@" not in fixed and "matmul" not in fixed and _found(fixed) == {}


def test_a_phase_written_by_a_helper_into_a_buffer_the_caller_allocated_from_ids_truncates():
    """Qwen3-VL-style `apply_interleaved_mrope(freqs, section, out)` writes the phase into `out`; the caller
    allocates it with `position_ids.new_empty(...)` (int64): RPL001 at the allocation. A float32 buffer is
    clean."""
    source = '''\
        import torch


        def apply_interleaved_mrope(freqs: torch.Tensor, mrope_section, out: torch.Tensor) -> torch.Tensor:
            out[...] = freqs[0]
            for dim, offset in enumerate((1, 2), start=1):
                length = mrope_section[dim] * 3
                idx = slice(offset, length, 3)
                out[..., idx] = freqs[dim, ..., idx]
            return out


        def mrope(position_ids: torch.Tensor, dim: int = 32, section=(4, 6, 6)):
            inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
            freqs = position_ids[..., None].float() * inv_freq
            freqs_t = position_ids.new_empty((*position_ids.shape[1:], freqs.shape[-1]))
            freqs = apply_interleaved_mrope(freqs, section, freqs_t)
            return freqs.cos(), freqs.sin()
        '''
    assert _found(source) == {(16, "RPL001"): "safe"}
    fixed = _fixed(source)
    assert "freqs.shape[-1]), dtype=torch.float32)" in fixed and _found(fixed) == {}


def test_autocast_switched_off_and_back_on_around_the_phase_is_a_guard():
    """`torch.set_autocast_enabled(False)` ... `torch.set_autocast_enabled(True)` around a matmul phase: RPL004.
    The fix deletes both switches (the second one also forced autocast on for callers that never enabled it)
    and makes the product elementwise; a lone switch without its partner is no region."""
    source = '''\
        import torch


        def phase(n: int, dim: int = 32):
            inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
            seq = torch.arange(n, dtype=torch.float32)
            torch.set_autocast_enabled(False)
            freqs = torch.matmul(seq.unsqueeze(1), inv_freq.unsqueeze(0))
            torch.set_autocast_enabled(True)
            return freqs
        '''
    assert _found(source) == {(7, "RPL004"): "safe"}
    fixed = _fixed(source)
    assert "set_autocast_enabled" not in fixed and "freqs = (seq.unsqueeze(1) * inv_freq.unsqueeze(0))" in fixed
    assert _found(fixed) == {}
    lone = source.replace("            torch.set_autocast_enabled(True)\n", "")
    assert _found(lone) == {(8, "RPL003"): "safe"}


def test_engine_shapes_positions_reassigned_from_the_parameter_and_buffers_a_helper_fills():
    """vLLM's `forward_native`: `positions = positions.flatten()` then
    `cache.to(positions.device, dtype=positions.dtype)` still names the ids' dtype (RPL001, the device move
    stays); a helper that copies the phase it is handed into `positions.new_empty(...)` truncates it (RPL001 at
    that allocation)."""
    source = '''\
        import torch


        def _merge(chunk: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
            out = positions.new_empty(chunk.shape[1:])
            out.copy_(chunk[0])
            return out


        def tables(positions: torch.Tensor, query: torch.Tensor, dim: int = 32):
            positions = positions.flatten()
            inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
            cache = (torch.arange(4096, dtype=torch.float32)[:, None] * inv_freq).cos()
            cache = cache.to(positions.device, dtype=positions.dtype)
            phase = positions.float()[None, :, None] * inv_freq
            return cache[positions], _merge(phase, positions)
        '''
    assert _found(source) == {(5, "RPL001"): "safe", (14, "RPL001"): "safe"}
    fixed = _fixed(source)
    assert "positions.new_empty(chunk.shape[1:], dtype=torch.float32)" in fixed
    assert "cache = cache.to(positions.device, dtype=query.dtype)" in fixed and _found(fixed) == {}


def test_a_dtype_reaching_a_table_builder_through_a_held_object_and_a_static_method():
    """TensorRT-LLM style: a module holds `self.rope_params` (annotated `RopeParams`, a class of the file) and
    calls `self.rope_params.create_rope_const_params(dtype=position_ids.dtype)`, which hands `dtype` to the
    static `RopeUtils.create_rope_tables(..., dtype=dtype)` that ends in `.to(dtype)`: RPL001 at the outer call,
    fixed to `torch.float32`, although neither the holder nor the config class has rotary code of its own."""
    source = '''\
        from dataclasses import dataclass

        import torch
        import torch.nn as nn


        @dataclass
        class RopeParams:
            dim: int = 32
            max_positions: int = 4096

            def create_rope_const_params(self, dtype=torch.float32):
                return RopeUtils.create_rope_tables(self.max_positions, self.dim, dtype=dtype)


        class RopeUtils:
            @staticmethod
            def create_rope_tables(num_pos: int, dim: int, dtype=torch.float32):
                inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
                angles = torch.arange(num_pos, dtype=torch.float32)[:, None] * inv_freq
                return torch.cat((angles.cos(), angles.sin()), dim=-1).to(dtype)


        class Holder(nn.Module):
            def __init__(self, rope_params: RopeParams):
                super().__init__()
                self.rope_params = rope_params

            def table(self, position_ids: torch.Tensor):
                return self.rope_params.create_rope_const_params(dtype=position_ids.dtype)[position_ids]
        '''
    assert _found(source) == {(30, "RPL001"): "safe"}
    fixed = _fixed(source)
    assert "create_rope_const_params(dtype=torch.float32)" in fixed and _found(fixed) == {}


def test_notebook_shapes_legacy_long_tensors_and_module_level_dtype_constants():
    """`pos = torch.LongTensor(list(range(n)))` is int64, so `cos.to(pos)` truncates (RPL001, the move stays);
    `DTYPE = torch.bfloat16` at module level makes `torch.arange(n, dtype=DTYPE)` 16-bit positions (RPL005)."""
    source = '''\
        import torch

        DTYPE = torch.bfloat16


        def tables(n: int, dim: int = 32):
            inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
            t = torch.arange(n, dtype=DTYPE)
            freqs = t[:, None].float() * inv_freq
            pos = torch.LongTensor(list(range(n)))
            return freqs.cos().to(pos), freqs.sin().to(DTYPE)
        '''
    assert _found(source) == {(8, "RPL005"): "safe", (11, "RPL001"): "safe"}
    fixed = _fixed(source)
    assert "t = torch.arange(n, dtype=torch.float32)" in fixed and "freqs.cos().to(pos.device)" in fixed
    assert _found(fixed) == {}
    assert _found(source.replace("DTYPE = torch.bfloat16", "DTYPE = torch.float32")) == {(11, "RPL001"): "safe"}


def test_factor_buffers_handed_to_a_frequency_method_are_rounded_state():
    """Engine-style LongRoPE: `inv_freq = self._compute_inv_freq(self.long_factor)` where the method widens
    its argument (`rescale_factors.float()`): the factors were rounded by a module cast before the call, so
    RPL002 reports the factor buffer (safe keep fix). Plain float arguments stay clean."""
    source = '''\
        import torch
        from torch import nn


        class LongRope(nn.Module):
            def __init__(self, dim: int = 32, base: float = 10000.0):
                super().__init__()
                self.dim, self.base = dim, base
                factors = [1.0 + 0.1 * i for i in range(dim // 2)]
                self.register_buffer("long_factor", torch.tensor(factors, dtype=torch.float32), persistent=False)

            def _compute_inv_freq(self, rescale_factors: torch.Tensor) -> torch.Tensor:
                exponent = torch.arange(0, self.dim, 2, dtype=torch.float, device=rescale_factors.device)
                return 1.0 / (rescale_factors.float() * self.base ** (exponent / self.dim))

            def forward(self, positions: torch.Tensor):
                inv_freq = self._compute_inv_freq(self.long_factor)
                freqs = positions.to(torch.float32)[:, None] * inv_freq[None, :]
                return freqs.cos(), freqs.sin()
        '''
    assert _found(source) == {(17, "RPL002"): "safe"}
    fixed = _fixed(source)
    assert "def _apply(self, fn, *args, **kwargs)" in fixed and _found(fixed) == {}
    plain = source.replace('self.register_buffer("long_factor", torch.tensor(factors, dtype=torch.float32), '
                           'persistent=False)', "self.long_factor = torch.tensor(factors, dtype=torch.float32)")
    assert plain != source
    assert _found(plain) == {}


def test_python_list_tables_cached_in_a_dict_and_copied_by_the_ids_new_tensor():
    """Tables built as Python lists (`math.cos` in a comprehension), cached in `self._tables[n]` and read back
    through a method's tuple, then `position_ids.new_tensor(cos_tab)`: a copy in int64 (RPL001, safe: the copy
    is made float32 and keeps the ids' device). The same copy with `dtype=torch.float32` is clean."""
    source = '''\
        import math
        import torch
        from torch import nn


        class ListRotary(nn.Module):
            def __init__(self, head_dim=64, base=10000):
                super().__init__()
                self.freqs = [base ** (-2.0 * i / head_dim) for i in range(head_dim // 2)]
                self._tables = {}

            def _tables_for(self, n):
                if n not in self._tables:
                    cos_tab = [[math.cos(p * f) for f in self.freqs] for p in range(n)]
                    sin_tab = [[math.sin(p * f) for f in self.freqs] for p in range(n)]
                    self._tables[n] = (cos_tab, sin_tab)
                return self._tables[n]

            def forward(self, x, position_ids):
                cos_tab, sin_tab = self._tables_for(int(position_ids.max()) + 1)
                cos = position_ids.new_tensor(cos_tab)
                sin = position_ids.new_tensor(sin_tab)
                return cos[position_ids].to(x.dtype), sin[position_ids].to(x.dtype)
        '''
    assert _found(source) == {(21, "RPL001"): "safe", (22, "RPL001"): "safe"}
    fixed = _fixed(source)
    assert "cos = position_ids.new_tensor(cos_tab, dtype=torch.float32)" in fixed
    assert _found(fixed) == {}
    # A cache of something else (token counts) read the same way is no table.
    counts = source.replace("math.cos(p * f)", "p").replace("math.sin(p * f)", "f")
    assert _found(counts) == {}


def test_a_phase_built_with_numpy_and_registered_as_a_buffer_is_rpl009():
    """`np.outer(positions, inv_freq)` computes in float64 (no product to rewrite), but the phase registered
    as a float32 buffer is rounded by `module.bfloat16()` (RPL009, safe: kept float32 through casts). Cos/sin
    computed in numpy and registered instead are RPL011's (tables), not a phase."""
    source = '''\
        import numpy as np
        import torch
        import torch.nn as nn


        class TextRoPE(nn.Module):
            def __init__(self, dim=64, theta=10000.0, max_len=4096):
                super().__init__()
                inv_freq = 1.0 / theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
                angles = np.outer(np.arange(max_len, dtype=np.float64), inv_freq)
                angles = np.concatenate([angles, angles], axis=-1)
                self.register_buffer("angles", torch.tensor(angles, dtype=torch.float32), persistent=False)

            def forward(self, x):
                ang = self.angles[: x.shape[1]].float()
                return ang.cos().to(x.dtype), ang.sin().to(x.dtype)
        '''
    assert _found(source) == {(12, "RPL009"): "safe"}
    tables = source.replace("angles = np.concatenate([angles, angles], axis=-1)",
                            "angles = np.cos(np.concatenate([angles, angles], axis=-1))")
    assert (12, "RPL009") not in _found(tables)


def test_a_record_of_tables_from_a_cached_property_moved_with_to_positions():
    """`self.tables` is a `functools.cached_property` returning `RotaryTables(cos=..., sin=...)` (a dataclass
    whose `to` forwards to both tensors); `self.tables.to(position_ids)` copies the ids' int64 dtype (RPL001,
    safe: keep only the move to `position_ids.device`). Moving it by device only is clean."""
    source = '''\
        import functools
        from dataclasses import dataclass
        import torch
        from torch import nn


        @dataclass
        class RotaryTables:
            cos: torch.Tensor
            sin: torch.Tensor

            def to(self, *args, **kwargs):
                return RotaryTables(self.cos.to(*args, **kwargs), self.sin.to(*args, **kwargs))


        class Rotary(nn.Module):
            def __init__(self, dim=64, base=10000.0, max_len=4096):
                super().__init__()
                self.dim, self.base, self.max_len = dim, base, max_len

            @functools.cached_property
            def tables(self):
                inv_freq = 1.0 / self.base ** (torch.arange(0, self.dim, 2, dtype=torch.float32) / self.dim)
                emb = torch.arange(self.max_len, dtype=torch.float32)[:, None] * inv_freq[None, :]
                return RotaryTables(cos=emb.cos(), sin=emb.sin())

            def forward(self, x, position_ids):
                tables = self.tables.to(position_ids)
                return tables.cos[position_ids].to(x.dtype), tables.sin[position_ids].to(x.dtype)
        '''
    assert _found(source) == {(28, "RPL001"): "safe"}
    fixed = _fixed(source)
    assert "tables = self.tables.to(position_ids.device)" in fixed
    assert _found(source.replace("self.tables.to(position_ids)", "self.tables.to(x.device)")) == {}


def test_a_rotary_picked_from_a_class_registry_and_handed_token_ids():
    """`self.rotary_emb = ROPE_CLASSES[rope_type](...)` (thin subclasses of one rotary) called with
    `input_ids`: the rotary casts its tables to `x.dtype` (RPL001). Nothing in the holder has the activations'
    dtype, so the fix passes `input_ids.float()` and is unsafe (the callers' dtype is unknown). Handing it the
    hidden states instead is clean."""
    source = '''\
        import torch
        from torch import nn


        class RotaryBase(nn.Module):
            def __init__(self, dim, base=10000.0):
                super().__init__()
                self.dim, self.base = dim, base

            def forward(self, x, position_ids):
                inv_freq = 1.0 / self.base ** (torch.arange(0, self.dim, 2, device=x.device).float() / self.dim)
                freqs = position_ids[:, :, None].float() * inv_freq[None, None, :]
                emb = torch.cat((freqs, freqs), dim=-1)
                return emb.cos().to(dtype=x.dtype), emb.sin().to(dtype=x.dtype)


        class LinearRotary(RotaryBase):
            pass


        ROPE_CLASSES = {"default": RotaryBase, "linear": LinearRotary}


        class PositionProvider(nn.Module):
            def __init__(self, head_dim=64, rope_type="default"):
                super().__init__()
                self.rotary_emb = ROPE_CLASSES[rope_type](head_dim)

            def forward(self, input_ids, position_ids):
                return self.rotary_emb(input_ids, position_ids)
        '''
    assert _found(source) == {(30, "RPL001"): "unsafe"}
    fixed = _fixed(source, unsafe=True)
    assert "return self.rotary_emb(input_ids.float(), position_ids)" in fixed
    embedded = source.replace("def forward(self, input_ids, position_ids):", "def forward(self, hidden_states, position_ids):") \
        .replace("self.rotary_emb(input_ids, position_ids)", "self.rotary_emb(hidden_states, position_ids)")
    assert _found(embedded) == {}


def test_an_optional_like_tensor_falling_back_to_the_positions():
    """A plain table object's `__call__(positions, like=None)` does `like = positions if like is None else like`
    and casts to `like.dtype`; the module calls `self.table(position_ids)` (RPL001 at the call, safe: pass
    `like=q`, the module's activation). Passing `like=q` already is clean."""
    source = '''\
        import torch
        from torch import nn


        class RopeTable:
            def __init__(self, dim, base=10000.0):
                self.dim, self.base = dim, base

            def __call__(self, positions, like=None):
                like = positions if like is None else like
                inv_freq = 1.0 / self.base ** (torch.arange(0, self.dim, 2, device=positions.device).float() / self.dim)
                emb = positions.float()[..., None] * inv_freq
                emb = torch.cat((emb, emb), dim=-1)
                return emb.cos().to(like.dtype), emb.sin().to(like.dtype)


        class RotaryQK(nn.Module):
            def __init__(self, head_dim=64):
                super().__init__()
                self.table = RopeTable(head_dim)

            def forward(self, q, k, position_ids):
                cos, sin = self.table(position_ids)
                return q * cos, k * sin
        '''
    assert _found(source) == {(23, "RPL001"): "safe"}
    fixed = _fixed(source)
    assert "cos, sin = self.table(position_ids, like=q)" in fixed
    assert _found(fixed) == {}


def test_dtype_fallbacks_spelled_as_conditional_expressions():
    """`out_dtype = dtype if dtype is not None else pos.dtype` (HunyuanVideo) with a caller that leaves `dtype`
    out and passes an integer grid made by a helper of any size, and `dtype = position_ids.dtype if dtype is
    None else dtype` in a forward whose holder calls `self.rope(position_ids)`: RPL001, safe."""
    functional = '''\
        import torch


        def get_meshgrid(start, stop):
            """An integer grid; long enough not to count as a small helper."""
            axes = []
            for a, b in zip(start, stop):
                axes.append(torch.arange(a, b))
            # one tensor per axis, stacked
            grid = torch.meshgrid(*axes, indexing="ij")
            out = torch.stack(grid, dim=0)
            out = out.reshape(len(axes), -1)
            out = out.contiguous()
            return out


        def get_1d_rotary_pos_embed(dim, pos, theta=10000.0, dtype=None):
            out_dtype = dtype if dtype is not None else pos.dtype
            freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, device=pos.device).float() / dim))
            freqs = torch.outer(pos.float(), freqs)
            return freqs.cos().to(out_dtype), freqs.sin().to(out_dtype)


        def get_nd_rotary_pos_embed(dims, start, stop):
            grid = get_meshgrid(start, stop)
            return [get_1d_rotary_pos_embed(d, grid[i]) for i, d in enumerate(dims)]
        '''
    assert _found(functional) == {(26, "RPL001"): "safe"}
    fixed = _fixed(functional)
    assert "get_1d_rotary_pos_embed(d, grid[i], dtype=torch.float32)" in fixed
    assert _found(fixed) == {}

    module = '''\
        import math
        import torch
        from torch import nn


        class RotaryEmbedding(nn.Module):
            def __init__(self, head_dim, theta=10000.0):
                super().__init__()
                self.head_dim, self.theta = head_dim, theta

            def _inv_freq(self, device):
                half = self.head_dim // 2
                exponent = torch.arange(half, device=device, dtype=torch.float32) * (-math.log(self.theta) / half)
                return exponent.exp()

            def forward(self, position_ids, dtype=None):
                dtype = position_ids.dtype if dtype is None else dtype
                freqs = position_ids.float().unsqueeze(-1) * self._inv_freq(position_ids.device)
                emb = torch.cat([freqs, freqs], dim=-1)
                return emb.cos().to(dtype), emb.sin().to(dtype)


        class Backbone(nn.Module):
            def __init__(self, dim=256, n_heads=4):
                super().__init__()
                self.rope = RotaryEmbedding(dim // n_heads)

            def forward(self, x, position_ids):
                return self.rope(position_ids)
        '''
    found = _found(module)
    assert found[(29, "RPL001")] == "safe" and found[(20, "RPL001")] == "safe"
    fixed = _fixed(module)
    assert "return self.rope(position_ids, dtype=x.dtype)" in fixed
    assert _found(fixed) == {}


def test_timestamps_parameters_are_positions_and_broadcast_outer_products_are_phases():
    """`emb.cos().type_as(timestamps)` (a recommender's int64 seconds) is RPL001; `lat.to(torch.float32)[:, None]
    * inv_freq[None, :]` is a phase by its shape, so `.to(x.dtype)` before cos/sin is RPL007 (safe), not an
    inverse-frequency cast (RPL006, unsafe)."""
    timestamps = '''\
        import torch
        from torch import nn


        class TimestampRotary(nn.Module):
            def __init__(self, dim=64, base=10000.0):
                super().__init__()
                self.dim, self.base = dim, base

            def forward(self, timestamps):
                elapsed = timestamps - timestamps[:, :1]
                inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2, dtype=torch.float32) / self.dim))
                freqs = elapsed.unsqueeze(-1) * inv_freq
                emb = torch.cat((freqs, freqs), dim=-1)
                return emb.cos().type_as(timestamps), emb.sin().type_as(timestamps)
        '''
    assert _found(timestamps) == {(15, "RPL001"): "safe"}
    latlon = '''\
        import torch
        from torch import nn


        class LatLonRotary(nn.Module):
            def __init__(self, head_dim=64, theta=100.0):
                super().__init__()
                self.head_dim, self.theta = head_dim, theta

            def forward(self, x, lat, lon):
                d = self.head_dim // 2
                inv_freq = 1.0 / (self.theta ** (torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d))
                f_lat = lat.to(device=x.device, dtype=torch.float32)[:, None] * inv_freq[None, :]
                f_lon = lon.to(device=x.device, dtype=torch.float32)[:, None] * inv_freq[None, :]
                freqs = torch.cat([f_lat, f_lat, f_lon, f_lon], dim=-1).to(x.dtype)
                return freqs.cos(), freqs.sin()
        '''
    assert _found(latlon) == {(15, "RPL007"): "safe"}
    # Frequencies scaled by a per-head factor tensor (no added axis) stay frequencies.
    scaled = latlon.replace("dtype=torch.float32)[:, None]", "dtype=torch.float32)")
    assert (15, "RPL007") not in _found(scaled)
    # RoPE-Mixed's 2-D frequencies, magnitudes times a random unit direction, are frequencies, not a phase.
    mixed = '''\
        import torch
        from torch import nn


        def init_mixed_freqs(dim, theta=10.0):
            mag = 1.0 / (theta ** (torch.arange(0, dim, 4, dtype=torch.float32) / dim))
            direction = torch.randn(2)
            direction = direction / direction.norm()
            return mag[None, :] * direction[:, None]


        class Mixed(nn.Module):
            def __init__(self, dim=64):
                super().__init__()
                self.freqs = nn.Parameter(init_mixed_freqs(dim))
        '''
    assert not any(code == "RPL009" for _, code in _found(mixed))


def test_a_yarn_ramp_clamped_to_the_unit_interval_is_no_positions():
    """`torch.clamp((torch.arange(n) - low) / (high - low), 0, 1)` is YaRN's blend ramp: the frequencies blended
    with it stay frequencies, so the forward's matmul with positions is the phase (RPL003, safe)."""
    source = '''\
        import torch
        from torch import nn


        def _ramp(low, high, n):
            ramp = (torch.arange(n, dtype=torch.float32) - low) / (high - low)
            return torch.clamp(ramp, 0, 1)


        def yarn_inv_freq(dim, base, factor):
            pos_freqs = base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim)
            mask = 1 - _ramp(4, 20, dim // 2)
            return (1.0 / (factor * pos_freqs)) * (1 - mask) + (1.0 / pos_freqs) * mask


        class YarnRotary(nn.Module):
            def __init__(self, dim=128, base=10000.0, factor=4.0):
                super().__init__()
                self.inv_freq = yarn_inv_freq(dim, base, factor)

            def forward(self, x, position_ids):
                inv = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
                freqs = torch.matmul(inv, position_ids[:, None, :].float()).transpose(1, 2)
                emb = torch.cat((freqs, freqs), dim=-1)
                return emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        '''
    assert _found(source) == {(23, "RPL003"): "safe"}


def test_state_updated_in_place_is_not_rebuilt_from_the_constructor():
    """`self.inv_freq.data.copy_(...)` (dynamic NTK) changes the frequencies after `__init__`: rebuilding them from
    `__init__`'s recipe in forward would drop the update, so RPL002's fix keeps the state float32 through module
    casts instead (an `_apply` override)."""
    source = '''\
        import torch
        from torch import nn


        class NtkRotary(nn.Module):
            def __init__(self, dim=64, base=10000.0, dynamic=False):
                super().__init__()
                self.dim, self.base, self.dynamic = dim, base, dynamic
                self.register_buffer("inv_freq", self._compute(base), persistent=False)

            def _compute(self, base):
                return 1.0 / (base ** (torch.arange(0, self.dim, 2, dtype=torch.float32) / self.dim))

            def forward(self, x, position_ids):
                if self.dynamic:
                    self.inv_freq.data.copy_(self._compute(self.base * 2.0))
                freqs = position_ids.float()[..., None] * self.inv_freq.float()
                emb = torch.cat((freqs, freqs), dim=-1)
                return emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        '''
    fixed = _fixed(source)
    assert "def _apply(self, fn, *args, **kwargs):" in fixed and "inv_freq_from" not in fixed
    constant = source.replace("                if self.dynamic:\n                    self.inv_freq.data.copy_(self._compute(self.base * 2.0))\n", "")
    rebuilt = _fixed(constant)
    assert "def _apply(" not in rebuilt and "rope_runtime" in rebuilt


def test_a_private_helper_returning_the_cast_phase_to_its_one_caller():
    """`_angles` returns `torch.cat((f, f), -1).to(dtype)` (and `.to(like)` on another branch) and its only caller
    takes cos/sin: RPL007, safe: the helper returns the float32 phase and the caller casts the tables."""
    source = '''\
        import torch
        from torch import nn


        class Rotary(nn.Module):
            def __init__(self, dim=64, base=10000.0, interleaved=False):
                super().__init__()
                self.dim, self.base, self.interleaved = dim, base, interleaved

            def _angles(self, positions, like):
                inv_freq = 1.0 / self.base ** (torch.arange(0, self.dim, 2, device=positions.device).float() / self.dim)
                ang = positions.to(torch.float32)[..., None] * inv_freq
                if not self.interleaved:
                    return torch.cat((ang, ang), dim=-1).to(like)
                return ang.repeat_interleave(2, dim=-1).to(like)

            def cos_sin(self, positions, like):
                ang = self._angles(positions, like)
                if ang.dim() == 2:
                    ang = ang[None, None]
                return ang.cos(), ang.sin()
        '''
    found = _found(source)
    assert set(found.values()) == {"safe"} and {code for _, code in found} == {"RPL007"}
    fixed = _fixed(source)
    assert "return torch.cat((ang, ang), dim=-1)\n" in fixed and "return ang.repeat_interleave(2, dim=-1)\n" in fixed
    assert "return ang.cos().to(like), ang.sin().to(like)" in fixed
    assert _found(fixed) == {}
    # A second caller would get the float32 phase too: no fix.
    shared = source + "\n            def phase(self, positions, like):\n                return self._angles(positions, like)\n"
    assert set(_found(shared).values()) == {None}


def test_frequencies_from_a_comprehension_copied_in_the_positions_dtype():
    """`positions.new_tensor([theta ** (-2.0 * i / dim) for i in range(dim // 2)])`: the comprehension over the
    channel range is the inverse frequencies, copied in the int64 dtype of the positions (RPL006, safe: the copy
    is made float32). A comprehension of per-channel factors (`1.0 + 0.1 * i`) is no frequencies."""
    source = '''\
        import torch


        def phase_shift_factors(positions, *, dim, theta=10000.0):
            inv_freq = positions.new_tensor([theta ** (-2.0 * i / dim) for i in range(dim // 2)])
            phase = positions[..., None] * inv_freq
            return torch.complex(torch.cos(phase), torch.sin(phase))
        '''
    assert _found(source) == {(5, "RPL006"): "safe"}
    fixed = _fixed(source)
    assert "for i in range(dim // 2)], dtype=torch.float32)" in fixed and _found(fixed) == {}
    factors = source.replace("theta ** (-2.0 * i / dim)", "1.0 + 0.1 * i")
    assert _found(factors) == {}


def test_a_scaled_range_named_positions_and_a_private_builder_read_widened():
    """`positions = torch.arange(offset, N).type(dtype_str) * scale` (MLX's legacy cast to the activation dtype)
    forms the phase: RPL005, safe. A private method that builds the frequencies in `x.dtype`, called once and
    read only through `.float()`, gets the in-place float32 fix as safe (nothing else sees its dtype)."""
    mlx = '''\
        import math
        import torch


        def create_cos_sin_theta(N, D, offset=0, base=10000.0, scale=1.0, dtype=torch.float32):
            D = D // 2
            dtype_str = torch.empty((), dtype=dtype).type()
            positions = torch.arange(offset, N).type(dtype_str) * scale
            freqs = torch.exp(-torch.arange(0.0, D, dtype=torch.float32) * (math.log(base) / D))
            theta = positions.reshape(-1, 1) * freqs.reshape(1, -1)
            return torch.cos(theta).to(dtype), torch.sin(theta).to(dtype)
        '''
    assert _found(mlx) == {(8, "RPL005"): "safe"}
    assert "positions = torch.arange(offset, N).float() * scale" in fix_text(
        "rotary.py", textwrap.dedent(mlx), ALL, unsafe=False).fixed
    dynamic = '''\
        import torch
        from torch import nn


        class DynamicRotary(nn.Module):
            def __init__(self, dim=64, base=10000.0):
                super().__init__()
                self.dim, self.base = dim, base

            def _dynamic_inv_freq(self, seq_len, x):
                base = self.base * max(1.0, seq_len / 4096)
                return 1.0 / (base ** (torch.arange(0, self.dim, 2, device=x.device, dtype=x.dtype) / self.dim))

            def forward(self, x, position_ids):
                inv_freq = self._dynamic_inv_freq(int(position_ids.max()) + 1, x)
                freqs = position_ids.float()[..., None] * inv_freq.float()
                return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)
        '''
    assert _found(dynamic) == {(12, "RPL006"): "safe"}
    # A public method: other code may call it and see the dtype change (unsafe).
    assert _found(dynamic.replace("_dynamic_inv_freq", "dynamic_inv_freq")) == {(12, "RPL006"): "unsafe"}


def test_a_users_own_apply_override_runs_super_apply_through_the_helper():
    """The class overrides `_apply` to keep `inv_freq` but forward reads the unprotected phase buffer
    `cached_freqs` (RPL009): the fix routes the override's one `super()._apply(fn, recurse)` through
    `rope_runtime.apply_keeping_dtype`, keeping what the override did around it; a second fix changes nothing."""
    source = '''\
        import torch
        from torch import nn


        class Rotary(nn.Module):
            def __init__(self, dim=64, theta=10000.0, max_len=4096):
                super().__init__()
                inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2).float() / dim))
                self.register_buffer("inv_freq", inv_freq, persistent=False)
                t = torch.arange(max_len, dtype=torch.float32)
                self.register_buffer("cached_freqs", (t[:, None] * inv_freq[None, :]).repeat_interleave(2, -1),
                                     persistent=False)

            def _apply(self, fn, recurse=True):
                inv_freq = self.inv_freq
                super()._apply(fn, recurse)
                self.inv_freq = inv_freq.to(device=self.inv_freq.device)
                return self

            def forward(self, seq_len):
                return self.cached_freqs[:seq_len].float()
        '''
    assert _found(source) == {(11, "RPL009"): "safe"}
    fixed = _fixed(source)
    assert ('rope_runtime.apply_keeping_dtype(self, super()._apply, fn, ("inv_freq", "cached_freqs"), recurse)'
            in fixed) and "self.inv_freq = inv_freq.to(device=self.inv_freq.device)" in fixed
    assert fix_text("rotary.py", fixed, ALL, unsafe=False).fixed == fixed and _found(fixed) == {}
    # Two calls of super()._apply: no edit is certain.
    twice = source.replace("super()._apply(fn, recurse)\n", "super()._apply(fn, recurse)\n                super()._apply(fn, recurse)\n")
    assert _found(twice) == {(11, "RPL009"): None}


def test_a_private_helper_moving_tables_with_the_positions_dtype_keyword():
    """`_expand(table, positions)` ends in `.to(device=positions.device, dtype=positions.dtype)` and both calls
    hand it integer positions: RPL001 at each call, safe: the helper's `dtype=` goes (one edit for both). A third
    call that passes an activation as the reference keeps the helper as it is (no fix)."""
    source = '''\
        import torch


        def _expand(table, positions):
            return table.unsqueeze(1).to(device=positions.device, dtype=positions.dtype)


        def rope_cos_sin(positions, rotary_dim, theta=10000.0):
            inv_freq = 1.0 / (theta ** (torch.arange(0, rotary_dim, 2, dtype=torch.float32) / rotary_dim))
            phase = positions.to(torch.float32)[..., None] * inv_freq
            return _expand(torch.cos(phase), positions), _expand(torch.sin(phase), positions)
        '''
    assert _found(source) == {(11, "RPL001"): "safe"}
    fixed = _fixed(source)
    assert "return table.unsqueeze(1).to(device=positions.device)\n" in fixed and _found(fixed) == {}
    shared = source + "\n\n        def like_query(t, q):\n            return _expand(t, q)\n"
    assert _found(shared) == {(11, "RPL001"): None}


def test_rope_mixed_coordinates_named_t_x_are_positions():
    """RoPE-Mixed's `compute_mixed_cis(freqs, t_x, t_y)`: `t_x` is the x coordinate, not an activation, so
    both matmul phases are RPL003 (before, only the `t_y` one was, and the fix left the `t_x` matmul in place)."""
    source = '''\
        import torch


        def compute_mixed_cis(freqs, t_x, t_y, num_heads):
            n, depth = t_x.shape[0], freqs.shape[1]
            freqs_x = (t_x.unsqueeze(-1) @ freqs[0].unsqueeze(-2)).view(depth, n, num_heads, -1)
            freqs_y = (t_y.unsqueeze(-1) @ freqs[1].unsqueeze(-2)).view(depth, n, num_heads, -1)
            angles = (freqs_x + freqs_y).float()
            return torch.polar(torch.ones_like(angles), angles)
        '''
    assert _found(source) == {(6, "RPL003"): "safe", (7, "RPL003"): "safe"}
    fixed = _fixed(source)
    assert " @ " not in fixed and _found(fixed) == {}


def test_tables_cast_to_the_dtype_of_the_coordinates_their_phase_was_made_from():
    """PTv3-style voxel rope: `dtype = grid_coord.dtype` ... `cos.to(dtype)`, where the phase takes its positions
    from `grid_coord[:, axis, None].float()`: coordinates the function had to make float, so integer voxel
    indices (RPL001, safe). A sinusoidal timestep embedding cast back to its (float) timestep's dtype is no
    rotary and stays clean."""
    source = '''\
        import torch
        from torch import nn


        class VoxelRoPE3D(nn.Module):
            def __init__(self, head_dim=48, theta=100.0):
                super().__init__()
                self.axis_dim, self.theta = head_dim // 3, theta

            def forward(self, feat, grid_coord):
                dtype = grid_coord.dtype
                idx = torch.arange(0, self.axis_dim, 2, dtype=torch.float32)
                inv_freq = self.theta ** (-idx / self.axis_dim)
                parts = []
                for axis in range(3):
                    parts.append(grid_coord[:, axis, None].float() * inv_freq[None, :])
                phase = torch.cat(parts, dim=-1)
                return phase.cos().to(dtype), phase.sin().to(dtype)
        '''
    assert _found(source) == {(18, "RPL001"): "safe"}
    timestep = '''\
        import math
        import torch
        from torch import nn


        class FourierFeatures(nn.Module):
            def __init__(self, dim=256):
                super().__init__()
                self.dim = dim

            def forward(self, timestep):
                timestep = timestep.unsqueeze(-1)
                freqs = torch.exp(torch.linspace(0.0, 1.0, self.dim // 2, dtype=torch.float32) * math.log(10000.0))
                args = timestep.float() * freqs
                return torch.cat([torch.cos(args), torch.sin(args)], dim=-1).to(timestep.dtype)
        '''
    assert _found(timestep) == {}


def test_names_ending_in_positions_are_positions_and_counts_are_not():
    """NaViT: `freqs = patch_positions.new_zeros(...)` then phases written into it: an int64 buffer (RPL001,
    safe). `max_positions` and `num_positions` stay sizes."""
    source = '''\
        import torch
        from torch import nn


        class PackedVisionRotary(nn.Module):
            def __init__(self, head_dim=64, theta=10000.0, max_positions=512):
                super().__init__()
                self.head_dim, self.theta, self.max_positions = head_dim, theta, max_positions

            def forward(self, patch_positions):
                n = self.head_dim // 4
                inv_freq = 1.0 / (self.theta ** (torch.arange(0, self.head_dim // 2, 2, dtype=torch.float) / (self.head_dim // 2)))
                freqs = patch_positions.new_zeros(patch_positions.shape[0], self.head_dim // 2)
                freqs[:, :n] = patch_positions[:, 0:1].float() * inv_freq
                freqs[:, n:] = patch_positions[:, 1:2].float() * inv_freq
                emb = torch.cat((freqs, freqs), dim=-1)
                return emb.cos(), emb.sin()
        '''
    assert _found(source) == {(13, "RPL001"): "safe"}
    fixed = _fixed(source)
    assert "self.head_dim // 2, dtype=torch.float32)" in fixed and _found(fixed) == {}


def test_periods_are_reciprocal_frequencies_rounded_with_the_module():
    """DINOv3's `RopePositionEmbedding`: a persistent `periods` buffer and `angles = 2 * pi * coords / periods`:
    the buffer is the frequencies' reciprocal, rounded by `module.bfloat16()` (RPL002, safe keep fix), and the
    coordinates built in its dtype are RPL005."""
    source = '''\
        import math
        import torch
        from torch import nn


        class RopePositionEmbedding(nn.Module):
            def __init__(self, embed_dim=768, num_heads=12, base=100.0):
                super().__init__()
                d_head = embed_dim // num_heads
                periods = base ** (2 * torch.arange(d_head // 4, dtype=torch.float32) / (d_head // 2))
                self.register_buffer("periods", periods, persistent=True)

            def forward(self, H, W):
                dd = {"device": self.periods.device, "dtype": self.periods.dtype}
                coords_h = torch.arange(0.5, H, **dd) / H
                coords_w = torch.arange(0.5, W, **dd) / W
                coords = torch.stack(torch.meshgrid(coords_h, coords_w, indexing="ij"), dim=-1).flatten(0, 1)
                angles = 2 * math.pi * coords[:, :, None] / self.periods[None, None, :]
                angles = angles.flatten(1, 2).tile(2)
                return torch.sin(angles), torch.cos(angles)
        '''
    found = _found(source)
    assert found[(18, "RPL002")] == "safe" and found[(15, "RPL005")] == "safe"
    fixed = _fixed(source)
    # The construction is copied into a builder forward calls: the same values, recomputed in float32.
    assert "self._build_periods(*self._periods_args" in fixed and _found(fixed) == {}


def test_a_phase_cast_in_dtype_branches_keeps_a_float32_copy_for_cos_sin():
    """`if x.dtype == torch.float16: angles = angles.half()` / `elif ... bfloat16` before `angles.cos()`: the cast
    is chosen per branch, so the fix keeps the angle from before the branches (`angles_f32 = angles`) and casts
    the tables to whatever dtype the branches chose (safe). Without a branch it is the usual RPL007 fix."""
    source = '''\
        import torch
        from torch import nn


        class EmbedND(nn.Module):
            def __init__(self, dim=64, theta=10000.0):
                super().__init__()
                self.dim, self.theta = dim, theta

            def forward(self, x, ids):
                inv = 1.0 / (self.theta ** (torch.arange(0, self.dim, 2, dtype=torch.float32) / self.dim))
                angles = ids.float()[..., None] * inv
                if x.dtype == torch.float16:
                    angles = angles.half()
                elif x.dtype == torch.bfloat16:
                    angles = angles.bfloat16()
                cos, sin = angles.cos(), angles.sin()
                return cos, sin
        '''
    assert _found(source) == {(14, "RPL007"): "safe"}
    fixed = _fixed(source)
    assert "angles_f32 = angles  # ropelint" in fixed
    assert "cos, sin = angles_f32.cos().to(angles.dtype), angles_f32.sin().to(angles.dtype)" in fixed
    assert _found(fixed) == {}
    namespace: dict = {}
    torch = pytest.importorskip("torch")
    exec(compile(fixed, "<fixed>", "exec"), namespace)  # noqa: S102 - the test's own source
    rope = namespace["EmbedND"]()
    ids = torch.tensor([1000, 8190, 30000])
    cos, _ = rope(torch.zeros(1, dtype=torch.bfloat16), ids)
    inv = 1.0 / (10000.0 ** (torch.arange(0, 64, 2, dtype=torch.float64) / 64))
    expected = (ids.double()[..., None] * inv).cos()
    assert cos.dtype == torch.bfloat16
    torch.testing.assert_close(cos.double(), expected, rtol=0, atol=5e-3)  # bf16 rounding of a cos only


def test_tables_without_an_activation_in_reach_are_cast_where_the_attention_receives_them():
    """`rotary(position_ids, cache_position)` returns `cos.to(dtype)` with `dtype = cache_position.dtype` (int64)
    and has no activation to take a dtype from. Dropping the cast alone would hand `forward` float32 tables,
    and `q * cos` would make 16-bit queries float32 (then a dtype error in the attention). The fix drops the
    cast there and casts the tables where `forward` receives them, to `q.dtype` (safe)."""
    source = '''\
        import torch
        import torch.nn.functional as F
        from torch import nn


        class StaticCacheAttention(nn.Module):
            def __init__(self, hidden=64, heads=2, theta=10000.0):
                super().__init__()
                self.head_dim, self.theta = hidden // heads, theta
                self.q_proj = nn.Linear(hidden, hidden)
                self.k_proj = nn.Linear(hidden, hidden)
                self.v_proj = nn.Linear(hidden, hidden)

            def rotary(self, position_ids, cache_position):
                device, dtype = cache_position.device, cache_position.dtype
                inv_freq = 1.0 / (self.theta ** (torch.arange(0, self.head_dim, 2, device=device).float() / self.head_dim))
                freqs = position_ids.float()[:, :, None] * inv_freq[None, None, :]
                emb = torch.cat((freqs, freqs), dim=-1)
                return emb.cos().to(dtype), emb.sin().to(dtype)

            def forward(self, hidden_states, cache_position):
                b, n, _ = hidden_states.shape
                q = self.q_proj(hidden_states).view(b, n, -1, self.head_dim).transpose(1, 2)
                k = self.k_proj(hidden_states).view(b, n, -1, self.head_dim).transpose(1, 2)
                v = self.v_proj(hidden_states).view(b, n, -1, self.head_dim).transpose(1, 2)
                cos, sin = self.rotary(cache_position[None], cache_position)
                q = q * cos[:, None] + torch.cat((-q[..., 16:], q[..., :16]), dim=-1) * sin[:, None]
                k = k * cos[:, None] + torch.cat((-k[..., 16:], k[..., :16]), dim=-1) * sin[:, None]
                return F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, -1)
        '''
    fixed = _fixed(source)
    assert "return emb.cos(), emb.sin()" in fixed
    assert "cos, sin = tuple(t.to(q.dtype) for t in self.rotary(cache_position[None], cache_position))" in fixed
    assert _found(fixed) == {}
    torch = pytest.importorskip("torch")
    namespace: dict = {}
    exec(compile(fixed, "<fixed>", "exec"), namespace)  # noqa: S102 - the test's own source
    attention = namespace["StaticCacheAttention"]().bfloat16()
    out = attention(torch.randn(1, 5, 64, dtype=torch.bfloat16), torch.arange(1000, 1005))
    assert out.dtype == torch.bfloat16  # the 16-bit module still runs (float32 tables would fail in the attention)
    # With the method called a second time from code the file does not show, it falls back to dropping the cast.
    public = source.replace("                return F.scaled_dot_product_attention", "                self.rotary(cache_position[None], cache_position)\n                return F.scaled_dot_product_attention")
    assert "tuple(t.to(q.dtype)" not in _fixed(public)


def test_round_22_meta_init_buffers_and_dtype_plumbing():
    """torchtitan-style `reset_parameters` filling an empty buffer with `self.freqs.copy_(torch.outer(t,
    inv_freq))`: the buffer holds the phase (RPL009, safe keep fix). A cache rebuilt with `dtype=ref.dtype`
    where callers pass position ids as `ref` is RPL001 at the call (no fix). An int64 positions buffer stays
    integer, and a public `precompute_freqs_cis(..., dtype=torch.float32)` called with float32 is clean."""
    meta = '''\
        import torch
        from torch import nn


        class MetaRotary(nn.Module):
            def __init__(self, dim=64, max_seq_len=4096, theta=10000.0):
                super().__init__()
                self.dim, self.max_seq_len, self.theta = dim, max_seq_len, theta
                self.register_buffer("freqs", torch.empty(max_seq_len, dim // 2), persistent=False)

            @torch.no_grad()
            def reset_parameters(self):
                inv_freq = 1.0 / (self.theta ** (torch.arange(0, self.dim, 2, dtype=torch.float32) / self.dim))
                t = torch.arange(self.max_seq_len, dtype=torch.float32)
                self.freqs.copy_(torch.outer(t, inv_freq))

            def forward(self, seqlen):
                freqs = self.freqs[:seqlen]
                return freqs.cos(), freqs.sin()
        '''
    assert _found(meta) == {(15, "RPL009"): "safe"}
    rebuild = '''\
        import torch
        from torch import nn


        class CachedRotary(nn.Module):
            def __init__(self, dim=64, base=10000.0):
                super().__init__()
                self.dim, self.base = dim, base
                self._set_cache(2048, dtype=torch.float32)

            def _set_cache(self, seq_len, dtype=torch.float32):
                inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2, dtype=torch.float32) / self.dim))
                emb = torch.outer(torch.arange(seq_len, dtype=torch.float32), inv_freq)
                self._cos, self._sin = emb.cos().to(dtype), emb.sin().to(dtype)

            def _maybe_rebuild(self, ref):
                if self._cos.dtype != ref.dtype:
                    self._set_cache(self._cos.shape[0], dtype=ref.dtype)

            def forward(self, x, position_ids):
                self._maybe_rebuild(position_ids)
                return self._cos[position_ids].to(x.dtype), self._sin[position_ids].to(x.dtype)
        '''
    # `_maybe_rebuild` reads only `ref.dtype`: the call passes the activation instead (safe); reading the ids'
    # values too (`ref.max()`), it has no fix.
    assert _found(rebuild) == {(21, "RPL001"): "safe"}
    assert "self._maybe_rebuild(x)" in _fixed(rebuild)
    assert _found(rebuild.replace("if self._cos.dtype != ref.dtype:", "if self._cos.dtype != ref.dtype or ref.max() > 9:")) \
        == {(21, "RPL001"): None}
    assert _found(rebuild.replace("self._maybe_rebuild(position_ids)", "self._maybe_rebuild(x)")) == {}
    public = '''\
        import torch
        from torch import nn


        def precompute_freqs_cis(dim, positions, theta=10000.0, *, dtype=torch.float32):
            freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, device=positions.device).to(dtype) / dim))
            angles = positions.to(dtype)[:, None] * freqs[None, :]
            return torch.polar(torch.ones_like(angles), angles)


        class ComplexRotary(nn.Module):
            def __init__(self, head_dim=64, max_seq_len=4096):
                super().__init__()
                self.head_dim = head_dim
                self.register_buffer("positions", torch.empty(max_seq_len, dtype=torch.long), persistent=False)

            def forward(self, start_pos, seqlen):
                pos = self.positions[start_pos:start_pos + seqlen]
                return precompute_freqs_cis(self.head_dim, pos, dtype=torch.float32)
        '''
    assert _found(public) == {}


def test_a_buffer_cast_to_the_configured_dtype_is_kept_without_that_cast():
    """`register_buffer("inv_freq", inv_freq.to(dtype=config.torch_dtype))`: a `*_dtype` field of a config is a
    dtype the configuration chooses (bfloat16 in most). The keep fix (RPL002) also drops that construction cast,
    or the kept buffer would keep what it rounded; the file then checks clean."""
    source = '''\
        import torch
        from torch import nn


        class LlamaRotary(nn.Module):
            def __init__(self, config):
                super().__init__()
                dim = config.head_dim
                inv_freq = 1.0 / (config.rope_theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
                self.register_buffer("inv_freq", inv_freq.to(dtype=config.torch_dtype), persistent=False)

            def forward(self, x, position_ids):
                freqs = position_ids[:, :, None].float() * self.inv_freq[None, None, :].float()
                emb = torch.cat((freqs, freqs), dim=-1)
                return emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        '''
    found = _found(source)
    assert found[(13, "RPL002")] == "safe"
    fixed = _fixed(source)
    assert 'self.register_buffer("inv_freq", inv_freq, persistent=False)' in fixed and _found(fixed) == {}


def test_an_inherited_method_runs_the_subclass_override_it_calls():
    """The base class's `rotate` calls `self.get_seq_pos(n, dtype=t.dtype)`; the base builds float32 positions,
    a position-interpolation subclass overrides only `get_seq_pos` and honours `dtype` (the activations'):
    `rotate` is analysed in the subclass too, so the subclass's positions are RPL005. The base alone is clean."""
    source = '''\
        import torch
        from torch import nn


        class RotaryEmbedding(nn.Module):
            def __init__(self, dim=64, theta=10000.0):
                super().__init__()
                self.freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))

            def get_seq_pos(self, seq_len, device, dtype):
                return torch.arange(seq_len, device=device, dtype=torch.float32)

            def rotate(self, t):
                seq = self.get_seq_pos(t.shape[-2], device=t.device, dtype=t.dtype)
                freqs = seq[:, None] * self.freqs.to(t.device)[None, :]
                return t * freqs.cos().to(t.dtype)


        class InterpolatedRotaryEmbedding(RotaryEmbedding):
            def get_seq_pos(self, seq_len, device, dtype):
                return torch.arange(seq_len, device=device, dtype=dtype) * 0.5
        '''
    assert set(_found(source)) == {(21, "RPL005")}
    base_only = source[:source.index("        class InterpolatedRotaryEmbedding")]
    assert _found(base_only) == {}


def test_a_dtype_chosen_by_a_conditional_expression_with_an_integer_branch():
    """Qwen2-VL vision: `dtype = grid_thw.dtype if torch.jit.is_tracing() else torch.int32` (meant for
    `cu_seqlens`) reused as `torch.Tensor.to(t, dtype)` for the tables: RPL001 (the integer branch decides),
    fixed to the activations' dtype (safe)."""
    source = '''\
        import torch
        from torch import nn


        class VisionRotaryPositions(nn.Module):
            def __init__(self, dim=40, theta=10000.0):
                super().__init__()
                self.dim, self.theta = dim, theta

            def forward(self, hidden_states, grid_thw):
                dtype = grid_thw.dtype if torch.jit.is_tracing() else torch.int32
                cu_seqlens = (grid_thw[:, 1] * grid_thw[:, 2]).cumsum(dim=0, dtype=dtype)
                inv_freq = 1.0 / (self.theta ** (torch.arange(0, self.dim, 2, dtype=torch.float32) / self.dim))
                emb = torch.arange(hidden_states.shape[0], dtype=torch.float32)[:, None] * inv_freq[None, :]
                cos, sin = (torch.Tensor.to(t, dtype) for t in (emb.cos(), emb.sin()))
                return (cos, sin), cu_seqlens
        '''
    assert _found(source) == {(15, "RPL001"): "safe"}
    fixed = _fixed(source)
    assert "torch.Tensor.to(t, hidden_states.dtype) for t in" in fixed and _found(fixed) == {}


def test_inverse_frequencies_cast_to_integer_positions_in_a_decorator_refresh():
    """HF's `@dynamic_rope_update` shape: the nested refresh stores `inv_freq.to(position_ids)`, which takes
    the ids' int64 dtype (every frequency below 1 becomes 0): RPL006, fixed to a device-only move (safe).
    The same refresh with `.to(position_ids.device)` is clean."""
    source = '''\
        from functools import wraps

        import torch
        from torch import nn


        def _ntk_inv_freq(dim, base, device=None):
            return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32, device=device) / dim))


        def dynamic_update(forward):
            def refresh(self, position_ids):
                seq_len = int(position_ids.max()) + 1
                if seq_len > self.cached:
                    inv_freq = _ntk_inv_freq(self.dim, self.base * seq_len / self.cached, position_ids.device)
                    self.inv_freq = inv_freq.to(position_ids)
                    self.cached = seq_len

            @wraps(forward)
            def wrapper(self, x, position_ids):
                refresh(self, position_ids)
                return forward(self, x, position_ids)

            return wrapper


        class DynamicRotary(nn.Module):
            def __init__(self, dim=64, base=10000.0, max_len=2048):
                super().__init__()
                self.dim, self.base, self.cached = dim, base, max_len
                self.inv_freq = _ntk_inv_freq(dim, base)

            @dynamic_update
            def forward(self, x, position_ids):
                freqs = position_ids[..., None].float() * self.inv_freq.float()
                emb = torch.cat((freqs, freqs), dim=-1)
                return emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        '''
    assert _found(source) == {(16, "RPL006"): "safe"}
    fixed = _fixed(source)
    assert "self.inv_freq = inv_freq.to(position_ids.device)" in fixed and _found(fixed) == {}


def test_a_dtype_property_reporting_the_first_buffer_and_trig_functions_taken_from_a_loop():
    """`next(self.buffers()).dtype` is the dtype of the first registered buffer, here an int64 grid:
    tables cast to it are RPL001. `for name, fn in zip(names, (torch.cos, torch.sin))`: `fn(emb)` is cos/sin,
    and `setattr(self, name, fn(emb).to(ref))` with `ref` the integer ids is RPL001 at the call, fixed by
    handing the activation (the refresh reads only `ref`'s dtype and device)."""
    grid = '''\
        import torch
        from torch import nn


        class GridRotary(nn.Module):
            def __init__(self, dim=32, side=8):
                super().__init__()
                self.dim = dim
                ys, xs = torch.meshgrid(torch.arange(side), torch.arange(side), indexing="ij")
                self.register_buffer("grid", torch.stack((ys, xs), -1).reshape(-1, 2), persistent=False)

            @property
            def dtype(self):
                return next(self.buffers()).dtype

            def forward(self, x):
                inv_freq = 1.0 / (100.0 ** (torch.arange(0, self.dim // 2, 2, dtype=torch.float32) / (self.dim // 2)))
                phase = torch.cat([self.grid[:, i, None].float() * inv_freq for i in range(2)], dim=-1)
                return phase.cos().to(self.dtype), phase.sin().to(self.dtype)
        '''
    assert _found(grid) == {(19, "RPL001"): "safe"}
    float_first = grid.replace('self.register_buffer("grid"', 'self.register_buffer("scale", torch.ones(1))\n'
                                                              '                self.register_buffer("grid"')
    assert _found(float_first) == {}
    # timm-style: the first buffer's dtype in a loop, the default dtype when there is none: integer on a path.
    looped = grid.replace("                return next(self.buffers()).dtype\n",
                          "                for buf in self.buffers():\n"
                          "                    return buf.dtype\n"
                          "                return torch.get_default_dtype()\n")
    assert _found(looped) == {(21, "RPL001"): "safe"}

    refresh = '''\
        import torch
        from torch import nn


        class NeoXRotary(nn.Module):
            def __init__(self, dim=64, base=10000.0):
                super().__init__()
                self.dim, self.base = dim, base

            def _refresh(self, seq_len, ref):
                t = torch.arange(seq_len, device=ref.device, dtype=torch.float32)
                inv = 1.0 / (self.base ** (torch.arange(0, self.dim, 2, device=ref.device, dtype=torch.float32) / self.dim))
                emb = torch.outer(t, inv)
                emb = torch.cat((emb, emb), dim=-1)
                for name, fn in zip(("cos_cached", "sin_cached"), (torch.cos, torch.sin)):
                    setattr(self, name, fn(emb).to(ref))

            def forward(self, q, position_ids):
                self._refresh(int(position_ids.max()) + 1, position_ids)
                return self.cos_cached[position_ids], self.sin_cached[position_ids]
        '''
    assert _found(refresh) == {(19, "RPL001"): "safe"}
    fixed = _fixed(refresh)
    assert "self._refresh(int(position_ids.max()) + 1, q)" in fixed and _found(fixed) == {}


def test_frequency_ramps_by_shape_and_a_rotary_over_timesteps():
    """`theta ** torch.linspace(math.log(1, theta), math.log(end, theta), n, dtype=dtype)` (LTX-Video) is
    log-spaced frequencies built in a run-time dtype (RPL006); `base ** (-torch.arange(n) / n)` written into
    a block-diagonal matrix contracted by an einsum is RPL003; a `TimestepRotary` over a policy's timesteps
    is a rotary (RPL003), where a diffusion timestep embedding is not."""
    ltx = '''\
        import math
        import torch
        from torch import nn


        class VideoRotary(nn.Module):
            def __init__(self, dim=96, theta=10000.0):
                super().__init__()
                self.dim, self.theta = dim, theta

            def forward(self, hidden_states, grid):
                dtype = torch.float32
                start, end = 1, self.theta
                pos = (grid / 20.0).to(dtype)
                freqs = self.theta ** torch.linspace(math.log(start, self.theta), math.log(end, self.theta),
                                                     self.dim // 6, dtype=dtype)
                angles = freqs * (pos.unsqueeze(-1) * 2 - 1)
                return angles.cos().to(hidden_states.dtype), angles.sin().to(hidden_states.dtype)
        '''
    assert _found(ltx) == {}
    rounded = ltx.replace("dtype = torch.float32", "dtype = hidden_states.dtype")
    assert _found(rounded) == {(14, "RPL005"): "safe", (15, "RPL006"): "safe"}

    block = '''\
        import torch
        from torch import nn


        def axial_matrix(head_dim, base, device=None):
            per_axis = head_dim // 6
            mats = []
            for axis in range(3):
                f = base ** (-torch.arange(per_axis, device=device, dtype=torch.float32) / per_axis)
                m = torch.zeros(3, per_axis, device=device)
                m[axis] = f
                mats.append(m)
            return torch.cat(mats, dim=1)


        class CoordRotary(nn.Module):
            def __init__(self, head_dim=48, base=100.0):
                super().__init__()
                self.head_dim, self.base = head_dim, base

            def forward(self, coord):
                theta = torch.einsum("bnc,cf->bnf", coord.float(), axial_matrix(self.head_dim, self.base, coord.device))
                return theta.cos(), theta.sin()
        '''
    assert _found(block) == {(22, "RPL003"): "safe"}

    policy = '''\
        import torch
        from torch import nn


        class TimestepRotary(nn.Module):
            def __init__(self, dim=64, base=10000.0):
                super().__init__()
                self.dim, self.base = dim, base

            def forward(self, q, timesteps):
                inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2, dtype=torch.float32) / self.dim))
                freqs = torch.matmul(timesteps.float().unsqueeze(-1), inv_freq.unsqueeze(0))
                return freqs.cos().to(q.dtype), freqs.sin().to(q.dtype)
        '''
    assert _found(policy) == {(12, "RPL003"): "safe"}
    embedding = policy.replace("TimestepRotary", "TimestepEmbedding")
    assert _found(embedding) == {}


def test_frequencies_in_the_model_dtype_kept_in_self_and_widened_on_every_read():
    """Per-layer frequencies built with `dtype=args.dtype` into a plain list attribute that every read
    widens (`self.inv_freqs[i].to(device).float()`): RPL006, safe (no reader depends on the dtype); a read
    that does not widen keeps the fix unsafe."""
    source = '''\
        import torch
        from torch import nn


        class LayerwiseRotary(nn.Module):
            def __init__(self, args, thetas):
                super().__init__()
                self.inv_freqs = [
                    1.0 / (t ** (torch.arange(0, args.rotary_dim, 2, dtype=args.dtype) / args.rotary_dim))
                    for t in thetas
                ]

            def forward(self, x, layer_id, seq_len):
                inv_freq = self.inv_freqs[layer_id].to(x.device).float()
                t = torch.arange(seq_len, device=x.device, dtype=torch.float32)
                freqs = t[:, None] * inv_freq[None, :]
                return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)
        '''
    assert _found(source) == {(9, "RPL006"): "safe"}
    fixed = _fixed(source)
    assert "dtype=torch.float32) / args.rotary_dim" in fixed and _found(fixed) == {}
    unwidened = source.replace("            def forward(", "            def table(self, i):\n"
                                                         "                return self.inv_freqs[i]\n\n"
                                                         "            def forward(")
    assert _found(unwidened) == {(9, "RPL006"): "unsafe"}


def test_positions_that_only_reach_phase_helpers_are_safe_to_make_float32():
    """MMDiT 2-D rope: `_axis_positions` builds `arange(n, dtype=self.inv_freq.dtype)` and returns it (shifted),
    and every call of it is an argument of `_axis_freqs`, which forms the phase; a text axis hands
    `arange(txt_len, dtype=self.inv_freq.dtype)` straight to `_axis_freqs`. Both RPL005 fixes are safe. A
    caller that also keeps the positions (`self.last = self._axis_positions(...)`) makes the first unsafe."""
    source = '''\
        import torch
        from torch import nn


        class Rope2D(nn.Module):
            def __init__(self, head_dim=64, theta=10000.0):
                super().__init__()
                inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim // 2, 2).float() / (head_dim // 2)))
                self.register_buffer("inv_freq", inv_freq, persistent=False)

            def _axis_positions(self, n, offset):
                t = torch.arange(n, dtype=self.inv_freq.dtype)
                return t + offset

            def _axis_freqs(self, t):
                freqs = torch.outer(t, self.inv_freq).float()
                return torch.polar(torch.ones_like(freqs), freqs)

            def forward(self, x, h, txt_len):
                rows = self._axis_freqs(self._axis_positions(h, txt_len))
                text = self._axis_freqs(torch.arange(txt_len, dtype=self.inv_freq.dtype))
                return torch.cat([text, rows]).to(x.device)
        '''
    found = _found(source)
    assert (found[(12, "RPL005")], found[(21, "RPL005")]) == ("safe", "safe")
    fixed = _fixed(source)
    assert fixed.count("dtype=torch.float32)") == 2 and _found(fixed) == {}
    kept = source.replace("rows = self._axis_freqs(self._axis_positions(h, txt_len))",
                          "self.last = self._axis_positions(h, txt_len)\n"
                          "                rows = self._axis_freqs(self.last)")
    assert _found(kept)[(12, "RPL005")] == "unsafe"


def test_frozen_frequencies_in_parameter_containers_are_kept_through_module_casts():
    """Frequencies held as frozen entries of `nn.ParameterList` / `nn.ParameterDict` are converted by
    `.bfloat16()` like the module's own Parameters: RPL002, fixed by an `_apply` override that names the
    container's entries (`"inv_freqs.{}"`), after which nothing is reported. Entries that learn make the
    fix unsafe."""
    source = '''\
        import torch
        from torch import nn


        class DualThetaRotary(nn.Module):
            def __init__(self, dim=64, local_base=1e4, global_base=1e6):
                super().__init__()
                idx = torch.arange(0, dim, 2, dtype=torch.float32) / dim
                self.inv_freqs = nn.ParameterList([
                    nn.Parameter(1.0 / (local_base ** idx), requires_grad=False),
                    nn.Parameter(1.0 / (global_base ** idx), requires_grad=False),
                ])

            def forward(self, x, position_ids, layer=0):
                inv_freq = self.inv_freqs[layer].to(device=x.device, dtype=torch.float32)
                freqs = position_ids[..., None].float() * inv_freq
                return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)
        '''
    assert _found(source) == {(15, "RPL002"): "safe"}
    fixed = _fixed(source)
    assert '("inv_freqs.{}",)' in fixed and _found(fixed) == {}
    as_dict = source.replace("nn.ParameterList([", "nn.ParameterDict({").replace("                ])", "                })") \
        .replace("nn.Parameter(1.0 / (local_base", '"local": nn.Parameter(1.0 / (local_base') \
        .replace("nn.Parameter(1.0 / (global_base", '"global": nn.Parameter(1.0 / (global_base') \
        .replace("self.inv_freqs[layer]", 'self.inv_freqs["local" if layer == 0 else "global"]')
    assert _found(as_dict) == {(15, "RPL002"): "safe"}
    learned = source.replace("requires_grad=False", "requires_grad=True")
    assert _found(learned) == {(15, "RPL002"): "unsafe"}


def test_the_dtype_of_cu_seqlens_is_an_integer_dtype():
    """ModernBERT-style unpadded attention: the cos/sin cache is refreshed with `dtype=cu_seqlens.dtype`
    (int32 by the varlen kernels' contract), so `torch.cos(freqs).to(dtype)` truncates: RPL001 at the call,
    fixed by passing float32 (safe). Passing `qkv.dtype` instead is clean."""
    source = '''\
        import torch
        from torch import nn


        class UnpaddedRotary(nn.Module):
            def __init__(self, dim=64, base=10000.0):
                super().__init__()
                self.dim, self.base = dim, base
                self._cos = self._sin = None

            def _refresh(self, seqlen, device=None, dtype=None):
                inv = 1.0 / (self.base ** (torch.arange(0, self.dim, 2, device=device, dtype=torch.float32) / self.dim))
                freqs = torch.outer(torch.arange(seqlen, device=device, dtype=torch.float32), inv)
                self._cos = torch.cos(freqs).to(dtype)
                self._sin = torch.sin(freqs).to(dtype)

            def forward(self, qkv, cu_seqlens, max_seqlen):
                self._refresh(max_seqlen, device=cu_seqlens.device, dtype=cu_seqlens.dtype)
                return self._cos, self._sin
        '''
    assert _found(source) == {(18, "RPL001"): "safe"}
    fixed = _fixed(source)
    assert "dtype=torch.float32)" in fixed and _found(fixed) == {}
    assert _found(source.replace("dtype=cu_seqlens.dtype", "dtype=qkv.dtype")) == {}


XPOS = '''\
    import torch
    from torch import nn
    from einops import rearrange


    class XposRotary(nn.Module):
        def __init__(self, dim=64, theta=10000.0, scale_base=512):
            super().__init__()
            self.inv_freq = [1.0 / (theta ** (i / dim)) for i in range(0, dim, 2)]
            self.scale_base = scale_base
            self.register_buffer("scale", (torch.arange(0, dim, 2) + 0.4 * dim) / (1.4 * dim), persistent=False)

        def get_scale(self, t):
            power = (t - len(t) // 2) / self.scale_base
            return self.scale ** rearrange(power, "n -> n 1")
    '''


def test_an_xpos_scale_buffer_raised_to_a_position_power_is_kept_float32():
    """`self.scale ** rearrange(power, ...)` with `power` growing with the position: a float buffer that
    `.bfloat16()` rounds, the power multiplying the error (RPL002, safe `_apply` keep fix). The fixed module,
    converted to bfloat16, gives the float64 scale to float32 precision (the original is off by percents)."""
    assert _found(XPOS) == {(15, "RPL002"): "safe"}
    fixed = _fixed(XPOS)
    assert '("scale",)' in fixed and _found(fixed) == {}
    torch = pytest.importorskip("torch")
    scope: dict = {}
    # einops is not a dependency: an identity-shaped stand-in for the one pattern used.
    exec(compile(fixed.replace("from einops import rearrange",
                               "rearrange = lambda p, pattern: p[:, None]"), "fixed.py", "exec"), scope)
    original: dict = {}
    exec(compile(textwrap.dedent(XPOS).replace("from einops import rearrange",
                                               "rearrange = lambda p, pattern: p[:, None]"), "orig.py", "exec"), original)
    t = torch.arange(32768, dtype=torch.float32)
    scale64 = (torch.arange(0, 64, 2, dtype=torch.float64) + 25.6) / 89.6
    reference = scale64 ** ((t.double() - 16384) / 512)[:, None]
    for namespace, bound in ((scope, 1e-5), (original, None)):
        module = namespace["XposRotary"]().bfloat16()
        relative = ((module.get_scale(t).double() - reference) / reference).abs().max().item()
        if bound is None:
            assert relative > 0.05
        else:
            assert relative < bound


def test_false_positive_stress_float64_matmul_asserted_float32_and_a_pinned_dtype_property():
    """Correct code that looked wrong: a matmul of float64 operands (autocast leaves float64 alone: measured
    below), positions built in `x.dtype` after `assert x.dtype == torch.float32`, and frequencies built in
    `dtype=self.dtype` where `dtype` is a property returning `torch.float32`. None is reported; the same
    code with float32 operands, no assert, or a property returning the model dtype is."""
    torch = pytest.importorskip("torch")
    a, b = torch.randn(4, 1, dtype=torch.float64), torch.randn(1, 3, dtype=torch.float64)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.matmul(a, b).dtype == torch.float64 and torch.matmul(a.float(), b.float()).dtype == torch.bfloat16
    matmul = '''\
        import torch
        from torch import nn


        class MegatronRotary(nn.Module):
            def __init__(self, dim=64, base=10000.0, factor=None):
                super().__init__()
                self.factor = factor
                self.inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))

            def forward(self, n):
                seq = torch.arange(n, dtype=torch.float64)
                if self.factor is not None:
                    seq = seq * (1.0 / self.factor)
                freqs = torch.matmul(seq.unsqueeze(1), self.inv_freq.to(torch.float64).unsqueeze(0))
                return freqs.to(torch.float32)
        '''
    assert _found(matmul) == {}
    assert set(_found(matmul.replace("torch.float64", "torch.float32"))) == {(15, "RPL003")}

    asserted = '''\
        import torch


        def apply_rope(inputs, positions, max_wavelength=10000.0):
            x = inputs.float()
            assert x.dtype == torch.float32
            fraction = 2 * torch.arange(0, x.shape[-1] // 2, dtype=x.dtype) / x.shape[-1]
            timescale = max_wavelength ** fraction
            angles = positions.to(dtype=x.dtype)[..., None] / timescale
            return angles.cos(), angles.sin()
        '''
    assert _found(asserted) == {}
    assert _found(asserted.replace("x = inputs.float()", "x = inputs").replace(
        "            assert x.dtype == torch.float32\n", "")) != {}

    pinned = '''\
        import torch
        from torch import nn


        def freq_bands(num_bands, temperature=10000.0, dtype=torch.float32):
            exp = torch.arange(0, num_bands, 2, dtype=torch.int64).to(dtype) / num_bands
            return 1.0 / (temperature ** exp)


        class RotaryCat(nn.Module):
            def __init__(self, dim=64):
                super().__init__()
                self.dim = dim

            @property
            def dtype(self):
                return torch.float32

            def get_embed(self, n):
                bands = freq_bands(self.dim, dtype=self.dtype)
                pos = torch.arange(n, dtype=torch.float32)[:, None] * bands
                return torch.cat([pos.sin(), pos.cos()], -1)
        '''
    assert _found(pinned) == {}
    assert _found(pinned.replace("return torch.float32", "return self.proj.weight.dtype")) != {}


def test_an_apply_override_that_only_widens_after_the_cast_repairs_nothing():
    """`_apply` that calls `super()._apply(fn)` and then `self.inv_freq = self.inv_freq.float()` widens values
    the cast already rounded: RPL002 still reported, and the fix routes the override's `super()._apply` through
    the runtime helper. An override that rebuilds the buffer (`self.inv_freq = self._build()`) is a repair."""
    source = '''\
        import torch
        from torch import nn


        class QwenRotary(nn.Module):
            def __init__(self, dim=64, base=10000.0):
                super().__init__()
                self.dim, self.base = dim, base
                self.register_buffer("inv_freq", self._build(), persistent=False)

            def _build(self):
                return 1.0 / (self.base ** (torch.arange(0, self.dim, 2, dtype=torch.float32) / self.dim))

            def _apply(self, fn, recurse=True):
                super()._apply(fn, recurse)
                self.inv_freq = self.inv_freq.float()
                return self

            def forward(self, x, position_ids):
                freqs = position_ids[..., None].float() * self.inv_freq.float()
                return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)
        '''
    assert _found(source) == {(20, "RPL002"): "safe"}
    fixed = _fixed(source)
    assert 'rope_runtime.apply_keeping_dtype(self, super()._apply, fn, ("inv_freq",), recurse)' in fixed
    assert _found(fixed) == {}
    rebuilt = source.replace("self.inv_freq = self.inv_freq.float()", "self.inv_freq = self._build().to(self.inv_freq.device)")
    assert _found(rebuilt) == {}


def test_a_grid_that_is_integer_on_one_path_makes_its_dtype_an_integer_dtype():
    """ViTDet-style grid: `torch.arange` coordinates (int64), rescaled to float only when the fine-tune grid
    differs from the pre-train one; tables cast to `grid.dtype` truncate on the default path: RPL001 (safe:
    the tables stay float32). A grid made float on every path is clean."""
    source = '''\
        import torch
        from torch import nn


        def make_grid(pt, ft):
            ys, xs = torch.arange(ft[0]), torch.arange(ft[1])
            grid = torch.stack(torch.meshgrid(ys, xs, indexing="ij")).flatten(1)
            if tuple(ft) != tuple(pt):
                grid = grid * torch.tensor([pt[0] / ft[0], pt[1] / ft[1]])[:, None]
            return grid


        class GridRotary(nn.Module):
            def __init__(self, head_dim=64, pt=(16, 16), theta=10000.0):
                super().__init__()
                self.pt = pt
                self.freqs = [theta ** (-i / (head_dim // 4)) for i in range(head_dim // 4)]

            def forward(self, hw):
                grid = make_grid(self.pt, hw)
                freqs = torch.tensor(self.freqs, dtype=torch.float32)
                angles = torch.cat([grid[0, :, None] * freqs, grid[1, :, None] * freqs], dim=-1)
                return angles.cos().to(dtype=grid.dtype), angles.sin().to(dtype=grid.dtype)
        '''
    assert _found(source) == {(23, "RPL001"): "safe"}
    fixed = _fixed(source)
    assert "return angles.cos(), angles.sin()" in fixed and _found(fixed) == {}
    always_float = source.replace("grid = torch.stack(torch.meshgrid(ys, xs, indexing=\"ij\")).flatten(1)",
                                  "grid = torch.stack(torch.meshgrid(ys, xs, indexing=\"ij\")).flatten(1).float()")
    assert _found(always_float) == {}


def test_a_phase_cast_back_to_the_dtype_of_the_counts_it_was_made_from():
    """Graph rope: `hops = hops.clamp(max=self.max_hops)` keeps the hop counts (a bounded copy, still the
    argument), `hops.unsqueeze(-1) * self.inv_freq` is their phase, and `.type_as(hops)` casts it back to the
    counts' int64: RPL001 (safe: only the device move stays). Without the cast back it is clean."""
    source = '''\
        import torch
        from torch import nn


        class GraphRotary(nn.Module):
            def __init__(self, head_dim=64, theta=10000.0, max_hops=8192):
                super().__init__()
                self.max_hops = max_hops
                self.inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))

            def _angles(self, hops):
                hops = hops.clamp(max=self.max_hops)
                return (hops.unsqueeze(-1) * self.inv_freq).type_as(hops)

            def forward(self, q, hops):
                angles = self._angles(hops)
                return angles.cos().to(q.dtype), angles.sin().to(q.dtype)
        '''
    assert _found(source) == {(13, "RPL001"): "safe"}
    fixed = _fixed(source)
    assert ".to(hops.device)" in fixed and _found(fixed) == {}
    assert _found(source.replace(".type_as(hops)", "")) == {}


def test_split_frequencies_positions_handed_on_and_a_base_tensor_in_a_runtime_dtype():
    """Round 27: `f_t, f_h, f_w = inv_freq.split(sections)` gives each axis its frequencies, so positions cast
    to the activations' dtype before a helper forms the per-axis phase are RPL005, safe (the local goes only
    into that helper). Flux-style `base = torch.tensor(theta, dtype=dtype)` rounds theta in bfloat16 (10000 ->
    9984, measured) whatever the exponent's dtype: RPL006 at the base and at the arange, both safe (every
    value made from them is widened before the phase)."""
    torch = pytest.importorskip("torch")
    assert torch.tensor(10000.0, dtype=torch.bfloat16).item() == 9984.0
    sections = '''\
        import torch
        from torch import nn


        class VideoRotary(nn.Module):
            def __init__(self, head_dim=96, theta=10000.0, sections=(16, 16, 16)):
                super().__init__()
                self.head_dim, self.theta, self.sections = head_dim, theta, sections

            def inv_freq(self, device):
                half = self.head_dim // 2
                return 1.0 / (self.theta ** (torch.arange(half, device=device, dtype=torch.float32) * 2.0 / self.head_dim))

            def _angles(self, t_pos, h_pos, inv_freq):
                f_t, f_h, f_w = inv_freq.split(self.sections)
                return torch.cat((t_pos[..., None] * f_t, h_pos[..., None] * f_h, h_pos[..., None] * f_w), dim=-1)

            def forward(self, hidden_states, timestamps, rows):
                t_pos = (timestamps * 2.0).to(hidden_states.dtype)
                t_pos = t_pos.reshape(1, -1)
                angles = self._angles(t_pos, rows.float(), self.inv_freq(hidden_states.device))
                return angles.cos().to(hidden_states.dtype), angles.sin().to(hidden_states.dtype)
        '''
    assert _found(sections) == {(19, "RPL005"): "safe"}
    fixed = _fixed(sections)
    assert "t_pos = (timestamps * 2.0).float()" in fixed and _found(fixed) == {}

    base = '''\
        import torch


        def rope(pos, dim, theta, dtype):
            base = torch.tensor(theta, dtype=dtype, device=pos.device)
            scale = torch.arange(0, dim, 2, dtype=dtype, device=pos.device) / dim
            omega = torch.pow(base, -scale)
            out = torch.einsum("...n,d->...nd", pos.float(), omega.float())
            return torch.stack([torch.cos(out), -torch.sin(out), torch.sin(out), torch.cos(out)], dim=-1)
        '''
    assert _found(base) == {(5, "RPL006"): "safe", (6, "RPL006"): "safe"}
    fixed = _fixed(base)
    assert fixed.count("dtype=torch.float32, device=pos.device") == 2 and _found(fixed) == {}
    scope: dict = {}
    exec(compile(fixed, "fixed.py", "exec"), scope)
    positions = torch.arange(0, 30001, dtype=torch.float32)[None]
    reference = torch.outer(positions[0].double(), 1 / (10000 ** (torch.arange(0, 56, 2, dtype=torch.float64) / 56)))
    got = scope["rope"](positions, 56, 10000.0, torch.bfloat16)[0, :, :, 0]
    assert (got.double() - reference.cos()).abs().max().item() < 2 * 30001 * 2.0**-24 + 2.0**-23
    returned = base.replace("            out = torch.einsum", "            return omega\n            out = torch.einsum")
    assert _found(returned)[(5, "RPL006")] == "unsafe"  # the frequencies leave the function in their dtype


def test_a_subclass_override_building_positions_in_the_callers_dtype_is_fixed_at_the_inherited_call():
    """lucidrains-style: the base `rotate_queries_or_keys` calls `self.get_seq_pos(n, dtype=t.dtype)`; a
    position-interpolation subclass overrides only `get_seq_pos` and honours `dtype`. The base's call runs the
    override on subclass instances, so passing `torch.float32` there is the fix (safe: the positions only reach
    the class's own forward), and the public method keeps its signature."""
    source = '''\
        import torch
        from torch import nn


        class RotaryEmbedding(nn.Module):
            def __init__(self, dim=64, theta=10000.0):
                super().__init__()
                self.freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))

            def get_seq_pos(self, seq_len, device, dtype, offset=0):
                return torch.arange(seq_len, device=device, dtype=torch.float32) + offset

            def forward(self, t):
                return t.float()[:, None] * self.freqs.to(t.device)[None, :]

            def rotate_queries_or_keys(self, t):
                seq = self.get_seq_pos(t.shape[-2], device=t.device, dtype=t.dtype)
                freqs = self.forward(seq)
                return t * freqs.cos().to(t.dtype) + t * freqs.sin().to(t.dtype)


        class InterpolatedRotary(RotaryEmbedding):
            def get_seq_pos(self, seq_len, device, dtype, offset=0):
                return (torch.arange(seq_len, device=device, dtype=dtype) + offset) * 0.25
        '''
    assert _found(source) == {(24, "RPL005"): "safe"}
    fixed = _fixed(source)
    assert "self.get_seq_pos(t.shape[-2], device=t.device, dtype=torch.float32)" in fixed and _found(fixed) == {}
    assert "def get_seq_pos(self, seq_len, device, dtype, offset=0):" in fixed


def test_a_phase_written_into_a_buffer_through_out_is_a_phase_buffer():
    """`torch.outer(t, inv_freq, out=self.phase_scratch[:n])` writes the phase in the scratch buffer's dtype,
    which `.bfloat16()` sets: RPL009, fixed by keeping the buffer (and the frequencies) float32 with the
    `_apply` override. Without `out=` the phase is a fresh float32 tensor (only RPL002 for the buffer)."""
    source = '''\
        import torch
        from torch import nn


        class ScratchRotary(nn.Module):
            def __init__(self, dim=64, base=10000.0, max_positions=4096):
                super().__init__()
                self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim)),
                                     persistent=False)
                self.register_buffer("phase_scratch", torch.empty(max_positions, dim // 2), persistent=False)

            def forward(self, x, n):
                t = torch.arange(n, device=x.device, dtype=torch.float32)
                phase = torch.outer(t, self.inv_freq.float(), out=self.phase_scratch[:n]).float()
                return phase.cos().to(x.dtype), phase.sin().to(x.dtype)
        '''
    found = _found(source)
    assert found[(14, "RPL009")] == "safe" and (14, "RPL002") in found
    fixed = _fixed(source)
    assert '"phase_scratch")' in fixed and _found(fixed) == {}
    assert (14, "RPL009") not in _found(source.replace(", out=self.phase_scratch[:n]", ""))


def test_a_method_with_an_unnamed_parameter_given_positions_through_vmap():
    """`vmap(self._phase_at)(ids)` calls `_phase_at(self, p)` once per position: `p` is then a position, so
    `p.to(self.inv_freq.dtype)` is RPL005 and the rounded buffer RPL002. Called with something that is not
    a position (the activation), the same method says nothing."""
    source = '''\
        import torch
        from torch import nn
        from torch.func import vmap


        class VmapRotary(nn.Module):
            def __init__(self, dim=64, base=10000.0):
                super().__init__()
                self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)),
                                     persistent=False)

            def _phase_at(self, p):
                return p.to(self.inv_freq.dtype) * self.inv_freq

            def forward(self, x, position_ids):
                phase = vmap(self._phase_at)(position_ids.reshape(-1)).float()
                return phase.cos().to(x.dtype), phase.sin().to(x.dtype)
        '''
    found = _found(source)
    assert found[(13, "RPL005")] == "safe" and found[(13, "RPL002")] == "safe"
    assert found == _found(source.replace("vmap(self._phase_at)(", "self._phase_at("))
    fixed = _fixed(source)
    assert "p.float() * rope_runtime." in fixed and _found(fixed) == {}
    assert _found(source.replace("position_ids.reshape(-1)", "x")) == {}


def test_a_closure_made_by_a_factory_and_held_by_the_module():
    """`self._rope = make_rotary(d)` holds the closure `rope(pos, dtype=None)`, whose tables take
    `dtype or pos.dtype`: a call that leaves `dtype` out with integer positions truncates them (RPL001 at the
    call, fixed by passing the activation's dtype). Passing a dtype says nothing."""
    source = '''\
        import torch
        from torch import nn


        def make_rotary(dim, base=10000.0):
            inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))

            def rope(pos, dtype=None):
                out_dtype = dtype or pos.dtype
                freqs = pos.float().unsqueeze(-1) * inv_freq.to(pos.device)
                emb = torch.cat((freqs, freqs), dim=-1)
                return emb.cos().to(out_dtype), emb.sin().to(out_dtype)

            return rope


        class RotaryQK(nn.Module):
            def __init__(self, head_dim):
                super().__init__()
                self._rope = make_rotary(head_dim)

            def forward(self, q, k, position_ids, offset=0):
                cos, sin = self._rope(position_ids + offset)
                return q * cos[:, None] + k * sin[:, None]
        '''
    assert _found(source) == {(23, "RPL001"): "safe"}
    fixed = _fixed(source)
    assert "self._rope(position_ids + offset, dtype=q.dtype)" in fixed and _found(fixed) == {}
    assert _found(source.replace("self._rope(position_ids + offset)", "self._rope(position_ids, q.dtype)")) == {}


def test_buffers_from_a_config_property_and_from_a_registering_helper():
    """A buffer registered from a config object's cached property (`self.config.inv_freq.clone()`) is
    inverse frequencies all the same; so is `self.inv_freq` when the class registers its buffers through a
    helper with run-time names (`self._register(name, t)`). Either way `.bfloat16()` rounds it and positions
    built in its dtype are 16-bit. A buffer registered as `None` is no table."""
    config = '''\
        import functools
        from dataclasses import dataclass

        import torch
        from torch import nn


        @dataclass
        class RotaryConfig:
            head_dim: int = 64

            @functools.cached_property
            def inv_freq(self):
                return 1.0 / (10000.0 ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))


        class Rotary(nn.Module):
            def __init__(self, config):
                super().__init__()
                self.config = config
                self.register_buffer("inv_freq", self.config.inv_freq.clone(), persistent=False)
                self.register_buffer("cos_cached", None, persistent=False)

            def forward(self, x):
                t = torch.arange(x.shape[1], device=x.device, dtype=self.inv_freq.dtype)
                freqs = t[:, None] * self.inv_freq[None, :]
                return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)
        '''
    assert _found(config) == {(25, "RPL005"): "safe", (26, "RPL002"): "safe"}
    fixed = _fixed(config)
    assert "lambda device: self.config.inv_freq.clone().to(device)" in fixed and _found(fixed) == {}
    helper = '''\
        import torch


        class Rotary(torch.nn.Module):
            def __init__(self, dim, base=10000):
                super().__init__()
                self.dim, self.base = dim, base
                for name, value in self._make_buffers().items():
                    self._register(name, value)

            def _make_buffers(self):
                return {"inv_freq": 1.0 / (self.base ** (torch.arange(0, self.dim, 2).float() / self.dim))}

            def _register(self, name, tensor, persistent=False):
                self.register_buffer(name, tensor, persistent=persistent)

            def forward(self, x):
                t = torch.arange(x.shape[0], device=x.device).type_as(self.inv_freq)
                freqs = torch.einsum("i,j->ij", t, self.inv_freq)
                return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)
        '''
    assert _found(helper) == {(18, "RPL005"): "safe", (19, "RPL002"): "safe"}
    fixed = _fixed(helper)
    assert 'apply_keeping_dtype(self, super()._apply, fn, ("inv_freq",)' in fixed and _found(fixed) == {}
    # Assigned as a plain attribute somewhere in the class: not one of the dynamically registered buffers.
    plain = helper.replace("self.dim, self.base = dim, base",
                           "self.dim, self.base = dim, base\n                self.inv_freq = None")
    assert (19, "RPL002") not in _found(plain)


def test_modules_of_a_module_list_called_in_a_loop_with_ids_as_their_activation():
    """`for i, rope in enumerate(self.rotaries): rope(position_ids, position_ids)` runs `LayerRope.forward`,
    whose tables take `x.dtype`: RPL001 at the call (unsafe fix: float32 ids stand in, as nothing here has
    the activations' dtype). `self.rotaries[0](position_ids, position_ids)` is the same call; an activation
    passed as `x` is fine."""
    source = '''\
        import torch
        from torch import nn


        class LayerRope(nn.Module):
            def __init__(self, head_dim, theta):
                super().__init__()
                self.head_dim, self.theta = head_dim, theta

            def forward(self, x, position_ids):
                inv_freq = 1.0 / (self.theta ** (torch.arange(0, self.head_dim, 2, dtype=torch.float32) / self.head_dim))
                freqs = position_ids.float()[..., None] * inv_freq.to(position_ids.device)
                return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)


        class LayerRotaryStack(nn.Module):
            def __init__(self, num_layers, head_dim):
                super().__init__()
                self.rotaries = nn.ModuleList(LayerRope(head_dim, 1e4 if i % 6 else 1e6) for i in range(num_layers))

            def forward(self, position_ids):
                tables = []
                for i, rope in enumerate(self.rotaries):
                    tables.append(rope(position_ids, position_ids))
                return tables
        '''
    assert _found(source) == {(24, "RPL001"): "unsafe"}
    fixed = _fixed(source, unsafe=True)
    assert "rope(position_ids.float(), position_ids)" in fixed and _found(fixed) == {}
    indexed = source.replace("for i, rope in enumerate(self.rotaries):\n                    tables.append(rope(",
                             "for i in range(2):\n                    tables.append(self.rotaries[i](")
    assert _found(indexed) == {(24, "RPL001"): "unsafe"}
    activation = source.replace("def forward(self, position_ids)", "def forward(self, x, position_ids)") \
        .replace("rope(position_ids, position_ids)", "rope(x, position_ids)")
    assert _found(activation) == {}


def test_a_positions_parameter_reshaped_before_a_cache_is_matched_to_it():
    """vLLM's `positions = (positions + offsets).flatten()` still holds the parameter's int64 ids, so
    `self._match_cache_dtype(positions)`, whose cache takes `ref.dtype`, truncates the tables (RPL001, fixed by
    handing the query, which the method reads only for its dtype and device). A local named `positions`
    built from something else says nothing."""
    source = '''\
        import torch
        from torch import nn


        class RotaryEmbedding(nn.Module):
            def __init__(self, rotary_dim, max_positions=4096, base=10000.0):
                super().__init__()
                inv_freq = 1.0 / (base ** (torch.arange(0, rotary_dim, 2, dtype=torch.float) / rotary_dim))
                t = torch.arange(max_positions, dtype=torch.float)
                freqs = t[:, None] * inv_freq[None, :]
                self.cos_sin_cache = torch.cat((freqs.cos(), freqs.sin()), dim=-1)

            def _match_cache_dtype(self, ref):
                if self.cos_sin_cache.device != ref.device or self.cos_sin_cache.dtype != ref.dtype:
                    self.cos_sin_cache = self.cos_sin_cache.to(ref.device, dtype=ref.dtype)

            def forward(self, positions, query, offsets=None):
                if offsets is not None:
                    positions = positions + offsets
                positions = positions.flatten()
                self._match_cache_dtype(positions)
                cos, sin = self.cos_sin_cache.index_select(0, positions).chunk(2, dim=-1)
                return query * cos + query * sin
        '''
    assert _found(source) == {(21, "RPL001"): "safe"}
    fixed = _fixed(source)
    assert "self._match_cache_dtype(query)" in fixed and _found(fixed) == {}
    assert _found(source.replace("positions = positions.flatten()", "positions = query.flatten()")) == {}


def test_a_holder_passing_an_integer_dtype_to_a_dtype_taking_method_of_its_rotary():
    """ChatGLM's `self.rotary_pos_emb.forward_impl(n, d, dtype=position_ids.dtype, ...)` in a class that has no
    rotary vocabulary of its own: the call is still seen (the method takes a dtype), and its `cache.to(dtype)`
    truncates the cache (RPL001, fixed by passing float32)."""
    source = '''\
        import torch
        from torch import nn


        class RotaryEmbedding(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.dim = dim

            def forward_impl(self, seq_len: int, n_elem: int, dtype: torch.dtype, device: torch.device, base=10000):
                theta = 1.0 / (base ** (torch.arange(0, n_elem, 2, dtype=torch.float, device=device) / n_elem))
                seq_idx = torch.arange(seq_len, dtype=torch.float, device=device)
                idx_theta = torch.outer(seq_idx, theta).float()
                cache = torch.stack([torch.cos(idx_theta), torch.sin(idx_theta)], dim=-1)
                return cache.to(dtype)


        class GLM2D(nn.Module):
            def __init__(self, kv_channels=128):
                super().__init__()
                self.rotary_pos_emb = RotaryEmbedding(kv_channels // 2)

            def _cache_for(self, position_ids):
                n = int(position_ids.max()) + 1
                return self.rotary_pos_emb.forward_impl(n, self.rotary_pos_emb.dim, dtype=position_ids.dtype,
                                                        device=position_ids.device)

            def forward(self, query, position_ids):
                return query * self._cache_for(position_ids)[position_ids][..., 0].to(query.dtype)
        '''
    assert _found(source) == {(25, "RPL001"): "safe"}
    fixed = _fixed(source)
    assert "dtype=torch.float32," in fixed and _found(fixed) == {}
    assert _found(source.replace("dtype=position_ids.dtype", "dtype=torch.float32")) == {}


def test_a_cached_table_moved_with_to_positions_after_the_positions_are_reshaped():
    """vLLM's `self.cos_sin_cache = self.cos_sin_cache.to(positions, non_blocking=True)` after `positions =
    (positions + offsets).flatten()`: `.to(tensor)` takes the int64 dtype with the device (RPL001, fixed by
    keeping only the device move). The method holding it is kept even in a class whose name and other methods
    say nothing rotary. `.to(positions.device, ...)` is a device move only."""
    source = '''\
        import torch
        from torch import nn


        class Engine(nn.Module):
            def __init__(self, rotary_dim, max_positions=4096, base=10000.0):
                super().__init__()
                inv_freq = 1.0 / (base ** (torch.arange(0, rotary_dim, 2, dtype=torch.float) / rotary_dim))
                t = torch.arange(max_positions, dtype=torch.float)
                freqs = torch.einsum("i,j -> ij", t, inv_freq)
                self.register_buffer("cos_sin_cache", torch.cat((freqs.cos(), freqs.sin()), dim=-1), persistent=False)

            def forward_native(self, positions, query, offsets=None):
                if offsets is not None:
                    positions = positions + offsets
                positions = positions.flatten()
                self.cos_sin_cache = self.cos_sin_cache.to(positions, non_blocking=True)
                cos, sin = self.cos_sin_cache.index_select(0, positions).chunk(2, dim=-1)
                return query * cos + query * sin
        '''
    found = _found(source)
    assert found[(17, "RPL001")] == "safe"
    fixed = _fixed(source)
    assert "self.cos_sin_cache.to(positions.device, non_blocking=True)" in fixed
    assert (17, "RPL001") not in _found(fixed)
    assert (17, "RPL001") not in _found(source.replace(".to(positions, non", ".to(positions.device, non"))


def test_tables_packed_into_a_cache_entry_in_the_callers_dtype_are_cast_where_they_are_taken():
    """`t = torch.arange(n).to(dtype)` and `inv_freq.to(dtype=dtype)` for tables packed as
    `entry = (n, emb.cos(), emb.sin())` (stored in a dict and returned): safe to build in float32 when each
    cos/sin is cast to `dtype` where it is taken, which keeps the entry's dtype. A table used in arithmetic in
    the function leaves the fix unsafe."""
    source = '''\
        import torch
        from torch import nn


        class QwenRotaryEmbedding(nn.Module):
            def __init__(self, dim, base=10000.0):
                super().__init__()
                self.inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
                self._tables = {}

            def _build(self, seq_len, device, dtype):
                t = torch.arange(seq_len, device=device).to(dtype)
                freqs = torch.outer(t, self.inv_freq.to(device=device, dtype=dtype))
                emb = torch.cat((freqs, freqs), dim=-1)
                entry = (seq_len, emb.cos(), emb.sin())
                self._tables[(device, dtype)] = entry
                return entry

            def forward(self, x, seq_len):
                _, cos, sin = self._build(seq_len, x.device, x.dtype)
                return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)
        '''
    assert _found(source) == {(12, "RPL005"): "safe", (13, "RPL006"): "safe"}
    fixed = _fixed(source)
    assert "entry = (seq_len, emb.cos().to(dtype), emb.sin().to(dtype))" in fixed
    assert "torch.arange(seq_len, device=device).float()" in fixed and _found(fixed) == {}
    used = source.replace("entry = (seq_len, emb.cos(), emb.sin())", "entry = (seq_len, emb.cos() * 2, emb.sin())")
    assert _found(used)[(12, "RPL005")] == "unsafe"


def test_cached_tables_rebuilt_by_the_apply_override_or_before_every_read():
    """Tables registered by `_set_cos_sin_cache` are kept when the class's `_apply` calls that method after
    `super()._apply` (rebuilding them from float32), and need no keeping when `forward` rebuilds them as its
    own statement before reading them. Rebuilt only in `__init__`, they are rounded by a later cast (RPL011);
    an `_apply` that only widens the buffer in an `if` on its dtype repairs nothing (RPL002)."""
    rebuilt_in_apply = '''\
        import torch


        class RotaryEmbedding(torch.nn.Module):
            def __init__(self, dim, max_positions=2048, base=10000):
                super().__init__()
                self.dim, self.base = dim, base
                self.register_buffer("inv_freq", self._inv_freq(None), persistent=False)
                self._set_cos_sin_cache(max_positions, device=self.inv_freq.device)

            def _inv_freq(self, device):
                return 1.0 / (self.base ** (torch.arange(0, self.dim, 2, device=device, dtype=torch.float32) / self.dim))

            def _set_cos_sin_cache(self, seq_len, device):
                self.max_seq_len_cached = seq_len
                t = torch.arange(seq_len, device=device, dtype=torch.float32)
                freqs = torch.outer(t, self._inv_freq(device))
                emb = torch.cat((freqs, freqs), dim=-1)
                self.register_buffer("cos_cached", emb.cos(), persistent=False)
                self.register_buffer("sin_cached", emb.sin(), persistent=False)

            def _apply(self, fn, recurse=True):
                super()._apply(fn, recurse)
                self._set_cos_sin_cache(self.max_seq_len_cached, self.inv_freq.device)
                return self

            def forward(self, x, seq_len):
                return self.cos_cached[:seq_len].to(dtype=x.dtype), self.sin_cached[:seq_len].to(dtype=x.dtype)
        '''
    assert _found(rebuilt_in_apply) == {}
    without_apply = rebuilt_in_apply.replace("def _apply(self, fn, recurse=True)", "def _unused(self, fn, recurse=True)")
    assert _found(without_apply) == {(19, "RPL011"): "safe", (20, "RPL011"): "safe"}
    rebuilt_in_forward = without_apply.replace(
        "def forward(self, x, seq_len):\n",
        "def forward(self, x, seq_len):\n                self._set_cos_sin_cache(seq_len, x.device)\n")
    assert _found(rebuilt_in_forward) == {}
    widened = '''\
        import torch


        class RotaryEmbedding(torch.nn.Module):
            def __init__(self, dim, base=10000):
                super().__init__()
                inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
                self.register_buffer("inv_freq", inv_freq, persistent=False)

            def _apply(self, fn, recurse=True):
                super()._apply(fn, recurse)
                if self.inv_freq.dtype != torch.float32:
                    self.inv_freq = self.inv_freq.float()
                return self

            def forward(self, x, seq_len):
                t = torch.arange(seq_len, device=x.device, dtype=torch.float32)
                freqs = torch.outer(t, self.inv_freq.to(x.device))
                return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)
        '''
    assert _found(widened) == {(18, "RPL002"): "safe"}


def test_a_range_wrapper_is_read_with_its_callers_arguments():
    """`def _arange(start, end, step=1, *, device=None, dtype=None): return torch.arange(...)`: called with a step
    of 2 it makes exponents, so `compute_inv_freq` builds inverse frequencies, and a caller threading a 16-bit
    dtype through three calls gets 16-bit frequencies (RPL006) and positions (RPL005), as if the ranges were
    written out."""
    source = '''\
        import torch


        def _arange(start, end, step=1, *, device=None, dtype=None):
            return torch.arange(start, end, step, device=device, dtype=dtype)


        def compute_inv_freq(dim, base, *, device=None, dtype=None):
            return 1.0 / (base ** (_arange(0, dim, 2, device=device, dtype=dtype) / dim))


        def get_rotary_seq_freqs(dim, base, max_seq_len, *, device=None, dtype=None):
            inv_freq = compute_inv_freq(dim, base, device=device, dtype=dtype)
            seq = _arange(0, max_seq_len, device=device, dtype=dtype)
            return torch.outer(seq, inv_freq)


        class RotaryEmbedding(torch.nn.Module):
            def __init__(self, dim, base=10000):
                super().__init__()
                self.dim, self.base = dim, base

            def forward(self, max_seq_len, device=None):
                freqs = get_rotary_seq_freqs(self.dim, self.base, max_seq_len, device=device, dtype=torch.bfloat16)
                return torch.cat((freqs, freqs), dim=-1)[:, None, None, :]
        '''
    found = _found(source)
    assert (9, "RPL006") in found and (14, "RPL005") in found
    # The same findings as with the ranges written out where they are made.
    assert found.keys() == _found(source.replace("_arange(0, dim, 2, device=device, dtype=dtype)",
                                          "torch.arange(0, dim, 2, device=device, dtype=dtype)")
                           .replace("_arange(0, max_seq_len, device=device, dtype=dtype)",
                                    "torch.arange(0, max_seq_len, device=device, dtype=dtype)")).keys()


def test_positions_counted_over_a_mask_in_the_activation_dtype():
    """`mask = attention_mask.to(hidden_states.dtype)` (through a helper), then `torch.cumsum(mask, -1)`: the
    count runs in 16 bits (RPL005), fixed by counting in float32 (`dtype=torch.float32`, not a `.float()` of
    rounded counts). A `.long()` mask counts in int64."""
    source = '''\
        import torch
        from torch import nn


        class LeftPaddedRotary(nn.Module):
            def __init__(self, head_dim=64, theta=10000.0):
                super().__init__()
                self.head_dim, self.theta = head_dim, theta

            @staticmethod
            def _float_mask(hidden_states, attention_mask):
                return attention_mask.to(hidden_states.dtype)

            def forward(self, hidden_states, attention_mask):
                mask = self._float_mask(hidden_states, attention_mask)
                position_ids = (torch.cumsum(mask, dim=-1) - 1).masked_fill(mask == 0, 1)
                inv_freq = 1.0 / (self.theta ** (torch.arange(0, self.head_dim, 2, dtype=torch.float32) / self.head_dim))
                freqs = position_ids.float()[..., None] * inv_freq.to(hidden_states.device)
                return freqs.cos().to(hidden_states.dtype), freqs.sin().to(hidden_states.dtype)
        '''
    assert _found(source) == {(16, "RPL005"): "safe"}
    fixed = _fixed(source)
    assert "torch.cumsum(mask, dim=-1, dtype=torch.float32)" in fixed and _found(fixed) == {}
    assert _found(source.replace("return attention_mask.to(hidden_states.dtype)",
                                 "return attention_mask.long()")) == {}
    method = source.replace("torch.cumsum(mask, dim=-1)", "mask.cumsum(-1)")
    assert _found(method) == {(16, "RPL005"): "safe"}
    assert "mask.cumsum(-1, dtype=torch.float32)" in fix_text("rotary.py", textwrap.dedent(method), ALL,
                                                              unsafe=False).fixed


def test_a_dtype_promoted_from_two_integer_dtypes_is_an_integer_dtype():
    """`dtype = torch.promote_types(position_ids.dtype, cu_seqlens.dtype)` is int64; tables cast to it truncate
    (RPL001). Promoted with the activation's dtype it is a float dtype."""
    source = '''\
        import torch


        class VarlenRotary(torch.nn.Module):
            def forward(self, q, position_ids, cu_seqlens):
                dtype = torch.promote_types(position_ids.dtype, cu_seqlens.dtype)
                inv_freq = 1.0 / (10000.0 ** (torch.arange(0, 64, 2, dtype=torch.float32) / 64))
                freqs = position_ids.float()[:, None] * inv_freq[None, :]
                cos, sin = freqs.cos().to(dtype), freqs.sin().to(dtype)
                return q * cos + q * sin
        '''
    assert _found(source) == {(9, "RPL001"): "safe"}
    assert _found(source.replace("cu_seqlens.dtype)", "q.dtype)")) == {}


def test_an_addmm_outer_product_plus_a_start_phase_is_rewritten_elementwise():
    """`torch.addmm(start, steps[:, None], inv_freq[None, :])` runs its matmul in 16 bits under autocast
    (RPL003); with the outer-product shapes proven, the fix keeps the added term: `(start + (a * b))`. With
    `beta=`/`alpha=` there is no automatic fix."""
    source = '''\
        import torch


        def phase(inv_freq, seq_len, offset):
            steps = torch.arange(seq_len, dtype=torch.float32)
            start_phase = (offset * inv_freq).expand(seq_len, -1)
            phase = torch.addmm(start_phase, steps[:, None], inv_freq[None, :])
            return phase.cos(), phase.sin()
        '''
    assert _found(source) == {(7, "RPL003"): "safe"}
    fixed = _fixed(source)
    assert "phase = (start_phase + (steps[:, None] * inv_freq[None, :].float()))" in fixed and _found(fixed) == {}
    assert _found(source.replace("inv_freq[None, :])", "inv_freq[None, :], beta=0.5)")) == {(7, "RPL003"): None}


def test_coordinates_named_in_the_singular_and_loops_over_literal_pairs():
    """`grid_coord` (integer voxel indices) is positions as `grid_coords` is: tables cast back with
    `.type_as(grid_coord)` truncate (RPL001). `for pos, f in ((bars, bar_freqs), (ticks, tick_freqs))` binds
    each name to its column, so the matmul in the loop is a phase (here under a disabled-autocast decorator:
    RPL004)."""
    voxels = '''\
        import torch


        class VoxelRoPE(torch.nn.Module):
            def forward(self, grid_coord):
                coords = grid_coord.float()
                inv_freq = 1.0 / (10000.0 ** (torch.arange(0, 16, 2, dtype=torch.float32) / 16))
                freqs = coords[:, :1] * inv_freq[None, :]
                return freqs.cos().type_as(grid_coord), freqs.sin().type_as(grid_coord)
        '''
    assert _found(voxels) == {(9, "RPL001"): "safe"}
    metrical = '''\
        import torch
        from torch.amp import autocast


        class MetricalRotary(torch.nn.Module):
            def __init__(self, dim=64):
                super().__init__()
                self.dim = dim

            @autocast("cuda", enabled=False)
            def forward(self, bar_index, tick_in_bar):
                bar_freqs = 1.0 / (10000.0 ** (torch.arange(0, self.dim, 2).float() / self.dim))
                tick_freqs = 1.0 / (480.0 ** (torch.arange(0, self.dim, 2).float() / self.dim))
                axes = []
                for pos, f in ((bar_index.float(), bar_freqs), (tick_in_bar.float(), tick_freqs)):
                    axes.append(torch.matmul(pos.unsqueeze(-1), f.unsqueeze(0)))
                return torch.cat(axes, dim=-1)
        '''
    assert set(_found(metrical)) == {(10, "RPL004")}


def test_a_rebuild_through_a_construction_that_is_still_16_bit_is_unsafe():
    """The RPL002 rebuild calls the module's own construction, and the runtime helper rejects a 16-bit result:
    while that construction builds the frequencies in `config.torch_dtype` (RPL006 with no safe fix) the rebuild
    would raise in forward, so it is offered as unsafe. With the construction in float32 it is safe."""
    source = '''\
        import torch
        from torch import nn


        def default_rope_parameters(config, device=None):
            dim = config.head_dim
            exponents = torch.arange(0, dim, 2, dtype=torch.int64).to(device=device, dtype=config.torch_dtype) / dim
            return 1.0 / (config.rope_theta ** exponents), 1.0


        class Rotary(nn.Module):
            def __init__(self, config, device=None):
                super().__init__()
                self.config = config
                inv_freq, self.attention_scaling = default_rope_parameters(config, device)
                self.register_buffer("inv_freq", inv_freq, persistent=False)

            def forward(self, x, position_ids):
                freqs = position_ids[:, :, None].float() * self.inv_freq[None, None, :].float()
                return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)
        '''
    found = _found(source)
    assert found[(7, "RPL006")] == "unsafe" and found[(19, "RPL002")] == "unsafe"
    assert _found(source.replace("dtype=config.torch_dtype", "dtype=torch.float32")) == {(19, "RPL002"): "safe"}


def test_a_dtype_chosen_between_the_activation_and_the_ids_keeps_the_activation_branch():
    """`out_dtype = x.dtype if x is not None else position_ids.dtype`: only the ids branch truncates. The fix
    replaces that branch with float32 and keeps `.to(out_dtype)`, so a caller passing `x` still gets tables in
    `x.dtype` (dropping the cast would hand it float32 tables its attention cannot mix with 16-bit values)."""
    source = '''\
        import torch


        class Tables(torch.nn.Module):
            def forward(self, position_ids, x=None):
                inv_freq = 1.0 / (10000.0 ** (torch.arange(0, 64, 2, dtype=torch.float32) / 64))
                freqs = position_ids.float()[..., None] * inv_freq
                cos, sin = freqs.cos(), freqs.sin()
                out_dtype = x.dtype if x is not None else position_ids.dtype
                return cos.to(out_dtype), sin.to(out_dtype)
        '''
    assert _found(source) == {(10, "RPL001"): "safe"}
    fixed = _fixed(source)
    assert "out_dtype = x.dtype if x is not None else torch.float32" in fixed
    assert "return cos.to(out_dtype), sin.to(out_dtype)" in fixed and _found(fixed) == {}


def test_a_dtype_assigned_on_two_paths_keeps_the_activation_path():
    """`if x is not None: out_dtype = x.dtype` / `else: out_dtype = position_ids.dtype`: the integer path is
    replaced with float32 and the cast stays."""
    source = '''\
        import torch


        class Tables(torch.nn.Module):
            def forward(self, position_ids, x=None):
                inv_freq = 1.0 / (10000.0 ** (torch.arange(0, 64, 2, dtype=torch.float32) / 64))
                freqs = position_ids.float()[..., None] * inv_freq
                if x is not None:
                    out_dtype = x.dtype
                else:
                    out_dtype = position_ids.dtype
                return freqs.cos().to(out_dtype), freqs.sin().to(out_dtype)
        '''
    found = _found(source)
    assert found == {(12, "RPL001"): "safe"}
    fixed = _fixed(source)
    assert "out_dtype = torch.float32" in fixed and "out_dtype = x.dtype" in fixed
    assert "freqs.cos().to(out_dtype)" in fixed and _found(fixed) == {}


def test_angles_in_other_units_times_harmonics_are_a_phase():
    """`lam = torch.deg2rad(torch.remainder(lon_deg, 360.0)).to(self.lat_freqs.dtype)` times a Parameter of
    `lon_harmonics`: the converted longitudes are the coordinates of a phase (RPL005 for their 16-bit cast) and
    the harmonics are frequencies that module casts reach (RPL002)."""
    source = '''\
        import torch
        from torch import nn


        class SphericalRoPE(nn.Module):
            def __init__(self, head_dim=64, max_harmonic=32):
                super().__init__()
                n = head_dim // 4
                self.lat_freqs = nn.Parameter(10000.0 ** (-torch.arange(n, dtype=torch.float32) / n), requires_grad=False)
                self.lon_harmonics = nn.Parameter(torch.linspace(1, max_harmonic, n).round(), requires_grad=False)

            def forward(self, lat_deg, lon_deg):
                lam = torch.deg2rad(torch.remainder(lon_deg, 360.0)).to(self.lat_freqs.dtype)
                lon_phase = lam[:, None] * self.lon_harmonics[None, :]
                return lon_phase.cos(), lon_phase.sin()
        '''
    found = _found(source)
    assert found[(13, "RPL005")] == "safe" and found[(14, "RPL002")] == "safe"
    fixed = _fixed(source)
    assert "torch.deg2rad(torch.remainder(lon_deg, 360.0)).float()" in fixed and _found(fixed) == {}


def test_a_model_building_positions_in_the_activation_dtype_and_a_decoder_handing_token_ids():
    """Two holders of a correct rotary: a model whose `cache_position = torch.arange(..., dtype=inputs_embeds.dtype)`
    rounds the positions before `self.rotary_emb(hidden_states, position_ids)` (RPL005 at the range; the
    positions index the cache and build the mask too, so the fix makes them int64), and Whisper's decoder calling `self.rotary(x, n)` while
    `x` is still the token ids it embeds on the next line (RPL001, fixed by handing the embedding's weight)."""
    rotary = '''\
        import torch
        from torch import nn


        class RotaryEmbedding(nn.Module):
            def __init__(self, dim=16, base=10000.0):
                super().__init__()
                self.dim, self.base = dim, base

            def forward(self, x, position_ids):
                inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2, dtype=torch.float32) / self.dim))
                freqs = position_ids.to(torch.float32)[..., None] * inv_freq.to(x.device)
                return freqs.cos().to(dtype=x.dtype), freqs.sin().to(dtype=x.dtype)
        '''
    model = rotary + '''

        class Model(nn.Module):
            def __init__(self, vocab=32, hidden=16):
                super().__init__()
                self.embed_tokens = nn.Embedding(vocab, hidden)
                self.rotary_emb = RotaryEmbedding(hidden)

            def forward(self, input_ids, past_seen_tokens=0):
                inputs_embeds = self.embed_tokens(input_ids)
                cache_position = torch.arange(past_seen_tokens, past_seen_tokens + inputs_embeds.shape[1],
                                              device=inputs_embeds.device, dtype=inputs_embeds.dtype)
                position_ids = cache_position.unsqueeze(0)
                return self.rotary_emb(inputs_embeds, position_ids), cache_position
        '''
    assert _found(model) == {(24, "RPL005"): "safe"}  # int64 ids, as everywhere else (see the int64 test below)
    assert _found(model.replace("device=inputs_embeds.device, dtype=inputs_embeds.dtype)",
                                "device=inputs_embeds.device)")) == {}
    decoder = rotary + '''

        class TextDecoder(nn.Module):
            def __init__(self, vocab=32, hidden=16):
                super().__init__()
                self.token_embedding = nn.Embedding(vocab, hidden)
                self.rotary = RotaryEmbedding(hidden)

            def forward(self, x, offset=0):
                rope = self.rotary(x, torch.arange(offset, offset + x.shape[-1]))
                x = self.token_embedding(x)
                return x * rope[0]
        '''
    assert _found(decoder) == {(23, "RPL001"): "safe"}
    fixed = _fixed(decoder)
    assert "self.rotary(self.token_embedding.weight, torch.arange(" in fixed and _found(fixed) == {}


def test_frequencies_computed_in_forward_from_an_integer_buffer_are_exact():
    """`register_buffer("freq_exponents", torch.arange(0, dim, 2, dtype=torch.int64))` is left alone by module
    casts (they convert floating tensors only), so `1 / base ** (self.freq_exponents.float() / dim)` in forward
    is float32 and exact: no RPL002. The same buffer built as a float is rounded (RPL002)."""
    source = '''\
        import torch
        from torch import nn


        class ContinuousRotary(nn.Module):
            def __init__(self, dim=64, base=10000.0):
                super().__init__()
                self.dim, self.base = dim, base
                self.register_buffer("freq_exponents", torch.arange(0, dim, 2, dtype=torch.int64), persistent=False)

            def forward(self, x, positions):
                inv_freq = 1.0 / (self.base ** (self.freq_exponents.float() / self.dim))
                phase = positions.float()[..., None] * inv_freq.to(positions.device)
                return phase.cos().to(x.dtype), phase.sin().to(x.dtype)
        '''
    assert _found(source) == {}
    assert (12, "RPL002") in _found(source.replace("dtype=torch.int64", "dtype=torch.float32"))


def test_a_dtype_read_from_a_layer_that_quantisation_makes_integer():
    """A file whose quantised layer holds an integer `weight` (`nn.Parameter(..., dtype=torch.int8)`): tables cast
    to `self.q_proj.weight.dtype` truncate once that layer replaced the projection (measured in the held-out
    W8A16 module: max |cos error| 1.0). The holder is found although only its call names the rotary, and the fix
    hands the activation's dtype. Without the integer layer in the file the same code is left alone."""
    source = '''\
        import torch
        from torch import nn


        class Int8Linear(nn.Module):
            def __init__(self, n_in, n_out):
                super().__init__()
                self.weight = nn.Parameter(torch.zeros(n_out, n_in, dtype=torch.int8), requires_grad=False)

            def forward(self, x):
                return x @ self.weight.to(x.dtype).t()


        class Rotary(nn.Module):
            def __init__(self, head_dim, theta=10000.0):
                super().__init__()
                self.head_dim, self.theta = head_dim, theta

            def forward(self, position_ids, dtype):
                inv = 1.0 / (self.theta ** (torch.arange(0, self.head_dim, 2, dtype=torch.float32) / self.head_dim))
                emb = position_ids[..., None].float() * inv
                return emb.cos().to(dtype), emb.sin().to(dtype)


        class Attention(nn.Module):
            def __init__(self, hidden=64, heads=4):
                super().__init__()
                self.q_proj = nn.Linear(hidden, hidden)
                self.rotary_emb = Rotary(hidden // heads)

            def forward(self, hidden_states, position_ids):
                q = self.q_proj(hidden_states)
                cos, sin = self.rotary_emb(position_ids, dtype=self.q_proj.weight.dtype)
                return q, cos, sin
        '''
    assert _found(source) == {(33, "RPL001"): "safe"}
    fixed = _fixed(source)
    assert "self.rotary_emb(position_ids, dtype=hidden_states.dtype)" in fixed and _found(fixed) == {}
    assert _found(source.replace("dtype=torch.int8", "dtype=torch.float16")) == {}
    # Handing the ids' own dtype is the same bug, in a holder found the same way.
    assert _found(source.replace("self.q_proj.weight.dtype", "position_ids.dtype")) == {(33, "RPL001"): "safe"}


def test_the_real_and_imaginary_parts_of_a_rotation_are_tables():
    """gpt-fast: `cache = torch.stack([freqs_cis.real, freqs_cis.imag], -1).to(dtype=dtype)` with `dtype` from the
    output head's weight, which the file's int8 layer makes integer: the cache truncates (held-out, 1.0)."""
    source = '''\
        import torch
        from torch import nn


        def precompute_freqs_cis(seq_len, n_elem, base=10000, dtype=torch.bfloat16):
            freqs = 1.0 / (base ** (torch.arange(0, n_elem, 2).float() / n_elem))
            t = torch.arange(seq_len, device=freqs.device)
            freqs = torch.outer(t, freqs)
            freqs_cis = torch.polar(torch.ones_like(freqs), freqs)
            cache = torch.stack([freqs_cis.real, freqs_cis.imag], dim=-1)
            return cache.to(dtype=dtype)


        class WeightOnlyInt8Linear(nn.Module):
            def __init__(self, n_in, n_out):
                super().__init__()
                self.register_buffer("weight", torch.empty((n_out, n_in), dtype=torch.int8))


        class Transformer(nn.Module):
            def __init__(self, dim=64, n_head=4, vocab=32):
                super().__init__()
                self.dim, self.n_head = dim, n_head
                self.output = nn.Linear(dim, vocab, bias=False)

            def setup_caches(self, block_size):
                self.freqs_cis = precompute_freqs_cis(block_size, self.dim // self.n_head, dtype=self.output.weight.dtype)
        '''
    found = _found(source)
    assert found == {(27, "RPL001"): "safe"}
    assert _found(source.replace("self.output.weight.dtype", "torch.int64")) == found
    fixed = _fixed(source)
    assert "dtype=torch.float32)" in fixed and _found(fixed) == {}


def test_the_first_tensor_of_a_module_holding_quantised_layers_can_be_integer():
    """GPTQ: the attention's `dtype` property returns its first parameter's dtype, else its first buffer's; once
    `QuantLinear` layers (int32 `qweight` buffers) replaced the projections that is int32 (held-out: max |cos
    error| 1.0). The short helper is read although blank lines follow it."""
    source = '''\
        import torch
        from torch import nn


        class QuantLinear(nn.Module):
            def __init__(self, n_in, n_out):
                super().__init__()
                self.register_buffer("qweight", torch.zeros(n_in // 8, n_out, dtype=torch.int32))


        class NeoXRotary(nn.Module):
            def __init__(self, dim, base=10000):
                super().__init__()
                self.inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))

            def forward(self, seq_len, dtype=torch.float32):
                t = torch.arange(seq_len, dtype=torch.int64).float()
                emb = torch.outer(t, self.inv_freq)
                return emb.cos().to(dtype), emb.sin().to(dtype)


        def _first_tensor_dtype(module):
            # quantised layers keep everything in buffers
            for p in module.parameters():
                return p.dtype
            for b in module.buffers():
                return b.dtype
            return torch.get_default_dtype()


        class Attention(nn.Module):
            def __init__(self, hidden=64, heads=4):
                super().__init__()
                self.qkv = nn.Linear(hidden, 3 * hidden)
                self.rotary_emb = NeoXRotary(hidden // heads)

            @property
            def dtype(self):
                return _first_tensor_dtype(self)

            def forward(self, hidden_states):
                cos, sin = self.rotary_emb(hidden_states.shape[1], dtype=self.dtype)
                return self.qkv(hidden_states), cos, sin
        '''
    assert _found(source) == {(42, "RPL001"): "safe"}
    fixed = _fixed(source)
    assert "dtype=hidden_states.dtype)" in fixed and _found(fixed) == {}
    assert _found(source.replace("dtype=torch.int32", "dtype=torch.float16")) == {}


def test_a_builder_whose_callers_all_pass_a_full_dtype_is_left_alone():
    """`_compute_inv_freq(self, seq_len, device=None, dtype=torch.float64)` casts its exponent with `.to(dtype)`;
    `__init__` passes `torch.float32` and `forward` passes `torch.float32 if mps else torch.float64`: full
    precision on every path (held-out correct module, errors below 1e-6 in float32). A caller handing the
    activation's dtype makes both the frequencies and the positions findings again. A public rotary builder
    called with a local that holds `torch.float32` is read the same way (diffusers' `get_1d_rotary_pos_embed`)."""
    source = '''\
        import torch
        from torch import nn


        class DynamicRotary(nn.Module):
            def __init__(self, dim=64, base=10000.0):
                super().__init__()
                self.dim, self.base = dim, base
                self.register_buffer("inv_freq", self._compute_inv_freq(dtype=torch.float32), persistent=False)

            def _compute_inv_freq(self, device=None, dtype=torch.float64):
                exponent = torch.arange(0, self.dim, 2, dtype=torch.int64, device=device).to(dtype) / self.dim
                return 1.0 / (self.base ** exponent)

            def forward(self, x, position_ids):
                compute_dtype = torch.float32 if x.device.type == "mps" else torch.float64
                inv_freq = self._compute_inv_freq(device=x.device, dtype=compute_dtype)
                pos = position_ids.to(device=x.device, dtype=compute_dtype)
                freqs = pos[:, :, None] * inv_freq[None, None, :]
                return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)
        '''
    assert _found(source) == {}
    activation = source.replace('torch.float32 if x.device.type == "mps" else torch.float64', "x.dtype")
    assert set(_found(activation)) == {(12, "RPL006"), (18, "RPL005")}
    # A call that leaves the dtype out gets the default, which must be a full one too.
    assert set(_found(source.replace("dtype=torch.float64):", "dtype=torch.bfloat16):")
                      .replace("self._compute_inv_freq(dtype=torch.float32)", "self._compute_inv_freq()"))) \
        == {(12, "RPL006")}
    public = '''\
        import torch


        def get_1d_rotary_pos_embed(dim, pos, theta=10000.0, freqs_dtype=torch.float32):
            freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=freqs_dtype, device=pos.device) / dim))
            freqs = torch.outer(pos.to(freqs_dtype), freqs)
            return freqs.cos().float(), freqs.sin().float()


        def flux_pos_embed(ids, axes_dim=(16, 56, 56), theta=10000):
            freqs_dtype = torch.float32
            return [get_1d_rotary_pos_embed(d, ids[:, i].float(), theta, freqs_dtype=freqs_dtype)
                    for i, d in enumerate(axes_dim)]
        '''
    assert _found(public) == {}
    assert set(_found(public.replace("freqs_dtype = torch.float32", "freqs_dtype = ids.dtype"))) \
        == {(5, "RPL006"), (6, "RPL005")}


def test_frequencies_given_as_the_fallback_of_an_optional_argument():
    """lucidrains' `inv_freq = default(custom_freqs, 1.0 / (theta ** ...))` with `custom_freqs=None`: what a
    caller gets is mostly the fallback, so the phase stored from it in a buffer is found (held-out: 2.0 after
    `.bfloat16()`)."""
    source = '''\
        import torch
        from torch import nn


        def exists(v):
            return v is not None


        def default(v, d):
            return v if exists(v) else d


        class RotaryEmbedding(nn.Module):
            def __init__(self, dim, theta=10000.0, max_seq_len=8192, custom_freqs=None):
                super().__init__()
                inv_freq = default(custom_freqs, 1.0 / (theta ** (torch.arange(0, dim, 2).float() / dim)))
                positions = torch.arange(max_seq_len, dtype=torch.float32)
                freqs = positions[:, None] * inv_freq[None, :]
                self.register_buffer("freqs", freqs, persistent=False)

            def forward(self, q):
                freqs = self.freqs.float()[: q.shape[-2]]
                return q * freqs.cos() + q * freqs.sin()
        '''
    assert _found(source) == {(19, "RPL009"): "safe"}


def test_a_matmul_of_operands_made_float64_through_a_module_constant_and_locals():
    """Autocast leaves float64 operands alone (measured: a float64 matmul stays float64 under CPU bf16 autocast).
    `_ROPE_COMPUTE_DTYPE = torch.float64` reaches both operands through locals and `self.inv_freq` set in the same
    forward: no RPL003 (held-out Phi-3 LongRoPE, 3.8e-3 in bf16). With the constant float32 it is found."""
    source = '''\
        import torch
        from torch import nn

        _ROPE_COMPUTE_DTYPE = torch.float64


        class LongRope(nn.Module):
            def __init__(self, dim=64, base=10000.0, long_factor=None):
                super().__init__()
                self.dim, self.base, self.long_factor = dim, base, long_factor or [1.0] * (dim // 2)

            @torch.no_grad()
            def forward(self, x, position_ids):
                ext = torch.tensor(self.long_factor, dtype=_ROPE_COMPUTE_DTYPE, device=x.device)
                shape = torch.arange(0, self.dim, 2, dtype=torch.int64, device=x.device).to(_ROPE_COMPUTE_DTYPE) / self.dim
                self.inv_freq = 1.0 / (ext * self.base ** shape)
                inv = self.inv_freq[None, :, None].expand(position_ids.shape[0], -1, 1)
                pos = position_ids[:, None, :].to(_ROPE_COMPUTE_DTYPE)
                freqs = (inv @ pos).transpose(1, 2)
                return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)
        '''
    assert _found(source) == {}
    assert (19, "RPL003") in _found(source.replace("_ROPE_COMPUTE_DTYPE = torch.float64",
                                                   "_ROPE_COMPUTE_DTYPE = torch.float32"))


def test_an_apply_override_restoring_frequencies_from_a_buffer_keeps_nothing():
    """`_apply` calls `super()._apply` (which rounds every float buffer) and then restores `inv_freq` from
    `_inv_freq_fp64`: a registered buffer, rounded by the same cast, so the restore keeps nothing (held-out: 1.99
    after `.bfloat16()`). The same master copy held in a plain attribute keeps the values (no finding)."""
    source = '''\
        import torch
        from torch import nn


        class PinnedRotary(nn.Module):
            def __init__(self, dim=64, base=10000.0):
                super().__init__()
                inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
                self.register_buffer("_inv_freq_fp64", inv_freq, persistent=False)
                self.register_buffer("inv_freq", inv_freq.clone(), persistent=False)

            def _apply(self, fn, *args, **kwargs):
                super()._apply(fn, *args, **kwargs)
                self._inv_freq_fp64 = self._inv_freq_fp64.to(self.inv_freq.device)
                self.inv_freq = self._inv_freq_fp64.clone()
                return self

            def forward(self, x, position_ids):
                t = position_ids.type_as(self.inv_freq)
                freqs = t.unsqueeze(-1) * self.inv_freq
                return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)
        '''
    assert set(_found(source)) == {(19, "RPL005"), (20, "RPL002")}
    fixed = _fixed(source)
    assert '("_inv_freq_fp64", "inv_freq")' in fixed and _found(fixed) == {}
    plain = source.replace('self.register_buffer("_inv_freq_fp64", inv_freq, persistent=False)',
                           "self._inv_freq_fp64 = inv_freq")
    assert _found(plain) == {}


def test_positions_handed_to_a_builder_that_also_takes_a_length():
    """diffusers' `get_1d_rotary_pos_embed(dim, pos, ...)` starts with `if isinstance(pos, int): pos =
    torch.arange(pos).float()` and scales `pos * interpolation_factor`: a caller handing a grid built in the
    latents' dtype still reaches the phase with it (held-out HunyuanVideo: 0.19 with bf16 latents)."""
    source = '''\
        import torch
        from torch import nn


        def get_1d_rotary_pos_embed(dim, pos, theta=10000.0, interpolation_factor=1.0):
            if isinstance(pos, int):
                pos = torch.arange(pos).float()
            freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, device=pos.device)[: (dim // 2)].to(pos.dtype) / dim))
            freqs = torch.outer(pos * interpolation_factor, freqs)
            return freqs.cos(), freqs.sin()


        class VideoRope(nn.Module):
            def __init__(self, dims=(16, 24, 24), theta=256.0):
                super().__init__()
                self.dims, self.theta = dims, theta

            def forward(self, hidden_states):
                sizes = hidden_states.shape[2:]
                tables = []
                for i in range(3):
                    grid = torch.arange(0, sizes[i], device=hidden_states.device, dtype=hidden_states.dtype)
                    tables.append(get_1d_rotary_pos_embed(self.dims[i], grid, self.theta))
                return tables
        '''
    assert set(_found(source)) == {(22, "RPL005")}
    assert _found(source.replace("dtype=hidden_states.dtype)", "dtype=torch.float32)")) == {}


def test_keywords_unpacked_from_a_local_dict():
    """DINOv3: `dd = {"device": device, "dtype": torch.float32}` then `torch.arange(0.5, H, **dd)`: float32
    coordinates, no finding (held-out correct module, 5.4e-7)."""
    source = '''\
        import torch
        from torch import nn


        class Rope2D(nn.Module):
            def __init__(self, head_dim=64, base=100.0):
                super().__init__()
                self.head_dim, self.base = head_dim, base

            def forward(self, H, W, device=None):
                dd = {"device": device, "dtype": torch.float32}
                coords_h = torch.arange(0.5, H, **dd) / H
                coords_w = torch.arange(0.5, W, **dd) / W
                coords = torch.stack(torch.meshgrid(coords_h, coords_w, indexing="ij"), dim=-1).flatten(0, 1)
                periods = self.base ** (2 * torch.arange(self.head_dim // 4, **dd) / (self.head_dim // 2))
                angles = 2 * 3.14159 * coords[:, :, None] / periods[None, None, :]
                return angles.cos(), angles.sin()
        '''
    assert _found(source) == {}
    assert (12, "RPL005") in _found(source.replace('"dtype": torch.float32', '"dtype": torch.bfloat16'))


def test_an_apply_function_that_casts_the_tables_to_the_ids_is_read_with_its_caller():
    """EXAONE-style `apply_rotary_pos_emb(q, k, cos, sin, position_ids)` doing `cos.to(position_ids)[position_ids]`
    (`Tensor.to(other)` copies the dtype too: held-out 1.0), called from an attention class that is not rotary by
    itself: found and fixed by keeping only the device move."""
    source = '''\
        import torch
        from torch import nn


        class Rotary(nn.Module):
            def __init__(self, dim=64, base=10000.0):
                super().__init__()
                self.dim, self.base = dim, base

            def forward(self, x, seq_len):
                inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2, dtype=torch.float32) / self.dim))
                freqs = torch.outer(torch.arange(seq_len, dtype=torch.float32), inv_freq)
                emb = torch.cat((freqs, freqs), dim=-1)
                return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


        def rotate_half(x):
            x1, x2 = x.chunk(2, dim=-1)
            return torch.cat((-x2, x1), dim=-1)


        def apply_rotary_pos_emb(q, k, cos, sin, position_ids, unsqueeze_dim=1):
            cos = cos.to(position_ids)[position_ids].unsqueeze(unsqueeze_dim)
            sin = sin.to(position_ids)[position_ids].unsqueeze(unsqueeze_dim)
            return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


        class Attention(nn.Module):
            def __init__(self, hidden=64, heads=1):
                super().__init__()
                self.proj = nn.Linear(hidden, 3 * hidden)
                self.rotary_emb = Rotary(hidden // heads)

            def forward(self, hidden_states, position_ids):
                q, k, v = self.proj(hidden_states)[:, None].chunk(3, dim=-1)
                cos, sin = self.rotary_emb(v, seq_len=k.shape[-2])
                q, k = apply_rotary_pos_emb(q, k, cos, sin, position_ids)
                return q, k, v
        '''
    assert _found(source) == {(23, "RPL001"): "safe", (24, "RPL001"): "safe"}
    fixed = _fixed(source)
    assert "cos = cos.to(position_ids.device)[position_ids]" in fixed and _found(fixed) == {}


def test_a_phase_cast_before_a_helper_returning_a_tuple_of_tables():
    """`_sincos(self._phase(n, device).to(dtype))` with `_sincos` returning `emb.cos(), emb.sin()`: the cast moves
    onto each table the helper returns (held-out Phi partial rotary, 2.0 before the fix)."""
    source = '''\
        import torch
        from torch import nn


        def _sincos(angles):
            emb = torch.cat((angles, angles), dim=-1)
            return emb.cos(), emb.sin()


        class Rotary(nn.Module):
            def __init__(self, dim=32, base=10000.0):
                super().__init__()
                self.dim, self.base = dim, base

            def _phase(self, seq_len, device):
                inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2, device=device).float() / self.dim))
                return torch.outer(torch.arange(seq_len, device=device, dtype=torch.float32), inv_freq)

            def forward(self, x):
                return _sincos(self._phase(x.shape[-2], x.device).to(x.dtype))
        '''
    assert _found(source) == {(20, "RPL007"): "safe"}
    fixed = _fixed(source)
    assert "return tuple(table.to(x.dtype) for table in _sincos(self._phase(x.shape[-2], x.device)))" in fixed
    assert _found(fixed) == {}


def test_a_dtype_read_from_a_held_module_that_keeps_its_frequencies_float32():
    """`dtype=self.freqs.inv_freq.dtype` with `self.freqs` a `Frequencies` module of this file: a finding while its
    buffer follows module casts; none once an `_apply` override keeps it (what RPL002's fix adds), so one fix
    pass leaves nothing (held-out split Frequencies/Positions/Tables modules)."""
    source = '''\
        import torch
        from torch import nn


        class Frequencies(nn.Module):
            def __init__(self, dim, base):
                super().__init__()
                self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)), persistent=False)


        class Rotary(nn.Module):
            def __init__(self, dim=32, base=10000.0):
                super().__init__()
                self.freqs = Frequencies(dim, base)

            def forward(self, x):
                t = torch.arange(x.shape[-2], dtype=self.freqs.inv_freq.dtype, device=x.device)
                freqs = t[:, None] * self.freqs.inv_freq.float()[None, :]
                return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)
        '''
    assert (17, "RPL005") in _found(source)
    kept = source.replace("persistent=False)\n", "persistent=False)\n\n"
                          "            def _apply(self, fn, *args, **kwargs):\n"
                          "                super()._apply(fn, *args, **kwargs)\n"
                          "                self.inv_freq = 1.0 / (10000.0 ** (torch.arange(0, 32, 2).float() / 32))\n"
                          "                return self\n", 1)
    assert "_apply" in kept and not any(code == "RPL005" for _, code in _found(kept))


def test_a_rotary_built_through_a_factory_function_is_held():
    """llm-foundry: `self.rotary_emb = gen_rotary_embedding(cfg)` where the factory returns the rotary class; the
    holder then calls `self.rotary_emb(input_ids, pos)`, handing the int64 token ids as the activation whose dtype
    the tables take (held-out: 1.0)."""
    source = _CORRECT_ROTARY + '''\


        def gen_rotary_embedding(dim):
            return Rotary(dim=dim)


        class RotaryPositions(nn.Module):
            def __init__(self, dim=32):
                super().__init__()
                self.rotary_emb = gen_rotary_embedding(dim)

            def forward(self, input_ids, past_position=0):
                pos = torch.arange(past_position, past_position + input_ids.shape[1])[None]
                cos, sin = self.rotary_emb(input_ids, pos)
                return {"cos": cos, "sin": sin}
        '''
    assert set(_found(source)) == {(27, "RPL001")}


def test_a_model_counting_positions_over_a_mask_in_the_activation_dtype_holds_its_rotary():
    """Falcon-style left padding: `attention_mask = attention_mask.to(inputs_embeds.dtype)` then `position_ids =
    attention_mask.cumsum(-1) - 1` in the model that calls its rotary (held-out: 2.0 in bf16); found in the
    model class, which has no rotary vocabulary of its own."""
    source = _CORRECT_ROTARY + '''\


        class Model(nn.Module):
            def __init__(self, vocab=100, hidden=32):
                super().__init__()
                self.word_embeddings = nn.Embedding(vocab, hidden)
                self.rotary_emb = Rotary(hidden)

            def forward(self, input_ids, attention_mask=None):
                inputs_embeds = self.word_embeddings(input_ids)
                if attention_mask is not None:
                    attention_mask = attention_mask.to(inputs_embeds.dtype)
                    position_ids = attention_mask.cumsum(-1) - 1
                else:
                    position_ids = torch.arange(input_ids.shape[1])[None]
                return self.rotary_emb(inputs_embeds, position_ids)
        '''
    assert _found(source) == {(26, "RPL005"): "safe"}
    fixed = _fixed(source)
    assert "attention_mask.cumsum(-1, dtype=torch.float32) - 1" in fixed and _found(fixed) == {}


def test_a_rotary_chosen_on_a_branch_of_an_init_helper_is_checked_for_every_choice():
    """InternLM2: `__init__` calls `self._init_rope()`, which builds `self.rotary_emb` as the current class or, for
    linear scaling, the legacy one whose `forward(x, seq_len)` casts its tables to `x.dtype`; the fallback call
    `self.rotary_emb(position_ids, seq_len=n)` hands it the ids (held-out: 1.0). Fixed by handing an activation."""
    source = '''\
        import torch
        from torch import nn


        class Rotary(nn.Module):
            def __init__(self, dim, base=10000.0):
                super().__init__()
                self.dim, self.base = dim, base

            def forward(self, x, position_ids):
                inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2, dtype=torch.float32) / self.dim))
                freqs = position_ids[..., None].float() * inv_freq
                return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)


        class LegacyRotary(nn.Module):
            def __init__(self, dim, base=10000.0):
                super().__init__()
                inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
                freqs = torch.outer(torch.arange(4096, dtype=torch.float32), inv_freq)
                self.cos_cached, self.sin_cached = freqs.cos(), freqs.sin()

            def forward(self, x, seq_len=None):
                return self.cos_cached[:seq_len].to(dtype=x.dtype), self.sin_cached[:seq_len].to(dtype=x.dtype)


        class Attention(nn.Module):
            def __init__(self, hidden=64, heads=2, rope_scaling=None):
                super().__init__()
                self.head_dim, self.rope_scaling = hidden // heads, rope_scaling
                self.qkv = nn.Linear(hidden, 3 * hidden)
                self._init_rope()

            def _init_rope(self):
                if self.rope_scaling is None:
                    self.rotary_emb = Rotary(self.head_dim)
                else:
                    self.rotary_emb = LegacyRotary(self.head_dim)

            def forward(self, hidden_states, position_ids):
                q, k, value_states = self.qkv(hidden_states).chunk(3, dim=-1)
                try:
                    cos, sin = self.rotary_emb(value_states, position_ids=position_ids)
                except TypeError:
                    cos, sin = self.rotary_emb(position_ids, seq_len=hidden_states.shape[1])
                return q * cos, k * sin
        '''
    assert _found(source) == {(45, "RPL001"): "safe"}
    fixed = _fixed(source)
    assert "self.rotary_emb(value_states, seq_len=" in fixed and _found(fixed) == {}


def test_a_complex_table_registered_by_a_classmethod_factory():
    """`rope = cls(...)` then `rope.register_buffer("freqs_cis", precompute_freqs_cis(...))` in a `from_config`
    classmethod: the same complex buffer `module.to(torch.bfloat16)` turns real (held-out: 1.0), kept complex by
    the fix."""
    source = '''\
        import torch
        from torch import nn


        def precompute_freqs_cis(dim, end, theta=10000.0):
            freqs = 1.0 / (theta ** (torch.arange(0, dim, 2).float() / dim))
            freqs = torch.outer(torch.arange(end, dtype=torch.float32), freqs)
            return torch.polar(torch.ones_like(freqs), freqs)


        class Rotary(nn.Module):
            def __init__(self, head_dim, max_seq_len=4096):
                super().__init__()
                self.head_dim, self.max_seq_len = head_dim, max_seq_len
                self.register_buffer("freqs_cis", None, persistent=False)

            @classmethod
            def from_config(cls, head_dim, max_seq_len):
                rope = cls(head_dim, max_seq_len)
                rope.register_buffer("freqs_cis", precompute_freqs_cis(head_dim, max_seq_len), persistent=False)
                return rope

            def forward(self, x):
                x_ = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
                return torch.view_as_real(x_ * self.freqs_cis[: x.shape[1]]).flatten(-2).type_as(x)
        '''
    assert _found(source) == {(20, "RPL008"): "safe"}
    fixed = _fixed(source)
    assert '("freqs_cis",)' in fixed and _found(fixed) == {}


def test_dtypes_spelled_through_autocast_getattr_and_as_tensor():
    """Round 35's spellings: `torch.get_autocast_dtype(...)` is 16-bit (a phase cast to it before cos/sin: 1.90);
    `getattr(config, "torch_dtype", None) or torch.float16` reads the attribute and its 16-bit fallback (1.95);
    `torch.as_tensor(self.inv_freq, dtype=position_ids.dtype)` copies the frequencies into int64 (2.0), while an
    explicit `torch.tensor(freq, dtype=torch.int32)` of a category named `freq` is a choice (TimesFM)."""
    autocast = '''\
        import torch


        def _amp_dtype(x):
            if torch.is_autocast_enabled("cpu"):
                return torch.get_autocast_dtype("cpu")
            return None


        def tables(x, dim=32, base=10000.0):
            table_dtype = _amp_dtype(x) or torch.float32
            inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
            freqs = torch.outer(torch.arange(x.shape[-2], dtype=torch.float32), inv_freq)
            emb = torch.cat((freqs, freqs), dim=-1).to(table_dtype)
            return emb.cos(), emb.sin()
        '''
    assert _found(autocast) == {(14, "RPL007"): "safe"}
    config = '''\
        import torch
        from torch import nn


        class Rotary(nn.Module):
            def __init__(self, config, dim=32, base=10000.0):
                super().__init__()
                self.dim, self.base = dim, base
                self._cache_dtype = getattr(config, "torch_dtype", None) or torch.float16

            def forward(self, seq_len):
                inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2, dtype=torch.float32) / self.dim))
                freqs = torch.outer(torch.arange(seq_len, dtype=torch.float32), inv_freq)
                emb = torch.cat((freqs, freqs), dim=-1).to(self._cache_dtype)
                return emb.cos(), emb.sin()
        '''
    assert _found(config) == {(14, "RPL007"): "safe"}
    copied = '''\
        import torch
        from torch import nn


        class Rotary(nn.Module):
            def __init__(self, dim=32, base=10000.0):
                super().__init__()
                self.inv_freq = tuple(1.0 / base ** (i / dim) for i in range(0, dim, 2))

            def forward(self, x, position_ids):
                inv_freq = torch.as_tensor(self.inv_freq, dtype=position_ids.dtype, device=position_ids.device)
                freqs = position_ids[..., None].float() * inv_freq
                return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)


        def batch(freq, n):
            return torch.tensor(freq[:n], dtype=torch.int32).reshape(-1, 1)
        '''
    assert _found(copied) == {(11, "RPL006"): "safe"}
    fixed = _fixed(copied)
    assert "torch.as_tensor(self.inv_freq, dtype=torch.float32, device=position_ids.device)" in fixed


def test_positions_in_a_buffer_like_the_queries_and_in_a_bound_arange():
    """`pos = torch.zeros_like(q[:, 0, 0])` filled by `pos.index_copy_(0, idx, torch.arange(n, dtype=pos.dtype))`
    holds positions in the queries' dtype (held-out varlen: 1.79); the fix gives the buffer a float32 dtype (it
    used to write `torch.float()`). `arange = functools.partial(torch.arange, dtype=dtype)` with `dtype =
    next(self.parameters()).dtype` (the layers' weights) builds them in the module's dtype (1.94)."""
    packed = '''\
        import torch
        from torch import nn


        class VarlenRotary(nn.Module):
            def __init__(self, dim=32, base=10000.0):
                super().__init__()
                self.dim, self.base = dim, base

            def positions(self, q, cu_seqlens):
                pos = torch.zeros_like(q[:, 0, 0])
                bounds = cu_seqlens.tolist()
                for start, end in zip(bounds[:-1], bounds[1:]):
                    idx = torch.arange(start, end, device=q.device)
                    pos.index_copy_(0, idx, torch.arange(end - start, dtype=pos.dtype, device=q.device))
                return pos

            def forward(self, q, cu_seqlens):
                inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2, dtype=torch.float32) / self.dim))
                freqs = self.positions(q, cu_seqlens).float()[:, None] * inv_freq[None, :]
                return freqs.cos(), freqs.sin()
        '''
    assert _found(packed) == {(11, "RPL005"): "safe"}
    fixed = _fixed(packed)
    assert "pos = torch.zeros_like(q[:, 0, 0], dtype=torch.float32)" in fixed and _found(fixed) == {}
    bound = '''\
        import functools

        import torch
        from torch import nn


        class RotaryQK(nn.Module):
            def __init__(self, n_embd=64, head_dim=16, base=10000.0):
                super().__init__()
                self.c_attn = nn.Linear(n_embd, 3 * n_embd)
                self._inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2).float() / head_dim))

            def rotary_cos_sin(self, T, pos_offset, x):
                dtype = next(self.parameters()).dtype
                arange = functools.partial(torch.arange, dtype=dtype, device=x.device)
                t = arange(pos_offset, pos_offset + T)
                freqs = t[:, None] * self._inv_freq.to(x.device)[None, :]
                return freqs.cos(), freqs.sin()
        '''
    assert _found(bound) == {(16, "RPL005"): "safe"}
    fixed = _fixed(bound)
    assert "functools.partial(torch.arange, dtype=torch.float32, device=x.device)" in fixed and _found(fixed) == {}


def test_a_cache_key_is_not_the_activation_the_callers_cast_to():
    """SAM 2: `key = (end_x, end_y, str(device))` before `self._cache[key] = compute_axial_cos_sin(...)`; the
    boundary fix once cast the tables to `key.dtype` (a tuple: AttributeError in every call)."""
    source = '''\
        import torch
        from torch import nn


        def compute_axial_cos_sin(dim, end_x, end_y, theta=10000.0, device=None):
            freqs = 1.0 / (theta ** (torch.arange(0, dim, 4, device=device)[: dim // 4].float() / dim))
            t = torch.arange(end_x * end_y, dtype=torch.float32, device=device)
            t_x = (t % end_x).long()
            angles = torch.outer(t_x.float(), freqs)
            return angles.cos().type_as(t_x), angles.sin().type_as(t_x)


        class AxialRoPE(nn.Module):
            def __init__(self, head_dim=64):
                super().__init__()
                self.head_dim = head_dim
                self._cache = {}

            def compute_cos_sin(self, end_x, end_y, device=None):
                key = (end_x, end_y, str(device))
                if key not in self._cache:
                    self._cache[key] = compute_axial_cos_sin(self.head_dim, end_x, end_y, device=device)
                return self._cache[key]
        '''
    fixed = _fixed(source)
    assert "key.dtype" not in fixed and "angles.cos().to(t_x.device)" in fixed


def test_a_function_vmapped_in_init_and_ids_fetched_through_getattr():
    """`self._batched_angles = vmap(vmap(_angles, ...), ...)` in `__init__`, called with timestamps cast to the
    activation dtype (held-out: 1.94): the positions reach `_angles`'s phase, and the float32 cast is safe
    because they go nowhere else. An adapter whose `__getattr__` fetches `position_ids` from a wrapped BERT
    embeddings module (an int64 `torch.arange` buffer) casts its tables to an integer dtype (1.0)."""
    vmapped = '''\
        import math

        import torch
        from torch import nn
        from torch.func import vmap


        def _angles(t, inv_freq):
            return t * inv_freq


        class ContinuousRotary(nn.Module):
            def __init__(self, dim=32, base=10000.0):
                super().__init__()
                self.dim, self.base = dim, base
                self._batched_angles = vmap(vmap(_angles, in_dims=(0, None)), in_dims=(0, None))

            def inv_freq(self, device=None):
                idx = torch.arange(0, self.dim, 2, device=device, dtype=torch.float32)
                return torch.exp(idx * (-math.log(self.base) / self.dim))

            def forward(self, x, timestamps):
                t = timestamps.to(x.dtype)
                theta = self._batched_angles(t, self.inv_freq(timestamps.device))
                return theta.cos(), theta.sin()
        '''
    assert _found(vmapped) == {(23, "RPL005"): "safe"}
    delegated = '''\
        import torch
        from torch import nn


        class RotaryAdapter(nn.Module):
            def __init__(self, embeddings, dim=32, base=10000.0):
                super().__init__()
                self.embeddings, self.dim, self.base = embeddings, dim, base

            def __getattr__(self, name):
                try:
                    return super().__getattr__(name)
                except AttributeError:
                    return getattr(self.embeddings, name)

            def rotary(self, seq_length):
                inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2, dtype=torch.float32) / self.dim))
                pos = self.position_ids[:, :seq_length].float()
                emb = pos[..., None] * inv_freq
                return emb.cos().type_as(self.position_ids), emb.sin().type_as(self.position_ids)
        '''
    assert set(_found(delegated)) == {(20, "RPL001")}
    # The class itself setting a float `position_ids` (a written attribute) says what it holds.
    assert _found(delegated.replace("self.embeddings, self.dim, self.base = embeddings, dim, base",
                                    "self.embeddings, self.dim, self.base = embeddings, dim, base\n"
                                    "                self.position_ids = torch.linspace(0.0, 1.0, 64)[None]")) == {}


def test_positions_cast_with_keywords_unpacked_from_a_constructor_dict():
    """Megatron: `self._factory_kwargs = {"device": device, "dtype": params_dtype}` in `__init__`, then
    `torch.arange(n).to(**self._factory_kwargs)`: positions in the parameters' dtype (held-out: 1.94 with bf16).
    The fix overrides the dtype where the dict is unpacked, so the device it carries still applies (it used to
    put `dtype=torch.float32` on the arange, which the `.to(**...)` then undid)."""
    source = '''\
        import torch
        from torch import nn


        class RotaryEmbedding(nn.Module):
            def __init__(self, dim=32, base=10000.0, params_dtype=torch.bfloat16, device=None):
                super().__init__()
                self._factory_kwargs = {"device": device, "dtype": params_dtype}
                self.inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))

            def forward(self, max_seq_len, offset=0):
                seq = torch.arange(max_seq_len).to(**self._factory_kwargs) + offset
                freqs = torch.outer(seq, self.inv_freq.to(seq.device))
                return torch.cat((freqs, freqs), dim=-1)[:, None, None, :]
        '''
    assert _found(source) == {(12, "RPL005"): "safe"}
    fixed = _fixed(source)
    assert 'torch.arange(max_seq_len).to(**{**self._factory_kwargs, "dtype": torch.float32}) + offset' in fixed
    assert _found(fixed) == {}


def test_a_class_built_inside_a_factory_looping_over_enumerated_frequencies():
    """A video rotary class defined inside `build_rope3d(kind)`, its per-axis frequencies in a list walked with
    `for axis, inv in enumerate(self._inv)`, and the tables moved with `_like(emb.cos(), coords)` where `def
    _like(x, ref): return x.to(device=ref.device, dtype=ref.dtype)` and `coords` is the int64 meshgrid (held-out:
    1.0, int64 tables). Fixed by dropping the dtype from the helper's move."""
    source = '''\
        import torch
        from torch import nn


        def _like(x, ref):
            return x.to(device=ref.device, dtype=ref.dtype)


        def build_rope3d(axes=(16, 8, 8), theta=10000.0):
            class _Rope3D(nn.Module):
                def __init__(self):
                    super().__init__()
                    self._inv = [1.0 / torch.pow(theta, torch.arange(0, d, 2, dtype=torch.float64) / d) for d in axes]

                def forward(self, grid):
                    f, h, w = (int(g) for g in grid)
                    coords = torch.stack(torch.meshgrid(torch.arange(f), torch.arange(h), torch.arange(w),
                                                        indexing="ij"), dim=-1).reshape(-1, 3)
                    parts = []
                    for axis, inv in enumerate(self._inv):
                        ang = coords[:, axis, None].float() * inv.float()[None, :]
                        parts.append(torch.cat((ang, ang), dim=-1))
                    emb = torch.cat(parts, dim=-1)
                    return _like(emb.cos(), coords), _like(emb.sin(), coords)

            return _Rope3D
        '''
    assert set(_found(source)) == {(24, "RPL001")}
    fixed = _fixed(source)
    assert "return x.to(device=ref.device)" in fixed and _found(fixed) == {}


def test_a_mel_filterbank_power_of_a_range_is_not_inverse_frequencies():
    """Whisper's front end: `hz_pts = 700.0 * (10 ** (mel_pts / 2595.0) - 1.0)` over a default-dtype linspace in
    `mel_filterbank`: a power of a range, in a function that forms no phase and whose names say nothing rotary
    (held-out correct model file). The same construction kept as `inv_freq` is reported."""
    source = '''\
        import math

        import torch


        def mel_filterbank(n_mels, n_fft, sample_rate=16000, device=None):
            def hz_to_mel(f):
                return 2595.0 * math.log10(1.0 + f / 700.0)

            mel_pts = torch.linspace(hz_to_mel(0.0), hz_to_mel(sample_rate / 2), n_mels + 2, device=device)
            hz_pts = 700.0 * (10 ** (mel_pts / 2595.0) - 1.0)
            fft_freqs = torch.linspace(0, sample_rate / 2, n_fft // 2 + 1, device=device)
            lower = (fft_freqs[None, :] - hz_pts[:-2, None]) / (hz_pts[1:-1, None] - hz_pts[:-2, None])
            upper = (hz_pts[2:, None] - fft_freqs[None, :]) / (hz_pts[2:, None] - hz_pts[1:-1, None])
            return torch.clamp(torch.minimum(lower, upper), min=0.0)
        '''
    assert _found(source) == {}
    assert (10, "RPL006") in _found(source.replace("hz_pts = 700.0 * (10 ** (mel_pts / 2595.0) - 1.0)",
                                                   "hz_pts = inv_freq = 1.0 / (10 ** (mel_pts / 2595.0))"))


def test_positions_counted_over_a_compared_mask_for_a_positions_first_rotary():
    """A retrieval encoder: `attention_mask = (input_ids != pad).long()` when none is given, `mask =
    attention_mask.to(dtype=hidden_states.dtype)`, `position_ids = (mask.cumsum(dim=-1) - 1).clamp(min=0) * mask`,
    then `self.rotary_emb(position_ids)` on a rotary whose forward takes the positions first (held-out: 2.0 after
    `.bfloat16()`)."""
    source = '''\
        import torch
        from torch import nn


        class RotaryEmbedding(nn.Module):
            def __init__(self, dim=32, base=10000.0):
                super().__init__()
                self.dim, self.base = dim, base

            def forward(self, position_ids):
                inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2, dtype=torch.float32) / self.dim))
                freqs = position_ids.float()[..., None] * inv_freq
                return freqs.cos(), freqs.sin()


        class Encoder(nn.Module):
            def __init__(self, vocab=100, hidden=32, pad_token_id=0):
                super().__init__()
                self.pad_token_id = pad_token_id
                self.embed = nn.Embedding(vocab, hidden)
                self.rotary_emb = RotaryEmbedding(hidden)

            def forward(self, input_ids, attention_mask=None):
                hidden_states = self.embed(input_ids)
                if attention_mask is None:
                    attention_mask = (input_ids != self.pad_token_id).long()
                mask = attention_mask.to(dtype=hidden_states.dtype)
                position_ids = (mask.cumsum(dim=-1) - 1).clamp(min=0) * mask
                return hidden_states, self.rotary_emb(position_ids)
        '''
    assert _found(source) == {(28, "RPL005"): "safe"}
    fixed = _fixed(source)
    assert "mask.cumsum(dim=-1, dtype=torch.float32)" in fixed and _found(fixed) == {}


def test_harness_findings_of_rounds_34_and_35():
    """What the numeric harness found wrong after the fixes: (1) nanotron's `register_buffer("freqs_cis",
    position_ids.new_empty(...))` filled with `self.freqs_cis.copy_(tables)` truncates (1.0 even in float32), which
    a later guarded `.float()` reassignment must not hide; (2) `torch.tensor(freq_list, dtype=q.dtype)` makes the
    frequencies 16-bit (0.26 with bf16 queries); (3) tables a method hands back as `return hidden,
    self.rotary_tables(n)` are cast to the activation there, not left float32 for a bf16 attention to reject."""
    nanotron = '''\
        import torch
        from torch import nn


        class RotaryEmbedding(nn.Module):
            def __init__(self, dim=32, end=64, theta=10000.0):
                super().__init__()
                self.dim, self.end, self.theta = dim, end, theta

            def init_rotary_embeddings(self, position_ids):
                self.register_buffer("freqs_cis", position_ids.new_empty(self.end, self.dim // 2, 2), persistent=False)
                if self.freqs_cis.dtype in (torch.float16, torch.bfloat16):
                    self.freqs_cis = self.freqs_cis.float()
                freqs = 1.0 / (self.theta ** (torch.arange(0, self.dim, 2, dtype=torch.float) / self.dim))
                freqs = torch.outer(torch.arange(self.end).float(), freqs)
                self.freqs_cis.copy_(torch.stack((torch.cos(freqs), torch.sin(freqs)), dim=-1))
        '''
    found = _found(nanotron)
    assert found.get((11, "RPL001")) == "safe"
    fixed = _fixed(nanotron)
    assert "position_ids.new_empty(self.end, self.dim // 2, 2, dtype=torch.float32)" in fixed
    listed = '''\
        import torch
        from torch import nn


        class AxialRoPE(nn.Module):
            def __init__(self, dim=32, base=100.0):
                super().__init__()
                self.freq_list = [base ** (-i / dim) for i in range(0, dim, 2)]

            def forward(self, q, H):
                inv_freq = torch.tensor(self.freq_list, dtype=q.dtype, device=q.device)
                ys = torch.arange(H, device=q.device).float()
                freqs = ys[:, None] * inv_freq[None, :]
                return freqs.cos().to(q.dtype), freqs.sin().to(q.dtype)
        '''
    assert _found(listed) == {(11, "RPL006"): "safe"}
    fixed = _fixed(listed)
    assert "torch.tensor(self.freq_list, dtype=torch.float32, device=q.device)" in fixed and _found(fixed) == {}
    adapter = '''\
        import torch
        from torch import nn


        class Adapter(nn.Module):
            def __init__(self, vocab=100, hidden=32, max_positions=128):
                super().__init__()
                self.word_embeddings = nn.Embedding(vocab, hidden)
                self.register_buffer("position_ids", torch.arange(max_positions).expand((1, -1)), persistent=False)
                self.head_dim = hidden

            def rotary_tables(self, seq_length):
                pos = self.position_ids[:, :seq_length]
                inv_freq = 1.0 / (10000.0 ** (torch.arange(0, self.head_dim, 2, dtype=torch.float32) / self.head_dim))
                emb = pos.float()[..., None] * inv_freq
                return emb.cos().type_as(self.position_ids), emb.sin().type_as(self.position_ids)

            def forward(self, input_ids):
                hidden = self.word_embeddings(input_ids)
                return hidden, self.rotary_tables(input_ids.shape[1])
        '''
    assert set(_found(adapter)) == {(16, "RPL001")}
    fixed = _fixed(adapter)
    assert "return hidden, tuple(t.to(hidden.dtype) for t in self.rotary_tables(input_ids.shape[1]))" in fixed
    assert _found(fixed) == {}


def test_an_apply_override_rebuilding_only_on_a_device_change_keeps_nothing():
    """StableLM-style `_apply` that rebuilds `inv_freq` in float32 only `if self.inv_freq.device !=
    self._inv_freq_device`: a dtype cast leaves the device, so `.bfloat16()` rounds the buffer (held-out: 1.97).
    Rebuilding unconditionally is a repair."""
    source = '''\
        import torch
        from torch import nn


        class Rotary(nn.Module):
            def __init__(self, dim=32, base=10000.0):
                super().__init__()
                self.dim, self.base = dim, base
                self.register_buffer("inv_freq", self._compute_inv_freq(), persistent=False)
                self._inv_freq_device = self.inv_freq.device

            def _compute_inv_freq(self, device=None):
                return 1.0 / (self.base ** (torch.arange(0, self.dim, 2, device=device, dtype=torch.float32) / self.dim))

            def _apply(self, fn, recurse=True):
                super()._apply(fn, recurse)
                if self.inv_freq.device != self._inv_freq_device:
                    self.inv_freq = self._compute_inv_freq(self.inv_freq.device)
                    self._inv_freq_device = self.inv_freq.device
                return self

            def forward(self, x, position_ids):
                freqs = position_ids.float()[..., None] * self.inv_freq
                return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)
        '''
    assert set(_found(source)) == {(23, "RPL002")}
    always = source.replace("                if self.inv_freq.device != self._inv_freq_device:\n"
                            "                    self.inv_freq = self._compute_inv_freq(self.inv_freq.device)\n"
                            "                    self._inv_freq_device = self.inv_freq.device\n",
                            "                self.inv_freq = self._compute_inv_freq(self.inv_freq.device)\n")
    assert "if self.inv_freq.device" not in always and _found(always) == {}


def test_a_frequency_method_of_an_unseen_module_under_a_cuda_only_guard():
    """An audio diffusion pipeline (a plain class) forms the phase with `torch.bmm(pos, rope.inv_freq(device))` on
    `rope = self.model.rotary`, under `@torch.amp.autocast("cuda", enabled=False)`, which leaves CPU autocast on
    (held-out: 2.0): the method's name says what it returns."""
    source = '''\
        import torch


        class Pipeline:
            def __init__(self, model):
                self.model = model
                self._rotary_cache = {}

            @torch.amp.autocast("cuda", enabled=False)
            def prepare_rotary(self, num_frames, device=None):
                rope = self.model.rotary
                pos = torch.arange(num_frames, device=device, dtype=torch.float32)
                freqs = torch.bmm(pos[None, :, None], rope.inv_freq(device)[None, None, :]).squeeze(0)
                freqs = torch.cat((freqs, freqs), dim=-1)
                return freqs.cos(), freqs.sin()
        '''
    assert _found(source) == {(9, "RPL004"): "safe"}
    fixed = _fixed(source)
    assert "autocast" not in fixed and "torch.bmm" not in fixed and _found(fixed) == {}


def test_cache_position_built_in_the_activation_dtype_becomes_int64():
    """`cache_position = torch.arange(past, past + n, dtype=inputs_embeds.dtype)` in a model whose ids also index
    caches and build masks: float32 could not index, so the fix makes them int64, what they are everywhere else
    (held-out Qwen2-like model: 2.0 before, the bf16 floor 0.0021 after, prefill and decode run)."""
    source = _CORRECT_ROTARY + '''\


        class Model(nn.Module):
            def __init__(self, hidden=32):
                super().__init__()
                self.rotary_emb = Rotary(hidden)

            def forward(self, inputs_embeds, past_seen_tokens=0):
                cache_position = torch.arange(past_seen_tokens, past_seen_tokens + inputs_embeds.shape[1],
                                              device=inputs_embeds.device, dtype=inputs_embeds.dtype)
                position_ids = cache_position.unsqueeze(0)
                mask = torch.arange(past_seen_tokens + inputs_embeds.shape[1]) > cache_position.reshape(-1, 1)
                return self.rotary_emb(inputs_embeds, position_ids), mask
        '''
    assert _found(source) == {(22, "RPL005"): "safe"}
    fixed = _fixed(source)
    assert "device=inputs_embeds.device, dtype=torch.long)" in fixed and _found(fixed) == {}


def test_position_ids_counted_in_generation_glue_are_counted_in_int64():
    """`prepare_inputs_for_generation` casting the padding mask to `self.dtype` and counting `position_ids =
    attention_mask.cumsum(-1) - 1` from it, then returning them in a dict for the model's forward (held-out: 2.0 in
    bf16, 0.0021 after the fix, int64 ids): found where they are counted, although no call connects them to the
    rotary; counted in int64."""
    source = _CORRECT_ROTARY + '''\


        class CausalLM(nn.Module):
            def __init__(self, vocab=100, hidden=32):
                super().__init__()
                self.embed = nn.Embedding(vocab, hidden)

            @property
            def dtype(self):
                return self.embed.weight.dtype

            def prepare_inputs_for_generation(self, input_ids, attention_mask=None, **kwargs):
                if attention_mask is None:
                    attention_mask = torch.ones_like(input_ids)
                attention_mask = attention_mask.to(self.dtype)
                position_ids = attention_mask.cumsum(-1) - 1
                return {"input_ids": input_ids, "position_ids": position_ids, "attention_mask": attention_mask}
        '''
    assert _found(source) == {(29, "RPL005"): "safe"}
    fixed = _fixed(source)
    assert "position_ids = attention_mask.cumsum(-1, dtype=torch.long) - 1" in fixed and _found(fixed) == {}
    assert _found(source.replace("attention_mask.to(self.dtype)", "attention_mask.long()")) == {}
    collator = source + '''


        class PackedCollator:
            def __init__(self, dtype=torch.float16):
                self.dtype = dtype

            def __call__(self, docs):
                input_ids, positions = [], []
                for doc in docs:
                    n = doc.numel()
                    input_ids.append(doc)
                    positions.append(torch.arange(n, dtype=self.dtype))
                return {"input_ids": torch.cat(input_ids)[None], "position_ids": torch.cat(positions)[None]}
        '''
    found = _found(collator)
    assert found.get((43, "RPL005")) == "safe"  # the packing collator's fp16 ranges, returned as "position_ids"
    # Another name is not position ids (a rolling hash's powers, ALiBi's ranges).
    assert (43, "RPL005") not in _found(collator.replace('"position_ids": torch.cat(positions)', '"powers": torch.cat(positions)'))


def test_frequencies_built_in_a_dtype_a_dict_of_init_functions_is_handed_are_fixed_at_the_call():
    """transformers' ``ROPE_INIT_FUNCTIONS`` shape with a ``dtype`` parameter: the config's dtype reaches the
    builders through ``self.rope_init_fn = REGISTRY[kind]`` (and through a variant handing on its ``dtype``);
    the fix passes float32 at that call, and the forward rebuild asks for float32 too."""
    source = '''\
        from typing import Callable, Dict

        import torch
        from torch import nn


        def _default_parameters(config, device=None, seq_len=None, dtype=None):
            dim = config.head_dim
            dtype = dtype if dtype is not None else torch.float32
            exponent = torch.arange(0, dim, 2, dtype=torch.int64).to(device=device, dtype=dtype) / dim
            return 1.0 / (config.rope_theta ** exponent), 1.0


        def _linear_parameters(config, device=None, seq_len=None, dtype=None):
            inv_freq, attention_factor = _default_parameters(config, device, seq_len, dtype=dtype)
            return inv_freq / config.rope_scaling["factor"], attention_factor


        INIT_FUNCTIONS: Dict[str, Callable] = {
            "default": _default_parameters,
            "linear": _linear_parameters,
        }


        class Rotary(nn.Module):
            def __init__(self, config, device=None):
                super().__init__()
                self.config = config
                self.rope_init_fn = INIT_FUNCTIONS[config.rope_type]
                inv_freq, self.attention_scaling = self.rope_init_fn(config, device, dtype=config.torch_dtype)
                self.register_buffer("inv_freq", inv_freq, persistent=False)

            def forward(self, x, position_ids):
                freqs = position_ids[..., None].float() * self.inv_freq[None, None, :].float()
                emb = torch.cat((freqs, freqs), dim=-1)
                return (emb.cos() * self.attention_scaling).to(x.dtype), (emb.sin() * self.attention_scaling).to(x.dtype)
        '''
    assert _found(source) == {(10, "RPL006"): "safe", (34, "RPL002"): "safe"}
    result = fix_text("rotary.py", textwrap.dedent(source), ALL, unsafe=False)
    fixed = result.fixed
    assert "self.rope_init_fn(config, device, dtype=torch.float32)" in fixed
    assert "self.rope_init_fn(self.config, device, dtype=torch.float32)[0]" in fixed or \
        "dtype=torch.float32)[0], device=position_ids.device)" in fixed
    assert "config.torch_dtype" not in fixed and _found(fixed) == {}
    assert fix_text("rotary.py", fixed, ALL, unsafe=False).fixed == fixed
    # A module-level function handing the builders' result out of the file: the same fix, but unsafe.
    handed_out = source + '''

        def frequencies_for(config, kind):
            return INIT_FUNCTIONS[kind](config, None, dtype=config.torch_dtype)[0]
        '''
    assert _found(handed_out)[(10, "RPL006")] == "unsafe"


def test_inverse_frequencies_in_a_buffer_dict_are_module_state_kept_through_casts():
    """peft-style ``BufferDict``: its entries are buffers, so ``model.half()`` rounds them like the module's own."""
    source = '''\
        import torch
        from torch import nn
        from peft.tuners._buffer_dict import BufferDict


        class Rotary(nn.Module):
            def __init__(self, dim, base=10000.0):
                super().__init__()
                inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
                self.state = BufferDict({"inv_freq": inv_freq}, persistent=False)

            def forward(self, x, position_ids):
                inv_freq = self.state["inv_freq"].to(device=x.device, dtype=torch.float32)
                freqs = position_ids[..., None].float() * inv_freq
                return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)
        '''
    result = check_text("rotary.py", textwrap.dedent(source), ALL)
    [finding] = result.diagnostics
    assert (finding.line, finding.code, finding.fix.safety) == (13, "RPL002", "safe")
    assert "container of buffers" in finding.message
    fixed = _fixed(source)
    assert '("state.{}",)' in fixed and _found(fixed) == {}
    # A plain dict of tensors is not module state: a cast does not reach it.
    assert _found(source.replace('BufferDict({"inv_freq": inv_freq}, persistent=False)', '{"inv_freq": inv_freq}')) == {}


def test_ids_counted_over_a_float_mask_and_multiplied_by_it_are_int64_on_both_sides():
    """``(mask.cumsum(-1) - 1).clamp_min(0) * mask`` with ``mask`` in the embeddings' dtype: counting in int64 alone
    is undone by the product with the float mask (int64 * float16 is float16), so the fix takes both as int64."""
    source = '''\
        import torch
        from torch import nn


        class Embeddings(nn.Module):
            def __init__(self, vocab=33, hidden=32):
                super().__init__()
                self.word_embeddings = nn.Embedding(vocab, hidden)

            def forward(self, input_ids, attention_mask):
                embeddings = self.word_embeddings(input_ids)
                mask = attention_mask.to(embeddings.dtype)
                embeddings = embeddings * mask.unsqueeze(-1)
                position_ids = (mask.cumsum(dim=-1) - 1).clamp_min(0) * mask
                return embeddings, position_ids


        class Rotary(nn.Module):
            def __init__(self, dim=32, base=10000.0):
                super().__init__()
                self.dim, self.base = dim, base

            def forward(self, position_ids, dtype):
                inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2, dtype=torch.float32) / self.dim))
                freqs = position_ids.float()[..., None] * inv_freq
                return freqs.cos().to(dtype), freqs.sin().to(dtype)


        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.embeddings = Embeddings()
                self.rotary = Rotary()

            def forward(self, input_ids, attention_mask):
                hidden, position_ids = self.embeddings(input_ids, attention_mask)
                return self.rotary(position_ids, dtype=hidden.dtype)
        '''
    assert _found(source) == {(14, "RPL005"): "safe"}
    fixed = _fixed(source)
    # Returned as ids: counted in int64, and the mask operand taken as int64 so the product stays integer.
    assert "position_ids = (mask.cumsum(dim=-1, dtype=torch.long) - 1).clamp_min(0) * mask.long()" in fixed
    assert "embeddings = embeddings * mask.unsqueeze(-1)" in fixed  # the float mask itself stays as it is
    assert _found(fixed) == {}
    torch = pytest.importorskip("torch")
    namespace: dict = {}
    exec(compile(fixed, "encoder.py", "exec"), namespace)
    encoder = namespace["Encoder"]().bfloat16()
    _, positions = encoder.embeddings(torch.full((1, 600), 5), torch.ones(1, 600, dtype=torch.long))
    assert positions.dtype == torch.int64 and torch.equal(positions[0], torch.arange(600))
    # Generation glue counts ids in int64: the product with the float mask must not promote them back.
    glue = _CORRECT_ROTARY + '''\


        class CausalLM(nn.Module):
            def __init__(self, vocab=100, hidden=32):
                super().__init__()
                self.embed = nn.Embedding(vocab, hidden)

            @property
            def dtype(self):
                return self.embed.weight.dtype

            def prepare_inputs_for_generation(self, input_ids, attention_mask):
                attention_mask = attention_mask.to(self.dtype)
                position_ids = (attention_mask.cumsum(-1) - 1).clamp_min(0) * attention_mask
                return {"input_ids": input_ids, "position_ids": position_ids, "attention_mask": attention_mask}
        '''
    assert _found(glue) == {(27, "RPL005"): "safe"}
    fixed = _fixed(glue)
    assert "(attention_mask.cumsum(-1, dtype=torch.long) - 1).clamp_min(0) * attention_mask.long()" in fixed
    namespace = {}
    exec(compile(fixed, "lm.py", "exec"), namespace)
    lm = namespace["CausalLM"]().half()
    inputs = lm.prepare_inputs_for_generation(torch.ones(1, 3000, dtype=torch.long), torch.ones(1, 3000))
    assert inputs["position_ids"].dtype == torch.int64 and torch.equal(inputs["position_ids"][0], torch.arange(3000))


def test_a_grid_cast_to_a_dtype_its_caller_also_casts_the_tables_to_is_fixed_at_the_handing_call():
    """HunyuanVideo-style ``get_meshgrid_nd(..., dtype=dtype)`` inside a builder whose ``dtype`` also casts the
    finished tables: the builder keeps its parameter (the final cast is right), and the call handing it to the grid
    passes float32 instead, even with ``*args`` in the call (``dtype`` is keyword-only there)."""
    source = '''\
        import torch


        def get_meshgrid_nd(start, *args, dim=2, dtype=None):
            axis_grid = [torch.linspace(0, n, n + 1, dtype=torch.float32)[:n] for n in start]
            grid = torch.stack(torch.meshgrid(*axis_grid, indexing="ij"), dim=0)
            return grid.to(dtype)


        def get_1d_rotary_pos_embed(dim, pos, theta=10000.0):
            freqs = 1.0 / (theta ** (torch.arange(0, dim, 2).float() / dim))
            freqs = torch.outer(pos, freqs)
            return freqs.cos(), freqs.sin()


        def get_nd_rotary_pos_embed(rope_dim_list, start, *args, theta=10000.0, dtype=torch.float32):
            grid = get_meshgrid_nd(start, *args, dim=len(rope_dim_list), dtype=dtype)
            embs = [get_1d_rotary_pos_embed(d, grid[i].reshape(-1), theta) for i, d in enumerate(rope_dim_list)]
            cos = torch.cat([e[0] for e in embs], dim=1).to(dtype)
            sin = torch.cat([e[1] for e in embs], dim=1).to(dtype)
            return cos, sin
        '''
    found = _found(source)
    assert found.get((7, "RPL005")) == "safe"
    fixed = _fixed(source)
    assert "get_meshgrid_nd(start, *args, dim=len(rope_dim_list), dtype=torch.float32)" in fixed
    assert ".to(dtype)\n" in fixed.split("def get_nd_rotary_pos_embed")[1]  # the tables' own cast stays
    assert all(code != "RPL005" for _, code in _found(fixed))


def test_rates_made_a_tensor_with_new_tensor_of_the_activations_are_float32_and_the_tables_keep_their_dtype():
    """``x.new_tensor(self._freqs)`` takes ``x``'s bfloat16: the fix asks for float32 and, where the tables used
    to come out in ``x``'s dtype (positions ``type_as`` the rates), returns them in it still."""
    source = '''\
        import math

        import torch
        from torch import nn


        def rope_frequencies(dim, base=10000.0):
            return [1.0 / math.pow(base, 2 * i / dim) for i in range(dim // 2)]


        class Rotary(nn.Module):
            def __init__(self, dim, base=10000.0):
                super().__init__()
                self._freqs = rope_frequencies(dim, base)

            def forward(self, x, position_ids):
                inv_freq = x.new_tensor(self._freqs)
                angles = position_ids[..., None].type_as(inv_freq) * inv_freq
                angles = torch.cat((angles, angles), dim=-1)
                return angles.cos(), angles.sin()
        '''
    found = _found(source)
    assert found[(17, "RPL006")] == "safe"
    fixed = _fixed(source)
    assert "inv_freq = x.new_tensor(self._freqs, dtype=torch.float32)" in fixed
    assert "return angles.cos().to(x.dtype), angles.sin().to(x.dtype)" in fixed
    assert _found(fixed) == {}
    # Positions widened before the product: the tables were float32 already, and stay so (no cast added).
    widened = source.replace("position_ids[..., None].type_as(inv_freq)", "position_ids[..., None].float()")
    fixed = _fixed(widened)
    assert "x.new_tensor(self._freqs, dtype=torch.float32)" in fixed and "return angles.cos(), angles.sin()" in fixed
    # A dtype given explicitly is the author's: ``dtype=torch.float32`` is fine.
    assert _found(source.replace("x.new_tensor(self._freqs)", "x.new_tensor(self._freqs, dtype=torch.float32)")) \
        .get((17, "RPL006")) is None
    torch = pytest.importorskip("torch")
    namespace: dict = {}
    exec(compile(_fixed(source), "rotary.py", "exec"),
         namespace)
    x = torch.zeros(1, 4, dtype=torch.bfloat16)
    cos, _ = namespace["Rotary"](64, 5e5)(x, torch.tensor([[131071]]))
    expected = torch.cos(131071 * 5e5 ** (-torch.arange(0, 64, 2, dtype=torch.float64) / 64))
    assert cos.dtype == torch.bfloat16
    assert torch.allclose(cos[0, 0, :32].double(), expected, atol=2 ** -8 + 1e-3)


def test_a_scripted_matmul_of_locals_with_an_axis_of_one_is_an_exact_outer_product():
    """``pos = ids.to(torch.float32).unsqueeze(-1)``, ``freq = inv_freq.to(torch.float32).unsqueeze(0)``,
    ``torch.matmul(pos, freq)``: the contracted axis has one element, so the elementwise product is exact."""
    source = '''\
        import torch
        from torch import Tensor


        @torch.jit.script
        def rotary_angles(position_ids: Tensor, inv_freq: Tensor) -> Tensor:
            pos = position_ids.to(torch.float32).unsqueeze(-1)
            freq = inv_freq.to(torch.float32).unsqueeze(0)
            return torch.matmul(pos, freq)
        '''
    assert _found(source) == {(9, "RPL003"): "safe"}
    fixed = _fixed(source)
    assert "torch.matmul" not in fixed and _found(fixed) == {}
    # Without the unsqueeze on the right the contraction may be longer than one: not proven.
    assert _found(source.replace("freq = inv_freq.to(torch.float32).unsqueeze(0)",
                                 "freq = inv_freq.to(torch.float32)"))[(9, "RPL003")] == "unsafe"


def test_angles_of_a_module_out_of_sight_cast_for_another_model_are_reported():
    """A speculative decoder sharing the target's phase table with its draft: ``phase_table(...)`` of a module the
    file never connects, cast to the draft's dtype for a cos/sin taken out of sight (held-out: fails from
    position 2). Reported; keeping the angles float32 is the fix, unsafe (the cast copy may be compared)."""
    source = '''\
        import torch
        from torch import nn


        class Rotary(nn.Module):
            def __init__(self, dim=32, base=10000.0, n=4096):
                super().__init__()
                self.dim, self.base, self.n = dim, base, n

            def phase_table(self, device=None):
                inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2, dtype=torch.float32) / self.dim))
                return torch.arange(self.n, device=device, dtype=torch.float32)[:, None] * inv_freq.to(device)

            def forward(self, position_ids, dtype, phase=None):
                angles = (self.phase_table(position_ids.device) if phase is None else phase)[position_ids]
                return angles.cos().to(dtype), angles.sin().to(dtype)


        class SpeculativeDecoder(nn.Module):
            def __init__(self, target, draft):
                super().__init__()
                self.target, self.draft = target, draft
                self._draft_phase = None

            def _shared_phase(self, device):
                if self._draft_phase is None or self._draft_phase.dtype != self.draft.dtype:
                    self._draft_phase = self.target.rotary.phase_table(device).to(self.draft.dtype)
                return self._draft_phase

            def draft_position_embeddings(self, position_ids):
                return self.draft.rotary(position_ids, self.draft.dtype, phase=self._shared_phase(position_ids.device))
        '''
    assert _found(source) == {(27, "RPL007"): "unsafe"}
    fixed = _fixed(source, unsafe=True)
    assert "self._draft_phase = self.target.rotary.phase_table(device)\n" in fixed
    # Tables (``cos_sin_table``) cast to a model's dtype are where casts belong.
    assert _found(source.replace("phase_table(device)", "cos_sin_table(device)")) == {}


def test_dicts_of_builders_made_with_dict_or_held_by_the_class_are_checked_at_their_calls():
    """``dict(default=f, linear=g)`` and a class attribute ``_INIT = {...}`` are dicts of functions as a literal at
    module level is: builders every pick calls with float32 (or whose float32 default no call overrides) are
    float32, and a pick passing ``torch.get_default_dtype()`` is fixed where it is made."""
    source = '''\
        import torch
        from torch import nn


        def _default_freqs(dim, base, device=None, dtype=torch.float32):
            return 1.0 / (base ** (torch.arange(0, dim, 2, device=device, dtype=dtype) / dim))


        def _linear_freqs(dim, base, device=None, dtype=torch.float32, factor=1.0):
            return _default_freqs(dim, base, device=device, dtype=dtype) / factor


        BUILDERS = dict(default=_default_freqs, linear=_linear_freqs)


        class Rotary(nn.Module):
            _INIT = {"default": _default_freqs, "linear": _linear_freqs}

            def __init__(self, dim, base=10000.0, kind="default"):
                super().__init__()
                self.kind = kind
                self.inv_freq = BUILDERS[kind](dim, base, dtype=torch.float32)
                self.again = self._INIT[kind](dim, base)

            def forward(self, x, position_ids):
                freqs = position_ids[..., None].float() * self.inv_freq.to(x.device)
                return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)
        '''
    assert _found(source) == {}
    picked_in_default_dtype = source.replace("self.again = self._INIT[kind](dim, base)",
                                             "self.again = self._INIT[kind](dim, base, dtype=torch.get_default_dtype())")
    assert _found(picked_in_default_dtype) == {(6, "RPL006"): "safe"}
    fixed = _fixed(picked_in_default_dtype)
    assert "self.again = self._INIT[kind](dim, base, dtype=torch.float32)" in fixed and _found(fixed) == {}


def test_parameter_containers_filled_by_a_loop_or_a_comprehension_hold_module_state():
    """``params[name] = nn.Parameter(...)`` in a loop then ``nn.ParameterDict(params)``, and
    ``nn.ParameterList([nn.Parameter(theta ** -half) for theta in thetas])``: their entries are Parameters a
    module cast rounds (held-out: 1.89 at position 4095 after ``.bfloat16()``)."""
    source = '''\
        import torch
        from torch import nn


        class Bank(nn.Module):
            def __init__(self, dim, thetas=(1e4, 5e5)):
                super().__init__()
                half = torch.arange(0, dim, 2, dtype=torch.float32) / dim
                self.inv_freqs = nn.ParameterList([nn.Parameter(theta ** -half, requires_grad=False) for theta in thetas])
                params = {}
                for i, theta in enumerate(thetas):
                    params[f"m{i}"] = nn.Parameter(1.0 / theta ** half, requires_grad=False)
                self.freqs = nn.ParameterDict(params)

            def forward(self, position_ids, layer):
                angles = position_ids[..., None].float() * self.inv_freqs[layer].float()
                other = position_ids[..., None].float() * self.freqs[f"m{layer}"].float()
                return angles.cos(), angles.sin(), other.cos(), other.sin()
        '''
    found = _found(source)
    assert found == {(16, "RPL002"): "safe", (17, "RPL002"): "safe"}
    fixed = _fixed(source)
    assert '"inv_freqs.{}"' in fixed and '"freqs.{}"' in fixed and _found(fixed) == {}


def test_a_dynamic_recompute_through_the_picked_builder_in_the_activations_dtype_is_fixed_at_that_call():
    """``self.rope_init_fn = INIT.get(kind, _default)`` built once with its float32 default, then called again in
    forward with ``dtype=x.dtype`` for the current length: that call passes float32 (its result only feeds this
    function's phase), the ``__init__`` call keeps relying on the default."""
    source = '''\
        import torch
        from torch import nn


        def _default(dim, base, device=None, seq_len=None, dtype=torch.float32):
            exponent = torch.arange(0, dim, 2, device=device, dtype=dtype) / dim
            return 1.0 / (base ** exponent), 1.0


        INIT = {"default": _default}


        class Rotary(nn.Module):
            def __init__(self, dim, base=10000.0, kind="default"):
                super().__init__()
                self.dim, self.base = dim, base
                self.rope_init_fn = INIT.get(kind, _default)
                inv_freq, self.scale = self.rope_init_fn(dim, base)
                self.inv_freq = inv_freq

            def forward(self, x, position_ids):
                seq_len = int(position_ids.max()) + 1
                inv_freq, self.scale = self.rope_init_fn(self.dim, self.base, device=x.device, seq_len=seq_len,
                                                         dtype=x.dtype)
                freqs = position_ids[..., None].float() * inv_freq.float()
                return (freqs.cos() * self.scale).to(x.dtype), (freqs.sin() * self.scale).to(x.dtype)
        '''
    assert _found(source) == {(6, "RPL006"): "safe"}
    fixed = _fixed(source)
    assert "seq_len=seq_len,\n                                                 dtype=torch.float32)" in fixed
    assert "self.rope_init_fn(dim, base)\n" in fixed and _found(fixed) == {}


def test_rates_from_a_list_of_exponents_kept_on_the_object_are_inverse_frequencies():
    """``self._exponents = [2.0 * i / head_dim ...]`` then ``like.new_tensor([theta ** -e for e in
    self._exponents])``: frequencies made a tensor in the activations' dtype; a list of per-channel factors
    (not a ratio over the channel count) stays plain numbers."""
    source = '''\
        import torch


        class Rope:
            def __init__(self, head_dim, theta):
                self.theta = theta
                self._exponents = [2.0 * i / head_dim for i in range(head_dim // 2)]

            def tables(self, like, start_pos, seqlen):
                inv_freq = like.new_tensor([self.theta ** -e for e in self._exponents])
                t = like.new_tensor(range(start_pos, start_pos + seqlen))
                freqs = torch.outer(t, inv_freq)
                return freqs.cos(), freqs.sin()
        '''
    found = _found(source)
    assert found[(10, "RPL006")] == "safe" and found[(11, "RPL005")] == "safe"
    fixed = _fixed(source)
    assert "like.new_tensor([self.theta ** -e for e in self._exponents], dtype=torch.float32)" in fixed
    assert _found(fixed) == {}
    factors = source.replace("2.0 * i / head_dim", "1.0 + 0.1 * i")
    assert (10, "RPL006") not in _found(factors)
    torch = pytest.importorskip("torch")
    namespace: dict = {}
    exec(compile(fixed, "rotary.py", "exec"), namespace)
    cos, _ = namespace["Rope"](64, 5e5).tables(torch.zeros(1, dtype=torch.bfloat16), 131071, 1)
    expected = torch.cos(131071 * 5e5 ** (-torch.arange(0, 64, 2, dtype=torch.float64) / 64))
    assert torch.allclose(cos[0].double(), expected, atol=2 ** -8 + 1e-3)


def test_rates_copied_into_an_allocation_of_the_activations_are_float32():
    """``x.new_empty(n).copy_(torch.from_numpy(rates))``: the copy takes the allocation's dtype, the
    activations'; the fix allocates float32. An allocation with its own dtype is fine."""
    source = '''\
        import numpy as np
        import torch
        from torch import nn


        class Rotary(nn.Module):
            def __init__(self, dim, base=10000.0):
                super().__init__()
                exponent = np.arange(0, dim, 2, dtype=np.float64) / dim
                self._inv_freq_np = (1.0 / (base ** exponent)).astype(np.float32)

            def forward(self, x, position_ids):
                inv_freq = x.new_empty(self._inv_freq_np.shape[0]).copy_(torch.from_numpy(self._inv_freq_np))
                freqs = position_ids[..., None].float() * inv_freq
                return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)
        '''
    found = _found(source)
    assert found[(13, "RPL006")] == "safe"
    fixed = _fixed(source)
    assert "x.new_empty(self._inv_freq_np.shape[0], dtype=torch.float32).copy_(" in fixed
    assert _found(fixed) == {}
    torch = pytest.importorskip("torch")
    namespace: dict = {}
    exec(compile(fixed, "rotary.py", "exec"), namespace)
    cos, _ = namespace["Rotary"](64, 5e5)(torch.zeros(1, dtype=torch.bfloat16), torch.tensor([[131071]]))
    expected = torch.cos(131071 * 5e5 ** (-torch.arange(0, 64, 2, dtype=torch.float64) / 64))
    assert torch.allclose(cos[0, 0].double(), expected, atol=2 ** -8 + 1e-3)


def test_frequency_holders_built_by_a_dict_of_factories_into_a_module_dict_are_module_state():
    """``nn.ModuleDict({name: builder(d, theta) for name, builder in _BUILDERS.items()})`` of holders that
    register ``inv_freq``, read as ``holder = self.variants[self.active]; holder.inv_freq``: a buffer that
    ``model.bfloat16()`` rounds; the fix keeps it float32 in the holder class."""
    source = '''\
        import torch
        from torch import nn


        def _base_inv_freq(dim, base):
            return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))


        class _FreqHolder(nn.Module):
            def __init__(self, inv_freq):
                super().__init__()
                self.register_buffer("inv_freq", inv_freq, persistent=False)


        def _default_holder(dim, base):
            return _FreqHolder(_base_inv_freq(dim, base))


        def _linear_holder(dim, base, factor=2.0):
            return _FreqHolder(_base_inv_freq(dim, base) / factor)


        _BUILDERS = {"default": _default_holder, "linear": _linear_holder}


        class RotaryRouter(nn.Module):
            def __init__(self, head_dim, theta=10000.0, active="default"):
                super().__init__()
                self.variants = nn.ModuleDict({name: builder(head_dim, theta) for name, builder in _BUILDERS.items()})
                self.active = active

            def forward(self, x, position_ids):
                holder = self.variants[self.active]
                freqs = position_ids[:, :, None].float() * holder.inv_freq[None, None, :]
                return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)
        '''
    found = _found(source)
    assert found == {(34, "RPL002"): "safe"}
    fixed = _fixed(source)
    assert _found(fixed) == {}
    # The same read without the local: ``self.variants[self.active].inv_freq``.
    direct = source.replace("                holder = self.variants[self.active]\n", "") \
        .replace("holder.inv_freq", "self.variants[self.active].inv_freq")
    assert _found(direct) == {(33, "RPL002"): "safe"}
    torch = pytest.importorskip("torch")
    namespace: dict = {}
    exec(compile(fixed, "rotary.py", "exec"), namespace)
    model = namespace["RotaryRouter"](64, 5e5).bfloat16()
    cos, _ = model(torch.zeros(1, dtype=torch.bfloat16), torch.tensor([[131071]]))
    expected = torch.cos(131071 * 5e5 ** (-torch.arange(0, 64, 2, dtype=torch.float64) / 64))
    assert torch.allclose(cos[0, 0].double(), expected, atol=2 ** -8 + 1e-3)


def test_builders_registered_by_a_decorator_are_checked_at_the_calls_that_pick_them():
    """``@register_rope("default")`` storing the builder into ``ROPE_REGISTRY[name]``: a call
    ``ROPE_REGISTRY[kind](..., dtype=dtype)`` handing on a None default (``dtype or
    torch.get_default_dtype()``) gets ``dtype=torch.float32``; builders reached through a getter and
    ``functools.partial`` whose every call passes float32 are fine, and one whose partial binds
    ``dtype=torch.bfloat16`` is found."""
    source = '''\
        from typing import Callable, Dict

        import torch
        from torch import nn

        ROPE_REGISTRY: Dict[str, Callable] = {}


        def register_rope(name):
            def deco(fn):
                ROPE_REGISTRY[name] = fn
                return fn
            return deco


        @register_rope("default")
        def default_rope(dim, base, *, device=None, dtype=None):
            dtype = dtype or torch.get_default_dtype()
            idx = torch.arange(0, dim, 2, device=device, dtype=torch.int64).to(dtype)
            return 1.0 / (base ** (idx / dim))


        class Rotary(nn.Module):
            def __init__(self, dim, base=10000.0, rope_type="default", dtype=None):
                super().__init__()
                inv_freq = ROPE_REGISTRY[rope_type](dim, base, dtype=dtype)
                self.register_buffer("inv_freq", inv_freq, persistent=False)

            def forward(self, x, positions):
                angles = positions[..., None].float() * self.inv_freq.float()
                return angles.cos().to(x.dtype), angles.sin().to(x.dtype)
        '''
    found = _found(source)
    assert found[(19, "RPL006")] == "safe"
    fixed = _fixed(source)
    assert "ROPE_REGISTRY[rope_type](dim, base, dtype=torch.float32)" in fixed
    assert _found(fixed).get((19, "RPL006")) is None
    # Picked through a getter and bound with functools.partial; every call asks for float32.
    picked = source.replace(
        "                inv_freq = ROPE_REGISTRY[rope_type](dim, base, dtype=dtype)\n"
        "                self.register_buffer(\"inv_freq\", inv_freq, persistent=False)\n",
        "                self.rope_fn = partial(get_rope_fn(rope_type), dim, base)\n").replace(
        "            def forward(self, x, positions):\n",
        "            def forward(self, x, positions):\n"
        "                inv_freq = self.rope_fn(device=x.device, dtype=torch.float32)\n").replace(
        "self.inv_freq.float()", "inv_freq").replace(
        "        @register_rope", "        def get_rope_fn(name):\n            return ROPE_REGISTRY[name]\n\n\n"
        "        @register_rope").replace("import torch\n", "from functools import partial\n\n        import torch\n", 1)
    assert "partial(get_rope_fn(rope_type), dim, base)" in picked
    assert _found(picked) == {}
    bound = picked.replace("partial(get_rope_fn(rope_type), dim, base)",
                           "partial(get_rope_fn(rope_type), dim, base, dtype=torch.bfloat16)").replace(
        "self.rope_fn(device=x.device, dtype=torch.float32)", "self.rope_fn(device=x.device)")
    assert [code for _, code in _found(bound)] == ["RPL006"]


def test_ids_handed_to_a_rotary_reached_through_held_modules_are_replaced_by_the_embedding_weight():
    """``rotary_emb = self.layers[0].self_attn.rotary_emb; rotary_emb(position_ids, seq_len=n)`` in a model whose
    rotary casts its tables to ``x.dtype``: int64 tables. The model's one embedding table has the dtype of the
    activations it makes, so its weight stands in for ``x`` (safe: the rotary reads only dtype and device)."""
    source = '''\
        import torch
        from torch import nn


        class RotaryEmbedding(nn.Module):
            def __init__(self, dim, base=10000.0, max_positions=4096):
                super().__init__()
                inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
                t = torch.arange(max_positions, dtype=torch.float32)
                emb = torch.outer(t, inv_freq)
                self._cos = emb.cos()
                self._sin = emb.sin()

            def forward(self, x, seq_len=None):
                return self._cos[:seq_len].to(device=x.device, dtype=x.dtype), self._sin[:seq_len].to(
                    device=x.device, dtype=x.dtype)


        class Attention(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.qkv = nn.Linear(dim, 3 * dim)
                self.rotary_emb = RotaryEmbedding(dim)


        class Layer(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.self_attn = Attention(dim)


        class Model(nn.Module):
            def __init__(self, vocab, dim, n_layers):
                super().__init__()
                self.embed_tokens = nn.Embedding(vocab, dim)
                self.layers = nn.ModuleList([Layer(dim) for _ in range(n_layers)])

            def rotary_cos_sin(self, position_ids, max_s):
                rotary_emb = self.layers[0].self_attn.rotary_emb
                cos, sin = rotary_emb(position_ids, seq_len=max_s)
                return cos.index_select(0, position_ids), sin.index_select(0, position_ids)
        '''
    found = _found(source)
    assert found == {(40, "RPL001"): "safe"}
    fixed = _fixed(source)
    assert "rotary_emb(self.embed_tokens.weight, seq_len=max_s)" in fixed
    assert _found(fixed) == {}
    # Padded with unrelated code the triage prunes, the way through the held modules is still kept.
    padding = "".join(f"\n\n        def helper_{i}(a):\n            return a + {i}\n" for i in range(40))
    assert _found(source + padding) == {(40, "RPL001"): "safe"}
    torch = pytest.importorskip("torch")
    namespace: dict = {}
    exec(compile(fixed, "rotary.py", "exec"), namespace)
    model = namespace["Model"](16, 64, 2).bfloat16()
    cos, _ = model.rotary_cos_sin(torch.tensor([4000]), 4001)
    expected = torch.cos(4000 * 1e4 ** (-torch.arange(0, 64, 2, dtype=torch.float64) / 64))
    assert cos.dtype == torch.bfloat16
    assert torch.allclose(cos[0].double(), expected, atol=2 ** -8 + 1e-3)


def test_a_buffer_reassigned_in_float32_is_float32_for_the_reads_after_it_in_the_same_block():
    """Qwen's dynamic NTK: ``self.inv_freq = 1.0 / (base ** (arange(...).float() / dim))`` then the table built
    from ``self.inv_freq`` in the same ``if`` block reads that float32 tensor, not the converted buffer. A read
    after the block (where the branch may not have run) still reads the buffer."""
    source = '''\
        import torch


        class RotaryEmbedding(torch.nn.Module):
            def __init__(self, dim, base=10000):
                super().__init__()
                self.dim, self.base = dim, base
                inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
                self.register_buffer("inv_freq", inv_freq, persistent=False)
                self._cache = None
                self._seq_len_cached = 0

            def forward(self, seqlen, ntk_alpha=1.0):
                if seqlen > self._seq_len_cached:
                    base = self.base * ntk_alpha ** (self.dim / (self.dim - 2))
                    self.inv_freq = 1.0 / (base ** (torch.arange(0, self.dim, 2, device=self.inv_freq.device).float()
                                                    / self.dim))
                    self._seq_len_cached = max(2 * seqlen, 16)
                    seq = torch.arange(self._seq_len_cached, device=self.inv_freq.device)
                    freqs = torch.outer(seq.type_as(self.inv_freq), self.inv_freq)
                    self._cache = [freqs.cos(), freqs.sin()]
                cos, sin = self._cache
                return cos[:seqlen], sin[:seqlen]
        '''
    assert _found(source) == {}
    after = source.replace(
        "                    freqs = torch.outer(seq.type_as(self.inv_freq), self.inv_freq)\n"
        "                    self._cache = [freqs.cos(), freqs.sin()]\n", "").replace(
        "                cos, sin = self._cache\n",
        "                freqs = torch.outer(seq.type_as(self.inv_freq), self.inv_freq)\n"
        "                cos, sin = freqs.cos(), freqs.sin()\n")
    assert ("RPL002" in {code for _, code in _found(after)})


def test_a_parenthesised_phase_cast_before_cos_and_sin_moves_to_the_tables():
    """``freqs = (position_ids[:, :, None].float() * inv_freq[None, None, :]).type_as(x)`` then cos/sin of its
    concatenation: the cast goes (the author's parentheses stay) and the tables take it."""
    source = '''\
        import torch
        from torch import nn


        class Rotary(nn.Module):
            def __init__(self, dim, base=10000.0):
                super().__init__()
                self.inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
                self.attention_scaling = 1.0

            def forward(self, x, position_ids):
                inv_freq = self.inv_freq.to(x.device)
                freqs = (position_ids[:, :, None].float() * inv_freq[None, None, :]).type_as(x)
                emb = torch.cat((freqs, freqs), dim=-1)
                cos = emb.cos() * self.attention_scaling
                sin = emb.sin() * self.attention_scaling
                return cos, sin
        '''
    assert _found(source) == {(13, "RPL007"): "safe"}
    fixed = _fixed(source)
    assert "freqs = (position_ids[:, :, None].float() * inv_freq[None, None, :])\n" in fixed
    assert "cos = emb.cos().type_as(x) * self.attention_scaling" in fixed
    assert _found(fixed) == {}
    torch = pytest.importorskip("torch")
    namespace: dict = {}
    exec(compile(fixed, "rotary.py", "exec"), namespace)
    cos, _ = namespace["Rotary"](64, 5e5)(torch.zeros(1, dtype=torch.bfloat16), torch.tensor([[131071]]))
    expected = torch.cos(131071 * 5e5 ** (-torch.arange(0, 64, 2, dtype=torch.float64) / 64))
    assert cos.dtype == torch.bfloat16
    assert torch.allclose(cos[0, 0, :32].double(), expected, atol=2 ** -8 + 1e-3)


def test_frequencies_widened_after_a_slice_keep_their_dtype_change_inside_the_function():
    """``exponent = torch.arange(0, d, 2, dtype=x.dtype) / d`` whose frequencies are read only as
    ``inv_freq[None, None, :].float()``: float32 at the phase either way, so building them in float32 changes
    nothing else (safe)."""
    source = '''\
        import torch
        from torch import nn


        class Rotary(nn.Module):
            def __init__(self, dim, base=10000.0):
                super().__init__()
                self.dim, self.base = dim, base

            def forward(self, x, position_ids):
                exponent = torch.arange(0, self.dim, 2, device=x.device, dtype=x.dtype) / self.dim
                inv_freq = 1.0 / (self.base ** exponent)
                freqs = position_ids[:, :, None].float() * inv_freq[None, None, :].float()
                emb = torch.cat((freqs, freqs), dim=-1)
                return emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        '''
    assert _found(source) == {(11, "RPL006"): "safe"}
    fixed = _fixed(source)
    assert "torch.arange(0, self.dim, 2, device=x.device, dtype=torch.float32) / self.dim" in fixed
    assert _found(fixed) == {}
    # Returned as it is (not widened), the dtype would leave the function: unsafe.
    kept = source.replace("return emb.cos().to(x.dtype), emb.sin().to(x.dtype)",
                          "return emb.cos().to(x.dtype), emb.sin().to(x.dtype), inv_freq")
    assert _found(kept) == {(11, "RPL006"): "unsafe"}


def test_a_buffer_handed_to_an_optional_frequency_argument_of_a_helper_is_found():
    """timm's older ``RotaryEmbeddingCat``: ``build_rotary_pos_embed(shape, self.bands)`` hands the buffer on to
    ``build_fourier_pos_embed(bands=bands)``, which computes bands only ``if bands is None`` and forms the phase
    ``grid * bands``: the buffer ``model.bfloat16()`` rounds reaches the phase."""
    source = '''\
        import torch
        from torch import nn


        def freq_bands(num_bands, temperature=10000.0):
            exp = torch.arange(0, num_bands, 1, dtype=torch.int64).to(torch.float32) / num_bands
            return 1.0 / (temperature ** exp)


        def build_fourier_pos_embed(feat_shape, bands=None, num_bands=64, temperature=10000.0):
            if bands is None:
                bands = freq_bands(num_bands, temperature=temperature)
            t = [torch.arange(s, dtype=torch.int64).to(torch.float32) for s in feat_shape]
            grid = torch.stack(torch.meshgrid(*t, indexing="ij"), dim=-1).unsqueeze(-1)
            pos = grid * bands
            return pos.sin(), pos.cos()


        def build_rotary_pos_embed(feat_shape, bands=None, dim=64):
            sin_emb, cos_emb = build_fourier_pos_embed(feat_shape, bands=bands, num_bands=dim // 4)
            return sin_emb.flatten(0, -2), cos_emb.flatten(0, -2)


        class RotaryEmbeddingCat(nn.Module):
            def __init__(self, dim, temperature=10000.0):
                super().__init__()
                self.register_buffer("bands", freq_bands(dim // 4, temperature), persistent=False)

            def forward(self, x):
                return torch.cat(build_rotary_pos_embed(x.shape[2:], self.bands), -1)
        '''
    assert _found(source) == {(30, "RPL002"): "safe"}
    # Computed inside the helper instead of handed on: nothing module casts reach.
    assert _found(source.replace("build_rotary_pos_embed(x.shape[2:], self.bands)",
                                 "build_rotary_pos_embed(x.shape[2:])")) == {}
    fixed = _fixed(source)
    assert _found(fixed) == {}
    torch = pytest.importorskip("torch")
    namespace: dict = {}
    exec(compile(fixed, "rotary.py", "exec"), namespace)
    rope = namespace["RotaryEmbeddingCat"](64).bfloat16()
    emb = rope(torch.zeros(1, 1, 1, 3000))
    expected = torch.sin(2999 * 1e4 ** (-torch.arange(0, 16, dtype=torch.float64) / 16))
    assert torch.allclose(emb[-1, :16].double(), expected, atol=1e-4)


def test_a_buffer_rebuilt_in_float32_by_forward_before_its_read_is_not_rounded_state():
    """Phi-3 / OmniGen's su-scaled rotary: ``self.inv_freq = 1.0 / (ext_factors * self.base ** shape)`` in
    ``forward``, then ``self.inv_freq[None, :, None].float()``: the buffer holds that float32 tensor when it is
    read, whatever a module cast did to the one registered in ``__init__``."""
    source = '''\
        import torch
        from torch import nn


        class SuScaledRotary(nn.Module):
            def __init__(self, dim, base=10000, short_factor=None):
                super().__init__()
                self.dim, self.base = dim, base
                inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2, dtype=torch.int64).float() / self.dim))
                self.register_buffer("inv_freq", tensor=inv_freq, persistent=False)
                self.short_factor = short_factor or [1.0] * (dim // 2)

            def forward(self, x, position_ids):
                ext_factors = torch.tensor(self.short_factor, dtype=torch.float32, device=x.device)
                shape = torch.arange(0, self.dim, 2, dtype=torch.int64, device=x.device).float() / self.dim
                self.inv_freq = 1.0 / (ext_factors * self.base ** shape)
                freqs = position_ids[..., None].float() * self.inv_freq[None, None, :].float()
                return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)
        '''
    assert _found(source) == {}
    torch = pytest.importorskip("torch")
    namespace: dict = {}
    exec(compile(textwrap.dedent(source), "rotary.py", "exec"), namespace)
    cos, _ = namespace["SuScaledRotary"](64, 5e5).bfloat16()(torch.zeros(1), torch.tensor([[131071]]))
    expected = torch.cos(131071 * 5e5 ** (-torch.arange(0, 64, 2, dtype=torch.float64) / 64))
    # float32's phase error at this position (ROPE_NOTES: 2 * (pos + 1) * 2**-24 + 2**-23); bfloat16 rates miss by ~1
    assert torch.allclose(cos[0, 0].double(), expected, atol=2 * 131072 * 2 ** -24 + 2 ** -23)


def test_per_axis_frequencies_in_a_block_diagonal_matrix_form_a_phase_by_einsum():
    """``torch.einsum("bnc,cf->bnf", pos, torch.block_diag(f[None], f[None], f[None]))`` sums over the xyz index:
    under autocast it runs in 16 bits (RPL003), with a float32 sum of elementwise products as the fix."""
    source = '''\
        import torch
        from torch import nn


        def axis_frequencies(dim, theta, device=None):
            exponent = torch.arange(0, dim, 2, device=device, dtype=torch.float32) / dim
            return theta ** (-exponent)


        class PointRoPE(nn.Module):
            def __init__(self, head_dim, grid_size=0.02, theta=100.0):
                super().__init__()
                self.axis_dim, self.grid_size, self.theta = head_dim // 3, grid_size, theta

            def frequency_matrix(self, device=None):
                f = axis_frequencies(self.axis_dim, self.theta, device=device)
                return torch.block_diag(f[None], f[None], f[None])

            def forward(self, coord):
                pos = coord.float() / self.grid_size
                angles = torch.einsum("bnc,cf->bnf", pos, self.frequency_matrix(coord.device))
                return angles.cos(), angles.sin()
        '''
    assert _found(source) == {(21, "RPL003"): "safe"}
    fixed = _fixed(source)
    assert "einsum" not in fixed and _found(fixed) == {}
    torch = pytest.importorskip("torch")
    namespace: dict = {}
    exec(compile(fixed, "rotary.py", "exec"), namespace)
    coord = torch.tensor([[[4000 * 0.02, 0.0, 0.0]]])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        cos, _ = namespace["PointRoPE"](96)(coord)
    expected = torch.cos(4000 * 100.0 ** (-torch.arange(0, 32, 2, dtype=torch.float64) / 32))
    assert torch.allclose(cos[0, 0, :16].double(), expected, atol=1e-3)


def test_grids_appended_to_a_list_then_meshed_feed_only_the_phase():
    """HunyuanVideo's rotary with ``torch.arange(0, n, **factory_kwargs)`` in the activations' dtype, appended to
    a list, meshed and handed axis by axis to the 1-D builder: nothing else reads the grid, so building it in
    float32 is safe."""
    source = '''\
        import torch
        from torch import nn


        def get_1d_rotary_pos_embed(dim, pos, theta=10000.0):
            freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
            freqs = torch.outer(pos, freqs)
            return freqs.cos(), freqs.sin()


        class VideoRotaryPosEmbed(nn.Module):
            def __init__(self, rope_dim=(16, 24, 24), theta=256.0):
                super().__init__()
                self.rope_dim, self.theta = rope_dim, theta

            def forward(self, hidden_states):
                _, _, t, h, w = hidden_states.shape
                factory_kwargs = {"device": hidden_states.device, "dtype": hidden_states.dtype}
                axes_grids = []
                for i, n in enumerate((t, h, w)):
                    grid = torch.arange(0, n, **factory_kwargs)
                    axes_grids.append(grid)
                grid = torch.stack(torch.meshgrid(*axes_grids, indexing="ij"), dim=0)
                freqs = [get_1d_rotary_pos_embed(self.rope_dim[i], grid[i].reshape(-1), self.theta) for i in range(3)]
                return torch.cat([f[0] for f in freqs], dim=1), torch.cat([f[1] for f in freqs], dim=1)
        '''
    assert _found(source) == {(21, "RPL005"): "safe"}
    fixed = _fixed(source)
    assert 'torch.arange(0, n, **{**factory_kwargs, "dtype": torch.float32})' in fixed
    assert _found(fixed) == {}
    # The list also returned: other code reads the grids, whose dtype would change.
    returned = source.replace("return torch.cat([f[0] for f in freqs], dim=1), torch.cat([f[1] for f in freqs], dim=1)",
                              "return torch.cat([f[0] for f in freqs], dim=1), axes_grids")
    assert _found(returned) == {(21, "RPL005"): "unsafe"}


def test_a_float32_buffer_of_positions_is_kept_through_module_casts():
    """KerasNLP's rotary port registers ``position_range = torch.arange(n, dtype=torch.float32)`` as a buffer and
    slices it for positions: ``model.half()`` rounds it (RPL005 at the read); the fix keeps it float32 with the
    ``_apply`` override RPL002 uses for frequencies."""
    source = '''\
        import torch
        from torch import nn


        class RotaryEmbedding(nn.Module):
            def __init__(self, max_wavelength=10000, max_sequence_length=8192):
                super().__init__()
                self.max_wavelength = max_wavelength
                self.register_buffer("position_range", torch.arange(max_sequence_length, dtype=torch.float32),
                                     persistent=False)

            def forward(self, inputs, start_index=0):
                dim = inputs.shape[-1]
                inverse_freq = 1.0 / (self.max_wavelength ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
                positions = self.position_range[start_index:start_index + inputs.shape[1]]
                freq = torch.einsum("i,j->ij", positions, inverse_freq)
                return freq.cos().to(inputs.dtype), freq.sin().to(inputs.dtype)
        '''
    assert _found(source) == {(15, "RPL005"): "safe"}
    fixed = _fixed(source)
    assert "apply_keeping_dtype" in fixed and '("position_range",)' in fixed
    assert _found(fixed) == {}
    torch = pytest.importorskip("torch")
    namespace: dict = {}
    exec(compile(fixed, "rotary.py", "exec"), namespace)
    rope = namespace["RotaryEmbedding"]().half().float()
    cos, _ = rope(torch.zeros(1, 1, 64), start_index=8191)
    expected = torch.cos(8191 * 1e4 ** (-torch.arange(0, 64, 2, dtype=torch.float64) / 64))
    assert torch.allclose(cos[0].double(), expected, atol=2 * 8192 * 2 ** -24 + 2 ** -23)


_HOLDING_MODEL = '''\
        import torch
        from torch import nn


        class Rotary(nn.Module):
            def __init__(self, dim, base=10000.0):
                super().__init__()
                self.dim, self.base = dim, base

            def angles(self, positions):
                inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2, dtype=torch.float32) / self.dim))
                return positions.to(torch.float32)[..., None] * inv_freq

            def forward(self, x, position_ids):
                freqs = self.angles(position_ids)
                return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)


        class Layer(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.proj = nn.Linear(dim, dim)

            def forward(self, hidden_states, position_ids, position_embeddings):
                cos, sin = position_embeddings
                return self.proj(hidden_states) * cos + hidden_states * sin


        class Model(nn.Module):
            def __init__(self, vocab, dim):
                super().__init__()
                self.embed_tokens = nn.Embedding(vocab, dim)
                self.layer = Layer(dim)
                self.rotary_emb = Rotary(dim)

            def forward(self, input_ids, position_ids=None, inputs_embeds=None):
                if inputs_embeds is None:
                    inputs_embeds = self.embed_tokens(input_ids)
                if position_ids is None:
                    position_ids = torch.arange(inputs_embeds.shape[1], device=inputs_embeds.device)[None]
                position_embeddings = self.rotary_emb(inputs_embeds, position_ids)
                return self.layer(inputs_embeds, position_ids, position_embeddings)
'''


# (what the model does around the rotary: text replaced -> replacement), the finding, a piece of the fixed source.
_GLUE_VARIANTS = {
    "a decoder layer casts the tables to the ids' dtype": (
        {"                cos, sin = position_embeddings\n":
         "                cos, sin = position_embeddings\n"
         "                cos, sin = cos.type_as(position_ids), sin.type_as(position_ids)\n"},
        (26, "RPL001"), "cos.type_as(hidden_states), sin.type_as(hidden_states)"),
    "the ids, under another name, are the rotary's dtype carrier": (
        {"                position_embeddings = self.rotary_emb(inputs_embeds, position_ids)\n":
         "                ref = input_ids if input_ids is not None else inputs_embeds\n"
         "                position_embeddings = self.rotary_emb(ref, position_ids)\n"},
        (42, "RPL001"), "self.rotary_emb(self.embed_tokens.weight, position_ids)"),
    "a device move that takes the embeddings' dtype too": (
        {"                    position_ids = torch.arange(inputs_embeds.shape[1], device=inputs_embeds.device)[None]\n":
         "                    cache_position = torch.arange(inputs_embeds.shape[1]).to(inputs_embeds)\n"
         "                    position_ids = cache_position[None]\n"},
        (40, "RPL005"), "cache_position = torch.arange(inputs_embeds.shape[1]).to(inputs_embeds.device)"),
    "a float buffer of positions the model slices": (
        {"                self.rotary_emb = Rotary(dim)\n":
         "                self.rotary_emb = Rotary(dim)\n"
         "                self.register_buffer(\"position_ids\", torch.arange(4096).float()[None], persistent=False)\n",
         "torch.arange(inputs_embeds.shape[1], device=inputs_embeds.device)[None]":
         "self.position_ids[:, : inputs_embeds.shape[1]]"},
        (41, "RPL005"), '("position_ids",)'),
}


@pytest.mark.parametrize("variant", sorted(_GLUE_VARIANTS))
def test_model_glue_around_a_correct_rotary_is_checked(variant: str):
    """The rotary is right; the model around it is not. Each variant is found with a safe fix, and the fixed
    model is clean."""
    replacements, finding, fixed_piece = _GLUE_VARIANTS[variant]
    assert _found(_HOLDING_MODEL) == {}
    source = _HOLDING_MODEL
    for old, new in replacements.items():
        assert old in source
        source = source.replace(old, new)
    assert _found(source) == {finding: "safe"}
    fixed = _fixed(source)
    assert fixed_piece in fixed and _found(fixed) == {}


def test_a_phase_handed_in_as_angles_or_cached_in_16_bits_is_cast_after_cos_and_sin():
    """``def apply_rotary(x, angles): angles = angles.to(x.dtype); ... angles.cos()`` rounds the phase a caller
    formed (RPL007, the cast moves to the tables); and a model caching ``self.rotary_emb.angles(positions)
    .to(hidden_states.dtype)`` in a plain attribute, handed to a rotary that casts its own tables, keeps the
    cache float32 instead."""
    source = '''\
        import torch


        def apply_rotary(x, angles):
            angles = angles.to(x.dtype)
            cos = torch.repeat_interleave(angles.cos(), 2, dim=-1)
            sin = torch.repeat_interleave(angles.sin(), 2, dim=-1)
            return x * cos + x.flip(-1) * sin
        '''
    assert _found(source) == {(5, "RPL007"): "safe"}
    assert _found(source.replace("angles", "emb")) == {}  # a name that says nothing is not taken for a phase
    fixed = _fixed(source)
    assert "angles.cos().to(x.dtype)" in fixed and _found(fixed) == {}
    cached = _HOLDING_MODEL.replace(
        "                self.rotary_emb = Rotary(dim)\n",
        "                self.rotary_emb = Rotary(dim)\n"
        "                self._angle_cache = None\n").replace(
        "            def forward(self, x, position_ids):\n"
        "                freqs = self.angles(position_ids)\n",
        "            def forward(self, x, freqs):\n").replace(
        "                position_embeddings = self.rotary_emb(inputs_embeds, position_ids)\n",
        "                angles = self._rope_angles(inputs_embeds)[position_ids]\n"
        "                position_embeddings = self.rotary_emb(inputs_embeds, angles)\n") + '''

            def _rope_angles(self, hidden_states, length=4096):
                cache = self._angle_cache
                if cache is None or cache.device != hidden_states.device:
                    positions = torch.arange(length, device=hidden_states.device)
                    self._angle_cache = self.rotary_emb.angles(positions).to(hidden_states.dtype)
                return self._angle_cache
'''
    assert _found(cached) == {(50, "RPL007"): "safe"}
    fixed = _fixed(cached)
    assert "self._angle_cache = self.rotary_emb.angles(positions)\n" in fixed
    assert _found(fixed) == {}


def test_a_dtype_argument_that_only_reaches_tables_returned_in_float32_is_safe_to_drop():
    """diffusers' ``get_1d_rotary_pos_embed(..., freqs_dtype)`` shape: positions and frequencies built in the
    caller's ``freqs_dtype`` but every table returned ``.float()``, or the frequencies widened by the statement that
    rebinds them (``freqs = torch.outer(pos.float(), freqs.float())``): float32 inside changes no dtype outside."""
    source = '''\
        import torch


        def get_1d_rotary_pos_embed(dim, pos, theta=10000.0, freqs_dtype=torch.float32):
            pos = pos.to(freqs_dtype)
            freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=freqs_dtype, device=pos.device) / dim))
            freqs = torch.outer(pos, freqs)
            return freqs.cos().repeat_interleave(2, dim=1).float(), freqs.sin().repeat_interleave(2, dim=1).float()
        '''
    assert _found(source) == {(5, "RPL005"): "safe", (6, "RPL006"): "safe"}
    fixed = _fixed(source)
    assert "pos = pos.float()" in fixed and "dtype=torch.float32, device=pos.device" in fixed
    assert _found(fixed) == {}
    # Tables returned in the caller's dtype: the fix casts what is returned to it (and only then is safe).
    following = source.replace(".repeat_interleave(2, dim=1).float()", ".repeat_interleave(2, dim=1)")
    assert _found(following) == {(5, "RPL005"): "safe", (6, "RPL006"): "safe"}
    assert "freqs.cos().repeat_interleave(2, dim=1).to(freqs_dtype)" in _fixed(following)
    assert ".to(freqs_dtype)" not in fixed.split("return")[-1]
    rebound = '''\
        import torch


        def axis_tables(dim, pos, theta=10000.0, freqs_dtype=torch.float32):
            freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=freqs_dtype, device=pos.device) / dim))
            freqs = torch.outer(pos.float(), freqs.float())
            return freqs.cos().repeat_interleave(2, dim=1), freqs.sin().repeat_interleave(2, dim=1)
        '''
    assert _found(rebound) == {(5, "RPL006"): "safe"}


def test_a_float_positions_buffer_widened_at_use_still_holds_rounded_positions():
    """``register_buffer("positions", torch.arange(n, dtype=torch.float32))`` sliced and widened (``t.float()``)
    before a product with rates kept as Python floats (``np.power(...).tolist()``): ``model.half()`` rounded the
    buffer and ``.float()`` restores nothing (RPL005 at the read, kept float32 by the fix). An int64 buffer of
    positions stays integer through module casts and is not reported."""
    source = '''\
        import numpy as np
        import torch
        from torch import nn


        def rope_frequencies(dim, base=10000.0):
            return (1.0 / np.power(base, np.arange(0, dim, 2, dtype=np.float64) / dim)).tolist()


        class RotaryEmbedding(nn.Module):
            def __init__(self, dim, base=10000.0, max_len=8192):
                super().__init__()
                self.inv_freq_values = rope_frequencies(dim, base)
                self.register_buffer("positions", torch.arange(max_len, dtype=torch.float32), persistent=False)

            def forward(self, seq_len, offset=0):
                t = self.positions[offset: offset + seq_len]
                inv_freq = torch.tensor(self.inv_freq_values, dtype=torch.float32, device=t.device)
                freqs = t.float()[:, None] * inv_freq[None, :]
                return freqs.cos(), freqs.sin()
        '''
    assert _found(source) == {(17, "RPL005"): "safe"}
    fixed = _fixed(source)
    assert '("positions",)' in fixed and _found(fixed) == {}
    assert _found(source.replace("dtype=torch.float32), persistent", "dtype=torch.long), persistent")) == {}
    torch = pytest.importorskip("torch")
    namespace: dict = {}
    exec(compile(fixed, "rotary.py", "exec"), namespace)
    cos, _ = namespace["RotaryEmbedding"](64).half().float()(1, offset=8191)
    expected = torch.cos(8191 * 1e4 ** (-torch.arange(0, 64, 2, dtype=torch.float64) / 64))
    assert torch.allclose(cos[0].double(), expected, atol=2 * 8192 * 2 ** -24 + 2 ** -23)


def test_a_complex_table_in_the_phase_dtype_keeps_the_dtype_argument_meaningful():
    """diffusers' ``get_1d_rotary_pos_embed`` also returns ``torch.polar(torch.ones_like(freqs), freqs)`` on one
    branch: complex in the dtype its ``freqs_dtype`` chose (complex128 for float64), so the in-function float32
    fix changes what that branch returns and stays unsafe."""
    source = '''\
        import torch


        def get_1d_rotary_pos_embed(dim, pos, theta=10000.0, use_real=True, freqs_dtype=torch.float32):
            freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=freqs_dtype, device=pos.device) / dim))
            freqs = torch.outer(pos, freqs)
            if use_real:
                return freqs.cos().repeat_interleave(2, dim=1).float(), freqs.sin().repeat_interleave(2, dim=1).float()
            return torch.polar(torch.ones_like(freqs), freqs)
        '''
    assert _found(source) == {(5, "RPL006"): "unsafe"}


def test_a_phase_cast_before_an_m_rope_section_merge_moves_to_the_tables():
    """Qwen2-VL style: ``freqs = freqs.to(x.dtype)``, then ``chunks = freqs.split(section, dim=-1)`` merged by
    ``torch.cat([c[i % 3] for i, c in enumerate(chunks)], dim=-1)`` before cos/sin: the comprehension's names take
    their columns, so the phase reaches the trig, and the split and merge only rearrange it (safe fix)."""
    source = '''\
        import torch
        from torch import nn


        class MultimodalRotary(nn.Module):
            def __init__(self, dim, base=10000.0, section=(8, 12, 12)):
                super().__init__()
                self.dim, self.base, self.mrope_section = dim, base, list(section)

            def forward(self, x, position_ids):
                inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2, device=x.device).float() / self.dim))
                freqs = position_ids[..., None].float() * inv_freq
                freqs = freqs.to(x.dtype)
                chunks = freqs.split(self.mrope_section, dim=-1)
                freqs = torch.cat([c[i % 3] for i, c in enumerate(chunks)], dim=-1)
                emb = torch.cat((freqs, freqs), dim=-1)
                return emb.cos(), emb.sin()
        '''
    assert _found(source) == {(13, "RPL007"): "safe"}
    fixed = _fixed(source)
    assert "freqs = freqs.to(x.dtype)" not in fixed and "emb.cos().to(x.dtype)" in fixed
    assert _found(fixed) == {}


def test_a_call_decorated_method_read_as_an_attribute_is_no_property():
    """``@register_rope("linear")`` on a method (a decorator that is a call) and ``self.<that method>`` read as an
    attribute: the property check looked for a dotted decorator name and crashed on the call; the buffer behind
    the dispatch is still found."""
    source = '''\
        import torch
        from torch import nn

        _IMPLS = {}


        def register_rope(name):
            def wrap(fn):
                _IMPLS[name] = fn
                return fn
            return wrap


        class Rotary(nn.Module):
            def __init__(self, dim, base=10000.0):
                super().__init__()
                self.inv_freq = nn.Parameter(1.0 / base ** (torch.arange(0, dim, 2).float() / dim),
                                             requires_grad=False)
                self._rope_impl = self.default

            @register_rope("default")
            def default(self, positions):
                t = positions.to(self.inv_freq.dtype)
                return t[:, None] * self.inv_freq[None, :]

            def forward(self, positions):
                impl = self.default
                angles = impl(positions)
                return angles.cos(), angles.sin()
        '''
    found = _found(source)
    assert (23, "RPL005") in found or (23, "RPL002") in found, found


def test_a_float_positions_buffer_of_another_module_read_by_the_rotary_holder():
    """JinaBERT-style: the embeddings module registers ``position_ids`` as a float32 buffer
    (``torch.arange(n, dtype=torch.float32)``), and the model holding the rotary gathers positions from it
    (``self.embeddings.position_ids[position_ids]``): ``model.half()`` rounds them (RPL005 at the reads, kept float32
    by the ``_apply`` fix in the embeddings class). An int64 buffer is not reported."""
    source = '''\
        import torch
        from torch import nn


        class Embeddings(nn.Module):
            def __init__(self, n, d):
                super().__init__()
                self.word_embeddings = nn.Embedding(10, d)
                self.register_buffer(
                    "position_ids", torch.arange(n, dtype=torch.float32), persistent=False
                )

            def forward(self, input_ids):
                return self.word_embeddings(input_ids)


        class Rotary(nn.Module):
            def __init__(self, dim, base=10000.0):
                super().__init__()
                self.dim, self.base = dim, base

            def forward(self, positions, dtype):
                inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2, device=positions.device).float() / self.dim))
                freqs = positions.unsqueeze(-1).float() * inv_freq
                return freqs.cos().to(dtype), freqs.sin().to(dtype)


        class Model(nn.Module):
            def __init__(self, n=8200, d=64):
                super().__init__()
                self.embeddings = Embeddings(n, d)
                self.rotary = Rotary(d)

            def rotary_tables(self, hidden_states, position_ids=None):
                if position_ids is None:
                    positions = self.embeddings.position_ids[: hidden_states.shape[1]].unsqueeze(0)
                else:
                    positions = self.embeddings.position_ids[position_ids]
                return self.rotary(positions, hidden_states.dtype)
        '''
    assert _found(source) == {(36, "RPL005"): "safe", (38, "RPL005"): "safe"}
    assert _found(source.replace("dtype=torch.float32), persistent", "dtype=torch.long), persistent")) == {}
    fixed = _fixed(source)
    assert "def _apply(" in fixed and _found(fixed) == {}
    torch = pytest.importorskip("torch")
    namespace: dict = {}
    exec(compile(fixed, "rotary.py", "exec"), namespace)
    model = namespace["Model"]().bfloat16().float()
    cos, _ = model.rotary_tables(torch.zeros(1, 2, 64), torch.tensor([[8191, 8193]]))
    expected = torch.cos(torch.tensor([8191.0, 8193.0], dtype=torch.float64)[:, None]
                         * 1e4 ** (-torch.arange(0, 64, 2, dtype=torch.float64) / 64))
    assert torch.allclose(cos[0].double(), expected, atol=2 * 8194 * 2 ** -24 + 2 ** -23)


def test_positions_counted_over_a_mask_in_the_activations_dtype_are_counted_in_int64():
    """A model's helper counting position ids over its padding mask: a default mask made as
    ``inputs_embeds.new_ones(b, s)`` (or ones like the embeddings) counts in the activations' dtype, and a mask
    cast to it promotes an int64 count it multiplies. Found through the static helper the model calls with that
    mask, and fixed where the ids are counted: ``dtype=torch.long``, or the mask operand taken as int64."""
    source = '''\
        import torch
        from torch import nn


        class Rotary(nn.Module):
            def __init__(self, dim=64, base=10000.0):
                super().__init__()
                self.dim, self.base = dim, base

            def forward(self, x, position_ids):
                inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2, dtype=torch.float32) / self.dim))
                freqs = position_ids[..., None].float() * inv_freq
                return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)


        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(10, 64)
                self.rotary = Rotary()

            @staticmethod
            def _position_ids(inputs_embeds, attention_mask):
                if attention_mask is None:
                    return torch.cumsum(torch.ones_like(inputs_embeds[..., 0]), dim=-1) - 1
                return (attention_mask.long().cumsum(-1) - 1) * attention_mask

            def forward(self, input_ids, attention_mask=None):
                inputs_embeds = self.embed(input_ids)
                if attention_mask is not None:
                    attention_mask = attention_mask.to(inputs_embeds.dtype)
                position_ids = self._position_ids(inputs_embeds, attention_mask)
                return self.rotary(inputs_embeds, position_ids)
        '''
    assert _found(source) == {(25, "RPL005"): "safe", (26, "RPL005"): "safe"}
    fixed = _fixed(source)
    assert "torch.cumsum(torch.ones_like(inputs_embeds[..., 0]), dim=-1, dtype=torch.long) - 1" in fixed
    assert "(attention_mask.long().cumsum(-1) - 1) * attention_mask.long()" in fixed
    assert _found(fixed) == {} and _fixed(fixed) == fixed
    # An integer mask (no cast to the activations) counts in int64: nothing to report.
    assert _found(source.replace("attention_mask = attention_mask.to(inputs_embeds.dtype)", "pass")
                  .replace("torch.ones_like(inputs_embeds[..., 0])", "torch.ones_like(input_ids)")) == {}
    torch = pytest.importorskip("torch")
    namespace: dict = {}
    exec(compile(fixed, "rotary.py", "exec"), namespace)
    model = namespace["Model"]().bfloat16()
    ids = torch.zeros(1, 300, dtype=torch.long)
    for mask in (None, torch.ones(1, 300, dtype=torch.long)):
        cos, _ = model(ids, mask)
        expected = torch.cos(torch.tensor(257.0, dtype=torch.float64) * 1e4 ** (-torch.arange(0, 64, 2, dtype=torch.float64) / 64))
        assert torch.allclose(cos[0, 257].double(), expected, atol=2 ** -8)  # one bfloat16 rounding of the table
        assert (cos[0, 257].double() - torch.cos(torch.tensor(256.0, dtype=torch.float64))).abs().max() > 1e-2


def test_a_default_mask_made_like_the_embeddings_is_found_through_the_layers():
    """``attention_mask = inputs_embeds.new_ones(b, s)`` in the model, counted by a static helper, and the ids
    handed down ``self.layers`` to the attention that forms the phase: the triage keeps the classes on the way."""
    source = '''\
        import torch
        from torch import nn


        class Attention(nn.Module):
            def __init__(self, dim=64, base=10000.0):
                super().__init__()
                self.dim, self.base = dim, base

            def rotary_tables(self, position_ids):
                exponent = torch.arange(0, self.dim, 2, device=position_ids.device, dtype=torch.float32) / self.dim
                angles = position_ids.float().unsqueeze(-1) * (1.0 / (self.base ** exponent))
                return angles.cos(), angles.sin()

            def forward(self, hidden_states, position_ids):
                cos, sin = self.rotary_tables(position_ids)
                return hidden_states * cos.to(hidden_states.dtype).sum() + sin.to(hidden_states.dtype).sum()


        class Layer(nn.Module):
            def __init__(self):
                super().__init__()
                self.attention = Attention()

            def forward(self, hidden_states, position_ids):
                return self.attention(hidden_states, position_ids)


        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(10, 64)
                self.layers = nn.ModuleList(Layer() for _ in range(2))

            @staticmethod
            def position_ids_from_mask(attention_mask):
                position_ids = attention_mask.cumsum(-1) - 1
                return position_ids.masked_fill(attention_mask == 0, 1)

            def _prepare(self, inputs_embeds, attention_mask=None):
                if attention_mask is None:
                    attention_mask = inputs_embeds.new_ones(inputs_embeds.shape[:2])
                return attention_mask, self.position_ids_from_mask(attention_mask)

            def forward(self, input_ids, attention_mask=None):
                h = self.embed(input_ids)
                attention_mask, position_ids = self._prepare(h, attention_mask)
                for layer in self.layers:
                    h = layer(h, position_ids)
                return h
        '''
    assert _found(source) == {(37, "RPL005"): "safe"}
    fixed = _fixed(source)
    assert "position_ids = attention_mask.cumsum(-1, dtype=torch.long) - 1" in fixed and _found(fixed) == {}


_IDS_CAST_BEFORE_POS_EMBED = '''\
        import torch
        from torch import nn


        def axis_tables(dim, pos, theta=10000.0):
            freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float64, device=pos.device) / dim))
            freqs = torch.outer(pos.to(torch.float64), freqs)
            return freqs.cos().float(), freqs.sin().float()


        class AxesPosEmbed(nn.Module):
            def __init__(self, theta, axes_dim):
                super().__init__()
                self.theta, self.axes_dim = theta, axes_dim

            def forward(self, ids):
                pos = ids.float()
                parts = [axis_tables(d, pos[:, i], self.theta) for i, d in enumerate(self.axes_dim)]
                return torch.cat([c for c, _ in parts], -1), torch.cat([s for _, s in parts], -1)


        class Transformer(nn.Module):
            def __init__(self, dim=64):
                super().__init__()
                self.proj = nn.Linear(dim, dim)
                self.pos_embed = AxesPosEmbed(10000.0, [16, 16])

            def tables(self, hidden_states, img_ids, txt_ids):
                ids = torch.cat((txt_ids, img_ids), dim=0){cast}
                return self.pos_embed(ids)
'''


def test_ids_cast_to_the_activations_dtype_before_a_held_pos_embed_are_found():
    """Flux-style: token ids cast to `hidden_states.dtype` on their way to a position-embedding module whose
    `forward` has no anchor of its own (the phase is formed in a module-level helper it calls). The cast is found
    at its line and made float32; without the cast nothing is reported."""
    cast = ".to(dtype=hidden_states.dtype)"
    source = _IDS_CAST_BEFORE_POS_EMBED.replace("{cast}", cast)
    assert _found(source) == {(29, "RPL005"): "safe"}
    assert _fixed(source) == textwrap.dedent(source).replace(cast, ".float()")
    assert _found(_IDS_CAST_BEFORE_POS_EMBED.replace("{cast}", "")) == {}


_PUBLIC_ANGLES_HELPER = '''\
        import torch
        from torch import Tensor, nn


        @torch.jit.script
        def rotary_angles(position_ids: Tensor, inv_freq: Tensor, like: Tensor) -> Tensor:
            angles = position_ids.to(torch.float32).unsqueeze(-1) * inv_freq
            return angles.{cast}


        class Rotary(nn.Module):
            def __init__(self, dim=64, base=10000.0):
                super().__init__()
                self.dim, self.base = dim, base

            def forward(self, x, position_ids):
                inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2, dtype=torch.float32) / self.dim))
                angles = rotary_angles(position_ids, inv_freq, {arg})
                return angles.cos(), angles.sin()
'''


@pytest.mark.parametrize("cast, arg, stand_in, tail", [
    ("type_as(like)", "x", "x.new_empty((), dtype=torch.float32)", ".type_as(x)"),
    ("to(like.dtype)", "x", "x.new_empty((), dtype=torch.float32)", ".to(x.dtype)"),
    ("to(like)", "x.dtype", "torch.float32", ".to(x.dtype)"),
])
def test_a_public_helper_casting_the_phase_to_a_dtype_its_caller_passes_gets_a_float32_stand_in(
        cast: str, arg: str, stand_in: str, tail: str):
    """`rotary_angles` (public, scripted: other modules may call it) returns the phase cast to `like`'s dtype and
    the caller takes cos/sin: the helper stays as it is, the call passes a float32 stand-in for `like`, and the
    tables are cast to what was passed. The fixed file checks clean, so a second fix changes nothing."""
    source = _PUBLIC_ANGLES_HELPER.replace("{cast}", cast).replace("{arg}", arg)
    assert _found(source) == {(8, "RPL007"): "safe"}
    fixed = _fixed(source)
    expected = textwrap.dedent(source).replace(f"inv_freq, {arg})", f"inv_freq, {stand_in})").replace(
        "return angles.cos(), angles.sin()", f"return angles.cos(){tail}, angles.sin(){tail}")
    assert fixed == expected
    assert _found(fixed) == {}
    # ``.to(like)`` with a tensor moves to its device too: no stand-in is offered for it.
    assert _found(_PUBLIC_ANGLES_HELPER.replace("{cast}", "to(like)").replace("{arg}", "x")) == {(8, "RPL007"): None}


def test_a_phase_cast_on_its_own_line_inside_parentheses_moves_to_the_tables_as_one_line():
    """GPT-J's `(torch.einsum(...)\\n    .to(x.device, x.dtype))`: the cast moves after each cos/sin without the line
    break, which would not parse there."""
    source = '''\
        import torch


        def fixed_pos_embedding(x, seq_len, base=10000.0):
            dim = x.shape[-1]
            inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
            sinusoid_inp = (
                torch.einsum("i , j -> i j", torch.arange(seq_len, dtype=torch.float), inv_freq)
                .to(x.device, x.dtype)
            )
            return torch.sin(sinusoid_inp), torch.cos(sinusoid_inp)
        '''
    assert _found(source) == {(8, "RPL007"): "safe"}
    fixed = _fixed(source)
    assert fixed == textwrap.dedent(source).replace("        .to(x.device, x.dtype)\n", "").replace(
        "return torch.sin(sinusoid_inp), torch.cos(sinusoid_inp)",
        "return torch.sin(sinusoid_inp).to(x.device, x.dtype), torch.cos(sinusoid_inp).to(x.device, x.dtype)")
    assert _found(fixed) == {}


_EMBEDDING_TABLE = '''\
        import numpy as np
        import torch
        from torch import nn


        class SinusoidalTable(nn.Embedding):
            def __init__(self, num_positions, dim):
                super().__init__(num_positions, dim)
                self.weight = self._init_weight(self.weight)

            def _init_weight(self, out):
                n_pos, dim = out.shape
                enc = np.arange(n_pos, dtype=np.float64)[:, None] / np.power(10000.0, 2 * (np.arange(dim) // 2) / dim)
                table = torch.empty(n_pos, dim, dtype=out.dtype)
                table[:, : dim // 2] = torch.tensor(np.sin(enc[:, 0::2]), dtype=out.dtype)
                table[:, dim // 2 :] = torch.tensor(np.cos(enc[:, 1::2]), dtype=out.dtype)
                return nn.Parameter(table, requires_grad=False)

            def forward(self, position_ids):
                return super().forward(position_ids)


        def {use}(sinusoidal_pos, q, k):
            sin, cos = sinusoidal_pos.chunk(2, dim=-1)
            return q * cos.repeat(1, 2) + k * sin.repeat(1, 2), k


        class Attention(nn.Module):
            def __init__(self, dim=64):
                super().__init__()
                self.qk = nn.Linear(dim, 2 * dim)
                self.embed_positions = SinusoidalTable(2048, dim)

            def forward(self, hidden_states, position_ids):
                q, k = self.qk(hidden_states).chunk(2, dim=-1)
                sinusoidal_pos = self.embed_positions(position_ids)
                return {use}(sinusoidal_pos, q, k)
'''


def test_a_sinusoidal_table_held_as_an_embedding_weight_and_used_to_rotate_is_reported_without_a_fix():
    """RoFormer: `self.weight = self._init_weight(self.weight)` with `_init_weight` returning `nn.Parameter(table)`
    of numpy sin|cos. A module cast rounds it and converting back keeps the rounding (RPL011), but keeping the
    weight float32 would change what the embedding returns for 16-bit queries: reported with no fix. The same
    table added to the tokens (no rotary function takes it) is an absolute position embedding: not reported."""
    rotary = _EMBEDDING_TABLE.replace("{use}", "apply_rotary_position_embeddings")
    assert _found(rotary) == {(9, "RPL011"): None}
    assert _fixed(rotary, unsafe=True) == textwrap.dedent(rotary)
    assert _found(_EMBEDDING_TABLE.replace("{use}", "add_positions")) == {}


_SUBCLASS_OVERRIDE = '''\
        import math

        import torch
        from torch import nn


        class Rotary(nn.Module):
            def __init__(self, dim=64, base=10000.0):
                super().__init__()
                self.dim, self.base = dim, base
                inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
                self.register_buffer("inv_freq", inv_freq, persistent=False)

            def compute_inv_freq(self, device):
                return 1.0 / (self.base ** (torch.arange(0, self.dim, 2, dtype=torch.float32, device=device) / self.dim))

            def forward(self, x, position_ids):
                inv_freq = self.compute_inv_freq(x.device)
                freqs = position_ids[..., None].float() * inv_freq
                emb = torch.cat((freqs, freqs), dim=-1)
                return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


        class Llama3Rotary(Rotary):
            def compute_inv_freq(self, device):
                inv_freq = self.inv_freq.to(device)
                wavelen = 2 * math.pi / inv_freq
                return torch.where(wavelen > 8192, inv_freq / 8, inv_freq)
'''


def test_a_subclass_overriding_the_frequency_method_from_the_rounded_buffer_is_found():
    """The base class recomputes its frequencies in float32; a subclass overrides only that method and starts from
    the `inv_freq` buffer a module cast rounds. The subclass has nothing of its own that looks like RoPE (no range,
    no cos/sin), and the inherited `forward` runs its override: it is found (the triage keeps it) and fixed by
    rebuilding the frequencies in float32; without the override nothing is reported."""
    assert _found(_SUBCLASS_OVERRIDE) == {(26, "RPL002"): "safe"}
    fixed = _fixed(_SUBCLASS_OVERRIDE)
    assert "inv_freq = self.inv_freq.to(device)" not in fixed
    assert _found(fixed) == {}
    assert _found(_SUBCLASS_OVERRIDE.split("\n\n\n        class Llama3Rotary")[0] + "\n") == {}


_POSITIONS_METHOD = '''\
        import torch
        from torch import nn


        class DefaultRotary(nn.Module):
            def __init__(self, dim=64, base=10000.0):
                super().__init__()
                inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
                self.register_buffer("inv_freq", inv_freq, persistent=False)

            def _positions(self, position_ids):
                return position_ids.float()

            def forward(self, x, position_ids):
                t = self._positions(position_ids)
                inv_freq = 1.0 / (10000.0 ** (torch.arange(0, 64, 2, dtype=torch.float32, device=x.device) / 64))
                freqs = torch.cat((t[..., None] * inv_freq, t[..., None] * inv_freq), dim=-1)
                return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)


        class LinearRotary(DefaultRotary):
            def __init__(self, dim=64, base=10000.0, factor=4.0):
                super().__init__(dim, base)
                self.factor = factor

            def _positions(self, position_ids):
                return position_ids.{cast} / self.factor
'''


def test_integer_positions_cast_inside_a_method_that_returns_them_are_found_there():
    """`_positions` hands back the ids cast to the dtype of the rounded buffer (`type_as(self.inv_freq)`): the
    positions are rounded inside the callee, so the finding and its fix are there, not at the call (a `.float()` at
    the call would come too late). Cast to float32 in the override, nothing is reported."""
    source = _POSITIONS_METHOD.replace("{cast}", "type_as(self.inv_freq)")
    assert _found(source) == {(27, "RPL005"): "safe"}
    fixed = _fixed(source)
    assert fixed == textwrap.dedent(source).replace(
        "position_ids.type_as(self.inv_freq) / self.factor",
        "position_ids.to(self.inv_freq.device, torch.float32) / self.factor")
    assert _found(fixed) == {}
    assert _found(_POSITIONS_METHOD.replace("{cast}", "float()")) == {}


_GLOBAL_CACHE = '''\
        import torch

        _CACHE = {}


        def get_tables(seq_len, dim, theta, device, dtype):
            key = (seq_len, dim, theta, device, dtype)
            if key in _CACHE:
                return _CACHE[key]
            inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, device=device, dtype=torch.float32) / dim))
            t = torch.arange(seq_len, device=device, dtype=dtype)
            freqs = torch.outer(t, inv_freq.to(dtype))
            tables = (freqs.cos().repeat(1, 2), freqs.sin().repeat(1, 2))
            _CACHE[key] = tables
            return tables
'''


def test_tables_packed_through_a_repeat_keep_the_callers_dtype_when_their_inputs_become_float32():
    """A cache builder makes positions and frequencies in the caller's `dtype` and packs
    `(freqs.cos().repeat(1, 2), ...)`: both are made float32 and each cos/sin is cast to `dtype` under its repeat,
    so what the cache holds and returns keeps the caller's dtype (safe)."""
    assert _found(_GLOBAL_CACHE) == {(11, "RPL005"): "safe", (12, "RPL006"): "safe"}
    fixed = _fixed(_GLOBAL_CACHE)
    assert fixed == textwrap.dedent(_GLOBAL_CACHE).replace(
        "device=device, dtype=dtype)", "device=device, dtype=torch.float32)").replace(
        "inv_freq.to(dtype))", "inv_freq.float())").replace(
        "(freqs.cos().repeat(1, 2), freqs.sin().repeat(1, 2))",
        "(freqs.cos().to(dtype).repeat(1, 2), freqs.sin().to(dtype).repeat(1, 2))")
    assert _found(fixed) == {}


_FLOAT64_MATMUL = '''\
        import torch


        def rope_inv_freq(dim, base, device=None):
            return 1.0 / (base ** (torch.arange(0, dim, 2, dtype={dtype}, device=device) / dim))


        def rope_cos_sin(position_ids, dim, base, dtype):
            inv_freq = rope_inv_freq(dim, base, position_ids.device)
            freqs = torch.matmul(position_ids.to(torch.float64).unsqueeze(-1), inv_freq.unsqueeze(0))
            emb = torch.cat((freqs, freqs), dim=-1)
            return emb.cos().to(dtype), emb.sin().to(dtype)
'''


def test_a_matmul_of_float64_operands_one_returned_by_a_helper_is_left_alone():
    """Autocast leaves float64 matmuls alone (measured at the end, where torch is installed): frequencies a helper
    of the file returns in float64 count as float64 operands. The same helper in float32 is reported."""
    assert _found(_FLOAT64_MATMUL.replace("{dtype}", "torch.float64")) == {}
    assert _found(_FLOAT64_MATMUL.replace("{dtype}", "torch.float32")) == {(10, "RPL003"): "safe"}
    torch = pytest.importorskip("torch")
    positions = torch.arange(131060, 131074, dtype=torch.float64)[:, None]
    inv_freq = 1.0 / (1e4 ** (torch.arange(0, 64, 2, dtype=torch.float64) / 64))[None, :]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        phase = torch.matmul(positions, inv_freq)
    assert phase.dtype == torch.float64
    assert float((phase - positions * inv_freq).abs().max()) < 1e-9


# A bfloat16 attention that rotates its queries and keys by what `Rotary(head_dim)(v, seq_len)` returns, with no
# cast of its own: tests append it to a rotary and run both, original and fixed.
_ROTATING_ATTENTION = '''

        def rotate_half(x):
            x1, x2 = x.chunk(2, dim=-1)
            return torch.cat((-x2, x1), dim=-1)


        class Attention(nn.Module):
            def __init__(self, hidden=256, heads=4):
                super().__init__()
                self.heads, self.head_dim = heads, hidden // heads
                self.qkv = nn.Linear(hidden, 3 * hidden)
                self.rotary = Rotary(self.head_dim)

            def forward(self, h):
                b, s, _ = h.shape
                q, k, v = self.qkv(h).view(b, s, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
                cos, sin = self.rotary(v, s)
                q = q * cos + rotate_half(q) * sin
                k = k * cos + rotate_half(k) * sin
                return F.scaled_dot_product_attention(q, k, v)
'''


_UNCAST_TABLES = '''\
        import torch
        import torch.nn.functional as F
        from torch import nn


        class Rotary(nn.Module):
            def __init__(self, dim=64, base=10000.0):
                super().__init__()
                inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
                self.register_buffer("inv_freq", inv_freq)

            def forward(self, x, seq_len):
                t = torch.arange(seq_len, device=x.device, dtype=self.inv_freq.dtype)
                freqs = torch.outer(t, self.inv_freq)
                emb = torch.cat((freqs, freqs), dim=-1)
                return emb.cos(), emb.sin()

''' + _ROTATING_ATTENTION


def _attention_runs_in_bfloat16(sources: dict[str, str], tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Each source's `Attention()` converted to bfloat16 runs and returns bfloat16 (the original, and the fixed form
    whose tables must meet the queries in their dtype)."""
    torch = pytest.importorskip("torch")
    h = torch.randn(1, 8, 256, dtype=torch.bfloat16)
    for name, text in sources.items():
        assert _module_from(text, tmp_path, name).Attention().bfloat16()(h).dtype == torch.bfloat16


def _module_from(source: str, tmp_path, name: str):  # type: ignore[no-untyped-def]
    import importlib.util

    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tables_returned_uncast_keep_the_activations_dtype_when_their_phase_becomes_float32(tmp_path):
    """Positions built in the buffer's dtype and the buffer itself, both 16-bit after `model.bfloat16()`: the tables
    came out in the model's dtype with no cast. Making the phase float32 alone would hand float32 tables to `q * cos`,
    and the attention would raise on float32 queries with bfloat16 values (the original ran); so both fixes also
    cast the returned tables to `x.dtype`, and the fixed model runs in bfloat16 with exact tables."""
    fixed = _fixed(_UNCAST_TABLES)
    assert "return emb.cos().to(x.dtype), emb.sin().to(x.dtype)" in fixed
    assert "dtype=torch.float32)" in fixed and _found(fixed) == {}
    assert _fixed(fixed) == fixed
    _attention_runs_in_bfloat16({"uncast_original": textwrap.dedent(_UNCAST_TABLES), "uncast_fixed": fixed}, tmp_path)
    torch = pytest.importorskip("torch")
    rotary = _module_from(fixed, tmp_path, "uncast_fixed_again").Rotary().bfloat16().float()
    cos, _ = rotary(torch.zeros(1), 131073)
    exact = torch.cos(torch.tensor(131072.0, dtype=torch.float64))
    assert cos.dtype == torch.float32 and abs(float(cos[131072, 0]) - float(exact)) < 1e-4


_DTYPE_HANDED_TO_A_BUILDER = '''\
        import torch
        from torch import nn


        def _inv_freq(dim, base, device=None, dtype=torch.float32):
            exponent = torch.arange(0, dim, 2, dtype=torch.int64, device=device).float() / dim
            return (1.0 / (base ** exponent)).to(dtype)


        class Rotary(nn.Module):
            def __init__(self, dim=64, base=10000.0):
                super().__init__()
                self.dim, self.base = dim, base

            def forward(self, x, position_ids):
                inv_freq = _inv_freq(self.dim, self.base, device=x.device, dtype=x.dtype)
                freqs = position_ids[:, :, None].to(inv_freq.dtype) * inv_freq[None, None, :]
                emb = freqs.repeat(1, 1, 2)
                return emb.cos(), emb.sin()
'''


def test_a_caller_passing_float32_to_a_builder_casts_the_tables_it_returns_back_to_what_it_passed():
    """The builder makes the frequencies in the dtype its caller passes (`x.dtype`), and the caller returns the
    tables uncast: passing float32 at the call also casts the returned tables to `x.dtype`, so what forward returns
    keeps its dtype."""
    assert _found(_DTYPE_HANDED_TO_A_BUILDER) == {(7, "RPL006"): "safe", (17, "RPL005"): "safe"}
    fixed = _fixed(_DTYPE_HANDED_TO_A_BUILDER)
    assert fixed == textwrap.dedent(_DTYPE_HANDED_TO_A_BUILDER).replace(
        "device=x.device, dtype=x.dtype)", "device=x.device, dtype=torch.float32)").replace(
        ".to(inv_freq.dtype) * inv_freq", ".float() * inv_freq").replace(
        "return emb.cos(), emb.sin()", "return emb.cos().to(x.dtype), emb.sin().to(x.dtype)")
    assert _found(fixed) == {}


_PHASE_ROTATED_ELSEWHERE = '''\
        import torch
        import torch.nn.functional as F
        from torch import nn


        class RotaryEmbedding(nn.Module):
            def __init__(self, dim, base=10000):
                super().__init__()
                inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
                self.register_buffer("inv_freq", inv_freq)

            def forward(self, max_seq_len):
                seq = torch.arange(max_seq_len, device=self.inv_freq.device)
                seq = seq.type_as(self.inv_freq)
                freqs = torch.einsum("i , j -> i j", seq, self.inv_freq)
                emb = torch.cat((freqs, freqs), dim=-1)
                return emb[:, None, None, :]


        def _rotate_half(x):
            x1, x2 = torch.chunk(x, 2, dim=-1)
            return torch.cat((-x2, x1), dim=-1)


        def apply_rotary_pos_emb(t, freqs):
            dtype = t.dtype
            t = (t * freqs.cos()) + (_rotate_half(t) * freqs.sin())
            return t{tail}


        class Attention(nn.Module):
            def __init__(self, hidden=256, heads=4):
                super().__init__()
                self.heads, self.head_dim = heads, hidden // heads
                self.qkv = nn.Linear(hidden, 3 * hidden, bias=False)
                self.rotary_pos_emb = RotaryEmbedding(self.head_dim)

            def forward(self, h):
                s, b, _ = h.shape
                q, k, v = self.qkv(h).view(s, b, self.heads, 3 * self.head_dim).split(self.head_dim, dim=-1)
                freqs = self.rotary_pos_emb(s)
                q, k = apply_rotary_pos_emb(q, freqs), apply_rotary_pos_emb(k, freqs)
                q, k, v = (x.permute(1, 2, 0, 3) for x in (q, k, v))
                return F.scaled_dot_product_attention(q, k, v)
'''


def test_a_phase_rotated_by_a_helper_is_cast_to_the_rotated_tensor_there_when_it_becomes_float32(tmp_path):
    """NeMo/Megatron shape: the rotary returns the phase, in the buffer's dtype (16-bit after `model.bfloat16()`), and
    `apply_rotary_pos_emb(t, freqs)` rotates `t` by its cos/sin. The fixes make the phase float32, so they also cast
    the tables to `t.dtype` where they meet it: without that, float32 queries would meet bfloat16 values in the
    attention, which raises (measured below: the original runs, the fixed one runs too). A helper that casts what it
    returns (`.type(dtype)`, rotating in float32 on purpose) is left as it is."""
    source = _PHASE_ROTATED_ELSEWHERE.replace("{tail}", "")
    fixed = _fixed(source)
    assert "t = (t * freqs.cos().to(t.dtype)) + (_rotate_half(t) * freqs.sin().to(t.dtype))" in fixed
    assert _found(fixed) == {} and _fixed(fixed) == fixed
    cast_back = _fixed(_PHASE_ROTATED_ELSEWHERE.replace("{tail}", ".type(dtype)"))
    assert "t = (t * freqs.cos()) + (_rotate_half(t) * freqs.sin())\n    return t.type(dtype)" in cast_back
    torch = pytest.importorskip("torch")
    h = torch.randn(8, 1, 256, dtype=torch.bfloat16)
    for name, text in (("phase_original", textwrap.dedent(source)), ("phase_fixed", fixed)):
        model = _module_from(text, tmp_path, name).Attention().bfloat16()
        assert model(h).dtype == torch.bfloat16


_SETTER_REGISTERS_TABLES = '''\
        import torch
        from torch import nn


        class GPT(nn.Module):
            def __init__(self, n_elem=64, block_size=4096):
                super().__init__()
                self.n_elem = n_elem
                self.lm_head = nn.Linear(n_elem, 10)
                self.max_seq_length = block_size

            @property
            def max_seq_length(self):
                return self._max_seq_length

            @max_seq_length.setter
            def max_seq_length(self, value):
                self._max_seq_length = value
                if not hasattr(self, "{name}"):
                    {name}, sin = self.rope_cache()
                    self.register_buffer("{name}", {name}, persistent=False)
                    self.register_buffer("sin", sin, persistent=False)

            def rope_cache(self):
                return build_rope_cache(self._max_seq_length, self.n_elem)


        def build_rope_cache(seq_len, n_elem, base=10000):
            theta = 1.0 / (base ** (torch.arange(0, n_elem, 2).float() / n_elem))
            seq_idx = torch.arange(seq_len).float()
            idx_theta = torch.outer(seq_idx, theta).repeat(1, 2)
            return torch.cos(idx_theta), torch.sin(idx_theta)
'''


def test_tables_registered_by_a_property_setter_from_a_kept_builder_are_found():
    """litgpt: the `max_seq_length` setter registers the cos/sin that `self.rope_cache()` builds, as buffers a module
    cast rounds. The setter has nothing the triage looks for but the call of a kept method and the registration of
    table-named state, which keep it. State with another name (`weight`: transformers 5.24's fixed sinusoidal speaker
    table, not a rotation) does not keep the setter, so nothing is reported for it."""
    assert _found(_SETTER_REGISTERS_TABLES.replace("{name}", "cos")) == {(21, "RPL011"): "safe", (22, "RPL011"): "safe"}
    assert _found(_SETTER_REGISTERS_TABLES.replace("{name}", "weight").replace('"sin", sin', '"bias", sin')) == {}


_CACHED_TABLES_RETURNED_UNCAST = '''\
        import torch
        import torch.nn.functional as F
        from torch import nn


        class Rotary(nn.Module):
            def __init__(self, dim=64, max_len=4096, base=10000.0):
                super().__init__()
                inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
                freqs = torch.outer(torch.arange(max_len).float(), inv_freq)
                emb = torch.cat((freqs, freqs), dim=-1)
                self.register_buffer("cos_cached", emb.cos(), persistent=False)
                self.register_buffer("sin_cached", emb.sin(), persistent=False)

            def forward(self, x, seq_len):
                return self.cos_cached[:seq_len], self.sin_cached[:seq_len]

''' + _ROTATING_ATTENTION


def test_cached_tables_kept_float32_are_returned_in_the_activations_dtype(tmp_path):
    """Cached cos/sin buffers returned as they are: `model.bfloat16()` made them bfloat16 (rounded), and the queries
    rotated by them stayed bfloat16. Keeping them float32 alone would make `q * cos` float32 and the attention raise
    on bfloat16 values; the fix also casts what `forward` returns to `x.dtype` (the model runs, measured below)."""
    fixed = _fixed(_CACHED_TABLES_RETURNED_UNCAST)
    assert "return self.cos_cached[:seq_len].to(x.dtype), self.sin_cached[:seq_len].to(x.dtype)" in fixed
    assert _found(fixed) == {} and _fixed(fixed) == fixed
    _attention_runs_in_bfloat16({"cached_original": textwrap.dedent(_CACHED_TABLES_RETURNED_UNCAST),
                                 "cached_fixed": fixed}, tmp_path)
    torch = pytest.importorskip("torch")
    rotary = _module_from(fixed, tmp_path, "cached_fixed_again").Rotary().bfloat16().float()
    cos, _ = rotary(torch.zeros(()), 4096)
    assert abs(float(cos[4095, 0]) - float(torch.cos(torch.tensor(4095.0, dtype=torch.float64)))) < 1e-5


_PARTIAL_BUILDER = '''\
        import functools

        import torch
        from torch import nn


        def _default_inv_freq(dim, base, device=None, dtype=torch.float32):
            exponent = torch.arange(0, dim, 2, dtype=torch.int64, device=device).float() / dim
            return (1.0 / (base ** exponent)).to(dtype)


        class Rotary(nn.Module):
            def __init__(self, dim=64, base=10000.0):
                super().__init__()
                self.inv_freq_fn = functools.partial(_default_inv_freq, dim, base)

            def forward(self, x, position_ids):
                inv_freq = self.inv_freq_fn(device=x.device, dtype=x.dtype)
                freqs = position_ids[:, :, None].to(inv_freq.dtype) * inv_freq[None, None, :]
                emb = freqs.repeat(1, 1, 2)
                return emb.cos(), emb.sin()
'''


def test_a_builder_called_through_a_partial_gets_float32_at_the_call():
    """`self.inv_freq_fn = functools.partial(_default_inv_freq, dim, base)` then `self.inv_freq_fn(dtype=x.dtype)`:
    the partial's calls are the builder's calls, so float32 is passed there (safe: nothing else calls it) and the
    tables forward returns are cast back to `x.dtype`."""
    assert _found(_PARTIAL_BUILDER) == {(9, "RPL006"): "safe", (19, "RPL005"): "safe"}
    fixed = _fixed(_PARTIAL_BUILDER)
    assert fixed == textwrap.dedent(_PARTIAL_BUILDER).replace(
        "device=x.device, dtype=x.dtype)", "device=x.device, dtype=torch.float32)").replace(
        ".to(inv_freq.dtype) * inv_freq", ".float() * inv_freq").replace(
        "return emb.cos(), emb.sin()", "return emb.cos().to(x.dtype), emb.sin().to(x.dtype)")
    assert _found(fixed) == {}


_LAZY_CACHE_ATTRIBUTES = '''\
        import torch
        from torch import nn


        class Rotary(nn.Module):
            def __init__(self, dim=64, base=10000):
                super().__init__()
                inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
                self.register_buffer("inv_freq", inv_freq, persistent=False)
                self.max_seq_len_cached = 0
                self.cos_cached = None
                self.sin_cached = None

            def _set_cos_sin_cache(self, seq_len, device):
                self.max_seq_len_cached = seq_len
                t = torch.arange(seq_len, device=device, dtype=self.inv_freq.dtype)
                freqs = torch.einsum("i,j->ij", t, self.inv_freq)
                emb = torch.cat((freqs, freqs), dim=-1)
                self.cos_cached = emb.cos()[None, None, :, :]
                self.sin_cached = emb.sin()[None, None, :, :]

            def forward(self, x, seq_len):
                if seq_len > self.max_seq_len_cached:
                    self._set_cos_sin_cache(seq_len, x.device)
                return self.cos_cached[:, :, :seq_len, ...], self.sin_cached[:, :, :seq_len, ...]
'''


def test_a_lazy_cache_made_float32_is_returned_in_the_activations_dtype():
    """The cache builder stores the tables in plain attributes and `forward` returns slices of them uncast: once the
    phase is float32, `forward` casts what it returns to `x.dtype` (what it was when the buffer and positions were
    bfloat16), so queries rotated by it keep the model's dtype."""
    fixed = _fixed(_LAZY_CACHE_ATTRIBUTES)
    assert ("return self.cos_cached[:, :, :seq_len, ...].to(x.dtype), "
            "self.sin_cached[:, :, :seq_len, ...].to(x.dtype)") in fixed
    assert _found(fixed) == {} and _fixed(fixed) == fixed


_CACHE_GETTER = '''\
        import torch
        from torch import nn


        def _rotate_neox(x):
            x1, x2 = x.chunk(2, dim=-1)
            return torch.cat((-x2, x1), dim=-1)


        class RotaryEmbedding(nn.Module):
            def __init__(self, rotary_dim=64, max_positions=4096, base=10000.0):
                super().__init__()
                inv_freq = 1.0 / (base ** (torch.arange(0, rotary_dim, 2, dtype=torch.float) / rotary_dim))
                freqs = torch.einsum("i,j -> ij", torch.arange(max_positions, dtype=torch.float), inv_freq)
                self.register_buffer("cos_sin_cache", torch.cat((freqs.cos(), freqs.sin()), dim=-1), persistent=False)

            def get_cos_sin(self, positions):
                cos_sin = self.cos_sin_cache[positions]
                cos, sin = cos_sin.chunk(2, dim=-1)
                return cos, sin

            def forward(self, positions, query, key):
                cos, sin = self.get_cos_sin(positions)
                cos = cos.repeat(1, 2).unsqueeze(-2)
                sin = sin.repeat(1, 2).unsqueeze(-2)
                query = query * cos + _rotate_neox(query) * sin
                key = key * cos + _rotate_neox(key) * sin
                return query, key
'''


def test_kept_tables_handed_on_by_a_getter_are_cast_where_the_caller_rotates(tmp_path):
    """vLLM style: `get_cos_sin(positions)` hands slices of the kept cache on with no activation to cast them to;
    `forward` rotates the query and key by them. Keeping the cache float32 casts the tables to each rotated tensor
    there, so the bfloat16 module returns bfloat16 queries and keys, as before (measured below)."""
    fixed = _fixed(_CACHE_GETTER)
    assert "query = query * cos.to(query.dtype) + _rotate_neox(query) * sin.to(query.dtype)" in fixed
    assert "key = key * cos.to(key.dtype) + _rotate_neox(key) * sin.to(key.dtype)" in fixed
    assert _found(fixed) == {} and _fixed(fixed) == fixed
    torch = pytest.importorskip("torch")
    module = _module_from(fixed, tmp_path, "getter_fixed").RotaryEmbedding().bfloat16()
    q = torch.randn(16, 4, 64, dtype=torch.bfloat16)
    query, key = module(torch.arange(16), q, q)
    assert query.dtype == key.dtype == torch.bfloat16
    assert module.cos_sin_cache.dtype == torch.float32


def test_a_phase_cast_and_reshaped_on_its_way_to_its_name_moves_to_the_tables_safely():
    """`angles = angles.to(x.dtype).unsqueeze(1)`, read afterwards only by cos and sin: the cast moves to the tables
    (safe), as it does when nothing reshapes the phase between the cast and its name."""
    source = '''\
        import torch


        def apply_rotary(x, angles):
            angles = angles.to(x.dtype).unsqueeze(1)
            cos = torch.repeat_interleave(torch.cos(angles), 2, dim=-1)
            sin = torch.repeat_interleave(torch.sin(angles), 2, dim=-1)
            return x * cos + x * sin


        def forward(x, position_ids, dim=64):
            inv_freq = 1.0 / (10000.0 ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
            return apply_rotary(x, position_ids.float().unsqueeze(-1) * inv_freq)
        '''
    assert _found(source) == {(5, "RPL007"): "safe"}
    assert _fixed(source) == textwrap.dedent(source).replace(
        "angles = angles.to(x.dtype).unsqueeze(1)", "angles = angles.unsqueeze(1)").replace(
        "torch.cos(angles), 2", "torch.cos(angles).to(x.dtype), 2").replace(
        "torch.sin(angles), 2", "torch.sin(angles).to(x.dtype), 2")


_LONGROPE_OUTER_FACTORS = '''\
        import torch
        from torch import nn


        class LongRoPE(nn.Module):
            def __init__(self, dim=64, base=10000, short_factor=None, long_factor=None, original_max=4096):
                super().__init__()
                inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
                self.register_buffer("inv_freq", inv_freq, persistent=False)
                self.short_factor, self.long_factor, self.original_max = short_factor, long_factor, original_max

            def forward(self, x, seq_len):
                t = torch.arange(seq_len, device=x.device, dtype=self.inv_freq.dtype)
                factors = self.long_factor if seq_len > self.original_max else self.short_factor
                ext_factors = torch.tensor(factors, dtype=torch.float32, device=x.device)
                freqs = torch.mul(torch.outer(t, 1.0 / ext_factors), self.inv_freq.to(x.dtype))
                emb = torch.cat((freqs, freqs), dim=-1)
                return emb.cos().to(x.dtype), emb.sin().to(x.dtype)
'''


def test_positions_spread_over_longrope_factors_are_positions_until_the_frequencies_multiply_them():
    """MiniCPM's LongRoPE: `torch.mul(torch.outer(t, 1.0 / ext_factors), inv_freq.to(dtype))`. The outer product with
    the per-frequency factors leaves positions (in the buffer's dtype), and the elementwise product with the
    frequencies is the phase: the positions, the rounded buffer and its cast to `x.dtype` are all found and fixed in
    one pass, and the fixed file checks clean."""
    assert _found(_LONGROPE_OUTER_FACTORS) == {(13, "RPL005"): "safe", (16, "RPL002"): "safe"}
    fixed = _fixed(_LONGROPE_OUTER_FACTORS)
    assert fixed == textwrap.dedent(_LONGROPE_OUTER_FACTORS).replace(
        "from torch import nn\n", "from torch import nn\nfrom ropelint import runtime as rope_runtime\n").replace(
        'persistent=False)\n', 'persistent=False)\n'
        '        self._inv_freq_spec = (dim, base)  # ropelint: float32 rebuild of `inv_freq`\n').replace(
        "dtype=self.inv_freq.dtype)", "dtype=torch.float32)").replace(
        "self.inv_freq.to(x.dtype))", "rope_runtime.inv_freq(*self._inv_freq_spec, device=x.device))")
    assert _found(fixed) == {} and _fixed(fixed) == fixed


def test_a_kept_phase_buffer_has_its_tables_returned_in_the_activations_dtype(tmp_path):
    """RPL009: a phase buffer kept float32 gives float32 cos/sin where `model.bfloat16()` gave bfloat16 ones; forward
    returns them cast to `x.dtype` (never the phase itself), so the bfloat16 attention still runs (measured below)."""
    source = _CACHED_TABLES_RETURNED_UNCAST.replace(
        '''                self.register_buffer("cos_cached", emb.cos(), persistent=False)
                self.register_buffer("sin_cached", emb.sin(), persistent=False)''',
        '''                self.register_buffer("phase", emb, persistent=False)''').replace(
        "return self.cos_cached[:seq_len], self.sin_cached[:seq_len]",
        "phase = self.phase[:seq_len]\n                return phase.cos(), phase.sin()")
    assert _found(source) == {(12, "RPL009"): "safe"}
    fixed = _fixed(source)
    assert "return phase.cos().to(x.dtype), phase.sin().to(x.dtype)" in fixed and "phase.to(" not in fixed
    assert _found(fixed) == {} and _fixed(fixed) == fixed
    _attention_runs_in_bfloat16({"phase_buffer_original": textwrap.dedent(source), "phase_buffer_fixed": fixed},
                                tmp_path)


_PHASE_CACHED_CAST = '''\
        import torch
        from torch import nn


        class Rotary(nn.Module):
            def __init__(self, dim=32, base=10000.0):
                super().__init__()
                self.dim, self.base = dim, base
                self._freqs = None

            def _build(self, n, device, dtype):
                inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2, dtype=torch.float32) / self.dim))
                freqs = torch.outer(torch.arange(n, device=device, dtype=torch.float32), inv_freq)
                self._freqs = freqs.to(dtype)

            @property
            def cos(self):
                return self._freqs.cos()

            @property
            def sin(self):
                return torch.sin(self._freqs[:, :])

            def forward(self, x, n):
                if self._freqs is None or self._freqs.shape[0] < n or self._freqs.dtype != x.dtype:
                    self._build(n, x.device, x.dtype)
                return self.cos[:n], self.sin[:n]
'''


def test_a_phase_cached_cast_and_read_by_properties_keeps_a_float32_copy_for_the_trig(tmp_path):
    """`self._freqs = freqs.to(dtype)` read by `@property` cos/sin: the fix keeps a float32 copy beside the cached
    phase, takes the trig of that and casts the tables to the cache's dtype, so the dtype check in forward and any
    other reader see the cache as before; the bfloat16 tables become exact to one bfloat16 rounding."""
    torch = pytest.importorskip("torch")
    assert _found(_PHASE_CACHED_CAST) == {(14, "RPL007"): "safe"}
    fixed = _fixed(_PHASE_CACHED_CAST)
    assert "self._freqs_float32 = freqs\n" in fixed and "self._freqs_float32 = None\n" in fixed
    assert "return self._freqs_float32.cos().to(self._freqs.dtype)" in fixed
    assert "return torch.sin(self._freqs_float32[:, :]).to(self._freqs.dtype)" in fixed
    assert _found(fixed) == {} and _fixed(fixed) == fixed
    positions = torch.arange(8192, dtype=torch.float64)
    inv = 1.0 / (10000.0 ** (torch.arange(0, 32, 2, dtype=torch.float64) / 32))
    reference = torch.outer(positions, inv).cos()
    errors = {}
    for name, text in {"original": textwrap.dedent(_PHASE_CACHED_CAST), "fixed": fixed}.items():
        cos, _ = _module_from(text, tmp_path, f"phase_cached_{name}").Rotary()(torch.zeros(1, dtype=torch.bfloat16),
                                                                               8192)
        assert cos.dtype == torch.bfloat16
        errors[name] = float((cos.double() - reference).abs().max())
    assert errors["fixed"] < 4e-3 < 0.5 < errors["original"]  # one bfloat16 rounding of |cos| <= 1, against lost angles
    # Stored elsewhere too (a reset to another value): the copy could fall out of step, so no fix.
    reset = _PHASE_CACHED_CAST.replace("self._freqs = None", "self._freqs = torch.zeros(0, 16)")
    assert _found(reset) == {(14, "RPL007"): None}


_FREQS_MOVED_NEXT_TO_HIDDEN = '''\
        import torch
        from torch import nn


        def phase_for(freqs, positions):
            t = positions.to(device=freqs.device, dtype=torch.float32)
            return t[:, None] * freqs[None, :]


        class Model(nn.Module):
            def __init__(self, dim=32, theta=10000.0):
                super().__init__()
                self.embed = nn.Embedding(16, 4 * dim)
                self.freqs = 1.0 / (theta ** (torch.arange(0, dim, 2).float() / dim))

            def rotations(self, positions, h):
                if self.freqs.device != h.device or self.freqs.dtype != h.dtype:
                    self.freqs = self.freqs.to(h)
                return torch.polar(torch.ones(1, device=h.device), phase_for(self.freqs, positions))

            def forward(self, tokens, positions):
                return self.rotations(positions, self.embed(tokens))
'''


def test_frequencies_moved_next_to_the_hidden_states_with_to_tensor_keep_float32(tmp_path):
    """llama's `self.freqs = self.freqs.to(h)`: `Tensor.to(tensor)` takes the hidden states' dtype too, so a bfloat16
    model rounds the frequencies. The fix keeps only the move (`.to(h.device, torch.float32)`); safe because every
    read of `self.freqs` inspects it or meets float32 positions in an elementwise product (a float32 phase either
    way). Measured: the rotation's angle error at position 8191 goes from radians to float32's."""
    torch = pytest.importorskip("torch")
    assert _found(_FREQS_MOVED_NEXT_TO_HIDDEN) == {(18, "RPL006"): "safe"}
    fixed = _fixed(_FREQS_MOVED_NEXT_TO_HIDDEN)
    assert "self.freqs = self.freqs.to(h.device, torch.float32)" in fixed
    assert _found(fixed) == {} and _fixed(fixed) == fixed
    positions = torch.arange(8192)
    inv = 1.0 / (10000.0 ** (torch.arange(0, 32, 2, dtype=torch.float64) / 32))
    reference = torch.outer(positions.double(), inv)
    errors = {}
    for name, text in {"original": textwrap.dedent(_FREQS_MOVED_NEXT_TO_HIDDEN), "fixed": fixed}.items():
        model = _module_from(text, tmp_path, f"freqs_to_h_{name}").Model().bfloat16()
        rotation = model(torch.zeros(8192, dtype=torch.long), positions)
        errors[name] = float(torch.remainder(rotation.angle().double() - reference + torch.pi, 2 * torch.pi).sub(
            torch.pi).abs().max())
    assert errors["fixed"] < 1e-2 < 1.0 < errors["original"]
    # The frequencies also handed back to callers: their dtype may matter there, so the fix is unsafe.
    returned = _FREQS_MOVED_NEXT_TO_HIDDEN.replace(
        "            def forward(self, tokens, positions):",
        "            def frequencies(self):\n                return self.freqs\n\n"
        "            def forward(self, tokens, positions):")
    assert _found(returned) == {(18, "RPL006"): "unsafe"}


_REGISTRY_PICKED_ON_SELF = '''\
        import torch
        from torch import nn


        def _default_inv_freq(config, device):
            d = config.dim
            return 1.0 / (config.theta ** (torch.arange(0, d, 2, dtype=torch.int64, device=device).float() / d))


        def _linear_inv_freq(config, device):
            return _default_inv_freq(config, device) / config.factor


        INIT_FUNCTIONS = {"default": _default_inv_freq, "linear": _linear_inv_freq}


        class Rotary(nn.Module):
            def __init__(self, config, kind="default"):
                super().__init__()
                self.config = config
                self.init_fn = INIT_FUNCTIONS[kind]

            def forward(self, x, position_ids):
                inv_freq = self.init_fn(self.config, x.device).to(x)
                freqs = position_ids[..., None].float() * inv_freq
                return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)
'''


def test_a_call_through_a_registry_pick_held_on_self_returns_what_the_picked_functions_return():
    """`self.init_fn = INIT_FUNCTIONS[kind]` (a dict of this file's functions), then `self.init_fn(config,
    device).to(x)`: the call returns inverse frequencies, so their cast to the activations' dtype is RPL006, fixed
    by keeping only the move to `x`'s device. Without the registry (an unknown callable) nothing is claimed."""
    assert _found(_REGISTRY_PICKED_ON_SELF) == {(24, "RPL006"): "safe"}
    fixed = _fixed(_REGISTRY_PICKED_ON_SELF)
    assert "inv_freq = self.init_fn(self.config, x.device).to(x.device, torch.float32)" in fixed
    assert _found(fixed) == {} and _fixed(fixed) == fixed
    unknown = _REGISTRY_PICKED_ON_SELF.replace("self.init_fn = INIT_FUNCTIONS[kind]", "self.init_fn = config.init_fn")
    assert _found(unknown) == {}


_PHASE_CONVERTED_BY_APPLY = '''\
        import torch
        from torch import nn


        class Rotary(nn.Module):
            def __init__(self, dim=32, base=10000.0, n=4096):
                super().__init__()
                self.dim, self.base = dim, base
                self._freqs = None
                self._build(n)

            def _build(self, n):
                device = None if self._freqs is None else self._freqs.device
                inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2, device=device).float() / self.dim))
                freqs = torch.arange(n, device=device).float()[:, None] * inv_freq[None, :]
                if self._freqs is not None:
                    freqs = freqs.to(self._freqs)
                self._freqs = freqs

            def _apply(self, fn, recurse=True):
                if self._freqs is not None:
                    self._freqs = fn(self._freqs)
                return super()._apply(fn, recurse)

            def forward(self, x, n):
                if n > self._freqs.shape[0]:
                    self._build(n)
                return self._freqs[:n].cos().to(x.dtype), self._freqs[:n].sin().to(x.dtype)
'''


def test_a_plain_attribute_that_the_modules_apply_converts_is_state_a_module_cast_rounds(tmp_path):
    """`self._freqs = fn(self._freqs)` in the class's `_apply`: the phase follows `model.bfloat16()` as a buffer
    would (RPL009). The fix converts it through the runtime helper (moved, never rounded) and keeps the device move of
    `freqs.to(self._freqs)`; measured on the converted module, the cos error at 4095 goes from whole units to one
    bfloat16 rounding. An `_apply` that names the attribute otherwise (a rebuild) is not this, and neither is a plain
    attribute with no override."""
    torch = pytest.importorskip("torch")
    assert _found(_PHASE_CONVERTED_BY_APPLY) == {(18, "RPL009"): "safe"}
    fixed = _fixed(_PHASE_CONVERTED_BY_APPLY)
    assert "self._freqs = rope_runtime.converted_keeping_dtype(fn, self._freqs)" in fixed
    assert "freqs = freqs.to(self._freqs.device)" in fixed
    assert _found(fixed) == {} and _fixed(fixed) == fixed
    reference = torch.outer(torch.arange(4096, dtype=torch.float64),
                            1.0 / (10000.0 ** (torch.arange(0, 32, 2, dtype=torch.float64) / 32))).cos()
    errors = {}
    for name, text in {"original": textwrap.dedent(_PHASE_CONVERTED_BY_APPLY), "fixed": fixed}.items():
        rotary = _module_from(text, tmp_path, f"applied_{name}").Rotary().bfloat16()
        cos, _ = rotary(torch.zeros(1, dtype=torch.bfloat16), 4096)
        assert cos.dtype == torch.bfloat16
        errors[name] = float((cos.double() - reference).abs().max())
    assert errors["fixed"] < 4e-3 < 0.5 < errors["original"]
    rebuilt = _PHASE_CONVERTED_BY_APPLY.replace("self._freqs = fn(self._freqs)",
                                                "self._freqs = None\n                    self._build(4096)")
    assert _found(rebuilt) == {}
    plain = _PHASE_CONVERTED_BY_APPLY.replace(
        "            def _apply(self, fn, recurse=True):\n"
        "                if self._freqs is not None:\n"
        "                    self._freqs = fn(self._freqs)\n"
        "                return super()._apply(fn, recurse)\n\n", "")
    assert _found(plain) == {}


_SINCOS_GETTER_ATTENTION = '''\
        import torch
        import torch.nn.functional as F
        from torch import nn


        def create_sinusoidal_positions(num_pos, dim, base=10000.0):
            inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
            angles = torch.arange(num_pos, dtype=torch.float32)[:, None] * inv_freq[None, :]
            return torch.cat((torch.sin(angles), torch.cos(angles)), dim=1)


        def rotate_every_two(x):
            return torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)


        def apply_rotary_pos_emb(tensor, sin, cos):
            sin = torch.repeat_interleave(sin[:, :, None, :], 2, 3)
            cos = torch.repeat_interleave(cos[:, :, None, :], 2, 3)
            return (tensor * cos) + (rotate_every_two(tensor) * sin)


        class Attention(nn.Module):
            def __init__(self, hidden=256, heads=4, rotary_dim=32, n_positions=2048):
                super().__init__()
                self.heads, self.rotary_dim = heads, rotary_dim
                self.register_buffer("embed_positions", create_sinusoidal_positions(n_positions, rotary_dim),
                                     persistent=False)
                self.qkv = nn.Linear(hidden, 3 * hidden, bias=False)

            def sin_cos(self, position_ids):
                sincos = self.embed_positions[position_ids]
                sin, cos = torch.split(sincos, sincos.shape[-1] // 2, dim=-1)
                return sin, cos

            def forward(self, h):
                b, n, _ = h.shape
                q, k, v = (t.view(b, n, self.heads, -1) for t in self.qkv(h).chunk(3, dim=-1))
                sin, cos = self.sin_cos(torch.arange(n)[None])
                d = self.rotary_dim
                q = torch.cat([apply_rotary_pos_emb(q[..., :d], sin, cos), q[..., d:]], dim=-1)
                k = torch.cat([apply_rotary_pos_emb(k[..., :d], sin, cos), k[..., d:]], dim=-1)
                out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
                return out.transpose(1, 2).reshape(b, n, -1)
'''


def test_tables_kept_float32_and_handed_by_a_getter_to_a_rotating_function_are_cast_at_that_call(tmp_path):
    """GPT-J's `sin, cos = self.sin_cos(position_ids)`, then `apply_rotary_pos_emb(q_rot, sin, cos)` (a same-file
    function multiplying its tensor by the tables, casting nothing): with the table buffer kept float32 (RPL011's
    `_apply` fix), the call hands it the tables in the rotated tensor's dtype, as a module cast did before; without
    that the bfloat16 attention meets float32 queries and raises (measured below: it runs)."""
    source = textwrap.dedent(_SINCOS_GETTER_ATTENTION)
    assert _found(source) == {(26, "RPL011"): "safe"}
    fixed = _fixed(source)
    # A slice of the queries has their dtype.
    assert "apply_rotary_pos_emb(q[..., :d], sin.to(q.dtype), cos.to(q.dtype))" in fixed
    _attention_runs_in_bfloat16({"sincos_sliced_fixed": fixed}, tmp_path)
    named = source.replace("q = torch.cat([apply_rotary_pos_emb(q[..., :d], sin, cos), q[..., d:]], dim=-1)",
                           "q_rot = q[..., :d]\n        q = torch.cat([apply_rotary_pos_emb(q_rot, sin, cos), "
                           "q[..., d:]], dim=-1)").replace(
        "k = torch.cat([apply_rotary_pos_emb(k[..., :d], sin, cos), k[..., d:]], dim=-1)",
        "k_rot = k[..., :d]\n        k = torch.cat([apply_rotary_pos_emb(k_rot, sin, cos), k[..., d:]], dim=-1)")
    fixed = _fixed(named)
    assert "apply_rotary_pos_emb(q_rot, sin.to(q_rot.dtype), cos.to(q_rot.dtype))" in fixed
    assert "apply_rotary_pos_emb(k_rot, sin.to(k_rot.dtype), cos.to(k_rot.dtype))" in fixed
    assert _found(fixed) == {} and _fixed(fixed) == fixed
    _attention_runs_in_bfloat16({"sincos_getter_original": named, "sincos_getter_fixed": fixed}, tmp_path)


_TABLES_CACHED_BY_TUPLE = '''\
        import torch
        from torch import nn


        class Rotary(nn.Module):
            def __init__(self, dim=32, base=10000.0, precision=torch.float32):
                super().__init__()
                self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)))
                self.precision = precision
                self.max_seq_len_cached = None

            def forward(self, x, seq_len):
                if self.max_seq_len_cached is None or seq_len > self.max_seq_len_cached:
                    self.max_seq_len_cached = seq_len
                    t = torch.arange(seq_len, device=x.device, dtype=self.inv_freq.dtype)
                    freqs = torch.einsum("i,j->ij", t, self.inv_freq)
                    emb = torch.cat((freqs, freqs), dim=-1)
                    cos_cached = emb.cos()[:, None, :]
                    sin_cached = emb.sin()[:, None, :]
                    if self.precision == torch.bfloat16:
                        cos_cached = cos_cached.bfloat16()
                        sin_cached = sin_cached.bfloat16()
                    self.cos_cached, self.sin_cached = cos_cached, sin_cached
                return self.cos_cached[:seq_len, ...], self.sin_cached[:seq_len, ...]
'''


def test_tables_cached_through_a_tuple_and_cast_on_one_branch_are_returned_in_the_activations_dtype(tmp_path):
    """ChatGLM-6B's cache: `cos_cached = emb.cos()`, cast to bfloat16 on one branch only, stored with
    `self.cos_cached, self.sin_cached = cos_cached, sin_cached` and returned from there. The fixes make the phase
    float32, so the tables the forward returns are cast to `x.dtype` (they had the model's dtype before); measured: a
    bfloat16 model gets bfloat16 tables within one rounding of float64."""
    torch = pytest.importorskip("torch")
    fixed = _fixed(_TABLES_CACHED_BY_TUPLE)
    assert "return self.cos_cached[:seq_len, ...].to(x.dtype), self.sin_cached[:seq_len, ...].to(x.dtype)" in fixed
    assert _found(fixed) == {} and _fixed(fixed) == fixed
    reference = torch.outer(torch.arange(4096, dtype=torch.float64),
                            1.0 / (10000.0 ** (torch.arange(0, 32, 2, dtype=torch.float64) / 32))).cos()
    for name, text in {"original": textwrap.dedent(_TABLES_CACHED_BY_TUPLE), "fixed": fixed}.items():
        rotary = _module_from(text, tmp_path, f"tuple_cache_{name}").Rotary().bfloat16()
        cos, _ = rotary(torch.zeros(1, dtype=torch.bfloat16), 4096)
        error = float((cos[:, 0, :16].double() - reference).abs().max())
        assert cos.dtype == torch.bfloat16 and (error < 4e-3 if name == "fixed" else error > 0.5)


def test_a_returned_value_cast_by_its_last_assignment_needs_no_cast_and_a_reassigned_activation_gives_none():
    """Qwen2-VL's `apply_rotary_pos_emb_vision`: `tensor = tensor.float()`, ..., `output = output.to(orig_dtype)`,
    `return output`. The last assignment in line before the return casts, so the fixes making the vision rotary's
    phase float32 add nothing there (a `.to(tensor.dtype)` would have made it float32: `tensor` was rebound)."""
    source = '''\
        import torch
        from torch import nn


        def rotate_half(x):
            x1, x2 = x.chunk(2, dim=-1)
            return torch.cat((-x2, x1), dim=-1)


        def apply_rotary_pos_emb_vision(tensor, freqs):
            orig_dtype = tensor.dtype
            tensor = tensor.float()
            cos = freqs.cos().repeat(1, 2).float()
            sin = freqs.sin().repeat(1, 2).float()
            output = (tensor * cos) + (rotate_half(tensor) * sin)
            output = output.to(orig_dtype)
            return output


        class VisionRotaryEmbedding(nn.Module):
            def __init__(self, dim, theta=10000.0):
                super().__init__()
                inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float) / dim))
                self.register_buffer("inv_freq", inv_freq, persistent=False)

            def forward(self, seqlen):
                seq = torch.arange(seqlen, device=self.inv_freq.device, dtype=self.inv_freq.dtype)
                return torch.outer(seq, self.inv_freq)
        '''
    assert _found(source) == {(27, "RPL005"): "safe", (28, "RPL002"): "safe"}
    fixed = _fixed(source)
    assert "    output = output.to(orig_dtype)\n    return output\n" in fixed
    assert ".to(tensor.dtype)" not in fixed
    # Without the cast, the output would need one, and `tensor` no longer holds the caller's dtype: unsafe.
    uncast = source.replace("            output = output.to(orig_dtype)\n", "")
    assert set(_found(uncast).values()) == {"unsafe"}


def test_an_index_parameter_broadcast_against_the_frequencies_is_the_phase():
    """`frame_idx[:, None] * self.inv_freq[None, :]` (int64 frame numbers of a video motion module, named like an
    index): the outer product by broadcasting is the phase, so the rounded buffer is RPL002. A plain integer operand
    without the trailing axis is no coordinate grid, and stays unclaimed."""
    source = '''\
        import torch
        from torch import nn


        class TemporalRotary(nn.Module):
            def __init__(self, dim, base=10000.0):
                super().__init__()
                inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
                self.register_buffer("inv_freq", inv_freq, persistent=False)

            def forward(self, frame_idx):
                freqs = frame_idx[:, None] * self.inv_freq[None, :]
                emb = torch.cat((freqs, freqs), dim=-1)
                return emb.cos(), emb.sin()
        '''
    assert _found(source) == {(12, "RPL002"): "safe"}
    fixed = _fixed(source)
    assert "frame_idx[:, None] * rope_runtime.inv_freq(" in fixed and _found(fixed) == {}
    assert _found(source.replace("frame_idx[:, None] * self.inv_freq[None, :]",
                                 "frame_idx * self.inv_freq[None, :]")) == {}


def test_a_rotary_built_on_a_branch_of_init_is_seen_through_the_text_triage():
    """`if use_rope: self.rotary = RotaryPhase(...)` in an attention's `__init__` (ALiBi on the other layers): the
    triage keeps that `__init__` because it builds a kept rotary class, so `self.rotary(n, q.device).type_as(q)`
    is the phase cast before `rotary_cos_sin` takes its cos/sin (RPL007), as in a whole-file parse."""
    source = '''\
        import torch
        from torch import nn


        class RotaryPhase(nn.Module):
            def __init__(self, head_dim, theta):
                super().__init__()
                self.inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))

            def forward(self, seq_len, device=None):
                t = torch.arange(seq_len, device=device, dtype=torch.float32)
                return torch.outer(t, self.inv_freq.to(device))


        def rotary_cos_sin(freqs):
            return torch.cos(freqs), torch.sin(freqs)


        class Attention(nn.Module):
            def __init__(self, head_dim, theta, use_rope):
                super().__init__()
                self.proj = nn.Linear(head_dim, head_dim)
                if use_rope:
                    self.rotary = RotaryPhase(head_dim, theta)
                else:
                    self.slopes = [0.5, 0.25]

            def rope_cos_sin(self, q, seq_len):
                freqs = self.rotary(seq_len, q.device).type_as(q)
                return rotary_cos_sin(freqs)
        '''
    assert set(_found(source)) == {(29, "RPL007")}
    whole = check_text("rotary.py", textwrap.dedent(source), ALL, prefilter=False)
    assert {(d.line, d.code) for d in whole.diagnostics} == {(29, "RPL007")}


def test_a_cast_phase_handed_through_a_local_to_a_helper_returning_its_tables_is_fixed_per_table():
    """`freqs = self.rotary(n, q.device).type_as(q)`, then `return rotary_cos_sin(freqs)` (a helper returning
    `torch.cos(freqs), torch.sin(freqs)`): the local goes only to that call, so the cast leaves the phase and each
    returned table takes it instead (`tuple(table.type_as(q) for table in ...)`); measured: bfloat16 tables within
    one rounding of float64 where the cast phase was off by whole units."""
    torch = pytest.importorskip("torch")
    source = '''\
        import torch
        from torch import nn


        def rotary_cos_sin(freqs):
            return torch.cos(freqs), torch.sin(freqs)


        class Attention(nn.Module):
            def __init__(self, head_dim=32, theta=10000.0):
                super().__init__()
                self.inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))

            def rope_cos_sin(self, q, seq_len):
                t = torch.arange(seq_len, device=q.device, dtype=torch.float32)
                freqs = torch.outer(t, self.inv_freq).type_as(q)
                return rotary_cos_sin(freqs)
        '''
    assert _found(source) == {(16, "RPL007"): "safe"}
    fixed = _fixed(source)
    assert "freqs = torch.outer(t, self.inv_freq)\n" in fixed
    assert "return tuple(table.type_as(q) for table in rotary_cos_sin(freqs))" in fixed
    assert _found(fixed) == {} and _fixed(fixed) == fixed
    reference = torch.outer(torch.arange(4096, dtype=torch.float64),
                            1.0 / (10000.0 ** (torch.arange(0, 32, 2, dtype=torch.float64) / 32))).cos()
    namespace: dict = {}
    for name, text in {"original": textwrap.dedent(source), "fixed": fixed}.items():
        exec(compile(text, f"<{name}>", "exec"), namespace)
        cos, _ = namespace["Attention"]().rope_cos_sin(torch.zeros(1, dtype=torch.bfloat16), 4096)
        error = float((cos.double() - reference).abs().max())
        assert cos.dtype == torch.bfloat16 and (error < 4e-3 if name == "fixed" else error > 0.5)
    # Read again after the call: other readers would see float32, so no fix.
    reread = source.replace("return rotary_cos_sin(freqs)", "self.last = freqs\n                return rotary_cos_sin(freqs)")
    assert _found(reread) == {(16, "RPL007"): None}


def test_a_kept_phase_buffer_refilled_with_a_cast_on_another_branch_loses_both_casts():
    """NeMo's `create_pe`: `self.pe = freqs.to(dtype)` when the buffer exists, `register_buffer("pe",
    freqs.to(dtype))` when not. Keeping `pe` float32 through module casts (RPL009's `_apply` fix) must drop the cast
    on both branches, or a longer input refills it rounded."""
    source = '''\
        import torch
        from torch import nn


        class Rotary(nn.Module):
            def __init__(self, d_head, base=10000.0):
                super().__init__()
                self.d_head, self.base = d_head, base

            def create_pe(self, positions, dtype):
                inv_freq = 1.0 / (self.base ** (torch.arange(0, self.d_head, 2, dtype=torch.float32) / self.d_head))
                freqs = positions.unsqueeze(1) * inv_freq.unsqueeze(0)
                if hasattr(self, "pe"):
                    self.pe = freqs.to(dtype)
                else:
                    self.register_buffer("pe", freqs.to(dtype), persistent=False)

            def forward(self, x):
                n = x.size(1)
                if not hasattr(self, "pe") or self.pe.size(0) < n:
                    self.create_pe(torch.arange(n, dtype=torch.float32), x.dtype)
                phase = self.pe[:n]
                return phase.cos().to(x.dtype), phase.sin().to(x.dtype)
        '''
    assert _found(source) == {(16, "RPL009"): "safe"}
    fixed = _fixed(source)
    assert "self.pe = freqs\n" in fixed and 'self.register_buffer("pe", freqs, persistent=False)' in fixed
    assert "freqs.to(dtype)" not in fixed and _found(fixed) == {} and _fixed(fixed) == fixed


def test_a_parameter_named_tokens_that_is_multiplied_by_the_tables_is_an_activation():
    """Allegro's `apply_rope1d(self, tokens, pos1d, ...)` rotates `tokens * cos + rotate_half(tokens) * sin`: the
    name says token ids, the use says activations, so `tokens.dtype` handed to the table builder is no integer dtype
    (no RPL001). Token ids that are not rotated (`input_ids`) keep their integer reading."""
    source = '''\
        import torch
        import torch.nn.functional as F
        from torch import nn


        class RoPE1D(nn.Module):
            def __init__(self, base=10000.0):
                super().__init__()
                self.base = base

            def get_cos_sin(self, d, seq_len, device, dtype):
                inv_freq = 1.0 / (self.base ** (torch.arange(0, d, 2, dtype=torch.float32, device=device) / d))
                t = torch.arange(seq_len, device=device, dtype=torch.float32)
                freqs = torch.cat((torch.outer(t, inv_freq),) * 2, dim=-1)
                return freqs.cos().to(dtype), freqs.sin().to(dtype)

            def forward(self, tokens, pos1d, seq_len):
                cos, sin = self.get_cos_sin(tokens.shape[-1], seq_len, pos1d.device, tokens.dtype)
                cos, sin = F.embedding(pos1d, cos), F.embedding(pos1d, sin)
                return tokens * cos + torch.cat((-tokens[..., 1:], tokens[..., :1]), dim=-1) * sin
        '''
    assert _found(source) == {}
    ids = source.replace("return tokens * cos +", "return cos +")
    assert _found(ids) == {(18, "RPL001"): "safe"}



def test_a_dtype_clamped_to_at_least_float32_is_float32():
    """timm's `_freq_buffer_dtype`: `torch.float32` where `finfo(dtype).bits < 32`, the dtype itself otherwise, so
    never a 16-bit one; positions built in it are float32. A clamp testing one 16-bit dtype lets bfloat16 through."""
    source = '''\
        import torch


        def _freq_buffer_dtype(dtype):
            if dtype.is_floating_point and torch.finfo(dtype).bits < 32:
                return torch.float32
            return dtype


        def rope_tables(n, dim, dtype):
            positions = torch.arange(n, dtype=_freq_buffer_dtype(dtype))
            inv_freq = 1.0 / (10000.0 ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
            angles = positions[:, None] * inv_freq
            return angles.cos().to(dtype), angles.sin().to(dtype)
        '''
    assert _found(source) == {}
    assert _found(source.replace("torch.finfo(dtype).bits < 32", "dtype == torch.float16")) == {(11, "RPL005"): "safe"}


def test_a_ramp_assigned_to_a_positions_name_is_still_an_exponent():
    """DeepSeek-style YaRN: `pos = torch.arange(0, dim, 2) / dim` then `1.0 / (base ** pos)`: the name says
    positions, but a range divided by its size in an exponent is the frequency ramp, so the phase built from it is
    found (here cast to `q.dtype` before cos/sin: RPL007)."""
    source = '''\
        import torch
        import torch.nn as nn


        class YarnRotary(nn.Module):
            def __init__(self, dim, base=10000.0, factor=4.0):
                super().__init__()
                self.dim, self.base, self.factor = dim, base, factor

            def _inv_freq(self, device=None):
                pos = torch.arange(0, self.dim, 2, dtype=torch.float32, device=device) / self.dim
                return 1.0 / (self.factor * self.base ** pos)

            def forward(self, q, position_ids):
                freqs = position_ids[..., None].float() * self._inv_freq(q.device)
                emb = torch.cat((freqs, freqs), dim=-1).to(q.dtype)
                return emb.cos(), emb.sin()
        '''
    assert _found(source) == {(16, "RPL007"): "safe"}


def test_frequency_bases_in_a_buffer_handed_to_a_builder_are_rounded_state():
    """Per-head RoPE bases registered as a buffer and handed to a function that raises them to the frequency ramp
    (`thetas[:, None] ** exps`): `model.bfloat16()` rounds 10000 to 9984 before the power. RPL002, kept float32."""
    source = '''\
        import torch
        import torch.nn as nn


        def head_freqs_cis(head_dim, positions, thetas):
            exps = torch.arange(0, head_dim, 2, device=thetas.device).float() / head_dim
            freqs = 1.0 / (thetas[:, None] ** exps[None, :])
            angles = positions.float()[None, :, None] * freqs[:, None, :]
            return torch.polar(torch.ones_like(angles), angles)


        class Attention(nn.Module):
            def __init__(self, n_heads=4, head_dim=32):
                super().__init__()
                self.head_dim = head_dim
                self.register_buffer("head_thetas", 10000.0 * 2.0 ** torch.arange(n_heads, dtype=torch.float32))

            def freqs_cis(self, positions):
                return head_freqs_cis(self.head_dim, positions, self.head_thetas)
        '''
    assert _found(source) == {(19, "RPL002"): "safe"}
    assert '("head_thetas",)' in _fixed(source)
    torch = pytest.importorskip("torch")
    assert torch.tensor(10000.0).bfloat16().item() == 9984.0


def _cos_reference(torch, positions, dim: int = 64, base: float = 10000.0):  # type: ignore[no-untyped-def]
    """float64 cos of the standard phase at ``positions``, [len(positions), dim // 2]."""
    inv_freq = 1.0 / base ** (torch.arange(0, dim, 2).double() / dim)
    return (positions.double()[:, None] * inv_freq).cos()


_LOOP_REGISTERED = '''\
import torch
from torch import nn


class Rotary(nn.Module):
    def __init__(self, dim=64, max_positions=16384, base=10000.0):
        super().__init__()
        self.dim, self.max_positions, self.base = dim, max_positions, base
        for name, value in self._make_buffers().items():
            self.register_buffer(name, value, persistent=False)

    def _make_buffers(self, device=None):
        inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2, device=device).float() / self.dim))
        positions = torch.arange(self.max_positions, device=device, dtype=torch.float32)
        return {"inv_freq": inv_freq, "positions": positions}

    def forward(self, x, position_ids):
        t = self.positions[position_ids].float()
        freqs = t[..., None] * self.inv_freq.float()
        return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)
'''


def test_buffers_registered_in_a_loop_over_a_returned_dict_are_module_state(tmp_path):
    """Round 50: `for name, value in self._make_buffers().items(): self.register_buffer(name, value)` registers
    each key of the dict the method returns: a float position ramp (RPL005) and inverse frequencies (RPL002) that
    `module.bfloat16()` rounds. Both safe; the fixed module keeps them float32 through the cast (measured:
    position 8193 comes back exact, the original's bfloat16 ramp holds 8192 there)."""
    torch = pytest.importorskip("torch")
    assert _found(_LOOP_REGISTERED) == {(18, "RPL005"): "safe", (19, "RPL002"): "safe"}
    fixed = _fixed(_LOOP_REGISTERED)
    assert _found(fixed) == {} and _fixed(fixed) == fixed
    positions = torch.tensor([8193, 12001])
    x = torch.zeros(1, dtype=torch.bfloat16)
    original = _module_from(_LOOP_REGISTERED, tmp_path, "loop_original").Rotary().bfloat16()
    assert original.positions[8193].item() == 8192.0
    rotary = _module_from(fixed, tmp_path, "loop_fixed").Rotary().bfloat16()
    cos, _ = rotary(x, positions)
    ref = _cos_reference(torch, positions)
    assert (cos.double() - ref).abs().max().item() < 8e-3
    cos_original, _ = original(x, positions)
    assert (cos_original.double() - ref).abs().max().item() > 0.1


_CONCATENATED_CACHE = '''\
import torch
from torch import nn


class Rotary(nn.Module):
    def __init__(self, dim=64, max_positions=16384, base=10000.0):
        super().__init__()
        self.dim, self.max_positions, self.base = dim, max_positions, base
        self.cos_sin_cache = None

    def _build(self, dtype, device):
        inv_freq = (1.0 / (self.base ** (torch.arange(0, self.dim, 2, dtype=torch.float) / self.dim))).to(
            device=device, dtype=dtype)
        t = torch.arange(self.max_positions, device=device, dtype=dtype)
        freqs = torch.einsum("i,j -> ij", t, inv_freq)
        cos = freqs.cos()
        sin = freqs.sin()
        self.cos_sin_cache = torch.cat((cos, sin), dim=-1)

    def forward(self, positions, query):
        if self.cos_sin_cache is None or self.cos_sin_cache.dtype != query.dtype:
            self._build(query.dtype, query.device)
        return torch.index_select(self.cos_sin_cache, 0, positions).chunk(2, dim=-1)
'''


def test_a_concatenated_cache_built_in_the_callers_dtype_is_stored_in_it(tmp_path):
    """Round 50 (vLLM's lazy `cos_sin_cache`): frequencies and positions built in the query's dtype, then
    `self.cos_sin_cache = torch.cat((cos, sin), dim=-1)` of tables taken on earlier lines. Building them in float32
    is safe when the stored cache is cast back to that dtype (`torch.cat(...).to(dtype)`): the cache still matches
    the queries' dtype (so the rebuild check holds) and its values are bfloat16 roundings of exact tables."""
    torch = pytest.importorskip("torch")
    assert _found(_CONCATENATED_CACHE) == {(12, "RPL006"): "safe", (14, "RPL005"): "safe"}
    fixed = _fixed(_CONCATENATED_CACHE)
    assert "self.cos_sin_cache = torch.cat((cos, sin), dim=-1).to(dtype)" in fixed
    assert _found(fixed) == {} and _fixed(fixed) == fixed
    positions = torch.tensor([8193, 12001])
    query = torch.zeros(1, dtype=torch.bfloat16)
    ref = _cos_reference(torch, positions)
    cos, _ = _module_from(fixed, tmp_path, "cat_fixed").Rotary()(positions, query)
    assert cos.dtype == torch.bfloat16 and (cos.double() - ref).abs().max().item() < 8e-3
    cos_original, _ = _module_from(_CONCATENATED_CACHE, tmp_path, "cat_original").Rotary()(positions, query)
    assert (cos_original.double() - ref).abs().max().item() > 0.1


_DYNAMIC_REBUILD = '''\
import torch
from torch import nn


class Rotary(nn.Module):
    def __init__(self, dim=64, max_positions=2048, base=10000.0):
        super().__init__()
        self.dim, self.base, self.max_positions = dim, base, max_positions
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x, seq_len):
        if seq_len > self.max_positions:
            base = self.base * (seq_len / self.max_positions) ** (self.dim / (self.dim - 2))
            inv_freq = 1.0 / (base ** (torch.arange(0, self.dim, 2, device=x.device, dtype=x.dtype) / self.dim))
            self.register_buffer("inv_freq", inv_freq, persistent=False)
        t = torch.arange(seq_len, device=x.device, dtype=torch.float32)
        freqs = t[:, None] * self.inv_freq.float()[None, :]
        return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)
'''


def test_state_rebuilt_in_the_activations_dtype_is_restored_in_the_dtype_construction_gives_it():
    """Round 50 (Falcon's dynamic NTK): `inv_freq` rebuilt with `dtype=x.dtype` past the trained length and
    re-registered under the name `__init__` registers in float32. Building it in float32 is safe: the buffer gets
    the dtype the module's own construction gives it, so nothing that reads it can depend on the 16-bit one."""
    found = _found(_DYNAMIC_REBUILD)
    assert found[(15, "RPL006")] == "safe"
    fixed = _fixed(_DYNAMIC_REBUILD)
    assert "dtype=torch.float32) / self.dim))" in fixed and _found(fixed) == {} and _fixed(fixed) == fixed
    # Registered in bfloat16 by __init__ as well: nothing says float32 is what the state holds, so unsafe.
    in_init_too = _DYNAMIC_REBUILD.replace('self.register_buffer("inv_freq", inv_freq, persistent=False)\n\n',
                                           'self.register_buffer("inv_freq", inv_freq.bfloat16(), persistent=False)'
                                           '\n\n', 1)
    assert in_init_too != _DYNAMIC_REBUILD and _found(in_init_too)[(15, "RPL006")] == "unsafe"


_HANDED_TO_OWN_FORWARD = '''\
import torch
from torch import nn


class Rotary(nn.Module):
    def __init__(self, dim=64, theta=10000.0, interpolate_factor=2.0):
        super().__init__()
        self.dim, self.theta, self.interpolate_factor = dim, theta, interpolate_factor

    def positions_to_freqs(self, pos, dtype):
        return self.forward(pos.type(dtype) / self.interpolate_factor)

    def forward(self, t):
        freqs = 1.0 / (self.theta ** (torch.arange(0, self.dim, 2, device=t.device).float() / self.dim))
        return t.float()[..., None] * freqs
'''


def test_positions_cast_straight_into_the_classes_own_phase_method_are_safe_to_make_float32():
    """Round 50 (lucidrains' `positions_to_freqs`): `self.forward(pos.type(dtype) / factor)` hands the cast
    positions, scaled by a number, straight to the class's own method whose parameter only enters its phase: the
    float32 cast is safe (it was unsafe as "values leaving the function"). Handed to a method that also returns
    them, it stays unsafe."""
    assert _found(_HANDED_TO_OWN_FORWARD) == {(11, "RPL005"): "safe"}
    fixed = _fixed(_HANDED_TO_OWN_FORWARD)
    assert "self.forward(pos.float() / self.interpolate_factor)" in fixed
    assert _found(fixed) == {} and _fixed(fixed) == fixed
    leaking = _HANDED_TO_OWN_FORWARD.replace("return t.float()[..., None] * freqs", "return t, t.float()[..., None] * freqs")
    assert _found(leaking) == {(11, "RPL005"): "unsafe"}


_PHASE_HANDED_ON = '''\
import torch
from torch import nn


class RotaryEmbedding(nn.Module):
    def __init__(self, dim=64, base=10000.0):
        super().__init__()
        self.inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))

    def forward(self, max_seq_len, dtype=torch.float32):
        inv_freq = self.inv_freq.to(dtype)
        seq = torch.arange(max_seq_len, device=inv_freq.device, dtype=dtype)
        freqs = torch.outer(seq, inv_freq)
        return torch.cat((freqs, freqs), dim=-1)[:, None, None, :]


def _rotate_half(x):
    x1, x2 = torch.chunk(x, 2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(t, freqs):
    cos_ = torch.cos(freqs).to(t.dtype)
    sin_ = torch.sin(freqs).to(t.dtype)
    return (t * cos_) + (_rotate_half(t) * sin_)


class SelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.rotary_pos_emb = RotaryEmbedding()

    def forward(self, q, k):
        rotary = self.rotary_pos_emb(q.shape[0], dtype=q.dtype)
        return apply_rotary_pos_emb(q, rotary), apply_rotary_pos_emb(k, rotary)
'''


def test_a_phase_built_in_the_callers_dtype_and_handed_to_a_casting_helper_is_safe_to_make_float32():
    """Round 51 (Megatron's `Float16Module` path): the rotary builds frequencies and positions in the `dtype` its
    caller passes and returns the phase; the caller hands it to `apply_rotary_pos_emb`, which casts both tables to
    the queries' dtype. A float32 phase changes no dtype that leaves the helper, so both fixes are safe; with a
    helper that returns its tables uncast they stay unsafe."""
    assert _found(_PHASE_HANDED_ON) == {(11, "RPL006"): "safe", (12, "RPL005"): "safe"}
    fixed = _fixed(_PHASE_HANDED_ON)
    assert _found(fixed) == {} and _fixed(fixed) == fixed
    uncast = _PHASE_HANDED_ON.replace("torch.cos(freqs).to(t.dtype)", "torch.cos(freqs)").replace(
        "torch.sin(freqs).to(t.dtype)", "torch.sin(freqs)")
    assert set(_found(uncast).values()) == {"unsafe"}


_NUMPY_BUILT = '''\
import math

import numpy as np
import torch
from torch import nn


def inv_timescales_np(n, min_timescale=1.0, max_timescale=1.0e4):
    log_timescale_increment = math.log(max_timescale / min_timescale) / max(n - 1, 1)
    return min_timescale * np.exp(np.arange(n, dtype=np.float64) * -log_timescale_increment)


class TimingSignal(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.register_buffer("inv_timescales", torch.tensor(inv_timescales_np(dim // 2), dtype=torch.float32))

    def forward(self, position):
        scaled_time = position.float()[..., None] * self.inv_timescales
        return torch.sin(scaled_time), torch.cos(scaled_time)


class AngleTable(nn.Module):
    def __init__(self, dim=64, theta=10000.0, max_seq_len=8192):
        super().__init__()
        freqs = 1.0 / (theta ** (np.arange(0, dim, 2)[: dim // 2].astype(np.float64) / dim))
        angles = np.einsum("i,j->ij", np.arange(max_seq_len, dtype=np.float64), freqs)
        self.register_buffer("cached_freqs", torch.from_numpy(angles).float(), persistent=False)

    def forward(self, positions):
        freqs = self.cached_freqs[positions]
        return freqs.cos(), freqs.sin()


def make_timescale(head_dim, max_wavelength=10000.0):
    return max_wavelength ** (2 * np.arange(0, head_dim // 2) / head_dim)


def apply_rope(inputs, positions, timescale):
    sinusoid = positions[..., None] / timescale[None, :]
    return torch.sin(sinusoid).to(inputs.dtype), torch.cos(sinusoid).to(inputs.dtype)


class Wavelengths(nn.Module):
    def __init__(self, head_dim=64):
        super().__init__()
        self.register_buffer("timescale", torch.tensor(make_timescale(head_dim)), persistent=False)

    def forward(self, x, positions):
        return apply_rope(x, positions, self.timescale)
'''


def test_frequencies_and_phases_built_in_numpy_are_module_state_like_any_other():
    """Round 51 (JAX and numpy ports): Lingvo's `np.exp(np.arange(n) * -log_timescale_increment)` is a frequency
    ramp under any name (`inv_timescales`), `np.einsum("i,j->ij", t, freqs)` of numpy frequencies (after
    `.astype(np.float64)`) is a phase, and Gemma's JAX `positions / timescale` divides by wavelengths handed in as
    `timescale`: stored as buffers, module casts round all three (RPL002, RPL009, RPL002). Safe fixes keep them as
    built, and the fixed file has nothing left to report."""
    assert _found(_NUMPY_BUILT) == {(19, "RPL002"): "safe", (28, "RPL009"): "safe", (50, "RPL002"): "safe"}
    fixed = _fixed(_NUMPY_BUILT)
    assert _found(fixed) == {} and _fixed(fixed) == fixed


_NUMPY_ROWS_IN_A_DTYPE = '''\
import numpy as np
import torch
from torch import nn


class Rotary(nn.Module):
    def __init__(self, dim=64, base=10000.0, n_positions=4096):
        super().__init__()
        self._theta = [1.0 / (base ** (i / dim)) for i in range(0, dim, 2)]
        inv_freq = 1.0 / (base ** (np.arange(0, dim, 2) / dim))
        self.sinusoid_inp = np.einsum("i , j -> i j", np.arange(n_positions), inv_freq)

    def get_sin_cos(self, position_ids, like):
        rows = self.sinusoid_inp[position_ids.cpu().numpy()]
        sinusoid_inp = torch.as_tensor(rows, dtype=like.dtype, device=like.device)
        return torch.sin(sinusoid_inp), torch.cos(sinusoid_inp)

    def cache(self, seq_len, dtype, device):
        theta = torch.tensor(self._theta, dtype=dtype, device=device)
        idx_theta = torch.outer(torch.arange(seq_len, dtype=torch.float, device=device), theta).float()
        return torch.stack([torch.cos(idx_theta), torch.sin(idx_theta)], dim=-1)
'''


def test_numpy_phase_rows_and_python_frequency_lists_made_tensors_in_a_16_bit_dtype():
    """Round 51: GPT-J's numpy phase rows made a tensor in the activations' dtype before sin/cos
    (`torch.as_tensor(rows, dtype=like.dtype)`, RPL007: the fix makes them float32 and casts the tables), and
    ChatGLM's Python list of frequencies made a tensor in a `dtype` the caller passes (RPL006, safe: the phase is
    widened before cos/sin)."""
    assert _found(_NUMPY_ROWS_IN_A_DTYPE) == {(15, "RPL007"): "safe", (19, "RPL006"): "safe"}
    fixed = _fixed(_NUMPY_ROWS_IN_A_DTYPE)
    assert "torch.as_tensor(rows, dtype=torch.float32, device=like.device)" in fixed
    assert "return torch.sin(sinusoid_inp).to(like.dtype), torch.cos(sinusoid_inp).to(like.dtype)" in fixed
    assert "torch.tensor(self._theta, dtype=torch.float32, device=device)" in fixed
    assert _found(fixed) == {} and _fixed(fixed) == fixed


_UTILITY_HELPERS = '''\
from typing import Optional

import torch
from torch import nn


def compute_dtype(x):
    return x.dtype if x.is_floating_point() else torch.float32


def inv_freq_for(dim, base, dtype: Optional[torch.dtype] = None):
    dtype = torch.float32 if dtype is None else dtype
    return 1.0 / (base ** (torch.arange(0, dim, 2).to(dtype) / dim))


def make_positions(position_ids):
    return torch.Tensor.to(position_ids, compute_dtype(position_ids))


def phase_of(positions, inv_freq, fn=torch.outer):
    return fn(positions, inv_freq)


class Rotary(nn.Module):
    def __init__(self, dim=64, max_positions=4096, base=10000.0):
        super().__init__()
        self.register_buffer("angles", phase_of(torch.arange(max_positions).float(), inv_freq_for(dim, base)),
                             persistent=False)

    def forward(self, x, position_ids):
        phase = self.angles[position_ids]
        return phase.cos().to(x.dtype), phase.sin().to(x.dtype)

    def tables(self, x, position_ids):
        phase = phase_of(make_positions(position_ids), inv_freq_for(x.shape[-1], 10000.0))
        return phase.cos().to(x.dtype), phase.sin().to(x.dtype)
'''


def test_helpers_passing_functions_and_choosing_dtypes_are_followed():
    """Round 52 (rotary utilities as small helpers): `phase_of(p, f, fn=torch.outer)` calls its default, so the
    angle buffer it builds is a phase a module cast rounds (RPL009); `inv_freq_for(..., dtype=None)` that turns None
    into float32 first is float32 where the file leaves `dtype` out, and `compute_dtype(position_ids)` (the ids'
    dtype if floating, else float32) gives float32 for integer ids: neither is reported. Passing bfloat16 to the
    builder is (RPL006)."""
    assert _found(_UTILITY_HELPERS) == {(27, "RPL009"): "safe"}
    fixed = _fixed(_UTILITY_HELPERS)
    assert _found(fixed) == {} and _fixed(fixed) == fixed
    passed = _UTILITY_HELPERS.replace("inv_freq_for(x.shape[-1], 10000.0)",
                                      "inv_freq_for(x.shape[-1], 10000.0, torch.bfloat16)")
    assert (13, "RPL006") in _found(passed)


def test_positions_built_in_float16_stay_rounded_through_to_float32():
    """Round 52: `t = arange(n, dtype=float16)` (imported from torch) then `outer(t.to(float32), inv)`: float16
    rounds positions above 2048 (2049 -> 2048, measured) and `.to(float32)` restores the dtype, not the digits, as
    `.float()` does not: RPL005 at the arange, safe."""
    torch = pytest.importorskip("torch")
    assert torch.arange(2050, dtype=torch.float16)[2049].item() == 2048.0
    source = '''\
        from torch import arange, float16, float32, outer


        def tables(seq_len, dim, base):
            inv = 1.0 / (base ** (arange(0, dim, 2, dtype=float32) / dim))
            t = arange(seq_len, dtype=float16)
            ph = outer(t.to(float32), inv)
            return ph.cos(), ph.sin()
        '''
    assert _found(source) == {(6, "RPL005"): "safe"}
    fixed = _fixed(source)
    assert "t = arange(seq_len, dtype=torch.float32)" in fixed and "\nimport torch\n" in fixed
    assert _found(fixed) == {} and _fixed(fixed) == fixed


def test_a_parameter_named_phase_is_the_phase_a_helper_casts_before_cos_sin():
    """Round 52: `tables_from_phase(phase, dtype=None)` casts its `phase` with the unbound
    `torch.Tensor.to(phase, dtype)` to the dtype its caller picks (the activations') before cos/sin: RPL007, whose
    fix takes cos/sin in float32 and casts the tables."""
    source = '''\
        import torch


        def tables_from_phase(phase, dtype=None):
            dtype = dtype if dtype is not None else phase.dtype
            phase = torch.Tensor.to(phase, dtype)
            emb = torch.cat((phase, phase), dim=-1)
            return emb.cos(), emb.sin()


        def rotary(x, position_ids):
            inv_freq = 1.0 / 10000.0 ** (torch.arange(0, 64, 2).float() / 64)
            return tables_from_phase(position_ids.float()[..., None] * inv_freq, dtype=x.dtype)
        '''
    assert _found(source) == {(6, "RPL007"): "safe"}
    fixed = _fixed(source)
    assert "emb.cos().to(dtype), emb.sin().to(dtype)" in fixed
    assert _found(fixed) == {} and _fixed(fixed) == fixed


def test_positions_cast_unbound_to_a_dtype_the_caller_passes_are_made_float32():
    """Round 52: `make_positions(position_ids, dtype)` returning `torch.Tensor.to(position_ids, dtype)` (the method
    called unbound), called with `dtype=x.dtype`: RPL005 at the cast, fixed safely by passing `torch.float32` at the
    call (the helper's default stays) or, as here where the helper's result only reaches this file's phase, in the
    helper itself (`torch.Tensor.to(position_ids, torch.float32)`)."""
    source = '''\
        import torch


        def make_positions(position_ids, dtype=None):
            dtype = dtype or torch.float32
            return torch.Tensor.to(position_ids, dtype)


        def tables(x, position_ids):
            inv_freq = 1.0 / 10000.0 ** (torch.arange(0, 64, 2, dtype=torch.float32) / 64)
            phase = make_positions(position_ids, dtype=x.dtype)[..., None] * inv_freq
            return phase.cos().to(x.dtype), phase.sin().to(x.dtype)
        '''
    assert _found(source) == {(6, "RPL005"): "safe"}
    fixed = _fixed(source)
    assert "return torch.Tensor.to(position_ids, torch.float32)" in fixed
    assert _found(fixed) == {} and _fixed(fixed) == fixed


def test_frequencies_whose_dtype_only_feeds_this_files_helpers_are_made_float32():
    """Round 52: `inv_freq = inv_freq_for(dim, base, dtype=x.dtype)` (a public builder whose own default is float32,
    its cast spelled `torch.Tensor.to(steps, dtype)`), then `make_positions(ids, dtype=inv_freq.dtype)`: the
    frequencies' dtype only reaches this file's helpers, so making them float32 is safe (RPL006, in the builder
    here, where its result only reaches this file's phase), and so is the positions' fix."""
    source = '''\
        import torch


        def inv_freq_for(dim, base, dtype=None):
            dtype = dtype or torch.float32
            steps = torch.arange(0, dim, 2, dtype=torch.int64)
            return 1.0 / (base ** torch.Tensor.to(steps, dtype).div(dim))


        def make_positions(position_ids, dtype=None):
            dtype = dtype or torch.float32
            return torch.Tensor.to(position_ids, dtype)


        def tables(x, position_ids):
            inv_freq = inv_freq_for(64, 10000.0, dtype=x.dtype)
            pos = make_positions(position_ids, dtype=inv_freq.dtype)
            phase = pos.unsqueeze(-1) * inv_freq
            return phase.cos().to(x.dtype), phase.sin().to(x.dtype)
        '''
    found = _found(source)
    assert found[(7, "RPL006")] == "safe" and set(found.values()) == {"safe"}
    fixed = _fixed(source)
    assert "torch.Tensor.to(steps, torch.float32)" in fixed and "torch.Tensor.to(position_ids, torch.float32)" in fixed
    assert _found(fixed) == {} and _fixed(fixed) == fixed


def test_a_cast_moving_to_a_device_then_a_dtype_keeps_the_move():
    """Round 52 (Cohere-style `self.inv_freq.to(x.device, x.dtype)` inside an einsum): the device comes first and the
    dtype second, so RPL006's fix replaces the second (`.to(x.device, torch.float32)`); replacing the first wrote
    `.to(torch.float32, x.dtype)`, which raises."""
    source = '''\
        import torch
        from torch import nn


        class Rotary(nn.Module):
            def __init__(self, dim=64, base=10000.0):
                super().__init__()
                self.inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))

            def forward(self, x, position_ids):
                freqs = torch.einsum("bs,d->bsd", position_ids.to(x.dtype), self.inv_freq.to(x.device, x.dtype))
                emb = torch.repeat_interleave(freqs, 2, dim=-1)
                return emb.cos(), emb.sin()
        '''
    assert _found(source) == {(11, "RPL005"): "safe", (11, "RPL006"): "safe"}
    fixed = _fixed(source)
    assert "self.inv_freq.to(x.device, torch.float32)" in fixed
    assert _found(fixed) == {} and _fixed(fixed) == fixed


def test_an_integer_fallback_is_unsafe_to_make_float32_where_unparsed_holders_leave_the_dtype_out():
    """Round 52 (a BERT-style embedder): `target_dtype = dtype if dtype is not None else position_ids.dtype` in a
    rotary whose holder, in code the prefilter does not parse, calls `self.rotary_emb(position_ids)`. Falling back to
    float32 would hand float32 tables to `q * cos` where the integer ones kept the queries' bfloat16, and the
    attention would raise on mixed dtypes: the fix is offered as unsafe. A holder passing `dtype=` keeps it safe."""
    source = '''\
        import torch
        from torch import nn


        class RotaryEmbedding(nn.Module):
            def __init__(self, dim=64, base=10000.0):
                super().__init__()
                self.dim, self.base = dim, base

            def forward(self, position_ids, dtype=None):
                inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2, dtype=torch.float32) / self.dim))
                emb = position_ids.float().unsqueeze(-1) * inv_freq
                target_dtype = dtype if dtype is not None else position_ids.dtype
                return emb.cos().to(target_dtype), emb.sin().to(target_dtype)


        class Embedder(nn.Module):
            def __init__(self, config):
                super().__init__()
                self.config = config
                self.rotary_emb = RotaryEmbedding(config.head_dim)

            def forward(self, hidden_states, position_ids):
                cos, sin = self.rotary_emb(position_ids)
                return hidden_states * cos[..., :1] + sin[..., :1]
        '''
    assert set(_found(source).values()) == {"unsafe"}
    passing = source.replace("self.rotary_emb(position_ids)", "self.rotary_emb(position_ids, dtype=hidden_states.dtype)")
    assert set(_found(passing).values()) == {"safe"}


def test_a_none_dtype_no_call_passes_takes_its_float32_fallback():
    """Round 52: `dtype = dtype or compute_dtype(position_ids)` (float32 for integer ids) in a positions helper no
    call of the file passes `dtype` to: every call gets the float32 fallback, so nothing is reported; a call passing
    the activations' dtype is."""
    source = '''\
        import torch


        def compute_dtype(x):
            return x.dtype if x.is_floating_point() else torch.float32


        def make_positions(position_ids, dtype=None):
            dtype = dtype or compute_dtype(position_ids)
            return torch.Tensor.to(position_ids, dtype)


        def tables(x, position_ids):
            inv_freq = 1.0 / 10000.0 ** (torch.arange(0, 64, 2, dtype=torch.float32) / 64)
            phase = make_positions(position_ids)[..., None] * inv_freq
            return phase.cos().to(x.dtype), phase.sin().to(x.dtype)
        '''
    assert _found(source) == {}
    passing = source.replace("make_positions(position_ids)[", "make_positions(position_ids, x.dtype)[")
    assert _found(passing) == {(10, "RPL005"): "safe"}
