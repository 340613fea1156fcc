"""Admission (design §13): each feature of the evidence score, the calibrated decision, the lexical fallback."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ombre_brain.buckets import Bucket, build_moments
from ombre_brain.config import AdmissionModel, load_config
from ombre_brain.recall_types import MomentHit
from ombre_brain.retrieval.admission import (
    MIN_BACKGROUND_STD,
    Background,
    admit,
    asked_terms,
    candidate_features,
    discriminative_terms,
    evidence_of,
    lexical_match,
    query_evidence,
)
from ombre_brain.retrieval.alignment import Alignment
from ombre_brain.retrieval.features import FEATURES
from ombre_brain.retrieval.fusion import group_by_bucket
from ombre_brain.retrieval.terms import term_weight

from .test_fusion import RAIN, RAIN_MOMENTS  # one hand-made memory for the ranking and admission tests

CFG = load_config()
ADMISSION_FEATURES = FEATURES.names


def high_idf(term: str) -> float:
    return 3.0


DOG = Bucket(id="dog", space="s", title="Our dog Biscuit chews every slipper in the house")
SEA = Bucket(id="sea", space="s", title="一起去海边看日出")
MINT_TERMS = ["我", "今天", "在", "便利店", "买", "了", "一包", "薄荷糖"]  # what jieba makes of the query


def hit(mid: str, fused: float, cos: float | None = None, bm25: float | None = None) -> MomentHit:
    return MomentHit(RAIN_MOMENTS[mid], vector_score=cos, lexical_score=bm25, fused=fused)


def cands_of(*rows):
    """rows: (bucket, cosine or None, bm25 or None); one content hit per bucket."""
    hits = [MomentHit(build_moments(b)[0], vector_score=cos, lexical_score=bm, fused=(cos or 0) + (bm or 0) / 10)
            for b, cos, bm in rows]
    return group_by_bucket(hits, {b.id: b for b, _, _ in rows})


def evidence_for(cands, terms, *, query_is_cjk=True, background=(0.80, 0.02), cjk_capable=True):
    """``background``: (mean, std) of the query's cosines to the space's sample, or None."""
    asked = asked_terms(terms, idf=high_idf, cfg=CFG)
    bg = None
    if background is not None:
        mean, std = background
        bg = Background.of(["bg1", "bg2"], [mean - std, mean + std])
    return query_evidence(cands, asked, query_is_cjk=query_is_cjk, background=bg, cjk_capable=cjk_capable)


def features(cands, terms, which=0, **kw):
    q = evidence_for(cands, terms, **kw)
    c = cands[which]
    return candidate_features(c, q, lexical_match(c, q.asked)[2])


# ---------------------------------------------------------------- features, one by one


def test_lexical_feature_is_term_coverage():
    c = cands_of((RAIN, 0.8, 5.0))
    assert features(c, ["散步"])["lexical"] == 1.0
    assert features(c, ["散步", "鹦鹉"])["lexical"] == pytest.approx(0.5, abs=0.3)  # weighted by general idf
    assert features(c, ["鹦鹉"])["lexical"] == 0.0


def test_a_shorter_cut_of_a_word_covers_only_its_share():
    """jieba cuts 女朋友 into 女朋友 and 朋友; a memory of a boyfriend holds 朋友 and says nothing of a girlfriend."""
    b = Bucket(id="bf", space="s", title="她和男朋友在一起四年了")
    c = cands_of((b, None, 2.0))
    assert features(c, ["男朋友", "朋友"])["lexical"] == 1.0
    share = features(c, ["女朋友", "朋友"])["lexical"]
    assert share == pytest.approx(term_weight("朋友") / term_weight("女朋友"), abs=1e-3)
    assert share < CFG.retrieval.min_term_coverage


def test_written_english_words_count_alike_in_coverage():
    """Half of a LoCoMo question written in the turn admits it ("When did Maria's grandmother pass away?" against
    "my grandma passed away"); weighing words by rarity let the one unwritten rare word sink such answers."""
    b = Bucket(id="gran", space="s", title="Maria: my grandma passed away last week")
    c = cands_of((b, None, 2.0))
    assert features(c, ["grandmother", "pass", "away", "maria's"], query_is_cjk=False)["lexical"] == 0.5


def test_conversation_context_never_dilutes_a_memory_the_message_itself_names():
    """Context terms join the asked terms at lower weight; a memory holding all of the message's own
    terms keeps full coverage (context dilution made MADial's proactive recall fall from 36.8 to 15.8)."""
    c = cands_of((RAIN, 0.8, 5.0))
    alone = asked_terms(["散步"], idf=high_idf, cfg=CFG)
    talk = asked_terms(["散步"], idf=high_idf, cfg=CFG, context=[("鹦鹉", 0.5), ("生日", 0.5)])
    assert lexical_match(c[0], alone)[2] == 1.0
    assert lexical_match(c[0], talk)[2] == 1.0
    # a memory of the conversation's topic still gets in through the context's terms
    on_topic = asked_terms(["那天"], idf=high_idf, cfg=CFG, context=[("下班", 0.5)])
    assert lexical_match(c[0], on_topic)[2] > 0


SHELL = Bucket(id="shell", space="s", title="海边捡的贝壳放在窗台上")


def test_dense_features_stand_the_cosine_against_the_background_and_the_others():
    c = cands_of((SEA, 0.90, None), (SHELL, 0.84, None), (RAIN, 0.82, None))
    top, second = features(c, [], 0), features(c, [], 1)
    assert top["cosine"] == pytest.approx(0.90)
    assert top["dense_z"] == pytest.approx((0.90 - 0.80) / 0.02)
    assert top["margin"] == pytest.approx(0.06) and second["margin"] == pytest.approx(-0.06)
    assert top["gap"] == pytest.approx(0.06) and second["gap"] == pytest.approx(0.02)
    assert top["dense_rr"] == 1.0 and second["dense_rr"] == 0.5


def test_standing_is_measured_among_memories_in_the_candidates_own_script():
    """An English question sits closer to English memories than to equally relevant Chinese ones (e5-small: ~0.04);
    in a store that mixes both, a Chinese memory is ranked, and its margin and gap taken, among the Chinese ones,
    and its z-score against the Chinese moments of the background: as in a store of one script."""
    c = cands_of((DOG, 0.86, None), (SEA, 0.83, None), (RAIN, 0.79, None))
    sea = features(c, [], 1, query_is_cjk=False)
    assert sea["dense_rr"] == 1.0                          # first among the Chinese memories (second overall)
    assert sea["margin"] == pytest.approx(0.04) and sea["gap"] == pytest.approx(0.04)
    dog = features(c, [], 0, query_is_cjk=False)
    assert dog["margin"] == 0.0 and dog["gap"] == 0.0       # the only English candidate: no other to stand against
    # background: eight English moments at 0.86±0.01, eight Chinese ones at 0.78±0.02
    ids = [f"en{i}" for i in range(8)] + [f"zh{i}" for i in range(8)]
    cos = [0.86 + (0.01 if i % 2 else -0.01) for i in range(8)] + [0.78 + (0.02 if i % 2 else -0.02) for i in range(8)]
    bg = Background.of(ids, cos, [False] * 8 + [True] * 8)
    q = query_evidence(c, asked_terms([], idf=high_idf, cfg=CFG), query_is_cjk=False, background=bg)
    assert candidate_features(c[1], q, 0.0)["dense_z"] == pytest.approx((0.83 - 0.78) / 0.02)
    assert candidate_features(c[0], q, 0.0)["dense_z"] == pytest.approx((0.86 - 0.86) / 0.01, abs=1e-6)
    # a script with too few sampled moments is measured against the whole background
    few = Background.of(ids[:9], cos[:9], [False] * 8 + [True])
    assert few.within(True) is few and few.within(False).n == 8
    # one script only: the whole background, unchanged
    one = Background.of(ids[8:], cos[8:], [True] * 8)
    assert one.within(True) is one


def test_a_candidate_only_lexical_search_found_gets_the_lowest_cosine():
    c = cands_of((SEA, 0.90, None), (RAIN, None, 4.0))
    rain = next(i for i, x in enumerate(c) if x.bucket.id == "rain_walk")
    f = features(c, ["散步"], rain)
    assert f["cosine"] == pytest.approx(0.90) and f["dense_rr"] == 0.0 and f["lexical_rr"] == 1.0


def test_cross_script_marks_a_question_in_another_language():
    c = cands_of((SEA, 0.85, None), (DOG, 0.80, None))
    assert features(c, [], 0, query_is_cjk=False)["cross_script"] == 1.0   # English question, Chinese memory
    assert features(c, [], 1, query_is_cjk=False)["cross_script"] == 0.0
    assert features(c, [], 1, query_is_cjk=True)["cross_script"] == 1.0


def test_an_english_only_embedder_gives_no_dense_evidence_on_cjk():
    c = cands_of((SEA, 0.99, None), (DOG, 0.20, None))
    f = features(c, [], 0, cjk_capable=False)
    assert f["cosine"] == f["dense_z"] == f["margin"] == f["dense_rr"] == 0.0


def test_aligned_features_come_from_the_word_alignment():
    c = cands_of((SEA, 0.85, None), (DOG, 0.80, None))
    al = {"sea": Alignment(0.72, 0.62, (("beach", "海边", 0.62), ("trip", "旅行", 0.82)))}
    q = query_evidence(c, asked_terms([], idf=high_idf, cfg=CFG), query_is_cjk=False, aligned=al)
    f = candidate_features(c[0], q, 0.0)
    assert (f["aligned"], f["aligned_min"]) == (0.72, 0.62)
    assert candidate_features(c[1], q, 0.0)["aligned"] == 0.0  # nothing aligned: no evidence from words
    a = admit(c[0], q, cfg=CFG, model=AdmissionModel(weights={"aligned_min": 1.0}, bias=0.0, admit=0.5))
    assert a.aligned == al["sea"].pairs and "aligned beach→海边 0.62 trip→旅行 0.82" in a.summary()
    assert a.to_dict()["aligned"][0] == {"term": "beach", "word": "海边", "cosine": 0.62}


def test_no_background_means_no_z():
    c = cands_of((SEA, 0.90, None))
    assert features(c, [], background=None)["dense_z"] == 0.0


# ---------------------------------------------------------------- the score and the decision


def test_evidence_is_the_sigmoid_of_the_weighted_features():
    m = AdmissionModel(weights={"lexical": 2.0, "dense_z": 0.5}, bias=-3.0, admit=0.5)
    f = {n: 0.0 for n in ADMISSION_FEATURES} | {"lexical": 1.0, "dense_z": 4.0}
    assert evidence_of(f, m) == pytest.approx(1 / (1 + math.exp(-(2.0 + 2.0 - 3.0))))


def test_calibrated_admission_carries_its_evidence_and_features():
    c = cands_of((SEA, 0.90, None), (DOG, 0.81, None))
    q = evidence_for(c, [], query_is_cjk=False)
    model = AdmissionModel(weights={"dense_z": 1.0, "cross_script": 0.0}, bias=-3.0, admit=0.5)
    top, other = (admit(x, q, cfg=CFG, model=model) for x in c)
    assert (top.admitted, top.reason) == (True, "evidence_above_threshold")
    assert (other.admitted, other.reason) == (False, "evidence_below_threshold")
    assert top.evidence > 0.5 > other.evidence and set(top.features) == {"dense_z", "cross_script"}  # the model's
    assert top.summary().startswith("evidence 0.") and "cross-script" in top.summary()
    assert top.to_dict()["evidence"] == top.evidence


def test_a_question_in_another_script_is_held_to_its_own_threshold():
    """English about a Chinese memory has no lexical route; ``admit_cross_script`` is fitted for it apart."""
    c = cands_of((SEA, 0.90, None), (DOG, 0.81, None))
    model = AdmissionModel(weights={}, bias=0.0, admit=0.9, admit_cross_script=0.4)  # evidence 0.5 everywhere
    across = admit(c[0], evidence_for(c, [], query_is_cjk=False), cfg=CFG, model=model)
    within = admit(c[0], evidence_for(c, [], query_is_cjk=True), cfg=CFG, model=model)
    assert (across.admitted, across.reason) == (True, "evidence_above_threshold")
    assert (within.admitted, within.reason) == (False, "evidence_below_threshold")
    unset = AdmissionModel(weights={}, bias=0.0, admit=0.9)  # no cross-script threshold: admit holds for both
    assert not admit(c[0], evidence_for(c, [], query_is_cjk=False), cfg=CFG, model=unset).admitted


def test_a_refusal_carries_the_very_threshold_it_missed():
    """The record holds the number admission compared with, so a page shows "evidence 0.50 < 0.90" unrecomputed."""
    c = cands_of((SEA, 0.90, None), (DOG, 0.81, None))
    model = AdmissionModel(weights={}, bias=0.0, admit=0.9, admit_cross_script=0.6, admit_cjk=0.7)
    across = admit(c[0], evidence_for(c, [], query_is_cjk=False), cfg=CFG, model=model)
    assert (across.threshold, across.threshold_name) == (0.6, "admit_cross_script")
    assert across.summary().startswith("evidence 0.50 < 0.60 cross-script — ")
    assert across.summary().count("cross-script") == 1
    within = admit(c[0], evidence_for(c, [], query_is_cjk=True), cfg=CFG, model=model)
    assert (within.threshold, within.threshold_name) == (0.7, "admit_cjk")
    assert within.summary().startswith("evidence 0.50 < 0.70 CJK — ")
    assert within.to_dict()["threshold"] == 0.7 and within.to_dict()["threshold_name"] == "admit_cjk"
    low = AdmissionModel(weights={}, bias=0.0, admit=0.3)
    passed = admit(c[0], evidence_for(c, [], query_is_cjk=True), cfg=CFG, model=low)
    assert passed.admitted and passed.summary().startswith("evidence 0.50 ≥ 0.30 — ")


def test_a_latin_only_moment_of_a_chinese_memory_keeps_a_chinese_store_one_script():
    """A memory's script is its title's and text's together: a Chinese memory whose best moment is "iPhone 15 Pro
    Max" is not an English candidate of its own (it would stand first of its script and be weighed)."""
    phone = Bucket(id="phone", space="s", title="iPhone 15 Pro Max", body="她终于换了新手机，开心了一整天。")
    c = cands_of((SEA, 0.90, None), (SHELL, 0.85, None), (phone, 0.80, None))
    q = evidence_for(c, [])
    assert q.script_rank == {x.bucket.id: x.rank for x in c}
    f = candidate_features(c[2], q, 0.0)
    assert f["margin"] == pytest.approx(0.80 - 0.90) and f["dense_rr"] == pytest.approx(1 / 3)
    assert f["cross_script"] == 1.0  # its best moment is Latin, as it always counted


def test_the_best_candidates_of_each_script_are_weighed():
    """A Chinese question's English answer ranks below the Chinese candidates that share its words; it is weighed
    when it is among the ``max_rank`` best of the English ones, and a Chinese candidate past the Chinese
    ``max_rank`` is not, whatever the English ones."""
    zh = [Bucket(id=f"zh{i}", space="s", title=t) for i, t in enumerate(MIXED_ZH[:5])]
    en = Bucket(id="en0", space="s", title=MIXED_EN[0])
    c = cands_of(*[(b, 0.90 - 0.01 * i, None) for i, b in enumerate(zh)], (en, 0.70, None))
    assert [x.bucket.id for x in c][-1] == "en0" and c[-1].rank == 6
    q = evidence_for(c, [])
    assert q.script_rank == {"zh0": 1, "zh1": 2, "zh2": 3, "zh3": 4, "zh4": 5, "en0": 1}
    model = AdmissionModel(weights={}, bias=0.0, admit=0.4)  # evidence 0.5 for anything weighed
    verdicts = {x.bucket.id: admit(x, q, cfg=CFG, model=model).reason for x in c}
    assert verdicts["en0"] == "evidence_above_threshold" and verdicts["zh3"] == "evidence_above_threshold"
    assert verdicts["zh4"] == "below_admission_rank"
    en = admit(c[-1], q, cfg=CFG, model=model)
    assert en.script_rank == 1 and en.to_dict()["script_rank"] == 1  # the debug JSON says why rank 6 was weighed


def test_context_only_hits_are_never_admitted_whatever_the_model():
    c = group_by_bucket([hit("rain_walk#2", 0.9, 0.99, 6.0), hit("rain_walk#3", 0.5, 0.99)], {"rain_walk": RAIN})
    q = evidence_for(c, ["薄荷糖", "散步"])
    generous = AdmissionModel(weights={}, bias=10.0, admit=0.1)
    for model in (None, generous):
        a = admit(c[0], q, cfg=CFG, model=model)
        assert (a.admitted, a.reason) == (False, "context_only_match")


# ---------------------------------------------------------------- lexical-only fallback (no fitted model)


def test_affect_anchor_is_not_bait():
    c = group_by_bucket([hit("rain_walk#2", 0.9, 0.83, 6.0), hit("rain_walk#1", 0.5, 0.84),
                         hit("rain_walk#0", 0.4, 0.84)], {"rain_walk": RAIN})
    a = admit(c[0], evidence_for(c, MINT_TERMS), cfg=CFG, model=None)
    assert (a.admitted, a.matched_terms, a.reason) == (False, (), "no_topic_evidence")


def test_term_evidence_names_the_first_field():
    c = group_by_bucket([hit("rain_walk#1", 0.8, 0.3, 5.0)], {"rain_walk": RAIN})
    a = admit(c[0], evidence_for(c, ["还记得", "下雨天", "散步"]), cfg=CFG, model=None)
    assert (a.admitted, a.reason, a.matched_terms) == (True, "term_in_title", ("散步",))
    assert admit(c[0], evidence_for(c, ["肩膀"]), cfg=CFG, model=None).reason == "term_in_body"


def test_terms_need_length_idf_and_must_not_be_stop_words():
    assert discriminative_terms(["我", "散", "散步", "the", "cat", "a1"], idf=high_idf, cfg=CFG) == ["散步", "cat"]
    assert discriminative_terms(["散步"], idf=lambda t: 0.1, cfg=CFG) == []


def test_latin_terms_match_at_word_starts():
    b = Bucket(id="p", space="s", title="Parrots", body="We talked about education.")
    c = group_by_bucket([MomentHit(build_moments(b)[0], fused=1.0)], {"p": b})
    assert admit(c[0], evidence_for(c, ["parrot"], query_is_cjk=False), cfg=CFG, model=None).reason == "term_in_title"
    assert not admit(c[0], evidence_for(c, ["cat"], query_is_cjk=False), cfg=CFG, model=None).admitted


def test_a_model_without_fitted_weights_warns_and_admits_lexically(tmp_path, caplog, monkeypatch):
    """Any sentence-transformers model a user names has no fitted admission: lexical-only, with a warning."""
    from ombre_brain import Brain
    from ombre_brain.retrieval.evidence import Admitter

    caplog.set_level("WARNING", logger="ombre_brain")
    monkeypatch.setattr(Admitter, "model_key", lambda self: "a-model-a-user-named")
    with Brain.open(tmp_path / "d", {"retrieval": {"reader": {"id": None}}}) as b:  # admission as design §13
        b.write(space="a:b", title="我们一起去海边看日出")
        b.write(space="a:b", title="周末在家做了红烧肉")
        b.write(space="a:b", title="小雨的猫叫年糕")
        t = b.turn("a:b", "s", "还记得我们去海边看日出吗", dry_run=True)
        assert t.item_ids("recalled_memory")
        c = t.debug["retrieval"].candidates[0]
        assert c.admission.evidence is None and c.admission.reason.startswith("term_in_")
    assert any("no fitted admission" in r.message for r in caplog.records)


# ---------------------------------------------------------------- through real turns


def _generous(brain_path):
    """A config whose fitted admission admits every weighed candidate, for whichever model key this machine has."""
    from ombre_brain import Brain

    with Brain.open(brain_path / "probe") as b:
        key = b.admitter.model_key()
    weights = {"lexical": 0.0, "dense_z": 0.0, "cross_script": 0.0, "aligned": 0.0}  # read, shown, weigh nothing
    # the reader off: these tests are about the routes and the admission model under it (design §13)
    return {"retrieval": {"reader": {"id": None},
                          "admission": {"models": {key: {"weights": weights, "bias": 10.0, "admit": 0.5}}}}}


def test_weather_dreams_and_context_only_moments_never_admit(tmp_path):
    """Whatever the evidence, the layer rules stand: weather and dreams are never direct hits, nor is a moment
    that is only a comment or an affect anchor the reason a bucket is recalled."""
    from ombre_brain import Brain
    from ombre_brain.buckets import CONTEXT_ONLY_SECTIONS

    with Brain.open(tmp_path / "d", _generous(tmp_path)) as b:
        s = "gen:x"
        b.write(space=s, id="weather", type="feel", tags=["relationship_weather"], title="暖暖的一周 海边的风")
        b.write(space=s, id="dream", type="dream", title="梦见海边", body="梦里我们在海边走了很久。")
        b.write(space=s, id="anchor", title="周末做饭",
                body="### moment\n周末一起做了红烧肉。\n### affect_anchor\n海边的风吹过来的那种安心。")
        b.write(space=s, id="sea", title="一起去海边看日出")
        t = b.turn(s, "s1", "还记得海边吗", dry_run=True)
        assert "sea" in t.item_ids("recalled_memory")
        assert not {"weather", "dream"} & set(t.item_ids("recalled_memory"))
        verdicts = [(x.bucket_id, x.runtime_gate["direct_seed"]["reason"]) for x in t.suppressed]
        verdicts += [(k, v["runtime_gate"]["direct_seed"]["reason"]) for k, v in t.debug["trace"].items()]
        assert ("weather", "layer_never_direct") in verdicts and ("dream", "dream_resonance_only") in verdicts
        for it in t.section("recalled_memory").items:  # a recalled bucket is recalled for a content moment
            moment = next(m for m in b.store.moments(s, it.bucket_id) if m.id == it.moment_id)
            assert moment.section not in CONTEXT_ONLY_SECTIONS


def test_the_direct_seed_gate_carries_the_evidence_and_the_debug_page_shows_it(tmp_path):
    from ombre_brain import Brain
    from ombre_brain.server.app import create_app

    cfg = _generous(tmp_path)
    cfg["retrieval"]["dictionary"] = False  # with it, sunrise→日出 would admit through the dictionary instead
    with Brain.open(tmp_path / "d", cfg) as b:
        b.write(space="dbg:x", id="sea", title="一起去海边看日出")
        b.write(space="dbg:x", id="pork", title="周末做了红烧肉")
        Q = "do you remember watching the sunrise by the sea?"  # no word in common: only the score can admit
        t = b.turn("dbg:x", "s1", Q, dry_run=True)
        item = t.section("recalled_memory").items[0]
        ds = item.runtime_gate["direct_seed"]
        assert ds["reason"] == "admitted_evidence_above_threshold" and ds["evidence"] > 0.5
        used = next(c.admission for c in t.debug["retrieval"].candidates if c.bucket.id == item.bucket_id)
        assert ds["threshold"] == used.threshold and ds["threshold_name"] == used.threshold_name  # the number used
        assert set(ds["features"]) >= {"lexical", "dense_z", "cross_script"}
        client = create_app(b).test_client()
        data = client.get("/api/recall-debug", query_string={"space": "dbg:x", "q": Q}).get_json()
        sea = next(c for c in data["candidates"] if c["bucket_id"] == "sea")
        assert sea["admission"]["evidence"] > 0.5 and sea["admission_summary"].startswith("evidence ")
        html = client.get("/debug/", query_string={"space": "dbg:x", "q": Q}).get_data(as_text=True)
        assert "admitted: evidence " in html and "dense z" in html
        if b.store.second is not None:  # the words each asked term was matched to, across languages
            assert sea["admission"]["aligned"] and "aligned " in html and "sunrise→日出" in html


def test_calibrate_separates_a_tiny_hand_made_set(tmp_path):
    """The fitted threshold puts every positive's memory above and every negative's candidates below it."""
    import yaml

    from ombre_brain.evaluate.calibrate import calibrate, write_overlay

    data = {
        "memories": {"m1": "我们一起去海边看日出", "m2": "周末在家做了红烧肉", "m3": "小猫年糕喜欢晒太阳",
                     "m4": "第一次滑雪摔了二十次", "m5": "外婆做的酸辣粉最好吃", "m6": "每周六上午学钢琴"},
        "queries": [{"q": "还记得去海边看日出吗", "want": ["m1"]}, {"q": "红烧肉那次", "want": ["m2"]},
                    {"q": "年糕晒太阳", "want": ["m3"]}, {"q": "滑雪摔跤的事", "want": ["m4"]},
                    {"q": "外婆的酸辣粉", "want": ["m5"]}, {"q": "钢琴课是哪天", "want": ["m6"]}],
        "negatives": ["我的自行车停在哪里", "我大学在哪个城市读的", "我们看过什么演唱会"],
        "casual": ["晚安"],
    }
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    res = calibrate([path], folds=2, show_progress=False)
    by = res["in_sample"]["by_kind"]
    assert by["positive"]["zh"]["pct"] == 100.0
    assert by["negative"]["zh"]["pct"] == 0.0
    assert 0 < res["model"]["admit"] < 1 and res["candidates"] > 6
    out = tmp_path / "overlay.yaml"
    write_overlay(res, out)
    from ombre_brain.config import load_config

    cfg = load_config(out)
    assert res["model_id"] in cfg.retrieval.admission.models


# ---------------------------------------------------------------- what calibrate counts as injected


def _injected_by_hand(ex, p, questions, t):
    """The plain reading of a turn: admitted = lexical or weighed and above its threshold; keep the best four."""
    from ombre_brain.evaluate.calibrate import MAX_DIRECT

    out = []
    for qi, q in enumerate(questions):
        mine = [(e.fused, e.label) for e, pe in zip(ex, p, strict=True)
                if e.query == qi and (e.lexical_ok or (e.weighed and pe >= t[e.cross]))]
        kept = sorted(mine, key=lambda c: -c[0])[:MAX_DIRECT]
        out.append(any(lab for _, lab in kept) if q.wanted else bool(kept))
    return out


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.floats(0, 1), st.booleans(), st.booleans(), st.booleans(),
                          st.booleans(), st.floats(0, 1)), max_size=40),
       st.lists(st.booleans(), min_size=6, max_size=6), st.floats(0, 1), st.floats(0, 1))
