"""Issue 19, bad input and validation: what used to be a 500 or slipped through is now a clear 4xx.

Each case once answered 500 (deep nesting, a 5,000-digit number, body keys that collide with
keyword arguments, a ``now`` in year 1, an upstream that resets the connection), answered in
the wrong shape (waitress's plain-text 413, validation details to a caller without a token), or
was stored when it should not be (a trailing newline in an id, NUL characters, an invisible
title, a token in the address of an API route). All against the real app on waitress.
"""

from __future__ import annotations

import re
import socket
import struct
import threading
from datetime import datetime, timezone

import httpx
import pytest

from ombre_brain import Brain
from ombre_brain.server.app import create_app
from ombre_brain.server.wsgi import make_server

from .conftest import LiveServer

SPACE = "haven:xiaoyu"
TOKEN = "hardening-token"
JSON_ROUTES = [("POST", "/v1/buckets"), ("PATCH", "/v1/buckets/b1?space=haven:xiaoyu"), ("POST", "/v1/edges"),
               ("POST", "/v1/inject"), ("POST", "/v1/chat/completions"), ("POST", "/v1/purge"),
               ("POST", "/v1/facts/evidence")]


@pytest.fixture(scope="module")
def locked(tmp_path_factory):
    """A server with a token and an upstream that resets every connection."""
    reset = ResettingUpstream()
    brain = Brain.open(tmp_path_factory.mktemp("hardening") / "data",
                       {"server": {"tokens": [{"token_env": "HARD_TOKEN", "spaces": "*"}], "default_space": SPACE},
                        "upstream": {"base_url": reset.url, "timeout_s": 5, "retries": 2}})
    brain.write(space=SPACE, id="b1", title="一起去海边", body="我们在海边捡贝壳。")
    server = LiveServer(brain, env_tokens={"HARD_TOKEN": TOKEN})
    with httpx.Client(base_url=server.url, timeout=30, headers={"Authorization": f"Bearer {TOKEN}"}) as c:
        yield brain, c, server, reset
    server.close()
    brain.close()
    reset.close()


