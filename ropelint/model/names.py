"""Resolving call targets to qualified names, from the file's import table only.

Only the receiver of a chain is resolved: ``torch.arange(...).float()`` is a call of ``float`` on
the value of ``torch.arange(...)``, never a name ``torch.arange.float``.
"""

from __future__ import annotations

import ast

from ..imports import ImportTable

TORCH_DTYPES_FULL = {"float32", "float", "float64", "double"}
TORCH_DTYPES_LOW = {"bfloat16", "float16", "half"}
TORCH_DTYPES_INT = {"int64", "long", "int32", "int", "int16", "short", "int8", "uint8", "bool"}
TORCH_DTYPES_COMPLEX = {"complex64", "cfloat", "complex128", "cdouble", "complex32", "chalf"}

AUTOCAST = {
    "torch.autocast",
    "torch.amp.autocast",
    "torch.amp.autocast_mode.autocast",
    "torch.cuda.amp.autocast",
    "torch.cpu.amp.autocast",
    "torch.xpu.amp.autocast",
}
CUSTOM_FWD = {"torch.cuda.amp.custom_fwd", "torch.amp.custom_fwd"}


def dotted(node: ast.AST) -> list[str] | None:
    """``a.b.c`` as ["a", "b", "c"]; None when the chain holds anything but names."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return parts[::-1]
    return None


def qualname(node: ast.AST, imports: ImportTable) -> str | None:
    parts = dotted(node)
    if not parts:
        return None
    root = imports.resolve_root(parts[0])
    if root is None:
        return None
    return ".".join([root, *parts[1:]])


def is_numpy(name: str | None) -> bool:
    return bool(name) and (name.startswith("numpy.") or name == "numpy")  # type: ignore[union-attr]


def string_value(node: ast.AST) -> str | None:
    """A literal string, or an f-string with its holes as ``{}``."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.JoinedStr):
        out = []
        for part in node.values:
            out.append(part.value if isinstance(part, ast.Constant) and isinstance(part.value, str) else "{}")
        return "".join(out)
    return None


def is_none(node: ast.AST) -> bool:
    """The literal ``None``."""
    return isinstance(node, ast.Constant) and node.value is None


def bool_literal(node: ast.AST) -> bool | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, bool):
        return node.value
    return None


def number(node: ast.AST) -> int | float | None:
    """An int or float literal (not a bool)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    return None
