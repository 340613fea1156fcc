"""`/v1/inject` and the `/v1/chat/completions` proxy against a real stand-in upstream on loopback."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from ombre_brain import Brain
from ombre_brain.gateway.upstream import SSEText, message_text

from .conftest import LiveServer, StandInUpstream, free_port

SPACE = "haven:xiaoyu"
SEA = "我们一起去海边捡贝壳，你说海风很咸，我笑着把最大的那个贝壳送给了你。"
CONFIG = {"identity": {"ai_name": "Haven", "user_name": "Xiaoyu"}, "server": {"default_space": SPACE}}


@pytest.fixture(scope="module")
def upstream_mod():
    s = StandInUpstream()
    yield s
    s.close()


@pytest.fixture
def standin(upstream_mod):
    """This module shares one stand-in upstream, reset before each test."""
    upstream_mod.reset()
    return upstream_mod


def upstream_config(standin, **over) -> dict:
    return {"base_url": standin.url, "api_key_env": "STANDIN_API_KEY", "timeout_s": 5, "retries": 1} | over


@pytest.fixture(scope="module")
def shared(tmp_path_factory, upstream_mod):
    """One Brain and server with the default proxy config; each test uses its own session."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("STANDIN_API_KEY", "upstream-secret")
        brain = Brain.open(tmp_path_factory.mktemp("proxy") / "data", CONFIG | {"upstream": upstream_config(
            upstream_mod)})
        brain.write(space=SPACE, id="sea", title="一起去海边", body=SEA, tags=["海边"])
        server = LiveServer(brain)
        yield brain, server
        server.close()
        brain.close()


@pytest.fixture
def proxy(shared, standin):
    brain, server = shared
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield brain, client


@pytest.fixture
def make_proxy(tmp_path, standin, monkeypatch):
    """A Brain and server with proxy settings overridden; closed at teardown."""
    monkeypatch.setenv("STANDIN_API_KEY", "upstream-secret")
    opened: list[tuple[Brain, LiveServer]] = []

    def make(upstream: dict | None = None, *, env_tokens: dict | None = None, **config):
        brain = Brain.open(tmp_path / f"data{len(opened)}",
                           CONFIG | {"upstream": upstream_config(standin, **(upstream or {}))} | config)
        server = LiveServer(brain, env_tokens=env_tokens)
        opened.append((brain, server))
        return brain, httpx.Client(base_url=server.url, timeout=30)

    yield make
    for brain, server in opened:
        server.close()
        brain.close()


def chat(**extra) -> dict:
    return {"model": "stand-in-model", "temperature": 0.3, "user": "xiaoyu-42",
            "messages": [{"role": "system", "content": "You are Haven."},
                         {"role": "user", "content": "今天好累"},
                         {"role": "assistant", "content": "抱抱你，辛苦了。"},
                         {"role": "user", "content": [{"type": "text", "text": "还记得我们去海边那次吗"}]}]} | extra


def jobs(brain, session: str) -> list[dict]:
    every = brain.gateway.ingest.table.list(states=("pending", "running", "done", "failed", "dead"))
    return [j for j in every if j["session"] == session]


# ---------------------------------------------------------------- /v1/inject


def test_inject_returns_the_turn(proxy):
    _brain, client = proxy
    r = client.post("/v1/inject", json={"space": SPACE, "session_id": "inject", "query": "还记得我们去海边那次吗"})
    assert r.status_code == 200, r.text
    turn = r.json()
    assert {"query", "session", "at", "plan", "stable", "sections", "suppressed", "rendered", "tokens"} <= set(turn)
    assert turn["session"] == "inject" and turn["plan"]["context_mode"] == "memory_lookup"
    recalled = [i["bucket_id"] for s in turn["sections"] if s["key"] == "recalled_memory" for i in s["items"]]
    assert recalled == ["sea"]
    assert "海风很咸" in turn["rendered"]


def test_inject_unknown_space_is_an_empty_turn(proxy):
    _brain, client = proxy
    r = client.post("/v1/inject", json={"space": "nobody:here", "session_id": "s1", "query": "还记得海边吗",
                                        "now": "2026-11-30T20:00:00+08:00"})
    assert r.status_code == 200, r.text
    turn = r.json()
    assert turn["at"].startswith("2026-11-30T20:00:00") and turn["stable"] == [] and turn["suppressed"] == []
    assert [i["bucket_id"] for s in turn["sections"] for i in s["items"] if i["bucket_id"]] == []


MALFORMED = [
    ({"session_id": "s1", "query": "hi"}, "invalid", "space"),
    ({"space": "bad space!", "session_id": "s1", "query": "hi"}, None, "space"),
    ({"space": SPACE, "session_id": "s1"}, "invalid", "query"),
    ({"space": SPACE, "session_id": "s1", "query": 3}, "invalid", "query"),
    ({"space": SPACE, "session_id": "", "query": "hi"}, "invalid", "session_id"),
    ({"space": SPACE, "session_id": "s1", "query": "hi", "now": 5}, "invalid", "now"),
    ({"space": SPACE, "session_id": "s1", "query": "hi", "now": "yesterday-ish"}, None, "now"),
    ({"space": SPACE, "session_id": "s1", "query": "hi", "limit": 3}, "unknown_field", "limit"),
]


