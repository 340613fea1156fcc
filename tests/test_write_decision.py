"""The learned write decision through real ingestion (`Brain.ingest_exchange`, the proxy's queue): what a user
expects to be remembered is, in their words and on the right layer; questions, greetings and "别记这个" are not.

The messages quoted in issue 29's "Why" are test cases here; they are in no training file.
"""

from __future__ import annotations

import logging
import threading
import time

import httpx
import numpy as np
import pytest

from ombre_brain import Brain
from ombre_brain.buckets import build_moments
from ombre_brain.errors import ConfigError
from ombre_brain.writing.model import WriteModel, load_model
from ombre_brain.writing.signals import SIGNAL_NAMES, introduces_name

from .conftest import LiveServer, StandInUpstream

SPACE = "haven:xiaoyu"
NOW = "2026-10-01T20:00:00+08:00"


@pytest.fixture(scope="module")
def wbrain(tmp_path_factory):
    """One Brain for the module; each test uses spaces of its own."""
    with Brain.open(tmp_path_factory.mktemp("write") / "data") as b:
        yield b


def ingest(brain, space: str, text: str, *, history: list | None = None, reply: str = "嗯嗯，我在听。",
           session: str = "s1", now: str = NOW) -> list:
    ids = brain.ingest_exchange(space, session, [*(history or []), {"role": "user", "content": text}], reply, now=now)
    return [brain.get(space, i) for i in ids]


@pytest.mark.parametrize("text, layer", [
    ("我养了一只猫，叫豆包，三岁了", "stable_boundary"),     # an identity fact without a cue word
    ("我最喜欢的电影是千与千寻", "stable_boundary"),
    ("我跟男朋友分手了", "process_event"),                   # a relationship event
    ("我妈妈下个月要做手术，我有点担心", "process_event"),    # an event in the life of someone the user cares about
    ("My sister just got into Stanford!", "process_event"),
    ("We fought a few days ago, then made up", "process_event"),
])
def test_what_a_user_expects_kept_is_kept_in_their_words(wbrain, text, layer):
    space = f"haven:why{abs(hash(text)) % 10**6}"
    (b,) = ingest(wbrain, space, text, reply="嗯，我记下了。")
    assert b.memory_layer == layer
    assert b.body == text and b.origin == "user" and b.basis == "stated"
    assert b.memory_classification_source == "model"
    assert b.created.startswith("2026-10-01T20:00:00")
    (source,) = wbrain.sources(space, b.id)
    assert source.startswith("exchange:")


def test_a_stated_time_and_the_feeling_go_with_the_memory(wbrain):
    (b,) = ingest(wbrain, "haven:when", "我妈妈下个月要做手术，我有点担心")
    assert b.event_time.startswith("2026-11-01")
    assert b.valence < 0.5 and b.arousal > 0.5
    (b,) = ingest(wbrain, "haven:when", "My sister just got into Stanford!")
    assert b.valence > 0.6 and b.event_time is None


@pytest.mark.parametrize("text", [
    "我最喜欢的颜色是蓝色", "我对花生过敏", "我有个妹妹叫小雨", "我最喜欢的电影是千与千寻", "我喜欢周杰伦",
    "我是独生子",
    "my favorite color is blue", "I'm allergic to shellfish", "I have a brother named Tom", "I play the cello",
])
def test_a_one_sentence_fact_is_a_stable_boundary(wbrain, text):
    """A lived-in model first learned that short messages are mostly chat ("ok bye", "ugh"): it lost "我对花生过敏" and
    every favourite. One plain sentence about who the user is must be kept, however short."""
    got = ingest(wbrain, f"haven:plain{abs(hash(text)) % 10**6}", text, reply="嗯嗯，记住啦")
    assert [(b.memory_subject, b.memory_layer) for b in got] == [("user", "stable_boundary")]


@pytest.mark.parametrize("text", [
    "今天吃了什么呀", "我们什么时候一起去旅行呀", "还记得我们去海边那次吗", "你最喜欢什么颜色？",
    "what did I tell you about my job?", "早安", "谢谢你～", "哈哈哈哈好的", "如果我明天不去上班会怎样哈哈",
    "帮我写首关于秋天的小诗", "good night!",
])
def test_questions_greetings_and_chat_noise_write_nothing(wbrain, text):
    space = "haven:noise"
    assert ingest(wbrain, space, text, reply="嗯嗯～") == []


def test_what_the_companion_says_about_itself_is_never_a_user_fact(wbrain):
    assert ingest(wbrain, "haven:self", "你刚才说你也喜欢下雨天？", reply="对呀，我最喜欢下雨天窝着聊天。") == []