class ResettingUpstream:
    """A loopback 'upstream' that accepts, reads the request, and resets the connection (RST)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.accepted = 0
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.recv(65536)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()

    def close(self) -> None:
        self.sock.close()


def raw(client: httpx.Client, method: str, url: str, body: bytes, **kw) -> httpx.Response:
    return client.request(method, url, content=body, headers={"Content-Type": "application/json"}, **kw)


def assert_error(r: httpx.Response, status: int, code: str | None = None, needle: str | None = None) -> dict:
    assert r.status_code == status, (r.status_code, r.text[:300])
    assert r.headers["content-type"].startswith("application/json"), r.headers
    err = r.json()["error"]
    assert isinstance(err["code"], str) and isinstance(err["message"], str)
    assert code is None or err["code"] == code, err
    assert needle is None or needle in err["message"], err
    return err


# ---------------------------------------------------------------- no 500s from bad input


@pytest.mark.parametrize("method,url", JSON_ROUTES)
@pytest.mark.parametrize("depth", [1000, 100_000])
def test_deeply_nested_json_is_a_400_on_every_json_route(locked, method, url, depth):
    _brain, client, _server, _reset = locked
    for body in (b"[" * depth + b"]" * depth, b'{"space": "haven:xiaoyu", "x": ' + b'{"a": ' * depth + b"1"
                 + b"}" * depth + b"}"):
        assert_error(raw(client, method, url, body), 400, "bad_json", "nested")


def test_nesting_is_bounded_even_below_the_parser_limit(locked):
    _brain, client, _server, _reset = locked
    body = b'{"space": "haven:xiaoyu", "title": "t", "tags": ' + b"[" * 200 + b"]" * 200 + b"}"
    assert_error(raw(client, "POST", "/v1/buckets", body), 400, "bad_json", "nested more than 64 levels")


@pytest.mark.parametrize("method,url", JSON_ROUTES)
def test_a_five_thousand_digit_number_is_a_400(locked, method, url):
    _brain, client, _server, _reset = locked
    for number in (b"9" * 5000, b"-" + b"9" * 5000, b"1" + b"0" * 400 + b".5", b"1e999"):
        body = b'{"space": "haven:xiaoyu", "title": "t", "importance": ' + number + b"}"
        assert_error(raw(client, method, url, body), 400, "bad_json")


@pytest.mark.parametrize("key", ["now", "self", "bucket_id", "dedupe", "space_", "origin_"])
def test_keyword_argument_names_in_a_bucket_body_are_refused_by_name(locked, key):
    brain, client, _server, _reset = locked
    before = len(brain.list(SPACE, limit=1000))
    r = client.post("/v1/buckets", json={"space": SPACE, "title": f"key {key}", "body": "x", key: "z"})
    assert_error(r, 400, "unknown_field", key)
    r = client.patch(f"/v1/buckets/b1?space={SPACE}", json={key: "z"})
    assert_error(r, 400, "unknown_field", key)
    assert len(brain.list(SPACE, limit=1000)) == before and brain.get(SPACE, "b1").title == "一起去海边"


@pytest.mark.parametrize("now", ["0001-01-01T00:00:00+00:00", "0001-01-03T23:59:59+00:00",
                                 "0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00", "0999-12-31T00:00:00Z"])
def test_a_now_at_the_ends_of_the_calendar_is_a_400_at_the_door(locked, now):
    brain, client, _server, _reset = locked
    r = client.post("/v1/inject", json={"space": SPACE, "session_id": "calendar", "query": "还记得海边吗", "now": now})
    assert_error(r, 400, "invalid", "now: time")
    assert brain.gateway.injections(SPACE, "calendar") == []  # refused before the pipeline ran
    r = client.post("/v1/buckets", json={"space": SPACE, "title": "old", "created": now})
    assert_error(r, 400, "invalid", "created: time")


def test_a_now_inside_the_range_still_works(locked):
    _brain, client, _server, _reset = locked
    for now in ("1000-01-01T00:00:00+00:00", "9000-12-31T23:00:00+00:00"):
        r = client.post("/v1/inject", json={"space": SPACE, "session_id": "edges", "query": "海边", "now": now})
        assert r.status_code == 200, r.text


def test_an_upstream_that_resets_the_connection_is_a_502(locked):
    _brain, client, _server, reset = locked
    before = reset.accepted
    for stream in (False, True):
        r = client.post("/v1/chat/completions", json={"model": "m", "stream": stream,
                                                      "messages": [{"role": "user", "content": "你好"}]})
        assert_error(r, 502, "upstream_broken")
    assert reset.accepted - before == 2  # delivered, then reset: never sent again


def test_unauthenticated_bad_bodies_get_401_not_validation_details(locked):
    _brain, client, server, _reset = locked
    for method, url in JSON_ROUTES:
        for body in (b"{nope", b"[" * 5000, b'{"space": "bad space!", "title": 5}', b"9" * 5000):
            r = httpx.request(method, server.url + url, content=body, headers={"Content-Type": "application/json"})
            err = assert_error(r, 401, "unauthorized")
            assert "JSON" not in err["message"] and "space" not in err["message"]
    r = httpx.get(f"{server.url}/v1/buckets", params={"space": "bad space!", "limit": "x"})
    assert_error(r, 401, "unauthorized")


def test_waitress_refusals_are_json_errors(brain):
    """Over waitress's own limit a body never reaches Flask; its answer is still the JSON error shape."""
    limit = brain.config.server.max_body_bytes
    server = make_server(create_app(brain), host="127.0.0.1", port=0, threads=2, max_body_bytes=limit)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.effective_port}"
    try:
        r = httpx.post(f"{url}/v1/buckets", content=b"x" * (limit + 50_000),
                       headers={"Content-Type": "application/json"})
        assert_error(r, 413, "body_too_large", f"limit of {limit} bytes")
        r = httpx.post(f"{url}/v1/buckets", content=b"x" * (limit + 10),  # just over: Flask answers, same shape
                       headers={"Content-Type": "application/json"})
        assert_error(r, 413, "body_too_large", f"limit of {limit} bytes")
        r = httpx.get(f"{url}/healthz", headers={"X-Padding": "a" * 300_000})  # over waitress's header limit
        assert_error(r, 431, "headers_too_large")
        r = httpx.get(f"{url}/healthz")
        assert r.status_code == 200 and r.json() == {"status": "ok"}
    finally:  # close from inside the server's own loop, as LiveServer does
        from waitress import wasyncore

        server.trigger.pull_trigger(lambda: wasyncore.close_all(server._map))
        thread.join(5)
        server.task_dispatcher.shutdown(timeout=1)


# ---------------------------------------------------------------- validation


def test_ids_and_spaces_with_a_trailing_newline_are_refused(locked):
    brain, client, _server, _reset = locked
    r = client.post("/v1/buckets", json={"space": SPACE, "id": "abc\n", "title": "trailing newline"})
    assert_error(r, 400, "invalid", "id: expected an id")
    r = client.post("/v1/buckets", json={"space": SPACE + "\n", "title": "trailing newline"})
    assert_error(r, 400, "bad_space")
    r = client.get("/v1/buckets", params={"space": SPACE + "\n"})
    assert_error(r, 400, "bad_space")
    r = client.post("/v1/edges", json={"space": SPACE, "from_id": "b1\n", "to_id": "b1", "relation": "relates_to"})
    assert_error(r, 400, "invalid", "from_id")
    r = client.post("/v1/purge", json={"space": SPACE, "bucket_ids": ["b1\n"]})
    assert_error(r, 400, "invalid", "bucket_ids")
    assert brain.get(SPACE, "abc\n") is None and brain.get(SPACE, "b1") is not None


