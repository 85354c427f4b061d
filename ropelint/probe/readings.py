"""Turn whatever a rotary module returns into cos/sin (or phase) rows to compare.

Modules return a (cos, sin) pair, one stacked or concatenated table, complex ``freqs_cis``,
or the phase itself, with any number of singleton dims around the sequence. A ``Reading``
names one interpretation; discovery picks the one that matches the float32 reference and
every case then reads its output the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

FORMS = ("pair", "complex", "stacked_last", "stacked_first", "concat", "phase")
LAYOUTS = ("plain", "half", "interleaved")


class ReadError(Exception):
    """The output does not have the shape this reading expects."""


@dataclass(frozen=True)
class Reading:
    form: str  # one of FORMS
    layout: str  # "plain": one column per frequency; "half"/"interleaved": each twice

    def describe(self) -> str:
        what = {
            "pair": "(cos, sin)",
            "complex": "complex freqs_cis",
            "stacked_last": "stack((cos, sin), -1)",
            "stacked_first": "stack((cos, sin), 0)",
            "concat": "cat((cos, sin), -1)",
            "phase": "the phase",
        }[self.form]
        where = {"plain": "one column per frequency", "half": "half-split",
                 "interleaved": "interleaved"}[self.layout]
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
    return output


def candidate_readings(output: object) -> list[Reading]:
    """Every reading that the output's type admits (shapes are checked when read)."""
    output = _unwrap(output)
    forms: list[str] = []
    if isinstance(output, (tuple, list)):
        if (len(output) >= 2 and all(isinstance(o, torch.Tensor) for o in output[:2])
                and not output[0].is_complex()):
            forms.append("pair")
        elif output and isinstance(output[0], torch.Tensor) and output[0].is_complex():
            forms.append("complex")  # (freqs_cis, ...) with extras after it
    elif isinstance(output, torch.Tensor):
        if output.is_complex():
            forms.append("complex")
        else:
            forms += ["stacked_last", "stacked_first", "concat", "phase"]
    return [Reading(f, layout) for f in forms for layout in LAYOUTS]


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


def read(output: object, reading: Reading, *, half: int, rows: torch.Tensor | None,
         expected_rows: int) -> Table:
    """Apply ``reading`` to ``output``; raise ReadError if it does not fit.

    ``half`` is head_dim // 2. ``rows`` holds the positions to index when the module
    returned a table for 0..N-1, and is None when it was given the positions directly.
    """
    output = _unwrap(output)
    width = _width(reading.layout, half)

    def finish(t: torch.Tensor) -> torch.Tensor:
        t = _select(t, rows, expected_rows)
        if t.shape[-1] != width:
            raise ReadError(f"width {t.shape[-1]}, expected {width} for {reading.layout}")
        return t.detach().to(device="cpu", dtype=torch.float64)

    if reading.form == "pair":
        if not isinstance(output, (tuple, list)) or len(output) < 2:
            raise ReadError(f"expected a (cos, sin) pair, got {summarize(output)}")
        cos, sin = output[0], output[1]
        if not (isinstance(cos, torch.Tensor) and isinstance(sin, torch.Tensor)):
            raise ReadError(f"expected a (cos, sin) pair, got {summarize(output)}")
        if cos.is_complex() or sin.is_complex() or cos.shape != sin.shape:
            raise ReadError(f"expected two real tensors of one shape, got {summarize(output)}")
        return Table("trig", finish(_rows_2d(cos, 1)), finish(_rows_2d(sin, 1)), cos.dtype)
    if reading.form == "complex" and isinstance(output, (tuple, list)) and output:
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
    if reading.form == "stacked_last":
        if output.shape[-1] != 2:
            raise ReadError(f"last dim is {output.shape[-1]}, not 2")
        table = _rows_2d(output, 2)
        return Table("trig", finish(table[..., 0]), finish(table[..., 1]), output.dtype)
    if reading.form == "stacked_first":
        lead = [s for s in output.shape[:-2] if s != 1]
        if not lead or lead[0] != 2:
            raise ReadError(f"tensor{list(output.shape)} is not stacked on a leading dim of 2")
        squeezed = output.reshape(*lead, *output.shape[-2:])
        return Table("trig", finish(_rows_2d(squeezed[0], 1)), finish(_rows_2d(squeezed[1], 1)),
                     output.dtype)
    if reading.form == "concat":
        table = _rows_2d(output, 1)
        if table.shape[-1] != 2 * width:
            raise ReadError(f"width {table.shape[-1]}, expected {2 * width} for cat((cos, sin))")
        return Table("trig", finish(table[:, :width]), finish(table[:, width:]), output.dtype)
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

