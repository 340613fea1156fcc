"""Buckets and moments across the ledger, Chroma and the lexical index, kept consistent.

The ledger is the write-ahead record: a bucket row goes in as ``pending`` with its moments
(and their lexical tokens) in one transaction, Chroma is written next, then the row flips to
``committed``. An update does the same through ``updating``, a row readers already see (the
new version), so an edited bucket never reads as missing; changes to one bucket are serialised
by :meth:`BucketStore.bucket_lock`. Readers never see ``pending`` or ``deleting`` rows, and
:meth:`BucketStore.reconcile` rolls pending and updating writes forward and finishes pending
deletes on open. So after a crash at any point a bucket is whole in all three places or in none.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from ..buckets import Bucket, Moment, bucket_from_stored, build_moments
from ..config import Config
from ..errors import EmbeddingError, NotFoundError, ValidationError
from ..memory_layers import storage_roles
from ..retrieval.second_opinion import encode_blob
from . import changes
from .chroma import ChromaBackend, collection_name
from .claims import check_claim
from .consistency import ConsistencyMixin
from .edges import EdgesMixin
from .forgetting import ForgettingMixin
from .ledger import open_ledger
from .reads import ReadsMixin
from .schema import ensure_store_schema, space_names, store_id
from .scope import TurnScopeMixin

log = logging.getLogger("ombre_brain")

BUCKET_LOCK_STRIPES = 64
CHROMA_BATCH = 4000  # moments per Chroma upsert in write_many


def _meta(bucket: Bucket, m: Moment) -> dict:
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


class BucketStore(TurnScopeMixin, ReadsMixin, EdgesMixin, ForgettingMixin, ConsistencyMixin):
    """The storage facade used by Brain: write/update/delete/get plus the two searches."""

    def __init__(self, data_dir: Path, config: Config, embedder_factory, tokenizer, second_factory=None) -> None:
        self.data_dir = Path(data_dir)
        self.config = config
        self.ledger = open_ledger(config.store, self.data_dir)
        ensure_store_schema(self.ledger)
        namespace = self.store_id() if config.store.chroma.mode == "http" else ""
        self.chroma = ChromaBackend(config.store.chroma, self.data_dir / "chroma", namespace=namespace)
        self._embedder_factory = embedder_factory
        self._embedder = None
        self._second_factory = second_factory or (lambda: None)
        self._second: object | None = None
        self._second_loaded = False
        self._tokenize = tokenizer
        self._lexical: dict[str, changes.Followed] = {}
        self._scope = threading.local()  # the turn this thread is running (scope.turn_scope)
        self.reset_listeners: list[Callable[[str], None]] = []  # told when another process purged in a space
        self._lock = threading.RLock()
        self._checked_spaces: set[str] = set()
        self._bucket_locks = [threading.RLock() for _ in range(BUCKET_LOCK_STRIPES)]

    # ------------------------------------------------------------ plumbing

    @contextmanager
    def bucket_lock(self, space: str, bucket_ids: Iterable[str]) -> Iterator[None]:
        """Serialise changes to the same buckets (striped, reentrant, deadlock-free), across processes too
        where they share the ledger (its advisory locks, taken in one order).

        Two updates of one bucket, or an update racing a delete, would otherwise interleave their
        ledger and Chroma steps: the loser gets a false 404, or Chroma keeps moments of a deleted bucket.
        """
        ids = sorted(set(bucket_ids))
        stripes = sorted({hash((space, b)) % BUCKET_LOCK_STRIPES for b in ids})
        for i in stripes:
            self._bucket_locks[i].acquire()
        try:
            with self.ledger.locks([("bucket", space, b) for b in ids]):
                yield
        finally:
            for i in reversed(stripes):
                self._bucket_locks[i].release()

    @property
    def second(self):
        """The second-opinion encoder for admission, or None where it is off or not installed."""
        if not self._second_loaded:
            self._second = self._second_factory()
            self._second_loaded = True
        return self._second

    def _seconds(self, texts: Sequence[str]) -> list[bytes | None]:
        enc = self.second
        if enc is None or not texts:
            return [None] * len(texts)
        return [encode_blob(v) for v in enc.passages(texts)]

    def store_id(self) -> str:
        """This installation's random id, made once; it namespaces collections on a shared Chroma server."""
        return store_id(self.ledger)

    @property
    def embedder(self):
        if self._embedder is None:
            self._embedder = self._embedder_factory()
        return self._embedder

    def clear_cache(self) -> None:
        """Forget the loaded encoders' cached queries and words (nothing to do before they are loaded)."""
        if self._embedder is not None:
            self._embedder.clear_cache()
        if self._second_loaded and self._second is not None:
            self._second.clear_cache()

    def tokens(self, text: str) -> list[str]:
        return self._tokenize(text)

    def ensure_space(self, space: str, create: bool = True) -> bool:
        """Record which model a space is embedded with; refuse to mix models in one space.

        A write to a shared ledger checks every time: another process may have dropped the space since.
        """
        if space in self._checked_spaces and not (create and self.ledger.shared):
            return True
        row = self.ledger.one("SELECT model_id, dimension FROM spaces WHERE space = ?", (space,))
        emb = self.embedder
        if row is None:
            if not create:
                return False
            with self.ledger.tx() as c:
                c.execute("INSERT INTO spaces(space, collection, model_id, dimension, created) VALUES (?,?,?,?,?) "
                          "ON CONFLICT DO NOTHING", (space, collection_name(space, self.chroma.namespace), emb.model_id,
                                                     emb.dimension, datetime.now(timezone.utc).isoformat()))
        elif row["model_id"] != emb.model_id:
            raise EmbeddingError(
                f"space {space!r} was embedded with {row['model_id']} but the configured embedder is "
                f"{emb.model_id}; run `ombre-brain reindex --space {space}` to re-embed it, or configure "
                f"embedding.backend/model to match")
        self._checked_spaces.add(space)
        return True

    def spaces(self) -> list[str]:
        return space_names(self.ledger)

    # ------------------------------------------------------------ writes

    def _prepare(self, bucket: Bucket) -> tuple[list[Moment], list[tuple[list[str], bytes | None]], np.ndarray]:
        """The bucket's moments, each with its lexical tokens and second-opinion vector, and their embeddings."""
        moments = build_moments(bucket)
        texts = [m.text for m in moments]
        tokens = list(zip([self.tokens(t) for t in texts], self._seconds(texts), strict=True))
        vectors = self.embedder.passages(texts)
        return moments, tokens, vectors

    def write(self, bucket: Bucket, *, dedupe: bool = True, given: Iterable[str] = ()) -> tuple[str, bool]:
        """Store a new bucket; returns (id, created).

        With ``dedupe`` an exact duplicate (same title, body, tags and type) returns the existing id
        and adds the new source's claim to it; if a field the writer ``given`` explicitly differs from
        the stored one, :class:`DuplicateError` names them and nothing is written.
        """
        self.ensure_space(bucket.space)
        moments, tokens, vectors = self._prepare(bucket)
        chash = bucket.content_hash()
        with self.ledger.tx() as c:
            if dedupe:
                dup = c.execute("SELECT id, data FROM buckets WHERE space = ? AND content_hash = ? AND "
                                "state != 'deleting' ORDER BY created, id LIMIT 1", (bucket.space, chash)).fetchone()
                if dup is not None:
                    self._claim(c, bucket, bucket_from_stored(json.loads(dup["data"])), given)
                    return dup["id"], False
            if c.execute("SELECT 1 FROM buckets WHERE space = ? AND id = ?", (bucket.space, bucket.id)).fetchone():
                raise ValidationError(f"bucket {bucket.id!r} already exists in space {bucket.space!r}",
                                      field="id", code="duplicate_id")
            self._insert_rows(c, bucket, moments, tokens, chash)
        self._chroma_put(bucket, moments, vectors)
        self._commit(bucket.space, bucket.id)
        return bucket.id, True

    def _claim(self, c, new: Bucket, stored: Bucket, given: Iterable[str]) -> None:
        """A duplicate write: refuse it if it would drop a given field, else add its source's claim."""
        check_claim(new, stored, given)
        c.execute("INSERT INTO bucket_sources(space, bucket_id, source) VALUES (?,?,?) ON CONFLICT DO NOTHING",
                  (stored.space, stored.id, new.source or ""))

    def add_claims(self, space: str, claims: Iterable[tuple[str, str]]) -> None:
        """Record (bucket id, source) claims, as an import restores them; existing ones stay."""
        with self.ledger.tx() as c:
            c.executemany("INSERT INTO bucket_sources(space, bucket_id, source) VALUES (?,?,?) ON CONFLICT DO NOTHING",
                          [(space, bid, src) for bid, src in claims])

    def sources(self, space: str, bucket_id: str) -> list[str]:
        """Every source holding a claim on the bucket ('' for a write without one), sorted."""
        return [r[0] for r in self.ledger.query("SELECT source FROM bucket_sources WHERE space = ? AND bucket_id = ? "
                                                "ORDER BY source", (space, bucket_id))]

    def write_many(self, buckets: Sequence[Bucket], *, dedupe: bool = True, batch_size: int = 256,
                   progress: Callable[[int], None] | None = None,
                   given: Sequence[Iterable[str]] | None = None) -> list[tuple[str, bool]]:
        """Store many new buckets; returns (id, created) per bucket, in order, as :meth:`write` would.

        Bulk loading at write() speed spends its time on tiny embedding batches and one Chroma
        call per bucket, so here each batch of ``batch_size`` buckets is embedded in one pass,
        recorded in one ledger transaction (``pending``), upserted to Chroma in one call per
        space and committed in one more transaction: the same protocol, so reconcile still
        finishes a batch cut short by a crash. Every duplicate id (in the store or the list) and
        every duplicate whose ``given`` fields differ is refused before anything is written; with
        ``dedupe`` an exact duplicate, in the store or earlier in the list, returns the earlier id
        and adds its source's claim. ``progress`` is called with each batch's size.
        """
        buckets = list(buckets)
        given = list(given) if given is not None else [()] * len(buckets)
        for space in dict.fromkeys(b.space for b in buckets):
            self.ensure_space(space)
        results: list[tuple[str, bool] | None] = [None] * len(buckets)
        fresh: list[tuple[int, Bucket, str]] = []
        claims: list[tuple[str, str, str]] = []
        seen_hash: dict[tuple[str, str], Bucket] = {}
        seen_id: set[tuple[str, str]] = set()
        for space, idx in _by_space(buckets).items():
            hashes = {i: buckets[i].content_hash() for i in idx}
            stored = self._stored_by_hash(space, list(hashes.values())) if dedupe else {}
            stored_ids = set(self._existing(space, "id", [buckets[i].id for i in idx], deleting_too=True))
            for i in idx:
                b, h = buckets[i], hashes[i]
                dup = (seen_hash.get((space, h)) or stored.get(h)) if dedupe else None
                if dup is not None:
                    check_claim(b, dup, given[i], where=f"items[{i}]: ")
                    results[i] = (dup.id, False)
                    claims.append((space, dup.id, b.source or ""))
                    continue
                if b.id in stored_ids or (space, b.id) in seen_id:
                    raise ValidationError(f"bucket {b.id!r} already exists in space {space!r}", field="id",
                                          code="duplicate_id")
                seen_hash[(space, h)] = b
                seen_id.add((space, b.id))
                fresh.append((i, b, h))
        for start in range(0, len(fresh), max(1, batch_size)):
            batch = fresh[start:start + max(1, batch_size)]
            self._write_batch([(b, h) for _, b, h in batch])
            for i, b, _ in batch:
                results[i] = (b.id, True)
            if progress is not None:
                progress(len(batch))
        if claims:
            with self.ledger.tx() as c:
                c.executemany("INSERT INTO bucket_sources(space, bucket_id, source) VALUES (?,?,?) "
                              "ON CONFLICT DO NOTHING", claims)
        return [r for r in results if r is not None]

    def _stored_by_hash(self, space: str, hashes: list[str]) -> dict[str, Bucket]:
        """Of these content hashes, those a live bucket of the space has: {hash: the oldest such bucket}."""
        found: dict[str, Bucket] = {}
        uniq = list(dict.fromkeys(hashes))
        for i in range(0, len(uniq), 900):
            chunk = uniq[i:i + 900]
            for r in self.ledger.query(f"SELECT content_hash, data FROM buckets WHERE space = ? AND content_hash IN "
                                       f"({','.join('?' * len(chunk))}) AND state != 'deleting' ORDER BY created, id",
                                       (space, *chunk)):
                found.setdefault(r["content_hash"], bucket_from_stored(json.loads(r["data"])))
        return found

    def _existing(self, space: str, column: str, values: list[str], deleting_too: bool = False) -> dict[str, str]:
        """Of ``values``, those already stored in ``column`` of the space's buckets: {value: bucket id}."""
        found: dict[str, str] = {}
        state = "" if deleting_too else " AND state != 'deleting'"
        uniq = list(dict.fromkeys(values))
        for i in range(0, len(uniq), 900):
            chunk = uniq[i:i + 900]
            marks = ",".join("?" * len(chunk))
            for r in self.ledger.query(f"SELECT id, {column} v FROM buckets WHERE space = ? AND {column} IN "
                                       f"({marks}){state}", (space, *chunk)):
                found.setdefault(r["v"], r["id"])
        return found

    def _write_batch(self, batch: list[tuple[Bucket, str]]) -> None:
        built = [(b, build_moments(b)) for b, _ in batch]
        texts = [m.text for _, ms in built for m in ms]
        tokens = list(zip([self.tokens(t) for t in texts], self._seconds(texts), strict=True))
        vectors = self.embedder.passages(texts)
        rows = []
        pos = 0
        for b, ms in built:
            rows.append((b, ms, tokens[pos:pos + len(ms)], vectors[pos:pos + len(ms)]))
            pos += len(ms)
        try:
            with self.ledger.tx() as c:
                for (b, ms, toks, _), (_, h) in zip(rows, batch, strict=True):
                    self._insert_rows(c, b, ms, toks, h)
        except self.ledger.IntegrityError:  # a concurrent writer took an id since the up-front check
            raise ValidationError("a bucket id in the batch already exists (written concurrently)", field="id",
                                  code="duplicate_id") from None
        for space, idx in _by_space([r[0] for r in rows]).items():
            ids, vecs, metas = [], [], []
            for i in idx:
                b, ms, _, v = rows[i]
                ids += [m.id for m in ms]
                vecs.append(v)
                metas += [_meta(b, m) for m in ms]
            allv = np.concatenate(vecs)
            for j in range(0, len(ids), CHROMA_BATCH):  # under Chroma's max batch size however long the bodies
                sl = slice(j, j + CHROMA_BATCH)
                self.chroma.upsert(space, ids[sl], allv[sl], metas[sl])
        with self.ledger.tx() as c:
            for space, idx in _by_space([r[0] for r in rows]).items():
                bids = [rows[i][0].id for i in idx]
                for i in range(0, len(bids), 900):
                    chunk = bids[i:i + 900]
                    c.execute(f"UPDATE buckets SET state = 'committed' WHERE space = ? AND state = 'pending' AND id IN "
                              f"({','.join('?' * len(chunk))})", (space, *chunk))
                changes.record(c, space, "write", bids)

    def _insert_rows(self, c, bucket: Bucket, moments, tokens, chash: str, state: str = "pending") -> None:
        c.execute(
            "INSERT INTO buckets(space, id, state, data, content_hash, type, created, last_active, source, seq, roles) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (bucket.space, bucket.id, state, json.dumps(bucket.to_dict(), ensure_ascii=False), chash, bucket.type,
             bucket.created, bucket.last_active, bucket.source, self.ledger.next_seq(c), storage_roles(bucket)))
        c.execute("INSERT INTO bucket_sources(space, bucket_id, source) VALUES (?,?,?) ON CONFLICT DO NOTHING",
                  (bucket.space, bucket.id, bucket.source or ""))
        self._insert_moments(c, bucket, moments, tokens)

    @staticmethod
    def _insert_moments(c, bucket: Bucket, moments, tokens) -> None:
        """``tokens``: per moment, (its lexical tokens, its second-opinion vector blob or None)."""
        c.executemany(
            'INSERT INTO moments(space, id, bucket_id, ordinal, section, context_only, text, tokens, start, "end", '
            "second) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            [(bucket.space, m.id, bucket.id, m.ordinal, m.section, int(m.context_only), m.text, " ".join(t),
              m.start, m.end, second) for m, (t, second) in zip(moments, tokens, strict=True)])

    def _chroma_put(self, bucket: Bucket, moments: Sequence[Moment], vectors: np.ndarray) -> None:
        self.chroma.upsert(bucket.space, [m.id for m in moments], vectors, [_meta(bucket, m) for m in moments])

    def _commit(self, space: str, bucket_id: str) -> None:
        self._forget_memo(space)
        with self.ledger.tx() as c:
            if c.execute("UPDATE buckets SET state = 'committed' WHERE space = ? AND id = ? AND state IN ('pending', "
                         "'updating')", (space, bucket_id)).rowcount:
                changes.record(c, space, "write", [bucket_id])

    def update(self, bucket: Bucket) -> None:
        """Replace a bucket's fields; its moments are rebuilt and re-embedded."""
        with self.bucket_lock(bucket.space, [bucket.id]):
            self._update(bucket)

    def _update(self, bucket: Bucket) -> None:
        self.ensure_space(bucket.space)
        old_ids = [r["id"] for r in self.ledger.query("SELECT id FROM moments WHERE space = ? AND bucket_id = ?",
                                                      (bucket.space, bucket.id))]
        moments, tokens, vectors = self._prepare(bucket)
        with self.ledger.tx() as c:
            if c.execute("SELECT 1 FROM buckets WHERE space = ? AND id = ? AND state = 'committed'",
                         (bucket.space, bucket.id)).fetchone() is None:
                raise NotFoundError(f"no bucket {bucket.id!r} in space {bucket.space!r}")
            c.execute("DELETE FROM buckets WHERE space = ? AND id = ?", (bucket.space, bucket.id))
            c.execute("DELETE FROM moments WHERE space = ? AND bucket_id = ?", (bucket.space, bucket.id))
            self._insert_rows(c, bucket, moments, tokens, bucket.content_hash(), state="updating")
        stale = sorted(set(old_ids) - {m.id for m in moments})
        self.chroma.delete(bucket.space, stale)
        self._chroma_put(bucket, moments, vectors)
        self._commit(bucket.space, bucket.id)

    def delete(self, space: str, bucket_ids: Iterable[str]) -> list[str]:
        """Delete buckets, their moments and edges; returns the ids that existed."""
        ids = list(dict.fromkeys(bucket_ids))
        if not ids:
            return []
        with self.bucket_lock(space, ids):
            return self._delete(space, ids)

    def _delete(self, space: str, ids: list[str]) -> list[str]:
        self._forget_memo(space)
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
        with self._lock:
            self._lexical.pop(space, None)
        self._checked_spaces.discard(space)
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
            bucket = bucket_from_stored(json.loads(r["data"]))
            moments = self.moments(bucket.space, bucket.id)
            keep = {m.id for m in moments}
            self.ensure_space(bucket.space)
            stale = [i for i in self.chroma.ids_for_bucket(bucket.space, bucket.id) if i not in keep]
            self.chroma.delete(bucket.space, stale)
            vectors = self.embedder.passages([m.text for m in moments])
            self._chroma_put(bucket, moments, vectors)
            self._commit(bucket.space, bucket.id)
            done["rolled_forward"] += 1
        for space, ids in deleting.items():
            self._finish_delete(space, ids)
            done["deleted"] += len(ids)
        if any(done.values()):
            log.info("reconciled store: %s", done)
            self._lexical.clear()
        return done

    def close(self) -> None:
        self.chroma.close()
        self.ledger.close()


def _by_space(buckets: Sequence[Bucket]) -> dict[str, list[int]]:
    """Positions of the buckets grouped by space, in order (Chroma holds one collection per space)."""
    out: dict[str, list[int]] = {}
    for i, b in enumerate(buckets):
        out.setdefault(b.space, []).append(i)
    return out