@pytest.mark.parametrize("fields,needle", [
    ({"tags": ["ok", "a\x00b"]}, "tags"),
    ({"comments": [{"content": "a\x00b"}]}, "comments[0]"),
    ({"comments": [{"author": "x\x00", "content": "fine"}]}, "comments[0]"),
    ({"source": "chat:\x00evil"}, "source"),
    ({"title": "\u200b\u200c\u200d\ufeff"}, "title"),
    ({"title": " \u2060\u00ad\u3000 "}, "title"),
    ({"tags": ["\u200b"]}, "tags"),
])
def test_nul_characters_and_invisible_titles_are_refused(locked, fields, needle):
    brain, client, _server, _reset = locked
    body = {"space": SPACE, "title": "visible", "body": "x"} | fields
    assert_error(client.post("/v1/buckets", json=body), 400, "invalid", needle)
    assert_error(client.patch(f"/v1/buckets/b1?space={SPACE}", json=fields), 400, "invalid", needle)
    assert not [b for b in brain.list(SPACE, limit=1000) if "\x00" in repr(b.to_dict())]


def test_nul_in_fact_values_and_text_is_refused(locked):
    _brain, client, _server, _reset = locked
    base = {"space": SPACE, "source": {"producer": "chat", "event_id": "nul-1"}, "subject": "user",
            "role": "structured_confirmation", "text": "evidence"}
    r = client.post("/v1/facts/evidence", json=base | {"edits": [{"op": "establish", "key": "diet",
                                                                    "value": "vegan\x00; DROP"}]})
    assert_error(r, 400, "invalid", "edits[0].value")
    r = client.post("/v1/facts/evidence", json=base | {"text": "a\x00b", "edits": [{"op": "establish", "key": "diet",
                                                                                     "value": "vegan"}]})
    assert_error(r, 400, "invalid", "text")
    r = client.post("/v1/facts/evidence", json=base | {"edits": [{"op": "establish", "key": "diet\n",
                                                                    "value": "vegan"}]})
    assert_error(r, 400, "invalid", "key")
    assert client.get("/v1/facts", params={"space": SPACE}).json()["facts"] == []


def test_a_token_in_the_address_only_opens_the_debug_pages(locked):
    _brain, client, server, _reset = locked
    for path in ("/v1/buckets", "/api/moments", "/api/gateway-injections"):
        r = httpx.get(server.url + path, params={"space": SPACE, "token": TOKEN})
        assert_error(r, 401, "unauthorized")
    r = httpx.post(f"{server.url}/v1/inject", params={"token": TOKEN},
                   json={"space": SPACE, "session_id": "s", "query": "hi"})
    assert_error(r, 401, "unauthorized")
    page = httpx.get(f"{server.url}/debug/layers", params={"space": SPACE, "token": TOKEN})
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    page = httpx.get(f"{server.url}/debug/injections", params={"space": SPACE, "token": TOKEN})
    assert page.status_code == 200 and f"token={TOKEN}" in page.text  # carried from page to page
    assert "/api/gateway-injections" in page.text
    assert not re.search(r'href="/api/[^"]*token=', page.text)  # never into a JSON route's address
    assert httpx.get(f"{server.url}/debug/layers", params={"space": SPACE}).status_code == 401


# ---------------------------------------------------------------- the first day: readable UTF-8


def test_json_answers_are_utf8_not_escapes(locked):
    _brain, client, _server, _reset = locked
    answers = [
        client.post("/v1/inject", json={"space": SPACE, "session_id": "utf8", "query": "还记得我们去海边那次吗"}),
        client.get(f"/v1/buckets/b1?space={SPACE}"),
        client.get("/v1/buckets", params={"space": SPACE}),
        client.get("/api/gateway-injections", params={"space": SPACE, "session": "utf8"}),
        client.post("/v1/buckets", json={"space": SPACE, "title": "海边", "颜色": "红色"}),  # error naming the key
        client.post("/v1/buckets", json={"space": "坏的 空间", "title": "海边"}),  # error naming the value
        client.post("/v1/facts/evidence", json={"space": SPACE, "source": {"producer": "chat", "event_id": "u8"},
                                                "subject": "user", "role": "多余的", "text": "证据",
                                                "edits": [{"op": "establish", "key": "diet", "value": "素食"}]}),
    ]
    for r in answers:
        assert r.headers["content-type"] == "application/json; charset=utf-8", r.headers
        assert b"\\u" not in r.content, r.content[:300]
        assert any(0x4E00 <= ord(ch) <= 0x9FFF for ch in r.content.decode("utf-8")), r.content[:200]
    assert "坏的 空间" in answers[5].text and "多余的" in answers[6].text


def test_times_in_year_range_helpers():
    from ombre_brain.timeutil import MAX_YEAR, MIN_YEAR, in_range

    assert in_range(datetime(MIN_YEAR, 1, 1, tzinfo=timezone.utc))
    assert not in_range(datetime(1, 1, 1, tzinfo=timezone.utc))
    assert not in_range(datetime(MAX_YEAR + 1, 1, 1, tzinfo=timezone.utc))
