"""Shared fix builders for rules that make a dtype explicitly float32."""

from __future__ import annotations

import ast

from ..diagnostics import FixPlan, Replace
from ..model.names import qualname
from .base import RuleContext, is_atom


def float32_fix(ctx: RuleContext, site: ast.AST, what: str) -> FixPlan | None:
    """``arange(..., dtype=X)`` -> ``dtype=torch.float32``; ``t.to(d)``/``t.type_as(b)``/``t.half()`` -> ``t.float()``."""
    if not isinstance(site, ast.Call):
        return None
    qn = qualname(site.func, ctx.imports) or ""
    if qn.rsplit(".", 1)[-1] in ("arange", "linspace") and qn.startswith("torch"):
        torch, imports = ctx.torch_name()
        new_arg = f"dtype={torch}.float32"
        args = [*site.args, *site.keywords]
        for kw in site.keywords:
            if kw.arg == "dtype":
                return FixPlan("safe", f"build the {what} in float32",
                               (Replace(kw.value, f"{torch}.float32"), *imports))
        call = ctx.code(site)
        # Append the keyword before the closing parenthesis, keeping everything else verbatim.
        head = call[: call.rstrip().rfind(")")]
        sep = ", " if args else ""
        if args and head.rstrip().endswith(","):
            sep = " "
        return FixPlan("safe", f"build the {what} in float32",
                       (Replace(site, f"{head.rstrip()}{sep}{new_arg})"), *imports))
    if isinstance(site.func, ast.Attribute):
        receiver = site.func.value
        text = ctx.code(receiver)
        return FixPlan("safe", f"cast the {what} to float32",
                       (Replace(site, f"{text}.float()" if is_atom(receiver) else f"({text}).float()"),))
    return None
