"""Brain.turn end to end: the contract's "what this prevents" list, casual messages, one decision."""

from __future__ import annotations

import pytest

from ombre_brain import Brain

SPACE = "haven:xiaoyu"
NOW = "2026-11-30T20:00:00+08:00"

TONE_AND_FILLER = [
    "想你了，抱抱", "抱抱", "亲亲", "贴贴", "爱你", "哈哈哈哈哈", "呜呜呜", "嘿嘿", "想你", "么么哒", "好想你呀",
    "嗯嗯", "嗯", "哦", "好的", "好", "ok", "okay", "fine", "ping", "test", "hi", "hello", "在吗", "早", "早安",
    "晚安", "晚上好", "goodnight", "good morning", "miss you", "hugs", "love you", "lol", "haha", "hahaha",
    "love you lol", "miss you!!", "Hello?", "OK.", "谢谢", "收到", "好吧", "thanks mate", "hey Josh", "谢谢老公",
]


@pytest.fixture(scope="module")
def lived_in(tmp_path_factory):
    """A store full of words that casual messages also use."""
    b = Brain.open(tmp_path_factory.mktemp("turn") / "data", {"identity": {"ai_name": "Haven"}})
    rows = [
        ("想你的时候", "小雨出差那周每天晚上都说想你了，要抱抱，我们约好回来第一件事就是去吃冰淇淋。",
         ["想你", "抱抱"]),
        ("好的收到", "小雨回复工作群消息总是说好的收到，她说这样显得专业。",
         ["工作"]),
        ("早安习惯", "小雨每天早上七点说早安，然后去楼下买豆浆。", ["早安"]),
        ("晚安故事", "小雨睡前要我讲一个晚安故事，她最喜欢小熊的故事。", ["晚安"]),
        ("Hugs after work", "Xiaoyu said a hug after work is the best thing; she misses her friend Amy.", ["hugs"]),
        ("Love letters", "We joked about writing love you notes; lol she laughed at my handwriting.", ["love"]),
        ("哈哈大笑", "那天看喜剧电影，小雨哈哈大笑，笑到肚子疼。", ["电影"]),
        ("test day", "Xiaoyu had a driving test today and passed on the first try.", ["test"]),
        ("Hello Kitty", "Xiaoyu collects Hello Kitty keychains; she has twelve of them.", ["hello kitty"]),
        ("Josh and the bike", "Xiaoyu's mate Josh fixed her bike; she just calls him mate.", ["mate", "Josh"]),
        ("老公的红烧肉", "小雨说老公做的红烧肉最好吃。", ["老公"]),
    ]
    for title, body, tags in rows:
        b.write(space=SPACE, title=title, body=body, tags=tags, created="2026-11-20T20:00:00+08:00")
    yield b
    b.close()


@pytest.mark.parametrize("query", TONE_AND_FILLER)
def test_casual_messages_inject_no_long_term_memory(lived_in, query):
    turn = lived_in.turn(SPACE, session="casual", query=query, now=NOW, dry_run=True)
    assert turn.plan.skip_reason in ("tone_only", "skip_only", "empty", "vague"), turn.plan
    keys = {s.key for s in turn.sections}
    assert not keys & {"recalled_memory", "diffused_memory"}, (query, keys)
    assert "UNKNOWN" not in turn.rendered


def test_at_least_thirty_casual_examples():
    assert len(TONE_AND_FILLER) >= 30
    assert any(q.isascii() for q in TONE_AND_FILLER) and any(not q.isascii() for q in TONE_AND_FILLER)


def test_a_temporary_state_never_becomes_a_permanent_preference(brain):
    bid = brain.write(space=SPACE, title="今天不想吃辣", body="小雨今天胃不舒服，晚饭不想吃辣的。",
                      created="2026-11-30T12:00:00+08:00")
    b = brain.get(SPACE, bid)
    assert b.memory_layer == "short_state" and b.memory_classification_source == "rule"
    turn = brain.turn(SPACE, "s", "我晚饭吃什么好，辣的可以吗", now=NOW)
    for sec in turn.sections:
        for it in sec.items:
            if it.bucket_id == bid:
                assert it.layer == "dynamic_memory", "a short state must stay dynamic, never a long-term anchor"
    later = brain.turn(SPACE, "s2", "最近怎么样", now="2026-12-10T20:00:00+08:00")
    assert bid not in later.item_ids("recent_context"), "a short state expires from recent context"


