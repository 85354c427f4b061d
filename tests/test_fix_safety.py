"""Which fixes are safe: a safe fix changes precision only, never a dtype something else depends on."""

from __future__ import annotations

import math
import textwrap

import pytest

from ropelint.engine import check_text
from ropelint.fixer import fix_text
from ropelint.rules import BY_CODE

ALL = frozenset(BY_CODE)


def _fixes(source: str) -> dict[str, tuple[str, str]]:
    """code -> (safety, description) of the findings in ``source``."""
    result = check_text("rotary.py", textwrap.dedent(source), ALL)
    assert result.error is None
    return {d.code: (d.fix.safety, d.fix.description) for d in result.diagnostics if d.fix is not None}


def test_frequencies_in_the_activation_dtype_that_rotate_the_activation_are_unsafe():
    # Rotating `x` in this function: float32 tables would make the rotated queries float32.
    fixes = _fixes('''
        import torch

        def rotate_queries_or_keys(x, pos):
            B, num_heads, N, D = x.size()
            omega = torch.arange(D // 2, dtype=x.dtype, device=x.device)
            omega /= D / 2.0
            omega = 1.0 / 10000**omega
            freq = pos.unsqueeze(-1) * omega
            return x * freq.cos().repeat(1, 1, 1, 2) + x.flip(-1) * freq.sin().repeat(1, 1, 1, 2)
        ''')
    safety, description = fixes["RPL006"]
    assert safety == "unsafe" and "`x` is multiplied by the tables" in description


def test_frequencies_in_the_callers_dtype_get_their_tables_cast_back():
    source = textwrap.dedent('''
        import torch

        def rope_table(positions, head_dim, base=10000.0, dtype=torch.float32):
            exponent = torch.arange(0, head_dim, 2, dtype=dtype, device=positions.device) / head_dim
            angles = positions.to(dtype)[:, None] * (1.0 / base**exponent)
            return angles.cos(), angles.sin()
        ''')
    assert _fixes(source)["RPL006"][0] == "safe"
    fixed = fix_text("rotary.py", source, ALL, unsafe=False).fixed
    assert "return angles.cos().to(dtype), angles.sin().to(dtype)" in fixed
    assert "dtype=torch.float32, device=positions.device) / head_dim" in fixed
    assert not check_text("rotary.py", fixed, ALL).diagnostics


def test_positions_also_used_as_indices_are_unsafe():
    fixes = _fixes('''
        import torch

        def tables(table, n, x, dim=64, base=10000.0):
            inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
            pos = torch.arange(n, dtype=x.dtype)
            rows = table[pos]
            freqs = pos[:, None] * inv_freq[None, :]
            return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype), rows
        ''')
    safety, description = fixes["RPL005"]
    assert safety == "unsafe" and "indices" in description


def test_tables_cast_back_in_the_function_keep_the_fix_safe():
    fixes = _fixes('''
        import torch

        def tables(n, x, dim=64, base=10000.0):
            inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
            pos = torch.arange(n, dtype=x.dtype, device=x.device)
            freqs = pos[:, None] * inv_freq[None, :]
            return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)
        ''')
    assert fixes["RPL005"][0] == "safe"


def test_a_learnable_parameter_gets_only_an_unsafe_keep():
    fixes = _fixes('''
        import torch
        from torch import nn

        class Rotary(nn.Module):
            def __init__(self, dim=64, base=10000.0):
                super().__init__()
                self.inv_freq = nn.Parameter(1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim)))

            def forward(self, x, position_ids):
                freqs = position_ids[..., None].float() * self.inv_freq.float()
                return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)
        ''')
    safety, description = fixes["RPL002"]
    assert safety == "unsafe" and "_apply" in description and "mixed dtypes" in description


def test_a_rebuild_is_not_offered_under_a_decorator_that_may_update_the_buffer():
    fixes = _fixes('''
        import torch
        from torch import nn
        from .rope_utils import dynamic_rope_update

        class Rotary(nn.Module):
            def __init__(self, config, device=None):
                super().__init__()
                self.config = config
                inv_freq, self.attention_scaling = self.rope_init_fn(self.config, device)
                self.register_buffer("inv_freq", inv_freq, persistent=False)

            def rope_init_fn(self, config, device=None):
                return 1.0 / (10000.0 ** (torch.arange(0, 64, 2, dtype=torch.float32, device=device) / 64)), 1.0

            @torch.no_grad()
            @dynamic_rope_update
            def forward(self, x, position_ids):
                freqs = position_ids[..., None].float() * self.inv_freq[None, None, :].float()
                return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)
        ''')
    safety, description = fixes["RPL002"]
    assert safety == "safe" and "_apply" in description  # keeps the buffer; the decorator may rebuild it


def test_an_init_construction_is_copied_into_a_builder_unless_something_changes_it_in_place():
    source = textwrap.dedent('''
        import math

        import torch
        from torch import nn

        class Rotary(nn.Module):
            def __init__(self, dim=64, base=10000.0, factor=4.0):
                super().__init__()
                self.factor = factor
                inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
                wavelen = 2 * math.pi / inv_freq
                inv_freq = torch.where(wavelen > 8192, inv_freq / factor, inv_freq)
                self.register_buffer("inv_freq", inv_freq, persistent=False)

            def forward(self, x, position_ids):
                freqs = position_ids[..., None].float() * self.inv_freq
                return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)
        ''')
    fixed = fix_text("rotary.py", source, ALL, unsafe=False).fixed
    assert "def _build_inv_freq(self, dim, base, factor, device=None):" in fixed
    assert "self._inv_freq_args = (dim, base, factor)" in fixed
    assert "self._build_inv_freq(*self._inv_freq_args, device=device)" in fixed
    assert not check_text("rotary.py", fixed, ALL).diagnostics
    mutated = source.replace("        wavelen = 2 * math.pi / inv_freq\n",
                             "        wavelen = 2 * math.pi / inv_freq\n        inv_freq.mul_(1.0)\n")
    assert "_apply" in _fixes(mutated)["RPL002"][1]


