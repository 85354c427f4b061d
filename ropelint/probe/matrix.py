"""The probe matrix: which cases run, at which positions, under which autocast.

Defaults follow ROPE_NOTES section 4: module converted to {float16, bfloat16} x converted
back to float32 {no, yes} x (head_dim, base) in {(64, 1e4), (128, 5e5)} x autocast
{off, cpu-bf16, cpu-fp16} = 24 cases, plus 6 float32 controls.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Iterator, Sequence

from ropelint.probe.results import Case

MODULE_DTYPES: tuple[str, ...] = ("float16", "bfloat16")
DEFAULT_PAIRS: tuple[tuple[int, float], ...] = ((64, 1e4), (128, 5e5))
DEFAULT_HEAD_DIMS: tuple[int, ...] = tuple(d for d, _ in DEFAULT_PAIRS)
DEFAULT_BASES: tuple[float, ...] = tuple(b for _, b in DEFAULT_PAIRS)
CPU_AUTOCASTS: tuple[str, ...] = ("off", "cpu-bf16", "cpu-fp16")
CUDA_AUTOCASTS: tuple[str, ...] = ("cuda-bf16", "cuda-fp16")
ALL_AUTOCASTS: tuple[str, ...] = CPU_AUTOCASTS + CUDA_AUTOCASTS


def default_positions() -> tuple[int, ...]:
    """Sampled positions, sorted and unique (about 2400 of them).

    Dense to 2112 (bfloat16 breaks at 257, float16 at 2049), every 97th up to 32769 (97 is
    prime, so the samples do not line up with powers of two), the bfloat16 collapse around
    8192, the 2**15 edge, and the far end around 2**17 where phase errors are largest.
    """
    picked = set(range(0, 2113))
    picked.update(range(2048, 32770, 97))
    picked.update(range(8184, 8196))
    picked.update((32767, 32768, 32769))
    picked.update(range(131070, 131074))
    return tuple(sorted(picked))


def parse_positions(spec: str) -> tuple[int, ...]:
    """Parse ``'0-2048,4096,8000-9000:7,default'`` (ranges inclusive, ``:step`` optional).

    ``default`` inserts the default sample, so ``default,200000`` widens it.
    """
    picked: set[int] = set()
    for raw in spec.split(","):
        item = raw.strip()
        if not item:
            continue
        if item == "default":
            picked.update(default_positions())
            continue
        match = re.fullmatch(r"(\d+)(?:-(\d+)(?::(\d+))?)?", item)
        if match is None:
            raise ValueError(f"bad position {item!r}: use N, A-B or A-B:STEP")
        start = int(match.group(1))
        stop = int(match.group(2)) if match.group(2) is not None else start
        step = int(match.group(3)) if match.group(3) is not None else 1
        if stop < start or step < 1:
            raise ValueError(f"bad position range {item!r}")
        picked.update(range(start, stop + 1, step))
    if not picked:
        raise ValueError("no positions given")
    return tuple(sorted(picked))


def parse_numbers(spec: str, kind: type[int] | type[float]) -> tuple[float, ...] | tuple[int, ...]:
    """Parse ``'64,128'`` or ``'1e4,5e5'``."""
    values = []
    for raw in spec.split(","):
        if raw.strip():
            number = float(raw)
            if kind is int:
                if number != int(number) or number <= 0 or int(number) % 2:
                    raise ValueError(f"head dim must be a positive even integer, got {raw!r}")
                values.append(int(number))
            else:
                if number <= 1.0:
                    raise ValueError(f"base must be greater than 1, got {raw!r}")
                values.append(number)
    if not values:
        raise ValueError(f"nothing in {spec!r}")
    return tuple(values)  # type: ignore[return-value]


def pairs_from(
    head_dims: Sequence[int] | None, bases: Sequence[float] | None
) -> tuple[tuple[int, float], ...]:
    """The notes' two pairs by default; the cross product once either axis is given."""
    if head_dims is None and bases is None:
        return DEFAULT_PAIRS
    dims = tuple(head_dims) if head_dims is not None else DEFAULT_HEAD_DIMS
    bs = tuple(bases) if bases is not None else DEFAULT_BASES
    return tuple(dict.fromkeys((d, b) for d in dims for b in bs))


def default_autocasts(cuda_available: bool) -> tuple[str, ...]:
    return ALL_AUTOCASTS if cuda_available else CPU_AUTOCASTS


def build_cases(
    pairs: Iterable[tuple[int, float]], autocasts: Sequence[str], activations: str = "module"
) -> tuple[Case, ...]:
    """Matrix cases first (dtype, cast-back, pair, autocast), then the float32 controls."""
    pairs = tuple(pairs)
    if activations not in ("module", "autocast"):
        raise ValueError(f"unknown activations {activations!r}; choose module or autocast")
    for name in autocasts:
        if name not in ALL_AUTOCASTS:
            raise ValueError(f"unknown autocast {name!r}; choose from {', '.join(ALL_AUTOCASTS)}")
    cases = [
        Case(dtype, cast_back, dim, base, autocast, control=False, activations=activations)
        for dtype in MODULE_DTYPES
        for cast_back in (False, True)
        for dim, base in pairs
        for autocast in autocasts
    ]
    cases += [
        Case("float32", False, dim, base, autocast, control=True, activations=activations)
        for dim, base in pairs
        for autocast in autocasts
    ]
    return tuple(cases)


def device_of(autocast: str) -> str:
    """CUDA autocast cases run the module on the GPU; everything else on the CPU."""
    return "cuda" if autocast.startswith("cuda") else "cpu"


@contextlib.contextmanager
def autocast_context(autocast: str) -> Iterator[None]:
    import torch

    if autocast == "off":
        yield
        return
    device, short = autocast.split("-")
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[short]
    with torch.autocast(device, dtype=dtype):
        yield
