"""Resolve one record's append-only revisions into what is true when (design §9). Pure.

Revisions never change; everything a reader sees is derived here from the whole log:

* adopted establish/change revisions open *base slots*, adopted exceptions open *exception
  slots*; a slot's content is its live revision, which a correct (or a re-confirm) replaces.
  A corrected revision is audit only: it never supplies a value, for any time.
* a pending revision (a quote, an inference, or an inferred write meeting a grounded value)
  supplies nothing until a confirm adopts it; the confirm carries a copy of its content.
* base slots form one timeline: a change at onset t ends whatever held before t; an exception
  overrides the base inside ``[valid_from, valid_until)`` and the base resumes after it.
* an adopted deny of the current revision invalidates the record for every time; a deny of a
  pending revision only rejects that revision.
* a forgotten revision keeps its place in the structure (so an older value never resurfaces)
  but supplies no value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from .model import GROUNDED_BASES

# Derived per-revision status, shown in history.
LIVE, CORRECTED, SUPERSEDED = "live", "corrected", "superseded"
PENDING, CONFIRMED, REJECTED, STALE = "pending", "confirmed", "rejected", "stale"
APPLIED, FORGOTTEN = "applied", "forgotten"


@dataclass(frozen=True)
class Revision:
    """One stored revision. ``target`` is a revision number in the same record."""

    revision: int
    op: str
    adoption: str                         # as written: "adopted" | "pending"
    value: str | None = None
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    basis: str = "unknown"
    confidence: float | None = None
    role: str = "structured_confirmation"
    target: int | None = None
    forgotten: bool = False
    text: str | None = None
    created: str = ""
    source_refs: tuple[str, ...] = ()


@dataclass
class Slot:
    kind: str                             # "establish" | "change" | "exception"
    order: int                            # revision number at which the slot was adopted
    live: Revision


@dataclass(frozen=True)
class Segment:
    start: datetime | None                # None: onset unknown (holds as far back as we know)
    end: datetime | None                  # None: open
    slot: Slot

    def covers(self, t: datetime) -> bool:
        return (self.start is None or self.start <= t) and (self.end is None or t < self.end)

    @property
    def revision(self) -> Revision:
        return self.slot.live


@dataclass
class RecordView:
    revisions: dict[int, Revision]
    head: int | None = None               # highest adopted revision: the optimistic-concurrency token
    denied: bool = False
    slots: list[Slot] = field(default_factory=list)
    slot_of: dict[int, Slot] = field(default_factory=dict)
    status: dict[int, str] = field(default_factory=dict)
    base: list[Segment] = field(default_factory=list)
    exceptions: list[Segment] = field(default_factory=list)

    # ------------------------------------------------------------ questions

    def segment_at(self, t: datetime) -> Segment | None:
        """The segment in force at t: the latest-adopted covering exception, else the base."""
        if self.denied:
            return None
        best = None
        for seg in self.exceptions:
            if seg.covers(t) and (best is None or seg.slot.order > best.slot.order):
                best = seg
        if best is not None:
            return best
        for seg in self.base:
            if seg.covers(t):
                return seg
        return None

    def value_at(self, t: datetime) -> Segment | None:
        """Like segment_at, but None when the segment's content was forgotten."""
        seg = self.segment_at(t)
        return None if seg is None or seg.revision.forgotten else seg

    def boundaries(self) -> list[datetime]:
        if self.denied:
            return []
        out = {b for seg in self.base + self.exceptions for b in (seg.start, seg.end) if b is not None}
        return sorted(out)

    @property
    def base_slots(self) -> list[Slot]:
        return sorted((s for s in self.slots if s.kind != "exception"), key=lambda s: s.order)

    @property
    def live(self) -> bool:
        """Counts as a confirmed base fact: adopted, not denied, some base content not forgotten."""
        return not self.denied and any(not s.live.forgotten for s in self.base_slots)

    def known_onset(self) -> datetime | None:
        onsets = [s.live.valid_from for s in self.base_slots if s.live.valid_from is not None]
        return max(onsets) if onsets else None

    def latest_base(self) -> Segment | None:
        return self.base[-1] if self.base else None

    def grounded_open(self, now: datetime) -> bool:
        """Whether a stated or observed base value is open (no end, or an end after now)."""
        seg = self.latest_base()
        if self.denied or seg is None or seg.revision.forgotten:
            return False
        return seg.revision.basis in GROUNDED_BASES and (seg.end is None or seg.end > now)

    def confirmable(self, rev: int) -> bool:
        """A pending revision may still be confirmed (or rejected) by its exact target revision."""
        return self.status.get(rev) == PENDING

    def content_target_ok(self, rev: int) -> bool:
        """A revision a correct or re-confirm may name: adopted content that is still live."""
        return self.status.get(rev) == LIVE and rev in self.slot_of


