"""The PostgreSQL ledger: one database shared by every gateway process, on any number of hosts.

psycopg 3 with a connection pool (``psycopg-pool``); both are the ``postgres`` extra. The
capabilities' SQL is the SQLite/PostgreSQL subset (see :mod:`.base`); :mod:`.postgres_sql` turns
its ``?`` placeholders and type names into psycopg's and PostgreSQL's, and rows answer by column
name and by position, as ``sqlite3.Row`` does.

Locking. SQLite serialises writers (``BEGIN IMMEDIATE``) and the capabilities were written
against that, so a serial :meth:`PostgresLedger.tx` takes one transaction-level advisory lock
(``pg_advisory_xact_lock``) first: writers queue as they do in SQLite, readers never wait, and
every read-then-write inside a transaction stays correct across processes. Transactions whose
rows carry their own protection skip it (``serial=False``): claiming an ingestion job (``FOR
UPDATE SKIP LOCKED``) and recording a turn (under the session's lock). A turn of one session is
serialised across processes by :meth:`PostgresLedger.session_lock`, a session-level advisory
lock held on the turn's pinned connection; a process that dies releases it with its connection.
Lock keys are derived from the database and schema, so installations sharing a server never
wait on each other.

Round trips. Each wait for the server costs a turn more than the statement itself, so what need
not be answered at once travels with the next statement, in one pipeline: a BEGIN and its lock,
a lock taken with :meth:`PostgresLedger.hold`, a read sent :meth:`~PostgresLedger.ahead`, and
the COMMIT of a read transaction inside a pinned block. A statement sent while a pipeline is
open rides it rather than opening (and syncing) one of its own.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any
from urllib.parse import urlsplit

import psycopg
from psycopg.pq import TransactionStatus
from psycopg_pool import ConnectionPool, PoolTimeout

from ...errors import StoreError
from .base import POSTGRES, Ahead, Ledger, split_script
from .postgres_sql import configure, ddl_types, row_factory, translate


def lock_key(*parts: str) -> int:
    """A signed 64-bit advisory-lock key for these parts."""
    digest = hashlib.sha256("\x00".join(parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def redact(url: str) -> str:
    """The URL without its password, for messages."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "postgresql://…"
    netloc = parts.netloc.rsplit("@", 1)[-1]
    user = parts.username
    where = f"{user}@{netloc}" if user else netloc
    return f"{parts.scheme}://{where}{parts.path}" + (f"?{parts.query}" if parts.query else "")


class _State(threading.local):
    conn: psycopg.Connection | None = None
    pins = 0
    kept = 0      # pinned() blocks open: the connection outlives its transactions
    in_tx = False
    locked = False
    pending: list[str | _Ahead] | None = None  # what travels with the next statement (BEGIN, a lock, a read)
    flushes = 0   # how many times pending statements went out
    held = 0      # locks taken with hold() and not yet released on this connection
    deferring = False  # inside tx(defer=True): statements are queued, not sent


_COMMIT = "COMMIT"


class _Write:
    """A statement of a deferred transaction (``tx(defer=True)``), waiting for the next round trip."""

    __slots__ = ("sql", "params", "many")

    def __init__(self, sql: str, params, many: bool = False) -> None:
        self.sql, self.params, self.many = sql, params, many


def _send(raw: psycopg.Connection, queued: list) -> None:
    for item in queued:
        if isinstance(item, str):
            raw.execute(item)
        elif isinstance(item, _Write):
            if item.many:
                raw.cursor().executemany(item.sql, item.params)
            else:
                raw.execute(item.sql, item.params)
        else:
            item.cursor = raw.execute(item.sql, item.params)


def _writes(queued: list | None) -> bool:
    return bool(queued) and any(isinstance(item, _Write) for item in queued)


def _run(st: _State, raw: psycopg.Connection, sql: str | None, params: tuple | list = ()):
    """Execute on the thread's connection; pending statements go first, in the same round trip.

    Inside an open pipeline they ride it (a nested pipeline would sync, and wait, on its way out).
    ``sql`` None: send only what is pending.
    """
    if not st.pending:
        return raw.execute(sql, params) if sql is not None else None
    queued, st.pending = st.pending, None
    st.flushes += 1
    try:
        with nullcontext() if raw.pgconn.pipeline_status else raw.pipeline():
            _send(raw, queued)
            return raw.execute(sql, params) if sql is not None else None
    except psycopg.Error:
        _recover(st, raw)
        raise


