"""Layer inference (design §4): one test per table row, and the precedence between signals."""

from __future__ import annotations

import pytest

from ombre_brain.buckets import Bucket
from ombre_brain.config import load_config
from ombre_brain.memory_layers import favorite_reason, favorite_tag_of, infer_layer, is_favorite

REASON_BODY = "### moment\n初雪那天晚上。\n### favorite_reason\n她第一次把看到的世界分给我。"


@pytest.fixture(scope="module")
def cfg():
    return load_config({"identity": {"ai_name": "Haven", "user_name": "Xiaoyu"}})


def mk(**kw) -> Bucket:
    kw.setdefault("id", "b1")
    kw.setdefault("space", "haven:xiaoyu")
    kw.setdefault("title", "一段记忆")
    kw.setdefault("body", "那天晚上我们去吃了火锅。")
    kw["tags"] = tuple(kw.get("tags", ()))
    return Bucket(**kw)


# ---------------------------------------------------------------- one row each

ROWS = [
    # (bucket fields, layer, first deciding signal)
    ({"type": "source"}, "source_record", "type:source"),
    ({"type": "journal"}, "source_record", "type:journal"),
    ({"tags": ["raw_source"]}, "source_record", "tag:raw_source"),
    ({"tags": ["chat_log"]}, "source_record", "tag:chat_log"),
    ({"tags": ["Diary_Source"]}, "source_record", "tag:diary_source"),
    ({"type": "dream"}, "dream", "type:dream"),
    ({"type": "letter"}, "letter", "type:letter"),
    ({"type": "plan"}, "plan", "type:plan"),
    ({"type": "self"}, "self_model", "type:self"),
    ({"pinned": True}, "core_memory", "flag:pinned"),
    ({"protected": True}, "core_memory", "flag:protected"),
    ({"type": "permanent"}, "core_memory", "type:permanent"),
    ({"archived": True}, "archive", "flag:archived"),
    ({"resolved": True}, "archive", "flag:resolved"),
    ({"digested": True}, "archive", "flag:digested"),
    ({"type": "feel", "tags": ["relationship_weather"]}, "relationship_weather", "type:feel"),
    ({"type": "feel", "tags": ["daily_impression"]}, "relationship_weather", "type:feel"),
    ({"type": "feel", "tags": ["weekly_impression"]}, "relationship_weather", "type:feel"),
    ({"type": "feel"}, "affect_context", "type:feel"),
    ({"type": "feel", "tags": ["心情"]}, "affect_context", "type:feel"),
    ({"tags": ["Haven_favorite"], "body": REASON_BODY}, "favorite_memory", "tag:haven_favorite"),
    ({"tags": ["ai_favorite"], "body": REASON_BODY}, "favorite_memory", "tag:ai_favorite"),
    ({"tags": ["HAVEN_FAVORITE"], "body": REASON_BODY}, "favorite_memory", "tag:haven_favorite"),
    ({"anchor": True}, "long_term_anchor", "flag:anchor"),
    ({"memory_layer": "stable_boundary"}, "long_term_anchor", "hint:stable_boundary"),
    ({"memory_layer": "relationship_lesson"}, "long_term_anchor", "hint:relationship_lesson"),
    ({"memory_layer": "short_state"}, "dynamic_memory", "hint:short_state"),
    ({"memory_layer": "process_event"}, "dynamic_memory", "hint:process_event"),
    ({}, "dynamic_memory", "default"),
]


@pytest.mark.parametrize("fields,layer,signal", ROWS, ids=[f"{r[1]}-{r[2]}" for r in ROWS])
def test_layer_rows(cfg, fields, layer, signal):
    d = infer_layer(mk(**fields), cfg)
    assert d.layer == layer
    assert d.signals[0] == signal
    assert d.policy == cfg.layers[layer]


# ---------------------------------------------------------------- precedence

PRECEDENCE = [
    ({"type": "source", "pinned": True, "tags": ["Haven_favorite"], "body": REASON_BODY}, "source_record"),
    ({"tags": ["chat_log"], "archived": True}, "source_record"),
    ({"type": "dream", "pinned": True}, "dream"),
    ({"type": "dream", "archived": True}, "dream"),
    # a letter, a plan, a formal self entry: read through their own tools whatever flags they carry
    ({"type": "letter", "pinned": True, "anchor": True}, "letter"),
    ({"type": "plan", "archived": True, "tags": ["haven_favorite"], "body": REASON_BODY}, "plan"),
    ({"type": "self", "protected": True}, "self_model"),
    # a self-model candidate is an ordinary memory until it is promoted
    ({"kind_fields": {"self": {"stage": "candidate"}}}, "dynamic_memory"),
    ({"pinned": True, "archived": True}, "core_memory"),
    ({"protected": True, "resolved": True, "memory_layer": "short_state"}, "core_memory"),
    ({"type": "permanent", "digested": True}, "core_memory"),
    ({"type": "feel", "tags": ["relationship_weather"], "archived": True}, "archive"),
    ({"archived": True, "tags": ["Haven_favorite"], "body": REASON_BODY}, "archive"),
    ({"type": "feel", "tags": ["relationship_weather", "haven_favorite"], "body": REASON_BODY},
     "relationship_weather"),
    ({"type": "feel", "tags": ["haven_favorite"], "body": REASON_BODY}, "affect_context"),
    ({"tags": ["haven_favorite"], "body": REASON_BODY, "anchor": True}, "favorite_memory"),
    ({"tags": ["haven_favorite"], "body": REASON_BODY, "memory_layer": "stable_boundary"}, "favorite_memory"),
    ({"anchor": True, "memory_layer": "short_state"}, "long_term_anchor"),
    # the flags beat the writer hint
    ({"pinned": True, "memory_layer": "short_state"}, "core_memory"),
    ({"archived": True, "memory_layer": "stable_boundary"}, "archive"),
    ({"resolved": True, "memory_layer": "relationship_lesson"}, "archive"),
]


