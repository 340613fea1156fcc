"""Apply a validated evidence batch to in-memory records: every §9 write rule lives here. Pure.

The store loads the records a batch can touch, this module appends revisions to them one
edit at a time (later edits see earlier ones) and raises on the first rule broken; the store
then writes the result in the same SQLite transaction, so a refused batch writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from ..errors import ConflictError, NotFoundError, StaleTargetError, ValidationError
from .model import ADOPTING_ROLES, DEFAULT_BASIS, GROUNDED_BASES, Conditions, Edit, Evidence
from .timeline import CONFIRMED, CORRECTED, FORGOTTEN, REJECTED, STALE, RecordView, Revision, resolve


@dataclass
class RecordState:
    record_id: str
    subject: str
    key: str
    conditions: Conditions
    created: str
    revisions: list[Revision] = field(default_factory=list)
    new: bool = False
    _view: RecordView | None = field(default=None, repr=False)

    @property
    def view(self) -> RecordView:
        if self._view is None:
            self._view = resolve(self.revisions)
        return self._view

    @property
    def identity(self) -> tuple[str, str, Conditions]:
        return (self.subject, self.key, self.conditions)

    def append(self, rev: Revision) -> None:
        self.revisions.append(rev)
        self._view = None

    @property
    def next_revision(self) -> int:
        return max((r.revision for r in self.revisions), default=0) + 1


@dataclass(frozen=True)
class Written:
    """One revision to store; ``copy_support_from`` names a confirmed pending revision whose
    support references carry over to the confirm."""

    record_id: str
    revision: Revision
    copy_support_from: int | None = None


@dataclass
class Plan:
    new_records: list[RecordState] = field(default_factory=list)
    written: list[Written] = field(default_factory=list)
    results: list[dict] = field(default_factory=list)


_STATUS_WHY = {CORRECTED: "was already corrected", CONFIRMED: "was already confirmed",
               REJECTED: "was rejected by a deny", STALE: "was written against a revision that is no longer current",
               "superseded": "was already re-confirmed"}


def plan_batch(ev: Evidence, records: dict[str, RecordState], *, now: datetime, created: str,
               new_id: Callable[[], str]) -> Plan:
    plan = Plan()
    adopting = ev.role in ADOPTING_ROLES
    for e in ev.edits:
        if e.op == "establish":
            rec = RecordState(new_id(), ev.subject, e.key, e.conditions or (), created, new=True)
            rev = _establish(ev, e, rec, records, now, adopting)
            records[rec.record_id] = rec
            plan.new_records.append(rec)
            copy_from = None
        else:
            rec = _target_record(ev, e, records)
            rev, copy_from = _targeted(ev, e, rec, now, adopting)
        rev = _with_meta(rev, ev, created)
        rec.append(rev)
        if rev.adoption == "adopted":
            _check_single_base(e, rec, records)
        plan.written.append(Written(rec.record_id, rev, copy_from))
        plan.results.append({"record_id": rec.record_id, "revision": rev.revision})
    return plan


def _with_meta(rev: Revision, ev: Evidence, created: str) -> Revision:
    return Revision(rev.revision, rev.op, rev.adoption, rev.value, rev.valid_from, rev.valid_until, rev.basis,
                    rev.confidence, ev.role, rev.target, False, ev.text, created)


def _adoption(adopting: bool, basis: str, meets_grounded: bool) -> str:
    """Quotes and inferences wait; an inferred write never silently closes a grounded value."""
    if not adopting or (basis == "inferred" and meets_grounded):
        return "pending"
    return "adopted"


def _establish(ev: Evidence, e: Edit, rec: RecordState, records: dict[str, RecordState], now: datetime,
               adopting: bool) -> Revision:
    basis = e.basis or DEFAULT_BASIS[ev.role]
    same = [r for r in records.values() if r.identity == rec.identity and r.view.live]
    adoption = _adoption(adopting, basis, any(r.view.grounded_open(now) for r in same))
    return Revision(1, "establish", adoption, e.value, e.valid_from, e.valid_until, basis, e.confidence)


def _target_record(ev: Evidence, e: Edit, records: dict[str, RecordState]) -> RecordState:
    assert e.target is not None
    rec = records.get(e.target.record_id)
    if rec is None:
        raise NotFoundError(f"edits[{e.index}].target: no fact record {e.target.record_id!r} in space "
                            f"{ev.space!r}; the whole batch was refused", code="target_not_found")
    if rec.subject != ev.subject:
        raise ConflictError(f"edits[{e.index}].target: record {rec.record_id!r} belongs to subject "
                            f"{rec.subject!r}, not {ev.subject!r}; the whole batch was refused",
                            code="target_mismatch")
    if e.key != rec.key:
        raise ConflictError(f"edits[{e.index}].key: record {rec.record_id!r} holds key {rec.key!r}, "
                            f"not {e.key!r}", code="target_mismatch")
    if e.conditions is not None and e.conditions != rec.conditions:
        raise ConflictError(f"edits[{e.index}].conditions: they differ from record {rec.record_id!r}'s; "
                            "conditions belong to the record and cannot be edited", code="target_mismatch")
    if rec.view.denied:
        raise ConflictError(f"edits[{e.index}].target: record {rec.record_id!r} was denied; establish a new "
                            "fact instead", code="record_denied")
    return rec


def _stale(e: Edit, rec: RecordState, why: str) -> StaleTargetError:
    return StaleTargetError(f"edits[{e.index}].target: revision {e.target.revision} of record "
                            f"{rec.record_id!r} {why}; re-read the fact and retry. Nothing was written")


def _require_head(e: Edit, rec: RecordState) -> None:
    view = rec.view
    if view.head is None:
        raise _stale(e, rec, "is not adopted yet (confirm the pending revision first)")
    if e.target.revision != view.head:
        raise _stale(e, rec, f"is not the current revision (current: {view.head})")


def _targeted(ev: Evidence, e: Edit, rec: RecordState, now: datetime, adopting: bool
              ) -> tuple[Revision, int | None]:
    view = rec.view
    tnum = e.target.revision
    target = view.revisions.get(tnum)
    if target is None:
        raise _stale(e, rec, "does not exist")
    if view.status.get(tnum) == FORGOTTEN:
        raise ConflictError(f"edits[{e.index}].target: revision {tnum} of record {rec.record_id!r} was "
                            "forgotten and cannot be edited", code="target_forgotten")
    basis = e.basis or DEFAULT_BASIS[ev.role]
    n = rec.next_revision
    if e.op == "change":
        _require_head(e, rec)
        onset = view.known_onset()
        if onset is not None and e.valid_from <= onset:
            raise ValidationError(f"a change needs an onset strictly after the current known onset "
                                  f"{onset.isoformat()}", field=e.field("valid_from"), code="bad_onset")
        adoption = _adoption(adopting, basis, view.grounded_open(e.valid_from))
        return Revision(n, "change", adoption, e.value, e.valid_from, e.valid_until, basis, e.confidence,
                        target=tnum), None
    if e.op == "exception":
        _require_head(e, rec)
        adoption = _adoption(adopting, basis, view.grounded_open(e.valid_from))
        return Revision(n, "exception", adoption, e.value, e.valid_from, e.valid_until, basis, e.confidence,
                        target=tnum), None
    if e.op == "correct":
        if not view.content_target_ok(tnum):
            raise _stale(e, rec, _STATUS_WHY.get(view.status.get(tnum, ""), "holds no adopted value to correct"))
        vf = e.valid_from if "valid_from" in e.present else target.valid_from
        vu = e.valid_until if "valid_until" in e.present else target.valid_until
        _check_corrected_interval(e, view, tnum, vf, vu)
        adoption = _adoption(adopting, basis, target.basis in GROUNDED_BASES)
        return Revision(n, "correct", adoption, e.value, vf, vu, basis, e.confidence, target=tnum), None
    if e.op == "confirm":
        return _confirm(ev, e, rec, target, n)
    # deny
    if view.confirmable(tnum):
        _check_same_value(e, rec, target)
        return Revision(n, "deny", "adopted" if adopting else "pending", e.value, basis=basis,
                        confidence=e.confidence, target=tnum), None
    _require_head(e, rec)
    _check_same_value(e, rec, target)
    adoption = _adoption(adopting, basis, view.grounded_open(now))
    return Revision(n, "deny", adoption, e.value, basis=basis, confidence=e.confidence, target=tnum), None


def _confirm(ev: Evidence, e: Edit, rec: RecordState, target: Revision, n: int) -> tuple[Revision, int | None]:
    view = rec.view
    tnum = target.revision
    if view.confirmable(tnum):
        copy_from: int | None = tnum
    elif view.content_target_ok(tnum):
        copy_from = None                      # re-confirming an adopted value: same content, new basis
    else:
        raise _stale(e, rec, _STATUS_WHY.get(view.status.get(tnum, ""), "is neither pending nor a live value"))
    _check_same_value(e, rec, target, always=True)
    basis = e.basis or (target.basis if target.basis in GROUNDED_BASES else DEFAULT_BASIS[ev.role])
    conf = e.confidence if "confidence" in e.present else target.confidence
    rev = Revision(n, "confirm", "adopted", target.value, target.valid_from, target.valid_until, basis, conf,
                   target=tnum)
    return rev, copy_from


def _check_same_value(e: Edit, rec: RecordState, target: Revision, *, always: bool = False) -> None:
    """A confirm must carry the exact pending text; a deny that names a value must name the right one."""
    if (always or e.value is not None) and e.value != target.value:
        raise ConflictError(f"edits[{e.index}].value: revision {target.revision} of record {rec.record_id!r} "
                            f"holds a different value; {e.op} must repeat it exactly", code="value_mismatch")


def _check_corrected_interval(e: Edit, view: RecordView, tnum: int, vf: datetime | None,
                              vu: datetime | None) -> None:
    slot = view.slot_of[tnum]
    if vf is not None and vu is not None and vf >= vu:
        raise ValidationError("valid_until must be after valid_from", field=e.field("valid_until"))
    if slot.kind == "exception":
        if vf is None or vu is None:
            raise ValidationError("an exception keeps both ends", field=e.field("valid_from" if vf is None
                                                                             else "valid_until"))
        return
    slots = view.base_slots
    i = slots.index(slot)
    if slot.kind == "change":
        if vf is None:
            raise ValidationError("a corrected change still needs an explicit onset", field=e.field("valid_from"))
        earlier = [s.live.valid_from for s in slots[:i] if s.live.valid_from is not None]
        if earlier and vf <= max(earlier):
            raise ValidationError(f"onset must stay after the previous onset {max(earlier).isoformat()}",
                                  field=e.field("valid_from"), code="bad_onset")
    if i + 1 < len(slots) and vf is not None:
        nxt = slots[i + 1].live.valid_from
        if nxt is not None and vf >= nxt:
            raise ValidationError(f"onset must stay before the next change at {nxt.isoformat()}",
                                  field=e.field("valid_from"), code="bad_onset")


def _check_single_base(e: Edit, rec: RecordState, records: dict[str, RecordState]) -> None:
    """Two confirmed base facts for one subject, key and conditions never coexist."""
    if not rec.view.live:
        return
    for other in records.values():
        if other is not rec and other.identity == rec.identity and other.view.live:
            raise ConflictError(
                f"edits[{e.index}]: subject {rec.subject!r} already has a confirmed {rec.key!r} fact with these "
                f"conditions (record {other.record_id!r}); use change or correct on it. Nothing was written",
                code="duplicate_fact")