def test_integer_positions_negated_with_int_literals_stay_integer():
    """`torch.arange(n).flip(0) * -1 - 1` is an int64 tensor (measured: torch keeps int64 for int
    tensor times a Python int), so handing it to a phase builder in a comprehension reports nothing;
    the same positions scaled by `-1.0` take the default dtype and are reported."""
    source = textwrap.dedent('''\
        import torch
        from torch import nn


        class Rope(nn.Module):
            def __init__(self, theta, axes_dim):
                super().__init__()
                neg_index = torch.arange(1024).flip(0) * -1 - 1
                self.freqs = [self.rope_params(neg_index, dim, theta) for dim in axes_dim]

            def rope_params(self, index, dim, theta=10000):
                freqs = torch.outer(index, 1.0 / torch.pow(theta, torch.arange(0, dim, 2).to(torch.float32).div(dim)))
                return torch.polar(torch.ones_like(freqs), freqs)
        ''')
    assert torch_int_times_negative_int_is_int64()
    assert [d.code for d in check_text("rope.py", source, ALL).diagnostics] == []
    scaled = source.replace("* -1 - 1", "* -1.0 - 1")
    assert [d.code for d in check_text("rope.py", scaled, ALL).diagnostics] == ["RPL005"]


def torch_int_times_negative_int_is_int64() -> bool:
    try:
        import torch
    except ImportError:  # the linter runs without torch; the dtype fact is checked where it is installed
        return True
    return (torch.arange(4).flip(0) * -1 - 1).dtype == torch.int64


CALLER_DTYPE = textwrap.dedent('''\
    import torch
    from torch import nn


    class Rotary(nn.Module):
        def __init__(self, dim, base=10000.0):
            super().__init__()
            self.dim, self.base = dim, base

        def get_seq_pos(self, seq_len, device, dtype, offset=0):
            return torch.arange(seq_len, device=device, dtype=dtype) + offset

        def freqs_for(self, seq):
            inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2, dtype=torch.float32) / self.dim))
            return seq[:, None] * inv_freq[None, :]

        def forward(self, t):
            seq = self.get_seq_pos(t.shape[-2], device=t.device, dtype=t.dtype)
            freqs = self.freqs_for(seq)
            return freqs.cos().to(t.dtype), freqs.sin().to(t.dtype)
    ''')


def test_positions_built_in_a_callers_dtype_are_fixed_at_the_call():
    """The public method keeps its contract; this file's own call passes float32 (safe when the result
    only feeds this file's functions), and the finding is gone after the fix."""
    [found] = [d for d in check_text("rotary.py", CALLER_DTYPE, ALL).diagnostics if d.code == "RPL005"]
    assert found.fix.safety == "safe" and "where this file calls `get_seq_pos`" in found.fix.description
    fixed = fix_text("rotary.py", CALLER_DTYPE, ALL, unsafe=False)
    assert "dtype=torch.float32)\n        freqs = self.freqs_for(seq)" in fixed.fixed
    assert "torch.arange(seq_len, device=device, dtype=dtype)" in fixed.fixed  # the method is untouched
    assert fixed.remaining.diagnostics == ()
    leaking = CALLER_DTYPE.replace("freqs = self.freqs_for(seq)", "freqs = self.freqs_for(seq)\n        self.last = seq")
    [again] = [d for d in check_text("rotary.py", leaking, ALL).diagnostics if d.code == "RPL005"]
    assert again.fix.safety == "unsafe"
    # Some of the same positions picked by index (packed sequences): still only this file's phase reads them.
    gathered = CALLER_DTYPE.replace("dtype=t.dtype)\n", "dtype=t.dtype)[position_ids]\n").replace(
        "def forward(self, t):", "def forward(self, t, position_ids):")
    [picked] = [d for d in check_text("rotary.py", gathered, ALL).diagnostics if d.code == "RPL005"]
    assert picked.fix.safety == "safe"
    assert "dtype=torch.float32)[position_ids]" in fix_text("rotary.py", gathered, ALL, unsafe=False).fixed


def test_a_tensor_method_called_unbound_is_read_like_the_bound_call():
    """`torch.Tensor.type_as(position_ids, self.inv_freq)` is `position_ids.type_as(self.inv_freq)`:
    both findings, and the fix casts the tensor argument, not `torch.Tensor` (keeping the device move
    `type_as` makes: it names the device type too)."""
    source = textwrap.dedent('''\
        import torch
        from torch import nn


        class TypeAsRotary(nn.Module):
            def __init__(self, dim, base=10000.0):
                super().__init__()
                inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
                self.register_buffer("inv_freq", inv_freq, persistent=False)

            def forward(self, position_ids):
                pos = torch.Tensor.type_as(position_ids, self.inv_freq)
                return pos.unsqueeze(-1) * self.inv_freq
        ''')
    found = check_text("rotary.py", source, ALL).diagnostics
    assert sorted(d.code for d in found) == ["RPL002", "RPL005"] and all(d.fix.safety == "safe" for d in found)
    fixed = fix_text("rotary.py", source, ALL, unsafe=False)
    assert "pos = position_ids.to(self.inv_freq.device, torch.float32)" in fixed.fixed
    assert fixed.remaining.diagnostics == ()


PRUNED_CALLER = textwrap.dedent('''\
    import torch
    from torch import nn


    def exists(val):
        return val is not None


    def default(val, d):
        return val if exists(val) else d


    class SelfAttention(nn.Module):
        def __init__(self, dim, base=10000.0):
            super().__init__()
            self.dim, self.base = dim, base

        def get_seq_pos(self, seq_len, device=None, dtype=None, offset=0):
            dtype = default(dtype, torch.float32)
            return torch.arange(seq_len, device=device, dtype=dtype) + offset

        def freqs_for(self, seq):
            inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2, dtype=torch.float32) / self.dim))
            return seq[:, None] * inv_freq[None, :]

        def forward(self, t):
            seq = self.get_seq_pos(t.shape[-2], device=t.device, dtype=t.dtype)
            freqs = self.freqs_for(seq)
            return freqs.cos().to(t.dtype), freqs.sin().to(t.dtype)

        def with_cached_keys(self, q, k):
            seq = self.get_seq_pos(k.shape[-2], dtype=q.dtype, device=q.device)
            return self.freqs_for(seq[-q.shape[-2]:])
    ''')


