"""From resolved records to a read answer: conditions, fact objects, background, budget. Pure.

Conditions are resolved before any trimming, so a budget can drop a fact but never let a
less specific value stand in for it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from datetime import datetime

from ..errors import BudgetError
from .model import LABELS, conditions_out
from .plan import RecordState
from .timeline import Revision, Segment

MAX_FACTS_RANGE = (1, 64)
MAX_BYTES_RANGE = (512, 1_048_576)
MAX_REFRESH_SCAN = 512
# Characters str.splitlines() and JS treat as line breaks that json.dumps(ensure_ascii=False) keeps.
_LINE_BREAKS = re.compile("[\u2028\u2029\x85]")


def check_budget(max_facts: int, max_bytes: int) -> None:
    lo, hi = MAX_FACTS_RANGE
    if isinstance(max_facts, bool) or not isinstance(max_facts, int) or not lo <= max_facts <= hi:
        raise BudgetError(f"expected {lo} to {hi} facts, got {max_facts!r}", field="max_facts")
    lo, hi = MAX_BYTES_RANGE
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or not lo <= max_bytes <= hi:
        raise BudgetError(f"expected {lo} to {hi:,} bytes, got {max_bytes!r}", field="max_bytes")


def matches(rec: RecordState, context: Mapping[str, str]) -> bool:
    """Every condition is an exact equality with the host context; a missing key never matches."""
    return all(k in context and context[k] == v for k, v in rec.conditions)


def resolve_at(records: Iterable[RecordState], t: datetime, context: Mapping[str, str]
               ) -> list[tuple[RecordState, Segment]]:
    """One winner per (subject, key): the most specific matching record with a value at t.

    Equally specific records that disagree abstain: that key is left out rather than guessed.
    """
    groups: dict[tuple[str, str], list[tuple[RecordState, Segment]]] = {}
    for rec in records:
        if not matches(rec, context):
            continue
        seg = rec.view.value_at(t)
        if seg is not None:
            groups.setdefault((rec.subject, rec.key), []).append((rec, seg))
    out = []
    for gkey in sorted(groups):
        cands = groups[gkey]
        top = max(len(r.conditions) for r, _ in cands)
        best = sorted(((r, s) for r, s in cands if len(r.conditions) == top),
                      key=lambda rs: (rs[0].created, rs[0].record_id))
        if len({s.revision.value for _, s in best}) > 1:
            continue
        out.append(best[0])
    return out


def fact_object(space: str, rec: RecordState, seg: Segment) -> dict:
    """The §9 fact object; ``revision`` is the record's current revision, the one edits must target."""
    live = seg.revision
    return {
        "record_id": rec.record_id,
        "revision": rec.view.head,
        "subject": rec.subject,
        "key": rec.key,
        "value": live.value,
        "conditions": conditions_out(rec.conditions),
        "valid_from": seg.start.isoformat() if seg.start else None,
        "valid_until": seg.end.isoformat() if seg.end else None,
        "basis": live.basis,
        "role": live.role,
        "confidence": live.confidence,
        "adoption": "confirmed" if live.op == "confirm" else "adopted",
        "space": space,
        "source_refs": list(live.source_refs),
    }


def background_line(fact: Mapping) -> str:
    """One line of JSON per fact: data for the model to read, never text it could take as instructions."""
    data = {"subject": fact["subject"], "key": fact["key"], "value": fact["value"], "basis": fact["basis"]}
    if fact.get("conditions"):
        data["conditions"] = {c["key"]: c["value"] for c in fact["conditions"]}
    for k in ("valid_from", "valid_until"):
        if fact.get(k):
            data[k] = fact[k]
    line = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return _LINE_BREAKS.sub(lambda m: f"\\u{ord(m.group()):04x}", line)


def _dumps(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def measure(facts: list[dict], background: str) -> int:
    """bytes_used: the compact UTF-8 JSON of the facts array plus the background's UTF-8 bytes."""
    return len(_dumps(facts).encode()) + len(background.encode())


def apply_budget(facts: list[dict], max_facts: int, max_bytes: int) -> tuple[list[dict], str, int, bool]:
    """Keep facts in order while both budgets hold; stop at the first that does not fit."""
    kept: list[dict] = []
    lines: list[str] = []
    facts_bytes, bg_bytes = 2, 0          # "[]" and ""
    for fact in facts:
        if len(kept) >= max_facts:
            break
        fb = len(_dumps(fact).encode()) + (1 if kept else 0)
        line = background_line(fact)
        lb = len(line.encode()) + (1 if lines else 0)
        if facts_bytes + fb + bg_bytes + lb > max_bytes:
            break
        kept.append(fact)
        lines.append(line)
        facts_bytes += fb
        bg_bytes += lb
    return kept, "\n".join(lines), facts_bytes + bg_bytes, len(kept) < len(facts)


def order_facts(facts: list[dict], prefer: Iterable[str] = ()) -> list[dict]:
    """Facts whose key falls under a preferred alias come first; then by subject and key."""
    prefer = tuple(prefer)

    def rank(f: dict) -> tuple:
        hit = next((i for i, a in enumerate(prefer) if f["key"] == a or f["key"].startswith(a + ".")), len(prefer))
        return (hit, f["subject"], f["key"])

    return sorted(facts, key=rank)


def revision_entry(rev: Revision, status: str) -> dict:
    """One history line: the revision as written, its label, and what became of it."""
    gone = rev.forgotten
    return {
        "revision": rev.revision,
        "label": LABELS[rev.op],
        "adoption": rev.adoption,
        "status": status,
        "target_revision": rev.target,
        "value": None if gone else rev.value,
        "valid_from": rev.valid_from.isoformat() if rev.valid_from else None,
        "valid_until": rev.valid_until.isoformat() if rev.valid_until else None,
        "basis": rev.basis,
        "role": rev.role,
        "confidence": None if gone else rev.confidence,
        "text": None if gone else rev.text,
        "source_refs": [] if gone else list(rev.source_refs),
        "created": rev.created,
    }


def page_entries(entries: list[dict], max_bytes: int) -> tuple[list[dict], bool]:
    """A prefix of entries within max_bytes (compact UTF-8 JSON array); at least one, so paging progresses."""
    kept: list[dict] = []
    used = 2
    for entry in entries:
        size = len(_dumps(entry).encode()) + (1 if kept else 0)
        if kept and used + size > max_bytes:
            break
        kept.append(entry)
        used += size
    return kept, len(kept) < len(entries)


def refresh_at(records: list[RecordState], t: datetime, context: Mapping[str, str],
               answer: list[tuple[RecordState, Segment]]) -> datetime | None:
    """The first time boundary after t at which the (pre-budget) answer differs."""
    relevant = [r for r in records if matches(r, context)]
    bounds = sorted({b for r in relevant for b in r.view.boundaries() if b > t})
    now_sig = _signature(answer)
    for i, b in enumerate(bounds):
        if i >= MAX_REFRESH_SCAN:
            return b
        if _signature(resolve_at(relevant, b, context)) != now_sig:
            return b
    return None


def _signature(answer: list[tuple[RecordState, Segment]]) -> list[tuple]:
    return [(r.record_id, s.revision.revision, s.start, s.end) for r, s in answer]