def test_calibrate_counts_injections_as_a_turn_would(rows, wanted, same, cross):
    from ombre_brain.evaluate.calibrate import Example, Injections, Question

    ex = [Example((0.0,), int(label), qi, "g", fused, "s", lex, weighed, crossed)
          for qi, fused, label, lex, weighed, crossed, _ in rows]
    p = np.array([r[6] for r in rows])
    questions = [Question("positive" if w else "negative", "zh", w, "s") for w in wanted]
    got = Injections(ex, questions).hits(p, (same, cross)).tolist()
    assert got == _injected_by_hand(ex, p, questions, (same, cross))


def test_the_threshold_guards_what_the_score_adds_not_what_words_already_admit():
    """Near misses written in their memories inject through lexical evidence at any threshold (here 4 of 20);
    the thresholds are still fitted, to what the score adds: no more false recall, every positive in."""
    from ombre_brain.evaluate.calibrate import Example, Injections, Question, choose_threshold

    ex, qs = [], []
    for i in range(20):
        qs.append(Question("negative", "zh", False, "s"))
        ex.append(Example((0.0,), 0, len(qs) - 1, f"n{i}", 1.0, "s", lexical_ok=i < 4))
    for i in range(20):
        qs.append(Question("positive", "zh", True, "s"))
        ex.append(Example((0.0,), 1, len(qs) - 1, f"p{i}", 1.0, "s"))
    qs.append(Question("casual", "zh", False, "s"))
    ex.append(Example((0.0,), 0, len(qs) - 1, "c", 1.0, "s"))
    p = np.array([0.3] * 20 + [0.6] * 20 + [0.55])
    t = choose_threshold(ex, p, qs)
    hit = Injections(ex, qs).hits(p, t)
    assert hit[20:40].all() and hit[:20].sum() == 4 and not hit[40]
    assert 0.55 < t[0] <= 0.6  # a casual message may never inject: it alone holds the threshold above 0.55


