"""Issue 19, proxy honesty: a broken upstream answer never looks like a whole one.

A real, small, misbehaving upstream on loopback (``http.server``): it stalls mid-stream, cuts a
stream (close-delimited, chunked, inside an event), answers 200 with garbage, trickles a body
past the deadline, or holds a delivered request without answering. The proxy must end a broken
stream with an SSE error event of the shape the OpenAI SDKs raise on (and no ``[DONE]``), send
a request again only when it provably never arrived, keep the configured timeout as a deadline,
and write no exchange for anything that is not a whole chat completion.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from ombre_brain import Brain
from ombre_brain.gateway.upstream import SSEText

from .conftest import LiveServer, free_port

SPACE = "haven:honest"
# The upstream deadline of this module's proxy. Not shorter: the process also runs the memory writer's jobs (e5 and
# USE on earlier tests' exchanges) while the next test's request crosses loopback, and at 1.0 s a plain 200 answer
# missed its deadline once (a 502) on a machine running two suites at once.
TIMEOUT = 2.5


def event(text: str | None = None, finish: str | None = None) -> bytes:
    delta = {"content": text} if text is not None else {}
    return f"data: {json.dumps({'choices': [{'index': 0, 'delta': delta, 'finish_reason': finish}]})}\n\n".encode()


class Misbehaving:
    """An upstream that follows ``self.script`` (a name) for every chat request; counts requests."""

    def __init__(self) -> None:
        outer = self
        self.script = "ok"
        self.requests = 0

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.requests += 1
                try:
                    getattr(outer, "do_" + outer.script)(self)
                except OSError:
                    pass
                self.close_connection = True

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    # -- helpers

    @staticmethod
    def head(h, ctype: str = "text/event-stream", **extra) -> None:
        h.send_response(200)
        h.send_header("Content-Type", ctype)
        for k, v in extra.items():
            h.send_header(k.replace("_", "-"), v)
        if "Content_Length" not in extra and "Transfer_Encoding" not in extra:
            h.send_header("Connection", "close")  # the body ends when the connection does
        h.end_headers()

    @staticmethod
    def send(h, data: bytes, pause: float = 0.0) -> None:
        h.wfile.write(data)
        h.wfile.flush()
        if pause:
            time.sleep(pause)

    # -- scripts

    def do_ok(self, h) -> None:
        self.head(h)
        for piece in (event("I "), event("remember."), event(finish="stop"), b"data: [DONE]\n\n"):
            self.send(h, piece)

    def do_finish_no_done(self, h) -> None:  # some servers end with finish_reason and no [DONE]
        self.head(h)
        self.send(h, event("whole ") + event("answer", finish="stop"))

    def do_stall(self, h) -> None:
        self.head(h)
        self.send(h, event("I "), pause=TIMEOUT * 3)
        self.send(h, event("remember.") + b"data: [DONE]\n\n")

    def do_cut(self, h) -> None:
        self.head(h)
        self.send(h, event("I ") + event("rem"))

    def do_cut_inside_event(self, h) -> None:
        self.head(h)
        self.send(h, event("I ") + b'data: {"choices": [{"index": 0, "del')

    def do_cut_chunked(self, h) -> None:
        self.head(h, Transfer_Encoding="chunked")
        piece = event("I ")
        self.send(h, f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
        h.connection.shutdown(socket.SHUT_RDWR)

    def do_garbage_sse(self, h) -> None:
        self.head(h)
        self.send(h, b"data: this is not json\n\nevent: ping\ndata: {\"unrelated\": 1}\n\ndata: [DONE]\n\n")

    def do_upstream_error_event(self, h) -> None:
        self.head(h)
        self.send(h, event("I ") + b'data: {"error": {"message": "overloaded", "type": "server_error"}}\n\n')

    def do_not_json(self, h) -> None:
        body = b"<html>gateway says hi</html>"
        self.head(h, "application/json", Content_Length=str(len(body)))
        self.send(h, body)

    def do_json_not_completion(self, h) -> None:
        body = b'{"object": "list", "data": []}'
        self.head(h, "application/json", Content_Length=str(len(body)))
        self.send(h, body)

    def do_trickle(self, h) -> None:  # every byte within the read timeout, the whole body far past the deadline
        body = json.dumps({"choices": [{"message": {"role": "assistant", "content": "x" * 8}}]}).encode()
        self.head(h, "application/json", Content_Length=str(len(body)))
        for i in range(len(body)):
            self.send(h, body[i:i + 1], pause=TIMEOUT / 4)

    def do_hold(self, h) -> None:  # the request arrived; no answer comes in time
        time.sleep(TIMEOUT * 3)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def upstream():
    u = Misbehaving()
    yield u
    u.close()


@pytest.fixture(scope="module")
def proxy(tmp_path_factory, upstream):
    brain = Brain.open(tmp_path_factory.mktemp("honest") / "data",
                       {"server": {"default_space": SPACE},
                        "upstream": {"base_url": upstream.url, "timeout_s": TIMEOUT, "retries": 2}})
    server = LiveServer(brain)
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield brain, client
    server.close()
    brain.close()


def ask(client, session: str, stream: bool = True) -> httpx.Response:
    return client.post("/v1/chat/completions", headers={"X-Ombre-Session-Id": session},
                       json={"model": "m", "stream": stream,
                             "messages": [{"role": "user", "content": f"我最近在学陶艺，做了一个杯子 {session}"}]})


def jobs(brain, session: str) -> list[dict]:
    every = brain.gateway.ingest.table.list(states=("pending", "running", "done", "failed", "dead"))
    return [j for j in every if j["session"] == session]


def sdk_events(body: bytes) -> list[dict]:
    """Read an SSE body the way the OpenAI SDKs do: stop at [DONE], raise on an event carrying "error"."""
    out = []
    for raw_event in body.replace(b"\r\n", b"\n").split(b"\n\n"):
        data = b"\n".join(line[5:].strip() for line in raw_event.split(b"\n") if line.startswith(b"data:"))
        if not data:
            continue
        if data == b"[DONE]":
            break
        obj = json.loads(data)  # a half event here would be a JSON error in the client, not a clean one
        if isinstance(obj, dict) and obj.get("error"):
            raise UpstreamStreamError(obj["error"])
        out.append(obj)
    return out


class UpstreamStreamError(Exception):
    pass


@pytest.mark.parametrize("script,code", [("stall", "upstream_timeout"), ("cut", "upstream_incomplete"),
                                         ("cut_inside_event", "upstream_incomplete"),
                                         ("cut_chunked", "upstream_broken"), ("garbage_sse", None)])
def test_a_broken_stream_ends_with_an_error_event_and_writes_nothing(proxy, upstream, script, code):
    brain, client = proxy
    upstream.script = script
    before = upstream.requests
    r = ask(client, script)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    assert b"[DONE]" not in r.content or script == "garbage_sse"
    if code is not None:
        with pytest.raises(UpstreamStreamError) as info:
            sdk_events(r.content)
        assert info.value.args[0]["code"] == code and info.value.args[0]["message"]
        assert r.content.endswith(b"\n\n") and r.content.count(b'"error"') == 1
    assert upstream.requests - before == 1  # delivered: never sent again
    assert jobs(brain, script) == []  # a broken or garbage answer is not an exchange


def test_an_upstream_error_event_passes_through_alone(proxy, upstream):
    brain, client = proxy
    upstream.script = "upstream_error_event"
    r = ask(client, "own-error")
    with pytest.raises(UpstreamStreamError) as info:
        sdk_events(r.content)
    assert info.value.args[0]["message"] == "overloaded" and r.content.count(b'"error"') == 1
    assert jobs(brain, "own-error") == []


@pytest.mark.parametrize("script", ["ok", "finish_no_done"])
def test_a_whole_stream_passes_through_and_is_written(proxy, upstream, script):
    brain, client = proxy
    upstream.script = script
    r = ask(client, "whole-" + script)
    assert [e["choices"][0]["delta"].get("content") for e in sdk_events(r.content)][:2] in (
        ["I ", "remember."], ["whole ", "answer"])
    assert b'"error"' not in r.content
    (job,) = jobs(brain, "whole-" + script)
    assert job["payload"]["assistant"] in ("I remember.", "whole answer")


@pytest.mark.parametrize("script", ["not_json", "json_not_completion"])
def test_a_non_completion_200_passes_through_and_writes_nothing(proxy, upstream, script):
    brain, client = proxy
    upstream.script = script
    for stream in (False, True):
        r = ask(client, f"{script}-{stream}", stream=stream)
        assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
        assert jobs(brain, f"{script}-{stream}") == []


@pytest.mark.parametrize("script,stream", [("trickle", False), ("hold", False), ("hold", True)])
def test_the_timeout_is_a_deadline_and_a_delivered_request_is_never_resent(proxy, upstream, script, stream):
    brain, client = proxy
    upstream.script = script
    before = upstream.requests
    start = time.monotonic()
    r = ask(client, f"{script}-deadline-{stream}", stream=stream)
    elapsed = time.monotonic() - start
    assert r.status_code == 502 and r.json()["error"]["code"] == "upstream_timeout", r.text
    assert upstream.requests - before == 1
    assert elapsed < TIMEOUT * 2.5, elapsed  # generous: three attempts would take three timeouts
    assert jobs(brain, f"{script}-deadline-{stream}") == []


def test_only_requests_that_never_arrived_are_retried(tmp_path):
    """Connection refused is retried (nothing reached anyone), within the deadline."""
    brain = Brain.open(tmp_path / "data", {"upstream": {"base_url": f"http://127.0.0.1:{free_port()}/v1",
                                                        "timeout_s": 5, "retries": 2}})
    try:
        start = time.monotonic()
        with pytest.raises(Exception) as info:
            brain.gateway.upstream.post("chat/completions", b"{}")
        assert getattr(info.value, "code", None) == "upstream_unreachable"
        assert "3 attempts" in info.value.message and time.monotonic() - start < 5
    finally:
        brain.close()


def test_sse_text_tells_a_whole_completion_from_a_broken_one():
    whole = SSEText()
    whole.feed(event("a") + event("b", finish="stop"))
    assert whole.complete and whole.text == "ab" and not whole.done
    cut = SSEText()
    cut.feed(event("a") + event("b"))
    assert not cut.finished and not cut.complete
    junk = SSEText()
    junk.feed(b"data: nonsense\n\ndata: [DONE]\n\n")
    assert junk.finished and not junk.complete and junk.events == 0
    err = SSEText()
    err.feed(event("a") + b'data: {"error": {"message": "x"}}\n\ndata: [DONE]\n\n')
    assert err.error and not err.complete
