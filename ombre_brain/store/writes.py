"""Writing a bucket across the ledger, Chroma and the lexical index, so a crash leaves it whole or absent.

The ledger is the write-ahead record: a bucket row goes in as ``pending`` with its moments
(and their lexical tokens) in one transaction, Chroma is written next, then the row flips to
``committed``. An update does the same through ``updating``, a row readers already see (the
new version), so an edited bucket never reads as missing; changes to one bucket are serialised
by :meth:`~ombre_brain.store.core.StoreCore.bucket_lock`. Readers never see ``pending`` or
``deleting`` rows, and :meth:`Writer.reconcile` rolls pending and updating writes forward and
finishes pending deletes on open. So after a crash at any point a bucket is whole in all three
places or in none.

:class:`Writer` owns this protocol for one bucket at a time (write, update, delete, a dropped
space, metadata-only rewrites, claims, recovery); :mod:`.bulk` runs the same protocol a batch at a time.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..buckets import Bucket, Moment, bucket_from_json, build_moments
from ..errors import NotFoundError, ValidationError
from ..memory_layers import storage_roles
from . import changes
from .claims import check_claim
from .ledger import joined
from .reads import VISIBLE

if TYPE_CHECKING:
    from .core import StoreCore
    from .reads import Reader

log = logging.getLogger("ombre_brain")


def moment_meta(bucket: Bucket, m: Moment) -> dict:
    """Chroma metadata: the scalar fields a reader filters or ranks by, and the text's hash.

    Chroma never holds memory text (no documents, no titles, no tags): its write-ahead log
    keeps deleted records until its index syncs, and a purge must leave no words behind.
    The ledger holds the text; ``text_hash`` lets doctor spot a vector made from stale text.
    """
    return {
        "space": bucket.space, "bucket_id": bucket.id, "ordinal": m.ordinal, "section": m.section,
        "context_only": m.context_only, "type": bucket.type, "importance": bucket.importance,
        "valence": bucket.valence, "arousal": bucket.arousal, "created": bucket.created,
        "last_active": bucket.last_active, "text_hash": m.text_hash,
        "memory_subject": bucket.memory_subject or "", "memory_layer": bucket.memory_layer or "",
        "memory_classification_source": bucket.memory_classification_source or "",
        "pinned": bucket.pinned, "protected": bucket.protected, "anchor": bucket.anchor,
        "archived": bucket.archived, "resolved": bucket.resolved, "digested": bucket.digested,
        "origin": bucket.origin,
    }


CONTENT_LOCK = "content:"  # the bucket_lock key of a write's content hash (sharing a stripe only serialises)


class Writer:
    """The write-ahead protocol for single buckets, their claims and their removal."""

    def __init__(self, core: StoreCore, reads: Reader) -> None:
        self.core = core
        self.ledger = core.ledger
        self.chroma = core.chroma
        self.scope = core.scope
        self.reads = reads

    # ------------------------------------------------------------ writes

    def _prepare(self, bucket: Bucket) -> tuple[list[Moment], list[tuple[list[str], bytes | None]], np.ndarray]:
        """The bucket's moments, each with its lexical tokens and second-opinion vector, and their embeddings."""
        moments = build_moments(bucket)
        texts = [m.text for m in moments]
        tokens = list(zip([self.core.tokens(t) for t in texts], self.core.seconds(texts), strict=True))
        vectors = self.core.embed_moments([texts])
        return moments, tokens, vectors

    def write(self, bucket: Bucket, *, dedupe: bool = True, given: Iterable[str] = ()) -> tuple[str, bool]:
        """Store a new bucket; returns (id, created).

        With ``dedupe`` an exact duplicate (same title, body, tags and type) returns the existing id
        and adds the new source's claim to it; if a field the writer ``given`` explicitly differs from
        the stored one, :class:`DuplicateError` names them and nothing is written.
        """
        self.core.ensure_space(bucket.space)
        moments, tokens, vectors = self._prepare(bucket)
        chash = bucket.content_hash()
        # Writers of the same content take turns: a duplicate found while its first writer is still on its way (the
        # row pending, Chroma not yet written) would be answered with an id that an edit a moment later finds missing.
        with self.core.bucket_lock(bucket.space, [CONTENT_LOCK + chash]):
            with self.ledger.tx() as c:
                if dedupe:
                    dup = c.execute("SELECT id, data FROM buckets WHERE space = ? AND content_hash = ? AND state != "
                                    "'deleting' ORDER BY created, id LIMIT 1", (bucket.space, chash)).fetchone()
                    if dup is not None:
                        self.claim(c, bucket, bucket_from_json(dup["data"]), given)
                        return dup["id"], False
                if c.execute("SELECT 1 FROM buckets WHERE space = ? AND id = ?", (bucket.space, bucket.id)).fetchone():
                    raise ValidationError(f"bucket {bucket.id!r} already exists in space {bucket.space!r}",
                                          field="id", code="duplicate_id")
                self.insert_rows(c, bucket, moments, tokens, chash)
            self._chroma_put(bucket, moments, vectors)
            self._commit(bucket.space, bucket.id)
        return bucket.id, True

    def claim(self, c, new: Bucket, stored: Bucket, given: Iterable[str]) -> None:
        """A duplicate write: refuse it if it would drop a given field, else add its source's claim."""
        check_claim(new, stored, given)
        c.execute("INSERT INTO bucket_sources(space, bucket_id, source) VALUES (?,?,?) ON CONFLICT DO NOTHING",
                  (stored.space, stored.id, new.source or ""))
        changes.record(c, stored.space, "claim", [stored.id])  # said again: followers (the profile) recount it

    def add_claims(self, space: str, claims: Iterable[tuple[str, str]]) -> None:
        """Record (bucket id, source) claims, as an import restores them; existing ones stay."""
        claims = list(claims)
        with self.ledger.tx() as c:
            c.executemany("INSERT INTO bucket_sources(space, bucket_id, source) VALUES (?,?,?) ON CONFLICT DO NOTHING",
                          [(space, bid, src) for bid, src in claims])
            if claims:
                changes.record(c, space, "claim", [bid for bid, _ in claims])

    def claim_counts(self, space: str, bucket_ids: Sequence[str]) -> dict[str, int]:
        """How many sources hold a claim on each bucket (a memory said again holds one per saying)."""
        out: dict[str, int] = {}
        ids = list(dict.fromkeys(bucket_ids))
        for i in range(0, len(ids), 500):
            among, chunk = self.ledger.dialect.among("bucket_id", ids[i:i + 500])
            out.update((r[0], int(r[1])) for r in self.ledger.query(
                f"SELECT bucket_id, COUNT(*) FROM bucket_sources WHERE space = ? AND {among} GROUP BY bucket_id",
                (space, *chunk)))
        return out

    def changed_since(self, space: str, seq: int) -> tuple[int, list[str] | None]:
        """The space's change number and the ids changed after ``seq`` (None: read the space again; changes.py)."""
        return changes.since(self.ledger, space, seq)

    def sources(self, space: str, bucket_id: str) -> list[str]:
        """Every source holding a claim on the bucket ('' for a write without one), sorted."""
        return [r[0] for r in self.ledger.query("SELECT source FROM bucket_sources WHERE space = ? AND bucket_id = ? "
                                                "ORDER BY source", (space, bucket_id))]

    def insert_rows(self, c, bucket: Bucket, moments, tokens, chash: str, state: str = "pending") -> None:
        """The bucket's ledger rows (its record, its writer's claim, its moments) in ``state``, inside ``c``."""
        c.execute(
            "INSERT INTO buckets(space, id, state, data, content_hash, type, created, last_active, source, seq, roles) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (bucket.space, bucket.id, state, json.dumps(bucket.to_dict(), ensure_ascii=False), chash, bucket.type,
             bucket.created, bucket.last_active, bucket.source, self.ledger.next_seq(c), storage_roles(bucket)))
        c.execute("INSERT INTO bucket_sources(space, bucket_id, source) VALUES (?,?,?) ON CONFLICT DO NOTHING",
                  (bucket.space, bucket.id, bucket.source or ""))
        self.insert_moments(c, bucket, moments, tokens)

    @staticmethod
    def insert_moments(c, bucket: Bucket, moments, tokens) -> None:
        """``tokens``: per moment, (its lexical tokens, its second-opinion vector blob or None)."""
        c.executemany(
            'INSERT INTO moments(space, id, bucket_id, ordinal, section, context_only, text, tokens, start, "end", '
            "second) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            [(bucket.space, m.id, bucket.id, m.ordinal, m.section, int(m.context_only), m.text, " ".join(t),
              m.start, m.end, second) for m, (t, second) in zip(moments, tokens, strict=True)])

    def _chroma_put(self, bucket: Bucket, moments: Sequence[Moment], vectors: np.ndarray) -> None:
        self.chroma.upsert(bucket.space, [m.id for m in moments], vectors, [moment_meta(bucket, m) for m in moments])

    def _commit(self, space: str, bucket_id: str) -> None:
        self.scope.forget(space)
        with self.ledger.tx() as c:
            if c.execute("UPDATE buckets SET state = 'committed' WHERE space = ? AND id = ? AND state IN ('pending', "
                         "'updating')", (space, bucket_id)).rowcount:
                changes.record(c, space, "write", [bucket_id])

    def reembed(self, buckets: Sequence[Bucket]) -> int:
        """Put the ledger's moments of these buckets into Chroma again, embedded in one batch."""
        own = [(b, self.reads.moments(b.space, b.id)) for b in buckets]
        own = [(b, ms) for b, ms in own if ms]
        if not own:
            return 0
        vectors = self.core.embed_moments([[m.text for m in ms] for _, ms in own])
        pos = 0
        for b, ms in own:
            self._chroma_put(b, ms, vectors[pos:pos + len(ms)])
            pos += len(ms)
        return pos

    # ------------------------------------------------------------ updates

    def update(self, bucket: Bucket) -> None:
        """Replace a bucket's fields; its moments are rebuilt and re-embedded."""
        with self.core.bucket_lock(bucket.space, [bucket.id]):
            self._update(bucket)

    def _update(self, bucket: Bucket) -> None:
        self.core.ensure_space(bucket.space)
        old_ids = [r["id"] for r in self.ledger.query("SELECT id FROM moments WHERE space = ? AND bucket_id = ?",
                                                      (bucket.space, bucket.id))]
        moments, tokens, vectors = self._prepare(bucket)
        with self.ledger.tx() as c:
            if c.execute("SELECT 1 FROM buckets WHERE space = ? AND id = ? AND state = 'committed'",
                         (bucket.space, bucket.id)).fetchone() is None:
                raise NotFoundError(f"no bucket {bucket.id!r} in space {bucket.space!r}")
            c.execute("DELETE FROM buckets WHERE space = ? AND id = ?", (bucket.space, bucket.id))
            c.execute("DELETE FROM moments WHERE space = ? AND bucket_id = ?", (bucket.space, bucket.id))
            self.insert_rows(c, bucket, moments, tokens, bucket.content_hash(), state="updating")
        stale = sorted(set(old_ids) - {m.id for m in moments})
        self.chroma.delete(bucket.space, stale)
        self._chroma_put(bucket, moments, vectors)
        self._commit(bucket.space, bucket.id)

    def rewrite_metadata(self, space: str, bucket_id: str, changes: Mapping | Callable[[dict], Mapping], *,
                         conn: Any = None) -> bool:
        """Change fields of a visible bucket's stored record without touching its text or vectors.

        ``changes`` is a mapping, or a function of the stored record that returns one. Only
        fields that never reach a moment may change this way (dream state, counters); ``conn``
        joins a caller's open ledger transaction. Returns whether the bucket was there.
        """
        self.scope.forget(space)
        with self.ledger.tx() if conn is None else joined(conn) as c:
            row = c.execute(f"SELECT data FROM buckets WHERE space = ? AND id = ? AND {VISIBLE}",
                            (space, bucket_id)).fetchone()
            if row is None:
                return False
            d = json.loads(row["data"])
            d.update(changes(d) if callable(changes) else changes)
            c.execute(f"UPDATE buckets SET data = ? WHERE space = ? AND id = ? AND {VISIBLE}",
                      (json.dumps(d, ensure_ascii=False), space, bucket_id))
            return True

    # ------------------------------------------------------------ deletes

    def delete(self, space: str, bucket_ids: Iterable[str]) -> list[str]:
        """Delete buckets, their moments and edges; returns the ids that existed."""
        ids = list(dict.fromkeys(bucket_ids))
        if not ids:
            return []
        with self.core.bucket_lock(space, ids):
            return self._delete(space, ids)

    def _delete(self, space: str, ids: list[str]) -> list[str]:
        self.scope.forget(space)
        with self.ledger.tx() as c:
            marks = ",".join("?" * len(ids))
            found = [r["id"] for r in c.execute(
                f"SELECT id FROM buckets WHERE space = ? AND id IN ({marks})", (space, *ids))]
            c.execute(f"UPDATE buckets SET state = 'deleting' WHERE space = ? AND id IN ({marks})", (space, *ids))
            if found:
                changes.record(c, space, "delete", found)
        if not found:
            return []
        self._finish_delete(space, found)
        return found

    def _finish_delete(self, space: str, ids: list[str]) -> None:
        marks = ",".join("?" * len(ids))
        moment_ids = [r["id"] for r in self.ledger.query(
            f"SELECT id FROM moments WHERE space = ? AND bucket_id IN ({marks})", (space, *ids))]
        for bid in ids:  # also ids Chroma holds that the ledger may not (an update interrupted mid-way)
            moment_ids.extend(self.chroma.ids_for_bucket(space, bid))
        moment_ids = sorted(set(moment_ids))
        for i in range(0, len(moment_ids), 2000):
            self.chroma.delete(space, moment_ids[i:i + 2000])
        with self.ledger.tx() as c:
            c.execute(f"DELETE FROM moments WHERE space = ? AND bucket_id IN ({marks})", (space, *ids))
            c.execute(f"DELETE FROM edges WHERE space = ? AND (from_id IN ({marks}) OR to_id IN ({marks}))",
                      (space, *ids, *ids))
            c.execute(f"DELETE FROM buckets WHERE space = ? AND id IN ({marks})", (space, *ids))
            c.execute(f"DELETE FROM bucket_sources WHERE space = ? AND bucket_id IN ({marks})", (space, *ids))
            changes.record(c, space, "delete", ids)

    def drop_space(self, space: str) -> dict:
        """Remove every bucket, moment and edge of a space, and its Chroma collection."""
        counts = {
            "buckets": self.ledger.one("SELECT COUNT(*) n FROM buckets WHERE space = ?", (space,))["n"],
            "moments": self.ledger.one("SELECT COUNT(*) n FROM moments WHERE space = ?", (space,))["n"],
            "edges": self.ledger.one("SELECT COUNT(*) n FROM edges WHERE space = ?", (space,))["n"],
        }
        with self.ledger.tx() as c:
            c.execute("UPDATE buckets SET state = 'deleting' WHERE space = ?", (space,))
        self.chroma.drop_space(space)
        with self.ledger.tx() as c:
            for table in ("moments", "edges", "bucket_sources", "buckets", "spaces"):
                c.execute(f"DELETE FROM {table} WHERE space = ?", (space,))
            changes.record(c, space, "reset")
        self.core.drop_lexical(space)
        self.core.recheck_space(space)
        return counts

    # ------------------------------------------------------------ recovery

    def reconcile(self) -> dict:
        """Roll pending writes forward and finish pending deletes (crash recovery on open)."""
        done = {"rolled_forward": 0, "deleted": 0}
        rows = self.ledger.query("SELECT space, id, state, data FROM buckets WHERE state != 'committed'")
        deleting: dict[str, list[str]] = {}
        for r in rows:
            if r["state"] == "deleting":
                deleting.setdefault(r["space"], []).append(r["id"])
                continue
            bucket = bucket_from_json(r["data"])
            moments = self.reads.moments(bucket.space, bucket.id)
            keep = {m.id for m in moments}
            self.core.ensure_space(bucket.space)
            stale = [i for i in self.chroma.ids_for_bucket(bucket.space, bucket.id) if i not in keep]
            self.chroma.delete(bucket.space, stale)
            vectors = self.core.embed_moments([[m.text for m in moments]])
            self._chroma_put(bucket, moments, vectors)
            self._commit(bucket.space, bucket.id)
            done["rolled_forward"] += 1
        for space, ids in deleting.items():
            self._finish_delete(space, ids)
            done["deleted"] += len(ids)
        if any(done.values()):
            log.info("reconciled store: %s", done)
            self.core.drop_all_lexical()
        return done