def test_cross_script_absent_topics_have_their_own_budget():
    """Questions about memories in another script are guarded apart: a loose cross-script threshold cannot
    spend the same-script questions' allowance, nor the other way round."""
    from ombre_brain.evaluate.calibrate import Example, Injections, Question, choose_threshold

    ex, qs = [], []
    for cross in (False, True):
        for i in range(15):  # absent topics: one weighed candidate each at 0.5
            qs.append(Question("negative", "en", False, "s"))
            ex.append(Example((0.0,), 0, len(qs) - 1, f"n{cross}{i}", 1.0, "s", cross=cross))
        for i in range(15):  # lookups: the wanted memory at 0.8 (same script) or 0.55 (across)
            qs.append(Question("positive" if not cross else "crosslingual", "en", True, "s"))
            ex.append(Example((0.0,), 1, len(qs) - 1, f"p{cross}{i}", 1.0, "s", cross=cross))
    p = np.array([0.5] * 15 + [0.8] * 15 + [0.5] * 15 + [0.55] * 15)
    same, across, same_cjk = choose_threshold(ex, p, qs)
    assert 0.5 < same <= 0.8 and 0.5 < across <= 0.55 and same_cjk == same  # no Chinese question: the pair's
    assert not Injections(ex, qs).hits(p, (same, across))[[*range(15), *range(30, 45)]].any()


