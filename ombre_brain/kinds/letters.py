"""A letter's lock: which side holds it, when it opens, and what everyone else sees meanwhile (design §19).

As in Ombre-Brain, a letter has a ``lock_type`` (``none``, ``timed`` until ``unlock_at``, or
``permanent``) and the lock belongs to a **side**: ``companion`` (whoever writes through MCP,
stdio or ``/mcp``) or ``person`` (whoever writes through the person's route, ``/v1/letters``).
The side is the channel, fixed by the server, never an argument: ``author`` is only a signature.
A token may also be bound to one side (``server.tokens[].side``), so the companion's token
cannot open the person's route and the person's token cannot call the companion's letter tools.

A letter is **sealed** while its lock holds: timed before its time, permanent always. The side
that holds the lock reads it whole; the other side, and every reader that is no side at all
(the generic bucket API, the debug pages, ``breath_search`` by id, ``pulse``), sees only its
metadata: no title, no body, no tags. A timed lock opens lazily, by the clock at each read;
nothing is rewritten when it passes. The lock is an application boundary, not encryption: the
text sits in the ledger like any memory, and whoever holds the data directory or the Python API
can read it.

Pure: the store's half is :mod:`.letterbox`.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from ..errors import ForbiddenError, ValidationError
from ..timeutil import iso, parse_iso, parse_time
from .fields import LOCK_TYPES, SIDES, kind_part

__all__ = ["SEALED_TITLE", "is_sealed", "letter_meta", "lock_request", "opens_at", "public_view", "readable_by",
           "require_owner", "sealed_view", "side_name"]

SEALED_TITLE = "sealed letter"
PERMANENT_WORDS = ("9999-12-31",)  # Ombre-Brain stores a permanent lock as this unlock date


def side_name(side: str) -> str:
    """Validate a side (``companion`` or ``person``)."""
    if side not in SIDES:
        raise ValidationError(f"expected one of {', '.join(SIDES)}, got {side!r}", field="side")
    return side


def opens_at(bucket: Any) -> datetime | None:
    """When a timed lock opens (None for an open or a permanent letter)."""
    fields = kind_part(bucket, "letter") or {}
    return parse_iso(fields.get("unlock_at")) if fields.get("lock_type") == "timed" else None


def is_sealed(bucket: Any, now: datetime) -> bool:
    """Is this a letter whose lock holds at ``now``? (Any other bucket is never sealed.)"""
    fields = kind_part(bucket, "letter")
    if fields is None:
        return False
    lock = fields.get("lock_type") or "none"
    if lock == "permanent":
        return True
    if lock == "timed":
        at = opens_at(bucket)
        return at is None or now < at
    return False


def readable_by(bucket: Any, side: str | None, now: datetime) -> bool:
    """May ``side`` read the letter whole? Always when open; while sealed, only the side holding the lock."""
    if not is_sealed(bucket, now):
        return True
    return side is not None and (kind_part(bucket, "letter") or {}).get("locked_by") == side


def sealed_view(bucket: Any) -> Any:
    """The bucket as the other side sees a sealed letter: its metadata, without title, body, tags or comments, and
    without writer hints (a letter written before they stopped being derived may carry hints read from its words)."""
    return dataclasses.replace(bucket, title=SEALED_TITLE, body="", summary=None, tags=(), comments=(),
                               source_ref=None, memory_subject=None, memory_layer=None,
                               memory_classification_source=None)


def public_view(bucket: Any, now: datetime, side: str | None = None) -> Any:
    """What a reader of ``side`` (None: a reader that is no side) may see of any bucket at ``now``."""
    if bucket is None or readable_by(bucket, side, now):
        return bucket
    return sealed_view(bucket)


def letter_meta(bucket: Any, now: datetime, side: str | None) -> dict:
    """The metadata every side may see, plus whether ``side`` may read the letter whole and when it opens."""
    f = kind_part(bucket, "letter") or {}
    sealed = is_sealed(bucket, now)
    at = opens_at(bucket)
    return {"letter_id": bucket.id, "created": bucket.created, "author": f.get("author"), "side": f.get("side"),
            "locked_by": f.get("locked_by"), "lock_type": f.get("lock_type") or "none",
            "unlock_at": f.get("unlock_at"), "sealed": sealed, "readable": readable_by(bucket, side, now),
            "opened": f.get("lock_type") == "timed" and not sealed and at is not None}


def lock_request(lock_type: Any, unlock_date: Any, now: datetime) -> tuple[str, str | None]:
    """Ombre-Brain's ``lock_type`` / ``unlock_date`` as (lock_type, unlock_at); a timed lock must lie ahead.

    ``permanent`` ignores ``unlock_date`` (Ombre-Brain writes 9999-12-31 for it, accepted here);
    ``timed`` needs an ISO-8601 time with an offset, after ``now``.
    """
    lock = (lock_type or "none").strip().lower() if isinstance(lock_type, str) else lock_type
    if lock not in LOCK_TYPES:
        raise ValidationError(f"expected one of {', '.join(LOCK_TYPES)}, got {lock_type!r}", field="lock_type")
    text = unlock_date.strip() if isinstance(unlock_date, str) else unlock_date
    if lock == "timed":
        if not text:
            raise ValidationError("is required for lock_type timed: when the letter opens, e.g. "
                                  "2026-12-24T20:00:00+08:00", field="unlock_date")
        at = parse_time(text, "unlock_date")
        if at <= now:
            raise ValidationError(f"{text} has already passed; a timed lock opens in the future", field="unlock_date")
        return lock, iso(at)
    if text and not (lock == "permanent" and str(text).startswith(PERMANENT_WORDS)):
        raise ValidationError(f"only lock_type timed takes an unlock_date (this lock is {lock})", field="unlock_date")
    return lock, None


def require_owner(bucket: Any, side: str) -> None:
    """Only the side holding a letter's lock may change it (ForbiddenError otherwise)."""
    holder = (kind_part(bucket, "letter") or {}).get("locked_by")
    if holder is None:
        raise ForbiddenError(f"letter {bucket.id!r} has no side that holds its lock (an Ombre-Brain letter imported "
                             "without one stays as it was written)")
    if holder != side:
        raise ForbiddenError(f"the lock of letter {bucket.id!r} belongs to the {holder}; the {side} cannot change it")
