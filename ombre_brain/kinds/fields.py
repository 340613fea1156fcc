"""The fields a letter, a plan or a self entry carries in ``Bucket.kind_fields``, validated at the door (design §3).

``Bucket.kind_fields`` is ``None`` for an ordinary memory, else ``{"<kind>": {...fields}}`` with exactly
one key. The key must fit the bucket's ``type``:

==========  =====================  ==========================================================
key         type                   fields
==========  =====================  ==========================================================
``letter``  ``letter``             author, writer, side, locked_by, lock_type, unlock_at,
                                   user_name, ai_name, date
``plan``    ``plan``               status, weight, related, history
``self``    ``self`` (formal), or  stage, aspect, dream_dates, promoted_to, from_candidate
            ``dynamic`` (a
            candidate, or one
            already promoted)
==========  =====================  ==========================================================

A bucket of type ``letter``, ``plan`` or ``self`` without ``kind_fields`` gets the defaults (an open
letter of no side, an active plan, a formal entry), so a write through the generic API is
still a whole object. Pure: no store, no Flask; ``buckets.py`` calls :func:`validate_kind`, so
this module imports nothing that imports it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ..errors import ValidationError
from ..timeutil import iso, parse_time

__all__ = ["ASPECTS", "KIND_TYPES", "LOCK_TYPES", "PLAN_STATUSES", "SIDES", "UNINDEXED_TYPES", "validate_kind",
           "kind_of", "kind_part"]

KIND_TYPES = ("letter", "plan", "self")
UNINDEXED_TYPES = frozenset(KIND_TYPES)
"""Types without moments: never searched, never a candidate; read only through their own tools."""
SIDES = ("companion", "person")
LOCK_TYPES = ("none", "timed", "permanent")
PLAN_STATUSES = ("active", "resolved", "abandoned")
SELF_STAGES = ("candidate", "formal", "promoted")
ASPECTS = ("nature", "values", "patterns", "limits", "becoming", "uncertainty", "stance")
MAX_NAME = 100
MAX_HISTORY = 200
MAX_DATES = 400
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_WANTS = {"letter": ("letter",), "plan": ("plan",), "self": ("self", "dynamic")}


def _bad(field: str, message: str) -> ValidationError:
    return ValidationError(message, field=f"kind_fields.{field}")


def _show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)[:40]


def _name(d: Mapping, key: str, field: str) -> str | None:
    v = d.get(key)
    if v in (None, ""):
        return None
    if not isinstance(v, str) or len(v) > MAX_NAME or "\x00" in v:
        raise _bad(f"{field}.{key}", f"expected a name of at most {MAX_NAME} characters, got {_show(v)}")
    return v.strip() or None


def _one_of(d: Mapping, key: str, field: str, choices: tuple[str, ...], default: str | None) -> str | None:
    v = d.get(key, default)
    if v is None:
        return default
    if v not in choices:
        raise _bad(f"{field}.{key}", f"expected one of {', '.join(choices)}, got {_show(v)}")
    return v


def _id(d: Mapping, key: str, field: str) -> str | None:
    v = d.get(key)
    if v in (None, ""):
        return None
    if not isinstance(v, str) or not _ID.fullmatch(v):
        raise _bad(f"{field}.{key}", f"expected a bucket id, got {_show(v)}")
    return v


def _letter(d: Mapping) -> dict:
    lock = _one_of(d, "lock_type", "letter", LOCK_TYPES, "none")
    unlock = d.get("unlock_at")
    if lock == "timed":
        if unlock in (None, ""):
            raise _bad("letter.unlock_at", "is required for a timed lock: when the letter opens, with an offset")
        unlock = iso(parse_time(unlock, "kind_fields.letter.unlock_at"))
    elif unlock not in (None, ""):
        raise _bad("letter.unlock_at", f"only a timed lock has an unlock time (this lock is {lock})")
    else:
        unlock = None
    side = _one_of(d, "side", "letter", SIDES, None)
    locked_by = _one_of(d, "locked_by", "letter", SIDES, None)
    if lock != "none" and locked_by is None:
        raise _bad("letter.locked_by", "a locked letter needs the side that holds its lock (companion or person)")
    return {"author": _name(d, "author", "letter"), "writer": _name(d, "writer", "letter"), "side": side,
            "locked_by": locked_by, "lock_type": lock,
            "unlock_at": unlock, "user_name": _name(d, "user_name", "letter"),
            "ai_name": _name(d, "ai_name", "letter"), "date": _name(d, "date", "letter")}


def _history(raw: Any) -> list[dict]:
    if raw in (None, ()):
        return []
    if not isinstance(raw, list | tuple) or len(raw) > MAX_HISTORY:
        raise _bad("plan.history", f"expected a list of at most {MAX_HISTORY} entries")
    out = []
    for i, e in enumerate(raw):
        if not isinstance(e, Mapping) or not isinstance(e.get("action"), str):
            raise _bad(f"plan.history[{i}]", "expected {action, at, from?, to?, by?, reason?}")
        entry = {"action": e["action"][:40], "at": iso(parse_time(e.get("at"), f"kind_fields.plan.history[{i}].at"))}
        for key in ("from", "to", "by"):
            if e.get(key) not in (None, ""):
                entry[key] = str(e[key])[:128]
        if isinstance(e.get("reason"), str) and e["reason"].strip():
            entry["reason"] = e["reason"].strip()[:1000]
        out.append(entry)
    return out


def _plan(d: Mapping) -> dict:
    weight = d.get("weight", 0.5)
    if weight is None:
        weight = 0.5
    if isinstance(weight, bool) or not isinstance(weight, int | float) or not 0 <= weight <= 1:
        raise _bad("plan.weight", f"expected a number between 0 and 1, got {_show(weight)}")
    return {"status": _one_of(d, "status", "plan", PLAN_STATUSES, "active"), "weight": float(weight),
            "related": _id(d, "related", "plan"), "history": _history(d.get("history"))}


def _self(d: Mapping, btype: str) -> dict:
    stage = _one_of(d, "stage", "self", SELF_STAGES, "formal" if btype == "self" else "candidate")
    if (btype == "self") != (stage == "formal"):
        raise _bad("self.stage", f"a {btype} bucket cannot be a {stage} self entry (formal entries are type self; "
                                 "candidates and promoted ones are ordinary dynamic memories)")
    dates = d.get("dream_dates") or []
    if not isinstance(dates, list | tuple) or len(dates) > MAX_DATES or \
            not all(isinstance(x, str) and _DATE.fullmatch(x) for x in dates):
        raise _bad("self.dream_dates", "expected a list of dates like 2026-08-14")
    return {"stage": stage, "aspect": _one_of(d, "aspect", "self", ASPECTS, None),
            "dream_dates": sorted(set(dates)), "promoted_to": _id(d, "promoted_to", "self"),
            "from_candidate": _id(d, "from_candidate", "self")}


def validate_kind(btype: str, raw: Any) -> dict | None:
    """``raw`` (a bucket's ``kind_fields``) validated for a bucket of type ``btype``, defaults filled; None for none.

    Raises ValidationError naming ``kind_fields.<field>`` and what was expected.
    """
    if raw is None:
        if btype in KIND_TYPES:
            raw = {btype: {}}
        else:
            return None
    if not isinstance(raw, Mapping) or len(raw) != 1:
        raise ValidationError(f"expected one of {{{', '.join(KIND_TYPES)}: {{…}}}}, got {_show(raw)}",
                              field="kind_fields")
    (key, fields), = raw.items()
    if key not in KIND_TYPES:
        raise ValidationError(f"expected one of {', '.join(KIND_TYPES)} as its key, got {_show(key)}",
                              field="kind_fields")
    if btype not in _WANTS[key]:
        raise ValidationError(f"{key} fields belong to a bucket of type {' or '.join(_WANTS[key])}, "
                              f"not {btype}", field="kind_fields")
    if fields is None:
        fields = {}
    if not isinstance(fields, Mapping):
        raise _bad(key, f"expected an object, got {_show(fields)}")
    body = _letter(fields) if key == "letter" else _plan(fields) if key == "plan" else _self(fields, btype)
    return {key: body}


def kind_of(bucket: Any) -> str | None:
    """The bucket's kind key (``letter``, ``plan``, ``self``) or None for an ordinary memory."""
    kind = getattr(bucket, "kind_fields", None)
    return next(iter(kind)) if kind else None


def kind_part(bucket: Any, key: str) -> dict | None:
    """The bucket's fields of kind ``key``, or None when it is not of that kind."""
    kind = getattr(bucket, "kind_fields", None)
    return kind.get(key) if kind else None
