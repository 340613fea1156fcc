"""A space remembers its embedding model; both backends work through the same Brain."""

from __future__ import annotations

import pytest

from ombre_brain import Brain, EmbeddingError
from ombre_brain.store.doctor import reindex

SPACE = "haven:xiaoyu"
MINILM = {"embedding": {"backend": "sentence-transformers"}}


def test_model_change_is_a_clear_error_and_reindex_fixes_it(tmp_path):
    with Brain.open(tmp_path, None) as b:
        bid = b.write(space=SPACE, title="Beach day", body="We collected seashells at sunset on the beach.")
        first = b.embedder.model_id
    with Brain.open(tmp_path, MINILM) as b:
        with pytest.raises(EmbeddingError) as exc:
            b.write(space=SPACE, title="Other", body="Another memory about trains.")
        msg = str(exc.value)
        assert first in msg and b.embedder.model_id in msg and "reindex --space" in msg
        with pytest.raises(EmbeddingError):
            b.turn(SPACE, "s", "remember the seashells at sunset?")
        out = reindex(b, SPACE)
        assert out["buckets"] == 1 and out["model_id"] == b.embedder.model_id
        assert b.search(SPACE, "seashells on the beach", 3)[0] == bid
        turn = b.turn(SPACE, "s", "do you remember collecting seashells at sunset?")
        assert bid in turn.item_ids("recalled_memory")


def test_sentence_transformers_backend_never_admits_cjk_on_vector_score(tmp_path):
    with Brain.open(tmp_path, MINILM) as b:
        assert b.embedder.backend == "sentence-transformers" and not b.embedder.cjk_capable
        b.write(space=SPACE, title="周末骑车", body="周末小雨沿着江边骑了二十公里，晒黑了一圈。")
        turn = b.turn(SPACE, "s", "你还记得我小时候养的那只鹦鹉叫什么名字吗")
        assert not turn.item_ids("recalled_memory")
        assert "UNKNOWN" in turn.rendered
        sup = turn.suppressed[0] if turn.suppressed else None
        assert sup is None or sup.reason in ("no_topic_evidence", "semantic_not_evidence_for_cjk")
