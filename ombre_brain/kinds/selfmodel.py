"""The self-model (Ombre-Brain's ``I``): what the companion comes to know about itself, slowly (design §19).

``I`` is sediment, not a diary. A thought about itself ("我觉得…") is first an **ordinary
memory**, a candidate: a dynamic bucket with ``kind_fields.self.stage: candidate``. It is recalled,
dreamed about and archived like any memory, so one that does not hold up sinks. Each ``dream()``
call lists the candidates and records the day on each one it showed (``dream_dates``, one per
date: what was not shown was not seen). ``I(promote=id)`` makes it a **formal entry** only when
it has been seen on at least three different dates: a bucket of type ``self`` (layer
``self_model``), with the candidate's words or refined ones, ``from_candidate`` and the dates;
the candidate is kept, marked ``promoted`` and resolved (so it sinks into the archive).

Formal entries never surface in a turn, ``breath()`` or a dream; the newest three are attached
at the start of a session (MCP ``breath()``, the call a client makes first), apart from the
memories breath surfaces. Dates are UTC calendar dates.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime

from ..buckets import Bucket, validate_space
from ..errors import NotFoundError, ValidationError
from ..store.interfaces import TurnReads
from ..timeutil import now_utc
from .fields import ASPECTS, kind_part
from .letterbox import letter_title

__all__ = ["PROMOTE_AFTER", "SESSION_START", "SelfModel", "stage_of"]

PROMOTE_AFTER = 3   # Ombre-Brain's I_PROMOTE_THRESHOLD: dreams on three different dates
SESSION_START = 3   # formal entries attached at the start of a session
SELF_IMPORTANCE = 6


def stage_of(bucket: Bucket) -> str | None:
    return (kind_part(bucket, "self") or {}).get("stage")


class SelfModel:
    """Candidates, their dream witnesses, promotion, and the formal entries of any space."""

    def __init__(self, *, store: TurnReads, write: Callable[..., str], update: Callable[..., Bucket]) -> None:
        self.store = store
        self._write = write
        self._update = update

    def _all(self, space: str) -> list[Bucket]:
        validate_space(space)
        if not self.store.known_space(space):
            return []
        return [b for b in self.store.list(space, role="self", limit=None) if kind_part(b, "self")]

    def formal(self, space: str) -> list[Bucket]:
        """The formal entries, newest first."""
        return [b for b in self._all(space) if stage_of(b) == "formal" and b.type == "self"]

    def candidates(self, space: str, *, include_archived: bool = False) -> list[Bucket]:
        """Candidates still waiting, newest first (an archived one has sunk; listed only when asked)."""
        return [b for b in self._all(space) if stage_of(b) == "candidate" and b.type == "dynamic"
                and (include_archived or not (b.archived or b.resolved or b.digested))]

    def newest(self, space: str, n: int = SESSION_START) -> list[Bucket]:
        """What the start of a session carries: the newest ``n`` formal entries."""
        return self.formal(space)[:n]

    def write(self, space: str, content: str, *, aspect: str = "", now: datetime | None = None) -> Bucket:
        """A candidate: an ordinary memory about the companion itself, with no dream behind it yet."""
        if not isinstance(content, str) or not content.strip():
            raise ValidationError("is required: what you have come to think about yourself", field="content")
        aspect = _aspect(aspect)
        kind = {"self": {"stage": "candidate", "aspect": aspect, "dream_dates": []}}
        bid = self._write(space, now=now or now_utc(), title=letter_title(content), body=content, kind_fields=kind,
                          importance=SELF_IMPORTANCE, origin="assistant")
        return self.store.get(space, bid)

    def witness(self, space: str, candidate_ids: Iterable[str], day: str, now: datetime | None = None) -> list[str]:
        """Record that a dream showed these candidates on ``day`` (YYYY-MM-DD); the ids whose dates grew."""
        grown = []
        for b in self.store.get_many(space, list(candidate_ids)).values():
            fields = kind_part(b, "self")
            if fields is None or fields.get("stage") != "candidate" or day in (fields.get("dream_dates") or []):
                continue
            dates = sorted({*(fields.get("dream_dates") or []), day})
            self._update(space, b.id, kind_fields={"self": {**fields, "dream_dates": dates}}, now=now)
            grown.append(b.id)
        return grown

    def promote(self, space: str, candidate_id: str, *, content: str = "", aspect: str = "",
                now: datetime | None = None) -> tuple[Bucket, Bucket]:
        """Make a candidate seen on ``PROMOTE_AFTER`` dates a formal entry: (the entry, the candidate after)."""
        c = self.store.get(space, candidate_id) if self.store.known_space(space) else None
        if c is None:
            raise NotFoundError(f"no bucket {candidate_id!r} in space {space!r}")
        fields = kind_part(c, "self")
        if fields is None or fields.get("stage") != "candidate":
            what = f"already promoted (to {fields.get('promoted_to')})" if fields and fields.get("promoted_to") \
                else "not a self-model candidate: write it with I(content=…) first"
            raise ValidationError(f"{candidate_id!r} is {what}", field="promote")
        dates = list(fields.get("dream_dates") or [])
        if len(dates) < PROMOTE_AFTER:
            seen = f"on {len(dates)} date{'s' if len(dates) != 1 else ''} ({', '.join(dates)})" if dates else "not yet"
            raise ValidationError(f"{candidate_id!r} was seen in dreams {seen}; it needs {PROMOTE_AFTER} different "
                                  f"dates, {PROMOTE_AFTER - len(dates)} more dream(s) on other days",
                                  field="promote", code="not_settled")
        now = now or now_utc()
        words = content.strip() if isinstance(content, str) and content.strip() else c.body
        kind = {"self": {"stage": "formal", "aspect": _aspect(aspect) or fields.get("aspect"), "dream_dates": dates,
                         "from_candidate": c.id}}
        bid = self._write(space, now=now, type="self", title=letter_title(words), body=words, kind_fields=kind,
                          importance=c.importance, origin="assistant", dedupe=False)
        after = self._update(space, c.id, kind_fields={"self": {**fields, "stage": "promoted", "promoted_to": bid}},
                             resolved=True, now=now)
        return self.store.get(space, bid), after

    def counts(self, space: str) -> dict:
        found = self._all(space)
        return {"formal": sum(1 for b in found if stage_of(b) == "formal"),
                "candidates": sum(1 for b in found if stage_of(b) == "candidate"),
                "promoted": sum(1 for b in found if stage_of(b) == "promoted")}


def _aspect(aspect: str | None) -> str | None:
    if not aspect:
        return None
    if aspect not in ASPECTS:
        raise ValidationError(f"expected one of {', '.join(ASPECTS)}, got {aspect!r}", field="aspect")
    return aspect