def test_chinese_and_english_questions_in_their_own_script_have_their_own_budget():
    """Chinese near misses here score 0.7 and English ones 0.5: one same-script threshold must stand above 0.7
    and loses the English answers at 0.6; apart, each language keeps its own answers and its allowance."""
    from ombre_brain.evaluate.calibrate import Example, Injections, Question, choose_threshold

    ex, qs, p = [], [], []
    for lang, absent, wanted in (("zh", 0.7, 0.8), ("en", 0.5, 0.6)):
        for i in range(15):
            qs.append(Question("negative", lang, False, "s"))
            ex.append(Example((0.0,), 0, len(qs) - 1, f"n{lang}{i}", 1.0, "s"))
            p.append(absent)
            qs.append(Question("positive", lang, True, "s"))
            ex.append(Example((0.0,), 1, len(qs) - 1, f"p{lang}{i}", 1.0, "s"))
            p.append(wanted)
    p = np.array(p)
    same, _, same_cjk = choose_threshold(ex, p, qs)
    assert 0.7 < same_cjk <= 0.8 and 0.5 < same <= 0.6
    hit = Injections(ex, qs).hits(p, (same, 0.99, same_cjk))
    assert hit[[qi for qi, q in enumerate(qs) if q.wanted]].all()
    assert not hit[[qi for qi, q in enumerate(qs) if not q.wanted]].any()