def test_a_positions_method_without_rotary_words_and_all_its_callers_are_analysed():
    """The class is pruned to its rotary methods; the positions method it calls, the short helpers
    that method calls (`default`), and a method with no rotary word that hands it a dtype are kept,
    so every call gets float32 (rotary-embedding-torch 0.9.1's get_seq_pos)."""
    [found] = check_text("rotary.py", PRUNED_CALLER, ALL).diagnostics
    assert (found.code, found.line, found.fix.safety) == ("RPL005", 20, "safe")
    fixed = fix_text("rotary.py", PRUNED_CALLER, ALL, unsafe=False)
    assert fixed.fixed.count("dtype=torch.float32, device=q.device)") == 1
    assert fixed.fixed.count("device=t.device, dtype=torch.float32)") == 1
    assert fixed.remaining.diagnostics == ()


def test_a_call_through_another_receiver_keeps_the_call_site_fix_off():
    """`self.attn.get_seq_pos(n, dtype=x.dtype)` is a call the fix would not rewrite: float32 at the
    other calls would leave it 16-bit, so the call-site fix is not offered."""
    source = PRUNED_CALLER + textwrap.dedent('''\


        class Block(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.attn = SelfAttention(dim)

            def forward(self, x):
                return self.attn.get_seq_pos(x.shape[1], dtype=x.dtype)
        ''')
    [found] = check_text("rotary.py", source, ALL).diagnostics
    assert found.code == "RPL005" and found.fix.safety == "unsafe"
    assert "where this file calls" not in found.fix.description


def test_a_matmul_is_elementwise_only_when_its_left_operand_ends_in_an_axis_of_one():
    """`seq.unsqueeze(-1) @ inv_freq.unsqueeze(0)` is `[n, 1] @ [1, d]` (safe elementwise rewrite: a valid
    matmul whose left operand ends in one contracts one element). Two stacked coordinates against a two-row
    frequency table, `[n, 2] @ [2, d]`, really contract: only the unsafe broadcast-and-sum rewrite is offered."""
    source = textwrap.dedent('''\
        import torch


        def tables(seq_len, dim, base=10000.0):
            inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
            seq = torch.arange(seq_len, dtype=torch.float32)
            freqs = seq.unsqueeze(-1) @ inv_freq.unsqueeze(0)
            return freqs.cos(), freqs.sin()
        ''')
    assert _fixes(source)["RPL003"] == ("safe", "form the phase as an elementwise float32 product")
    fixed = fix_text("rotary.py", source, ALL, unsafe=False)
    assert "freqs = seq.unsqueeze(-1) * inv_freq.unsqueeze(0)" in fixed.fixed
    stacked = source.replace("seq.unsqueeze(-1) @ inv_freq.unsqueeze(0)",
                             "torch.stack([seq, seq / 2], dim=-1) @ torch.stack([inv_freq, inv_freq / 2])")
    assert stacked != source
    assert _fixes(stacked)["RPL003"][0] == "unsafe"


def test_an_offset_annotated_int_keeps_the_positions_one_dimensional():
    """`arange(n) + offset` keeps one axis when `offset: int` (Megatron's `get_freqs_non_repeated`), so the
    guarded `[n, 1] @ [1, d]` matmul has a safe elementwise rewrite; an unannotated `offset` may be a
    tensor of any shape and keeps the rewrite unsafe."""
    source = textwrap.dedent('''\
        import torch


        def angles(dim, max_seq_len: int, offset: int = 0):
            inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
            seq = torch.arange(max_seq_len, device=inv_freq.device, dtype=torch.float32) + offset
            with torch.autocast(device_type=seq.device.type, enabled=False):
                freqs = torch.matmul(seq.unsqueeze(1), inv_freq.unsqueeze(0))
            return freqs.cos()
        ''')
    assert _fixes(source)["RPL004"][0] == "safe"
    fixed = fix_text("rotary.py", source, ALL, unsafe=False).fixed
    assert "    freqs = (seq.unsqueeze(1) * inv_freq.unsqueeze(0))\n" in fixed and "autocast" not in fixed
    untyped = source.replace("offset: int = 0", "offset=0")
    assert untyped != source
    assert _fixes(untyped)["RPL004"][0] == "unsafe"


def test_an_int_annotated_stride_keeps_integer_positions_integer():
    """`arange(n) * q_stride` with `q_stride: int` is int64 (no 16-bit positions, no RPL005); with
    `q_stride: float` it takes the default dtype, which may be bfloat16 (RPL005)."""
    source = textwrap.dedent('''\
        import torch


        def phase(n: int, q_stride: int = 1, dim: int = 64):
            inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
            pos = torch.arange(n) * q_stride
            return (pos[:, None] * inv_freq[None, :]).cos()
        ''')
    assert "RPL005" not in _fixes(source)
    scaled = source.replace("q_stride: int = 1", "q_stride: float = 1.0")
    assert scaled != source and "RPL005" in _fixes(scaled)


def test_an_activation_rotated_by_tables_is_not_a_table():
    """`x0 * cos - x1 * sin` cast back with `.type_as(x)` is the attention boundary, even when the
    tables come from a parameter named `freqs` (OpenELM's (cos, sin) pairs): no RPL006."""
    source = textwrap.dedent('''\
        import torch


        def apply_rotary_emb(x, freqs):
            xf = x.float().reshape(*x.shape[:-1], -1, 2)
            cos, sin = freqs[..., 0].float(), freqs[..., 1].float()
            x0, x1 = xf[..., 0], xf[..., 1]
            out = torch.stack((x0 * cos - x1 * sin, x1 * cos + x0 * sin), dim=-1)
            return out.flatten(-2).type_as(x)
        ''')
    assert check_text("rotary.py", source, ALL).diagnostics == ()


