"""Configuration: ``[tool.ropelint]`` in the nearest pyproject.toml, then command-line overrides."""

from __future__ import annotations

import fnmatch
import hashlib
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from .catalogue import CATALOGUE, INFO

KNOWN_KEYS = {"select", "ignore", "extend-select", "exclude", "extend-exclude", "per-file-ignores", "helper"}
DEFAULT_EXCLUDE = (
    ".git", ".hg", ".svn", ".bzr", ".venv", "venv", ".tox", ".nox", "__pycache__", "build", "dist",
    "node_modules", "site-packages", ".eggs", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".ropelint_cache",
    "_build", "buck-out",
)


_EXCLUDE_CACHE: dict[tuple[str, ...], "re.Pattern[str]"] = {}


class ConfigError(Exception):
    """A configuration problem: unknown key, unknown rule code, malformed file. Exit status 2."""


@dataclass(frozen=True)
class Settings:
    selected: frozenset[str]
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    per_file_ignores: tuple[tuple[str, frozenset[str]], ...] = ()
    root: Path = field(default_factory=Path.cwd)
    helper: str = "import"
    source: str | None = None  # the pyproject.toml it came from

    def codes_for(self, path: Path) -> frozenset[str]:
        if not self.per_file_ignores:
            return self.selected
        rel = _relative(path, self.root)
        drop: set[str] = set()
        for pattern, codes in self.per_file_ignores:
            if fnmatch.fnmatch(rel, pattern) or fnmatch.fnmatch(path.name, pattern):
                drop |= codes
        return frozenset(c for c in self.selected if not any(c.startswith(d) for d in drop))

    def is_excluded(self, path: Path, rel: str | None = None) -> bool:
        """``rel``: the path relative to the settings root, when the caller already knows it."""
        if rel is None:
            rel = _relative(path, self.root)
        return self._exclude_regex().match(path.name) is not None or self._exclude_regex().match(rel) is not None

    def _exclude_regex(self) -> re.Pattern[str]:
        # One compiled alternation instead of an fnmatch per pattern per file: discovery is hot.
        cached = _EXCLUDE_CACHE.get(self.exclude)
        if cached is None:
            parts = []
            for pattern in self.exclude:
                parts.append(fnmatch.translate(pattern))
                parts.append(fnmatch.translate(pattern.rstrip("/") + "/*"))
            cached = re.compile("|".join(f"(?:{p})" for p in parts) or "(?!)")
            _EXCLUDE_CACHE[self.exclude] = cached
        return cached

    def fingerprint(self) -> str:
        """Everything that changes a file's findings, for the cache key."""
        data = json.dumps([sorted(self.selected), self.per_file_ignores and [[p, sorted(c)] for p, c in self.per_file_ignores], self.helper])
        return hashlib.sha256(data.encode()).hexdigest()[:16]


def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def expand_codes(values: list[str] | tuple[str, ...], where: str) -> set[str]:
    """Codes or prefixes (``RPL00``, ``RPL``, ``ALL``) to the set of rule codes they name."""
    out: set[str] = set()
    for raw in values:
        value = raw.strip().upper()
        if not value:
            continue
        if value == "ALL":
            out |= set(INFO)
            continue
        matched = {code for code in INFO if code.startswith(value)}
        if not matched:
            raise ConfigError(f"{where}: unknown rule code or prefix {raw!r}")
        out |= matched
    return out


def find_pyproject(start: Path) -> Path | None:
    current = start.resolve()
    if current.is_file():
        current = current.parent
    for folder in (current, *current.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def _read_table(path: Path) -> dict:
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read configuration: {exc}") from None
    table = data.get("tool", {}).get("ropelint", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.ropelint] must be a table")
    return table


def _list(table: dict, key: str, where: str) -> list[str]:
    value = table.get(key, [])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: `{key}` must be a list of strings")
    return value


def load_settings(
    start: Path,
    config: Path | None = None,
    select: tuple[str, ...] = (),
    ignore: tuple[str, ...] = (),
    extend_select: tuple[str, ...] = (),
    helper: str | None = None,
) -> Settings:
    path = config if config is not None else find_pyproject(start)
    table: dict = {}
    if config is not None and not config.is_file():
        raise ConfigError(f"{config}: configuration file not found")
    if path is not None:
        table = _read_table(path)
    where = f"{path} [tool.ropelint]" if path else "configuration"
    unknown = set(table) - KNOWN_KEYS
    if unknown:
        raise ConfigError(f"{where}: unknown key {sorted(unknown)[0]!r} (known: {', '.join(sorted(KNOWN_KEYS))})")

    selected = {rule.code for rule in CATALOGUE if rule.default_enabled}
    if "select" in table:
        selected = expand_codes(_list(table, "select", where), f"{where} select")
    selected |= expand_codes(_list(table, "extend-select", where), f"{where} extend-select")
    selected -= expand_codes(_list(table, "ignore", where), f"{where} ignore")
    if select:
        selected = expand_codes(_split(select), "--select")
    selected |= expand_codes(_split(extend_select), "--extend-select")
    selected -= expand_codes(_split(ignore), "--ignore")

    exclude = tuple(_list(table, "exclude", where)) if "exclude" in table else DEFAULT_EXCLUDE
    exclude += tuple(_list(table, "extend-exclude", where))
    pfi = table.get("per-file-ignores", {})
    if not isinstance(pfi, dict):
        raise ConfigError(f"{where}: `per-file-ignores` must be a table of pattern = [codes]")
    per_file = tuple(
        (pattern, frozenset(expand_codes(_list(pfi, pattern, where), f"{where} per-file-ignores"))) for pattern in pfi
    )
    helper_mode = helper or table.get("helper", "import")
    if not isinstance(helper_mode, str) or not (helper_mode == "import" or helper_mode.startswith("vendor")):
        raise ConfigError(f"{where}: `helper` must be \"import\" or \"vendor\" or \"vendor=PATH\"")
    root = path.parent if path is not None else start.resolve() if start.is_dir() else start.resolve().parent
    return Settings(frozenset(selected), exclude, per_file, root, helper_mode, str(path) if path else None)


def _split(values: tuple[str, ...]) -> list[str]:
    return [part for value in values for part in value.split(",")]
