"""`/v1/inject`, `/v1/exchanges` and the OpenAI-compatible `/v1/chat/completions` proxy (design §8, §17).

The proxy changes exactly one thing in the request: it inserts the turn's memory block as a
system message just before the last user message. Everything else, including the upstream's
errors, passes through untouched. Writing the exchange to memory is only queued here; the
worker in :mod:`ombre_brain.gateway.ingest` does it later, so the live reply never waits for it.

A client's background task (a chat title, tags, follow-up suggestions, a summary: see
:mod:`ombre_brain.gateway.clients`) is not the user talking: it is forwarded byte for byte, with no memory,
no write and no round of the session, and answered with ``X-Ombre-Memory: skipped-task``. A request that names
no session gets the one of its chat (the chat id its client sends, else one derived from the chat's opening).
``GET /v1/models`` passes the upstream's model list on, or lists ``upstream.models`` when it has none.

Honesty: an upstream that fails before answering is a 502; a stream that stalls, breaks off or
ends unfinished after its headers went out ends with an SSE error event the OpenAI SDKs raise
(never a quiet end); and only a whole, understood chat completion is queued as an exchange.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import httpx
from flask import Blueprint, Response, jsonify, request, stream_with_context

from ..errors import UpstreamError, ValidationError
from ..gateway.clients import CLIENTS, Reading
from ..gateway.upstream import SSEText, UpstreamNotConfigured, message_text, parse_completion, transport_error
from ..turn.conversation import split_messages
from ..web import authorize_space, current_scope, get_brain, json_body, token_default_space

log = logging.getLogger("ombre_brain")

bp = Blueprint("gateway", __name__)

INJECT_FIELDS = ("space", "session_id", "query", "messages", "now")
EXCHANGE_FIELDS = ("space", "session_id", "messages", "reply", "now", "model")
MAX_QUERY_CHARS = 8000
# Upstream response headers worth passing on (rate limits, request ids); the rest is hop-by-hop.
PASS_HEADERS = ("retry-after", "x-request-id", "openai-processing-ms", "openai-model")
PASS_PREFIXES = ("x-ratelimit-",)


def _session(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > 200:
        raise ValidationError("expected a non-empty string of at most 200 characters", field=name)
    return value


@bp.post("/v1/inject")
def inject():
    """One turn of the read pipeline for a gateway that builds its own prompt: the §11 TURN."""
    body = json_body()
    unknown = sorted(set(body) - set(INJECT_FIELDS))
    if unknown:
        raise ValidationError(f"unknown field(s) {', '.join(unknown)}; expected {', '.join(INJECT_FIELDS)}",
                              code="unknown_field")
    space = authorize_space(body.get("space"))
    session = _session(body.get("session_id", "default"), "session_id")
    query, context = body.get("query"), None
    if body.get("messages") is not None:  # the conversation in OpenAI format (design §14)
        last, context = split_messages(body["messages"])
        query = last if query is None else query
    if not isinstance(query, str):
        raise ValidationError("is required and must be a string (the user's message), or give `messages`",
                              field="query")
    now = body.get("now")
    if now is not None and not isinstance(now, str):
        raise ValidationError("expected an ISO-8601 time with offset, e.g. 2026-11-30T20:00:00+08:00", field="now")
    return jsonify(get_brain().turn(space, session, query, now, context=context).to_dict())


@bp.post("/v1/exchanges")
def exchanges():
    """The write decision on one finished exchange, for a gateway that calls its LLM itself (design §17).

    Runs now and answers with the ids written or joined (``[]`` for noise); idempotent by the exchange's id, so
    sending it again writes nothing new and answers the same ids."""
    body = json_body()
    unknown = sorted(set(body) - set(EXCHANGE_FIELDS))
    if unknown:
        raise ValidationError(f"unknown field(s) {', '.join(unknown)}; expected {', '.join(EXCHANGE_FIELDS)}",
                              code="unknown_field")
    space = authorize_space(body.get("space"))
    session = _session(body.get("session_id", "default"), "session_id")
    if "reply" not in body:
        raise ValidationError("is required: the assistant's answer to the last user message", field="reply")
    now, model = body.get("now"), body.get("model")
    if now is not None and not isinstance(now, str):
        raise ValidationError("expected an ISO-8601 time with offset, e.g. 2026-11-30T20:00:00+08:00", field="now")
    if model is not None and not isinstance(model, str):
        raise ValidationError("expected the model name as a string", field="model")
    ids = get_brain().ingest_exchange(space, session, body.get("messages"), body["reply"], now=now, model=model)
    return jsonify({"bucket_ids": ids})


# ---------------------------------------------------------------- the proxy


def _proxy_space() -> str:
    """X-Ombre-Space if sent (checked against the token), else the token's only space, else the default."""
    header = request.headers.get("X-Ombre-Space")
    if header:
        return authorize_space(header)
    return token_default_space() or authorize_space(get_brain().config.server.default_space)