def resolve(revisions: list[Revision] | tuple[Revision, ...]) -> RecordView:
    """Replay a record's log in revision order into slots, segments and per-revision status."""
    view = RecordView(revisions={r.revision: r for r in revisions})
    pending: dict[int, Revision] = {}
    for r in sorted(revisions, key=lambda r: r.revision):
        if r.adoption == "pending":
            pending[r.revision] = r
            continue
        if _apply(view, r, r.op, r.target, pending):
            view.head = r.revision
    for r in revisions:
        if r.forgotten and r.revision not in pending:
            view.status[r.revision] = FORGOTTEN
    for rev in sorted(pending):   # a pending revision only ever targets earlier ones
        p = pending[rev]
        view.status[rev] = FORGOTTEN if p.forgotten else PENDING if _pending_still_valid(view, p) else STALE
    _build_segments(view)
    return view


def _apply(view: RecordView, r: Revision, op: str, target: int | None, pending: dict[int, Revision]) -> bool:
    """Apply one adopted revision; True when it changed the record (rejecting a pending one does not)."""
    if op in ("establish", "change", "exception"):
        slot = Slot(op, r.revision, r)
        view.slots.append(slot)
        view.slot_of[r.revision] = slot
        view.status[r.revision] = LIVE
        return True
    if op == "correct" and target in view.slot_of:
        _replace(view, r, target, CORRECTED)
        return True
    if op == "deny":
        view.status[r.revision] = APPLIED
        if target in pending:
            del pending[target]
            view.status[target] = REJECTED
            return False
        view.denied = True
        return True
    if op == "confirm":
        if target in pending:
            p = pending.pop(target)
            view.status[target] = CONFIRMED
            return _apply(view, r, p.op, p.target, pending)   # r carries a copy of p's content
        if target in view.slot_of:
            _replace(view, r, target, SUPERSEDED)
            return True
    view.status[r.revision] = APPLIED
    return False


def _replace(view: RecordView, r: Revision, target: int, old_status: str) -> None:
    slot = view.slot_of[target]
    slot.live = r
    view.slot_of[r.revision] = slot
    view.status[target] = old_status
    view.status[r.revision] = LIVE


def _pending_still_valid(view: RecordView, p: Revision) -> bool:
    """A pending edit can only be confirmed onto the state it was written against."""
    if view.denied:
        return False
    if p.op == "establish":
        return view.head is None
    if p.op == "correct":
        return view.status.get(p.target) == LIVE
    aimed = view.revisions.get(p.target) if p.target is not None else None
    if p.op == "deny" and aimed is not None and aimed.adoption == "pending":
        return view.status.get(p.target) == PENDING
    return p.target is not None and p.target == view.head


def _build_segments(view: RecordView) -> None:
    base: list[Segment] = []
    for slot in view.base_slots:
        c = slot.live
        onset = c.valid_from
        if slot.kind == "establish" or not base or onset is None:
            base = [Segment(c.valid_from, c.valid_until, slot)]
            continue
        kept = []
        for seg in base:
            if seg.start is not None and seg.start >= onset:
                continue
            end = onset if seg.end is None or seg.end > onset else seg.end
            kept.append(Segment(seg.start, end, seg.slot))
        base = kept + [Segment(onset, c.valid_until, slot)]
    view.base = base
    view.exceptions = [Segment(s.live.valid_from, s.live.valid_until, s)
                       for s in view.slots if s.kind == "exception"]
