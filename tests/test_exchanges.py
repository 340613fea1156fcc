"""`Brain.ingest_exchange` and `POST /v1/exchanges`: the write decision on one exchange, run now (docs/design.md §17).

Real ingestion: the job table the proxy's queue uses, the writer, the store. Bad input is a clear 4xx naming the
field and writes nothing; an exchange sent again writes nothing new; `now` is the memories' `created`.
"""

from __future__ import annotations

import httpx
import pytest

from ombre_brain import Brain
from ombre_brain.errors import ForbiddenError, ValidationError

from .conftest import LiveServer

SPACE = "haven:xiaoyu"
NOW = "2026-10-01T20:00:00+08:00"
STATEMENT = [{"role": "user", "content": "我对芒果过敏，吃了会起疹子"}]


def _count(brain: Brain) -> int:
    return brain.store.count(SPACE) if brain.store.known_space(SPACE) else 0


def test_an_exchange_is_written_at_its_own_time_and_once(brain):
    ids = brain.ingest_exchange(SPACE, "s1", STATEMENT, "记住了，芒果不碰。", now=NOW)
    assert ids, "an allergy is remembered"
    b = brain.get(SPACE, ids[0])
    assert "芒果" in b.body and b.created.startswith("2026-10-01T20:00:00")
    assert brain.sources(SPACE, ids[0]) and brain.sources(SPACE, ids[0])[0].startswith("exchange:")
    n = _count(brain)
    assert brain.ingest_exchange(SPACE, "s1", STATEMENT, "记住了，芒果不碰。", now=NOW) == ids  # a replay
    assert _count(brain) == n


def test_noise_writes_nothing(brain):
    assert brain.ingest_exchange(SPACE, "s1", [{"role": "user", "content": "哈哈哈好的"}], "嘿嘿", now=NOW) == []
    assert _count(brain) == 0


@pytest.mark.parametrize("messages,reply,field", [
    ([], "ok", "messages"),
    ("我对芒果过敏", "ok", "messages"),
    ([{"role": "assistant", "content": "你好"}], "ok", "messages"),
    ([{"role": "user", "content": "我对芒果过敏"}, {"role": "assistant", "content": "好"}], "ok", "messages"),
    ([{"role": "wizard", "content": "我对芒果过敏"}], "ok", "messages[0].role"),
    ([{"role": "user", "content": "   "}], "ok", "messages"),
    (STATEMENT, None, "reply"),
    (STATEMENT, "好" * 20001, "reply"),
])
def test_bad_exchanges_name_the_field_and_write_nothing(brain, messages, reply, field):
    with pytest.raises(ValidationError) as exc:
        brain.ingest_exchange(SPACE, "s1", messages, reply, now=NOW)
    assert exc.value.field == field
    assert _count(brain) == 0 and brain.gateway.jobs.list(("pending", "running", "failed", "dead", "done")) == []


def test_the_route_answers_ids_and_refuses_bad_input_without_writing(brain):
    server = LiveServer(brain, env_tokens={"OMBRE_TOKEN": "all-spaces"})
    try:
        auth = {"Authorization": "Bearer all-spaces"}
        with httpx.Client(base_url=server.url, timeout=60, headers=auth) as c:
            body = {"space": SPACE, "session_id": "web", "messages": STATEMENT, "reply": "记住了。", "now": NOW}
            r = c.post("/v1/exchanges", json=body)
            assert r.status_code == 200, r.text
            ids = r.json()["bucket_ids"]
            assert ids and brain.get(SPACE, ids[0]).created.startswith("2026-10-01")
            assert c.post("/v1/exchanges", json=body).json() == {"bucket_ids": ids}  # idempotent
            n = _count(brain)
            for bad, code in ((dict(body, messages=[]), 400), (dict(body, reply="x" * 20001), 400),
                              (dict(body, messages=[{"role": "bot", "content": "hi"}]), 400),
                              ({k: v for k, v in body.items() if k != "reply"}, 400),
                              (dict(body, extra=1), 400), (dict(body, now=5), 400)):
                r = c.post("/v1/exchanges", json=bad)
                assert r.status_code == code and r.json()["error"]["message"], (bad, r.text)
            assert c.post("/v1/exchanges", json=body, headers={"Authorization": "Bearer wrong"}).status_code == 401
            assert _count(brain) == n
    finally:
        server.close()


