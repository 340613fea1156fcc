"""The change sequence, and the lexical index that follows it (design §16).

Each space has a number in the ledger that grows by one with every change to its buckets: a
write or update committed, a delete begun or finished, a purge or a dropped space (``reset``).
Each change names bucket ids, never text. A process keeps its BM25 index of a space together
with the number it has applied; before each use it reads the space's number (one primary-key
lookup) and, when behind, re-reads the moments of the buckets the newer changes name. So a
bucket written through process A is searchable through process B on B's next turn, and after a
purge in A, B rebuilds its index without the purged words before it answers again.

The numbers are handed out under a row lock on ``change_heads``, so changes commit in number
order and a reader never sees number n+1 before n. A ``reset`` deletes the space's earlier
changes (the purged ids go with them); a process behind a reset, or behind changes already
pruned, rebuilds the index from the ledger.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..retrieval.lexical import LexicalIndex

KEEP = 20000        # changes kept per space; a process further behind than this rebuilds its index
PRUNE_EVERY = 1000
MOMENTS = ("SELECT m.id, m.bucket_id, m.tokens FROM moments m JOIN buckets b ON b.space = m.space AND "
           "b.id = m.bucket_id WHERE m.space = ? AND b.state = 'committed'")


def record(conn, space: str, op: str, bucket_ids: Iterable[str] = ()) -> int:
    """Number one change of the space inside the caller's transaction; returns its number."""
    conn.execute("INSERT INTO change_heads(space, seq) VALUES (?, 1) ON CONFLICT(space) DO UPDATE SET "
                 "seq = change_heads.seq + 1", (space,))
    seq = conn.execute("SELECT seq FROM change_heads WHERE space = ?", (space,)).fetchone()[0]
    if op == "reset":
        conn.execute("DELETE FROM changes WHERE space = ?", (space,))
    elif seq % PRUNE_EVERY == 0:
        conn.execute("DELETE FROM changes WHERE space = ? AND seq <= ?", (space, seq - KEEP))
    conn.execute("INSERT INTO changes(space, seq, op, bucket_ids) VALUES (?, ?, ?, ?)",
                 (space, seq, op, " ".join(dict.fromkeys(bucket_ids))))
    return seq


def head(ledger, space: str) -> int:
    row = ledger.one("SELECT seq FROM change_heads WHERE space = ?", (space,))
    return int(row[0]) if row is not None else 0


@dataclass
class Followed:
    """A space's lexical index, the change it is current to, and which moments each bucket put in it.

    Each bucket's moment ids are a tuple: a tuple of strings leaves the garbage collector's rounds once it has seen
    it, while 100,000 lists (a 100k store) stayed in them, and every full collection walked them (30–40 ms of a turn
    now and then, design §23)."""

    index: LexicalIndex
    seq: int
    moments: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def put(self, rows) -> None:
        """Add (moment id, bucket id, tokens) rows."""
        self.index.add((r[0], r[2].split()) for r in rows)
        self.moments.update(_by_bucket(rows))

    def drop(self, bucket_ids: Iterable[str]) -> None:
        gone = [m for b in bucket_ids for m in self.moments.pop(b, ())]
        self.index.remove(gone)


def build(ledger, space: str) -> Followed:
    """The space's index from its committed moments, with the change number it is current to."""
    with ledger.snapshot() as c:
        row = c.execute("SELECT seq FROM change_heads WHERE space = ?", (space,)).fetchone()
        rows = c.execute(MOMENTS, (space,)).fetchall()
    return Followed(LexicalIndex((r[0], r[2].split()) for r in rows), int(row[0]) if row is not None else 0,
                    _by_bucket(rows))


def _by_bucket(rows) -> dict[str, tuple[str, ...]]:
    """Each bucket's moment ids among (moment id, bucket id, tokens) rows."""
    by_bucket: dict[str, list[str]] = {}
    for r in rows:
        by_bucket.setdefault(r[1], []).append(r[0])
    return {bid: tuple(mids) for bid, mids in by_bucket.items()}


def since(ledger, space: str, seq: int) -> tuple[int, list[str] | None]:
    """The space's change number and the bucket ids changed after ``seq``; None for the ids when they cannot be
    told (a reset since, or changes pruned past ``seq``): the follower reads the space again."""
    rows = ledger.query("SELECT seq, op, bucket_ids FROM changes WHERE space = ? AND seq > ? ORDER BY seq",
                        (space, seq))
    if not rows:
        return head(ledger, space), []
    if rows[0][0] != seq + 1 or any(r[1] == "reset" for r in rows):
        return rows[-1][0], None
    return rows[-1][0], list(dict.fromkeys(b for r in rows for b in r[2].split()))


def catch_up(ledger, space: str, f: Followed, to: int, on_reset: Callable[[str], None]) -> Followed:
    """Apply the changes after ``f.seq`` (up to at least ``to``); a rebuilt index when that cannot be done."""
    rows = ledger.query("SELECT seq, op, bucket_ids FROM changes WHERE space = ? AND seq > ? ORDER BY seq",
                        (space, f.seq))
    if any(r[1] == "reset" for r in rows):
        on_reset(space)
        return build(ledger, space)
    if not rows or rows[0][0] != f.seq + 1 or rows[-1][0] < to:  # pruned past us: start again
        return build(ledger, space)
    ids = list(dict.fromkeys(b for r in rows for b in r[2].split()))
    f.drop(ids)
    for i in range(0, len(ids), 500):
        among, chunk = ledger.dialect.among("m.bucket_id", ids[i:i + 500])
        f.put(ledger.query(f"{MOMENTS} AND {among}", (space, *chunk)))
    f.seq = rows[-1][0]
    return f
