"""Ombre-Brain's letters, plans and ``I`` entries onto our kinds (the pure half of ``--from ombre-md``, §19).

:func:`kind_mapping` takes one file's kind (from :func:`.ombre_md_map.ombre_kind`) and frontmatter
and says what it becomes:

- a **letter** (``type: letter``) becomes a bucket of type ``letter``: ``author``, ``writer_name``
  (the writer), ``user_name``, ``ai_name``, ``letter_date``, and its lock: ``lock_type`` (none when
  absent, as Ombre-Brain reads old letters), ``unlock_date`` (``9999-12-31`` is permanent; a
  naive time is read in ``--tz``), and ``locked_by`` as the side (``ai`` → ``companion``,
  ``human`` → ``person``). A letter without ``locked_by`` keeps no side: Ombre-Brain never infers
  one from ``author``, and nobody can lock it later;
- a **plan** (``type: plan``) becomes a bucket of type ``plan``: ``status``, ``weight``,
  ``related_bucket`` and its ``change_log`` as the plan's history (``resolution_reason`` and
  ``resolved_by`` of an automatic closure become the reason of its last entry);
- a formal ``I`` entry (``type: i``) becomes a bucket of type ``self`` (``i_dream_dates``,
  ``i_from_candidate``, the ``aspect:<name>`` tag as its aspect); a candidate (a dynamic bucket
  with the ``__i_candidate__`` tag or an ``i_stage``) stays an ordinary memory with
  ``kind_fields.self`` (``candidate``, or ``promoted`` with ``i_promoted_to``).

Pure: times come through the same reader as every other field.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import tzinfo
from typing import Any

from ..kinds.fields import ASPECTS, PLAN_STATUSES

__all__ = ["KIND_KEYS", "kind_mapping"]

KIND_KEYS = frozenset({"author", "writer_name", "user_name", "ai_name", "letter_date", "lock_type", "locked_by",
                       "unlock_date", "change_log", "related_bucket", "resolution_reason", "resolved_by", "i_stage",
                       "i_dream_dates", "i_promoted_to", "i_from_candidate"})
"""Frontmatter keys the kinds map (besides the common ones in ``OMBRE_MAPPED``)."""
SIDES = {"ai": "companion", "assistant": "companion", "companion": "companion", "human": "person",
         "user": "person", "person": "person"}
PERMANENT_DATES = ("9999-",)

Time = Callable[[Any, str, tzinfo], str | None]


def _s(value: Any) -> str | None:
    return str(value).strip() if value not in (None, "") and str(value).strip() else None


def _letter(fm: dict, naive_tz: tzinfo, when: Time) -> dict:
    lock = (_s(fm.get("lock_type")) or "none").lower()
    unlock = _s(fm.get("unlock_date"))
    if lock not in ("none", "timed", "permanent"):
        lock = "none"
    if unlock and unlock.startswith(PERMANENT_DATES):
        lock, unlock = "permanent", None
    side = SIDES.get((_s(fm.get("locked_by")) or "").lower())
    if lock == "timed" and not unlock or lock != "none" and side is None:
        lock, unlock = "none", None  # a lock with no time or no side cannot hold; Ombre-Brain reads it as open
    return {"author": _s(fm.get("author")), "writer": _s(fm.get("writer_name")), "side": side, "locked_by": side,
            "lock_type": lock, "unlock_at": when(unlock, "unlock_date", naive_tz) if lock == "timed" else None,
            "user_name": _s(fm.get("user_name")), "ai_name": _s(fm.get("ai_name")),
            "date": _s(fm.get("letter_date"))}


def _plan(fm: dict, naive_tz: tzinfo, when: Time, created: str | None) -> dict:
    status = (_s(fm.get("status")) or "active").lower()
    status = status if status in PLAN_STATUSES else "active"
    history = []
    log = fm.get("change_log")
    for e in log if isinstance(log, list) else []:
        if not isinstance(e, dict) or not _s(e.get("action")):
            continue
        at = when(e.get("ts") or e.get("at"), "change_log.ts", naive_tz) or created
        entry = {"action": _s(e["action"]), "at": at}
        entry.update({k: _s(e[k]) for k in ("from", "to", "by") if _s(e.get(k))})
        if _s(e.get("reason")):
            entry["reason"] = _s(e["reason"])
        if entry["at"]:
            history.append(entry)
    if not history and created:
        history.append({"action": "imported", "to": status, "at": created})
    reason, by = _s(fm.get("resolution_reason")), _s(fm.get("resolved_by"))
    if (reason or by) and history:
        history[-1] = {**history[-1], **({"reason": reason} if reason else {}), **({"by": by} if by else {})}
    weight = fm.get("weight")
    ok = isinstance(weight, int | float) and not isinstance(weight, bool) and 0 <= weight <= 1
    return {"status": status, "weight": float(weight) if ok else 0.5, "related": _s(fm.get("related_bucket")),
            "history": history}


def _dates(fm: dict) -> list[str]:
    raw = fm.get("i_dream_dates")
    return sorted({str(d)[:10] for d in raw if str(d)[:10].strip()}) if isinstance(raw, list) else []


def kind_mapping(kind: str, fm: dict, tags: list[str], *, naive_tz: tzinfo, when: Time,
                 created: str | None) -> tuple[str | None, dict | None, list[str]]:
    """(our type, ``kind_fields``, tags left) of one Ombre-Brain file; (None, None, tags) for an ordinary memory."""
    aspects = [t.split(":", 1)[1] for t in tags if t.lower().startswith("aspect:")]
    aspect = aspects[0] if aspects and aspects[0] in ASPECTS else None
    plain = [t for t in tags if not t.lower().startswith("aspect:")] if aspect else tags
    if kind == "letter":
        return "letter", {"letter": _letter(fm, naive_tz, when)}, tags
    if kind == "plan":
        return "plan", {"plan": _plan(fm, naive_tz, when, created)}, tags
    if kind == "i":
        return "self", {"self": {"stage": "formal", "aspect": aspect, "dream_dates": _dates(fm),
                                 "from_candidate": _s(fm.get("i_from_candidate"))}}, plain
    raw_tags = {str(t).strip() for t in fm.get("tags") or [] if isinstance(t, str | int | float)}
    stage = (_s(fm.get("i_stage")) or "").lower()
    if "__i_candidate__" in raw_tags or stage in ("candidate", "promoted"):
        stage = "promoted" if stage == "promoted" or _s(fm.get("i_promoted_to")) else "candidate"
        return None, {"self": {"stage": stage, "aspect": aspect, "dream_dates": _dates(fm),
                               "promoted_to": _s(fm.get("i_promoted_to"))}}, plain
    return None, None, tags
