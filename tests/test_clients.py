"""Client adapters through the real proxy: each frontend's background tasks are forwarded untouched (issue 53).

Request shapes come from the clients themselves: Open WebUI's as `make e2e-openwebui` recorded them from 0.12.4
(tests/data/clients/openwebui-0.12.4.json), SillyTavern's and LibreChat's as their source builds them (the YAML
files beside it say where). For every task request: no memory is injected (the upstream receives the request
byte for byte), nothing is written, no round of any session is counted, and the answer says
``X-Ombre-Memory: skipped-task``. An unknown template is an ordinary turn.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest
import yaml

from ombre_brain import Brain
from ombre_brain.gateway.clients import CLIENTS, ClientAdapter, template

from .conftest import LiveServer, StandInUpstream

DATA = Path(__file__).parent / "data" / "clients"
SPACE = "haven:clients"
CONFIG = {"identity": {"ai_name": "Haven", "user_name": "Xiaoyu"}, "server": {"default_space": SPACE}}


def _sillytavern() -> list[tuple]:
    doc = yaml.safe_load((DATA / "sillytavern-1.12.6.yaml").read_text(encoding="utf-8"))
    out = []
    for r in doc["requests"]:
        body = dict(doc["fields"], stream=r["stream"], messages=(doc["prefix"] if r["prefix"] else []) + r["messages"])
        out.append(("sillytavern", r["name"], {}, body, r["expect"]))
    return out


def _librechat() -> list[tuple]:
    doc = yaml.safe_load((DATA / "librechat-0.8.yaml").read_text(encoding="utf-8"))
    return [("librechat", r["name"], {}, r["body"], r["expect"]) for r in doc["requests"]]


def _recorded() -> list[tuple]:
    doc = json.loads((DATA / "openwebui-0.12.4.json").read_text(encoding="utf-8"))
    owui = [("openwebui", r["name"], r.get("headers") or {}, r["body"], r["expect"]) for r in doc["requests"]]
    return owui + _sillytavern() + _librechat()


CASES = _recorded()
TASKS = [c for c in CASES if c[4] != "chat"]
TURNS = [c for c in CASES if c[4] == "chat"]


def _id(case) -> str:
    return f"{case[0]}: {case[1]}"


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_each_recorded_request_is_read_as_its_client_means_it(case):
    client, _name, headers, body, expect = case
    reading = CLIENTS.read(headers, body)
    if expect == "chat":
        assert not reading.is_task and reading.task is None, reading
    else:
        assert reading.is_task and reading.task == expect and reading.client == client, reading


# ---------------------------------------------------------------- through the proxy


@pytest.fixture(scope="module")
def upstream_mod():
    s = StandInUpstream()
    yield s
    s.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory, upstream_mod):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("STANDIN_API_KEY", "upstream-secret")
        brain = Brain.open(tmp_path_factory.mktemp("clients") / "data", CONFIG | {"upstream": {
            "base_url": upstream_mod.url, "api_key_env": "STANDIN_API_KEY", "timeout_s": 10, "retries": 0}})
        brain.write(space=SPACE, id="cat", title="我养了一只猫叫豆包", body="我养了一只猫叫豆包，三岁了", tags=["豆包"])
        brain.write(space=SPACE, id="peanut", title="我对花生过敏", body="我对花生过敏，吃了会起疹子", tags=["花生"])
        server = LiveServer(brain)
        with httpx.Client(base_url=server.url, timeout=30) as client:
            yield brain, client
        server.close()
        brain.close()


@pytest.fixture
def proxy(served, upstream_mod):
    upstream_mod.reset()
    return served[0], served[1], upstream_mod


def _state(brain) -> tuple:
    """Everything a request could leave behind: queued exchanges, sessions and their rounds, logged turns."""
    jobs = brain.gateway.ingest.table.list(states=("pending", "running", "done", "failed", "dead"))
    sessions = brain.gateway.sessions.sessions(SPACE)
    return (len(jobs), sorted((s["session"], s["round"]) for s in sessions),
            len(brain.gateway.injections(SPACE, None, 500)))


@pytest.mark.parametrize("case", TASKS, ids=_id)
def test_a_task_request_is_forwarded_untouched_and_leaves_nothing(proxy, case):
    brain, client, upstream = proxy
    _client, _name, headers, body, expect = case
    raw = json.dumps(body, ensure_ascii=False).encode()
    before = _state(brain)
    r = client.post("/v1/chat/completions", content=raw, headers={"Content-Type": "application/json", **headers})
    if body.get("stream"):
        assert r.status_code == 200 and "data: [DONE]" in r.text
    else:
        assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == upstream.reply
    assert r.headers["X-Ombre-Memory"] == "skipped-task" and r.headers["X-Ombre-Task"] == expect
    (sent,) = upstream.chat_requests()
    assert sent["raw"] == raw  # nothing injected: the very bytes the client sent
    assert _state(brain) == before  # nothing queued for writing, no round, no logged turn


@pytest.mark.parametrize("case", TURNS, ids=_id)
def test_an_ordinary_turn_is_still_a_turn(proxy, case):
    brain, client, upstream = proxy
    _client, name, headers, body, _expect = case
    upstream.reply = f"a reply to {name}"  # each exchange its own (a repeated exchange is queued once)
    upstream.chunks = [upstream.reply]
    jobs, sessions, turns = _state(brain)
    r = client.post("/v1/chat/completions", json=body, headers=headers)
    assert r.status_code == 200 and r.headers["X-Ombre-Memory"] in ("injected", "none")
    session = r.headers["X-Ombre-Session"]
    deadline = time.monotonic() + 10  # a streamed answer is queued once its last event went out
    while _state(brain)[0] == jobs and time.monotonic() < deadline:
        time.sleep(0.05)
    after_jobs, after_sessions, after_turns = _state(brain)
    assert after_turns == turns + 1
    assert dict(after_sessions)[session] == dict(sessions).get(session, 0) + 1
    assert after_jobs == jobs + 1  # the exchange is queued for the write decision


def test_the_task_header_decides_and_none_means_a_turn(proxy):
    brain, client, upstream = proxy
    body = {"model": "m", "messages": [{"role": "user", "content": "我对什么过敏来着？"}]}
    before = _state(brain)
    r = client.post("/v1/chat/completions", json=body, headers={"X-Ombre-Task": "Title Generation"})
    assert r.headers["X-Ombre-Memory"] == "skipped-task" and r.headers["X-Ombre-Task"] == "title_generation"
    assert _state(brain) == before and "花生" not in json.dumps(upstream.chat_requests()[-1]["body"],
                                                               ensure_ascii=False)
    # Open WebUI's {{TASK}} is empty on a chat turn: an empty header is no verdict, the request is read as usual
    r = client.post("/v1/chat/completions", json=body, headers={"X-Ombre-Task": ""})
    assert r.headers["X-Ombre-Memory"] == "injected"
    assert "花生" in json.dumps(upstream.chat_requests()[-1]["body"], ensure_ascii=False)
    # "none" overrules a template: a user's own prompt that happens to open like a task
    tags = {"model": "m", "messages": [{"role": "user", "content": "### Task:\nGenerate 1-3 broad tags categorizing "
                                        "the main themes of the chat history about 豆包"}]}
    assert client.post("/v1/chat/completions", json=tags).headers["X-Ombre-Memory"] == "skipped-task"
    r = client.post("/v1/chat/completions", json=tags, headers={"X-Ombre-Task": "none"})
    assert r.headers["X-Ombre-Memory"] in ("injected", "none") and "X-Ombre-Task" not in r.headers


def test_a_task_that_streams_is_relayed_and_never_written(proxy):
    brain, client, upstream = proxy
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "我对花生过敏"}]}
    before = _state(brain)
    with client.stream("POST", "/v1/chat/completions", json=body, headers={"X-Ombre-Task": "summary"}) as r:
        text = "".join(r.iter_text())
    assert r.headers["X-Ombre-Memory"] == "skipped-task" and "data: [DONE]" in text and "remember" in text
    assert _state(brain) == before


# ---------------------------------------------------------------- sessions


def _chat(*turns: str) -> dict:
    msgs = []
    for i, t in enumerate(turns):
        msgs.append({"role": "user", "content": t})
        if i < len(turns) - 1:
            msgs.append({"role": "assistant", "content": f"reply {i}"})
    return {"model": "m", "messages": msgs}


def test_each_chat_without_a_session_header_is_its_own_session(proxy):
    brain, client, upstream = proxy
    a1 = client.post("/v1/chat/completions", json=_chat("豆包今天又把杯子推下桌了"))
    a2 = client.post("/v1/chat/completions", json=_chat("豆包今天又把杯子推下桌了", "豆包几岁了？"))
    b1 = client.post("/v1/chat/completions", json=_chat("周末想去看海"))
    a, b = a1.headers["X-Ombre-Session"], b1.headers["X-Ombre-Session"]
    assert a == a2.headers["X-Ombre-Session"] and a != b and a.startswith("chat-") and b.startswith("chat-")
    rounds = dict(_state(brain)[1])
    assert rounds[a] == 2 and rounds[b] == 1 and "default" not in rounds
    # a session header still wins; Open WebUI's forwarded chat id names the session when nothing else does
    r = client.post("/v1/chat/completions", json=_chat("周末想去看海"), headers={"X-Ombre-Session-Id": "mine"})
    assert r.headers["X-Ombre-Session"] == "mine"
    r = client.post("/v1/chat/completions", json=_chat("周末想去看海"),
                    headers={"X-OpenWebUI-Chat-Id": "0b4c-chat", "X-OpenWebUI-User-Id": "u1"})
    assert r.headers["X-Ombre-Session"] == "0b4c-chat" and r.headers["X-Ombre-Client"] == "openwebui"
    r = client.post("/v1/chat/completions", json=_chat("周末想去看海"), headers={"X-OpenWebUI-Chat-Id": "x" * 300})
    assert r.status_code == 400 and "X-OpenWebUI-Chat-Id" in r.json()["error"]["message"]


def test_a_cooldown_stays_in_its_own_chat(proxy):
    """Finding 3: "豆包几岁了？" in a new chat got nothing (skipped_recent_rounds) when every chat was one session."""
    _brain, client, upstream = proxy
    first = client.post("/v1/chat/completions", json=_chat("豆包几岁了？"))
    assert first.headers["X-Ombre-Memory"] == "injected"
    other = client.post("/v1/chat/completions", json=_chat("早上好", "豆包几岁了？"))
    assert other.headers["X-Ombre-Session"] != first.headers["X-Ombre-Session"]
    assert "豆包" in json.dumps(upstream.chat_requests()[-1]["body"], ensure_ascii=False)


# ---------------------------------------------------------------- GET /v1/models


def test_models_pass_through_with_the_upstreams_key(proxy):
    _brain, client, upstream = proxy
    r = client.get("/v1/models", headers={"Authorization": "Bearer client-secret"})
    assert r.status_code == 200 and [m["id"] for m in r.json()["data"]] == upstream.models
    (sent,) = [q for q in upstream.requests if q["method"] == "GET"]
    assert sent["path"] == "/v1/models" and sent["headers"]["Authorization"] == "Bearer upstream-secret"


def test_models_fall_back_to_the_configured_names(tmp_path, upstream_mod, monkeypatch):
    upstream_mod.reset()
    upstream_mod.models_status = 404
    cfg = CONFIG | {"upstream": {"base_url": upstream_mod.url, "api_key_env": "NONE_SET", "model": "extract-model",
                                 "models": ["haven-chat", "haven-mini"], "timeout_s": 5}}
    with Brain.open(tmp_path / "a", cfg) as brain:
        server = LiveServer(brain)
        try:
            r = httpx.get(f"{server.url}/v1/models", timeout=10)
            assert r.status_code == 200 and [m["id"] for m in r.json()["data"]] == ["haven-chat", "haven-mini"]
            upstream_mod.models_status, upstream_mod.models = 200, []  # an empty list: the configured names too
            assert [m["id"] for m in httpx.get(f"{server.url}/v1/models").json()["data"]] == ["haven-chat",
                                                                                               "haven-mini"]
            upstream_mod.models_status = 401  # the upstream refuses our key: the client must see it
            assert httpx.get(f"{server.url}/v1/models").status_code == 401
        finally:
            server.close()
    no_upstream = CONFIG | {"upstream": {"model": "extract-model"}}
    with Brain.open(tmp_path / "b", no_upstream) as brain:
        server = LiveServer(brain)
        try:
            r = httpx.get(f"{server.url}/v1/models", timeout=10)
            assert r.status_code == 200 and [m["id"] for m in r.json()["data"]] == ["extract-model"]
        finally:
            server.close()


def test_models_need_the_token_like_the_chat(tmp_path, upstream_mod, monkeypatch):
    upstream_mod.reset()
    cfg = CONFIG | {"upstream": {"base_url": upstream_mod.url}, "server": {
        "default_space": SPACE, "tokens": [{"token_env": "OB_TOKEN_M", "spaces": [SPACE]}]}}
    with Brain.open(tmp_path / "t", cfg) as brain:
        server = LiveServer(brain, env_tokens={"OB_TOKEN_M": "tok-m"})
        try:
            assert httpx.get(f"{server.url}/v1/models").status_code == 401
            assert httpx.get(f"{server.url}/v1/models", headers={"Authorization": "Bearer tok-m"}).status_code == 200
        finally:
            server.close()


# ---------------------------------------------------------------- the registry


def test_a_new_client_is_one_registry_entry(proxy):
    brain, client, upstream = proxy
    toy = ClientAdapter("toy_client", "Toy", "1.0", templates=(template("recap", "last_user", "[RECAP THE CHAT]"),))
    body = {"model": "m", "messages": [{"role": "user", "content": "[recap the chat] 豆包 花生"}]}
    assert client.post("/v1/chat/completions", json=body).headers["X-Ombre-Memory"] != "skipped-task"
    with CLIENTS.added(toy, before="openai"):
        assert CLIENTS.names[-2:] == ("toy_client", "openai")
        before = _state(brain)
        r = client.post("/v1/chat/completions", json=body)
        assert r.headers["X-Ombre-Memory"] == "skipped-task" and r.headers["X-Ombre-Client"] == "toy_client"
        assert _state(brain) == before
        with pytest.raises(ValueError, match="already registered"):
            CLIENTS.register(toy)
    assert "toy_client" not in CLIENTS.names
    with pytest.raises(ValueError, match="place"):
        template("x", "somewhere", "x")
