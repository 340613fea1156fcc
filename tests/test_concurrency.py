"""8 threads x 200 mixed operations over HTTP against the real app under waitress, in one space.

Writes, reads, lists, edits, deletes, purges, edges and turns interleave; afterwards every
count and invariant is exact: no acknowledged write lost, no duplicate bucket, every edit's
last value kept, no edge to a missing bucket, one round per turn in every session, and the
ledger, Chroma and the lexical index agree. All threads also edit (each its own field) and
read the shared buckets, so edits of one bucket race each other and its readers.
"""

from __future__ import annotations

import random
import threading
from collections import Counter

import httpx
import pytest

from ombre_brain import Brain
from ombre_brain.store.doctor import doctor

from .conftest import LiveServer

SPACE = "haven:busy"
THREADS, OPS = 8, 200
SHARED = ["我们一起看的那场雨", "The night we got lost in Kyoto", "外婆做的红烧肉", "Her favourite blue scarf"]
KEY_ENV = "OMBRE_TEST_PURGE_KEY"
OWN_FIELD = ["importance", "valence", "arousal", "pinned", "protected", "anchor", "resolved", "digested"]


@pytest.fixture
def busy_server(tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "concurrency-test-secret")
    brain = Brain.open(tmp_path / "data", {"forget": {"keys": {"k1": KEY_ENV}}})
    server = LiveServer(brain)
    yield server
    server.close()
    brain.close()


class Worker(threading.Thread):
    def __init__(self, n: int, url: str) -> None:
        super().__init__(name=f"worker-{n}")
        self.n = n
        self.url = url
        self.rng = random.Random(1000 + n)
        self.own: dict[str, int] = {}          # id -> acknowledged importance
        self.gone: set[str] = set()            # acknowledged deletes and purges
        self.shared: dict[int, set[str]] = {}  # shared content index -> ids the server answered
        self.turns: Counter = Counter()        # session -> acknowledged turns
        self.edges: set[tuple[str, str]] = set()
        self.shared_fields: dict[str, tuple[str, object]] = {}  # shared id -> (this thread's field, last value)
        self.errors: list[str] = []
        self.ops: Counter = Counter()

    def expect(self, r: httpx.Response, status: int, what: str) -> dict | None:
        if r.status_code != status:
            self.errors.append(f"{what}: {r.status_code} {r.text[:300]}")
            return None
        return r.json()

    def run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=300) as c:
            for i in range(OPS):
                try:
                    self.step(c, i)
                except Exception as exc:  # noqa: BLE001 - every failure is reported by the test
                    self.errors.append(f"op {i}: {type(exc).__name__}: {exc}")

    def step(self, c: httpx.Client, i: int) -> None:
        r = self.rng.random()
        own = sorted(self.own)
        if r < 0.20 or not own:
            importance = self.rng.randint(1, 10)
            body = {"space": SPACE, "title": f"w{self.n} 记忆 {i}", "importance": importance}
            got = self.expect(c.post("/v1/buckets", json=body), 201, "create")
            if got:
                self.own[got["id"]] = importance
            self.ops["create"] += 1
        elif r < 0.25:
            k = self.rng.randrange(len(SHARED))
            got = self.expect(c.post("/v1/buckets", json={"space": SPACE, "title": SHARED[k]}), 201, "shared")
            if got:
                self.shared.setdefault(k, set()).add(got["id"])
            self.ops["shared"] += 1
        elif r < 0.32:
            bid = self.rng.choice(own)
            importance = self.rng.randint(1, 10)
            got = self.expect(c.patch(f"/v1/buckets/{bid}", params={"space": SPACE}, json={"importance": importance}),
                              200, "patch")
            if got:
                assert got["importance"] == importance
                self.own[bid] = importance
            self.ops["patch"] += 1
        elif r < 0.37:
            bid = self.rng.choice(own)
            if self.expect(c.delete(f"/v1/buckets/{bid}", params={"space": SPACE}), 200, "delete") is not None:
                del self.own[bid]
                self.gone.add(bid)
                self.edges = {e for e in self.edges if bid not in e}
            self.ops["delete"] += 1
        elif r < 0.39:
            bid = self.rng.choice(own)
            got = self.expect(c.post("/v1/purge", json={"space": SPACE, "bucket_ids": [bid]}), 200, "purge")
            if got is not None:
                assert got["status"] == "purged" and got["receipt"]["signature"]
                del self.own[bid]
                self.gone.add(bid)
                self.edges = {e for e in self.edges if bid not in e}
            self.ops["purge"] += 1
        elif r < 0.62:
            bid = self.rng.choice(own)
            got = self.expect(c.get(f"/v1/buckets/{bid}", params={"space": SPACE}), 200, "get")
            if got and got["importance"] != self.own[bid]:
                self.errors.append(f"get {bid}: importance {got['importance']} != acknowledged {self.own[bid]}")
            self.ops["get"] += 1
        elif r < 0.70 and self.shared:
            bid = next(iter(self.shared[self.rng.choice(sorted(self.shared))]))
            if self.rng.random() < 0.6:  # each thread edits its own field of the shared buckets
                field = OWN_FIELD[self.n]
                value = self.rng.randint(1, 10) if field == "importance" else (
                    round(self.rng.random(), 3) if field in ("valence", "arousal") else self.rng.random() < 0.5)
                if self.expect(c.patch(f"/v1/buckets/{bid}", params={"space": SPACE}, json={field: value}), 200,
                               "shared patch") is not None:
                    self.shared_fields[bid] = (field, value)
                self.ops["shared patch"] += 1
            else:  # a bucket others are editing right now never reads as missing
                self.expect(c.get(f"/v1/buckets/{bid}", params={"space": SPACE}), 200, "shared get")
                self.ops["shared get"] += 1
        elif r < 0.72:
            self.expect(c.get("/v1/buckets", params={"space": SPACE, "limit": 1000}), 200, "list")
            self.ops["list"] += 1
        elif r < 0.86 and len(own) >= 2:
            a, b = self.rng.sample(own, 2)
            if self.expect(c.post("/v1/edges", json={"space": SPACE, "from_id": a, "to_id": b,
                                                     "relation": "relates_to", "confidence": 0.5}),
                           201, "edge") is not None:
                self.edges.add((a, b))
            self.ops["edge"] += 1
        elif r >= 0.86:
            session = "shared" if self.rng.random() < 0.3 else f"s{self.n}"
            query = self.rng.choice(["还记得那场雨吗", "Kyoto", f"w{self.n} 记忆", "红烧肉", "hi"])
            got = self.expect(c.post("/v1/inject", json={"space": SPACE, "session_id": session, "query": query}),
                              200, "turn")
            if got is not None:
                self.turns[session] += 1
            self.ops["turn"] += 1
        else:
            self.expect(c.get(f"/v1/buckets/{own[0]}", params={"space": SPACE}), 200, "get")
            self.ops["get"] += 1