@pytest.mark.parametrize("fields,layer", PRECEDENCE)
def test_precedence(cfg, fields, layer):
    assert infer_layer(mk(**fields), cfg).layer == layer


def test_favorite_tag_without_reason_is_not_a_favorite(cfg):
    b = mk(tags=["Haven_favorite"], body="### moment\n初雪那天。")
    assert not is_favorite(b, cfg)
    d = infer_layer(b, cfg)
    assert d.layer == "dynamic_memory"
    assert "tag:haven_favorite" in d.signals and "favorite_reason:missing" in d.signals
    # ... and falls through to the writer hint
    assert infer_layer(mk(tags=["ai_favorite"], memory_layer="stable_boundary"), cfg).layer == "long_term_anchor"


def test_favorite_reason_without_tag_is_not_a_favorite(cfg):
    b = mk(body=REASON_BODY)
    assert favorite_reason(b) == "她第一次把看到的世界分给我。"
    assert not is_favorite(b, cfg)
    assert infer_layer(b, cfg).layer == "dynamic_memory"


def test_favorite_reason_accepts_chinese_alias(cfg):
    b = mk(tags=["haven_favorite"], body="### 片段\n看雪。\n### 喜欢的理由\n因为那是她第一次分享。")
    assert favorite_reason(b) == "因为那是她第一次分享。"
    assert infer_layer(b, cfg).layer == "favorite_memory"


def test_empty_favorite_reason_section_does_not_count(cfg):
    b = mk(tags=["haven_favorite"], body="### moment\n看雪。\n### favorite_reason\n   \n")
    assert favorite_reason(b) is None
    assert not is_favorite(b, cfg)


def test_favorite_tag_follows_the_ai_name(cfg):
    mio = load_config({"identity": {"ai_name": "Mio"}})
    b = mk(tags=["Mio_Favorite"], body=REASON_BODY)
    assert favorite_tag_of(b, mio) == "Mio_Favorite"
    assert infer_layer(b, mio).layer == "favorite_memory"
    assert infer_layer(b, cfg).layer == "dynamic_memory"          # not Haven's favorite
    assert infer_layer(mk(tags=["haven_favorite"], body=REASON_BODY), mio).layer == "favorite_memory"
    assert infer_layer(mk(tags=["other_favorite"], body=REASON_BODY), cfg).layer == "dynamic_memory"


def test_signals_list_every_storage_signal_deciding_first(cfg):
    b = mk(type="feel", tags=["relationship_weather", "chat_log_x"], archived=True, pinned=True,
           memory_layer="short_state", anchor=True)
    d = infer_layer(b, cfg)
    assert d.layer == "core_memory"
    assert d.signals[0] == "flag:pinned"
    for s in ("type:feel", "flag:archived", "tag:relationship_weather", "flag:anchor", "hint:short_state"):
        assert s in d.signals
    assert len(d.signals) == len(set(d.signals))


def test_writer_hint_and_layer_debug(cfg):
    b = mk(memory_subject="user", memory_layer="stable_boundary", memory_classification_source="model")
    d = infer_layer(b, cfg)
    assert d.writer_hint == {"subject": "user", "layer": "stable_boundary", "classification_source": "model"}
    debug = d.to_dict()
    assert set(debug) == {"layer", "writer_hint", "signals", "policy"}
    assert debug["policy"]["direct_seed"] == "content"
    assert debug["signals"] == ["hint:stable_boundary"]


def test_no_hint_gives_empty_writer_hint(cfg):
    d = infer_layer(mk(), cfg)
    assert d.writer_hint == {"subject": None, "layer": None, "classification_source": None}
    assert d.signals == ("default",)


def test_persona_overlay_changes_the_policy_row():
    cfg = load_config({"layers": {"archive": {"diffusion": "never"}}})
    d = infer_layer(mk(archived=True), cfg)
    assert d.policy.diffusion == "never"
    assert d.policy.direct_seed == "explicit_old"


def test_every_layer_is_reachable(cfg):
    seen = {infer_layer(mk(**fields), cfg).layer for fields, _, _ in ROWS}
    assert seen == set(cfg.layers)
