"""What forgetting needs from the bucket store's own tables, inside the purge's transaction.

The forget wing records a purge's intent and marks its buckets ``deleting`` in one ledger
transaction with its own tables; :class:`Purger` runs the bucket-table half of that transaction
(``conn`` is the open transaction: the rows a target names, their claims, the counts for the
receipt), then the steps after the removal: the purged words, the lexical indexes of every
process, and the vectors Chroma's files still hold.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from ..buckets import bucket_from_json
from ..text import CJK_RE
from . import changes

if TYPE_CHECKING:
    from .core import StoreCore
    from .writes import Writer

CHUNK = 400


def _chunks(items: Sequence, n: int = CHUNK) -> Iterable[Sequence]:
    for i in range(0, len(items), n):
        yield items[i:i + n]


class Purger:
    """The purge's statements on the store's tables, and the clean-up after its removal steps."""

    def __init__(self, core: StoreCore, writer: Writer) -> None:
        self.core = core
        self.ledger = core.ledger
        self.chroma = core.chroma
        self.writer = writer

    def purge_rows(self, conn, space: str, *, bucket_ids: Sequence[str] | None = None, source: str | None = None,
                   whole_space: bool = False) -> list[tuple[str, str | None]]:
        """(id, source) of every bucket a purge target names, in any state."""
        if whole_space:
            rows = conn.execute("SELECT id, source FROM buckets WHERE space = ?", (space,)).fetchall()
        elif source is not None:
            rows = conn.execute("SELECT b.id, b.source FROM buckets b JOIN bucket_sources s ON s.space = b.space AND "
                                "s.bucket_id = b.id WHERE s.space = ? AND s.source = ? UNION SELECT id, source FROM "
                                "buckets WHERE space = ? AND source = ?", (space, source, space, source)).fetchall()
        else:
            rows = []
            for chunk in _chunks(list(bucket_ids or ())):
                marks = ",".join("?" * len(chunk))
                rows += conn.execute(f"SELECT id, source FROM buckets WHERE space = ? AND id IN ({marks})",
                                     (space, *chunk)).fetchall()
        return [(r["id"], r["source"]) for r in rows]

    def release_source(self, space: str, source: str) -> list[str]:
        """Drop ``source``'s claim where another source holds the bucket too; return the buckets only it holds
        (what a purge by source then deletes)."""
        with self.ledger.tx() as c:
            rows = self.purge_rows(c, space, source=source)
            kept = self.held_elsewhere(c, space, [bid for bid, _ in rows], source)
            self.release_claims(c, space, source, sorted(kept))
        return sorted({bid for bid, _ in rows} - kept)

    def claims(self, conn, space: str, bucket_ids: Sequence[str]) -> dict[str, set[str]]:
        """The sources holding a claim on each of these buckets ('' for a write without a source)."""
        out: dict[str, set[str]] = {}
        for chunk in _chunks(list(bucket_ids)):
            marks = ",".join("?" * len(chunk))
            for r in conn.execute(f"SELECT bucket_id, source FROM bucket_sources WHERE space = ? AND bucket_id IN "
                                  f"({marks})", (space, *chunk)).fetchall():
                out.setdefault(r["bucket_id"], set()).add(r["source"])
        return out

    def held_elsewhere(self, conn, space: str, bucket_ids: Sequence[str], source: str) -> set[str]:
        """Of these buckets, those another source (or a write without one) also claims: a purge of
        ``source`` releases its claim on them and leaves their text to the other holders."""
        return {bid for bid, held in self.claims(conn, space, bucket_ids).items() if held - {source}}

    def release_claims(self, conn, space: str, source: str, bucket_ids: Sequence[str]) -> None:
        """Remove ``source``'s claim on buckets others still hold; one whose displayed source was
        ``source`` shows another holder's instead (or none), so the purged identity is not shown."""
        held = self.claims(conn, space, bucket_ids)
        for bid in bucket_ids:
            conn.execute("DELETE FROM bucket_sources WHERE space = ? AND bucket_id = ? AND source = ?",
                         (space, bid, source))
            row = conn.execute("SELECT data FROM buckets WHERE space = ? AND id = ? AND source = ?",
                               (space, bid, source)).fetchone()
            if row is None:
                continue
            others = sorted(held.get(bid, set()) - {source})
            now_source = next((o for o in others if o), None)
            data = json.loads(row["data"])
            data["source"] = now_source
            conn.execute("UPDATE buckets SET source = ?, data = ? WHERE space = ? AND id = ?",
                         (now_source, json.dumps(data, ensure_ascii=False), space, bid))

    def dream_sources(self, conn, space: str) -> dict[str, set[str]]:
        """Every dream of the space with the buckets it was composed from."""
        return {r["id"]: set(json.loads(r["data"]).get("source_bucket_ids") or ())
                for r in conn.execute("SELECT id, data FROM buckets WHERE space = ? AND type = 'dream'", (space,))}

    def row_counts(self, conn, space: str, ids: Sequence[str] | None) -> dict[str, int]:
        """Buckets, moments and edges a purge removes: of these buckets, or of the whole space (``ids`` None)."""
        if ids is None:
            return {t: conn.execute(f"SELECT COUNT(*) n FROM {t} WHERE space = ?", (space,)).fetchone()["n"]
                    for t in ("buckets", "moments", "edges")}
        counts = {"buckets": 0, "moments": 0}
        edges: set[tuple] = set()
        for chunk in _chunks(list(ids)):
            marks = ",".join("?" * len(chunk))
            counts["buckets"] += len(chunk)
            counts["moments"] += conn.execute(f"SELECT COUNT(*) n FROM moments WHERE space = ? AND bucket_id IN "
                                              f"({marks})", (space, *chunk)).fetchone()["n"]
            edges |= {tuple(r) for r in conn.execute(
                f"SELECT from_id, to_id, relation FROM edges WHERE space = ? AND (from_id IN ({marks}) OR "
                f"to_id IN ({marks}))", (space, *chunk, *chunk))}
        counts["edges"] = len(edges)
        return counts

    def count_type(self, conn, space: str, type: str) -> int:
        return conn.execute("SELECT COUNT(*) n FROM buckets WHERE space = ? AND type = ?",
                            (space, type)).fetchone()["n"]

    def mark_deleting(self, conn, space: str, bucket_ids: Sequence[str] | None) -> None:
        """Readers stop seeing these buckets (all of the space when ``bucket_ids`` is None) from now on."""
        changes.record(conn, space, "reset")  # every process rebuilds its lexical index without them
        if bucket_ids is None:
            conn.execute("UPDATE buckets SET state = 'deleting' WHERE space = ?", (space,))
            return
        for chunk in _chunks(list(bucket_ids)):
            marks = ",".join("?" * len(chunk))
            conn.execute(f"UPDATE buckets SET state = 'deleting' WHERE space = ? AND id IN ({marks})",
                         (space, *chunk))

    def after_purge(self, space: str) -> None:
        """The purge's removal steps are done: one more reset takes the purged ids out of the change
        sequence, and this process's lexical index is rebuilt on next use, without the purged vocabulary."""
        with self.ledger.tx() as c:
            changes.record(c, space, "reset")
        self.core.drop_lexical(space)

    def purged_terms(self, space: str, bucket_ids: Sequence[str]) -> list[str]:
        """The words of these buckets that no other memory of the space holds (call before deleting them).

        Logged turns and queued exchanges that contain one of these carry the forgotten text,
        whether or not they name the bucket: a query asked before the memory existed, or the very
        message it was written from. Words other memories still hold are not the forgotten text.
        The buckets must already be ``deleting``, so the rebuilt lexical index leaves them out.
        """
        ids = list(bucket_ids)
        terms: set[str] = set()
        for chunk in _chunks(ids):
            marks = ",".join("?" * len(chunk))
            for r in self.ledger.query(f"SELECT tokens FROM moments WHERE space = ? AND bucket_id IN ({marks})",
                                       (space, *chunk)):
                terms.update(r["tokens"].split())
            for r in self.ledger.query(f"SELECT data FROM buckets WHERE space = ? AND id IN ({marks})",
                                       (space, *chunk)):
                data = json.loads(r["data"])
                terms.update(self.core.tokens(" ".join([data.get("title") or "", data.get("summary") or "",
                                                        *(data.get("tags") or ())])))
        if not terms:
            return []
        self.core.drop_lexical(space)
        survivors = self.core.lexical(space)
        return sorted(t for t in terms if _distinctive(t) and survivors.doc_freq(t) == 0)

    def compact_vectors(self, space: str, *, dropped: bool = False) -> dict:
        """Leave no deleted vector in Chroma's files: rebuild the space's collection, then compact them.

        ``dropped``: the space's collection is already gone (a whole-space purge).
        """
        out = {"rebuilt": 0}
        if not dropped and self.core.scope.known_space(space):
            out["rebuilt"] = self.chroma.rebuild(space)
            if self.ledger.shared:
                out["readded"] = self._readd_missing(space)
        out.update(self.chroma.compact_files())
        return out

    def _readd_missing(self, space: str) -> int:
        """After a rebuild on a shared server: put back what another process wrote into the old collection
        while it was being copied (its ledger rows came first, so they name every such moment)."""
        have = set(self.chroma.all_ids(space))
        rows = self.ledger.query("SELECT m.bucket_id, m.id FROM moments m JOIN buckets b ON b.space = m.space AND "
                                 "b.id = m.bucket_id WHERE m.space = ? AND b.state != 'deleting'", (space,))
        missing = sorted({r[0] for r in rows if r[1] not in have})
        added = 0
        for chunk in _chunks(missing):
            # under the buckets' locks, read again: a delete that ran since the snapshot above has removed its
            # vectors and rows (re-adding them would leave vectors no bucket owns); one running now waits
            with self.core.bucket_lock(space, chunk):
                marks = ",".join("?" * len(chunk))
                buckets = [bucket_from_json(r[0]) for r in self.ledger.query(
                    f"SELECT data FROM buckets WHERE space = ? AND state != 'deleting' AND id IN ({marks})",
                    (space, *chunk))]
                if buckets:
                    added += self.writer.reembed(buckets)
        return added


def _distinctive(term: str) -> bool:
    """Long enough to mean something when found inside other text (and not a bare number or date part)."""
    if term.isdigit():
        return False
    return len(term) >= (2 if CJK_RE.search(term) else 3)