def test_eight_threads_two_hundred_mixed_ops(busy_server):
    workers = [Worker(n, busy_server.url) for n in range(THREADS)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(900)
    assert not any(w.is_alive() for w in workers), "a worker hung"
    errors = [e for w in workers for e in w.errors]
    assert errors == [], errors[:10]
    ops = sum((w.ops for w in workers), Counter())
    assert sum(ops.values()) == THREADS * OPS
    assert all(ops[k] > 0 for k in ("create", "shared", "patch", "delete", "purge", "get", "list", "edge", "turn",
                                             "shared patch", "shared get"))

    brain = busy_server.brain
    shared_ids: dict[int, set[str]] = {}
    for w in workers:
        for k, ids in w.shared.items():
            shared_ids.setdefault(k, set()).update(ids)
    assert all(len(ids) == 1 for ids in shared_ids.values()), shared_ids  # concurrent duplicates dedupe to one
    own = {bid: imp for w in workers for bid, imp in w.own.items()}
    gone = set().union(*(w.gone for w in workers))
    expected = set(own) | {next(iter(ids)) for ids in shared_ids.values()}

    stored = {b.id: b for b in brain.list(SPACE, limit=5000)}
    assert set(stored) == expected                      # no lost write, nothing deleted comes back
    assert brain.store.count(SPACE) == len(expected)
    assert not gone & set(stored)
    for bid, importance in own.items():                 # the last acknowledged edit wins
        assert stored[bid].importance == importance, bid
    for w in workers:                                   # concurrent edits of other fields never undo each other
        for bid, (field, value) in w.shared_fields.items():
            assert getattr(stored[bid], field) == value, (bid, field)
    dup = brain.ledger.query("SELECT content_hash, COUNT(*) n FROM buckets WHERE space = ? GROUP BY content_hash "
                             "HAVING COUNT(*) > 1", (SPACE,))
    assert [tuple(r) for r in dup] == []
    edges = {(e.from_id, e.to_id) for e in brain.edges(SPACE)}
    assert all(a in stored and b in stored for a, b in edges)
    assert edges == set().union(*(w.edges for w in workers))

    turns = sum((w.turns for w in workers), Counter())
    rounds = {r["session"]: r["round"] for r in brain.ledger.query(
        "SELECT session, round FROM sessions WHERE space = ?", (SPACE,))}
    assert rounds == dict(turns)                         # one round per acknowledged turn, none lost
    late = brain.ledger.query("SELECT i.session, i.round, s.round AS now FROM injections i JOIN sessions s ON "
                              "s.space = i.space AND s.session = i.session WHERE i.space = ? AND i.round > s.round",
                              (SPACE,))
    assert [tuple(r) for r in late] == []                # cooldown records never run ahead of their session
    report = doctor(brain, repair=False)
    assert report["consistent"], report
