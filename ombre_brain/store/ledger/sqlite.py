"""The SQLite ledger: the embedded default, one file (``ledger.db``) in the data directory.

WAL mode lets readers proceed during a write; each thread has its own connection; a write
transaction is ``BEGIN IMMEDIATE``, so writers are serialised across threads and processes.
Deleted and rewritten rows are zeroed (``secure_delete``) and :meth:`SqliteLedger.scrub`
folds the WAL into the file, so forgetting leaves no readable remnant on disk.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ...errors import StoreError
from ..rwgate import SharedGate
from .base import IDENTITY, SQLITE, Ledger, split_script

log = logging.getLogger("ombre_brain")

_TYPES = {IDENTITY: "INTEGER PRIMARY KEY AUTOINCREMENT"}
SCRUB_ATTEMPTS = 5
SCRUB_WAIT_MS = 1000
CACHE_KIB = 65536
"""Pages each connection keeps (KiB; SQLite's default is 2 MB). A turn reads Recent Context's window, the candidates'
moments and buckets and the session's rows from all over a large ledger (1.4 GB at 100k memories): with 2 MB most
of those pages were read from the file again every turn (side sections 4.7 → 3.7 ms at 100k, design §23). A cap,
not an allocation: a small store never fills it."""
CHECKPOINT_DELAY_S = 1.0
"""How long after a commit the WAL is folded into the database (the commits of that second go together)."""


class _Checkpointer:
    """Folds the WAL into the database on a thread of its own, never inside a commit.

    SQLite checkpoints inside whichever commit takes the WAL past its threshold: at 100k memories that was a turn's
    record, one turn in thirty, 10–220 ms with the database file's fsync (design §23). Commits nudge this thread,
    which checkpoints (PASSIVE, as SQLite's own) ``CHECKPOINT_DELAY_S`` later, so the WAL holds about a second of
    writes. Durability is unchanged: a commit is in the WAL either way, a WAL left behind by a crash is folded in at
    the next open, and the last connection to close folds in the rest.
    """

    def __init__(self, ledger: SqliteLedger) -> None:
        self._ledger = ledger
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def nudge(self) -> None:
        """A commit happened: look at the WAL soon (the thread starts with the first commit, after a close again)."""
        with self._lock:
            if self._thread is None:
                self._stop = threading.Event()
                self._thread = threading.Thread(target=self._run, args=(self._stop,), name="ombre-wal-checkpoint",
                                                daemon=True)
                self._thread.start()
        self._wake.set()

    def _run(self, stop: threading.Event) -> None:
        while True:
            self._wake.wait()
            if stop.wait(CHECKPOINT_DELAY_S):
                return
            self._wake.clear()  # a commit from here on asks for the next round
            try:
                self._ledger.checkpoint()
            except Exception as exc:  # the thread must outlive any one failure: the next commit's round tries again,
                # and the WAL keeps every commit meanwhile
                log.warning("ledger: WAL checkpoint of %s failed: %s", self._ledger.path, exc)

    def close(self) -> None:
        with self._lock:
            thread, self._thread = self._thread, None
            self._stop.set()
        self._wake.set()
        if thread is not None:
            thread.join(timeout=30)


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
        self._gate = SharedGate()  # every statement shares it; scrub() holds it alone
        self._checkpointer = _Checkpointer(self)
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
            conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
            conn.execute("PRAGMA wal_autocheckpoint=0")  # the checkpointer's thread does it (:class:`_Checkpointer`)
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
        with self._gate.shared():
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            else:
                conn.execute("COMMIT")
        self._checkpointer.nudge()

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """One read transaction: every statement inside sees the same state (joins an outer one)."""
        conn = self._conn()
        if conn.in_transaction:
            yield conn
            return
        with self._gate.shared():
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                conn.execute("COMMIT")

    def query(self, sql: str, params: tuple | list = ()) -> list[sqlite3.Row]:
        with self._gate.shared():
            return self._conn().execute(sql, params).fetchall()

    def one(self, sql: str, params: tuple | list = ()) -> sqlite3.Row | None:
        with self._gate.shared():
            cur = self._conn().execute(sql, params)
            try:
                return cur.fetchone()
            finally:
                cur.close()  # a statement left open keeps its read transaction, and the WAL, in use

    def columns(self, conn, table: str) -> set[str]:
        return {r["name"] for r in conn.execute(f"PRAGMA table_info({table})")}

    def tables(self) -> list[str]:
        return [r["name"] for r in self.query("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE "
                                              "'sqlite%' ORDER BY name")]

    def scrub(self) -> bool:
        """Fold the WAL into the database file and truncate it, so deleted rows do not linger there.

        Frames written before a purge hold the rows it deleted until the WAL is truncated, and SQLite
        truncates only when no reader uses the WAL: under a steady load of turns and writes that moment
        may not come within the busy timeout. So every thread of this process is held off meanwhile
        (the gate), and a checkpoint another process kept busy is tried again a few times; one that
        never finishes is logged and returned False (docs/forgetting.md says what then remains).
        """
        conn = self._conn()
        for attempt in range(SCRUB_ATTEMPTS):
            with self._gate.exclusive():  # the threads wait at most SCRUB_WAIT_MS for another process
                conn.execute(f"PRAGMA busy_timeout={SCRUB_WAIT_MS}")
                try:
                    busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
                finally:
                    conn.execute(f"PRAGMA busy_timeout={int(self.busy_timeout_ms)}")
            if not busy:
                return True
            time.sleep(0.2 * (attempt + 1))
        log.warning("ledger: the WAL of %s could not be truncated (another process reads it); the pages a "
                    "purge deleted stay in %s-wal until its next checkpoint", self.path, self.path.name)
        return False

    def checkpoint(self) -> None:
        """Fold what the WAL holds into the database file, as far as no reader still needs it (PASSIVE)."""
        with self._gate.shared():
            self._conn().execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    def describe(self) -> str:
        return f"the SQLite ledger {self.path}"

    def close(self) -> None:
        self._checkpointer.close()
        with self._lock:
            for conn in self._all:
                try:
                    conn.close()
                except sqlite3.Error:
                    pass
            self._all.clear()
        self._local = threading.local()
