"""Calling a construction again in forward: ``inv_freq, scale = self.rope_init_fn(self.config, device)``
in ``__init__`` becomes the body of a builder ``lambda device: ...`` that ``rope_runtime.inv_freq_from``
runs on the positions' device.

Constants and ``self`` attributes mean the same in forward. Any other argument (a local or argument
of ``__init__``, the loop variable of a per-layer loop) and a callee that is a local (an init
function chosen per layer type) are recorded when the state is built, and the builder reads them
back through ``slot(i)``. The device argument becomes the builder's ``device``; a call without one
is moved there with ``.to(device)``.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from ..model.names import dotted
from .base import RuleContext


def rebuild_call(ctx: RuleContext, call: ast.AST, slot: Callable[[int], str],
                 index: int | None = None) -> tuple[str, list[str]] | None:
    """(the call's text for the builder, the source of each recorded value), or None when it cannot be
    called again as written (``*args``, ``**kwargs``, a library function: its arguments are tensor
    expressions more often than not, and a recorded tensor would not follow the module). ``index``: the
    element of a returned tuple that holds the state (``inv_freq, scale = f(...)``)."""
    if not isinstance(call, ast.Call) or any(isinstance(a, ast.Starred) for a in call.args) \
            or any(k.arg is None for k in call.keywords):
        return None
    parts = dotted(call.func)
    if parts is None:
        return None
    captured: list[str] = []

    def record(text: str) -> str:
        captured.append(text)
        return slot(len(captured) - 1)

    if parts[0] == "self" or (len(parts) == 1 and parts[0] in ctx.model.functions):
        callee = ctx.code(call.func)
    elif len(parts) == 1 and parts[0] not in ctx.imports.names:
        callee = record(parts[0])  # a local: the function chosen when the state was built
    else:
        return None
    args: list[str] = []
    saw_device = False
    torch = ctx.imports.alias_for("torch")
    for keyword, arg in [(None, a) for a in call.args] + [(k.arg, k.value) for k in call.keywords]:
        if (isinstance(arg, ast.Name) and arg.id == "device") or keyword == "device":
            text, saw_device = "device", True
        elif torch is not None and keyword is not None and (keyword == "dtype" or keyword.endswith("_dtype")) \
                and not ctx.code(arg).endswith((".int64", ".long", ".int32", ".int", ".int16", ".int8")):
            # The rebuild exists to give float32 frequencies (the helper rejects 16 bits): ask the builder for them,
            # whatever dtype the module was built with (``dtype=config.torch_dtype``).
            text = f"{torch}.float32"
        elif isinstance(arg, ast.Constant) or (dotted(arg) or [""])[0] == "self":
            text = ctx.code(arg)
        else:
            text = record(ctx.code(arg))
        args.append(f"{keyword}={text}" if keyword is not None else text)
    rebuilt = f"{callee}({', '.join(args)})" + (f"[{index}]" if index is not None else "")
    return (rebuilt if saw_device else f"{rebuilt}.to(device)"), captured
