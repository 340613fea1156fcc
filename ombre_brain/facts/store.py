"""FactsStore: the facts contract (design §9) on the ledger (SQLite or PostgreSQL).

Rules live in the pure modules (``model``, ``plan``, ``timeline``, ``select``); this module
only loads records, runs them and writes the outcome, one serial write transaction per
batch. Rejections are raised, never half-written:

* ``ValidationError`` (400): malformed body, or an edit whose times break a rule;
* ``StaleTargetError`` / ``ConflictError`` (409; codes ``stale_target``, ``source_conflict``,
  ``duplicate_fact``, ``target_mismatch``, ``record_denied``, ``target_forgotten``,
  ``value_mismatch``), ``SourceSuppressedError`` (409), ``NotFoundError`` (404,
  ``target_not_found``). The HTTP layer answers these with the §9 result shape
  ``accepted: false`` plus the error.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any

from ..buckets import validate_space
from ..config import Config
from ..errors import ConflictError, NotFoundError, SourceSuppressedError, ValidationError
from ..store.ledger import Ahead, Ledger
from ..timeutil import now_utc, parse_iso, parse_time
from . import feed, retention
from .model import LABELS, Evidence, parse_context, parse_evidence, source_digest
from .plan import Plan, RecordState, plan_batch
from .restore import Incoming, check_claims, export_record, parse_records, record_state
from .select import (
    apply_budget,
    check_budget,
    fact_object,
    order_facts,
    page_entries,
    refresh_at,
    resolve_at,
    revision_entry,
)
from .timeline import Revision

SCHEMA = """
CREATE TABLE IF NOT EXISTS facts_spaces (
    space TEXT PRIMARY KEY,
    epoch TEXT NOT NULL,               -- changes once a whole space is forgotten: old cursors reset
    seq INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS facts_records (
    space TEXT NOT NULL,
    record_id TEXT NOT NULL,
    subject TEXT NOT NULL,
    key TEXT NOT NULL,
    conditions TEXT NOT NULL,          -- canonical JSON [[k, v], ...] sorted by key
    created TEXT NOT NULL,
    PRIMARY KEY (space, record_id)
);
CREATE INDEX IF NOT EXISTS facts_records_subject ON facts_records(space, subject, key);
CREATE TABLE IF NOT EXISTS facts_revisions (
    space TEXT NOT NULL,
    record_id TEXT NOT NULL,
    revision INTEGER NOT NULL,
    op TEXT NOT NULL,
    adoption TEXT NOT NULL,            -- adopted | pending, as written
    target INTEGER,
    value TEXT,
    valid_from TEXT,
    valid_until TEXT,
    basis TEXT NOT NULL,
    confidence REAL,
    role TEXT NOT NULL,
    text TEXT,
    source_digest TEXT NOT NULL,
    receipt_id TEXT NOT NULL,
    created TEXT NOT NULL,
    forgotten INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (space, record_id, revision)
);
CREATE TABLE IF NOT EXISTS facts_support (
    space TEXT NOT NULL,
    record_id TEXT NOT NULL,
    revision INTEGER NOT NULL,
    ref TEXT NOT NULL,                 -- a source digest, or bucket:<id>
    via_bucket TEXT,                   -- the bucket a source digest was a fragment of
    own INTEGER NOT NULL,              -- 1: the revision's own source (its text came from it)
    PRIMARY KEY (space, record_id, revision, ref)
);
CREATE INDEX IF NOT EXISTS facts_support_ref ON facts_support(space, ref);
CREATE INDEX IF NOT EXISTS facts_support_bucket ON facts_support(space, via_bucket);
CREATE TABLE IF NOT EXISTS facts_receipts (
    space TEXT NOT NULL,
    digest TEXT NOT NULL,
    receipt_id TEXT NOT NULL,
    payload_hash TEXT NOT NULL,
    records TEXT NOT NULL,
    created TEXT NOT NULL,
    PRIMARY KEY (space, digest)
);
CREATE TABLE IF NOT EXISTS facts_suppressed (
    space TEXT NOT NULL,
    digest TEXT NOT NULL,
    created TEXT NOT NULL,
    PRIMARY KEY (space, digest)
);
CREATE TABLE IF NOT EXISTS facts_events (
    space TEXT NOT NULL,
    seq INTEGER NOT NULL,
    record_id TEXT NOT NULL,
    revision INTEGER NOT NULL,
    label TEXT NOT NULL,
    adoption TEXT NOT NULL,
    subject TEXT NOT NULL,
    key TEXT NOT NULL,
    created TEXT NOT NULL,
    PRIMARY KEY (space, seq)
);
"""


def _aware(now: datetime | None) -> datetime:
    if now is None:
        return now_utc()
    return now if now.tzinfo is not None else now.replace(tzinfo=timezone.utc)


_dt = parse_iso


def _marks(n: int) -> str:
    return ",".join("?" * n)


def ensure_tables(ledger: Ledger) -> None:
    ledger.ensure_schema("facts", SCHEMA)


class FactsStore:
    """Records with immutable revisions, per space, in the shared ledger."""

    def __init__(self, ledger: Ledger, config: Config) -> None:
        self.ledger = ledger
        self.config = config
        ensure_tables(ledger)
        self._cues = [(alias, [_cue_pattern(c) for c in cues]) for alias, cues in config.facts.alias_cues.items()]

    # ------------------------------------------------------------ loading

    def _snapshot(self):
        """One read transaction, so facts and cursor come from the same state."""
        return self.ledger.snapshot()

    def _load(self, conn: Any, space: str, where: str = "1=1",
              params: tuple = ()) -> dict[str, RecordState]:
        recs: dict[str, RecordState] = {}
        for row in conn.execute(f"SELECT * FROM facts_records WHERE space = ? AND ({where}) "
                                "ORDER BY created, record_id", (space, *params)):
            conds = tuple((k, v) for k, v in json.loads(row["conditions"]))
            recs[row["record_id"]] = RecordState(row["record_id"], row["subject"], row["key"], conds, row["created"])
        if not recs:
            return recs
        scope = f"SELECT record_id FROM facts_records WHERE space = ? AND ({where})"
        refs: dict[tuple[str, int], list[str]] = {}
        for row in conn.execute(f"SELECT record_id, revision, ref FROM facts_support WHERE space = ? AND "
                                f"record_id IN ({scope}) ORDER BY own DESC, ref", (space, space, *params)):
            refs.setdefault((row["record_id"], row["revision"]), []).append(row["ref"])
        for row in conn.execute(f"SELECT * FROM facts_revisions WHERE space = ? AND record_id IN ({scope}) "
                                "ORDER BY record_id, revision", (space, space, *params)):
            recs[row["record_id"]].revisions.append(Revision(
                row["revision"], row["op"], row["adoption"], row["value"], _dt(row["valid_from"]),
                _dt(row["valid_until"]), row["basis"], row["confidence"], row["role"], row["target"],
                bool(row["forgotten"]), row["text"], row["created"],
                tuple(refs.get((row["record_id"], row["revision"]), ()))))
        return recs

    # ------------------------------------------------------------ writes

    def submit(self, body: Mapping[str, Any], *, now: datetime | None = None) -> dict:
        """Validate and apply one evidence batch, all or nothing; returns the §9 result.

        The same source identity with the same payload returns the first result again.
        """
        ev = parse_evidence(body, self.config)
        now = _aware(now)
        created = now.isoformat()
        with self.ledger.tx() as conn:
            if self._suppressed(conn, ev.space, ev.digest):
                raise SourceSuppressedError(
                    f"source {ev.source.producer}/{ev.source.event_id} was forgotten and may not be submitted again")
            prior = conn.execute("SELECT * FROM facts_receipts WHERE space = ? AND digest = ?",
                                 (ev.space, ev.digest)).fetchone()
            if prior is not None:
                if prior["payload_hash"] != ev.payload_hash():
                    raise ConflictError(
                        f"source {ev.source.producer}/{ev.source.event_id} (revision {ev.source.revision!r}, "
                        f"fragment {ev.source.fragment!r}) was already submitted with a different payload; "
                        "give the new evidence its own event_id or revision", code="source_conflict")
                return _result(prior["receipt_id"], json.loads(prior["records"]))
            targets = sorted({e.target.record_id for e in ev.edits if e.target is not None})
            where = "subject = ?" + (f" OR record_id IN ({_marks(len(targets))})" if targets else "")
            records = self._load(conn, ev.space, where, (ev.subject, *targets))
            plan = plan_batch(ev, records, now=now, created=created, new_id=lambda: uuid.uuid4().hex[:16])
            receipt_id = uuid.uuid4().hex
            self._write(conn, ev, plan, records, receipt_id, created)
            conn.execute("INSERT INTO facts_receipts VALUES (?, ?, ?, ?, ?, ?)",
                         (ev.space, ev.digest, receipt_id, ev.payload_hash(), json.dumps(plan.results), created))
        return _result(receipt_id, plan.results)

    def _write(self, conn: Any, ev: Evidence, plan: Plan, records: dict[str, RecordState],
               receipt_id: str, created: str) -> None:
        for rec in plan.new_records:
            conn.execute("INSERT INTO facts_records VALUES (?, ?, ?, ?, ?, ?)",
                         (ev.space, rec.record_id, rec.subject, rec.key,
                          json.dumps([list(c) for c in rec.conditions], ensure_ascii=False), created))
        bucket = ev.source.bucket_id
        for w in plan.written:
            r = w.revision
            conn.execute(
                "INSERT INTO facts_revisions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)",
                (ev.space, w.record_id, r.revision, r.op, r.adoption, r.target, r.value,
                 r.valid_from.isoformat() if r.valid_from else None,
                 r.valid_until.isoformat() if r.valid_until else None,
                 r.basis, r.confidence, r.role, r.text, ev.digest, receipt_id, created))
            support = [(ev.digest, bucket, 1)] + [(ref, None, 0) for ref in ev.source_refs]
            conn.executemany("INSERT INTO facts_support VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                             [(ev.space, w.record_id, r.revision, ref, via, own) for ref, via, own in support])
            if w.copy_support_from is not None:
                conn.execute("INSERT INTO facts_support SELECT space, record_id, ?, ref, via_bucket, 0 "
                             "FROM facts_support WHERE space = ? AND record_id = ? AND revision = ? "
                             "ON CONFLICT DO NOTHING",
                             (r.revision, ev.space, w.record_id, w.copy_support_from))
            feed.emit(conn, ev.space, w.record_id, r.revision, LABELS[r.op], r.adoption, ev.subject,
                      records[w.record_id].key, created)

    # ------------------------------------------------------------ reads

    def read(self, space: str, *, subject: str | None = None, as_of: datetime | str | None = None,
             context: Mapping[str, str] | str | None = None, max_facts: int = 16, max_bytes: int = 4096,
             now: datetime | None = None) -> dict:
        """Confirmed facts applicable at as_of (default now) in this host context, within both budgets."""
        validate_space(space)
        check_budget(max_facts, max_bytes)
        ctx = parse_context(context)
        t = _aware(now) if as_of is None or as_of == "" else parse_time(as_of, "as_of")
        with self._snapshot() as conn:
            records = self._load(conn, space, *_subject_filter(subject))
            cursor = feed.current_cursor(conn, space)
        answer = resolve_at(records.values(), t, ctx)
        facts = [fact_object(space, rec, seg) for rec, seg in answer]
        kept, background, used, truncated = apply_budget(facts, max_facts, max_bytes)
        nxt = refresh_at(list(records.values()), t, ctx, answer)
        return {"facts": kept, "background": background, "bytes_used": used, "truncated": truncated,
                "cursor": cursor, "refresh_at": nxt.isoformat() if nxt else None}

    def stable_section(self, space: str, context: Mapping[str, str] | str | None = None,
                       now: datetime | None = None, *, query: str | None = None, max_facts: int = 64) -> list[dict]:
        """Confirmed current facts for the gateway's stable ``facts`` section, alias matches first."""
        validate_space(space)
        ctx = parse_context(context)
        with self._snapshot() as conn:
            records = self._load(conn, space)
        answer = resolve_at(records.values(), _aware(now), ctx)
        facts = [fact_object(space, rec, seg) for rec, seg in answer]
        return order_facts(facts, self.aliases_in(query or ""))[:max_facts]

    def any_ahead(self, space: str) -> Ahead:
        """Whether the space holds any fact record, read ahead: a turn without one skips its facts read."""
        return self.ledger.ahead("SELECT 1 FROM facts_records WHERE space = ? LIMIT 1", (space,))

    def aliases_in(self, query: str) -> list[str]:
        """Alias keys (preference.drink, diet, language, timezone …) whose cue words the query contains."""
        text = (query or "").casefold()
        return [alias for alias, pats in self._cues if any(p.search(text) for p in pats)]

    def history(self, space: str, record_id: str, *, after_revision: int = 0, max_bytes: int = 65536) -> dict:
        """Every revision of one record after ``after_revision``, labelled, oldest first, within max_bytes.

        When ``truncated``, pass ``next_revision`` as ``after_revision`` to read the next page.
        """
        validate_space(space)
        if isinstance(after_revision, bool) or not isinstance(after_revision, int) or after_revision < 0:
            raise ValidationError(f"expected an integer >= 0, got {after_revision!r}", field="after_revision")
        check_budget(1, max_bytes)
        with self._snapshot() as conn:
            rec = self._load(conn, space, "record_id = ?", (record_id,)).get(record_id)
        if rec is None:
            raise NotFoundError(f"no fact record {record_id!r} in space {space!r}")
        view = rec.view
        entries = [revision_entry(r, view.status.get(r.revision, "applied"))
                   for r in sorted(rec.revisions, key=lambda r: r.revision) if r.revision > after_revision]
        kept, truncated = page_entries(entries, max_bytes)
        return {"record_id": rec.record_id, "space": space, "subject": rec.subject, "key": rec.key,
                "conditions": [{"key": k, "value": v} for k, v in rec.conditions],
                "state": record_state(rec), "current_revision": view.head, "revisions": kept,
                "next_revision": kept[-1]["revision"] if truncated else None, "truncated": truncated}

    def changes(self, space: str, cursor: str | None = None, limit: int = 100) -> dict:
        """Events after a cursor; without one, ``reset_required`` and the current cursor."""
        validate_space(space)
        with self._snapshot() as conn:
            return feed.changes(conn, space, cursor, limit)

    # ------------------------------------------------------------ forgetting (design §10)

    def source_digest(self, space: str, producer: str, event_id: str, revision: int | str | None = None,
                      fragment: str | None = None) -> str:
        return source_digest(space, producer, event_id, revision, fragment)

    def _suppressed(self, conn: Any, space: str, digest: str) -> bool:
        return conn.execute("SELECT 1 FROM facts_suppressed WHERE space = ? AND digest = ?",
                            (space, digest)).fetchone() is not None

    def is_suppressed(self, space: str, digest: str) -> bool:
        return self.ledger.one("SELECT 1 FROM facts_suppressed WHERE space = ? AND digest = ?",
                               (space, digest)) is not None

    def suppress_source(self, space: str, digest: str) -> None:
        """Refuse this source identity from now on (``source_suppressed``)."""
        with self.ledger.tx() as conn:
            conn.execute("INSERT INTO facts_suppressed VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                         (space, digest, now_utc().isoformat()))

    def forget_sources(self, space: str, digests: Iterable[str]) -> int:
        """Suppress these sources and drop their support; returns how many revisions became forgotten.

        A revision whose every support came from these sources loses its value and text and is
        never read again; one with other support (a ``bucket:<id>`` reference, or the pending
        quote a confirm adopted) keeps its value and loses only the reference and its text.
        """
        digests = sorted(set(digests))
        if not digests:
            return 0
        with self.ledger.tx() as conn:
            return retention.forget_sources(conn, space, digests, now_utc().isoformat())

    def remove_bucket_support(self, space: str, bucket_ids: Iterable[str]) -> int:
        """A purged bucket stops supporting facts: ``bucket:<id>`` references go, and sources whose
        fragment was ``bucket:<id>`` are forgotten and suppressed. Returns revisions forgotten."""
        ids = sorted(set(bucket_ids))
        if not ids:
            return 0
        with self.ledger.tx() as conn:
            return retention.remove_bucket_support(conn, space, ids, now_utc().isoformat())

    def forget_space(self, space: str) -> int:
        """Delete every fact, revision, receipt and event of the space; returns records deleted.
        Suppressions stay, and outstanding change cursors answer ``reset_required``."""
        with self.ledger.tx() as conn:
            return retention.forget_space(conn, space)

    def count(self, space: str) -> int:
        """Records in the space that still hold any unforgotten revision."""
        return self.ledger.one(
            "SELECT COUNT(*) FROM facts_records r WHERE r.space = ? AND EXISTS (SELECT 1 FROM facts_revisions v "
            "WHERE v.space = r.space AND v.record_id = r.record_id AND v.forgotten = 0)", (space,))[0]

    def export(self, space: str) -> list[dict]:
        """Every record with its unforgotten revisions (history entries); forgotten material is left out."""
        validate_space(space)
        with self._snapshot() as conn:
            records = self._load(conn, space)
        return [out for rec in records.values() if (out := export_record(space, rec)) is not None]

    def restore(self, space: str, records: list[dict], *, now: datetime | None = None) -> int:
        """Write exported records (``export``'s output, from any space) into ``space``; the inverse of export.

        One transaction, all or nothing, idempotent: a record already here with the same content is
        skipped; one here with different content is a ``ConflictError`` (``record_conflict``) naming
        it. Revision numbers, values, times, basis, role, confidence, adoption and source references
        are kept, so ``export``/``read``/``history`` answer as in the source; each written revision
        emits a change event. Returns the number of records written (skipped ones do not count).
        """
        validate_space(space)
        incoming = parse_records(records, self.config.facts.max_conditions)
        for inc in incoming:
            check_claims(space, inc)
        stamp = _aware(now).isoformat()
        receipt_id = "restore:" + uuid.uuid4().hex
        written = 0
        with self.ledger.tx() as conn:
            ids = [inc.record.record_id for inc in incoming]
            existing: dict[str, RecordState] = {}
            for i in range(0, len(ids), 500):
                chunk = ids[i:i + 500]
                existing.update(self._load(conn, space, f"record_id IN ({_marks(len(chunk))})", tuple(chunk)))
            fresh = []
            for inc in incoming:
                rec = inc.record
                old = existing.get(rec.record_id)
                if old is None:
                    fresh.append(inc)
                elif export_record(space, old) != export_record(space, rec):
                    raise ConflictError(
                        f"fact record {rec.record_id!r} (records[{inc.index}]) already exists in space {space!r} "
                        "with different content; nothing was restored", code="record_conflict")
            if fresh:
                self._check_restorable(conn, space, fresh)
            for inc in fresh:
                self._write_restored(conn, space, inc, receipt_id, stamp)
                written += 1
        return written

    def _check_restorable(self, conn: Any, space: str, fresh: list[Incoming]) -> None:
        """Refuse forgotten sources, and a live record whose identity is already live here."""
        for inc in fresh:
            digests = sorted({ref for r in inc.record.revisions for ref in r.source_refs
                              if not ref.startswith("bucket:")})
            if digests and conn.execute(f"SELECT 1 FROM facts_suppressed WHERE space = ? AND digest IN "
                                        f"({_marks(len(digests))}) LIMIT 1", (space, *digests)).fetchone():
                raise SourceSuppressedError(
                    f"fact record {inc.record.record_id!r} (records[{inc.index}]) cites a source that was forgotten "
                    f"in space {space!r}; nothing was restored")
        live = [inc for inc in fresh if inc.record.view.live]
        if not live:
            return
        subjects = sorted({inc.record.subject for inc in live})
        here = self._load(conn, space, f"subject IN ({_marks(len(subjects))})", tuple(subjects))
        taken = {rec.identity: rec.record_id for rec in here.values() if rec.view.live}
        for inc in live:
            other = taken.get(inc.record.identity)
            if other is not None:
                raise ConflictError(
                    f"fact record {inc.record.record_id!r} (records[{inc.index}]) would duplicate live record "
                    f"{other!r} for {inc.record.subject}/{inc.record.key} in space {space!r}; nothing was restored",
                    code="duplicate_fact")

    def _write_restored(self, conn: Any, space: str, inc: Incoming, receipt_id: str,
                        stamp: str) -> None:
        rec = inc.record
        conn.execute("INSERT INTO facts_records VALUES (?, ?, ?, ?, ?, ?)",
                     (space, rec.record_id, rec.subject, rec.key,
                      json.dumps([list(c) for c in rec.conditions], ensure_ascii=False), rec.created))
        for r in rec.revisions:
            own = inc.own.get(r.revision)
            conn.execute(
                "INSERT INTO facts_revisions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)",
                (space, rec.record_id, r.revision, r.op, r.adoption, r.target, r.value,
                 r.valid_from.isoformat() if r.valid_from else None,
                 r.valid_until.isoformat() if r.valid_until else None,
                 r.basis, r.confidence, r.role, r.text, own or "", receipt_id, r.created))
            conn.executemany("INSERT INTO facts_support VALUES (?, ?, ?, ?, ?, ?)",
                             [(space, rec.record_id, r.revision, ref, None, 1 if ref == own else 0)
                              for ref in r.source_refs])
            feed.emit(conn, space, rec.record_id, r.revision, LABELS[r.op], r.adoption, rec.subject, rec.key,
                      stamp)


def _result(receipt_id: str, records: list[dict]) -> dict:
    return {"accepted": True, "receipt_id": receipt_id, "records": records, "rejection_reason": None}


def _subject_filter(subject: str | None) -> tuple[str, tuple]:
    if subject is None or subject == "":
        return "1=1", ()
    if not isinstance(subject, str) or len(subject) > 128:
        raise ValidationError("expected a subject name of at most 128 characters", field="subject")
    return "subject = ?", (subject,)


def _cue_pattern(cue: str) -> re.Pattern:
    """ASCII cue words match whole words ('eat' not in 'great'); CJK cues match as substrings."""
    cue = cue.casefold()
    if cue.isascii():
        return re.compile(r"(?<![a-z0-9])" + re.escape(cue) + r"(?![a-z0-9])")
    return re.compile(re.escape(cue))
