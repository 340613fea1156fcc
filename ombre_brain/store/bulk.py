"""Bulk loading: many new buckets through the write protocol a batch at a time (imports, bench, eval stores).

Bulk loading at :meth:`~ombre_brain.store.writes.Writer.write` speed spends its time on tiny
embedding batches and one Chroma call per bucket. :class:`BulkWriter` embeds each batch in one
pass, records it in one ledger transaction (``pending``), upserts it to Chroma in one call per
space and commits it in one more transaction: the same protocol, so reconcile still finishes a
batch cut short by a crash. Duplicates, in the store or in the list, are found up front.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..buckets import Bucket, bucket_from_json, build_moments
from ..errors import ValidationError
from . import changes
from .claims import check_claim
from .writes import CONTENT_LOCK, moment_meta

if TYPE_CHECKING:
    from .core import StoreCore
    from .writes import Writer

CHROMA_BATCH = 4000  # moments per Chroma upsert in write_many


class BulkWriter:
    """Writes many new buckets, batch by batch, as :meth:`Writer.write` would write each."""

    def __init__(self, core: StoreCore, writer: Writer) -> None:
        self.core = core
        self.ledger = core.ledger
        self.writer = writer

    def write_many(self, buckets: Sequence[Bucket], *, dedupe: bool = True, batch_size: int = 256,
                   progress: Callable[[int], None] | None = None,
                   given: Sequence[Iterable[str]] | None = None, one_text: bool = False) -> list[tuple[str, bool]]:
        """Store many new buckets; returns (id, created) per bucket, in order, as :meth:`Writer.write` would.

        Every duplicate id (in the store or the list) and every duplicate whose ``given`` fields
        differ is refused before anything is written; with ``dedupe`` an exact duplicate, in the
        store or earlier in the list, returns the earlier id and adds its source's claim. Each batch
        holds ``batch_size`` buckets; ``progress`` is called with each batch's size. ``one_text``: the
        buckets are pieces of one text, which share one memory's embedding budget (each batch).
        """
        buckets = list(buckets)
        given = list(given) if given is not None else [()] * len(buckets)
        for space in dict.fromkeys(b.space for b in buckets):
            self.core.ensure_space(space)
        results: list[tuple[str, bool] | None] = [None] * len(buckets)
        fresh: list[tuple[int, Bucket, str]] = []
        claims: list[tuple[str, str, str]] = []
        seen_hash: dict[tuple[str, str], Bucket] = {}
        seen_id: set[tuple[str, str]] = set()
        for space, idx in _by_space(buckets).items():
            hashes = {i: buckets[i].content_hash() for i in idx}
            stored = _stored_in(self.ledger.query, space, list(hashes.values())) if dedupe else {}
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
        for batch in _batches(fresh, max(1, batch_size)):
            written = self._write_batch([(b, h, given[i]) for i, b, h in batch], dedupe=dedupe, one_text=one_text)
            for (i, _, _), result in zip(batch, written, strict=True):
                results[i] = result
            if progress is not None:
                progress(len(batch))
        if claims:
            with self.ledger.tx() as c:
                c.executemany("INSERT INTO bucket_sources(space, bucket_id, source) VALUES (?,?,?) "
                              "ON CONFLICT DO NOTHING", claims)
        return [r for r in results if r is not None]

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

    def _write_batch(self, batch: list[tuple[Bucket, str, Iterable[str]]], *, dedupe: bool = True,
                     one_text: bool = False) -> list[tuple[str, bool]]:
        """Write one space's batch of (bucket, content hash, given fields); (id, created) for each, in order.

        The batch holds its contents' locks from its pending rows to its commit, as :meth:`Writer.write`
        holds its one: a content that a concurrent writer stored after the up-front check is found
        again under the lock, and becomes a claim on that writer's bucket instead of a second copy.
        """
        space = batch[0][0].space
        built = [(b, build_moments(b)) for b, _, _ in batch]
        texts = [m.text for _, ms in built for m in ms]
        tokens = list(zip([self.core.tokens(t) for t in texts], self.core.seconds(texts), strict=True))
        vectors = self.core.embed_moments([[m.text for m in ms] for _, ms in built], shared=one_text)
        rows, out, pos = [], [], 0
        with self.core.bucket_lock(space, [CONTENT_LOCK + h for _, h, _ in batch]):
            try:
                with self.ledger.tx() as c:
                    taken = _stored_in(lambda sql, args: c.execute(sql, args).fetchall(), space,
                                       [h for _, h, _ in batch]) if dedupe else {}
                    for (b, ms), (_, h, given) in zip(built, batch, strict=True):
                        toks, vecs, pos = tokens[pos:pos + len(ms)], vectors[pos:pos + len(ms)], pos + len(ms)
                        if h in taken:
                            self.writer.claim(c, b, taken[h], given)
                            out.append((taken[h].id, False))
                            continue
                        self.writer.insert_rows(c, b, ms, toks, h)
                        rows.append((b, ms, vecs))
                        out.append((b.id, True))
            except self.ledger.IntegrityError:  # a concurrent writer took an id since the up-front check
                raise ValidationError("a bucket id in the batch already exists (written concurrently)", field="id",
                                      code="duplicate_id") from None
            if rows:
                self._put_and_commit(space, rows)
        return out

    def _put_and_commit(self, space: str, rows: list[tuple[Bucket, list, np.ndarray]]) -> None:
        ids = [m.id for _, ms, _ in rows for m in ms]
        metas = [moment_meta(b, m) for b, ms, _ in rows for m in ms]
        allv = np.concatenate([v for _, _, v in rows])
        for j in range(0, len(ids), CHROMA_BATCH):  # under Chroma's max batch size however long the bodies
            sl = slice(j, j + CHROMA_BATCH)
            self.core.chroma.upsert(space, ids[sl], allv[sl], metas[sl])
        bids = [b.id for b, _, _ in rows]
        with self.ledger.tx() as c:
            for i in range(0, len(bids), 900):
                chunk = bids[i:i + 900]
                c.execute(f"UPDATE buckets SET state = 'committed' WHERE space = ? AND state = 'pending' AND id IN "
                          f"({','.join('?' * len(chunk))})", (space, *chunk))
            changes.record(c, space, "write", bids)


def _stored_in(query: Callable, space: str, hashes: list[str]) -> dict[str, Bucket]:
    """Of these content hashes, those a live bucket of the space has, read by ``query``: {hash: its oldest bucket}."""
    found: dict[str, Bucket] = {}
    uniq = list(dict.fromkeys(hashes))
    for i in range(0, len(uniq), 900):
        chunk = uniq[i:i + 900]
        for r in query(f"SELECT content_hash, data FROM buckets WHERE space = ? AND content_hash IN "
                       f"({','.join('?' * len(chunk))}) AND state != 'deleting' ORDER BY created, id", (space, *chunk)):
            found.setdefault(r["content_hash"], bucket_from_json(r["data"]))
    return found


def _batches(fresh: list[tuple[int, Bucket, str]], size: int) -> Iterable[list[tuple[int, Bucket, str]]]:
    """``fresh`` in batches of at most ``size``, each of one space (its content locks are one space's)."""
    batch: list[tuple[int, Bucket, str]] = []
    for item in fresh:
        if batch and (len(batch) == size or batch[-1][1].space != item[1].space):
            yield batch
            batch = []
        batch.append(item)
    if batch:
        yield batch


def _by_space(buckets: Sequence[Bucket]) -> dict[str, list[int]]:
    """Positions of the buckets grouped by space, in order (Chroma holds one collection per space)."""
    out: dict[str, list[int]] = {}
    for i, b in enumerate(buckets):
        out.setdefault(b.space, []).append(i)
    return out