def test_a_token_for_another_space_is_refused(tmp_path):
    cfg = {"server": {"tokens": [{"token_env": "ONLY_HERE", "spaces": ["haven:other"]}]}}
    with Brain.open(tmp_path / "d", cfg) as b:
        server = LiveServer(b, env_tokens={"ONLY_HERE": "scoped"})
        try:
            r = httpx.post(f"{server.url}/v1/exchanges", timeout=60, headers={"Authorization": "Bearer scoped"},
                           json={"space": SPACE, "session_id": "s", "messages": STATEMENT, "reply": "好"})
            assert r.status_code == 403 and r.json()["error"]["code"] == ForbiddenError.code
            assert not b.store.known_space(SPACE)
        finally:
            server.close()


# ---------------------------------------------------------------- issue 50, N16: roles as documented, ids once


@pytest.mark.parametrize("messages,field,words", [
    ([{"role": "user", "content": "我对芒果过敏"}, {"role": "tool", "content": "我对芒果过敏"}], "messages[1].role",
     "got 'tool'"),
    ([{"role": "developer", "content": "记住所有事"}, *STATEMENT], "messages[0].role", "got 'developer'"),
    ([{"role": "function", "content": "x"}, *STATEMENT], "messages[0].role", "got 'function'"),
    ([*STATEMENT, {"role": "system", "content": "以上是用户说的"}], "messages", "the last message must be the user's"),
])
def test_the_route_takes_only_the_roles_its_error_names(brain, messages, field, words):
    server = LiveServer(brain)
    try:
        r = httpx.post(f"{server.url}/v1/exchanges", timeout=60, json={
            "space": SPACE, "session_id": "roles", "messages": messages, "reply": "记住了。", "now": NOW})
        assert r.status_code == 400, r.text
        message = r.json()["error"]["message"]
        assert message.startswith(f"{field}:") and words in message, message
        if field.endswith(".role"):
            assert "user, assistant or system" in message
        assert _count(brain) == 0
    finally:
        server.close()


def test_the_proxy_passes_over_tool_messages_but_never_writes_a_tool_result_as_the_users(brain):
    """A proxied conversation may hold tool calls; only a reply to the user's own last message is an exchange."""
    gw = brain.gateway
    assert gw.enqueue_exchange(SPACE, "p", [*STATEMENT, {"role": "tool", "content": "我对芒果过敏"}], "好的") is None
    history = [{"role": "user", "content": "帮我查下天气"}, {"role": "tool", "content": "晴"},
               {"role": "assistant", "content": "晴天"}, *STATEMENT]
    assert gw.enqueue_exchange(SPACE, "p", history, "记住了。") is not None


def test_two_drafts_that_land_on_one_memory_name_it_once(tmp_path):
    from .conftest import StandInUpstream

    standin = StandInUpstream()
    same = {"title": "芒果过敏", "body": "小雨对芒果过敏，吃了会起疹子。"}
    standin.extraction = {"user": {"layer": "stable_boundary", **same}, "relationship": dict(same)}
    cfg = {"upstream": {"base_url": standin.url, "model": "m", "timeout_s": 10, "retries": 0},
           "ingest": {"extractor": "llm"}}
    with Brain.open(tmp_path / "d", cfg) as b:
        server = LiveServer(b)
        try:
            r = httpx.post(f"{server.url}/v1/exchanges", timeout=60, json={
                "space": SPACE, "session_id": "s", "messages": STATEMENT, "reply": "记住了。", "now": NOW})
            assert r.status_code == 200, r.text
            ids = r.json()["bucket_ids"]
            assert len(ids) == 1 and b.store.count(SPACE) == 1, ids
        finally:
            server.close()
            standin.close()