def test_string_keyed_containers_and_builder_arguments_name_their_values():
    """`self.rope["inv_freq"]` (an nn.ParameterDict) reads inverse frequencies, so the disabled-autocast
    guard around its phase is found; a `freqs_cis` buffer built by a builder passed in is complex."""
    guarded = textwrap.dedent('''\
        import torch
        from torch import nn


        class Rotary(nn.Module):
            def __init__(self, dim, base=10000.0):
                super().__init__()
                inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
                self.rope = nn.ParameterDict({"inv_freq": nn.Parameter(inv_freq, requires_grad=False)})

            def forward(self, x, position_ids):
                inv = self.rope["inv_freq"][None, :, None].float().expand(position_ids.shape[0], -1, 1)
                with torch.autocast(device_type="cpu", enabled=False):
                    freqs = (inv @ position_ids[:, None, :].float()).transpose(1, 2)
                return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)
        ''')
    assert "RPL004" in {d.code for d in check_text("rotary.py", guarded, ALL).diagnostics}
    built = textwrap.dedent('''\
        import torch
        from torch import nn


        class ComplexRotary(nn.Module):
            def __init__(self, head_dim, max_seq_len, builder):
                super().__init__()
                self.register_buffer("freqs_cis", builder(head_dim, max_seq_len), persistent=False)

            def forward(self, xq):
                return torch.view_as_real(torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
                                          * self.freqs_cis[: xq.shape[1]]).flatten(-2).type_as(xq)
        ''')
    assert [d.code for d in check_text("rotary.py", built, ALL).diagnostics] == ["RPL008"]


def test_a_float32_default_dtype_is_float32_only_while_no_caller_overrides_it():
    """A private helper's `dtype=torch.float32` default holds when every call in the file leaves it (so
    does a public builder named for inverse frequencies or rotary tables); another public function may be
    called from anywhere with anything, and a call passing `x.dtype` overrides the default."""
    source = textwrap.dedent('''\
        import torch


        def _inv_freq_for(dim, base, dtype=torch.float32):
            return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=dtype) / dim))


        def tables(x, position_ids, dim, base=10000.0):
            freqs = position_ids.float()[..., None] * _inv_freq_for(dim, base)
            return freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)
        ''')
    assert check_text("rotary.py", source, ALL).diagnostics == ()
    overridden = source.replace("_inv_freq_for(dim, base)", "_inv_freq_for(dim, base, dtype=x.dtype)")
    assert "RPL006" in {d.code for d in check_text("rotary.py", overridden, ALL).diagnostics}
    public = source.replace("_inv_freq_for", "make_powers")
    assert "RPL006" in {d.code for d in check_text("rotary.py", public, ALL).diagnostics}
    # A public builder named for inverse frequencies or rotary tables returns them in `dtype` by contract.
    assert check_text("rotary.py", source.replace("_inv_freq_for", "inv_freq_for"), ALL).diagnostics == ()
    assert check_text("rotary.py", source.replace("_inv_freq_for", "build_rope"), ALL).diagnostics == ()


def test_a_phase_returned_in_a_dtype_parameter_takes_what_each_call_passes():
    """`return phase.to(dtype)` in a public builder: the module that stores `build(..., dtype=torch.float32)`
    (or leaves the float32 default) takes cos/sin of a float32 phase; one passing bfloat16 or the
    activations' dtype rounds the angle first (RPL007 at the cast)."""
    source = textwrap.dedent('''\
        import math
        import torch
        from torch import nn


        def precompute_angles(dim: int, max_len: int, dtype: torch.dtype = torch.float32):
            exponent = torch.arange(0, dim, 2, dtype=torch.float64) / dim
            inv_freq = torch.exp(-math.log(10000.0) * exponent)
            pos = torch.arange(max_len, dtype=torch.float64)
            return (pos[:, None] * inv_freq[None, :]).to(dtype)


        class Rotary(nn.Module):
            def __init__(self, head_dim=64, max_len=4096):
                super().__init__()
                self.head_dim, self.max_len = head_dim, max_len
                self.angles = precompute_angles(head_dim, max_len, dtype=torch.float32)

            def forward(self, x):
                ang = self.angles[: x.size(1)]
                return ang.cos().to(x.dtype), ang.sin().to(x.dtype)
        ''')
    codes = lambda text: {d.code for d in check_text("rotary.py", text, ALL).diagnostics}  # noqa: E731
    assert codes(source) == set()
    defaulted = source.replace(", dtype=torch.float32)\n", ")\n")
    assert defaulted != source and codes(defaulted) == set()
    rounded = source.replace("dtype=torch.float32)\n", "dtype=torch.bfloat16)\n")
    assert rounded != source and codes(rounded) == {"RPL007"}
    per_call = source.replace("self.angles[: x.size(1)]",
                              "precompute_angles(self.head_dim, self.max_len, dtype=x.dtype)[: x.size(1)]")
    assert per_call != source and codes(per_call) == {"RPL007"}


def test_kv_cache_offsets_filled_as_long_give_their_integer_dtype_to_the_tables():
    """`seqlen_offsets` (plural: a tensor, not a length) made `torch.full(..., dtype=torch.long)` when an int
    is passed: its dtype handed to the table builder truncates the tables (RPL001 at the call), and the
    safe fix passes the queries' dtype."""
    source = textwrap.dedent('''\
        import torch


        def _cos_sin(positions, rotary_dim: int, base: float, dtype: torch.dtype):
            inv_freq = 1.0 / (base ** (torch.arange(0, rotary_dim, 2, dtype=torch.float32) / rotary_dim))
            freqs = positions.unsqueeze(-1).to(torch.float32) * inv_freq
            return freqs.cos().to(dtype), freqs.sin().to(dtype)


        def apply_rotary(q, seqlen_offsets=0, rotary_dim=64, base=10000.0):
            batch, seqlen = q.shape[:2]
            if isinstance(seqlen_offsets, int):
                seqlen_offsets = torch.full((batch,), seqlen_offsets, dtype=torch.long, device=q.device)
            dtype = seqlen_offsets.dtype
            positions = seqlen_offsets[:, None] + torch.arange(seqlen, device=q.device, dtype=dtype)
            cos, sin = _cos_sin(positions, rotary_dim, base, dtype)
            return q * cos[:, :, None] + q * sin[:, :, None]
        ''')
    assert _fixes(source)["RPL001"][0] == "safe"
    fixed = fix_text("rotary.py", source, ALL, unsafe=False)
    assert "_cos_sin(positions, rotary_dim, base, q.dtype)" in fixed.fixed and fixed.remaining.diagnostics == ()
    filled_float = source.replace("dtype=torch.long", "dtype=torch.float32")
    assert filled_float != source and "RPL001" not in _fixes(filled_float)


