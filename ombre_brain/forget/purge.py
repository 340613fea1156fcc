"""Forgetting (design §10): purge with signed receipts, and suppression of purged sources.

A purge names its target (bucket ids, a source identity, or a whole space) and removes
everything derived from it: buckets with their moments in Chroma and the lexical index, their
edges, session history that mentions them, dreams composed from any of them, facts they
alone supported, and the query caches. It is crash-safe the way bucket writes are: one ledger
transaction records the intent (the resolved bucket ids and counts, never text), marks the
buckets ``deleting`` so readers stop seeing them, and suppresses their source identities;
the idempotent removal steps follow, and :meth:`Forgetter.reconcile` finishes any purge a
crash interrupted. The receipt is signed last (see :mod:`ombre_brain.receipts`).

Source identities. A bucket's ``source`` is a free string; its suppression digest is the
SHA-256 of the canonical JSON array ``[space, source]`` (sorted keys, no whitespace, UTF-8) --
the same hash and encoding the facts store uses for its ``[space, producer, event_id,
revision, fragment]`` identities, so the two kinds share one digest space without colliding.
Every digest a purge suppresses is handed to the facts store too.

Capabilities with their own per-space state may define ``on_purge(space, bucket_ids,
digests, whole_space) -> int``; every loaded capability object that has it is called.

Text that names no bucket. Before the buckets go, the words of their text that no other memory
of the space holds are collected (:meth:`BucketStore.purged_terms`); logged turns and queued
exchanges that contain one go too, so a query typed before the memory existed, or the message
it was written from, does not outlive it.

What stays on disk. Every SQLite ledger connection zeroes what it deletes (``secure_delete``)
and the WAL is checkpointed after each purge; what a PostgreSQL ledger keeps until VACUUM is in
docs/deploy.md. Chroma's copy of the vectors is compacted: the space's
collection is rebuilt from its live vectors, orphaned segment directories are removed and
``chroma.sqlite3`` is vacuumed (``forget.compact_vectors``; embedded mode). What remains by
design, and how to clear a Chroma server, is listed in docs/forgetting.md.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..buckets import validate_id, validate_space
from ..config import Config
from ..errors import ConfigError, SourceSuppressedError, ValidationError
from ..store.interfaces import Forgetting
from ..text import digest
from . import receipts
from .keys import signing_key

log = logging.getLogger("ombre_brain")

SCHEMA = """
CREATE TABLE IF NOT EXISTS purges (
    purge_id TEXT PRIMARY KEY,
    space TEXT NOT NULL,
    target TEXT NOT NULL,              -- canonical JSON of what was named (ids or a source, never text)
    target_key TEXT NOT NULL,          -- sha256 of (space, target): a repeat finds its receipt here
    state TEXT NOT NULL,               -- intent | done
    plan TEXT,                         -- while intent: resolved bucket ids, digests, counts, kid
    receipt TEXT,                      -- once done: {payload, signature}
    at TEXT NOT NULL,
    seq INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS purges_target ON purges(target_key, state, seq);
CREATE INDEX IF NOT EXISTS purges_space ON purges(space, seq);
CREATE TABLE IF NOT EXISTS suppressed_sources (
    space TEXT NOT NULL,
    digest TEXT NOT NULL,
    purge_id TEXT NOT NULL,
    at TEXT NOT NULL,
    PRIMARY KEY (space, digest)
);
"""

MAX_BUCKET_IDS = 10000
EXCHANGE_PREFIX = "exchange:"  # the source of buckets written from a proxied exchange (ingest.py)
_CHUNK = 400
COUNT_KEYS = ("buckets", "moments", "edges", "dreams", "facts", "sessions", "other")


def source_digest(space: str, source: str) -> str:
    """The suppression digest of a bucket source identity: sha256 of canonical ``[space, source]``."""
    return digest([space, source])


def target_of(*, bucket_ids: Any = None, source: Any = None, whole_space: Any = False) -> dict:
    """Validate what a purge names into its canonical target (exactly one of the three)."""
    if not isinstance(whole_space, bool):
        raise ValidationError("expected true or false", field="whole_space")
    named = [n for n, v in (("bucket_ids", bucket_ids), ("source", source), ("whole_space", whole_space or None))
             if v is not None]
    if len(named) != 1:
        raise ValidationError("name exactly one of bucket_ids (a list of ids), source (a source identity) or "
                              f"whole_space: true; got {', '.join(named) or 'none'}", code="bad_target")
    if bucket_ids is not None:
        if not isinstance(bucket_ids, list | tuple) or not bucket_ids:
            raise ValidationError("expected a non-empty list of bucket ids", field="bucket_ids")
        if len(bucket_ids) > MAX_BUCKET_IDS:
            raise ValidationError(f"has {len(bucket_ids)} ids; the limit is {MAX_BUCKET_IDS}", field="bucket_ids")
        return {"bucket_ids": sorted({validate_id(b, "bucket_ids") for b in bucket_ids})}
    if source is not None:
        if not isinstance(source, str) or not source or len(source) > 512:
            raise ValidationError("expected a source identity string of 1-512 characters", field="source")
        return {"source": source}
    return {"whole_space": True}


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _chunks(items: list, n: int = _CHUNK) -> Iterable[list]:
    for i in range(0, len(items), n):
        yield items[i:i + n]


@dataclass
class Plan:
    """What one purge removes, resolved inside the intent transaction (ids and counts, no text)."""

    bucket_ids: list[str] = field(default_factory=list)
    dream_ids: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    digests: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    kid: str = ""
    released: list[str] = field(default_factory=list)  # buckets kept: another source still claims them

    def to_json(self) -> str:
        return json.dumps({"bucket_ids": self.bucket_ids, "dream_ids": self.dream_ids, "sources": self.sources,
                           "digests": self.digests, "counts": self.counts, "kid": self.kid,
                           "released": self.released}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Plan:
        d = json.loads(text)
        return cls(d["bucket_ids"], d["dream_ids"], d.get("sources", []), d["digests"], d["counts"], d.get("kid", ""),
                   d.get("released", []))


def ensure_tables(ledger) -> None:
    ledger.ensure_schema("forget", SCHEMA)


class Forgetter:
    """Purges, receipts and source suppression for one data directory.

    ``participants`` are the capabilities with their own per-space state (the dream engine, ...):
    each may define ``on_purge(space, bucket_ids, digests, whole_space) -> int``. ``caches`` are
    objects whose ``clear_cache()`` drops what is keyed by query text (embeddings, plans).
    """

    def __init__(self, *, config: Config, store: Forgetting, sessions, facts, jobs, participants: Sequence[Any] = (),
                 caches: Sequence[Any] = (), data_dir: Path | None = None) -> None:
        self.config = config
        self.store = store
        self.ledger = store.ledger
        self.sessions = sessions
        self.facts = facts
        self.jobs = jobs
        self.participants = tuple(participants)
        self.caches = tuple(caches)
        self.data_dir = data_dir
        ensure_tables(self.ledger)
        self._lock = threading.RLock()

    # ------------------------------------------------------------ suppression

    def source_digest(self, space: str, source: str) -> str:
        return source_digest(space, source)

    def is_suppressed(self, space: str, digest: str) -> bool:
        return self.ledger.one("SELECT 1 FROM suppressed_sources WHERE space = ? AND digest = ?",
                               (space, digest)) is not None

    def check_source(self, space: str, source: str) -> None:
        """Refuse material from a purged source identity (HTTP 409 ``source_suppressed``)."""
        check_source(self.ledger, space, source)

    # ------------------------------------------------------------ receipts

    def receipt(self, purge_id: str) -> dict | None:
        row = self.ledger.one("SELECT receipt FROM purges WHERE purge_id = ? AND state = 'done'", (purge_id,))
        return json.loads(row["receipt"]) if row else None

    def receipts(self, space: str, limit: int = 100) -> list[dict]:
        rows = self.ledger.query("SELECT receipt FROM purges WHERE space = ? AND state = 'done' "
                                 "ORDER BY seq DESC LIMIT ?", (space, limit))
        return [json.loads(r["receipt"]) for r in rows]

    # ------------------------------------------------------------ purge

    def purge(self, space: str, *, bucket_ids: Any = None, source: Any = None, whole_space: Any = False) -> dict:
        """Forget a target and return its signed receipt ``{payload, signature}``.

        Repeating a purge whose target no longer matches anything returns the original receipt;
        if new material matches it (a re-used id, new facts in a purged space) it is a new purge.
        """
        validate_space(space)
        target = target_of(bucket_ids=bucket_ids, source=source, whole_space=whole_space)
        key = hashlib.sha256(receipts.canonical([space, target])).hexdigest()
        kid, secret = signing_key(self.config, self.data_dir)  # fail before anything is deleted
        with self._lock:
            pending = self.ledger.one("SELECT purge_id FROM purges WHERE target_key = ? AND state = 'intent' "
                                      "ORDER BY seq LIMIT 1", (key,))
            if pending is not None:  # an interrupted purge of the same target: finish that one
                return self._finish(pending["purge_id"], secret_for={kid: secret})
            purge_id = "pg_" + uuid.uuid4().hex
            with self.ledger.tx() as c:
                plan = self._plan(c, space, target)
                plan.kid = kid
                prior = c.execute("SELECT receipt FROM purges WHERE target_key = ? AND state = 'done' "
                                  "ORDER BY seq DESC LIMIT 1", (key,)).fetchone()
                repeat = prior is not None and not plan.bucket_ids and not plan.released
                if not repeat:
                    self._record_intent(c, purge_id, space, target, key, plan)
            if not repeat:
                return self._finish(purge_id, secret_for={kid: secret})
            swept = self._execute(space, target, plan)  # what came since without a bucket (facts, sessions)
            if not any(swept.values()):
                return json.loads(prior["receipt"])
            with self.ledger.tx() as c:  # something new was forgotten after all: that earns its own receipt
                self._record_intent(c, purge_id, space, target, key, plan)
            return self._finish(purge_id, secret_for={kid: secret}, done=swept)

    def _plan(self, c, space: str, target: dict) -> Plan:
        whole = "whole_space" in target
        rows = self.store.purge_rows(c, space, bucket_ids=target.get("bucket_ids"), source=target.get("source"),
                                     whole_space=whole)
        ids = {bid for bid, _ in rows}
        released: set[str] = set()
        if "source" in target:  # the buckets another source also wrote stay, without this source's claim
            released = self.store.held_elsewhere(c, space, sorted(ids), target["source"])
            ids -= released
            sources = {target["source"]}
        else:
            sources = {src for held in self.store.claims(c, space, sorted(ids)).values() for src in held if src}
            sources |= {src for _, src in rows if src}
        dreams = [] if whole else self._derived_dreams(self.store.dream_sources(c, space), ids)
        ids |= set(dreams)
        plan = Plan(bucket_ids=sorted(ids), dream_ids=sorted(dreams), sources=sorted(sources),
                    digests=sorted({source_digest(space, s) for s in sources}), released=sorted(released))
        plan.counts = self.store.row_counts(c, space, None if whole else plan.bucket_ids)
        plan.counts["dreams"] = self.store.count_type(c, space, "dream") if whole else len(dreams)
        return plan

    @staticmethod
    def _derived_dreams(dreams: dict[str, set[str]], purged: set[str]) -> list[str]:
        """Dreams composed from any purged bucket (and dreams of those dreams).

        A dream is a collage that may quote every source it was made from, so keeping one
        because some of its sources survive would keep the forgotten words. The surviving
        sources stay and can feed a new dream.
        """
        if not purged:
            return []
        gone, out = set(purged), []
        while True:
            more = [d for d, srcs in dreams.items() if d not in gone and srcs & gone]
            if not more:
                return sorted(out)
            gone.update(more)
            out += more

    def _record_intent(self, c, purge_id: str, space: str, target: dict, key: str, plan: Plan) -> None:
        at = _now()
        c.execute("INSERT INTO purges(purge_id, space, target, target_key, state, plan, at, seq) "
                  "VALUES (?,?,?,?,'intent',?,?,?)",
                  (purge_id, space, receipts.canonical(target).decode("utf-8"), key, plan.to_json(), at,
                   self.ledger.next_seq(c, "purges")))
        # readers stop seeing the buckets now; the steps below finish the job
        self.store.mark_deleting(c, space, None if "whole_space" in target else plan.bucket_ids)
        if plan.released:
            self.store.release_claims(c, space, target["source"], plan.released)
        c.executemany("INSERT INTO suppressed_sources(space, digest, purge_id, at) VALUES (?,?,?,?) "
                      "ON CONFLICT DO NOTHING",
                      [(space, d, purge_id, at) for d in plan.digests])

    def _finish(self, purge_id: str, *, secret_for: Mapping[str, bytes] | None = None,
                done: dict[str, int] | None = None) -> dict:
        """Run (or re-run) a recorded purge's removal steps, then sign and store its receipt."""
        row = self.ledger.one("SELECT * FROM purges WHERE purge_id = ?", (purge_id,))
        if row["state"] == "done":
            return json.loads(row["receipt"])
        space, target, plan = row["space"], json.loads(row["target"]), Plan.from_json(row["plan"])
        if done is None:
            done = self._execute(space, target, plan)
        deleted = {k: 0 for k in COUNT_KEYS}
        deleted.update(plan.counts)
        for k in ("facts", "sessions", "other"):
            deleted[k] = done.get(k, 0)
        deleted["buckets"] += done.get("late_buckets", 0)
        kid, secret = next(iter(secret_for.items())) if secret_for else signing_key(self.config, self.data_dir)
        payload = {"typ": receipts.RECEIPT_TYPE, "kid": kid, "purge_id": purge_id, "space": space,
                   "target": target, "deleted": deleted, "at": row["at"]}
        if "source" in target:  # which buckets lost only this source's claim and stay (design §10)
            payload["released"] = plan.released
        receipt = receipts.make_receipt(payload, secret)
        with self.ledger.tx() as c:
            c.execute("UPDATE purges SET state = 'done', plan = NULL, receipt = ? WHERE purge_id = ?",
                      (json.dumps(receipt, sort_keys=True, ensure_ascii=False), purge_id))
        self._scrub()
        log.info("purged %s from %s: %s (purge %s)", target, space, deleted, purge_id)
        return receipt

    # ------------------------------------------------------------ the removal steps (all idempotent)

    def _execute(self, space: str, target: dict, plan: Plan) -> dict[str, int]:
        store = self.store
        whole = "whole_space" in target
        out = {"facts": 0, "sessions": 0, "other": 0, "late_buckets": 0}
        if not whole and plan.bucket_ids:  # first, while the text is still there to be recognised
            terms = store.purged_terms(space, plan.bucket_ids)
            out["sessions"] += self.sessions.forget_terms(space, terms)
            out["other"] += self.jobs.forget_terms(space, terms)
        if whole:
            store.drop_space(space)
        else:
            for chunk in _chunks(plan.bucket_ids, 200):
                store.delete(space, chunk)
            if "source" in target:  # a write that passed its check just before the purge began
                out["late_buckets"] = len(store.delete(space, store.release_source(space, target["source"])))
        out["sessions"] += (self.sessions.forget_space(space) if whole
                            else self.sessions.forget_buckets(space, plan.bucket_ids))
        out["facts"] = self._forget_facts(space, plan, whole)
        out["other"] += self._forget_exchanges(space, plan, whole)
        for obj in self.participants:
            out["other"] += int(obj.on_purge(space, list(plan.bucket_ids), list(plan.digests), whole) or 0)
        store.after_purge(space)  # every process's lexical index is rebuilt without the purged vocabulary
        for obj in self.caches:  # query embeddings and plans are keyed by query text, which may quote it
            obj.clear_cache()
        if self.config.forget.compact_vectors and (whole or plan.bucket_ids or out["late_buckets"]):
            try:
                store.compact_vectors(space, dropped=whole)
            except Exception:  # the forgetting is done; only its physical compaction waits for the next purge
                log.exception("purge: compacting Chroma's files failed; the next purge compacts them again")
        return out

    def _forget_facts(self, space: str, plan: Plan, whole: bool) -> int:
        facts = self.facts
        for d in plan.digests:
            facts.suppress_source(space, d)
        if whole:
            return int(facts.forget_space(space) or 0)
        n = 0
        if plan.digests:
            n += int(facts.forget_sources(space, list(plan.digests)) or 0)
        if plan.bucket_ids:
            n += int(facts.remove_bucket_support(space, list(plan.bucket_ids)) or 0)
        return n

    def _forget_exchanges(self, space: str, plan: Plan, whole: bool) -> int:
        """Queued exchanges hold the chat text memory was written from; their text goes with it."""
        if whole:
            return int(self.jobs.forget_space(space) or 0)
        ids = [s[len(EXCHANGE_PREFIX):] for s in plan.sources if s.startswith(EXCHANGE_PREFIX)]
        return self.jobs.forget_exchanges(space, ids) if ids else 0

    def _scrub(self) -> None:
        """Fold the ledger's log into its files so deleted rows do not linger there (best effort; see
        docs/deploy.md for what a purge leaves in PostgreSQL until VACUUM)."""
        try:
            self.ledger.scrub()
        except Exception as exc:  # a busy reader only delays the scrub to the next checkpoint
            log.debug("ledger scrub after purge: %s", exc)

    # ------------------------------------------------------------ recovery

    def reconcile(self) -> int:
        """Finish purges a crash interrupted after their intent was recorded (called on open)."""
        rows = self.ledger.query("SELECT purge_id FROM purges WHERE state = 'intent' ORDER BY seq")
        finished = 0
        for r in rows:
            try:
                self._finish(r["purge_id"])
                finished += 1
            except ConfigError as exc:  # the removal steps ran before signing: only the receipt waits
                log.warning("purge %s finished but is not signed yet: %s", r["purge_id"], exc.message)
        return finished


def check_source(ledger, space: str, source: str) -> None:
    """Refuse material from a purged source identity (HTTP 409 ``source_suppressed``); reads the ledger only."""
    row = ledger.one("SELECT purge_id FROM suppressed_sources WHERE space = ? AND digest = ?",
                     (space, source_digest(space, source)))
    if row is not None:
        raise SourceSuppressedError(
            f"source {source!r} was purged from space {space!r} (purge {row['purge_id']}); "
            "material from a purged source is not stored again")


def answer(receipt: dict) -> dict:
    """The HTTP and CLI answer for a purge: ``status`` is ``purged``, or ``nothing_matched`` when the target
    matched nothing (the receipt's deleted counts are all 0; a source named is suppressed all the same)."""
    return {"status": receipts.status_of(receipt["payload"]), "purge_id": receipt["payload"]["purge_id"],
            "receipt": receipt}


__all__ = ["Forgetter", "Plan", "answer", "check_source", "source_digest", "target_of"]
