from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

EXAMPLE = ROOT / "examples" / "llama_rotary_438.py"

GOOD = '''import torch
from torch import nn


class RotaryEmbedding(nn.Module):
    """The float32 recompute pattern: nothing a module cast or autocast can round."""

    def __init__(self, dim: int, base: float = 10000.0):
        super().__init__()
        self.dim = dim
        self.base = base

    def forward(self, x, position_ids):
        inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2, dtype=torch.float32,
                                                        device=position_ids.device) / self.dim))
        freqs = position_ids[:, :, None].float() * inv_freq[None, None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)
'''


@pytest.fixture
def bad_file(tmp_path: Path) -> Path:
    target = tmp_path / "rotary.py"
    shutil.copy(EXAMPLE, target)
    return target


@pytest.fixture
def good_file(tmp_path: Path) -> Path:
    target = tmp_path / "good.py"
    target.write_text(GOOD)
    return target


def run_cli(*args: str, cwd: Path | None = None, env: dict | None = None):
    """Invoke the CLI in-process through click's runner, from ``cwd``."""
    import os

    from click.testing import CliRunner

    from ropelint.cli import cli

    old = Path.cwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)
    finally:
        os.chdir(old)
