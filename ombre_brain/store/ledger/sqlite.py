"""The SQLite ledger: the embedded default, one file (``ledger.db``) in the data directory.

WAL mode lets readers proceed during a write; each thread has its own connection; a write
transaction is ``BEGIN IMMEDIATE``, so writers are serialised across threads and processes.
Deleted and rewritten rows are zeroed (``secure_delete``) and :meth:`SqliteLedger.scrub`
folds the WAL into the file, so forgetting leaves no readable remnant on disk.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ...errors import StoreError
from .base import IDENTITY, SQLITE, Ledger, split_script

_TYPES = {IDENTITY: "INTEGER PRIMARY KEY AUTOINCREMENT"}


class SqliteLedger(Ledger):
    """A thread-safe SQLite database in WAL mode with one connection per thread."""

    dialect = SQLITE
    IntegrityError = sqlite3.IntegrityError

    def __init__(self, path: str | Path, busy_timeout_ms: int = 10000) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.busy_timeout_ms = busy_timeout_ms
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._start()

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

    def ddl(self, script: str) -> list[str]:
        for marker, spelled in _TYPES.items():
            script = script.replace(marker, spelled)
        return split_script(script)

    @contextmanager
    def tx(self, *, serial: bool = True, durable: bool = True, batch: bool = False,
           defer: bool = False) -> Iterator[sqlite3.Connection]:
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

    def query(self, sql: str, params: tuple | list = ()) -> list[sqlite3.Row]:
        return self._conn().execute(sql, params).fetchall()

    def one(self, sql: str, params: tuple | list = ()) -> sqlite3.Row | None:
        return self._conn().execute(sql, params).fetchone()

    def columns(self, conn, table: str) -> set[str]:
        return {r["name"] for r in conn.execute(f"PRAGMA table_info({table})")}

    def tables(self) -> list[str]:
        return [r["name"] for r in self.query("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE "
                                              "'sqlite%' ORDER BY name")]

    def scrub(self) -> None:
        """Fold the WAL into the database file and truncate it, so deleted rows do not linger there."""
        self._conn().execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def describe(self) -> str:
        return f"the SQLite ledger {self.path}"

    def close(self) -> None:
        with self._lock:
            for conn in self._all:
                try:
                    conn.close()
                except sqlite3.Error:
                    pass
            self._all.clear()
        self._local = threading.local()
