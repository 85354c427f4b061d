"""Resolving call targets to qualified names, from the file's import table only.

Only the receiver of a chain is resolved: ``torch.arange(...).float()`` is a call of ``float`` on
the value of ``torch.arange(...)``, never a name ``torch.arange.float``.
"""

from __future__ import annotations

import libcst as cst

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


def dotted(node: cst.BaseExpression) -> list[str] | None:
    """``a.b.c`` as ["a", "b", "c"]; None when the chain holds anything but names."""
    parts: list[str] = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if isinstance(node, cst.Name):
        parts.append(node.value)
        return parts[::-1]
    return None


def qualname(node: cst.BaseExpression, imports: ImportTable) -> str | None:
    parts = dotted(node)
    if not parts:
        return None
    root = imports.resolve_root(parts[0])
    if root is None:
        return None
    return ".".join([root, *parts[1:]])




def is_numpy(name: str | None) -> bool:
    return bool(name) and (name.startswith("numpy.") or name == "numpy")  # type: ignore[union-attr]


def string_value(node: cst.BaseExpression) -> str | None:
    """A literal string, or an f-string with its holes as ``{}``."""
    if isinstance(node, cst.SimpleString):
        return node.evaluated_value if isinstance(node.evaluated_value, str) else None
    if isinstance(node, cst.FormattedString):
        out = []
        for part in node.parts:
            out.append(part.value if isinstance(part, cst.FormattedStringText) else "{}")
        return "".join(out)
    if isinstance(node, cst.ConcatenatedString):
        left, right = string_value(node.left), string_value(node.right)
        return left + right if left is not None and right is not None else None
    return None


def bool_literal(node: cst.BaseExpression) -> bool | None:
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    return None
