"""Conversation-aware recall (design §14): context in everywhere, planning and retrieval that hear it."""

from __future__ import annotations

import httpx
import pytest

from ombre_brain import Brain, ValidationError
from ombre_brain.config import load_config
from ombre_brain.recall_policy import RecallPolicy
from ombre_brain.turn.conversation import Message, normalize_context, split_messages

from .conftest import LiveServer, StandInUpstream

CFG = load_config()
SPACE = "haven:xiaoyu"
WEDDING = [{"role": "user", "content": "阿宁下个月就要结婚了，我是她的伴娘"},
           {"role": "assistant", "content": "哇，恭喜阿宁！你准备好了吗？"}]
THAT_NIGHT = "我特别期待那天晚上，我想让它变得很特别！"


# ---------------------------------------------------------------- normalising what clients send


def test_context_keeps_the_last_messages_and_characters_and_ignores_system():
    raw = [{"role": "system", "content": "You are Haven."}] + [
        {"role": "user" if i % 2 else "assistant", "content": f"message {i} " + "x" * 100} for i in range(20)]
    got = normalize_context(raw, max_messages=6, max_chars=300)
    assert all(isinstance(m, Message) and m.role in ("user", "assistant") for m in got)
    assert got[-1].content.startswith("message 19") and sum(len(m.content) for m in got) <= 300
    parts = normalize_context([{"role": "user", "content": [{"type": "text", "text": "看图"}, {"type": "image_url"}]}],
                              max_messages=6, max_chars=300)
    assert parts == (Message("user", "看图"),)


@pytest.mark.parametrize("raw, field", [
    ("hello", "context"),
    ([{"role": "narrator", "content": "x"}], "context[0].role"),
    ([{"role": "user", "content": 5}], "context[0].content"),
    ([{"role": "user", "content": "x" * 9000}], "context[0].content"),
    (["just a string"], "context[0]"),
])
def test_bad_context_names_what_is_wrong(raw, field):
    with pytest.raises(ValidationError) as exc:
        normalize_context(raw, max_messages=6, max_chars=3000)
    assert exc.value.field == field


def test_messages_alone_make_the_last_user_message_the_query():
    q, ctx = split_messages([*WEDDING, {"role": "user", "content": THAT_NIGHT}, {"role": "assistant", "content": "!"}])
    assert q == THAT_NIGHT and len(ctx) == 2
    with pytest.raises(ValidationError):
        split_messages([{"role": "assistant", "content": "hi"}])


# ---------------------------------------------------------------- planning


def _plan(query, context=()):
    return RecallPolicy(CFG).plan_query(query, tuple(Message(**m) for m in context) or None)


def test_a_lookup_begun_a_message_ago_still_counts():
    ctx = [{"role": "user", "content": "你还记得我们去海边看日出那次吗"}, {"role": "assistant", "content": "记得呀"}]
    alone, heard = _plan("那天风特别大对吧"), _plan("那天风特别大对吧", ctx)
    assert alone.context_mode != "memory_lookup"
    assert heard.context_mode == "memory_lookup" and heard.carried == "memory_lookup"
    assert any(t == "海边" for t, _ in heard.context_terms)


def test_pointing_back_weighs_the_topic_more():
    plain = _plan("我有点紧张", WEDDING)
    pointing = _plan(THAT_NIGHT, WEDDING)
    assert pointing.anaphoric and not plain.anaphoric
    assert pointing.topic[-1][1] > plain.topic[-1][1]


def test_tone_only_and_filler_never_recall_whatever_came_before():
    for msg in ("哈哈哈", "抱抱", "嗯"):
        plan = _plan(msg, WEDDING)
        assert plan.skip_reason in ("tone_only", "skip_only") and not plan.context_terms


def test_a_vague_lookup_takes_its_topic_from_the_conversation():
    ctx = [{"role": "user", "content": "去年冬天我们一起看了初雪"}]
    assert _plan("还记得吗").skip_reason == "vague"
    assert _plan("还记得吗", ctx).skip_reason is None


# ---------------------------------------------------------------- through the proxy


@pytest.fixture(scope="module")
def demo_proxy(demo_brain):
    upstream = StandInUpstream()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("STANDIN_API_KEY", "k")
        brain = Brain.open(demo_brain.path, demo_brain.config.raw | {"upstream": {
            "base_url": upstream.url, "api_key_env": "STANDIN_API_KEY", "timeout_s": 5, "retries": 1}})
        server = LiveServer(brain)
        yield upstream, httpx.Client(base_url=server.url, timeout=30)
        server.close()
        brain.close()
    upstream.close()


def _memory_block(upstream) -> str:
    sent = upstream.requests[-1]["body"]["messages"]
    return "\n".join(m["content"] for m in sent if m["role"] == "system" and "## " in m["content"])


def test_the_proxy_hears_the_conversation(demo_proxy):
    """The last message only makes sense with the first two: with them it injects the wedding; alone it does not."""
    upstream, client = demo_proxy
    upstream.reset()
    r = client.post("/v1/chat/completions", headers={"X-Ombre-Space": SPACE, "X-Ombre-Session-Id": "conv-1"},
                    json={"model": "m", "messages": [*WEDDING, {"role": "user", "content": THAT_NIGHT}]})
    assert r.status_code == 200, r.text
    assert "阿宁" in _memory_block(upstream)
    r = client.post("/v1/chat/completions", headers={"X-Ombre-Space": SPACE, "X-Ombre-Session-Id": "conv-2"},
                    json={"model": "m", "messages": [{"role": "user", "content": THAT_NIGHT}]})
    assert r.status_code == 200
    assert "阿宁" not in _memory_block(upstream)


def test_inject_takes_messages_beside_or_instead_of_query(demo_proxy):
    _upstream, client = demo_proxy
    body = {"space": SPACE, "session_id": "conv-3", "messages": [*WEDDING, {"role": "user", "content": THAT_NIGHT}]}
    turn = client.post("/v1/inject", json=body).json()
    assert turn["query"] == THAT_NIGHT
    assert {"friend_wedding", "bridesmaid_speech"} & {i["bucket_id"] for s in turn["sections"] for i in s["items"]
                                                     if s["key"] in ("recalled_memory", "diffused_memory")}
    bad = client.post("/v1/inject", json={"space": SPACE, "messages": [{"role": "user", "content": 3}]})
    assert bad.status_code == 400 and "messages[0].content" in bad.json()["error"]["message"]
