"""The ``ropelint probe`` click command. torch is imported only when the command runs."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import click
from rich.console import Console

from ropelint.probe.loader import (
    LoadError,
    load_file,
    resolve_symbol,
    rotary_symbols,
    split_target,
)
from ropelint.probe.matrix import (
    ALL_AUTOCASTS,
    pairs_from,
    parse_numbers,
    parse_positions,
)
from ropelint.probe.render import json_document, render_error_text, render_text
from ropelint.probe.results import ProbeReport

TORCH_MISSING = "ropelint probe needs torch: pip install 'ropelint[torch]'"
# Share of the physical memory the probe may map (CPU only).
MEMORY_SHARE = 0.8


def cap_address_space() -> int | None:
    """Cap this process's address space at ``MEMORY_SHARE`` of the physical memory, so that a module
    building something quadratic in the 131074 probe positions fails with an error the candidate loop
    reports, instead of being killed by the kernel with the rest of the run. Not when CUDA is
    available: its driver maps far more address space than it uses. The limit in effect, or None."""
    try:
        import resource

        import torch

        if torch.cuda.is_available():
            return None
        cap = int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * MEMORY_SHARE)
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            cap = min(cap, hard)
        if soft == resource.RLIM_INFINITY or soft > cap:
            resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
            return cap
        return soft  # a tighter limit is already in place (an earlier probe in this process, or the caller's)
    except (ImportError, ValueError, OSError, AttributeError):  # no ``resource`` (Windows), no sysconf
        pass
    return None

HELP = """Run rotary classes or functions through the precision matrix and report which
cases keep float32 accuracy.

TARGET is PATH::SYMBOL (a class or a function; dotted names reach nested classes) or
PATH alone, which probes every rotary class and function in the file.

WARNING: probing imports PATH, which runs its code exactly as `python PATH` would.
Probe only code you trust.

The matrix: the module converted to float16 and bfloat16, converted back to float32 or
not, at (head_dim, base) = (64, 1e4) and (128, 5e5), with autocast off, cpu-bf16 and
cpu-fp16: 24 cases, plus 6 controls that keep the module in float32 (CUDA autocast cases
are added when CUDA is available). Each output is compared with a float64 reference at
positions 0..32769 (sampled) and near 131072, with a per-position tolerance of
2*(pos+1)*2**-24 + 2**-23, plus one ulp of the reference for bfloat16/float16 output.

The constructor and the call are inferred from parameter names (dim, head_dim, rotary_dim,
kv_channels, n_elem, ...; base, theta, rope_theta, rotary_base, ...; config; hidden_size
with num_heads is one head of head_dim; forward(x, position_ids), forward(x, seq_len=...),
forward(x, seq_dim=...), forward(position_ids), forward(max_seq_len), forward(q, k);
functions such as (seq_len, dim, dtype=...), (dim, end, theta) or (x, positions, dim,
base)). A config parameter gets its annotated class (built with its defaults, then
overlaid), else a stand-in with every common field, flat or with per-layer-type
rope_parameters. Each candidate runs once in float32, and the first whose output matches
the reference fixes how every case is called and read: (cos, sin) or (sin, cos), a
stacked or concatenated table, complex freqs_cis, the phase, or the activation handed back
rotated (then the input is a basis row, and cos/sin are read off the output). When nothing
matches, the output is measured as it is if it is the reference's rotary computed
imprecisely; otherwise the probe says what it is instead (scaled, multi-axis, not a
rotary) and exits 2. When that fails, give the constructor and call with --init and --call.

Scaling: the reference is the unscaled rotary base**(-2i/head_dim), so the probe switches
scaling off where it can: scaling factors (scaling_factor, scale_factor, factor,
seq_len_interpolation_factor, ...) become 1, rope types "default", per-frequency factor
lists (LongRoPE) all ones, rotary fractions 1, and each layer type gets the case's base.
Maximum-length parameters keep their defaults (a regrowing cache is then measured as
real runs use it) unless the defaults cannot serve the probed positions; then they are
raised to cover them, which also keeps dynamic NTK scaling off. The "called as" line names
every value the probe chose.

