from __future__ import annotations

import ast
import re

from ..diagnostics import FixPlan, Replace
from ..model.events import Product
from ..model.interpreter import same_file_callable
from ..model.names import is_none, number, qualname, string_value
from ..model.values import Dt
from .base import Rule, RuleContext, as_float32, is_atom, names_in
from .construction import assigned_value

MATMUL_FORMS = ("matmul", "einsum-sum", "einsum-matmul", "linear", "tensordot")


def elementwise_code(ctx: RuleContext, product: Product) -> str | None:
    """The phase as a broadcast product of float32 operands: the text that replaces the product."""
    if product.form not in ("matmul", "einsum-matmul") or len(product.operands) != 2:
        return None
    left, right = product.operands
    lval, rval = product.operand_vals
    lcode = ctx.code(left) if lval.dtype is Dt.FULL else as_float32(ctx, left)
    rcode = ctx.code(right) if rval.dtype is Dt.FULL else as_float32(ctx, right)
    node = product.node
    if not isinstance(node, ast.BinOp):
        return f"({lcode} * {rcode})"
    # Keep the spelling around the operands (their parentheses, spacing, comments); swap the operator.
    spans = ctx.spans
    whole = spans.text(node)
    base = spans.start_offset(node)
    left_end, right_start = spans.end_offset(left) - base, spans.start_offset(right) - base
    gap = whole[left_end:right_start]
    if gap.count("@") != 1:
        return None
    return whole[:spans.start_offset(left) - base] + lcode + gap.replace("@", "*") + rcode \
        + whole[spans.end_offset(right) - base:]


def _parse_einsum(spec: str) -> tuple[list[str], str] | None:
    spec = spec.replace(" ", "")
    if spec.count("->") != 1:
        return None
    inputs, output = spec.split("->")
    terms = inputs.split(",")
    if len(terms) != 2:
        return None
    for term in (*terms, output):
        letters = term[3:] if term.startswith("...") else term
        if not (letters.isalpha() or letters == "") or len(set(letters)) != len(letters):
            return None
    return terms, output


def _einsum_letters(product: Product) -> tuple[list[str], list[str], str, list[str]] | None:
    """For a two-operand einsum a rewrite can write out: its terms, their letters without the ellipsis, the
    output's letters, and the contracted letters (None when the spec is not one of those)."""
    node = product.node
    if len(product.operands) != 2 or product.form not in ("einsum-sum", "einsum-matmul") \
            or not isinstance(node, ast.Call) or not node.args:
        return None
    spec = string_value(node.args[0])
    parsed = _parse_einsum(spec) if spec is not None else None
    if parsed is None:
        return None
    terms, output = parsed
    out_ellipsis = output.startswith("...")
    out_letters = output[3:] if out_ellipsis else output
    bare = [term[3:] if term.startswith("...") else term for term in terms]
    if any(term.startswith("...") for term in terms) and not out_ellipsis:
        return None  # dims under the ellipsis would be summed too
    summed = [c for c in dict.fromkeys(bare[0] + bare[1]) if c not in out_letters]
    if not summed or any(c not in bare[0] + bare[1] for c in out_letters):
        return None
    return terms, bare, out_letters, summed


def broadcast_sum_code(ctx: RuleContext, product: Product) -> str | None:
    """A summing einsum (or a matmul) of two operands as a float32 broadcast product summed over the
    contracted letters: ``einsum("bsa,af->bsf", c, f)`` becomes
    ``(c.float()[:, :, None, :] * f.float().permute(1, 0)[None, None, :, :]).sum(dim=-1)``, and
    ``a @ b`` becomes ``(a.float()[..., :, :, None] * b.float()[..., None, :, :]).sum(dim=-2)``.
    Autocast leaves both the product and the sum in float32."""
    if len(product.operands) == 2 and product.form == "matmul":
        left, right = (_float32(ctx, o, v) for o, v in zip(product.operands, product.operand_vals))
        return f"({left}[..., :, :, None] * {right}[..., None, :, :]).sum(dim=-2)"
    letters_of = _einsum_letters(product)
    if letters_of is None:
        return None
    terms, bare, out_letters, summed = letters_of
    target = out_letters + "".join(summed)
    pieces = []
    for term, letters, operand, val in zip(terms, bare, product.operands, product.operand_vals):
        code = _float32(ctx, operand, val)
        order = sorted(range(len(letters)), key=lambda i: target.index(letters[i]))
        if order != list(range(len(letters))):
            if term.startswith("..."):
                return None  # a permutation behind an ellipsis needs the rank: left to a person
            code = f"{code}.permute({', '.join(str(i) for i in order)})"
        index = ["..."] if term.startswith("...") else []
        index += [":" if letter in letters else "None" for letter in target]
        pieces.append(f"{code}[{', '.join(index)}]")
    dims = ", ".join(str(-i) for i in range(len(summed), 0, -1))
    dim = dims if len(summed) == 1 else f"({dims})"
    return f"({pieces[0]} * {pieces[1]}).sum(dim={dim})"


