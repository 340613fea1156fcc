"""Forgetting facts (design §10): suppress sources, drop their support, scrub what only they held.

Revisions stay in place so the history keeps its shape and an older value never resurfaces,
but a forgotten revision's value, text and confidence are erased and no read returns it.
"""

from __future__ import annotations

from typing import Any

from . import feed

TABLES = ("facts_records", "facts_revisions", "facts_support", "facts_receipts", "facts_events")


def _marks(n: int) -> str:
    return ",".join("?" * n)


def _suppress(conn: Any, space: str, digests: list[str], stamp: str) -> None:
    if not digests:
        return
    conn.executemany("INSERT INTO facts_suppressed VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                     [(space, d, stamp) for d in digests])
    conn.execute(f"DELETE FROM facts_receipts WHERE space = ? AND digest IN ({_marks(len(digests))})",
                 (space, *digests))


def forget_sources(conn: Any, space: str, digests: list[str], stamp: str) -> int:
    _suppress(conn, space, digests, stamp)
    rows = conn.execute(f"SELECT record_id, revision, ref, own FROM facts_support WHERE space = ? "
                        f"AND ref IN ({_marks(len(digests))})", (space, *digests)).fetchall()
    return _drop_support(conn, space, rows, stamp)


def remove_bucket_support(conn: Any, space: str, bucket_ids: list[str], stamp: str) -> int:
    refs = [f"bucket:{b}" for b in bucket_ids]
    derived = sorted({r["ref"] for r in conn.execute(
        f"SELECT ref FROM facts_support WHERE space = ? AND via_bucket IN ({_marks(len(bucket_ids))})",
        (space, *bucket_ids))})
    _suppress(conn, space, derived, stamp)
    gone = refs + derived
    rows = conn.execute(f"SELECT record_id, revision, ref, own FROM facts_support WHERE space = ? "
                        f"AND ref IN ({_marks(len(gone))})", (space, *gone)).fetchall()
    return _drop_support(conn, space, rows, stamp)


def forget_space(conn: Any, space: str) -> int:
    n = conn.execute("SELECT COUNT(*) FROM facts_records WHERE space = ?", (space,)).fetchone()[0]
    for table in TABLES:
        conn.execute(f"DELETE FROM {table} WHERE space = ?", (space,))
    feed.new_epoch(conn, space)
    return n


def _drop_support(conn: Any, space: str, rows: list, stamp: str) -> int:
    """Delete the given support rows; scrub text whose own source went; forget unsupported revisions."""
    touched: set[tuple[str, int]] = set()
    for row in rows:
        key = (row["record_id"], row["revision"])
        touched.add(key)
        conn.execute("DELETE FROM facts_support WHERE space = ? AND record_id = ? AND revision = ? AND ref = ?",
                     (space, *key, row["ref"]))
        if row["own"]:
            conn.execute("UPDATE facts_revisions SET text = NULL WHERE space = ? AND record_id = ? AND revision = ?",
                         (space, *key))
    forgotten = 0
    for record_id, revision in sorted(touched):
        left = conn.execute("SELECT 1 FROM facts_support WHERE space = ? AND record_id = ? AND revision = ?",
                            (space, record_id, revision)).fetchone()
        if left is not None:
            continue
        cur = conn.execute("UPDATE facts_revisions SET forgotten = 1, value = NULL, text = NULL, confidence = NULL "
                           "WHERE space = ? AND record_id = ? AND revision = ? AND forgotten = 0",
                           (space, record_id, revision))
        if cur.rowcount:
            forgotten += 1
            rec = conn.execute("SELECT subject, key FROM facts_records WHERE space = ? AND record_id = ?",
                               (space, record_id)).fetchone()
            feed.emit(conn, space, record_id, revision, "forgotten", "forgotten", rec["subject"], rec["key"], stamp)
    return forgotten