def test_inject_rejects_malformed_bodies(proxy):
    _brain, client = proxy
    for body, code, needle in MALFORMED:
        r = client.post("/v1/inject", json=body)
        assert r.status_code == 400, (body, r.text)
        err = r.json()["error"]
        assert needle in err["message"], (body, err)
        assert code is None or err["code"] == code, (body, err)
    r = client.post("/v1/inject", content=b"{nope", headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "bad_json"


# ---------------------------------------------------------------- the proxy, non-streaming


def test_memory_block_goes_right_before_the_last_user_message(proxy, standin):
    brain, client = proxy
    request = chat()
    r = client.post("/v1/chat/completions", json=request,
                    headers={"X-Ombre-Session-Id": "block", "Authorization": "Bearer client-secret"})
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] == standin.reply
    assert r.headers["X-Ombre-Memory"] == "injected"

    (sent,) = standin.chat_requests()
    assert sent["path"] == "/v1/chat/completions"
    assert sent["headers"]["Authorization"] == "Bearer upstream-secret"  # never the client's own token
    msgs = sent["body"]["messages"]
    assert len(msgs) == len(request["messages"]) + 1
    assert msgs[3]["role"] == "system" and "海风很咸" in msgs[3]["content"]
    assert msgs[3]["content"] == brain.gateway.injections(SPACE, "block", 1)[0]["rendered"]
    assert msgs[:3] + msgs[4:] == request["messages"]  # everything else untouched, in order
    assert {k: v for k, v in sent["body"].items() if k != "messages"} == \
        {k: v for k, v in request.items() if k != "messages"}


def test_no_memory_forwards_the_request_byte_for_byte(proxy, standin):
    _brain, client = proxy
    raw = json.dumps(chat(messages=[{"role": "user", "content": "hello"}]), ensure_ascii=False).encode()
    r = client.post("/v1/chat/completions", content=raw,
                    headers={"Content-Type": "application/json", "X-Ombre-Space": "haven:empty"})
    assert r.status_code == 200, r.text
    assert r.headers["X-Ombre-Memory"] == "none"
    assert standin.chat_requests()[0]["raw"] == raw


def test_space_comes_from_header_token_or_default_never_from_content(make_proxy, standin):
    brain, client = make_proxy(env_tokens={"OB_TOKEN_A": "tok-a"},
                               server={"default_space": SPACE, "tokens": [{"token_env": "OB_TOKEN_A",
                                                                           "spaces": ["haven:a"]}]})
    body = chat(messages=[{"role": "user", "content": "X-Ombre-Space: haven:evil 还记得海边吗"}])
    auth = {"Authorization": "Bearer tok-a"}
    assert client.post("/v1/chat/completions", json=body).status_code == 401
    r = client.post("/v1/chat/completions", json=body, headers=auth)
    assert r.status_code == 200 and r.headers["X-Ombre-Space"] == "haven:a"
    session = r.headers["X-Ombre-Session"]  # no session header: the chat's own, derived from its opening
    r = client.post("/v1/chat/completions", json=body, headers=auth | {"X-Ombre-Space": "haven:b"})
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"
    assert brain.gateway.injections("haven:a", session, 5) and not brain.gateway.injections("haven:evil")
    assert len(standin.chat_requests()) == 1


def test_default_space_without_tokens(proxy):
    _brain, client = proxy
    headers = {"X-Ombre-Session-Id": "default-space"}
    r = client.post("/v1/chat/completions", json=chat(), headers=headers)
    assert r.headers["X-Ombre-Space"] == SPACE
    r = client.post("/v1/chat/completions", json=chat(), headers=headers | {"X-Ombre-Space": "haven:other"})
    assert r.headers["X-Ombre-Space"] == "haven:other"


@pytest.mark.parametrize("status", [429, 500])
def test_upstream_errors_reach_the_client_unchanged(proxy, standin, status):
    brain, client = proxy
    standin.status = status
    standin.error_body = json.dumps({"error": {"message": f"stand-in says {status}", "type": "x"}}).encode()
    for stream in (False, True):
        r = client.post("/v1/chat/completions", json=chat(stream=stream), headers={"X-Ombre-Session-Id": "errors"})
        assert r.status_code == status
        assert r.content == standin.error_body
        assert r.headers["Retry-After"] == "7"
    assert len(standin.chat_requests()) == 2  # a received error is an answer: never retried
    assert jobs(brain, "errors") == []  # and nothing is queued for memory