def test_dont_remember_that_forgets_the_exchange_before_it(wbrain):
    space = "haven:dontkeep"
    (kept,) = ingest(wbrain, space, "我养了一只柯基，叫元宝", session="a", reply="元宝！好可爱的名字。")
    first = [{"role": "user", "content": "我最近在偷偷准备考研，谁都没告诉"}]
    (secret,) = ingest(wbrain, space, first[0]["content"], session="b", reply="我替你保密，加油！")
    history = [*first, {"role": "assistant", "content": "我替你保密，加油！"}]
    assert ingest(wbrain, space, "别记这个", history=history, session="b", reply="好，那段我不记。") == []
    assert wbrain.get(space, secret.id) is None and wbrain.get(space, kept.id) is not None
    job = next(j for j in wbrain.gateway.jobs.list(("done",)) if j["space"] == space
               and (j["result"] or {}).get("forgot"))
    assert job["result"]["forgot"]["source"].startswith("exchange:") and job["result"]["forgot"]["purge_id"]
    assert job["result"]["decision"]["reason"] == "dont_keep_previous"


def test_dont_save_this_keeps_nothing_of_itself_and_forgets_nothing_else(wbrain):
    space = "haven:dontsave"
    (kept,) = ingest(wbrain, space, "I'm a nurse in Leeds, mostly night shifts", reply="Night shifts are hard.")
    history = [{"role": "user", "content": "I'm a nurse in Leeds, mostly night shifts"},
               {"role": "assistant", "content": "Night shifts are hard."}]
    assert ingest(wbrain, space, "don't save this but i kinda have a crush on my coworker", history=history,
                  reply="My lips are sealed.") == []
    assert wbrain.get(space, kept.id) is not None


def test_a_short_answer_to_the_companions_question_is_kept_with_the_question(wbrain):
    history = [{"role": "user", "content": "我今天刚搬完家"},
               {"role": "assistant", "content": "辛苦啦！搬到哪个城市了呀？"}]
    (b,) = ingest(wbrain, "haven:answer", "成都，离我爸妈近一点", history=history, reply="成都好呀，吃的多。")
    assert b.body.startswith("成都，离我爸妈近一点") and "### context\n搬到哪个城市了呀？" in b.body
    assert "辛苦啦" not in b.body  # only the question: the rest of the companion's message is not the user's memory
    assert b.title == "成都" and b.main_text == "成都，离我爸妈近一点"  # the question never proves a hit (issue 53)
    assert [m.context_only for m in build_moments(b) if m.section == "context"] == [True]


def test_a_lesson_and_a_fact_in_one_message_are_two_memories(wbrain):
    space = "haven:twosides"
    got = ingest(wbrain, space, "我不吃香菜。以后你推荐菜的时候别给我推带香菜的", reply="好，记住了。")
    by_layer = {b.memory_layer: b for b in got}
    assert set(by_layer) == {"stable_boundary", "relationship_lesson"}
    assert by_layer["relationship_lesson"].memory_subject == "relationship"
    assert by_layer["stable_boundary"].body == "我不吃香菜。"  # the sentences split cleanly: each side its own
    assert by_layer["relationship_lesson"].body == "以后你推荐菜的时候别给我推带香菜的"


def test_a_repeat_joins_the_stored_memory_and_forgetting_it_releases_only_its_claim(wbrain):
    space = "haven:repeat"
    (first,) = ingest(wbrain, space, "我对芒果过敏，吃了会起疹子", session="a")
    (again,) = ingest(wbrain, space, "我对芒果过敏，吃了会起疹子！", session="b")
    assert again.id == first.id and again.body == first.body  # joined: no copy, the stored words stay
    sources = wbrain.sources(space, first.id)
    assert len(sources) == 2 and all(s.startswith("exchange:") for s in sources)
    receipt = wbrain.purge(space, source=sources[1])
    assert receipt["payload"]["released"] == [first.id]
    assert wbrain.get(space, first.id) is not None and wbrain.sources(space, first.id) == [sources[0]]
    wbrain.purge(space, source=sources[0])
    assert wbrain.get(space, first.id) is None


def test_an_update_is_its_own_memory_linked_to_the_old_one_and_forgetting_it_leaves_the_old(wbrain):
    space = "haven:update"
    (old,) = ingest(wbrain, space, "我每天早上跑步五公里", session="a")
    (new,) = ingest(wbrain, space, "我现在每天早上跑步十公里", session="b", now="2026-11-01T08:00:00+08:00")
    assert new.id != old.id and new.body == "我现在每天早上跑步十公里"
    edges = wbrain.edges(space, [new.id])
    assert [(e.from_id, e.to_id, e.relation) for e in edges] == [(new.id, old.id, "old_version")]
    (source,) = wbrain.sources(space, new.id)
    wbrain.purge(space, source=source)
    assert wbrain.get(space, new.id) is None and wbrain.get(space, old.id) is not None
    assert wbrain.edges(space, [old.id]) == []


