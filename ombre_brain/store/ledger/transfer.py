"""Copying a whole ledger into another engine (``ombre-brain migrate-ledger``): every table, one transaction.

The target must hold no rows yet. The copy runs in a single transaction on the target while the
source is read in one snapshot, so an interrupted copy leaves the target empty and can simply be
run again; identity columns (``turn_log.seq``) continue after the highest copied number.
"""

from __future__ import annotations

from collections.abc import Callable

from ...errors import StoreError
from .base import Ledger

BATCH = 1000
SKIP = frozenset({"schema_versions"})  # each ledger records its own migrations


def filled_tables(ledger: Ledger) -> dict[str, int]:
    """The tables of a ledger that hold rows, with their row counts (its migration record aside)."""
    out = {}
    for t in ledger.tables():
        if t not in SKIP:
            n = ledger.one(f'SELECT COUNT(*) FROM "{t}"')[0]
            if n:
                out[t] = int(n)
    return out


def copy_ledger(src: Ledger, dst: Ledger, *, progress: Callable[[str, int], None] | None = None) -> dict[str, int]:
    """Copy every table both ledgers know from ``src`` into the empty ``dst``; rows copied per table."""
    counts: dict[str, int] = {}
    tables = [t for t in src.tables() if t not in SKIP and t in set(dst.tables())]
    with src.snapshot() as s, dst.tx() as d:
        for t in tables:
            cols = [c for c in _ordered(dst, d, t) if c in src.columns(s, t)]
            names = ", ".join(f'"{c}"' for c in cols)
            marks = ", ".join("?" * len(cols))
            cur = s.execute(f'SELECT {names} FROM "{t}"')
            n = 0
            try:
                while rows := cur.fetchmany(BATCH):
                    d.executemany(f'INSERT INTO "{t}" ({names}) VALUES ({marks})', [tuple(r) for r in rows])
                    n += len(rows)
                    if progress is not None:
                        progress(t, len(rows))
            except Exception as exc:  # name the table: the engine's own message rarely does
                raise StoreError(f"copying table {t} into {dst.describe()} failed after {n} rows: {exc}") from None
            counts[t] = n
        for table, column in dst.identities(d):
            dst.reset_identity(d, table, column)
    return counts


def _ordered(ledger: Ledger, conn, table: str) -> list[str]:
    return sorted(ledger.columns(conn, table))
