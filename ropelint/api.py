"""A small Python API over the pipeline, for tools (the probe) and scripts."""

from __future__ import annotations

import ast
from pathlib import Path

from .imports import scan_imports
from .model.interpreter import analyse
from .model.values import Role
from .source import read_source
from .spans import Spans


def find_rotary_symbols(path: str | Path) -> list[str]:
    """Top-level classes and functions of ``path`` that form a phase or build rotary tables.

    Module-level helpers that only take cos/sin of an argument (``apply_rotary_pos_emb``) are
    not rotary builders and are left out; so are classes that only call a rotary module.
    """
    source = read_source(Path(path))
    module = ast.parse(source.text)
    spans = Spans(source.text)
    model = analyse(module, scan_imports(source.text), spans)
    found: dict[str, None] = {}
    rotary = {Role.INV_FREQ, Role.PHASE, Role.COMPLEX, Role.TABLE}
    # A class that takes cos/sin of a phase a helper formed (``_rope_phase(t, inv_freq).cos()``) builds tables too.
    events = [*model.products, *(r for r in model.registrations if r.value.roles & rotary),
              *(t for t in model.trigs if t.arg.has(Role.PHASE) and "." in t.scope.symbol)]
    for event in events:
        symbol = event.scope.symbol.split(".")[0]
        if symbol != "<module>":
            found.setdefault(symbol, None)
    # Code that ``ropelint fix`` rewrote calls the runtime helper instead of forming the phase itself.
    runtime_names = [local for local, qual in scan_imports(source.text).names.items() if qual.startswith("ropelint.runtime")
                     or qual == "ropelint.runtime"]
    for stmt in module.body:
        if isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and runtime_names:
            code = spans.text(stmt)
            if any(f"{name}." in code or f"{name}(" in code for name in runtime_names):
                found.setdefault(stmt.name, None)
    order = {stmt.name: i for i, stmt in enumerate(module.body)
             if isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))}
    return sorted(found, key=lambda name: order.get(name, len(order)))
