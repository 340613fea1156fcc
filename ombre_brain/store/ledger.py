"""The SQLite ledger: what Chroma does not hold, and the write-ahead record of what it does.

Buckets are recorded here first (state ``pending``), then written to Chroma, then marked
``committed``; reopening rolls pending writes forward and finishes pending deletes, so a
reader sees a bucket whole or not at all. WAL mode lets readers proceed during a write.
Other modules (facts, forget, gateway sessions, jobs, dreams) add their own tables through
:meth:`Ledger.ensure_schema`, keyed by space.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import StoreError

CORE_SCHEMA = """
CREATE TABLE IF NOT EXISTS spaces (
    space TEXT PRIMARY KEY,
    collection TEXT NOT NULL,
    model_id TEXT NOT NULL,
    dimension INTEGER NOT NULL,
    created TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS buckets (
    space TEXT NOT NULL,
    id TEXT NOT NULL,
    state TEXT NOT NULL,               -- pending | committed | deleting
    data TEXT NOT NULL,                -- the bucket's §3 JSON
    content_hash TEXT NOT NULL,
    type TEXT NOT NULL,
    created TEXT NOT NULL,
    last_active TEXT NOT NULL,
    source TEXT,
    seq INTEGER NOT NULL,
    PRIMARY KEY (space, id)
);
CREATE INDEX IF NOT EXISTS buckets_hash ON buckets(space, content_hash);
CREATE INDEX IF NOT EXISTS buckets_created ON buckets(space, created);
CREATE INDEX IF NOT EXISTS buckets_state ON buckets(state);
CREATE TABLE IF NOT EXISTS moments (
    space TEXT NOT NULL,
    id TEXT NOT NULL,
    bucket_id TEXT NOT NULL,
    ordinal INTEGER NOT NULL,
    section TEXT NOT NULL,
    context_only INTEGER NOT NULL,
    text TEXT NOT NULL,
    tokens TEXT NOT NULL,              -- space-joined lexical tokens
    start INTEGER NOT NULL,
    "end" INTEGER NOT NULL,
    PRIMARY KEY (space, id)
);
CREATE INDEX IF NOT EXISTS moments_bucket ON moments(space, bucket_id);
CREATE TABLE IF NOT EXISTS edges (
    space TEXT NOT NULL,
    from_id TEXT NOT NULL,
    to_id TEXT NOT NULL,
    relation TEXT NOT NULL,
    confidence REAL NOT NULL,
    created TEXT NOT NULL,
    PRIMARY KEY (space, from_id, to_id, relation)
);
CREATE INDEX IF NOT EXISTS edges_to ON edges(space, to_id);
CREATE TABLE IF NOT EXISTS counters (
    name TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
"""


class Ledger:
    """A thread-safe SQLite database in WAL mode with one connection per thread."""

    def __init__(self, path: str | Path, busy_timeout_ms: int = 10000) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.busy_timeout_ms = busy_timeout_ms
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._schemas: set[str] = set()
        self.ensure_schema("core", CORE_SCHEMA)

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            try:
                conn = sqlite3.connect(self.path, timeout=self.busy_timeout_ms / 1000, isolation_level=None,
                                       check_same_thread=False)
            except sqlite3.Error as exc:
                raise StoreError(f"cannot open ledger {self.path}: {exc}") from None
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout={int(self.busy_timeout_ms)}")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            # Deleted and rewritten rows are zeroed, not left in free space: forgetting (a purge, an
            # edit that drops words, a trimmed turn log) leaves no readable remnant in the file.
            conn.execute("PRAGMA secure_delete=ON")
            self._local.conn = conn
            with self._lock:
                self._all.append(conn)
        return conn

    def ensure_schema(self, name: str, ddl: str) -> None:
        """Create a module's tables once per process (idempotent DDL)."""
        if name in self._schemas:
            return
        conn = self._conn()
        conn.executescript(ddl)
        self._schemas.add(name)

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (BEGIN IMMEDIATE): all or nothing, serialised across threads and processes."""
        conn = self._conn()
        if conn.in_transaction:  # nested use joins the outer transaction
            yield conn
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        else:
            conn.execute("COMMIT")

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """One read transaction: every statement inside sees the same state (joins an outer one)."""
        conn = self._conn()
        if conn.in_transaction:
            yield conn
            return
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            conn.execute("COMMIT")

    def read(self) -> sqlite3.Connection:
        """A connection for reads; each statement sees a consistent WAL snapshot."""
        return self._conn()

    def query(self, sql: str, params: tuple | list = ()) -> list[sqlite3.Row]:
        return self._conn().execute(sql, params).fetchall()

    def one(self, sql: str, params: tuple | list = ()) -> sqlite3.Row | None:
        return self._conn().execute(sql, params).fetchone()

    def next_seq(self, conn: sqlite3.Connection, name: str = "seq") -> int:
        conn.execute("INSERT INTO counters(name, value) VALUES (?, 1) "
                     "ON CONFLICT(name) DO UPDATE SET value = value + 1", (name,))
        return conn.execute("SELECT value FROM counters WHERE name = ?", (name,)).fetchone()[0]

    def close(self) -> None:
        with self._lock:
            for conn in self._all:
                try:
                    conn.close()
                except sqlite3.Error:
                    pass
            self._all.clear()
        self._local = threading.local()
