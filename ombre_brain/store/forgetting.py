"""What forgetting needs from the bucket store's own tables, inside the purge's transaction.

The forget wing records a purge's intent and marks its buckets ``deleting`` in one ledger
transaction with its own tables; these methods run the bucket-table half of that transaction
(``conn`` is the open transaction). Mixed into :class:`~ombre_brain.store.bucket_store.BucketStore`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

CHUNK = 400


def _chunks(items: Sequence, n: int = CHUNK) -> Iterable[Sequence]:
    for i in range(0, len(items), n):
        yield items[i:i + n]


class ForgettingMixin:
    def purge_rows(self, conn, space: str, *, bucket_ids: Sequence[str] | None = None, source: str | None = None,
                   whole_space: bool = False) -> list[tuple[str, str | None]]:
        """(id, source) of every bucket a purge target names, in any state."""
        if whole_space:
            rows = conn.execute("SELECT id, source FROM buckets WHERE space = ?", (space,)).fetchall()
        elif source is not None:
            rows = conn.execute("SELECT id, source FROM buckets WHERE space = ? AND source = ?",
                                (space, source)).fetchall()
        else:
            rows = []
            for chunk in _chunks(list(bucket_ids or ())):
                marks = ",".join("?" * len(chunk))
                rows += conn.execute(f"SELECT id, source FROM buckets WHERE space = ? AND id IN ({marks})",
                                     (space, *chunk)).fetchall()
        return [(r["id"], r["source"]) for r in rows]

    def ids_by_source(self, space: str, source: str) -> list[str]:
        return [r["id"] for r in self.ledger.query("SELECT id FROM buckets WHERE space = ? AND source = ?",
                                                   (space, source))]

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
        if bucket_ids is None:
            conn.execute("UPDATE buckets SET state = 'deleting' WHERE space = ?", (space,))
            return
        for chunk in _chunks(list(bucket_ids)):
            marks = ",".join("?" * len(chunk))
            conn.execute(f"UPDATE buckets SET state = 'deleting' WHERE space = ? AND id IN ({marks})",
                         (space, *chunk))
