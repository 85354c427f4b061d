"""Forward time of the float32 recompute pattern against the cached-buffer shape.

    python benchmarks/bench_runtime.py [--seqs 4096 32768] [--dtype float32|bfloat16] [--threads N]
                                       [--device cpu|cuda]

Both modules produce the same (cos, sin) for head_dim 128, base 5e5, batch 1, on CPU (or the
GPU with ``--device cuda``; each timed forward then ends in ``torch.cuda.synchronize()``):

* recompute: ``ropelint.runtime.rotary_cos_sin`` rebuilds the inverse frequencies in
  float32 on every forward (what ``ropelint fix`` writes);
* cached: an ``inv_freq`` buffer built once, then exactly the same elementwise product and
  trig (isolates the cost of rebuilding the inverse frequencies);
* hf-5.x: the buffer as transformers 5.x writes it, ``cat((f, f))`` before cos/sin, which
  does the trigonometry on twice as many elements (breaks under ``module.to(bfloat16)``).

``ratio`` is recompute / cached: below 1 means the recompute is not slower. ``vs hf`` is
recompute / hf-5.x.
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


class Hf5Shape(CachedBuffer):
    def forward(self, x: torch.Tensor, position_ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
        freqs = position_ids[..., None].float() * self.inv_freq.float()
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def time_forward(
    module: nn.Module, x: torch.Tensor, positions: torch.Tensor, repeats: int
) -> float:
    """Median wall time of one forward in seconds, after warm-up."""
    samples = []
    # A GPU forward returns before its kernels finish: wait for them inside the timed span.
    sync = torch.cuda.synchronize if x.is_cuda else (lambda: None)
    with torch.inference_mode():
        for _ in range(3):
            module(x, positions)
        sync()
        for _ in range(repeats):
            start = time.perf_counter()
            module(x, positions)
            sync()
            samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seqs", type=int, nargs="+", default=[4096, 32768])
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--threads", type=int, default=None,
                        help="intra-op threads (default: torch's choice)")
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    if args.threads:
        torch.set_num_threads(args.threads)

    device = torch.device(args.device)
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else f"threads {torch.get_num_threads()}"
    print(f"torch {torch.__version__}, {where}, head_dim {HEAD_DIM}, batch 1, activations {args.dtype}")
    print(f"{'seq':>7} {'recompute ms':>13} {'cached ms':>10} {'hf-5.x ms':>10} "
          f"{'ratio':>6} {'vs hf':>6}")
    recompute, cached, hf5 = Recompute().to(device), CachedBuffer().to(device), Hf5Shape().to(device)
    for seq in args.seqs:
        x = torch.zeros(1, seq, HEAD_DIM, dtype=dtype, device=device)
        positions = torch.arange(seq, device=device)[None]
        # Interleave the two so drift in machine load hits both alike.
        times: dict[str, list[float]] = {"r": [], "c": [], "h": []}
        for _ in range(3):
            for key, module in (("r", recompute), ("c", cached), ("h", hf5)):
                times[key].append(time_forward(module, x, positions, args.repeats // 3 + 1))
        r, c, h = (min(times[k]) for k in "rch")
        print(f"{seq:>7} {r * 1e3:>13.3f} {c * 1e3:>10.3f} {h * 1e3:>10.3f} "
              f"{r / c:>6.2f} {r / h:>6.2f}")


if __name__ == "__main__":
    main()