def test_a_model_fitted_on_another_embedder_falls_back_to_the_rule_writer_with_one_warning(tmp_path, caplog):
    d = len(SIGNAL_NAMES) + 384
    WriteModel("elsewhere", ("e5", "signals"), {"e5": "sentence-transformers:some-other-model"}, SIGNAL_NAMES,
               np.zeros((4, d)), np.zeros(4), np.zeros(d), 0.0).save(tmp_path / "models")
    cfg = {"writer": {"model": {"id": "elsewhere", "path": str(tmp_path / "models")}}}
    with Brain.open(tmp_path / "data", cfg) as b, caplog.at_level(logging.WARNING, logger="ombre_brain"):
        for i in range(3):
            b.ingest_exchange(SPACE, f"s{i}", [{"role": "user", "content": f"今天头好疼，什么都不想做{i}"}], "抱抱")
        (job, *_) = b.gateway.jobs.list(("done",))
        assert job["result"]["extractor"] == "rule"
        assert [b.get(SPACE, i).memory_classification_source for i in job["result"]["bucket_ids"]] == ["rule"]
    warned = [r for r in caplog.records if "cannot run here" in r.getMessage()]
    assert len(warned) == 1 and "sentence-transformers:some-other-model" in warned[0].getMessage()


def test_a_perceptron_user_side_round_trips_and_a_malformed_one_is_named(tmp_path):
    """The shipped user side is an ensemble of perceptrons stored as arrays: what is saved predicts the same once
    loaded, and arrays that do not fit the vector are a config error naming the model, never a crash later."""
    rng = np.random.default_rng(3)
    d, h = 12, 5
    mlp = {"mean": rng.normal(size=d), "scale": np.ones(d), "w1": rng.normal(size=(2, d, h)),
           "b1": rng.normal(size=(2, h)), "w2": rng.normal(size=(2, h, 4)), "b2": rng.normal(size=(2, 4))}
    m = WriteModel("mlp-t", ("signals",), {}, SIGNAL_NAMES[:d], np.zeros((4, d)), np.zeros(4), rng.normal(size=d), 0.1,
                   {}, mlp)
    m.save(tmp_path)
    x = rng.normal(size=(7, d))
    got, want = load_model("mlp-t", tmp_path).predict(x), m.predict(x)
    np.testing.assert_allclose(got[0], want[0], atol=1e-4)
    np.testing.assert_allclose(got[0].sum(axis=1), 1.0, atol=1e-9)
    assert np.ptp(got[0][:, 0]) > 0.01  # it reads its input
    bad = dict(mlp, w1=rng.normal(size=(2, d + 1, h)))
    WriteModel("mlp-bad", ("signals",), {}, SIGNAL_NAMES[:d], np.zeros((4, d)), np.zeros(4), np.zeros(d), 0.0, {},
               bad).save(tmp_path)
    with pytest.raises(ConfigError, match="mlp-bad.*perceptrons"):
        load_model("mlp-bad", tmp_path)


def test_the_proxy_remembers_the_statements_not_the_question_and_decides_on_the_worker(tmp_path):
    upstream = StandInUpstream()
    brain = Brain.open(tmp_path / "data", {"server": {"default_space": SPACE},
                                          "upstream": {"base_url": upstream.url, "timeout_s": 10, "retries": 0},
                                          "ingest": {"poll_s": 0.05}})
    threads: list[str] = []
    writer = brain.gateway.ingest.writer
    decide = writer.decide
    writer.decide = lambda ex: (threads.append(threading.current_thread().name), decide(ex))[1]
    brain.gateway.start_worker()
    server = LiveServer(brain)
    try:
        said = ["我在杭州做前端开发，天天加班", "我下周要去成都出差三天", "你还记得我在哪个城市工作吗？"]
        messages: list[dict] = []
        with httpx.Client(base_url=server.url, timeout=30) as client:
            for i, text in enumerate(said):
                upstream.reply = f"好的，第{i + 1}句我听到了。"
                messages = [*messages, {"role": "user", "content": text}]
                r = client.post("/v1/chat/completions", headers={"X-Ombre-Session-Id": "p1"},
                                json={"model": "m", "messages": messages})
                assert r.status_code == 200
                messages = [*messages, {"role": "assistant", "content": upstream.reply}]
        deadline = time.monotonic() + 60
        while len([j for j in brain.gateway.jobs.list(("done",)) if j["space"] == SPACE]) < 3:
            assert time.monotonic() < deadline, brain.gateway.jobs.list(("pending", "running", "failed", "dead"))
            time.sleep(0.05)
        kept = brain.list(SPACE, limit=100)
        assert sorted(b.body for b in kept) == sorted(said[:2])
        assert {b.memory_layer for b in kept} <= {"stable_boundary", "process_event", "short_state"}
        assert threads == ["ombre-ingest"] * 3  # decided on the ingestion worker, never in the proxied request
    finally:
        server.close()
        brain.close()
        upstream.close()