Exit status: 0 when every case passes, 1 when any fails, 2 when a target cannot be
imported, built or called (or torch is missing).
"""


def _parse(option: str, parser, value: str | None):  # type: ignore[no-untyped-def]
    if value is None:
        return None
    try:
        return parser(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=option) from exc


def _autocasts(value: str) -> tuple[str, ...]:
    names = tuple(v.strip() for v in value.split(",") if v.strip())
    unknown = [n for n in names if n not in ALL_AUTOCASTS]
    if unknown or not names:
        raise ValueError(f"unknown autocast {', '.join(unknown) or value!r}; "
                         f"choose from {', '.join(ALL_AUTOCASTS)}")
    return names


def _expand_targets(targets: Sequence[str]) -> list[tuple[str, str] | tuple[str, str, str]]:
    """(path, symbol) per symbol to probe, or (path, '', error) when a file yields none."""
    expanded: list[tuple[str, str] | tuple[str, str, str]] = []
    for spec in targets:
        path, symbol = split_target(spec)
        if symbol is not None:
            expanded.append((path, symbol))
            continue
        try:
            symbols = rotary_symbols(path)
        except (OSError, SyntaxError, UnicodeDecodeError) as exc:
            expanded.append((path, "", f"cannot read {path}: {exc}"))
            continue
        if not symbols:
            expanded.append((path, "", f"no rotary class or function found in {path}"))
        expanded.extend((path, s) for s in symbols)
    return expanded


@click.command("probe", help=HELP, short_help="Measure rotary code against a float64 reference "
               "(imports and runs the file).")
@click.argument("targets", nargs=-1, required=True, metavar="TARGET...")
@click.option("--positions", metavar="SPEC",
              help="Positions: N, A-B, A-B:STEP or 'default', comma-separated "
                   "(e.g. 'default,262143' widens, '0-4096' narrows).")
@click.option("--head-dims", metavar="LIST",
              help="Head dims, e.g. '64,128'. With --bases the two are crossed; "
                   "by default (64, 1e4) and (128, 5e5) are paired.")
@click.option("--bases", metavar="LIST", help="Rotary bases, e.g. '1e4,5e5'.")
@click.option("--autocast", "autocast_spec", metavar="LIST",
              help=f"Autocast modes to run, from {', '.join(ALL_AUTOCASTS)}.")
@click.option("--init", "init_spec", metavar="ARGS",
              help="Constructor arguments, e.g. 'size={head_dim},freq={base},max_len=4096'. "
                   "{head_dim}/{base} take each case's values, {max_positions} a length "
                   "covering every probed position; a literal for a dim/base parameter pins "
                   "the matrix to it.")
@click.option("--call", "call_spec", metavar="ARGS",
              help="Call arguments, e.g. '{x},position_ids={positions}' or "
                   "'dim={head_dim},end={seq_len},theta={base}'. Placeholders: {x}, "
                   "{positions} ([1, S] int64), {positions_1d}, {seq_len}, {dtype}, {device}, "
                   "{head_dim}, {base}, {config}, {layer_type}.")
@click.option("--export", "check_export", is_flag=True,
              help="Also check torch.export with a dynamic sequence length.")
@click.option("--meta", "check_meta", is_flag=True,
              help="Also check meta-device forward and meta -> to_empty -> load_state_dict.")
@click.option("--warm-up", "warm_up", is_flag=True,
              help="Run one float32 forward before each conversion, as a model used before `.half()` is "
                   "(catches state a module builds lazily on its first forward).")
@click.option("--activations", type=click.Choice(["module", "autocast"]), default="module", show_default=True,
              help="Dtype of the activations fed in: the module's, or under autocast the autocast dtype (as "
                   "queries and keys come out of autocast's linear layers; a float16 module's own "
                   "`torch.cat` of float16 activations raises under CPU bfloat16 autocast).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@click.pass_context
def probe(ctx: click.Context, targets: tuple[str, ...], positions: str | None,
          head_dims: str | None, bases: str | None, autocast_spec: str | None,
          init_spec: str | None, call_spec: str | None, check_export: bool, check_meta: bool,
          warm_up: bool, activations: str, fmt: str) -> None:
    try:
        import torch  # noqa: F401  (only to fail early and clearly)
    except ImportError:
        click.echo(TORCH_MISSING, err=True)
        ctx.exit(2)

    cap_address_space()
    from ropelint.probe.invoke import ProbeSetupError
    from ropelint.probe.runner import run_matrix

    position_list = _parse("--positions", parse_positions, positions)
    dims = _parse("--head-dims", lambda v: parse_numbers(v, int), head_dims)
    base_list = _parse("--bases", lambda v: parse_numbers(v, float), bases)
    autocasts = _parse("--autocast", _autocasts, autocast_spec)
    pairs = pairs_from(dims, base_list) if (dims or base_list) else None

    console = Console(width=None if sys.stdout.isatty() else 140)
    errors = Console(stderr=True, width=None if sys.stderr.isatty() else 140)
    entries: list[ProbeReport | tuple[str, str]] = []
    loaded: dict[str, object] = {}
    for item in _expand_targets(targets):
        path, symbol = item[0], item[1]
        name = f"{path}::{symbol}" if symbol else path
        if len(item) == 3:
            entries.append((name, item[2]))  # type: ignore[misc]
            render_error_text(name, item[2], errors)  # type: ignore[misc]
            continue
        try:
            if path not in loaded:
                loaded[path] = load_file(path)
            target = resolve_symbol(loaded[path], symbol, path)  # type: ignore[arg-type]
            report = run_matrix(target, positions=position_list, head_dims_bases=pairs,
                                autocasts=autocasts, init=init_spec, call=call_spec,
                                export=check_export, meta=check_meta, symbol=name, warm_up=warm_up,
                                activations=activations)
        except (LoadError, ProbeSetupError) as exc:
            entries.append((name, str(exc)))
            render_error_text(name, str(exc), errors)
            continue
        entries.append(report)
        if fmt == "text":
            render_text(report, console)

    if fmt == "json":
        click.echo(json_document(entries))
    if any(not isinstance(e, ProbeReport) for e in entries):
        ctx.exit(2)
    ctx.exit(0 if all(e.ok for e in entries if isinstance(e, ProbeReport)) else 1)
