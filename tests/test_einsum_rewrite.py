"""The RPL003 fix for a summing einsum: a float32 broadcast product summed over the contracted
letters, which must equal the einsum it replaces for every layout it accepts."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from ropelint.fixer import fix_text  # noqa: E402
from ropelint.rules import BY_CODE  # noqa: E402

SOURCE = '''import torch


def rotary_phase(coords, dim, base=10000.0):
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    freqs = torch.stack([inv_freq, 0.5 * inv_freq, 0.25 * inv_freq], dim={stack_dim})
    return torch.einsum("{spec}", coords.float(), freqs)
'''

# (equation, coords shape, stack dim of the [3, f] or [f, 3] frequency matrix)
CASES = [
    ("bsa,af->bsf", (2, 5, 3), 0),
    ("bsa,fa->bsf", (2, 5, 3), 1),
    ("sa,af->sf", (7, 3), 0),
    ("as,af->sf", (3, 7), 0),
    ("...a,af->...f", (2, 4, 5, 3), 0),
]


def _run(source: str, coords: torch.Tensor) -> torch.Tensor:
    namespace: dict = {}
    exec(compile(source, "<rotary>", "exec"), namespace)  # noqa: S102 - the test's own source
    return namespace["rotary_phase"](coords, 64)


@pytest.mark.parametrize(("spec", "shape", "stack_dim"), CASES, ids=[c[0] for c in CASES])
def test_summing_einsum_rewrite_equals_the_einsum(spec: str, shape: tuple[int, ...], stack_dim: int):
    source = SOURCE.format(spec=spec, stack_dim=stack_dim)
    outcome = fix_text("rotary.py", source, frozenset(BY_CODE), unsafe=True)
    assert outcome.error is None
    assert "einsum" not in outcome.fixed and ".sum(dim=-1)" in outcome.fixed
    coords = torch.randint(0, 40000, shape).float()
    expected = _run(source, coords.double()).double()
    got = _run(outcome.fixed, coords)
    assert got.dtype == torch.float32 and got.shape == expected.shape
    torch.testing.assert_close(got.double(), expected, rtol=2e-6, atol=1e-3)
    # Under CPU bfloat16 autocast the rewrite stays float32; the einsum does not.
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert _run(outcome.fixed, coords).dtype == torch.float32
        assert _run(source, coords).dtype == torch.bfloat16
    assert fix_text("rotary.py", outcome.fixed, frozenset(BY_CODE), unsafe=True).fixed == outcome.fixed


def test_a_contraction_over_a_stack_of_a_few_axes_is_safe_and_any_other_is_not():
    from ropelint.engine import check_text

    stacked = SOURCE.format(spec="bsa,af->bsf", stack_dim=0)
    fixes = {d.code: d.fix.safety for d in check_text("r.py", stacked, frozenset(BY_CODE)).diagnostics if d.fix}
    assert fixes["RPL003"] == "safe"
    learned = stacked.replace("freqs = torch.stack([inv_freq, 0.5 * inv_freq, 0.25 * inv_freq], dim=0)",
                              "freqs = mixing @ torch.diag(inv_freq)").replace("def rotary_phase(coords, dim,",
                                                                                "def rotary_phase(coords, mixing, dim,")
    fixes = {d.code: d.fix.safety for d in check_text("r.py", learned, frozenset(BY_CODE)).diagnostics if d.fix}
    # Any other contraction is summed term by term (memory of the phase, whatever the contracted size): safe too.
    assert fixes.get("RPL003") == "safe"
    assert "sum(coords.float()[:, :, k][:, :, None] * freqs.float()[k][None, None, :] for k in range(coords.shape[2]))" \
        in fix_text("r.py", learned, frozenset(BY_CODE), unsafe=False).fixed


LEARNED = SOURCE.replace("freqs = torch.stack([inv_freq, 0.5 * inv_freq, 0.25 * inv_freq], dim={stack_dim})",
                         "freqs = mixing.transpose(0, 1) if {stack_dim} else mixing\n"
                         "    freqs = freqs * inv_freq if {stack_dim} == 0 else freqs * inv_freq[:, None]") \
    .replace("def rotary_phase(coords, dim,", "def rotary_phase(coords, mixing, dim,")


@pytest.mark.parametrize(("spec", "shape", "stack_dim"), CASES, ids=[c[0] for c in CASES])
def test_a_contraction_of_unknown_size_is_summed_term_by_term_and_equals_the_einsum(
        spec: str, shape: tuple[int, ...], stack_dim: int):
    """Frequencies mixed by a caller's matrix: nothing bounds the contracted size, so the safe fix adds one
    elementwise term per contracted value (no product over all of them at once). It equals the einsum in
    float64, stays float32 under CPU bf16 autocast (the einsum does not) and is fixed once."""
    source = LEARNED.format(spec=spec, stack_dim=stack_dim)
    outcome = fix_text("rotary.py", source, frozenset(BY_CODE), unsafe=False)
    assert outcome.error is None and outcome.remaining.diagnostics == ()
    assert "einsum" not in outcome.fixed and " for k in range(coords.shape[" in outcome.fixed
    coords = torch.randint(0, 40000, shape).float()
    mixing = torch.rand(3, 32) + 0.5  # [contracted, f]; transposed in the source for stack_dim 1

    def phase(src: str, c: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        namespace: dict = {}
        exec(compile(src, "<rotary>", "exec"), namespace)  # noqa: S102 - the test's own source
        return namespace["rotary_phase"](c, m, 64)

    expected = phase(source.replace("coords.float()", "coords"), coords.double(), mixing.double())
    got = phase(outcome.fixed, coords, mixing)
    assert got.dtype == torch.float32 and got.shape == expected.shape
    torch.testing.assert_close(got.double(), expected, rtol=2e-6, atol=1e-3)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert phase(outcome.fixed, coords, mixing).dtype == torch.float32
        assert phase(source, coords, mixing).dtype == torch.bfloat16
    assert fix_text("rotary.py", outcome.fixed, frozenset(BY_CODE), unsafe=False).fixed == outcome.fixed


def test_a_stack_returned_by_a_helper_of_the_file_counts_as_a_few_axes():
    """RoPE-Mixed: `coords = init_coords(w, h)` returns `torch.stack([t_x, t_y], dim=-1)`, contracted with
    `[2, heads, d]` frequencies under a disabled-autocast guard: the guard goes and the einsum becomes a
    two-term broadcast sum (safe), equal to the einsum in float64 and float32 under CPU bf16 autocast."""
    source = '''import torch


def init_coords(end_x: int, end_y: int):
    t = torch.arange(end_x * end_y, dtype=torch.float32)
    t_x = t % end_x
    t_y = torch.div(t, end_x, rounding_mode="floor")
    return torch.stack([t_x, t_y], dim=-1)


def rotary_phase(freqs, w, h):
    coords = init_coords(w, h)
    with torch.autocast("cpu", enabled=False):
        angles = torch.einsum("nk,khd->hnd", coords, freqs)
    return angles.cos(), angles.sin()
'''
    from ropelint.engine import check_text

    [found] = check_text("r.py", source, frozenset(BY_CODE)).diagnostics
    assert found.code == "RPL004" and found.fix.safety == "safe"
    outcome = fix_text("rotary.py", source, frozenset(BY_CODE), unsafe=False)
    assert "einsum" not in outcome.fixed and "autocast" not in outcome.fixed and outcome.remaining.diagnostics == ()
    fixed_ns: dict = {}
    exec(compile(outcome.fixed, "<fixed>", "exec"), fixed_ns)  # noqa: S102 - the test's own source
    freqs = torch.rand(2, 3, 8) * 0.9 + 0.1
    expected = torch.einsum("nk,khd->hnd", fixed_ns["init_coords"](40, 30).double(), freqs.double())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        cos, sin = fixed_ns["rotary_phase"](freqs, 40, 30)
    assert cos.dtype == torch.float32
    torch.testing.assert_close(cos.double(), expected.cos(), rtol=0, atol=2e-4)
    torch.testing.assert_close(sin.double(), expected.sin(), rtol=0, atol=2e-4)


def test_tensordot_with_dims_zero_is_an_outer_product_and_any_other_contraction_gets_no_rewrite():
    """ESM-style `torch.tensordot(t, inv_freq, dims=0)` runs in bfloat16 under CPU autocast (measured here);
    the rewrite `t[..., None] * inv_freq` stays float32 and equals it; `dims=1` is a contraction that no
    broadcast rewrite reproduces, so it is reported without a fix."""
    source = '''import torch


def tables(seq_len, dim=64, base=10000.0):
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
    t = torch.arange(seq_len, dtype=torch.float32)
    freqs = torch.tensordot(t, inv_freq, dims=0)
    return freqs.cos(), freqs.sin()
'''
    from ropelint.engine import check_text

    [found] = check_text("r.py", source, frozenset(BY_CODE)).diagnostics
    assert found.code == "RPL003" and found.fix.safety == "safe"
    outcome = fix_text("rotary.py", source, frozenset(BY_CODE), unsafe=False)
    assert "    freqs = (t[..., None] * inv_freq)\n" in outcome.fixed and outcome.remaining.diagnostics == ()
    before: dict = {}
    after: dict = {}
    exec(compile(source, "<orig>", "exec"), before)  # noqa: S102 - the test's own source
    exec(compile(outcome.fixed, "<fixed>", "exec"), after)  # noqa: S102
    t = torch.arange(40000, dtype=torch.float64)
    inv = 1.0 / (10000.0 ** (torch.arange(0, 64, 2, dtype=torch.float64) / 64))
    reference = torch.outer(t, inv).cos()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        cos_before, _ = before["tables"](40000)
        cos_after, _ = after["tables"](40000)
    assert (cos_before.double() - reference).abs().max().item() > 0.5  # the bf16 phase is wrong
    torch.testing.assert_close(cos_after.double(), reference, rtol=0, atol=5e-3)
    contraction = source.replace("dims=0", "dims=1").replace("torch.tensordot(t, inv_freq", "torch.tensordot(t[:, None], inv_freq[None]")
    assert contraction != source
    [found] = check_text("r.py", contraction, frozenset(BY_CODE)).diagnostics
    assert found.code == "RPL003" and found.fix is None


LINEAR_SOURCE = '''import torch
import torch.nn.functional as F


class TimeFreqRotary(torch.nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.dim = dim

    def frequency_matrix(self, device):
        inv = 1.0 / (10000.0 ** (torch.arange(0, self.dim // 2, 2, dtype=torch.float32, device=device) / self.dim))
        mat = torch.zeros(self.dim // 2, 2, device=device)
        mat[: inv.shape[0], 0] = inv
        mat[inv.shape[0]:, 1] = inv
        return mat

    def forward(self, pos):
        return F.linear(pos.float(), {weight})
'''


@pytest.mark.parametrize("weight", ["self.frequency_matrix(pos.device)", "self.frequency_matrix(pos.device).t().T"])
def test_a_linear_phase_over_a_few_coordinates_is_summed_term_by_term(weight: str):
    """`F.linear(coords, freq_matrix)` contracts the coordinate axis: the fix sums one elementwise float32 product
    per coordinate (safe), the matrix computed once (a lambda argument). It equals the float64 `F.linear`, stays
    float32 under CPU bf16 autocast (the original does not), and exports."""
    source = LINEAR_SOURCE.format(weight=weight)
    outcome = fix_text("rotary.py", source, frozenset(BY_CODE), unsafe=False)
    assert "F.linear" not in outcome.fixed and "(lambda a, w: sum(a[..., k, None] * w[:, k]" in outcome.fixed
    namespace: dict = {}
    exec(compile(outcome.fixed, "<fixed>", "exec"), namespace)  # noqa: S102 - the test's own source
    original: dict = {}
    exec(compile(source, "<original>", "exec"), original)  # noqa: S102
    fixed, before = namespace["TimeFreqRotary"](), original["TimeFreqRotary"]()
    pos = torch.stack([torch.arange(0, 60000, 7), torch.arange(0, 60000, 7) % 128], dim=-1)
    expected = torch.nn.functional.linear(pos.double(), before.frequency_matrix(pos.device).double())
    got = fixed(pos)
    assert got.dtype == torch.float32 and got.shape == expected.shape
    torch.testing.assert_close(got.double(), expected, rtol=2e-6, atol=1e-3)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert fixed(pos).dtype == torch.float32 and before(pos).dtype == torch.bfloat16
    exported = torch.export.export(fixed, (pos,))
    torch.testing.assert_close(exported.module()(pos), got, rtol=0, atol=0)
    assert fix_text("rotary.py", outcome.fixed, frozenset(BY_CODE), unsafe=False).fixed == outcome.fixed