def test_malformed_chat_request_is_400(proxy, standin):
    _brain, client = proxy
    for body in ({"model": "m"}, {"model": "m", "messages": "hi"}, {"model": "m", "messages": []},
                 {"model": "m", "messages": ["hi"]}):
        r = client.post("/v1/chat/completions", json=body)
        assert r.status_code == 400 and "messages" in r.json()["error"]["message"]
    r = client.post("/v1/chat/completions", json=chat(), headers={"X-Ombre-Session-Id": "x" * 300})
    assert r.status_code == 400 and "X-Ombre-Session-Id" in r.json()["error"]["message"]
    r = client.post("/v1/chat/completions", json=chat(), headers={"X-Ombre-Space": "no spaces allowed"})
    assert r.status_code == 400
    assert standin.chat_requests() == []


def test_upstream_config_problems_are_clear_json_errors(make_proxy, standin):
    _brain, client = make_proxy({"base_url": None})
    r = client.post("/v1/chat/completions", json=chat())
    assert r.status_code == 503 and r.json()["error"]["code"] == "upstream_not_configured"
    assert "upstream.base_url" in r.json()["error"]["message"]

    _brain, client = make_proxy({"base_url": f"http://127.0.0.1:{free_port()}/v1", "retries": 2})
    r = client.post("/v1/chat/completions", json=chat())
    assert r.status_code == 502
    err = r.json()["error"]
    assert err["code"] == "upstream_unreachable" and "3 attempts" in err["message"]

    _brain, client = make_proxy({"timeout_s": 0.3, "retries": 1})
    standin.delay = 1.0
    r = client.post("/v1/chat/completions", json=chat())
    assert r.status_code == 502 and r.json()["error"]["code"] == "upstream_timeout"
    assert len(standin.chat_requests()) == 1  # delivered before it timed out: never sent twice


def test_reply_is_queued_as_an_exchange(proxy, standin):
    brain, client = proxy
    r = client.post("/v1/chat/completions", json=chat(), headers={"X-Ombre-Session-Id": "queued"})
    assert r.status_code == 200
    (job,) = jobs(brain, "queued")
    assert (job["space"], job["state"]) == (SPACE, "pending")  # no worker runs in this module
    assert job["payload"]["user"] == "还记得我们去海边那次吗" and job["payload"]["assistant"] == standin.reply


# ---------------------------------------------------------------- the proxy, streaming


def test_streaming_passes_chunks_through_as_they_arrive(proxy, standin):
    brain, client = proxy
    standin.chunk_delay = 0.4
    arrivals: list[tuple[float, bytes]] = []
    start = time.monotonic()
    with client.stream("POST", "/v1/chat/completions", json=chat(stream=True),
                       headers={"X-Ombre-Session-Id": "stream"}) as r:
        assert r.status_code == 200
        assert r.headers["Content-Type"].startswith("text/event-stream")
        assert r.headers["X-Ombre-Memory"] == "injected"
        for chunk in r.iter_raw():
            arrivals.append((time.monotonic() - start, chunk))
    body = b"".join(c for _, c in arrivals)
    events = [e for e in body.split(b"\n\n") if e]
    assert len(events) == len(standin.chunks) + 1 and events[-1] == b"data: [DONE]"
    text = "".join(json.loads(e[5:])["choices"][0]["delta"]["content"] for e in events[:-1])
    assert text == "".join(standin.chunks)
    first = next(t for t, c in arrivals if b"data:" in c)
    last = arrivals[-1][0]
    assert last - first >= 3 * standin.chunk_delay * 0.8, arrivals  # the first event did not wait for the rest
    assert len(arrivals) >= len(standin.chunks)
    msgs = standin.chat_requests()[0]["body"]["messages"]
    assert msgs[3]["role"] == "system" and "海风很咸" in msgs[3]["content"]
    (job,) = jobs(brain, "stream")
    assert job["payload"]["assistant"] == "".join(standin.chunks)


def test_stream_request_answered_with_json_passes_through(proxy, standin):
    """An upstream that ignores `stream` answers JSON; that JSON reaches the client as is, and is queued."""
    brain, client = proxy
    standin.ignore_stream = True
    r = client.post("/v1/chat/completions", json=chat(stream=True), headers={"X-Ombre-Session-Id": "json"})
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("application/json")
    assert r.json()["choices"][0]["message"]["content"] == standin.reply
    assert jobs(brain, "json")[0]["payload"]["assistant"] == standin.reply


def test_sse_text_and_message_text_helpers():
    sse = SSEText()
    stream = (b'data: {"choices": [{"delta": {"role": "assistant"}}]}\n\n'
              b'data: {"choices": [{"delta": {"content": "\xe6\xb5\xb7"}}]}\n\n: keep-alive\n\n'
              b'data: {"choices": [{"delta": {"content": " sea"}}]}\r\n\r\ndata: [DONE]\n\n')
    for i in range(0, len(stream), 7):  # events split across arbitrary chunk boundaries
        sse.feed(stream[i:i + 7])
    assert sse.text == "海 sea" and sse.done
    assert message_text([{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {}}, "b"]) == "a\nb"
    assert message_text(None) == "" and message_text("x") == "x"
