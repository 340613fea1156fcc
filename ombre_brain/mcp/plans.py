"""``plan``: file a promise or a to-do (design §19).

A plan never decays and never surfaces in recall or ``breath()``; ``dream()`` lists the active
ones at its end. A later memory that says it happened closes it (``hold``, ``grow`` and the chat
write decision check every active plan; the rule is :mod:`ombre_brain.kinds.closure`), and the
plan's history says which memory closed it and why. ``trace(plan_id, status=…, weight=…)``
changes it by hand. As in Ombre-Brain, the same words as an active plan return that plan.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ..errors import ValidationError
from ..kinds.fields import PLAN_STATUSES, kind_part
from .access import Call
from .format import Reply, quote
from .registry import Number, Space, tool

__all__ = ["plan"]


@tool("""File a promise or a to-do. It never decays or surfaces in recall; dream() lists it at its end, and a later
      memory that says it happened closes it (the plan's history says which and why). The same words as an active
      plan return that plan.""")
def plan(
    call: Call,
    content: Annotated[str, Field(description="the promise or to-do, in your words")],
    status: Annotated[str, Field(description="active (default), resolved or abandoned")] = "active",
    related_bucket: Annotated[str, Field(description="a memory this plan belongs to")] = "",
    weight: Annotated[Number, Field(description="how heavily it weighs, 0-1")] = 0.5,
    why_remembered: str = "",
    space: Space = None,
) -> Reply:
    space = call.space(space)
    if isinstance(weight, bool) or not isinstance(weight, int | float) or not 0 <= weight <= 1:
        raise ValidationError(f"expected a number from 0 to 1 (how heavily the promise weighs), got {weight!r}",
                              field="weight")
    if status not in PLAN_STATUSES:
        call.note(f"status {status!r} is not one of {', '.join(PLAN_STATUSES)}: filed as active, as Ombre-Brain does")
        status = "active"
    bucket, created = call.brain.plans.add(space, content, status=status, related=related_bucket, weight=weight,
                                           why_remembered=why_remembered)
    f = kind_part(bucket, "plan") or {}
    verb = "filed" if created else "already filed (an active plan with the same words; nothing new was written)"
    text = (f"plan {verb} → {bucket.id} · space {space} · {f.get('status')} · weight {f.get('weight'):g} · "
            f"{quote(bucket.body, 120)}\nIt stays out of recall; dream() lists it until a later memory says it "
            f"happened, or trace(bucket_id=\"{bucket.id}\", status=\"resolved\") closes it.")
    return Reply(text, {"tool": "plan", "space": space, "bucket_id": bucket.id, "created": created, "plan": f,
                        "title": bucket.title})