_SHAPE_KEEPING = ("float", "double", "half", "bfloat16", "to", "type", "type_as", "contiguous", "detach")


def looped_sum_code(ctx: RuleContext, product: Product) -> str | None:
    """An einsum whose one contracted index both operands carry, summed term by term:
    ``einsum("bnc,cf->bnf", a, f)`` becomes ``sum(a[:, :, k][:, :, None] * f[k][None, None, :] for k in
    range(a.shape[2]))``. Each term is an elementwise float32 product laid out like the output, so memory stays
    that of the phase whatever the contracted size (a broadcast product would hold every term at once)."""
    letters_of = _einsum_letters(product)
    if letters_of is None:
        return None
    terms, bare, out_letters, summed = letters_of
    if len(summed) != 1 or not all(summed[0] in letters for letters in bare) or _shadows_sum(product):
        return None
    letter = summed[0]
    k = _loop_name(product)
    pieces, size = [], ""
    # An operand that is computed (``self.freq_matrix(device)``) goes in once, as an argument of a lambda.
    wrapped = any(_computed(o) for o in product.operands)
    for name, term, letters, operand, val in zip("ab", terms, bare, product.operands, product.operand_vals):
        ellipsis = term.startswith("...")
        at = letters.index(letter)
        select = [k if c == letter else ":" for c in letters]
        while select and select[-1] == ":":
            select.pop()
        code = f"{name if wrapped else _float32(ctx, operand, val)}[{', '.join(['...'] * ellipsis + select)}]"
        shaped_code = name if wrapped else _shape_source(ctx, operand)
        size = size or f"{shaped_code}.shape[{at - len(letters) if ellipsis else at}]"
        rest = letters.replace(letter, "")
        order = sorted(range(len(rest)), key=lambda i: out_letters.index(rest[i]))
        if order != list(range(len(rest))):
            if ellipsis:
                return None  # a permutation behind an ellipsis needs the rank: left to a person
            code = f"{code}.permute({', '.join(str(i) for i in order)})"
        index = [":" if c in rest else "None" for c in out_letters]
        if "None" in index:
            code = f"{code}[{', '.join(['...'] * ellipsis + index)}]"
        pieces.append(code)
    summed_code = f"sum({pieces[0]} * {pieces[1]} for {k} in range({size}))"
    if wrapped:
        operands = ", ".join(_float32(ctx, o, v) for o, v in zip(product.operands, product.operand_vals))
        return f"(lambda a, b: {summed_code})({operands})"
    return summed_code


def _linear_looped(ctx: RuleContext, product: Product) -> str | None:
    """``F.linear(coords, freq_matrix)`` (``coords @ freq_matrix.T``, no bias) summed term by term over the input
    features: ``sum(coords.float()[..., k, None] * freq_matrix.float()[:, k] for k in range(coords.shape[-1]))``.
    Each term is an elementwise float32 product shaped like the phase, so memory stays that of the phase."""
    if _shadows_sum(product) or len(product.operands) != 2:
        return None
    k = _loop_name(product)
    (left, right), (lval, rval) = product.operands, product.operand_vals
    size = _shape_source(ctx, left)
    a, w = _float32(ctx, left, lval), _float32(ctx, right, rval)
    if any(_computed(o) for o in (left, right)):
        # ``self.frequency_matrix(pos.device)``: evaluated once, not once per term.
        return (f"(lambda a, w: sum(a[..., {k}, None] * w[:, {k}] for {k} in range(a.shape[-1])))({a}, {w})")
    return f"sum({a}[..., {k}, None] * {w}[:, {k}] for {k} in range({size}.shape[-1]))"


def _loop_name(product: Product) -> str:
    """A loop variable the product's expression does not already use."""
    return next(name for name in ("k", "i", "j", "idx", "rope_k") if name not in names_in(product.node))


