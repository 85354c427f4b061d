"""The last-resort fix for rotary state a module cast would round: read a float32 shadow instead.

Right after the registration, ``self._<name>_fp32 = self.<name>`` keeps a reference to the tensor
as built. ``module.to(dtype)``/``.half()`` replace the buffer's tensor and leave the plain
attribute alone, so reading ``self._<name>_fp32.to(<device>)`` gives the values as built, on the
right device. It is always unsafe: a model built on the meta device keeps a meta shadow after
``to_empty`` + ``load_state_dict``, and an update of the buffer after construction is not seen.
"""

from __future__ import annotations

from ..diagnostics import FixPlan, InsertAfterStatement, Replace
from ..model.values import StateKind, StateRead, StateRef

WHY = ("the shadow copy is not rebuilt by a meta-device load, and updates of the buffer after "
       "construction are not seen")


def _copy(ref: StateRef) -> str:
    # A module cast swaps a Parameter's data in place (measured: a second reference to it turns
    # bfloat16 too) but replaces a buffer's tensor, so a Parameter needs a real copy.
    if ref.kind is StateKind.PARAMETER:
        return f"self.{ref.name}.detach().clone()"
    return f"self.{ref.name}"


def shadow_attribute(ref: StateRef) -> str:
    return f"_{ref.name.strip('_')}_fp32"


def shadow_fix(ref: StateRef, read: StateRead, device: str, what: str) -> FixPlan | None:
    if "{}" in ref.name:
        return None
    shadow = shadow_attribute(ref)
    keep = InsertAfterStatement(ref.node, f"self.{shadow} = {_copy(ref)}  # ropelint: {what} as built, "
                                          f"out of reach of module dtype casts")
    return FixPlan("unsafe", f"read a float32 copy of `{ref.name}` kept out of reach of module casts ({WHY})",
                   (keep, Replace(read.node, f"self.{shadow}.to({device})")))


def state_fix(ctx, reg, what: str) -> FixPlan | None:  # type: ignore[no-untyped-def]
    """One fix for a registration: every read of the state in the model goes through the shadow."""
    reads = _reads_of(ctx, reg.ref)
    if not reads or "{}" in reg.ref.name:
        return None
    shadow = shadow_attribute(reg.ref)
    edits: list = [InsertAfterStatement(reg.node, f"self.{shadow} = {_copy(reg.ref)}  # ropelint: {what} as "
                                                  f"built, out of reach of module dtype casts")]
    edits += [Replace(read.node, f"self.{shadow}.to(self.{reg.ref.name}.device)") for read in reads]
    return FixPlan("unsafe", f"read a copy of `{reg.ref.name}` kept out of reach of module casts ({WHY})", tuple(edits))


def _reads_of(ctx, ref: StateRef) -> list[StateRead]:  # type: ignore[no-untyped-def]
    seen: dict[int, StateRead] = {}
    for read in ctx.model.state_reads:
        if read.ref is ref:
            seen.setdefault(id(read.node), read)
    return list(seen.values())


def has_shadow(ctx, reg) -> bool:  # type: ignore[no-untyped-def]
    """The class keeps the float32 shadow this module's fix writes: the registration is handled."""
    owner = ctx.model.classes.get(reg.scope.symbol.split(".")[0])
    return owner is not None and shadow_attribute(reg.ref) in owner.writes
