"""The ledger's ways of saving round trips, on both engines: reads sent ahead, read transactions that
end with the next statement, batched transactions, statements that ride an open pipeline.

SQLite has no round trips, so there the same calls must simply give the same answers; on
PostgreSQL the tests also count how often the client waits for the server (conftest.RoundTrips).
"""

from __future__ import annotations

import sqlite3

import psycopg
import pytest

from ombre_brain.store.ledger import SqliteLedger
from ombre_brain.store.ledger.postgres import PostgresLedger

from .conftest import open_ledger

DDL = "CREATE TABLE IF NOT EXISTS t (k TEXT PRIMARY KEY, n INTEGER NOT NULL)"


@pytest.fixture(params=["sqlite", "postgres"])
def ledger(request, tmp_path):
    led = open_ledger(request.param, request, tmp_path)
    led.ensure_schema("t", DDL)
    with led.tx() as c:
        c.executemany("INSERT INTO t(k, n) VALUES (?, ?)", [("a", 1), ("b", 2), ("c", 2)])
    yield led
    led.close()


@pytest.fixture
def pg(postgres_server, tmp_path):
    led = PostgresLedger(postgres_server.url_for(tmp_path / "pg"))
    led.ensure_schema("t", DDL)
    with led.tx() as c:
        c.executemany("INSERT INTO t(k, n) VALUES (?, ?)", [("a", 1), ("b", 2), ("c", 2)])
    yield led
    led.close()


def keys(rows) -> list[str]:
    return [r["k"] for r in rows]


def test_reads_sent_ahead_give_their_rows_wherever_they_are_asked_for(ledger):
    outside = ledger.ahead("SELECT k FROM t WHERE n = ? ORDER BY k", (2,))
    with ledger.pinned():
        first = ledger.ahead("SELECT k FROM t WHERE n = ? ORDER BY k", (2,))
        second = ledger.ahead("SELECT k FROM t WHERE k = ?", ("a",))
        ledger.ahead("SELECT k FROM t")  # never asked for: dropped with its pinned block
        both = ledger.query_many([("SELECT COUNT(*) FROM t", ()), ("SELECT k FROM t WHERE n = 1", ())])
        assert [both[0][0][0], keys(both[1])] == [3, ["a"]]
        assert keys(first.rows()) == ["b", "c"] and second.one()["k"] == "a"
        assert first.rows() is first.rows()  # read once
        late = ledger.ahead("SELECT k FROM t WHERE n = ? ORDER BY k", (1,))
        empty = ledger.ahead("SELECT k FROM t WHERE n = ?", (9,))
    assert keys(late.rows()) == ["a"]  # its pinned block ended before it went out: it runs now
    assert empty.one() is None and empty.rows() == []
    assert keys(outside.rows()) == ["b", "c"]


def test_sqlite_runs_a_read_sent_ahead_only_when_its_rows_are_asked_for(tmp_path):
    led = SqliteLedger(tmp_path / "ledger.db")
    try:
        broken = led.ahead("SELECT * FROM no_such_table")  # nothing ran, so nothing failed
        with pytest.raises(sqlite3.OperationalError):
            broken.rows()
    finally:
        led.close()


def test_reads_ahead_and_a_lock_travel_with_the_next_statement(pg, round_trips):
    with pg.pinned():
        pg.hold("lock", "one")
        ahead = [pg.ahead("SELECT k FROM t WHERE k = ?", (k,)) for k in "abc"]
        rows = pg.query_many([("SELECT COUNT(*) FROM t", ()), ("SELECT MAX(n) FROM t", ())])
        assert round_trips.count == 1
        assert [a.one()["k"] for a in ahead] == ["a", "b", "c"] and [rows[0][0][0], rows[1][0][0]] == [3, 2]
        assert round_trips.count == 1
        asked = pg.ahead("SELECT k FROM t WHERE n = 1")
        queued = pg.ahead("SELECT k FROM t WHERE n = 2 ORDER BY k")
        assert keys(asked.rows()) == ["a"]  # asked for first: it goes out, and what waits with it
        assert keys(queued.rows()) == ["b", "c"]
        assert round_trips.count == 2
        assert pg.held("lock", "one")
        pg.release("lock", "one")
    assert not pg.held("lock", "one")