def _shape_source(ctx: RuleContext, operand: ast.AST) -> str:
    """The code whose ``.shape`` is the operand's: ``coords`` for ``coords.float()`` (parenthesised if needed)."""
    shaped = operand
    while isinstance(shaped, ast.Call) and isinstance(shaped.func, ast.Attribute) and shaped.func.attr in _SHAPE_KEEPING:
        shaped = shaped.func.value
    code = ctx.code(shaped)
    return code if isinstance(shaped, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)) else f"({code})"


def _computed(node: ast.AST) -> bool:
    """A call other than a dtype or layout change of a name or attribute (``w.float()`` is cheap to repeat,
    ``self.frequency_matrix(device)`` is not)."""
    return any(isinstance(n, ast.Call) and not (isinstance(n.func, ast.Attribute) and n.func.attr in _SHAPE_KEEPING)
               for n in ast.walk(node))


def _shadows_sum(product: Product) -> bool:
    """The builtin ``sum`` is rebound in the function (a parameter or a local called ``sum``)."""
    scope = product.scope.node
    if scope is None:
        return False
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
            a.arg == "sum" for a in (*scope.args.posonlyargs, *scope.args.args, *scope.args.kwonlyargs)):
        return True
    return any(isinstance(n, ast.Name) and n.id == "sum" and isinstance(n.ctx, ast.Store) for n in ast.walk(scope))


SMALL_CONTRACTION = 4


def small_contraction(ctx: RuleContext, product: Product) -> bool:
    """Every contracted letter of the einsum indexes an axis that a ``torch.stack`` of a few tensors
    made (``coords = torch.stack([t, s], dim=-1)``) or that indexing with ``None`` inserted
    (``position_ids[:, :, None]``, size 1) in one operand: the broadcast product is at most a few
    times the phase, so writing it out costs nothing that matters."""
    node = product.node
    spec = string_value(node.args[0]) if isinstance(node, ast.Call) and node.args else None
    parsed = _parse_einsum(spec) if spec is not None else None
    if parsed is None or product.scope.node is None:
        return False
    terms, output = parsed
    out_letters = output[3:] if output.startswith("...") else output
    bare = [term[3:] if term.startswith("...") else term for term in terms]
    summed = [c for c in dict.fromkeys(bare[0] + bare[1]) if c not in out_letters]
    for letter in summed:
        if not any(letter in letters and (
                _stacked_axis(ctx, product, operand, letters.index(letter), len(letters))
                or _new_axis(product, operand, letters.index(letter), len(letters)))
                for letters, operand in zip(bare, product.operands)):
            return False
    return bool(summed)


def _stacked_axis(ctx: RuleContext, product: Product, operand: ast.AST, axis: int, rank: int) -> bool:
    """``operand`` (or the one value its name is assigned) is ``torch.stack([...], dim=...)`` of at most a
    few tensors along ``axis`` of its ``rank`` axes, maybe followed by ``.float()``/``.to(...)``."""
    operand = _operand_source(product, operand)
    operand = _returned_by_helper(ctx, operand) or operand
    if not (isinstance(operand, ast.Call) and (qualname(operand.func, ctx.imports) or "") == "torch.stack"
            and operand.args and isinstance(operand.args[0], (ast.List, ast.Tuple))):
        return False
    items = operand.args[0].elts
    given = [k.value for k in operand.keywords if k.arg == "dim"] + list(operand.args[1:2])
    dim = _int_literal(given[0]) if given else 0
    if dim is None or not 0 < len(items) <= SMALL_CONTRACTION or any(isinstance(i, ast.Starred) for i in items):
        return False
    return dim == axis or dim == axis - rank


def _returned_by_helper(ctx: RuleContext, operand: ast.AST | None) -> ast.AST | None:
    """For ``init_coords(w, h)``, a function of this file with a single ``return``: what it returns (the
    one value a returned name is assigned)."""
    if not (isinstance(operand, ast.Call) and isinstance(operand.func, ast.Name)):
        return None
    fn = same_file_callable(ctx.model, None, operand.func.id)
    returns = [n for n in ast.walk(fn) if isinstance(n, ast.Return)] if fn is not None else []
    if len(returns) != 1 or returns[0].value is None:
        return None
    value = returns[0].value
    if isinstance(value, ast.Name):
        found = assigned_value(fn, value.id, returns[0])
        return found[0] if found is not None and found[1] is None else None
    return value