def _last_user(messages: list) -> int | None:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "user":
            return i
    return None


def _memory_block(space: str, session: str, query: str, context: list) -> tuple[str | None, dict[str, str]]:
    """(rendered block or None, our response headers): ``X-Ombre-Memory`` (injected, none or unavailable) and,
    when the turn ran, ``X-Ombre-Space-Known`` (false: nothing was ever written to the space). A failing turn
    never breaks the chat."""
    try:
        turn = get_brain().turn(space, session, query[:MAX_QUERY_CHARS], context=context)
    except Exception:
        log.exception("proxy: the memory turn failed; forwarding without memory")
        return None, {"X-Ombre-Memory": "unavailable"}
    known = {"X-Ombre-Space-Known": "true" if turn.space_known else "false"}
    if not (turn.stable or turn.sections) or not turn.rendered.strip():
        return None, {"X-Ombre-Memory": "none", **known}
    return turn.rendered, {"X-Ombre-Memory": "injected", **known}


def _headers(resp: httpx.Response) -> dict[str, str]:
    out = {k: v for k, v in resp.headers.items()
           if k.lower() in PASS_HEADERS or k.lower().startswith(PASS_PREFIXES)}
    if "content-type" in resp.headers:
        out["Content-Type"] = resp.headers["content-type"]
    return out


def _enqueue(space: str, session: str, messages: list, reply: str, model: Any) -> None:
    try:
        get_brain().gateway.enqueue_exchange(space, session, messages, reply,
                                             model=model if isinstance(model, str) else None)
    except Exception:  # writing memory must never fail the live reply
        log.exception("proxy: could not queue the exchange for memory writing")


SESSION_HEADERS = {"header": "X-Ombre-Session-Id", "openwebui": "X-OpenWebUI-Chat-Id"}


def _reading_session(reading: Reading) -> str:
    """The session the reading found (checked like a header the caller sent), else ``default``."""
    if reading.session is None:
        return "default"
    return _session(reading.session, SESSION_HEADERS.get(reading.session_via, "X-Ombre-Session-Id"))


def _upstream():
    upstream = get_brain().gateway.upstream
    if not upstream.configured:
        raise UpstreamNotConfigured("no upstream LLM is configured: set upstream.base_url "
                                    "(e.g. http://127.0.0.1:9000/v1) in a --config overlay")
    return upstream


@bp.get("/v1/models")
def models():
    """The upstream's model list as it answers it; ``upstream.models`` (else ``upstream.model``) when it lists
    none, cannot be asked (404) or is not configured: a frontend's connection check and model picker need one."""
    current_scope()  # the same token as the chat completions
    cfg = get_brain().config.upstream
    upstream = get_brain().gateway.upstream
    if upstream.configured:
        resp = upstream.get("models")  # UpstreamError -> 502 JSON
        if resp.status_code in (401, 403, 429) or resp.status_code >= 500:
            return Response(resp.content, status=resp.status_code, headers=_headers(resp))
        if resp.status_code < 300 and _lists_models(resp):
            return Response(resp.content, status=resp.status_code, headers=_headers(resp))
    names = list(cfg.models) or ([cfg.model] if cfg.model else [])
    return jsonify({"object": "list", "data": [{"id": n, "object": "model", "created": 0, "owned_by": "upstream"}
                                               for n in names]})


def _lists_models(resp: httpx.Response) -> bool:
    try:
        data = resp.json()
    except ValueError:
        return False
    return isinstance(data, dict) and isinstance(data.get("data"), list) and bool(data["data"])