def test_a_forward_that_converts_its_coordinates_to_float_falls_back_to_their_integer_dtype():
    """`dtype = dtype or coords.dtype` in a `forward` that itself computes with `coords.float()`: callers pass
    integer grid coordinates (RPL001, fixed by falling back to float32). Without the conversion, or in a
    method this file calls (its call sites decide), nothing is claimed."""
    source = textwrap.dedent('''\
        import torch
        from torch import nn


        class Axial2D(nn.Module):
            def __init__(self, head_dim=64, theta=100.0):
                super().__init__()
                self.head_dim, self.theta = head_dim, theta

            def forward(self, coords, dtype=None):
                dtype = dtype or coords.dtype
                exps = torch.arange(0, self.head_dim // 2, 2, dtype=torch.float32) / (self.head_dim // 2)
                freqs = (coords.float().unsqueeze(-1) * self.theta ** -exps).flatten(-2)
                return freqs.cos().to(dtype), freqs.sin().to(dtype)
        ''')
    fixes = _fixes(source)
    assert fixes["RPL001"] == ("safe", "fall back to `torch.float32` instead of `coords.dtype` (a dtype the caller "
                                       "passes still wins)")
    fixed = fix_text("rotary.py", source, ALL, unsafe=False)
    assert "dtype = dtype or torch.float32\n" in fixed.fixed and fixed.remaining.diagnostics == ()
    unconverted = source.replace("coords.float().unsqueeze(-1)", "coords.unsqueeze(-1)")
    assert unconverted != source and "RPL001" not in _fixes(unconverted)
    renamed = source.replace("def forward(self, coords", "def tables(self, coords")
    assert renamed != source and "RPL001" not in _fixes(renamed)


HANDED_IDS = textwrap.dedent('''\
    import torch
    from torch import nn


    class Rotary(nn.Module):
        def __init__(self, dim, base=10000.0):
            super().__init__()
            self.dim, self.base = dim, base

        def forward(self, x, seq_len=None):
            seq_len = seq_len if seq_len is not None else x.shape[-2]
            inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2, device=x.device, dtype=torch.float32) / self.dim))
            emb = torch.outer(torch.arange(seq_len, device=x.device, dtype=torch.float32), inv_freq)
            emb = torch.cat((emb, emb), dim=-1)
            return emb.cos().to(dtype=x.dtype), emb.sin().to(dtype=x.dtype)


    class Attention(nn.Module):
        def __init__(self, hidden=64, heads=1):
            super().__init__()
            self.v_proj = nn.Linear(hidden, hidden)
            self.rotary_emb = Rotary(hidden // heads)

        def forward(self, hidden_states, position_ids):
            value_states = self.v_proj(hidden_states)
            cos, sin = self.rotary_emb(position_ids, seq_len=int(position_ids.max()) + 1)
            return cos[position_ids], sin[position_ids], value_states
    ''')


def test_ids_handed_to_a_rotary_that_reads_only_their_dtype_get_an_activation_instead():
    """`self.rotary_emb(position_ids, seq_len=n)` into a forward that reads `x` only for `.dtype`/`.device`
    (its `x.shape[-2]` branch is not taken when `seq_len` is passed): the fix passes an activation the
    method has already made (`value_states`). Without `seq_len` the rotary reads the ids' length: no fix."""
    assert _fixes(HANDED_IDS)["RPL001"][0] == "safe"
    fixed = fix_text("rotary.py", HANDED_IDS, ALL, unsafe=False)
    assert "self.rotary_emb(value_states, seq_len=int(position_ids.max()) + 1)" in fixed.fixed
    assert fixed.remaining.diagnostics == ()
    length_read = HANDED_IDS.replace(", seq_len=int(position_ids.max()) + 1)", ")")
    assert length_read != HANDED_IDS
    [found] = [d for d in check_text("rotary.py", length_read, ALL).diagnostics if d.code == "RPL001"]
    assert found.fix is None
    torch = pytest.importorskip("torch")
    namespace: dict = {}
    exec(compile(fixed.fixed, "<fixed>", "exec"), namespace)  # noqa: S102 - the test's own source
    positions = torch.tensor([[0, 1, 1000]])
    cos, sin, _ = namespace["Attention"]()(torch.zeros(1, 3, 64), positions)
    angle = 1000.0 * 10000.0 ** (-2 / 64)  # the second frequency at position 1000
    assert cos.dtype == torch.float32
    assert abs(float(cos[0, 2, 1]) - math.cos(angle)) < 1e-4 and abs(float(sin[0, 2, 1]) - math.sin(angle)) < 1e-4


def test_dropping_a_cast_keeps_the_precedence_of_what_it_wrapped():
    """`1.0 - (emb.cos() * 2).to(position_ids.dtype)` loses its integer cast, not its parentheses; a whole
    assigned value needs none."""
    source = textwrap.dedent('''\
        import torch


        def tables(position_ids, dim, base=10000.0):
            inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
            emb = position_ids.float()[..., None] * inv_freq
            shifted = 1.0 - (emb.cos() * 2).to(position_ids.dtype)
            sin = (emb.sin() * 2).to(position_ids.dtype)
            return shifted, sin
        ''')
    fixed = fix_text("rotary.py", source, ALL, unsafe=False).fixed
    assert "shifted = 1.0 - (emb.cos() * 2)\n" in fixed and "sin = emb.sin() * 2\n" in fixed