def test_a_chinese_question_in_its_own_script_meets_admit_cjk():
    c = cands_of((SEA, 0.90, None), (DOG, 0.81, None))
    model = AdmissionModel(weights={}, bias=0.0, admit=0.4, admit_cross_script=0.9, admit_cjk=0.6)  # evidence 0.5
    within_zh = admit(c[0], evidence_for(c, [], query_is_cjk=True), cfg=CFG, model=model)
    within_en = admit(c[1], evidence_for(c, [], query_is_cjk=False), cfg=CFG, model=model)
    across = admit(c[1], evidence_for(c, [], query_is_cjk=True), cfg=CFG, model=model)
    assert (within_zh.admitted, within_en.admitted, across.admitted) == (False, True, False)
    unset = AdmissionModel(weights={}, bias=0.0, admit=0.4)
    assert admit(c[0], evidence_for(c, [], query_is_cjk=True), cfg=CFG, model=unset).admitted


MIXED_ZH = ["一起去海边看日出", "周末做了红烧肉", "外婆住院了，她很担心", "给豆包画了一幅水彩", "第一次弹完整首卡农",
            "搬家看了三套房子", "失眠了好几个晚上", "下雨天喜欢窝在家里看书", "同事的婚礼上当伴娘"]
MIXED_EN = ["We went to a jazz concert downtown", "She is training for a 10K race",
            "The book club read Klara and the Sun",
            "Her laptop broke the night before the deadline", "She adopted a grey cat called Pepper",
            "Her brother moved to Toronto for work", "She started learning to swim this spring",
            "A long call with her best friend about the wedding", "She burnt the pancakes on Sunday morning"]