def test_a_read_transaction_ends_with_the_next_statement(pg, round_trips):
    with pg.pinned():
        with pg.snapshot() as s:
            pid = s.execute("SELECT pg_backend_pid()").fetchone()[0]
            assert s.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 3
        assert round_trips.count == 2
        assert pg.one("SELECT COUNT(*) FROM t")[0] == 3
        assert round_trips.count == 3 and round_trips.trips[-1][0] == "COMMIT"
        with pg.snapshot() as s:  # the last statement of the block: the COMMIT goes out as it ends
            assert s.execute("SELECT pg_backend_pid()").fetchone()[0] == pid
    with psycopg.connect(pg.url.split("&options=")[0], autocommit=True) as other:
        state = other.execute("SELECT state FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()[0]
    assert state == "idle"  # not "idle in transaction"
    with pg.snapshot() as s:  # outside a pinned block it ends at once, as before
        s.execute("SELECT 1")
    assert pg.one("SELECT COUNT(*) FROM t")[0] == 3


def test_a_batched_transaction_is_one_round_trip_with_what_waited_before_it(pg, round_trips):
    with pg.pinned():
        with pg.snapshot() as s:
            s.execute("SELECT COUNT(*) FROM t").fetchone()
        pg.hold("lock", "two")
        ahead = pg.ahead("SELECT COUNT(*) FROM t")
        round_trips.reset()
        with pg.tx(serial=False, durable=False, batch=True) as c:
            c.execute("INSERT INTO t(k, n) VALUES (?, ?)", ("d", 4))
            c.executemany("INSERT INTO t(k, n) VALUES (?, ?)", [("e", 5), ("f", 6)])
            c.execute("UPDATE t SET n = n + 1 WHERE k = ?", ("a",))
        assert round_trips.count == 1, round_trips.trips
        assert round_trips.trips[0][0] == "COMMIT" and round_trips.trips[0][-1] == "COMMIT"
        assert ahead.one()[0] == 3  # read before the transaction it travelled with
        pg.release("lock", "two")
    assert keys(pg.query("SELECT k FROM t WHERE n > 1 ORDER BY k")) == ["a", "b", "c", "d", "e", "f"]
    with pytest.raises(pg.IntegrityError), pg.tx(serial=False, batch=True) as c:
        c.execute("INSERT INTO t(k, n) VALUES (?, ?)", ("g", 7))
        c.execute("INSERT INTO t(k, n) VALUES (?, ?)", ("a", 8))
    assert pg.one("SELECT COUNT(*) FROM t WHERE k = 'g'")[0] == 0


def test_a_list_of_values_is_one_array_on_postgresql_and_one_mark_each_on_sqlite(ledger):
    dialect = ledger.dialect
    for values in (["a"], ["c", "a", "zz"], [f"k{i}" for i in range(300)] + ["b"]):
        cond, params = dialect.among("k", values)
        rows = ledger.query(f"SELECT k FROM t WHERE n > ? AND {cond} ORDER BY k", (0, *params))
        assert keys(rows) == sorted(set(values) & {"a", "b", "c"})
        if dialect.arrays:  # the same text for any number of values: the server plans it once
            assert (cond, params) == ("k = ANY(?)", [list(values)])
        else:
            assert cond == f"k IN ({','.join('?' * len(values))})" and params == list(values)


def test_a_read_transaction_takes_the_reads_and_locks_waiting_before_it(pg, round_trips):
    """In a pipeline what precedes a BEGIN runs in its transaction, and REPEATABLE READ must begin first."""
    with pg.pinned():
        with pg.snapshot() as s:
            s.execute("SELECT 1").fetchone()
        pg.hold("lock", "three")
        ahead = pg.ahead("SELECT COUNT(*) FROM t")
        round_trips.reset()
        with pg.snapshot() as s:
            assert s.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 3
        assert round_trips.count == 1
        assert [t.split()[0] for t in round_trips.trips[0]] == ["COMMIT", "BEGIN", "SELECT", "SELECT", "SELECT"]
        assert ahead.one()[0] == 3 and pg.held("lock", "three")
        pg.release("lock", "three")


def test_a_deferred_transaction_commits_at_once_where_nothing_can_carry_it(ledger):
    with ledger.tx(serial=False, batch=True, defer=True) as c:  # SQLite, or no pinned block: as a batch
        c.execute("INSERT INTO t(k, n) VALUES (?, ?)", ("d", 4))
    assert ledger.one("SELECT COUNT(*) FROM t")[0] == 4


def other_count(pg, round_trips=None) -> int:
    """The rows another connection sees (its own waits are not the pinned connection's: not counted)."""
    before = round_trips.count if round_trips is not None else 0
    with psycopg.connect(pg.url, autocommit=True) as other:
        n = other.execute("SELECT COUNT(*) FROM t").fetchone()[0]
    if round_trips is not None:
        round_trips.count = before
    return n


def test_a_deferred_transaction_travels_with_the_next_round_trip(pg, round_trips):
    with pg.pinned():
        pg.hold("lock", "four")
        pg.one("SELECT 1")
        round_trips.reset()
        with pg.tx(serial=False, durable=False, batch=True, defer=True) as c:
            c.execute("INSERT INTO t(k, n) VALUES (?, ?)", ("d", 4))
            c.executemany("INSERT INTO t(k, n) VALUES (?, ?)", [("e", 5), ("f", 6)])
        assert round_trips.count == 0 and other_count(pg, round_trips) == 3  # nothing went out yet
        assert pg.one("SELECT COUNT(*) FROM t")[0] == 6  # this thread's next statement goes after it
        assert round_trips.count == 1 and other_count(pg, round_trips) == 6
        with pg.tx(serial=False, batch=True, defer=True) as c:
            c.execute("DELETE FROM t WHERE k = ?", ("f",))
        pg.release("lock", "four")  # the usual carrier: the session's unlock at the end of a turn
        assert round_trips.count == 2 and other_count(pg, round_trips) == 5
        with pg.tx(serial=False, batch=True, defer=True) as c:
            c.execute("DELETE FROM t WHERE k = ?", ("e",))
    assert round_trips.count == 3 and other_count(pg) == 4  # or the end of the pinned block
    assert not pg.held("lock", "four")


def test_a_deferred_transaction_that_fails_raises_where_it_goes_out(pg):
    with pytest.raises(pg.IntegrityError), pg.pinned():
        pg.hold("lock", "five")
        pg.one("SELECT 1")
        with pg.tx(serial=False, batch=True, defer=True) as c:
            c.execute("INSERT INTO t(k, n) VALUES (?, ?)", ("g", 7))
            c.execute("INSERT INTO t(k, n) VALUES (?, ?)", ("a", 8))  # a duplicate key
        try:
            pg.release("lock", "five")  # the unlock it rode with is not lost with it
        finally:
            assert not pg.held("lock", "five")
            assert pg.one("SELECT COUNT(*) FROM t")[0] == 3  # rolled back, and the connection still serves
    with pytest.raises(pg.IntegrityError), pg.pinned():
        with pg.tx(serial=False, batch=True, defer=True) as c:
            c.execute("INSERT INTO t(k, n) VALUES (?, ?)", ("a", 9))
    assert keys(pg.query("SELECT k FROM t ORDER BY k")) == ["a", "b", "c"]
    with pg.pinned():  # whatever statement carries it out gets its error, and the connection serves on
        with pg.tx(serial=False, batch=True, defer=True) as c:
            c.execute("INSERT INTO t(k, n) VALUES (?, ?)", ("b", 9))
        with pytest.raises(pg.IntegrityError):
            pg.query_many([("SELECT 1", ()), ("SELECT 2", ())])
        assert pg.query_many([("SELECT COUNT(*) FROM t", ())]) == [[(3,)]]
    with pytest.raises(RuntimeError), pg.pinned():  # the body failed: nothing of it goes out
        with pg.tx(serial=False, batch=True, defer=True) as c:
            c.execute("INSERT INTO t(k, n) VALUES (?, ?)", ("h", 9))
            raise RuntimeError("changed its mind")
    assert pg.one("SELECT COUNT(*) FROM t")[0] == 3