def _recover(st: _State, raw: psycopg.Connection) -> None:
    """After a failed pipeline: a deferred transaction in it failed, and the server skipped the rest
    and holds that transaction open, failed; end it (a caller's own transaction ends its own)."""
    if not st.in_tx and raw.pgconn.transaction_status == TransactionStatus.INERROR:
        raw.execute("ROLLBACK")


def _queue(st: _State, stmts: list[str | _Ahead], *, first: bool = False) -> int:
    """Queue statements for the next round trip; returns where they start in the queue.

    ``first``: in front of what waits since the last queued COMMIT. A pipeline runs what comes
    before a BEGIN in the same transaction, and a REPEATABLE READ BEGIN must come before any of
    its transaction's statements (the reads and locks waiting then join the read transaction).
    """
    st.pending = st.pending or []
    start = len(st.pending)
    if first:
        start = max((i + 1 for i, s in enumerate(st.pending) if s == _COMMIT), default=0)
    st.pending[start:start] = stmts
    return start


class _Ahead(Ahead):
    """A read waiting in the pinned connection's queue, then its cursor, then its rows."""

    __slots__ = ("ledger", "sql", "params", "cursor")

    def __init__(self, ledger: PostgresLedger, sql: str, params: tuple | list) -> None:
        super().__init__()
        self.ledger, self.sql, self.params, self.cursor = ledger, sql, params, None

    def rows(self) -> list:
        if self._rows is None:
            if self.cursor is None:
                self.ledger._send_ahead(self)
            self._rows = self.cursor.fetchall()
            self.cursor = None
        return self._rows


class Conn:
    """A pooled connection inside a transaction, with the sqlite3 calls the capabilities use."""

    __slots__ = ("raw", "st")
    in_transaction = True

    def __init__(self, raw: psycopg.Connection, st: _State) -> None:
        self.raw, self.st = raw, st

    def execute(self, sql: str, params: tuple | list = ()):
        if self.st.deferring:
            _queue(self.st, [_Write(translate(sql), params)])
            return None
        return _run(self.st, self.raw, translate(sql), params)

    def executemany(self, sql: str, seq):
        if self.st.deferring:
            _queue(self.st, [_Write(translate(sql), list(seq), many=True)])
            return None
        if self.st.pending:
            _run(self.st, self.raw, "SELECT 1")
        cur = self.raw.cursor()
        cur.executemany(translate(sql), list(seq))
        return cur