# ------------------------------------------------------------- what a companion hears over ten months (issue 54)

LIVED = [  # (message, the layer it is kept on, the title naming it); each alone in a fresh space
    ("救命，今天被主管Linda骂惨了，一个推文标题改了八遍她还说不行，我真不知道她到底要什么", "process_event",
     "今天被主管Linda骂惨了"),
    ("跟蔚蔚吵架了，她说我的猫砂带得满屋都是，我说你垃圾堆了一个星期怎么不说", "process_event", "跟蔚蔚吵架了"),
    ("潮州卤鹅我能一个人吃半只，以后谁请我吃卤鹅谁就是我恩人", "stable_boundary", "潮州卤鹅我能一个人吃半只"),
]


@pytest.mark.parametrize("text, layer, title", LIVED, ids=["boss", "flatmate", "food love"])
@pytest.mark.parametrize("reply", ["嗯嗯", "啊这……听起来你们俩都憋了挺久的，你现在还气吗？"], ids=["short", "question"])
def test_a_lived_in_message_is_kept_on_its_layer_titled_by_its_fact(wbrain, text, layer, title, reply):
    (b,) = ingest(wbrain, f"haven:lived{abs(hash((text, reply))) % 10**6}", text, reply=reply,
                  now="2026-11-30T20:05:00+08:00")
    assert (b.memory_layer, b.title) == (layer, title)  # never "救命" or the whole ramble
    assert b.body == text


def test_a_question_to_the_companion_without_a_question_mark_writes_nothing(wbrain):
    assert ingest(wbrain, "haven:lived-q", "十三岁换算成人大概多少岁啊", reply="大概相当于人类的六七十岁哦") == []


def test_an_aside_is_a_short_state_that_says_what_it_is_never_titled_by_its_reply_word(wbrain):
    got = ingest(wbrain, "haven:lived-aside", "行，吃药去了，明天还得早起", reply="好，早点休息")
    assert all(b.title != "行" for b in got)
    assert [(b.memory_layer, b.title) for b in got] in ([], [("short_state", "明天还得早起")],
                                                        [("short_state", "吃药去了")])


def test_a_request_to_recall_is_not_read_again_clause_by_clause(wbrain):
    """From the lived-in development set: what follows "…来着" is the question's colour, not a fact to keep (the
    clause look wrote "他今天又说了一遍" as an event)."""
    text = "我爸教了多少年书来着，他今天又说了一遍，我又没记住"
    assert ingest(wbrain, "haven:lived-laizhe", text, reply="嗯嗯") == []


@pytest.mark.parametrize("text", [
    "豆豆是哪天生日来着，医生问我我都答不上来", "我现在是一个人住对吧，小周妈妈问我是不是还跟人合租",
    "what's Delia's husband called again", "what was the name of the shelter i got her from",
    "where did i work before this job, Ines is asking about my career"])
def test_a_message_that_asks_to_be_reminded_keeps_nothing_of_its_colour(wbrain, text):
    """The clause beside the question says why the user asks (the doctor asked, Ines is asking): stored, it would be a
    memory of the question standing beside the fact it asks for."""
    assert ingest(wbrain, f"haven:recall{abs(hash(text)) % 10**6}", text, reply="嗯嗯") == []


@pytest.mark.parametrize("text", ["also got a chocolate lab named Moose who thinks he's a lapdog",
                                  "also got a golden retriever named Biscuit"])
def test_a_message_that_gives_a_name_keeps_what_it_names(wbrain, text):
    """The model alone kept nothing of the lab named Moose (it knew names from pets it had the words for)."""
    got = ingest(wbrain, f"haven:named{abs(hash(text)) % 10**6}", text, reply="Nice!")
    assert [(b.memory_layer, b.body) for b in got if b.memory_subject == "user"] == [("stable_boundary", text)]


@pytest.mark.parametrize("text, names", [
    ("a company called Halverson Maps", True), ("our team is called Ask Me Later", True), ("her name is Fennel", True),
    ("家里那只猫名字叫豆豆", True), ("I called Mom after work", False), ("she called me yesterday", False),
    ("they called Dad", False), ("他叫我去吃饭", False), ("so tired today", False),
])
def test_what_gives_a_name(text, names):
    assert introduces_name(text) is names