def test_a_phase_buffer_kept_float32_also_loses_its_cast_at_registration():
    """`pe = (position * div_term).to(dtype or torch.get_default_dtype())` registered as a buffer: the keep
    fix also drops that cast, or the kept buffer would still hold a phase rounded at construction (and the
    fixed file would report RPL007)."""
    source = textwrap.dedent('''\
        import math

        import torch
        from torch import nn


        class PhaseTable(nn.Module):
            def __init__(self, d_model, max_len=5000, base=10000.0, dtype=None):
                super().__init__()
                position = torch.arange(max_len, dtype=torch.float32).unsqueeze(1)
                div_term = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(base) / d_model))
                pe = (position * div_term).to(dtype or torch.get_default_dtype())
                self.register_buffer("pe", pe, persistent=False)

            def forward(self, x):
                angles = self.pe[: x.shape[1]]
                angles = torch.cat((angles, angles), dim=-1)
                return angles.cos().to(x.dtype), angles.sin().to(x.dtype)
        ''')
    assert [d.code for d in check_text("rotary.py", source, ALL).diagnostics] == ["RPL009"]
    fixed = fix_text("rotary.py", source, ALL, unsafe=False)
    assert "pe = position * div_term\n" in fixed.fixed and fixed.remaining.diagnostics == ()


def test_kept_state_is_built_without_the_cast_that_rounded_it():
    """LTX-style `freq_basis` built in float64, cast to the constructor's `dtype` and registered: the keep
    fix alone would keep the bfloat16 it was built in, so it also drops that cast. The name calls the
    ramp frequencies, and `*_grid` parameters are positions."""
    source = textwrap.dedent('''\
        import math

        import torch
        from torch import nn


        class FractionalRope(nn.Module):
            def __init__(self, dim, theta=10000.0, dtype=torch.float32):
                super().__init__()
                basis = theta ** torch.linspace(0.0, 1.0, dim // 2, dtype=torch.float64)
                basis = (basis * math.pi / 2).to(dtype)
                self.register_buffer("freq_basis", basis, persistent=False)

            def forward(self, indices_grid):
                freqs = self.freq_basis * (indices_grid.unsqueeze(-1) * 2 - 1)
                return freqs.cos(), freqs.sin()
        ''')
    [found] = check_text("rotary.py", source, ALL).diagnostics
    assert (found.code, found.fix.safety) == ("RPL002", "safe")
    assert "built without the cast that rounded it" in found.fix.description
    fixed = fix_text("rotary.py", source, ALL, unsafe=False)
    assert "basis = basis * math.pi / 2\n" in fixed.fixed and fixed.remaining.diagnostics == ()


def test_tables_written_into_an_integer_allocation_are_found_at_the_allocation():
    """`sin = pos.new_zeros(...)` with an int64 `pos`, then `sin[:] = torch.sin(pos * div)`: the write
    truncates. Reported at the allocation, which the fix makes float32."""
    source = textwrap.dedent('''\
        import math

        import torch
        from torch import nn


        class Tables(nn.Module):
            def __init__(self, d_model, max_len=4096, base=10000.0):
                super().__init__()
                pos = torch.arange(max_len).unsqueeze(1)
                div = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(base) / d_model))
                sin = pos.new_zeros(max_len, d_model // 2)
                sin[:] = torch.sin(pos * div)
                self.sin = sin

            def forward(self, x):
                return self.sin[: x.shape[-2]].to(x.dtype)
        ''')
    [found] = [d for d in check_text("rotary.py", source, ALL).diagnostics if d.code == "RPL001"]
    assert found.line == 12 and "allocates in the integer dtype of `pos`" in found.message
    fixed = fix_text("rotary.py", source, ALL, unsafe=False).fixed
    assert "sin = pos.new_zeros(max_len, d_model // 2, dtype=torch.float32)" in fixed


def test_frequencies_a_method_builds_in_its_callers_dtype_are_fixed_at_the_call():
    """`_inv_freq_for_length(n, device, dtype)` called with `x.dtype`: the method keeps its contract, the
    file's call passes `torch.float32`, and the fixed file checks clean (every call now passes float32).
    `.to(positions)` of the tables is the positions' dtype: integer ids in most callers."""
    source = textwrap.dedent('''\
        import torch
        from torch import nn


        class DynamicRotary(nn.Module):
            def __init__(self, dim, base=10000.0):
                super().__init__()
                self.dim, self.base = dim, base

            def _inv_freq_for_length(self, seq_len, device, dtype):
                base = self.base * max(1.0, seq_len / 4096)
                return 1.0 / (base ** (torch.arange(0, self.dim, 2, device=device, dtype=dtype) / self.dim))

            def forward(self, x, positions):
                inv_freq = self._inv_freq_for_length(x.shape[1], x.device, x.dtype)
                freqs = positions.float()[..., None] * inv_freq.float()
                return freqs.cos().to(positions), freqs.sin().to(x.dtype)
        ''')
    found = {d.code: d for d in check_text("rotary.py", source, ALL).diagnostics}
    assert set(found) == {"RPL001", "RPL006"}
    assert found["RPL006"].fix.safety == "safe" and "where this file calls `_inv_freq_for_length`" in found["RPL006"].fix.description
    fixed = fix_text("rotary.py", source, ALL, unsafe=False)
    assert "self._inv_freq_for_length(x.shape[1], x.device, torch.float32)" in fixed.fixed
    assert "freqs.cos().to(positions.device)" in fixed.fixed and fixed.remaining.diagnostics == ()