def _operand_source(product: Product, operand: ast.AST) -> ast.AST | None:
    """The expression behind an einsum operand: the one value its name is assigned (None if zero or
    several), without trailing ``.float()``/``.to(...)``/``.double()``/``.contiguous()``."""
    if isinstance(operand, ast.Name):
        found = assigned_value(product.scope.node, operand.id, product.node)
        if found is None or found[0] is None or found[1] is not None:
            return None
        operand = found[0]
    while isinstance(operand, ast.Call) and isinstance(operand.func, ast.Attribute) \
            and operand.func.attr in ("float", "to", "double", "contiguous"):
        operand = operand.func.value
    return operand


def _new_axis(product: Product, operand: ast.AST, axis: int, rank: int) -> bool:
    """``operand`` (or the one value its name is assigned) is ``t[..., None]``-style indexing that puts
    ``None`` at ``axis`` of its ``rank`` axes, maybe followed by ``.float()``/``.to(...)``."""
    operand = _operand_source(product, operand)
    if not isinstance(operand, ast.Subscript):
        return False
    items = list(operand.slice.elts) if isinstance(operand.slice, ast.Tuple) else [operand.slice]
    ellipsis = [i for i, item in enumerate(items) if isinstance(item, ast.Constant) and item.value is Ellipsis]
    if len(ellipsis) > 1 or (not ellipsis and len(items) != rank):
        return False
    if ellipsis:  # ``t[..., None]``: the items after the ellipsis are the last axes
        after = items[ellipsis[0] + 1:]
        position = axis - (rank - len(after))
        if position < 0:
            before = items[:ellipsis[0]]
            return axis < len(before) and is_none(before[axis])
        return is_none(after[position])
    return is_none(items[axis])


def _int_literal(node: ast.AST) -> int | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = number(node.operand)
        return -inner if isinstance(inner, int) else None
    value = number(node)
    return value if isinstance(value, int) else None


def _float32(ctx: RuleContext, operand: ast.AST, val) -> str:  # type: ignore[no-untyped-def]
    """The operand in float32, as an atom: ``.permute(...)`` or ``[...]`` can follow it."""
    if val.dtype is not Dt.FULL:
        return as_float32(ctx, operand)
    return ctx.code(operand) if is_atom(operand) else f"({ctx.code(operand)})"


def _tensordot_outer(ctx: RuleContext, product: Product) -> str | None:
    """``torch.tensordot(a, b, dims=0)``, the outer product over all axes (shape ``a.shape + b.shape``), as a
    broadcast product: ``a[..., None] * b`` for a one-axis ``b``, else ``a`` reshaped with ``b.dim()`` unit
    axes (``a`` must be a name: it is read twice). None for a real contraction (``dims`` not 0)."""
    node = product.node
    if not isinstance(node, ast.Call) or len(product.operands) != 2:
        return None
    dims = next((k.value for k in node.keywords if k.arg == "dims"), node.args[2] if len(node.args) > 2 else None)
    if dims is None or _int_literal(dims) != 0:
        return None  # ``dims`` defaults to 2: a contraction
    (left, right), (lval, rval) = product.operands, product.operand_vals
    lcode, rcode = _float32(ctx, left, lval), _float32(ctx, right, rval)
    if rval.vector:
        return f"({lcode}[..., None] * {rcode})"
    if isinstance(left, ast.Name) and lval.dtype is Dt.FULL:
        return f"({lcode}.reshape(*{lcode}.shape, *[1] * {rcode}.dim()) * {rcode})"
    return None


_NOT_A_PRODUCT = ("addmm", "baddbmm", "addbmm", "addmv", "mv", "chain_matmul")


def _adds_axis(node: ast.AST, fn: ast.AST | None = None) -> bool:
    """``w.unsqueeze(k)`` or ``w[None]``: at least two axes. A matmul whose left operand ends in an axis of one
    then contracts over one element, so the right one's second-to-last axis is one too: an exact outer product.
    A local of ``fn`` assigned once from such an expression (``freq = inv_freq.float().unsqueeze(0)``) too."""
    if isinstance(node, ast.Name) and fn is not None:
        found = assigned_value(fn, node.id, node)
        return found is not None and found[1] is None and found[0] is not None and _adds_axis(found[0])
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr == "unsqueeze"
    if isinstance(node, ast.Subscript):
        elements = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        return any(is_none(el) for el in elements)
    return False