def test_affect_anchor_is_never_keyword_bait(brain):
    bid = brain.write(space=SPACE, title="Walking in the rain",
                      body="### moment\nAfter work we walked in the rain and Xiaoyu tilted the umbrella toward me.\n"
                           "### affect_anchor\nThe taste of peppermint candy melting slowly.",
                      created="2026-11-25T20:00:00+08:00")
    turn = brain.turn(SPACE, "s", "I bought a bag of peppermint candy at the store", now=NOW)
    assert bid not in turn.item_ids()
    assert "peppermint" not in turn.rendered
    hit = brain.turn(SPACE, "s2", "do you remember when we walked in the rain with the umbrella", now=NOW)
    assert bid in hit.item_ids("recalled_memory")


def test_related_buckets_never_arrive_whole(brain):
    long_body = ("医生说它有点营养不良，要慢慢增加猫粮，还要按时驱虫。回家路上小雨一直抱着航空箱，小声跟它说话。"
                 "之后每天晚上都会给它称体重，记在手机备忘录里。")
    a = brain.write(space=SPACE, title="领养小猫年糕", body="小雨从救助站领养了一只橘猫，取名叫年糕。",
                    created="2026-11-01T20:00:00+08:00")
    v = brain.write(space=SPACE, title="第一次去宠物医院", body=long_body, created="2026-11-02T20:00:00+08:00")
    brain.link(SPACE, a, v, "same_event", 0.9)
    turn = brain.turn(SPACE, "s", "年糕刚来家里那天是什么样子", now=NOW)
    diffused = turn.section("diffused_memory")
    assert diffused is not None and [i.bucket_id for i in diffused.items] == [v]
    item = diffused.items[0]
    assert item.shape in ("summary", "chain_bundle")
    assert long_body not in item.text and len(item.text) <= brain.config.render.summary_chars
    assert long_body not in turn.rendered


def test_exact_intimate_wording_is_never_paraphrased(brain):
    words = "你不用每次都那么坚强，在我这里可以哭。小雨听完抱着我说：那你也要一直在。"
    bid = brain.write(space=SPACE, title="可以哭的地方", body=words, importance=9, created="2026-10-01T20:00:00+08:00")
    turn = brain.turn(SPACE, "s", "还记得你说我在你这里可以哭吗", now=NOW)
    item = next(i for s in turn.sections for i in s.items if i.bucket_id == bid)
    assert item.shape == "bucket_original" and item.text == words
    assert "> " + words in turn.rendered


def test_relationship_lessons_are_written_and_recalled_as_such(brain):
    bid = brain.write(space=SPACE, title="难过的时候",
                      body="小雨说下次她难过的时候，你别急着讲道理，先抱抱她，听她说完。",
                      created="2026-11-20T20:00:00+08:00")
    b = brain.get(SPACE, bid)
    assert (b.memory_subject, b.memory_layer) == ("relationship", "relationship_lesson")
    turn = brain.turn(SPACE, "s", "我难过的时候你应该怎么做，别讲道理", now=NOW)
    item = next(i for s in turn.sections for i in s.items if i.bucket_id == bid)
    assert item.layer == "long_term_anchor"
    assert item.layer_debug["writer_hint"]["subject"] == "relationship"
    assert item.layer_debug["writer_hint"]["layer"] == "relationship_lesson"