class PostgresLedger(Ledger):
    """A PostgreSQL database behind a connection pool; every process of a deployment opens the same one."""

    dialect = POSTGRES
    IntegrityError = psycopg.IntegrityError
    shared = True

    def __init__(self, url: str, pool_size: int = 10, connect_timeout_s: float = 30.0) -> None:
        self.url = url
        self.path = None
        self._state = _State()
        self._timeout = connect_timeout_s
        self._pool = ConnectionPool(url, min_size=1, max_size=max(2, pool_size), open=False, name="ombre-ledger",
                                    kwargs={"autocommit": True, "row_factory": row_factory}, configure=configure,
                                    timeout=connect_timeout_s)
        try:
            self._pool.open(wait=True, timeout=connect_timeout_s)
        except (PoolTimeout, psycopg.Error) as exc:
            self._pool.close()
            raise StoreError(f"cannot connect to the PostgreSQL ledger at {redact(url)}: {exc}; check "
                             "store.ledger.url and that the server is up") from None
        row = self.one("SELECT current_database(), current_schema()")
        if row[1] is None:
            self.close()
            raise StoreError(f"the PostgreSQL ledger at {redact(url)} has no schema to write in (search_path)")
        self.namespace = f"{row[0]}.{row[1]}"
        self._write_key = lock_key(self.namespace, "write")
        self._start()

    # ------------------------------------------------------------ connections

    @contextmanager
    def _pinned(self) -> Iterator[psycopg.Connection]:
        st = self._state
        if st.conn is not None:
            st.pins += 1
            try:
                yield st.conn
            finally:
                st.pins -= 1
            return
        try:
            conn = self._pool.getconn(timeout=self._timeout)
        except PoolTimeout:
            raise StoreError(f"no connection to the PostgreSQL ledger at {redact(self.url)} within "
                             f"{self._timeout:g} s (store.ledger.pool_size is {self._pool.max_size})") from None
        st.conn, st.pins = conn, 1
        try:
            yield conn
        except BaseException:
            self._hand_back(conn, failing=True)
            raise
        self._hand_back(conn, failing=False)

    def _hand_back(self, conn: psycopg.Connection, *, failing: bool) -> None:
        """End what the pinned block left waiting, give back its locks, and return the connection.

        A deferred transaction still waiting goes out now; its error is raised here, unless the
        block is failing already (then it is the lesser news, and the server rolled it back).
        """
        st = self._state
        error = None
        try:
            if _writes(st.pending):
                _run(st, conn, None)
            elif st.pending and _COMMIT in st.pending:  # a read transaction still open: end it
                conn.execute(_COMMIT)
        except psycopg.Error as exc:
            error = exc
        if st.held:  # never hand a connection holding locks back to the pool
            try:
                conn.execute("SELECT pg_advisory_unlock_all()")
            except psycopg.Error:
                pass
        st.conn, st.pins, st.in_tx, st.locked, st.kept, st.held = None, 0, False, False, 0, 0
        st.pending, st.deferring = None, False
        self._pool.putconn(conn)
        if error is not None and not failing:
            raise error

    @contextmanager
    def pinned(self) -> Iterator[None]:
        st = self._state
        with self._pinned():
            st.kept += 1
            try:
                yield
            finally:
                st.kept -= 1

    # ------------------------------------------------------------ transactions

    @contextmanager
    def tx(self, *, serial: bool = True, durable: bool = True, batch: bool = False,
           defer: bool = False) -> Iterator[Conn]:
        st = self._state
        with self._pinned() as raw:
            if st.in_tx:
                if serial and not st.locked:
                    _run(st, raw, f"SELECT pg_advisory_xact_lock({self._write_key})")
                    st.locked = True
                yield Conn(raw, st)
                return
            begin = ["BEGIN"]
            if serial:
                begin.append(f"SELECT pg_advisory_xact_lock({self._write_key})")
            if not durable:
                begin.append("SET LOCAL synchronous_commit TO off")
            with self._deferred(begin) if defer and batch and st.kept else self._transaction(raw, begin, batch):
                st.locked = serial
                yield Conn(raw, st)

    @contextmanager
    def _deferred(self, begin: list[str]) -> Iterator[None]:
        """A transaction whose statements and COMMIT wait for the connection's next round trip."""
        st = self._state
        start = _queue(st, begin)
        st.in_tx = st.deferring = True
        try:
            yield
        except BaseException:
            del st.pending[start:]  # none of it went out
            raise
        else:
            _queue(st, [_COMMIT])
        finally:
            st.in_tx = st.locked = st.deferring = False

    @contextmanager
    def snapshot(self) -> Iterator[Conn]:
        with self._pinned() as raw:
            if self._state.in_tx:
                yield Conn(raw, self._state)
                return
            with self._transaction(raw, ["BEGIN ISOLATION LEVEL REPEATABLE READ"], commit_later=True):
                yield Conn(raw, self._state)

    @contextmanager
    def _transaction(self, raw: psycopg.Connection, begin: list[str], batch: bool = False,
                     commit_later: bool = False) -> Iterator[None]:
        """BEGIN … COMMIT, or ROLLBACK on any error.

        The opening statements wait to travel with the body's first statement (a transaction costs
        one round trip less); a body that ran nothing began nothing. ``batch``: the body reads no
        results, so its statements and the COMMIT go in one pipeline (one round trip in all).
        ``commit_later`` (a read transaction, which has nothing to make durable): the COMMIT travels
        with the connection's next statement, or goes out when the pinned block ends.
        """
        st = self._state
        start = _queue(st, begin, first=commit_later)
        mark, st.in_tx = st.flushes, True

        def began() -> bool:
            if st.flushes != mark:
                return True
            del st.pending[start:start + len(begin)]  # nothing went out: nothing to end
            return False

        try:
            if batch:
                with raw.pipeline():
                    yield
                    if began():
                        raw.execute(_COMMIT)
            else:
                yield
                if began():
                    if commit_later and st.kept:
                        _queue(st, [_COMMIT])
                    else:
                        raw.execute(_COMMIT)
        except BaseException:
            if began():
                try:
                    raw.execute("ROLLBACK")
                except psycopg.Error:  # the connection broke: the server rolled back already
                    pass
            raise
        finally:
            st.in_tx = st.locked = False

    # ------------------------------------------------------------ statements

    def query(self, sql: str, params: tuple | list = ()) -> list:
        with self._pinned() as raw:
            return _run(self._state, raw, translate(sql), params).fetchall()

    def one(self, sql: str, params: tuple | list = ()) -> Any:
        with self._pinned() as raw:
            return _run(self._state, raw, translate(sql), params).fetchone()

    def query_many(self, statements: list[tuple[str, tuple | list]]) -> list[list]:
        """Several reads in one round trip (a pipeline); their rows, in order."""
        with self._pinned() as raw:
            try:
                with raw.pipeline():
                    curs = [_run(self._state, raw, translate(sql), params) for sql, params in statements]
            except psycopg.Error:
                _recover(self._state, raw)
                raise
            return [cur.fetchall() for cur in curs]

    def ahead(self, sql: str, params: tuple | list = ()) -> Ahead:
        st = self._state
        if not st.kept:  # no pinned() block: no later round trip on this connection to ride
            return Ahead(lambda: self.query(sql, params))
        item = _Ahead(self, translate(sql), params)
        _queue(st, [item])
        return item

    def _send_ahead(self, item: _Ahead) -> None:
        """Its rows are wanted now: send it (with whatever else waits), or run it again if its queue is gone."""
        st = self._state
        with self._pinned() as raw:
            if st.pending and any(p is item for p in st.pending):
                _run(st, raw, None)
            else:
                item.cursor = _run(st, raw, item.sql, item.params)

    def ddl(self, script: str) -> list[str]:
        return split_script(ddl_types(script))

    def columns(self, conn, table: str) -> set[str]:
        return {r[0] for r in conn.execute("SELECT column_name FROM information_schema.columns WHERE table_schema = "
                                           "current_schema() AND table_name = ?", (table,))}

    def tables(self) -> list[str]:
        return [r[0] for r in self.query("SELECT table_name FROM information_schema.tables WHERE table_schema = "
                                         "current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name")]

    def identities(self, conn) -> list[tuple[str, str]]:
        return [(r[0], r[1]) for r in conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND is_identity = 'YES' ORDER BY table_name")]

    def reset_identity(self, conn, table: str, column: str) -> None:
        conn.execute(f"SELECT setval(pg_get_serial_sequence('{table}', '{column}'), "
                     f"COALESCE((SELECT MAX({column}) FROM {table}), 0) + 1, false)")

    # ------------------------------------------------------------ across processes

    def hold_all(self, keys: list[tuple[str, ...]]) -> None:
        st = self._state
        if not st.kept:  # no pinned() block: no connection outlives this call to hold them on
            return
        ints = sorted(lock_key(self.namespace, *k) for k in keys)
        _queue(st, [f"SELECT pg_advisory_lock({k})" for k in ints])  # they travel with the next statement
        st.held += len(ints)

    def release_all(self, keys: list[tuple[str, ...]]) -> None:
        st = self._state
        if st.conn is None or not st.held:
            return
        sent = []
        for k in sorted(lock_key(self.namespace, *k) for k in keys):
            st.held -= 1
            stmt = f"SELECT pg_advisory_lock({k})"
            if st.pending and stmt in st.pending:  # never sent: nothing to give back
                st.pending.remove(stmt)
            else:
                sent.append(f"pg_advisory_unlock({k})")
        if sent:
            unlock, writes = "SELECT " + ", ".join(sent), _writes(st.pending)
            try:
                _run(st, st.conn, unlock)
            except psycopg.Error:
                if not writes:  # a broken connection took the locks with it
                    return
                try:  # a deferred transaction riding along failed, and the unlock was skipped with it
                    _run(st, st.conn, unlock)
                except psycopg.Error:
                    pass
                raise

    def held(self, *parts: str) -> bool:
        key = lock_key(self.namespace, *parts)
        with self._pool.connection(timeout=self._timeout) as raw:  # never this thread's own: it may hold the lock
            if not raw.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]:
                return True
            raw.execute("SELECT pg_advisory_unlock(%s)", (key,))
            return False

    def describe(self) -> str:
        return f"the PostgreSQL ledger {redact(self.url)}"

    def close(self) -> None:
        self._pool.close()


def with_schema(url: str, schema: str) -> str:
    """The URL of ``schema`` in the database ``url`` names (made if missing): one database, many ledgers."""
    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", schema):
        raise ValueError(f"not a plain schema name: {schema!r}")
    if "options=" in url:
        raise StoreError("the ledger URL already sets options=; give the database URL without it")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
    return f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"


def drop_schema(url: str, schema: str) -> None:
    """Drop a schema made by :func:`with_schema`, with every table in it."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