def elementwise_rewrite(ctx: RuleContext, product: Product) -> FixPlan | None:
    lval, rval = product.operand_vals if len(product.operand_vals) == 2 else (None, None)
    node = product.node
    name = (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id) \
        if isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name)) else None
    if name in ("addmm", "baddbmm") and len(node.args) == 3 and not node.keywords:
        # ``torch.addmm(start, t[:, None], f[None, :])`` is ``start + t[:, None] @ f[None, :]``: an outer product
        # (shapes proven) plus a term, which the elementwise product keeps.
        proven = lval is not None and rval is not None and lval.last_is_one \
            and (rval.second_last_is_one or _adds_axis(product.operands[1], product.scope.node))
        code = elementwise_code(ctx, product) if proven else None
        if code is None:
            return None
        return FixPlan("safe", "form the phase as an elementwise float32 product (plus the added term)",
                       (Replace(node, f"({ctx.code(node.args[0])} + {code})"),))
    if name in _NOT_A_PRODUCT:
        return None  # ``baddbmm(bias, a, b)`` with ``beta``/``alpha``, ``mv`` drops an axis: not a product to swap in
    if product.form == "tensordot":
        code = _tensordot_outer(ctx, product)
        if code is None:
            return None
        return FixPlan("safe", "form the phase as an elementwise float32 product", (Replace(product.node, code),))
    if product.form == "linear":
        if lval is None or rval is None:
            return None
        # ``F.linear(a, w)`` is ``a @ w.T``: broadcast ``a`` over the rows of ``w`` and sum the shared last axis.
        left, right = (_float32(ctx, o, v) for o, v in zip(product.operands, product.operand_vals))
        code = f"({left}[..., :, None, :] * {right}).sum(dim=-1)"
        if lval.last_is_one or rval.last_is_one:  # a sum over one element: the outer product, exactly
            return FixPlan("safe", "form the phase as an elementwise float32 product", (Replace(product.node, code),))
        looped = _linear_looped(ctx, product)
        if looped is not None:
            return FixPlan("safe", "form the phase as a float32 sum of elementwise products, one term per input "
                                   "feature", (Replace(product.node, looped),))
        return FixPlan("unsafe", "form the phase as a float32 broadcast product summed over the shared axis (it "
                                 "materialises the product before the sum)", (Replace(product.node, code),))
    shapes_proven = lval is not None and lval.last_is_one \
        and (rval.second_last_is_one or _adds_axis(product.operands[1], product.scope.node))  # type: ignore[union-attr]
    if product.form == "einsum-sum" or (product.form in ("matmul", "einsum-matmul") and not shapes_proven):
        summed = broadcast_sum_code(ctx, product)
        if summed is None:
            return None
        if product.form != "matmul" and small_contraction(ctx, product):
            return FixPlan("safe", "form the phase as a float32 broadcast product summed over the contracted index "
                                   "(a stack of a few axes)", (Replace(product.node, summed),))
        looped = looped_sum_code(ctx, product)
        if looped is not None:
            return FixPlan("safe", "form the phase as a float32 sum of elementwise products, one term per value of "
                                   "the contracted index", (Replace(product.node, looped),))
        rank = " (assumes both operands have at least two dimensions)" if product.form == "matmul" else ""
        return FixPlan("unsafe", f"form the phase as a float32 broadcast product summed over the contracted index "
                                 f"(it materialises the product before the sum: memory grows with the contracted "
                                 f"size){rank}", (Replace(product.node, summed),))
    code = elementwise_code(ctx, product)
    if code is None:
        return None
    return FixPlan("safe", "form the phase as an elementwise float32 product", (Replace(product.node, code),))


class MatmulPhase(Rule):
    code = "RPL003"

    def check(self, ctx: RuleContext) -> None:
        for product in ctx.model.products:
            if product.form not in MATMUL_FORMS or product.guard is not None:
                continue
            if all(_float64_operand(ctx, node, product.scope) for node in product.operands[:2]) \
                    and len(product.operands) >= 2:
                continue  # autocast leaves float64 operands alone (measured: matmul stays float64 under it)
            kind = {"matmul": "a matmul", "linear": "`F.linear` (a matmul)",
                    "tensordot": "`tensordot` (a matmul)"}.get(product.form,
                                                                               "an einsum that sums an index")
            message = (f"phase formed by {kind}: under autocast it runs in bfloat16/float16 even with float32 "
                       f"inputs (phase error 235 rad at position 131071); use an elementwise product")
            ctx.report(self.code, product.node, message, product.scope, elementwise_rewrite(ctx, product))


