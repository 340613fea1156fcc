"""The ledger interface: what every capability may ask of the engine that holds its tables.

Two engines implement it: SQLite (:mod:`.sqlite`, the embedded default, one file in the data
directory) and PostgreSQL (:mod:`.postgres`, shared by any number of gateway processes). The
capabilities (store, sessions, jobs, facts, forgetting, dreams) write their SQL once, in the
subset both engines speak:

- ``?`` placeholders (the PostgreSQL engine rewrites them);
- ``INSERT … ON CONFLICT … DO NOTHING`` or ``DO UPDATE`` (never ``INSERT OR IGNORE/REPLACE``);
- ``CASE`` where SQLite would take a scalar ``MAX(a, b)``;
- rows read by column name or by position.

What still differs is asked of :attr:`Ledger.dialect` (engine hints, substring tests, "no
limit", row claiming with ``FOR UPDATE SKIP LOCKED``) or of the ledger itself
(:meth:`Ledger.columns`, :meth:`Ledger.scrub`, :meth:`Ledger.session_lock`).

Schemas are versioned. A capability hands :meth:`Ledger.ensure_schema` its numbered steps (DDL
written with SQLite's type names, which each engine translates, or a function for a data
migration); the ledger records each component's version in ``schema_versions`` and runs the
missing steps inside one write transaction under the engine's schema lock, so two processes
starting at once migrate once. Every step is idempotent as well, so a ledger written before
versions were recorded is brought up to date by running all of them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

IDENTITY = "{identity}"
"""In DDL: an integer primary key the engine numbers itself (AUTOINCREMENT / an identity column)."""

VERSIONS_DDL = """
CREATE TABLE IF NOT EXISTS schema_versions (
    component TEXT PRIMARY KEY,
    version INTEGER NOT NULL
);
"""


@dataclass(frozen=True)
class Dialect:
    """The few SQL spellings the two engines do not share."""

    name: str                 # sqlite | postgresql
    no_limit: int | None      # the LIMIT value that means "every row"
    skip_locked: str          # appended to a SELECT that claims rows other workers must skip
    hints: bool               # whether INDEXED BY hints are understood
    arrays: bool = False      # whether one array parameter can stand for a list of values (= ANY(?))

    def among(self, column: str, values: Sequence) -> tuple[str, list]:
        """A condition ``column`` is one of ``values`` (not empty), and its parameters.

        SQLite: ``column IN (?, ?, …)``, one parameter per value. PostgreSQL: ``column = ANY(?)``
        with one array, so the statement's text is the same however many values there are and
        the server plans it once (psycopg prepares a statement it sees again and again).
        """
        if self.arrays:
            return f"{column} = ANY(?)", [list(values)]
        return f"{column} IN ({','.join('?' * len(values))})", list(values)

    def indexed_by(self, table: str, index: str) -> str:
        """``table`` with a hint to read it through ``index`` (SQLite's planner needs it without ANALYZE)."""
        return f"{table} INDEXED BY {index}" if self.hints else table


SQLITE = Dialect("sqlite", -1, "", True)
POSTGRES = Dialect("postgresql", None, " FOR UPDATE SKIP LOCKED", False, arrays=True)

_COMMENT_RE = re.compile(r"--[^\n]*")


def split_script(script: str) -> list[str]:
    """The statements of a DDL script (no comments; DDL here never holds ';' or '--' inside a literal)."""
    return [s.strip() for s in _COMMENT_RE.sub("", script).split(";") if s.strip()]


def is_postgres_url(target: object) -> bool:
    return isinstance(target, str) and target.startswith(("postgresql://", "postgres://"))


class Ledger:
    """One engine holding every capability's tables (:func:`~ombre_brain.store.ledger.open_ledger` opens one)."""

    dialect: Dialect = SQLITE
    IntegrityError: type[BaseException] | tuple[type[BaseException], ...] = ()
    """What a write that breaks a uniqueness rule raises (catch ``ledger.IntegrityError``)."""
    path: Path | None = None
    shared = False
    """Whether other processes, on other hosts too, may serve from this ledger at the same time."""

    def _start(self) -> None:
        """Called by each engine once connected: the version table, under the schema lock."""
        self._schemas: set[str] = set()
        with self.tx() as c:
            self.run_ddl(c, VERSIONS_DDL)

    # ------------------------------------------------------------ what each engine provides

    def tx(self, *, serial: bool = True, durable: bool = True, batch: bool = False,
           defer: bool = False) -> AbstractContextManager:
        """A write transaction: all or nothing; nested use joins the outer one.

        ``serial`` (the default) also serialises it with every other serial transaction, in every
        process, the way SQLite's single writer does; a caller whose rows are protected by row
        locks or a session lock may pass ``serial=False`` (PostgreSQL then relies on those).
        ``durable=False``: bookkeeping whose last fraction of a second a database crash may lose
        (PostgreSQL commits it without waiting for its log flush, as SQLite's ``synchronous=NORMAL``
        does for every transaction). ``batch=True``: the body reads no results, so PostgreSQL sends
        its statements in one pipeline. ``defer=True`` (with ``batch``, inside :meth:`pinned`):
        PostgreSQL sends them, and the COMMIT, with this connection's next round trip (at the
        latest when the pinned block ends) and raises their errors there; statements this thread
        sends later run after it. SQLite ignores all three.
        """
        raise NotImplementedError

    def snapshot(self) -> AbstractContextManager:
        """One read transaction: every statement inside sees the same state (joins an outer one)."""
        raise NotImplementedError

    def query(self, sql: str, params: tuple | list = ()) -> list:
        raise NotImplementedError

    def one(self, sql: str, params: tuple | list = ()) -> Any:
        raise NotImplementedError

    def query_many(self, statements: list[tuple[str, tuple | list]]) -> list[list]:
        """Several reads at once (one round trip to a server); their rows, in order."""
        return [self.query(sql, params) for sql, params in statements]

    def ahead(self, sql: str, params: tuple | list = ()) -> Ahead:
        """A read whose rows are wanted later: a server gets it with this thread's next round trip.

        Inside :meth:`pinned`, PostgreSQL queues it and sends it in front of the next statement (or
        when :meth:`Ahead.rows` is called first), so reads that do not depend on each other share
        one round trip. SQLite, which has no round trips, runs it when its rows are first asked
        for, and never if they are not. Only for reads: one queued and never sent is dropped when
        the pinned block ends.
        """
        return Ahead(lambda: self.query(sql, params))

    def ddl(self, script: str) -> list[str]:
        """The script's statements in this engine's DDL."""
        raise NotImplementedError

    def columns(self, conn: Any, table: str) -> set[str]:
        """The column names of a table (empty if it does not exist)."""
        raise NotImplementedError

    def tables(self) -> list[str]:
        """Every table of this ledger, in name order."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def describe(self) -> str:
        """Where this ledger is, for messages (never a password)."""
        raise NotImplementedError

    def scrub(self) -> bool:
        """Fold what deletes left in the engine's log into its files, where it can (after a purge); False when
        it could not (SQLite: another process kept the WAL in use)."""
        return True

    def hold(self, *parts: str) -> None:
        """Take the lock named by ``parts`` until :meth:`release` or this process ends (inside :meth:`pinned`).

        A no-op where one process serves (SQLite): there the in-process locks are enough.
        """
        self.hold_all([parts])

    def release(self, *parts: str) -> None:
        """Give back a lock taken with :meth:`hold`."""
        self.release_all([parts])

    def hold_all(self, keys: list[tuple[str, ...]]) -> None:
        """Take several locks, in one order every process uses (so two holders never deadlock)."""

    def release_all(self, keys: list[tuple[str, ...]]) -> None:
        """Give back locks taken with :meth:`hold_all`."""

    def held(self, *parts: str) -> bool:
        """Whether a live process holds the lock named by ``parts`` (always False where one process serves)."""
        return False

    @contextmanager
    def locks(self, keys: list[tuple[str, ...]]) -> Iterator[None]:
        """Hold these locks across processes for the block (a no-op where one process serves)."""
        with self.pinned():
            self.hold_all(keys)
            try:
                yield
            finally:
                self.release_all(keys)

    def session_lock(self, *parts: str) -> AbstractContextManager:
        """Serialise work on one key (a turn of one session) across processes; a no-op where one process serves."""
        return self.locks([parts])

    def pinned(self) -> AbstractContextManager:
        """Keep one connection for this thread across the block (the turn's many small reads)."""
        return nullcontext()

    def identities(self, conn: Any) -> list[tuple[str, str]]:
        """(table, column) of every column the engine numbers itself (see :data:`IDENTITY`)."""
        return []

    def reset_identity(self, conn: Any, table: str, column: str) -> None:
        """After rows were copied in with their own numbers: number new rows after the highest."""

    # ------------------------------------------------------------ shared

    def run_ddl(self, conn: Any, script: str) -> None:
        for stmt in self.ddl(script):
            conn.execute(stmt)

    def ensure_schema(self, name: str, *steps: str | Callable[[Ledger, Any], None]) -> None:
        """Bring component ``name`` to the last of its numbered steps, once per process.

        A step is a DDL script or a function ``step(ledger, conn)`` run inside the migration's
        transaction. Steps are never renumbered: a change to a table is a new step at the end.
        """
        if name in self._schemas:
            return
        row = self.one("SELECT version FROM schema_versions WHERE component = ?", (name,))
        if row is None or row[0] < len(steps):
            with self.tx() as c:
                row = c.execute("SELECT version FROM schema_versions WHERE component = ?", (name,)).fetchone()
                have = row[0] if row is not None else 0
                for step in steps[have:]:
                    if callable(step):
                        step(self, c)
                    else:
                        self.run_ddl(c, step)
                if have < len(steps):
                    c.execute("INSERT INTO schema_versions(component, version) VALUES (?, ?) ON CONFLICT(component) "
                              "DO UPDATE SET version = excluded.version", (name, len(steps)))
        self._schemas.add(name)

    def schema_version(self, name: str) -> int:
        row = self.one("SELECT version FROM schema_versions WHERE component = ?", (name,))
        return int(row[0]) if row is not None else 0

    def next_seq(self, conn: Any, name: str = "seq") -> int:
        """The next number of a named counter, inside the caller's transaction."""
        conn.execute("INSERT INTO counters(name, value) VALUES (?, 1) "
                     "ON CONFLICT(name) DO UPDATE SET value = counters.value + 1", (name,))
        return conn.execute("SELECT value FROM counters WHERE name = ?", (name,)).fetchone()[0]


class Ahead:
    """The rows of a read sent ahead (:meth:`Ledger.ahead`), read on first use."""

    __slots__ = ("_rows", "_load")

    def __init__(self, load: Callable[[], list] | None = None) -> None:
        self._rows: list | None = None
        self._load = load

    def rows(self) -> list:
        if self._rows is None:
            self._rows = self._load()  # type: ignore[misc]
            self._load = None
        return self._rows

    def one(self) -> Any:
        """The first row, or None."""
        rows = self.rows()
        return rows[0] if rows else None


@contextmanager
def joined(conn: Any) -> Iterator[Any]:
    """A caller's open transaction, used where a ``with ledger.tx()`` would be."""
    yield conn
