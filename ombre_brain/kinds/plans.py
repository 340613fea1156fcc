"""Plans: promises and to-dos that never decay or surface, listed at the end of a dream until they close.

A plan is a bucket of type ``plan`` (layer ``plan``: never a hit, never related, never a dream's
material) whose ``kind_fields.plan`` holds its ``status`` (``active``, ``resolved``, ``abandoned``), its
``weight`` (how heavily it weighs, 0–1), an optional ``related`` bucket and its **history**: one
entry per change (created, a status set by ``trace``, a weight, closed by a memory), each with its
time, who did it and why. That history is the plan's trace: it explains every closure.

A plan closes by itself when a later memory says it happened (:mod:`.closure`):
:meth:`Plans.close_by` runs after the writes that bring new memories (``hold``, ``grow``, the
write decision on an exchange) and checks every active plan older than the memory. As in
Ombre-Brain, adding a plan whose words equal an active plan's returns that plan.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime, timedelta

from ..buckets import Bucket, validate_space
from ..errors import NotFoundError, ValidationError
from ..store.interfaces import TurnReads
from ..timeutil import iso, now_utc
from .closure import Closure, decide
from .fields import PLAN_STATUSES, kind_part
from .letterbox import letter_title

__all__ = ["CLOSING_TYPES", "Plans"]

SAME_TIME = timedelta(seconds=1)
PLAN_IMPORTANCE = 7  # Ombre-Brain files every plan at importance 7, valence 0.5, arousal 0.4
CLOSING_TYPES = frozenset({"dynamic", "permanent", "feel"})
"""What may close a plan: a memory of the person's life, not a dream, a source record, a letter or another plan."""


def status_of(bucket: Bucket) -> str:
    return (kind_part(bucket, "plan") or {}).get("status") or "active"


class Plans:
    """Adding plans, changing their status and weight, and closing them from later memories."""

    def __init__(self, *, store: TurnReads, write: Callable[..., str], update: Callable[..., Bucket],
                 cut: Callable[[str], list[str]]) -> None:
        self.store = store
        self._write = write
        self._update = update
        self._cut = cut

    def plans(self, space: str, status: str | None = None) -> list[Bucket]:
        """The space's plans, newest first (only those of ``status`` when given)."""
        validate_space(space)
        if not self.store.known_space(space):
            return []
        found = self.store.list(space, type="plan", limit=None)
        return [b for b in found if status is None or status_of(b) == status]

    def add(self, space: str, content: str, *, status: str = "active", related: str = "", weight: float = 0.5,
            why_remembered: str = "", now: datetime | None = None) -> tuple[Bucket, bool]:
        """File a plan; (the plan, True), or (the active plan with the same words, False)."""
        validate_space(space)
        if not isinstance(content, str) or not content.strip():
            raise ValidationError("is required: the promise or to-do", field="content")
        if status not in PLAN_STATUSES:
            raise ValidationError(f"expected one of {', '.join(PLAN_STATUSES)}, got {status!r}", field="status")
        if related and self.store.get(space, related) is None:
            raise NotFoundError(f"related_bucket: no bucket {related!r} in space {space!r}")
        same = next((b for b in self.plans(space, "active") if b.body.strip() == content.strip()), None)
        if same is not None:
            return same, False
        now = now or now_utc()
        kind = {"plan": {"status": status, "weight": weight, "related": related or None,
                         "history": [{"action": "created", "to": status, "at": iso(now)}]}}
        comments = [{"author": "ombre:why_remembered", "content": why_remembered.strip()}] \
            if isinstance(why_remembered, str) and why_remembered.strip() else []
        bid = self._write(space, now=now, type="plan", title=letter_title(content), body=content,
                          importance=PLAN_IMPORTANCE, valence=0.5, arousal=0.4, kind_fields=kind, comments=comments,
                          dedupe=False)
        return self.store.get(space, bid), True

    def change(self, space: str, plan_id: str, *, status: str | None = None, weight: float | None = None,
               by: str = "trace", reason: str = "", now: datetime | None = None) -> Bucket:
        """Set a plan's status and/or weight, each change a line of its history."""
        plan = self.store.get(space, plan_id)
        if plan is None or plan.type != "plan":
            raise NotFoundError(f"no plan {plan_id!r} in space {space!r}")
        if status is not None and status not in PLAN_STATUSES:
            raise ValidationError(f"expected one of {', '.join(PLAN_STATUSES)}, got {status!r}", field="status")
        fields = dict(kind_part(plan, "plan") or {})
        history = list(fields.get("history") or [])
        at = iso(now or now_utc())
        if status is not None and status != fields.get("status"):
            entry = {"action": "status", "from": fields.get("status"), "to": status, "at": at, "by": by}
            history.append({**entry, "reason": reason} if reason else entry)
            fields["status"] = status
        if weight is not None and weight != fields.get("weight"):
            history.append({"action": "weight", "from": str(fields.get("weight")), "to": str(weight), "at": at,
                            "by": by})
            fields["weight"] = weight
        fields["history"] = history
        return self._update(space, plan_id, kind_fields={"plan": fields}, now=now)

    def close_by(self, space: str, memory_ids: Iterable[str], now: datetime | None = None) -> list[dict]:
        """Close every active plan that one of these (later) memories says happened; what closed, and why."""
        open_plans = self.plans(space, "active")
        if not open_plans:
            return []
        memories = [m for m in self.store.get_many(space, list(dict.fromkeys(memory_ids))).values()
                    if m.type in CLOSING_TYPES]
        closed: list[dict] = []
        for plan in sorted(open_plans, key=lambda b: b.created):
            for m in sorted(memories, key=lambda b: b.created):
                if m.created_dt() + SAME_TIME < plan.created_dt():
                    continue  # a memory from before the plan cannot say it happened (times may be cut to seconds)
                verdict = self.verdict(plan, m)
                if verdict.closed:
                    self.change(space, plan.id, status="resolved", by=m.id, reason=f"closed by {m.id}: "
                                f"{verdict.reason}", now=now)
                    closed.append({"plan_id": plan.id, "title": plan.title, "memory_id": m.id,
                                   "reason": verdict.reason})
                    break
        return closed

    def verdict(self, plan: Bucket, memory: Bucket) -> Closure:
        """The closure rule on one plan and one memory (:func:`.closure.decide`)."""
        return decide(plan.body or plan.title, memory.main_text or memory.title, self._cut)

    def counts(self, space: str) -> dict:
        plans = self.plans(space)
        return {s: sum(1 for b in plans if status_of(b) == s) for s in PLAN_STATUSES}