def test_a_helper_with_opaque_parameters_is_analysed_with_what_its_call_hands_it():
    """`_cs(p, f)` says nothing by its names; called with an integer meshgrid and frequencies, it is
    analysed again for that call, and its `.type_as(p)` is an integer cast (fixed to a device move)."""
    source = textwrap.dedent('''\
        import torch
        from torch import nn


        def _f(d, base):
            return base ** -(torch.arange(0, d, 2, dtype=torch.float32) / d)


        def _cs(p, f):
            a = p[..., None] * f
            return a.cos().type_as(p), a.sin().type_as(p)


        class AxialRoPE(nn.Module):
            def __init__(self, head_dim=64, base=100.0):
                super().__init__()
                self.hd, self.base = head_dim, base

            def forward(self, x, hw):
                h, w = hw
                f = _f(self.hd // 2, self.base).to(x.device)
                yy, xx = torch.meshgrid(torch.arange(h, device=x.device), torch.arange(w, device=x.device), indexing="ij")
                cy, sy = _cs(yy.flatten(), f)
                cx, sx = _cs(xx.flatten(), f)
                return torch.cat([cy, cx], -1).to(x.dtype), torch.cat([sy, sx], -1).to(x.dtype)
        ''')
    found = check_text("rotary.py", source, ALL).diagnostics
    assert [(d.code, d.line) for d in found] == [("RPL001", 11), ("RPL001", 11)]
    fixed = fix_text("rotary.py", source, ALL, unsafe=False)
    assert "return a.cos().to(p.device), a.sin().to(p.device)" in fixed.fixed and fixed.remaining.diagnostics == ()


def test_a_mask_in_the_activation_dtype_counted_by_a_helper_is_handed_over_as_int64():
    # NomicBERT-style: the caller casts the padding mask for its additive bias, and a helper counts ids over it.
    source = textwrap.dedent('''
        import torch
        import torch.nn as nn

        def position_ids_from_padding_mask(mask):
            position_ids = mask.cumsum(dim=-1) - 1
            return position_ids.clamp(min=0) * mask

        class RotaryEmbedding(nn.Module):
            def __init__(self, dim, base=10000.0):
                super().__init__()
                self.dim, self.base = dim, base

            def forward(self, x, position_ids):
                inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2, device=x.device, dtype=torch.float32) / self.dim))
                freqs = position_ids[..., None].float() * inv_freq
                emb = torch.cat((freqs, freqs), dim=-1)
                return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.rotary_emb = RotaryEmbedding(64)

            def get_rotary(self, inputs_embeds, attention_mask):
                mask = attention_mask.to(dtype=inputs_embeds.dtype)
                position_ids = position_ids_from_padding_mask(mask)
                cos, sin = self.rotary_emb(inputs_embeds, position_ids)
                return cos, sin, (1.0 - mask) * torch.finfo(inputs_embeds.dtype).min
        ''')
    found = check_text("rotary.py", source, ALL).diagnostics
    assert [(d.code, d.line, d.fix.safety) for d in found] == [("RPL005", 27, "safe")]
    assert "`position_ids_from_padding_mask` counts position ids over it" in found[0].message
    fixed = fix_text("rotary.py", source, ALL, unsafe=False).fixed
    assert fixed == source.replace("position_ids_from_padding_mask(mask)\n",
                                   "position_ids_from_padding_mask(mask.long())\n")
    assert not check_text("rotary.py", fixed, ALL).diagnostics
    torch = pytest.importorskip("torch")
    namespace: dict = {}
    exec(compile(fixed, "rotary.py", "exec"), namespace)
    mask = torch.ones(1, 300, dtype=torch.long)
    mask[0, :3] = 0  # left padding
    embeds = torch.zeros(1, 300, 64, dtype=torch.bfloat16)
    cos, _, _ = namespace["Encoder"]().get_rotary(embeds, mask)
    assert torch.bfloat16 == cos.dtype
    # Counted in bfloat16, the 297 positions 0..296 keep 267 distinct values (torch 2.13, CPU; 257 rounds to 256).
    ids = namespace["position_ids_from_padding_mask"](mask.to(torch.bfloat16))
    assert ids[0, 3:].unique().numel() == 267
    assert namespace["position_ids_from_padding_mask"](mask.to(torch.bfloat16).long())[0, 3:].unique().numel() == 297
    reference = torch.cos(torch.arange(297, dtype=torch.float64))  # the first frequency is 1
    assert torch.allclose(cos[0, 3:, 0].double(), reference, atol=8e-3)


def test_ids_written_into_a_buffer_of_the_callers_dtype_are_fixed_at_the_call():
    # Flux-style: integer coordinates written into ``torch.zeros(..., dtype=dtype)`` with the latents' dtype.
    source = textwrap.dedent('''
        import torch
        import torch.nn as nn

        def ids_from_coords(coords, dtype):
            ids = torch.zeros(coords.shape, dtype=dtype, device=coords.device)
            ids[...] = coords
            return ids

        class PosEmbed(nn.Module):
            def __init__(self, dim, theta=10000.0):
                super().__init__()
                self.dim, self.theta = dim, theta

            def forward(self, ids):
                freqs = 1.0 / (self.theta ** (torch.arange(0, self.dim, 2, dtype=torch.float64) / self.dim))
                phase = torch.outer(ids.to(torch.float64), freqs)
                return phase.cos().float(), phase.sin().float()

        class Transformer(nn.Module):
            def __init__(self):
                super().__init__()
                self.x_embedder = nn.Linear(4, 8)
                self.pos_embed = PosEmbed(8)

            def forward(self, latents, coords):
                hidden = self.x_embedder(latents)
                img_ids = ids_from_coords(coords, dtype=hidden.dtype)
                return self.pos_embed(img_ids)
        ''')
    found = check_text("rotary.py", source, ALL).diagnostics
    assert [(d.code, d.line, d.fix.safety) for d in found] == [("RPL005", 6, "safe")]
    fixed = fix_text("rotary.py", source, ALL, unsafe=False).fixed
    assert fixed == source.replace("ids_from_coords(coords, dtype=hidden.dtype)",
                                   "ids_from_coords(coords, dtype=torch.float32)")


