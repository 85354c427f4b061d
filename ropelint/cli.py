"""The command line: ``ropelint check``, ``fix``, ``rules``, ``explain``, ``probe``.

Heavy imports (LibCST, rich, the rules) happen inside the commands so that ``--version`` and
``--help`` start instantly and nothing here ever imports torch.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from . import __version__

FORMATS = ("text", "json", "sarif", "github")


def _console(stderr: bool = False):  # type: ignore[no-untyped-def]
    from rich.console import Console

    return Console(file=sys.stderr if stderr else sys.stdout, highlight=False, soft_wrap=True)


def _selection_options(fn):  # type: ignore[no-untyped-def]
    options = [
        click.option("--select", multiple=True, metavar="CODES", help="Only these codes or prefixes (comma-separated)."),
        click.option("--ignore", multiple=True, metavar="CODES", help="Skip these codes or prefixes."),
        click.option("--extend-select", multiple=True, metavar="CODES", help="Add codes to the selection."),
        click.option("--config", "config_path", type=click.Path(path_type=Path), default=None,
                     help="Read [tool.ropelint] from this pyproject.toml instead of the nearest one."),
        click.option("--no-cache", is_flag=True, help="Neither read nor write the result cache."),
        click.option("--cache-dir", type=click.Path(path_type=Path), default=None,
                     help="Cache folder (default: .ropelint_cache next to the pyproject.toml that configures the run, else in "
                          "the current folder)."),
        click.option("--jobs", "-j", type=click.IntRange(min=1), default=None,
                     help="Worker processes (default: available cores)."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _setup(paths: tuple[Path, ...], select, ignore, extend_select, config_path, helper=None):  # type: ignore[no-untyped-def]
    from .config import ConfigError, load_settings

    start = paths[0] if paths else Path.cwd()
    try:
        return load_settings(start, config_path, tuple(select), tuple(ignore), tuple(extend_select), helper)
    except ConfigError as exc:
        click.echo(f"ropelint: error: {exc}", err=True)
        sys.exit(2)


def _files(paths: tuple[Path, ...], settings) -> list[Path]:  # type: ignore[no-untyped-def]
    from .files import discover

    return [path for path, _ in discover(list(paths) or [Path(".")], settings)]


def _cache(settings, no_cache: bool, cache_dir: Path | None):  # type: ignore[no-untyped-def]
    if no_cache:
        return None
    from .cache import Cache

    # Next to the pyproject.toml that configures the run; without one, in the current folder (as ruff does), never
    # inside the tree being checked.
    base = settings.root if settings.source is not None else Path.cwd()
    return Cache(cache_dir or base / ".ropelint_cache", settings.fingerprint())


class _LazyGroup(click.Group):
    """``probe`` (and the torch-facing code behind it) is imported only when it is asked for."""

    lazy = {"probe": ("ropelint.probe.command", "probe")}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.lazy and name not in self.commands:
            import importlib

            module, attr = self.lazy[name]
            try:
                self.add_command(getattr(importlib.import_module(module), attr), name)
            except ImportError:
                return None
        return super().get_command(ctx, name)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", "-V", prog_name="ropelint", message="%(prog)s %(version)s")
def cli() -> None:
    """Find and fix rotary-position-embedding code that silently loses precision."""


@cli.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--format", "output_format", type=click.Choice(FORMATS), default="text", show_default=True)
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when there are findings.")
@click.option("--quiet", "-q", is_flag=True, help="Only the finding lines: no code frames, no summary.")
@_selection_options
def check(paths, output_format, exit_zero, quiet, select, ignore, extend_select, config_path, no_cache, cache_dir,
          jobs) -> None:  # type: ignore[no-untyped-def]
    """Report RoPE precision traps in PATHS (default: the current folder).

    Exit status: 0 no findings, 1 findings, 2 usage/configuration error or a file that could not be
    read or parsed.
    """
    from .runner import check_paths

    settings = _setup(paths, select, ignore, extend_select, config_path)
    files = _files(paths, settings)
    results, sources = check_paths(files, settings, jobs=jobs, cache=_cache(settings, no_cache, cache_dir))
    diagnostics = [d for r in results for d in r.diagnostics]
    errors = [r.error for r in results if r.error is not None]
    _emit(output_format, diagnostics, errors, sources, quiet=quiet, files_checked=len(files))
    if errors:
        sys.exit(2)
    sys.exit(1 if diagnostics and not exit_zero else 0)


def _emit(output_format, diagnostics, errors, sources, *, quiet, files_checked) -> None:  # type: ignore[no-untyped-def]
    from .reporters import json_format, sarif, text

    if errors:
        text.render_errors(_console(stderr=True), errors)
    if output_format == "json":
        click.echo(json_format.render(diagnostics))
    elif output_format == "sarif":
        click.echo(sarif.render(diagnostics, errors))
    elif output_format == "github":
        for d in diagnostics:
            click.echo(f"::error title=ropelint {d.code},file={d.path},line={d.line},col={d.column},"
                       f"endLine={d.end_line},endColumn={d.end_column}::{d.code} {d.message}")
    else:
        text.render(_console(), diagnostics, errors, sources, quiet=quiet, files_checked=files_checked)


@cli.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--write", is_flag=True, help="Apply the fixes. Without it, print a unified diff and write nothing.")
@click.option("--unsafe-fixes", is_flag=True, help="Also apply fixes marked unsafe.")
@click.option("--helper", "helper_mode", default=None, metavar="import|vendor[=PATH]",
              help="How fixed code reaches the runtime helper: import it from ropelint (default), or copy it "
                   "into your package (beside each fixed file, or at PATH) so ropelint is not needed at run time.")
@click.option("--quiet", "-q", is_flag=True, help="Less output.")
@_selection_options
def fix(paths, write, unsafe_fixes, helper_mode, quiet, select, ignore, extend_select, config_path, no_cache, cache_dir,
        jobs) -> None:  # type: ignore[no-untyped-def]
    """Fix RoPE precision traps in PATHS.

    Without --write: print the diff and change nothing. Exit status: 0 when nothing remains to report
    (and, without --write, nothing would change), 1 otherwise, 2 on errors.
    """
    import difflib

    from . import vendor
    from .fixer import write_atomic
    from .reporters import text as text_reporter
    from .runner import check_paths, fix_sources
    from .source import read_source

    settings = _setup(paths, select, ignore, extend_select, config_path, helper_mode)
    files = _files(paths, settings)
    results, sources = check_paths(files, settings, jobs=jobs, cache=_cache(settings, no_cache, cache_dir))
    errors = [r.error for r in results if r.error is not None]
    vendored: dict[Path, str] = {}  # helper copies to create: path -> text
    remaining = []
    changed_files = 0
    applied = 0
    # In diff mode stdout carries only the patch (so it can be piped to `git apply`); the rest goes to stderr.
    out = _console(stderr=not write)
    pending = []
    for result in results:
        if result.error is not None or not result.diagnostics:
            continue
        source = sources.get(result.path) or read_source(Path(result.path))
        pending.append((result.path, source, settings.codes_for(source.path), unsafe_fixes))
    outcomes = fix_sources(pending, jobs=jobs)
    for (display, source, _, _), outcome in zip(pending, outcomes):
        if outcome.error is not None:
            errors.append(outcome.error)
        remaining.extend(outcome.remaining.diagnostics)
        if not outcome.changed:
            continue
        fixed = outcome.fixed
        if settings.helper.startswith("vendor") and vendor.IMPORT_MODULE in fixed:
            # A relative PATH is relative to the pyproject.toml that set it, else to the current folder.
            target = vendor.target_for(source.path, settings.helper, settings.root if settings.source else Path.cwd())
            fixed = vendor.apply(fixed, outcome.original, source.path, target)
            current = target.read_text(encoding="utf-8") if target.exists() else None
            if current is None or vendor.staleness(current) is not None:
                vendored[target] = vendor.vendored_text()
        changed_files += 1
        applied += outcome.applied
        if write:
            write_atomic(source.path, source.encode(fixed))
        else:
            diff = difflib.unified_diff(
                outcome.original.splitlines(keepends=True), fixed.splitlines(keepends=True),
                fromfile=f"a/{display}", tofile=f"b/{display}",
            )
            sys.stdout.write("".join(diff))
    for target, text in sorted(vendored.items()):
        if write:
            target.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(target, text.encode("utf-8"))
        elif not quiet:
            out.print(f"would write the runtime helper to {target}", soft_wrap=True, markup=False)
    if errors:
        text_reporter.render_errors(_console(stderr=True), errors)
    if not quiet:
        from rich.text import Text

        verb = "Fixed" if write else "Would fix"
        out.print(Text(f"{verb} {applied} finding{'s' if applied != 1 else ''} in {changed_files} "
                       f"file{'s' if changed_files != 1 else ''}; {len(remaining)} remaining.", style="bold"),
                  soft_wrap=True)
        unsafe_left = sum(1 for d in remaining if d.fix is not None and d.fix.safety == "unsafe")
        if unsafe_left and not unsafe_fixes:
            out.print(Text(f"{unsafe_left} of them have unsafe fixes: review them with `ropelint check`, then "
                           f"rerun with --unsafe-fixes.", style="dim"), soft_wrap=True)
    if remaining and not quiet:
        for d in remaining:
            out.print(f"{d.path}:{d.line}:{d.column}: {d.code} {d.message}", soft_wrap=True, markup=False)
    if errors:
        sys.exit(2)
    sys.exit(1 if remaining or (changed_files and not write) else 0)


@cli.command()
def rules() -> None:
    """List every rule: code, name, default and fix availability."""
    from rich.table import Table

    from .catalogue import CATALOGUE as ALL_RULES

    table = Table(title="ropelint rules", show_lines=False)
    for column in ("Code", "Name", "Default", "Fix", "Summary"):
        table.add_column(column, no_wrap=column in ("Code", "Name"))
    for rule in ALL_RULES:
        table.add_row(rule.code, rule.name, "on" if rule.default_enabled else "off", rule.fix_availability,
                      rule.summary)
    _console().print(table)


@cli.command()
@click.argument("code")
def explain(code: str) -> None:
    """Show the document of rule CODE (e.g. RPL001)."""
    from rich.markdown import Markdown

    from . import docs
    from .catalogue import INFO

    if code.upper() not in INFO:
        click.echo(f"ropelint: error: unknown rule code {code!r} (see `ropelint rules`)", err=True)
        sys.exit(2)
    doc = docs.load(code)
    if doc is None:
        click.echo(f"ropelint: error: no document found for {code.upper()}", err=True)
        sys.exit(2)
    _console().print(Markdown(doc.text))


def main() -> None:
    cli(prog_name="ropelint")