def test_debug_objects_and_injection_are_one_decision(brain):
    a = brain.write(space=SPACE, title="一起去看演唱会", body="去年夏天我们去看了五月天的演唱会，小雨跟着唱到嗓子哑。",
                    created="2026-06-01T20:00:00+08:00")
    turn = brain.turn(SPACE, "one", "还记得我们去看五月天演唱会吗", now=NOW)
    item = next(i for s in turn.sections for i in s.items if i.bucket_id == a)
    # explain() reads the turn's own objects: the very dicts that were injected
    assert turn.explain(a)["runtime_gate"] is item.runtime_gate
    assert turn.explain(a)["layer_debug"] is item.layer_debug
    # the recorded TURN is exactly what was returned, not a recomputation
    logged = brain.gateway.sessions.injections_log(SPACE, "one", 1)[0]
    returned = turn.to_dict()
    assert {k: logged[k] for k in returned} == returned
    # the next turn in the session keeps it out of Recalled Memory (a cooldown stops repeats) and says why; as the
    # conversation is still on it, it is carried in Recent Context, and explain() shows that very item's gate
    again = brain.turn(SPACE, "one", "五月天演唱会那天你还记得什么", now="2026-11-30T20:02:00+08:00")
    sup = next(s for s in again.suppressed if s.bucket_id == a)
    assert sup.reason == "skipped_recent_rounds" and a not in again.item_ids("recalled_memory")
    carried = next(i for s in again.sections for i in s.items if i.bucket_id == a)
    assert again.explain(a)["runtime_gate"] is carried.runtime_gate
    assert carried.runtime_gate["recent_context"]["reason"] == "carried_on_topic"
    # and once the conversation moves on, it is not carried
    moved = brain.turn(SPACE, "one", "今天午饭吃什么好", now="2026-11-30T20:03:00+08:00")
    assert a not in moved.item_ids()


def test_dry_run_writes_no_session_state(brain):
    brain.write(space=SPACE, title="一起去看演唱会", body="去年夏天我们去看了五月天的演唱会。")
    brain.turn(SPACE, "dry", "还记得我们去看五月天演唱会吗", now=NOW, dry_run=True)
    assert brain.gateway.sessions.injections_log(SPACE, "dry") == []
    assert brain.gateway.sessions.sessions(SPACE) == []


def test_turn_object_shape(brain):
    brain.write(space=SPACE, title="一起去看演唱会", body="去年夏天我们去看了五月天的演唱会。")
    d = brain.turn(SPACE, "s", "还记得我们去看五月天演唱会吗", now=NOW).to_dict()
    assert list(d["plan"]) == ["context_mode", "explicit_recent", "explicit_old", "just_now", "detail_request",
                               "favorite_request", "wants_body_chain", "enforce_topic_evidence",
                               "allow_caution_diffusion", "skip_reason", "terms"]
    for sec in (*d["stable"], *d["sections"]):
        assert set(sec) == {"key", "title", "items"}
        for it in sec["items"]:
            assert {"bucket_id", "moment_id", "shape", "text", "layer", "layer_debug", "runtime_gate"} <= set(it)
            if it["bucket_id"]:
                gates = it["runtime_gate"]
                assert {"direct_seed", "recall_context", "related_target", "recent_context", "anchor", "weather",
                        "topic_evidence", "cooldown", "profile", "decision", "section", "reason"} == set(gates)
                assert set(it["layer_debug"]) == {"layer", "writer_hint", "signals", "policy"}


def test_bad_turn_input_is_a_clear_error(brain):
    from ombre_brain import ValidationError

    with pytest.raises(ValidationError, match="space"):
        brain.turn("bad space!", "s", "hi")
    with pytest.raises(ValidationError, match="now"):
        brain.turn(SPACE, "s", "hi", now="yesterday")
    with pytest.raises(ValidationError, match="query"):
        brain.turn(SPACE, "s", 42)


def test_recent_context_names_only_the_window_memories_a_turn_is_about(brain):
    """The window's refusals are named in the TURN when the user asked for what is recent or the memory carries the
    turn's topic; a turn that is about neither names none of them (design §5.2), and shows the same sections."""
    work = brain.write(space=SPACE, title="今天加班", body="小雨今天加班到九点，说累得不想说话。",
                       created="2026-11-30T17:00:00+08:00")
    mood = brain.write(space=SPACE, title="这几天有点低落", type="feel", body="小雨这几天有点低落，说不上为什么。",
                       created="2026-11-30T16:00:00+08:00")
    asked = brain.turn(SPACE, "w", "最近怎么样", now=NOW)
    assert asked.plan.explicit_recent and work in asked.item_ids("recent_context")
    assert {s.bucket_id: s.reason for s in asked.suppressed}.get(mood) == "recent_dynamic_only"
    casual = brain.turn(SPACE, "w", "嗯嗯", now="2026-11-30T20:05:00+08:00")  # cooling, and about nothing
    assert not {work, mood} & {s.bucket_id for s in casual.suppressed}, casual.to_dict()["suppressed"]
    assert not {work, mood} & set(casual.item_ids())
    assert casual.explain(work) is None  # said nowhere: neither shown nor refused for this turn
