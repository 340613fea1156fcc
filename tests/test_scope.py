"""The turn scope (store/scope.py) on both ledgers: a turn reads each bucket and each bucket's edges
once, answers again from its memo exactly what a fresh read would, and reads again after a write."""

from __future__ import annotations

import pytest

from ombre_brain import Brain

from .conftest import merged

SPACE = "haven:scope"


@pytest.fixture(params=["sqlite", "postgres"])
def scoped(request, tmp_path):
    over = {"identity": {"ai_name": "Haven", "user_name": "Xiaoyu"}}
    if request.param == "postgres":
        over = merged(request.getfixturevalue("postgres_server").overlay(tmp_path / "scope"), over)
    with Brain.open(tmp_path / "data", over) as brain:
        for i in range(6):
            brain.write(space=SPACE, id=f"b{i}", title=f"记忆{i}", body=f"第{i}件事：我们去了海边。")
        for a, b, rel in [("b0", "b1", "same_event"), ("b1", "b2", "relates_to"), ("b3", "b0", "context_of"),
                          ("b4", "b5", "relates_to")]:
            brain.link(SPACE, a, b, rel, 0.8)
        yield brain


def counting(brain, monkeypatch) -> list[str]:
    """The ledger reads the store makes from here on (statements, both engines)."""
    seen: list[str] = []
    real = brain.store.ledger.query

    def query(sql, params=()):
        seen.append(sql)
        return real(sql, params)

    monkeypatch.setattr(brain.store.ledger, "query", query)
    return seen


def test_a_turn_reads_each_bucket_once_and_gets_what_a_fresh_read_gets(scoped, monkeypatch):
    store = scoped.store
    fresh = store.get_many(SPACE, ["b3", "b1", "nope", "b0"])
    assert list(fresh) == ["b0", "b1", "b3"]  # id order, on both engines
    seen = counting(scoped, monkeypatch)
    with scoped.ledger.pinned(), store.turn_scope(SPACE):
        assert store.get_many(SPACE, ["b3", "b1", "nope", "b0"]) == fresh
        assert len(seen) == 1
        assert store.get_many(SPACE, ["b1", "nope"]) == {"b1": fresh["b1"]}  # from the memo, missing included
        assert len(seen) == 1
        both = store.get_many(SPACE, ["b0", "b4"])  # only b4 is read
        assert list(both) == ["b0", "b4"] and len(seen) == 2
    store.get_many(SPACE, ["b0"])  # outside a turn every call reads
    assert len(seen) == 3


def test_a_turn_reads_each_buckets_edges_once(scoped, monkeypatch):
    store = scoped.store
    want = {ids: store.edges(SPACE, list(ids)) for ids in [("b0", "b1"), ("b1",), ("b0", "b1", "b4"), ("b2", "b5")]}
    seen = counting(scoped, monkeypatch)
    with scoped.ledger.pinned(), store.turn_scope(SPACE):
        for ids, edges in want.items():
            assert store.edges(SPACE, list(ids)) == edges, ids
        # b0,b1 read; b1 known; only b4 read; only b2 and b5 read
        assert len(seen) == 3
        assert [(e.from_id, e.to_id) for e in store.edges(SPACE, ["b1", "b0"])] == [("b0", "b1"), ("b1", "b2"),
                                                                                    ("b3", "b0")]
        assert store.edges(SPACE, []) == [] and len(seen) == 3


def test_a_write_in_the_turn_empties_its_memo(scoped):
    store = scoped.store
    with scoped.ledger.pinned(), store.turn_scope(SPACE):
        assert store.get_many(SPACE, ["b2"])["b2"].surfaced is not True
        assert len(store.edges(SPACE, ["b5"])) == 1
        store.rewrite_metadata(SPACE, "b2", {"surfaced": True})
        assert store.get_many(SPACE, ["b2"])["b2"].surfaced is True
        store.add_edge(SPACE, "b5", "b2", "relates_to", 0.5)
        assert len(store.edges(SPACE, ["b5"])) == 2


def test_the_candidates_moments_bring_their_buckets_in_one_read(scoped, monkeypatch):
    store = scoped.store
    with store.ledger.tx() as c:  # a bucket being written: its moments are not candidates yet
        c.execute("UPDATE buckets SET state = 'pending' WHERE space = ? AND id = ?", (SPACE, "b3"))
    wanted = [m.id for b in ("b4", "b3", "b1") for m in store.moments(SPACE, b)] + ["b9#0"]
    seen = counting(scoped, monkeypatch)
    with scoped.ledger.pinned(), store.turn_scope(SPACE):
        moments, buckets = store.moments_with_buckets(SPACE, wanted)
        assert len(seen) == 1
        assert sorted({m.bucket_id for m in moments.values()}) == list(buckets) == ["b1", "b4"]
        assert set(moments) == {m.id for b in ("b4", "b1") for m in store.moments(SPACE, b)}
        assert store.get_many(SPACE, ["b1", "b4"]) == buckets  # from the turn's memo
        assert len(seen) == 1 + 2  # only the two store.moments() reads above
    assert store.get_many(SPACE, ["b1", "b4"]) == buckets


