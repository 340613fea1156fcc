"""Issue 35: a long write costs a bounded amount of the embedding model (retrieval/lanes.share_tokens).

A 20,000-character body was 120+ moments embedded whole, 15,000-20,000 tokens of e5: 19 s on an
idle 2-core machine, 112-124 s on a loaded one. Now one memory's moments share
``embedding.max_tokens_per_memory`` (2,048) tokens; the lexical index still reads every word. The
time itself is measured by ``python -m ombre_brain.evaluate.long_writes`` (docs/benchmarks.md), not here.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from ombre_brain import Brain
from ombre_brain.buckets import bucket_from_dict, build_moments
from ombre_brain.retrieval.lanes import MOMENT_FLOOR_TOKENS, share_tokens, water_level

SPACE = "haven:long"
ZH = "我们一起去海边看日出我家小狗叫豆包晚上想吃重庆火锅今天天气很好她把围巾借给了我"


def zh_body(n: int, seed: int = 1) -> str:
    rng = random.Random(seed)
    sentences = []
    while sum(len(s) for s in sentences) < n:
        sentences.append("".join(rng.choice(ZH) for _ in range(rng.randint(12, 40))) + "。")
    return "".join(sentences)[:n]


def test_share_tokens_against_its_definition():
    rng = random.Random(7)
    for _ in range(2000):
        n = rng.randint(1, 300)
        sizes = [rng.randint(3, 520) for _ in range(n)]
        budget = rng.randint(64, 8000)
        plan = share_tokens(sizes, budget)
        assert [i for run, _ in plan for i in run] == list(range(n))  # every moment once, in order
        caps = [cap for _, cap in plan]
        if sum(sizes) <= budget:
            assert caps == sizes and all(len(run) == 1 for run, _ in plan)
            continue
        assert sum(caps) <= budget  # the budget holds
        assert len(plan) <= max(1, budget // MOMENT_FLOOR_TOKENS)
        totals = [sum(sizes[i] for i in run) for run, _ in plan]
        level = water_level(totals, budget)
        assert all(cap == min(t, level) for cap, t in zip(caps, totals, strict=True))
        assert all(cap >= min(t, MOMENT_FLOOR_TOKENS) for cap, t in zip(caps, totals, strict=True))
        assert sum(min(t, level + 1) for t in totals) > budget or level >= max(totals)  # the highest level


def _count_passage_tokens(emb, monkeypatch) -> list[int]:
    """Tokens the embedding model is given for passages, call by call (the list fills as it embeds)."""
    seen: list[int] = []
    real = emb._encode

    def spy(texts, is_query, engine=None):
        if not is_query:
            seen.append(sum(emb._count_tokens(t, False) for t in texts))
        return real(texts, is_query, engine)

    monkeypatch.setattr(emb, "_encode", spy)
    return seen


@pytest.fixture
def counted(brain, monkeypatch):
    """Tokens the embedding model is given, call by call."""
    return _count_passage_tokens(brain.embedder, monkeypatch)


def test_a_20000_character_write_embeds_at_most_its_budget(brain, counted):
    body = zh_body(20000 - 18) + "最后那天我们在灯塔下面约好明年再来。"
    budget = brain.config.embedding.max_tokens_per_memory
    moments = build_moments(bucket_from_dict({"space": SPACE, "title": "很长的一天", "body": body}))
    whole = sum(brain.embedder._count_tokens(m.text, False) for m in moments)
    assert whole > 5 * budget  # what it cost before
    bid = brain.write(space=SPACE, title="很长的一天", body=body)
    assert 0 < sum(counted) <= budget
    stored = brain.store.get_vectors(SPACE, [m.id for m in brain.store.moments(SPACE, bid)])
    assert len(stored) == len(moments) and all(abs(float(np.linalg.norm(v)) - 1) < 1e-4 for v in stored.values())
    found = brain.search(SPACE, "灯塔下面约好明年再来", k=3)  # words from its very end are still found
    assert found and found[0] == bid


def test_short_memories_are_embedded_whole_and_the_same_way_on_every_path(brain, counted):
    short = {"space": SPACE, "title": "围巾", "body": "她把蓝色的围巾借给了我。\n\n那天河边的风很大。"}
    a = brain.write(**short)
    texts = [m.text for m in brain.store.moments(SPACE, a)]
    assert counted == [sum(brain.embedder._count_tokens(t, False) for t in texts)]  # nothing cut
    long = {"space": SPACE, "title": "长文", "body": zh_body(8000, seed=3)}
    b = brain.write(**long)
    c = brain.write_many([{**long, "id": "again", "title": "长文二"}])[0]
    ids = lambda bid: [m.id for m in brain.store.moments(SPACE, bid)]  # noqa: E731
    direct, batch = brain.store.get_vectors(SPACE, ids(b)), brain.store.get_vectors(SPACE, ids(c))
    pairs = list(zip([direct[i] for i in ids(b)][1:], [batch[i] for i in ids(c)][1:], strict=True))
    assert all(np.abs(x - y).max() < 1e-4 for x, y in pairs)  # the body's moments: one plan, whichever path
    before = dict(direct)
    brain.store.reindex(SPACE)  # re-embedding follows the same plan
    after = brain.store.get_vectors(SPACE, ids(b))
    assert all(np.abs(before[i] - after[i]).max() < 1e-4 for i in before)


def test_the_pieces_of_one_text_share_one_memory_budget(tmp_path, monkeypatch):
    """MCP grow files one text as 2-6 memories; they cost what one memory may, however the text is cut."""
    with Brain.open(tmp_path / "data", {"embedding": {"max_tokens_per_memory": 256}}) as brain:
        with monkeypatch.context() as m:
            seen = _count_passage_tokens(brain.embedder, m)
            pieces = [{"space": SPACE, "title": f"第{i}段", "body": zh_body(3000, seed=i)} for i in range(4)]
            brain.write_many(pieces, one_text=True)
            shared = sum(seen)
            seen.clear()
            brain.write_many([{**p, "title": p["title"] + "（另存）"} for p in pieces])
            each = sum(seen)
        assert 0 < shared <= 256 < each <= 4 * 256