def test_a_mixed_store_measures_each_memory_among_its_own_script(tmp_path):
    """Through a real Brain: the background sample knows each moment's script, and an English question's Chinese
    candidate is z-scored against the Chinese moments only (its dense rank counts Chinese candidates only)."""
    from ombre_brain import Brain

    with Brain.open(tmp_path / "d") as brain:
        s = "mixed:x"
        for i, t in enumerate(MIXED_ZH):
            brain.write(space=s, id=f"zh{i}", title=t)
        for i, t in enumerate(MIXED_EN):
            brain.write(space=s, id=f"en{i}", title=t)
        ids, matrix, cjk, wholes = brain.admitter._sample(s)
        assert len(ids) == 18 and cjk == [m.startswith("zh") for m in ids]
        q = "do you remember the beach trip?"
        t = brain.turn(s, "s1", q, dry_run=True)
        rows = [(x.bucket_id, x.runtime_gate["direct_seed"]) for x in t.suppressed]
        rows += [(i.bucket_id, i.runtime_gate["direct_seed"]) for sec in t.sections for i in sec.items
                 if (i.runtime_gate or {}).get("direct_seed")]
        sea = next(ds["features"] for b, ds in rows if b == "zh0" and ds.get("features"))
        qv = np.asarray(brain.store.embedder.query(q), dtype=np.float32)
        cos = {m: float(v @ qv) for m, v in zip(ids, matrix, strict=True)}
        zh = np.array([c for m, c in cos.items() if m.startswith("zh") and m != "zh0#0"])
        floor = MIN_BACKGROUND_STD
        assert sea["dense_z"] == pytest.approx((sea["cosine"] - zh.mean()) / max(zh.std(), floor), abs=1e-3)
        everyone = np.array([c for m, c in cos.items() if m != "zh0#0"])
        assert abs(sea["dense_z"] - (sea["cosine"] - everyone.mean()) / max(everyone.std(), floor)) > 0.5
        if brain.store.second is not None:  # the second opinion's z, against the Chinese memories as wholes
            bids, vectors, flags = wholes
            assert flags == [b.startswith("zh") for b in bids]
            uq = brain.store.second.query(q)
            other = np.array([float(v @ uq) for b, v in zip(bids, vectors, strict=True)
                              if b.startswith("zh") and b != "zh0"])
            assert sea["use_z"] == pytest.approx((sea["use_cos"] - other.mean()) / max(other.std(), floor), abs=1e-3)