def test_lists_announced_ahead_give_what_list_gives(scoped, monkeypatch):
    store = scoped.store
    reads = [{"limit": 3}, {"type": "dream", "limit": None}, {"limit": 200, "since": "2000-01-01T00:00:00+00:00"}]
    fresh = [store.list(SPACE, **kw) for kw in reads]
    seen = counting(scoped, monkeypatch)
    with scoped.ledger.pinned(), store.turn_scope(SPACE):
        store.list_ahead(SPACE, *reads)
        assert [store.list(SPACE, **kw) for kw in reversed(reads)] == list(reversed(fresh))
        ahead = 0 if store.ledger.shared else 3  # PostgreSQL queued them; SQLite read each when it was asked for
        assert len(seen) == ahead
        assert store.list(SPACE, limit=3) == fresh[0] and len(seen) == ahead + 1  # taken once: asked again, read
        store.list_ahead(SPACE, {"limit": 3})
        newest = fresh[0][0].id
        store.rewrite_metadata(SPACE, newest, {"surfaced": True})  # a write drops what was read ahead
        again = store.list(SPACE, limit=3)
        assert [b.id for b in again] == [b.id for b in fresh[0]] and again[0].surfaced is True
        assert len(seen) == ahead + 2
    store.list_ahead(SPACE, {"limit": 3})  # outside a turn: nothing to announce to
    assert store.list(SPACE, limit=3) == again and len(seen) == ahead + 3


def test_lists_announced_ahead_share_one_round_trip(tmp_path, postgres_server, round_trips):
    with Brain.open(tmp_path / "data", postgres_server.overlay(tmp_path / "ahead")) as brain:
        brain.write(space=SPACE, id="b0", title="记忆", body="我们去了海边。")
        with brain.ledger.pinned(), brain.store.turn_scope(SPACE):
            assert brain.store.known_space(SPACE)
            round_trips.reset()
            brain.store.list_ahead(SPACE, {"limit": 3}, {"role": "core", "limit": 1000}, {"type": "dream"})
            assert [b.id for b in brain.store.list(SPACE, limit=3)] == ["b0"]
            assert brain.store.list(SPACE, role="core", limit=1000) == brain.store.list(SPACE, type="dream") == []
            assert round_trips.count == 1


def test_edges_sent_ahead_answer_later_asks(scoped, monkeypatch):
    store = scoped.store
    want = {ids: store.edges(SPACE, list(ids)) for ids in [("b1", "b3"), ("b0", "b1", "b2", "b3"), ("b4", "b0")]}
    seen = counting(scoped, monkeypatch)
    with scoped.ledger.pinned(), store.turn_scope(SPACE):
        store.edges_ahead(SPACE, ["b0", "b1", "b2", "b3"])
        store.edges_ahead(SPACE, ["b1", "b2"])  # all waiting already: nothing more to send
        assert store.edges(SPACE, ["b1", "b3"]) == want[("b1", "b3")]
        ahead = 0 if store.ledger.shared else 1  # SQLite reads it when first asked
        assert len(seen) == ahead
        assert store.edges(SPACE, ["b0", "b1", "b2", "b3"]) == want[("b0", "b1", "b2", "b3")]
        assert store.edges(SPACE, ["b4", "b0"]) == want[("b4", "b0")] and len(seen) == ahead + 1  # b4 read now
    store.edges_ahead(SPACE, ["b5"])  # outside a turn: nothing
    assert len(seen) == ahead + 1


def test_edges_read_with_their_ends_bring_the_buckets_there(scoped, monkeypatch):
    store = scoped.store
    with store.ledger.tx() as c:  # an end that is not visible stays out, as get_many leaves it out
        c.execute("UPDATE buckets SET state = 'deleting' WHERE space = ? AND id = ?", (SPACE, "b2"))
    want_edges = store.edges(SPACE, ["b1", "b4"])
    ends = {e.from_id for e in want_edges} | {e.to_id for e in want_edges}
    want = store.get_many(SPACE, ends)
    assert ends == {"b0", "b1", "b2", "b4", "b5"} and "b2" not in want
    seen = counting(scoped, monkeypatch)
    with scoped.ledger.pinned(), store.turn_scope(SPACE):
        assert store.edges(SPACE, ["b1", "b4"], ends=True) == want_edges
        assert store.get_many(SPACE, ends) == want
        assert len(seen) == 1
    assert store.edges(SPACE, ["b1", "b4"], ends=True) == want_edges  # outside a turn: the edges alone


def test_second_opinion_vectors_come_with_the_candidates_moments(scoped, monkeypatch):
    store = scoped.store
    if store.second is None:
        pytest.skip("no second-opinion encoder in this configuration")
    found = [m.id for b in ("b0", "b1") for m in store.moments(SPACE, b)]
    want = store.second_vectors(SPACE, [*found[1:], "b2#0"])
    assert set(want) == {*found[1:], "b2#0"}
    seen = counting(scoped, monkeypatch)
    with scoped.ledger.pinned(), store.turn_scope(SPACE):
        store.moments_with_buckets(SPACE, found, seconds=True)
        got = store.second_vectors(SPACE, [*found[1:], "b2#0"])
        assert len(seen) == 2  # the moments, then only b2#0's vector
        assert list(got) == list(want) and all((got[k] == want[k]).all() for k in want)
    store.moments_with_buckets(SPACE, found, seconds=True)  # outside a turn: nothing is kept for later
    store.second_vectors(SPACE, found[:1])
    assert len(seen) == 4