def _float64_operand(ctx: RuleContext, node: ast.AST | None, scope) -> bool:  # type: ignore[no-untyped-def]
    """``seq.unsqueeze(1)`` with ``seq = torch.arange(..., dtype=torch.float64)``, ``f.to(torch.float64)``,
    ``x.double()``, ``1.0 / (ext * base ** e)`` with ``ext`` a float64 local: an operand the source makes float64
    (followed through a few local or ``self`` assignments of the same function; arithmetic with a float64
    tensor promotes to float64)."""
    if node is None or scope.node is None:
        return False
    return _float64_expr(ctx, node, scope.node, _float64_constants(ctx), 0)


def _float64_expr(ctx: RuleContext, node: ast.AST, fn: ast.AST, constants: frozenset[str], depth: int) -> bool:
    if _made_float64(ctx.code(node), constants):
        return True
    if depth > 6:
        return False
    if isinstance(node, ast.BinOp):
        return any(_float64_expr(ctx, side, fn, constants, depth + 1) for side in (node.left, node.right))
    while isinstance(node, (ast.Call, ast.Subscript)) or (isinstance(node, ast.Attribute) and node.attr in ("T", "mT")):
        if isinstance(node, ast.Call):
            if not (isinstance(node.func, ast.Attribute) and node.func.attr in _SHAPE_ONLY):
                return False
            node = node.func.value
        else:
            node = node.value
    target = _local_or_self(node)
    if target is None or target in {a.arg for a in getattr(fn, "args").args}:  # type: ignore[union-attr]
        return False
    values = [st.value for st in ast.walk(fn) if isinstance(st, ast.Assign)
              and any(_local_or_self(t) == target for t in st.targets)]
    # ``seq = seq * (1.0 / factor)``: an update of the float64 tensor by a number keeps float64.
    updates = [v for v in values if any(_local_or_self(n) == target for n in ast.walk(v))]
    made = [v for v in values if v not in updates]
    return bool(made) and all(_float64_expr(ctx, v, fn, constants, depth + 1)
                              or _float64_returned(ctx, v, constants, depth + 1) for v in made)


def _float64_returned(ctx: RuleContext, value: ast.AST, constants: frozenset[str], depth: int) -> bool:
    """``rope_inv_freq(dim, base, device)``, a function of this file every return of which is float64."""
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)) or depth > 6:
        return False
    callee = ctx.model.functions.get(value.func.id)
    returns = [r.value for r in ast.walk(callee) if isinstance(r, ast.Return)] if callee is not None else []
    return bool(returns) and all(r is not None and _float64_expr(ctx, r, callee, constants, depth) for r in returns)


_SHAPE_ONLY = frozenset({"unsqueeze", "expand", "expand_as", "reshape", "view", "transpose", "permute", "flatten",
                         "contiguous", "squeeze", "repeat", "clone", "detach", "to"})


def _local_or_self(node: ast.AST) -> str | None:
    """``seq`` -> "seq", ``self.inv_freq`` -> "self.inv_freq"; None for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return f"self.{node.attr}"
    return None


_F64_CONSTANT = re.compile(r"^(\w+)\s*(?::[^=\n]*)?=\s*(?:torch|th|t)\.(?:float64|double)\s*$", re.MULTILINE)


def _float64_constants(ctx: RuleContext) -> frozenset[str]:
    """Module-level names bound to the float64 dtype (``_ROPE_COMPUTE_DTYPE = torch.float64``)."""
    if "float64" not in ctx.source and "double" not in ctx.source:
        return frozenset()
    return frozenset(_F64_CONSTANT.findall(ctx.source))


_F64 = re.compile(r"float64|\.double\(\)")
_NARROWED = re.compile(r"\.(?:float|half|bfloat16)\(\)|float32|float16|bfloat16|\.to\(")


def _made_float64(text: str, constants: frozenset[str] = frozenset()) -> bool:
    """The code makes its value float64 and nothing after that narrows it (``.double().float()`` does)."""
    found = None
    for found in _F64.finditer(text):
        pass
    for name in constants:
        for named in re.finditer(rf"\b{name}\b", text):
            if found is None or named.end() > found.end():
                found = named
    return found is not None and _NARROWED.search(text, found.end()) is None