def test_a_kept_xpos_scale_hands_the_rotation_back_in_the_activation_dtype():
    source = textwrap.dedent('''
        import torch
        import torch.nn as nn

        def apply_rotary_pos_emb(x, sin, cos, scale=1):
            return x * cos * scale + x.flip(-1) * sin * scale

        class XPOS(nn.Module):
            def __init__(self, head_dim, scale_base=512):
                super().__init__()
                self.scale_base = scale_base
                self.register_buffer("scale", (torch.arange(0, head_dim, 2) + 0.4 * head_dim) / (1.4 * head_dim))

            def rotary_tables(self, length):
                scale = self.scale ** (torch.arange(length, dtype=torch.float32) / self.scale_base)[:, None]
                inv_freq = 1.0 / (10000.0 ** (torch.arange(0, scale.shape[1] * 2, 2, dtype=torch.float32) / 8))
                phase = torch.arange(length, dtype=torch.float32)[:, None] * inv_freq
                return phase.sin(), phase.cos(), scale

            def forward(self, x):
                sin, cos, scale = self.rotary_tables(x.shape[1])
                x = apply_rotary_pos_emb(x, sin, cos, scale)
                return x
        ''')
    fixed = fix_text("rotary.py", source, ALL, unsafe=False).fixed
    assert "x = apply_rotary_pos_emb(x, sin, cos, scale).to(x.dtype)\n" in fixed
    assert '("scale",)' in fixed
    assert fix_text("rotary.py", fixed, ALL, unsafe=False).fixed == fixed


def test_tables_registered_as_buffers_by_a_method_returning_nothing_are_stored_in_its_dtype():
    # InternLM2's dynamic-NTK cache grows in forward with dtype=x.dtype and registers the tables as buffers.
    source = textwrap.dedent('''
        import torch
        import torch.nn as nn

        class DynamicNTKRotary(nn.Module):
            def __init__(self, dim, base=10000.0):
                super().__init__()
                self.dim, self.base = dim, base
                self._set_cos_sin_cache(2048, None, torch.get_default_dtype())

            def _set_cos_sin_cache(self, seq_len, device, dtype):
                self.max_seq_len_cached = seq_len
                inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2, device=device, dtype=torch.float32) / self.dim))
                self.register_buffer("inv_freq", inv_freq, persistent=False)
                t = torch.arange(seq_len, device=device, dtype=dtype)
                freqs = torch.outer(t, self.inv_freq.to(dtype))
                emb = torch.cat((freqs, freqs), dim=-1)
                self.register_buffer("cos_cached", emb.cos(), persistent=False)
                self.register_buffer("sin_cached", emb.sin(), persistent=False)

            def forward(self, x, seq_len):
                if seq_len > self.max_seq_len_cached:
                    self._set_cos_sin_cache(seq_len, x.device, x.dtype)
                return self.cos_cached[:seq_len].to(x.dtype), self.sin_cached[:seq_len].to(x.dtype)
        ''')
    assert _fixes(source)["RPL005"] == ("safe", "build the positions in float32, and store the tables in `dtype`")
    fixed = fix_text("rotary.py", source, ALL, unsafe=False).fixed
    assert 'self.register_buffer("cos_cached", emb.cos().to(dtype), persistent=False)' in fixed
    assert "t = torch.arange(seq_len, device=device, dtype=torch.float32)" in fixed


def test_frequency_state_cast_into_a_table_helper_is_passed_uncast_and_each_table_cast():
    # DeepSpeed-inference style: the kept buffer would be rounded again by the cast on its way into the helper.
    source = textwrap.dedent('''
        import torch
        import torch.nn as nn

        def fixed_pos_embedding(position_ids, inv_freq):
            sinusoid_inp = position_ids.float().unsqueeze(-1) * inv_freq.unsqueeze(0)
            return torch.sin(sinusoid_inp), torch.cos(sinusoid_inp)

        class SelfAttention(nn.Module):
            def __init__(self, rotary_dim=64):
                super().__init__()
                inv_freq = 1.0 / (10000.0 ** (torch.arange(0, rotary_dim, 2, dtype=torch.float32) / rotary_dim))
                self.register_buffer("inv_freq", inv_freq, persistent=False)

            def _rotary_tables(self, position_ids, query):
                return fixed_pos_embedding(position_ids, self.inv_freq.to(query.dtype))
        ''')
    fixes = _fixes(source)
    assert fixes["RPL006"] == ("safe", "pass the frequencies uncast to `fixed_pos_embedding` and cast each table it "
                                       "returns")
    fixed = fix_text("rotary.py", source, ALL, unsafe=False).fixed
    assert "return tuple(table.to(query.dtype) for table in fixed_pos_embedding(position_ids, self.inv_freq))" in fixed
    assert '("inv_freq",)' in fixed
    assert not check_text("rotary.py", fixed, ALL).diagnostics


def test_tables_meeting_a_self_method_rotation_are_cast_to_the_rotated_tensor():
    # Moirai: `rot_sin * self._rotate(x)`; a kept float32 table there would make the rotated queries float32.
    source = textwrap.dedent('''
        import torch
        import torch.nn as nn

        class RotaryProjection(nn.Module):
            def __init__(self, width=32, max_len=512, base=10000):
                super().__init__()
                self.register_buffer("theta", 1.0 / torch.pow(base, torch.arange(0, width, 2, dtype=torch.float) / width),
                                     persistent=False)
                position = torch.arange(max_len, dtype=torch.float32)
                m_theta = torch.einsum("l,w->lw", position, self.theta).repeat_interleave(2, dim=-1)
                self.register_buffer("cos", torch.cos(m_theta), persistent=False)
                self.register_buffer("sin", torch.sin(m_theta), persistent=False)

            @staticmethod
            def _rotate(x):
                x1, x2 = x[..., 0::2], x[..., 1::2]
                return torch.stack([-x2, x1], dim=-1).flatten(-2)

            def get_cos_sin(self, seq_id):
                return self.cos[seq_id], self.sin[seq_id]

            def forward(self, x, seq_id):
                rot_cos, rot_sin = self.get_cos_sin(seq_id)
                return rot_cos * x + rot_sin * self._rotate(x)
        ''')
    fixed = fix_text("rotary.py", source, ALL, unsafe=False).fixed
    assert "return rot_cos.to(x.dtype) * x + rot_sin.to(x.dtype) * self._rotate(x)" in fixed
