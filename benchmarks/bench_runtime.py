"""Forward time of the float32 recompute pattern against the cached-buffer shape.

    python benchmarks/bench_runtime.py [--seqs 4096 32768] [--dtype float32|bfloat16]

Both modules produce the same (cos, sin) for head_dim 128, base 5e5, batch 1, on CPU:

* recompute: ``ropelint.runtime.rotary_cos_sin`` rebuilds the inverse frequencies in
  float32 on every forward (what ``ropelint fix`` writes);
* cached: an ``inv_freq`` buffer built once, then the same elementwise product (the
  transformers 5.x shape, which breaks under ``module.to(torch.bfloat16)``).

The printed ratio is recompute time / cached time: below 1 means the recompute is not slower.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from ropelint.runtime import cos_sin, inv_freq, phase, rotary_cos_sin  # noqa: E402

HEAD_DIM = 128
BASE = 5e5


class Recompute(nn.Module):
    def forward(self, x: torch.Tensor, position_ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return rotary_cos_sin(position_ids, HEAD_DIM, BASE, dtype=x.dtype)


class CachedBuffer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("inv_freq", inv_freq(HEAD_DIM, BASE), persistent=False)

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return cos_sin(phase(position_ids, self.inv_freq), dtype=x.dtype)


def time_forward(
    module: nn.Module, x: torch.Tensor, positions: torch.Tensor, repeats: int
) -> float:
    """Median wall time of one forward in seconds, after warm-up."""
    samples = []
    with torch.inference_mode():
        for _ in range(3):
            module(x, positions)
        for _ in range(repeats):
            start = time.perf_counter()
            module(x, positions)
            samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seqs", type=int, nargs="+", default=[4096, 32768])
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)

    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, "
          f"head_dim {HEAD_DIM}, batch 1, activations {args.dtype}")
    print(f"{'seq':>7} {'recompute ms':>13} {'cached ms':>10} {'ratio':>6}")
    recompute, cached = Recompute(), CachedBuffer()
    for seq in args.seqs:
        x = torch.zeros(1, seq, HEAD_DIM, dtype=dtype)
        positions = torch.arange(seq)[None]
        # Interleave the two so drift in machine load hits both alike.
        r_times, c_times = [], []
        for _ in range(3):
            r_times.append(time_forward(recompute, x, positions, args.repeats // 3 + 1))
            c_times.append(time_forward(cached, x, positions, args.repeats // 3 + 1))
        r, c = min(r_times), min(c_times)
        print(f"{seq:>7} {r * 1e3:>13.3f} {c * 1e3:>10.3f} {r / c:>6.2f}")


if __name__ == "__main__":
    main()
