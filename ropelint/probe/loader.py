"""Find and import the symbols to probe. Importing a file runs its code."""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

from ropelint.probe.signature import LENGTH_NAMES, MAX_POSITION_NAMES, POSITION_NAMES


class LoadError(Exception):
    """The file or symbol could not be loaded."""


def split_target(spec: str) -> tuple[str, str | None]:
    """``'path/to/file.py::Class'`` -> (path, 'Class'); a bare path -> (path, None)."""
    path, sep, symbol = spec.rpartition("::")
    if not sep:
        return spec, None
    if not symbol:
        raise LoadError(f"{spec!r}: nothing after '::'")
    return path, symbol


def load_file(path: str) -> ModuleType:
    """Import ``path`` as a fresh module, with its folder on ``sys.path`` for its imports."""
    file = Path(path).resolve()
    if not file.is_file():
        raise LoadError(f"{path}: no such file")
    digest = hashlib.sha1(str(file).encode()).hexdigest()[:12]
    stem = re.sub(r"\W", "_", file.stem)
    name = f"_ropelint_probe_{stem}_{digest}"
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise LoadError(f"{path}: cannot be imported as Python")
    module = importlib.util.module_from_spec(spec)
    # Registered before running so dataclasses, pickling and relative lookups work.
    sys.modules[name] = module
    folder = str(file.parent)
    added = folder not in sys.path
    if added:
        sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the user's module can raise anything at import
        sys.modules.pop(name, None)
        raise LoadError(f"importing {path} raised {type(exc).__name__}: {exc}") from exc
    finally:
        if added:
            sys.path.remove(folder)
    return module


def resolve_symbol(module: ModuleType, symbol: str, path: str) -> object:
    """Look up ``Outer.Inner`` style dotted names."""
    value: object = module
    for part in symbol.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise LoadError(f"{path} has no {symbol!r}") from None
    return value


_ROPE_WORD = re.compile(r"rope", re.IGNORECASE)
_NOT_ROPE = ("property", "europe", "trope", "grope", "ropes")
_HELPERS = ("apply_", "rotate_")


def _looks_rotary(name: str) -> bool:
    lower = name.lower()
    if "rotary" in lower or "freqs_cis" in lower:
        return True
    return bool(_ROPE_WORD.search(name)) and not any(word in lower for word in _NOT_ROPE)


def heuristic_symbols(path: str) -> list[str]:
    """Public top-level classes with a ``forward``, and functions that look like builders.

    Used when ``ropelint.api.find_rotary_symbols`` is not available. A name mentioning
    rotary/rope/freqs_cis qualifies, and so does code that mentions ``inv_freq``; a function
    must also take a length or positions, since helpers that only build inverse frequencies
    or apply a rotation cannot be probed on their own. Private names are skipped: name them
    with PATH::SYMBOL.
    """
    source = Path(path).read_text(encoding="utf-8")
    tree = ast.parse(source, filename=path)
    found: list[str] = []
    for node in tree.body:
        if not isinstance(node, (ast.ClassDef, ast.FunctionDef)) or node.name.startswith("_"):
            continue
        if isinstance(node, ast.ClassDef):
            if not any(isinstance(item, ast.FunctionDef) and item.name == "forward"
                       for item in node.body):
                continue
        else:
            names = {a.arg for a in (*node.args.posonlyargs, *node.args.args,
                                     *node.args.kwonlyargs)}
            if not names & (LENGTH_NAMES | POSITION_NAMES | MAX_POSITION_NAMES):
                continue
        segment = ast.get_source_segment(source, node) or ""
        if node.name.lower().startswith(_HELPERS):
            continue  # apply_rotary_pos_emb / rotate_half consume tables, they don't build them
        if _looks_rotary(node.name) or "inv_freq" in segment:
            found.append(node.name)
    return found


def rotary_symbols(path: str) -> list[str]:
    """Rotary symbols in ``path``: the linter's own finder when present, else the heuristic."""
    try:
        from ropelint.api import find_rotary_symbols  # provided by the linter core
    except ImportError:
        return heuristic_symbols(path)
    return list(find_rotary_symbols(path))