@bp.post("/v1/chat/completions")
def chat_completions():
    body = json_body()
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        raise ValidationError("expected a non-empty list of message objects", field="messages")
    space = _proxy_space()
    reading = CLIENTS.read(request.headers, body)
    upstream = _upstream()
    if reading.is_task:
        return _forward_task(upstream, body, space, reading)
    session = _reading_session(reading)

    content, memory = request.get_data(), {"X-Ombre-Memory": "none"}
    idx = _last_user(messages)
    if idx is not None:
        block, memory = _memory_block(space, session, message_text(messages[idx].get("content")), messages[:idx])
        if block:
            forwarded = dict(body)
            forwarded["messages"] = [*messages[:idx], {"role": "system", "content": block}, *messages[idx:]]
            content = json.dumps(forwarded, ensure_ascii=False).encode()
    ours = {**memory, "X-Ombre-Space": space, "X-Ombre-Session": session, "X-Ombre-Client": reading.client}

    stream = body.get("stream") is True
    resp = upstream.post("chat/completions", content, stream=stream)  # UpstreamError -> 502 JSON
    is_sse = resp.headers.get("content-type", "").startswith("text/event-stream")
    if not stream or resp.status_code >= 400 or not is_sse:
        if stream:
            upstream.read(resp)  # a stream request answered with JSON (or an error): read it whole
        if resp.status_code < 300:
            _enqueue_completion(space, session, messages, resp, body.get("model"))
        return Response(resp.content, status=resp.status_code, headers=_headers(resp) | ours)

    headers = _headers(resp) | ours | {"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                                       "X-Accel-Buffering": "no"}
    relay = _relay(resp, upstream.cfg.timeout_s, lambda sse: _enqueue(space, session, messages, sse.text,
                                                                       body.get("model")))
    return Response(stream_with_context(relay), status=resp.status_code, headers=headers)


def _forward_task(upstream, body: dict, space: str, reading: Reading) -> Response:
    """A client's background task, byte for byte: no memory turn, nothing queued, no round of any session."""
    log.debug("proxy: %s task %r (%s) forwarded without memory", reading.client, reading.task, reading.via)
    ours = {"X-Ombre-Memory": "skipped-task", "X-Ombre-Task": reading.task or "task", "X-Ombre-Space": space,
            "X-Ombre-Client": reading.client}
    stream = body.get("stream") is True
    resp = upstream.post("chat/completions", request.get_data(), stream=stream)
    if not stream or resp.status_code >= 400 or not resp.headers.get("content-type", "").startswith(
            "text/event-stream"):
        if stream:
            upstream.read(resp)
        return Response(resp.content, status=resp.status_code, headers=_headers(resp) | ours)
    headers = _headers(resp) | ours | {"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                                       "X-Accel-Buffering": "no"}
    return Response(stream_with_context(_relay(resp, upstream.cfg.timeout_s, lambda _sse: None)),
                    status=resp.status_code, headers=headers)


def _enqueue_completion(space: str, session: str, messages: list, resp: httpx.Response, model: Any) -> None:
    """Queue a non-streamed answer, but only one that is a chat completion: garbage writes nothing."""
    try:
        reply = parse_completion(resp.json())
    except ValueError:
        reply = None
    if reply is None:
        log.warning("proxy: the upstream's 200 answer is not a chat completion; nothing is written to memory")
        return
    _enqueue(space, session, messages, reply, model)


def _event_end(buf: bytes) -> int:
    """Where the last complete SSE event in ``buf`` ends (0 when there is none yet)."""
    lf, crlf = buf.rfind(b"\n\n"), buf.rfind(b"\r\n\r\n")
    return max(lf + 2 if lf >= 0 else 0, crlf + 4 if crlf >= 0 else 0)


def error_event(exc: UpstreamError) -> bytes:
    """An SSE error event in the shape the OpenAI SDKs raise on (``data: {"error": {...}}``)."""
    err = {"error": {"message": exc.message, "type": "upstream_error", "code": exc.code, "param": None}}
    return f"data: {json.dumps(err, ensure_ascii=False)}\n\n".encode()


def _relay(resp: httpx.Response, timeout_s: float, on_complete) -> Iterator[bytes]:
    """Pass the upstream's SSE events on as they arrive; end a broken stream with an error event.

    Only whole events are passed on, so a stream cut inside an event never hands the client half
    a JSON line. A stream that stalls past the timeout, breaks off, or ends without finishing its
    answer (no ``[DONE]``, no ``finish_reason``) gets an error event the OpenAI SDKs raise, and
    no ``[DONE]``: the client can tell it from a whole answer. Only a whole, understood
    completion is handed to ``on_complete`` (queued for memory).
    """
    sse = SSEText()
    pending = b""
    failure: UpstreamError | None = None
    try:
        for chunk in resp.iter_bytes():
            sse.feed(chunk)
            pending += chunk
            end = _event_end(pending)
            if end:
                yield pending[:end]
                pending = pending[end:]
    except httpx.HTTPError as exc:  # headers are sent: the stream itself must say it failed
        failure = transport_error(exc, timeout_s, during="stream")
    finally:
        resp.close()
    if failure is None and not sse.finished:
        failure = UpstreamError("the upstream LLM ended the stream before its answer was complete",
                                code="upstream_incomplete")
    if failure is not None:
        log.warning("proxy: upstream stream failed (%s): %s", failure.code, failure.message)
        if not sse.error:  # an error event of the upstream's own has already told the client
            yield error_event(failure)
        return
    if pending:
        yield pending
    if sse.complete:
        on_complete(sse)
    else:
        log.warning("proxy: the upstream's stream held no chat completion; nothing is written to memory")
