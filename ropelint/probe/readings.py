"""Turn whatever a rotary module returns into cos/sin (or phase) rows to compare.

Modules return a (cos, sin) pair (or (sin, cos), or a dict), one stacked or concatenated
table, complex ``freqs_cis``, the phase itself, or the activation they were given, rotated;
with any number of singleton dims around the sequence. A ``Reading``
names one interpretation; discovery picks the one that matches the float32 reference and
every case then reads its output the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

FORMS = ("pair", "pair_sin_first", "complex", "stacked_last", "stacked_first",
         "stacked_penultimate", "concat", "concat_sin_first", "phase", "rotated")
LAYOUTS = ("plain", "half", "interleaved")


class ReadError(Exception):
    """The output does not have the shape this reading expects."""


@dataclass(frozen=True)
class Reading:
    form: str  # one of FORMS
    # "plain": one column per frequency; "half"/"interleaved": each twice. For "rotated",
    # the channel pairing of the rotation (and so of the basis row fed in).
    layout: str

    @property
    def compare_layout(self) -> str:
        """Layout of the table ``read`` returns (a rotated activation decodes to plain)."""
        return "plain" if self.form == "rotated" else self.layout

    @property
    def pattern(self) -> str:
        """Basis pattern of the activation to feed: it matters only for a rotated output."""
        return self.layout if self.form == "rotated" else "half"

    def describe(self) -> str:
        what = {
            "pair": "(cos, sin)",
            "pair_sin_first": "(sin, cos)",
            "complex": "complex freqs_cis",
            "stacked_last": "stack((cos, sin), -1)",
            "stacked_first": "stack((cos, sin), 0)",
            "stacked_penultimate": "stack((cos, sin), -2)",
            "concat": "cat((cos, sin), -1)",
            "concat_sin_first": "cat((sin, cos), -1)",
            "phase": "the phase",
            "rotated": "the activation rotated (cos/sin read back from a basis input)",
        }[self.form]
        where = {"plain": "one column per frequency", "half": "half-split",
                 "interleaved": "interleaved"}[self.layout]
        if self.form == "rotated":
            where = {"half": "rotate-half pairs (i, i + d/2)",
                     "interleaved": "interleaved pairs (2i, 2i + 1)"}[self.layout]
        return f"{what}, {where}"


@dataclass(frozen=True)
class Table:
    """Rows of the output at the probed positions, float64 on the CPU.

    ``first`` is cos (or the phase), ``second`` is sin (None for a phase).
    """

    kind: str  # "trig" | "phase"
    first: torch.Tensor
    second: torch.Tensor | None
    dtype: torch.dtype  # dtype the module returned


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def summarize(output: object) -> str:
    """Short description of an output for error messages."""
    if isinstance(output, torch.Tensor):
        return f"tensor{list(output.shape)} {dtype_name(output.dtype)}"
    if isinstance(output, (tuple, list)):
        inner = ", ".join(summarize(o) for o in output[:4])
        return f"{type(output).__name__}({inner}{', ...' if len(output) > 4 else ''})"
    return type(output).__name__


def _unwrap(output: object) -> object:
    while isinstance(output, (tuple, list)) and len(output) == 1:
        output = output[0]
    if isinstance(output, Mapping):
        keys = {k.lower() if isinstance(k, str) else k: k for k in output}
        if "cos" in keys and "sin" in keys:
            return (output[keys["cos"]], output[keys["sin"]])
    elif not isinstance(output, (torch.Tensor, tuple, list)):
        cos, sin = getattr(output, "cos", None), getattr(output, "sin", None)
        if isinstance(cos, torch.Tensor) and isinstance(sin, torch.Tensor):
            return (cos, sin)  # a dataclass or object holding the tables
    return output


def _squeezed(shape: Sequence[int]) -> tuple[int, ...]:
    return tuple(s for s in shape if s != 1)


def rotated_candidate(output: object, x_shape: Sequence[int] | None) -> bool:
    """True when the output (or its first item) has the shape of the activation fed in."""
    if x_shape is None:
        return False
    output = _unwrap(output)
    if isinstance(output, (tuple, list)) and output:
        output = output[0]
    return (isinstance(output, torch.Tensor) and not output.is_complex()
            and _squeezed(output.shape) == _squeezed(x_shape))


def candidate_readings(output: object, x_shape: Sequence[int] | None = None,
                       pattern: str = "half") -> list[Reading]:
    """Every reading that the output's type admits (shapes are checked when read).

    ``x_shape``/``pattern``: the activation fed in and its basis pattern; an output of that
    shape may be the activation rotated (read with ``pattern``).
    """
    output = _unwrap(output)
    forms: list[str] = []
    if isinstance(output, (tuple, list)):
        if (len(output) >= 2 and all(isinstance(o, torch.Tensor) for o in output[:2])
                and not output[0].is_complex()):
            forms += ["pair", "pair_sin_first"]
        elif output and isinstance(output[0], torch.Tensor) and output[0].is_complex():
            forms.append("complex")  # (freqs_cis, ...) with extras after it
    elif isinstance(output, torch.Tensor):
        if output.is_complex():
            forms.append("complex")
        else:
            forms += ["stacked_last", "stacked_first", "stacked_penultimate", "concat",
                      "concat_sin_first", "phase"]
    readings = [Reading(f, layout) for f in forms for layout in LAYOUTS]
    if rotated_candidate(output, x_shape):
        readings.append(Reading("rotated", pattern))
    return readings


def _rows_2d(t: torch.Tensor, keep: int) -> torch.Tensor:
    """Drop singleton dims ahead of the last ``keep``; one dim (the rows) must remain."""
    if t.dim() < keep + 1:
        raise ReadError(f"tensor{list(t.shape)} has too few dims")
    lead = [s for s in t.shape[:-keep] if s != 1]
    if len(lead) != 1:
        raise ReadError(f"tensor{list(t.shape)} is not [rows, ...] once singleton dims go")
    return t.reshape(lead[0], *t.shape[-keep:])


def _select(t: torch.Tensor, rows: torch.Tensor | None, expected: int) -> torch.Tensor:
    """Keep the probed rows: all of them (explicit positions) or the indexed ones (0..N-1)."""
    if rows is None:
        if t.shape[0] != expected:
            raise ReadError(f"{t.shape[0]} rows for {expected} positions")
        return t
    if t.shape[0] <= int(rows.max()):
        raise ReadError(f"{t.shape[0]} rows, position {int(rows.max())} asked for")
    return t.index_select(0, rows.to(t.device))


def _width(layout: str, half: int) -> int:
    return half if layout == "plain" else 2 * half


def basis_row(head_dim: int, pattern: str) -> list[float]:
    """The activation row fed to a target that may rotate it.

    One channel of each rotated pair is 1, the other 0, so the rotated row holds cos and
    sin themselves: (1, 0) -> (cos, sin), each rounded once in the output dtype.
    ``half``: pairs are (i, i + d/2); ``interleaved``: pairs are (2i, 2i + 1).
    """
    half = head_dim // 2
    if pattern == "interleaved":
        return [1.0 if i % 2 == 0 else 0.0 for i in range(head_dim)]
    return [1.0] * half + [0.0] * (head_dim - half)


def read(output: object, reading: Reading, *, half: int, rows: torch.Tensor | None,
         expected_rows: int) -> Table:
    """Apply ``reading`` to ``output``; raise ReadError if it does not fit.

    ``half`` is head_dim // 2. ``rows`` holds the positions to index when the module
    returned a table for 0..N-1, and is None when it was given the positions directly.
    """
    output = _unwrap(output)
    width = _width(reading.layout, half)

    def finish(t: torch.Tensor, expect: int = width) -> torch.Tensor:
        t = _select(t, rows, expected_rows)
        if t.shape[-1] != expect:
            raise ReadError(f"width {t.shape[-1]}, expected {expect} for {reading.layout}")
        return t.detach().to(device="cpu", dtype=torch.float64)

    if reading.form in ("pair", "pair_sin_first"):
        if not isinstance(output, (tuple, list)) or len(output) < 2:
            raise ReadError(f"expected a (cos, sin) pair, got {summarize(output)}")
        cos, sin = output[0], output[1]
        if not (isinstance(cos, torch.Tensor) and isinstance(sin, torch.Tensor)):
            raise ReadError(f"expected a (cos, sin) pair, got {summarize(output)}")
        if cos.is_complex() or sin.is_complex() or cos.shape != sin.shape:
            raise ReadError(f"expected two real tensors of one shape, got {summarize(output)}")
        if reading.form == "pair_sin_first":
            cos, sin = sin, cos
        return Table("trig", finish(_rows_2d(cos, 1)), finish(_rows_2d(sin, 1)), cos.dtype)
    if reading.form in ("complex", "rotated") and isinstance(output, (tuple, list)) and output:
        output = output[0]
    if not isinstance(output, torch.Tensor):
        raise ReadError(f"expected a tensor, got {summarize(output)}")
    if reading.form == "complex":
        if not output.is_complex():
            raise ReadError(f"expected complex freqs_cis, got {summarize(output)}")
        table = _rows_2d(output, 1)
        table = _select(table, rows, expected_rows)
        if table.shape[-1] != width:
            raise ReadError(f"width {table.shape[-1]}, expected {width}")
        table = table.detach().to(device="cpu", dtype=torch.complex128)
        return Table("trig", table.real.contiguous(), table.imag.contiguous(), output.dtype)
    if output.is_complex():
        raise ReadError(f"expected a real tensor, got {summarize(output)}")
    if reading.form == "rotated":
        # The activation came back rotated; the basis row put cos and sin in known channels.
        table = finish(_rows_2d(output, 1), 2 * half)
        if reading.layout == "interleaved":
            return Table("trig", table[:, 0::2].contiguous(), table[:, 1::2].contiguous(),
                         output.dtype)
        return Table("trig", table[:, :half].contiguous(), table[:, half:].contiguous(),
                     output.dtype)
    if reading.form == "stacked_last":
        if output.shape[-1] != 2:
            raise ReadError(f"last dim is {output.shape[-1]}, not 2")
        table = _rows_2d(output, 2)
        return Table("trig", finish(table[..., 0]), finish(table[..., 1]), output.dtype)
    if reading.form == "stacked_penultimate":
        if output.dim() < 3 or output.shape[-2] != 2:
            raise ReadError(f"tensor{list(output.shape)} has no dim of 2 before the last")
        table = _rows_2d(output, 2)
        return Table("trig", finish(table[:, 0]), finish(table[:, 1]), output.dtype)
    if reading.form == "stacked_first":
        lead = [s for s in output.shape[:-2] if s != 1]
        if not lead or lead[0] != 2:
            raise ReadError(f"tensor{list(output.shape)} is not stacked on a leading dim of 2")
        squeezed = output.reshape(*lead, *output.shape[-2:])
        return Table("trig", finish(_rows_2d(squeezed[0], 1)), finish(_rows_2d(squeezed[1], 1)),
                     output.dtype)
    if reading.form in ("concat", "concat_sin_first"):
        table = _rows_2d(output, 1)
        if table.shape[-1] != 2 * width:
            raise ReadError(f"width {table.shape[-1]}, expected {2 * width} for cat((cos, sin))")
        first, second = finish(table[:, :width]), finish(table[:, width:])
        if reading.form == "concat_sin_first":
            first, second = second, first
        return Table("trig", first, second, output.dtype)
    if reading.form == "phase":
        return Table("phase", finish(_rows_2d(output, 1)), None, output.dtype)
    raise ReadError(f"unknown form {reading.form!r}")


def expand(reference_half: torch.Tensor, layout: str) -> torch.Tensor:
    """Widen a [S, head_dim/2] reference to the module's layout."""
    if layout == "half":
        return torch.cat((reference_half, reference_half), dim=-1)
    if layout == "interleaved":
        return reference_half.repeat_interleave(2, dim=-1)
    return reference_half
