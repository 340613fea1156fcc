"""A small client for the OpenAI-compatible upstream LLM (design §8).

Both the chat proxy and the LLM extractor go through it, so timeouts, retries and the API key
come from one place (`upstream.*` in config).

Retries. Only a failure that provably never reached the upstream is retried: the connection
could not be made (refused, unreachable, connect timeout) or no pooled connection came free.
Once the request may have been delivered (a read timeout, a reset or an answer cut short) it is
never sent again, because the upstream may already be generating, and billing, an answer. A
received 4xx/5xx is the upstream's answer and is returned as is.

Deadline. ``upstream.timeout_s`` bounds the whole call, retries and pauses included: every
attempt gets only the time left, and a non-streaming answer must be complete by then. A
streamed answer must start within it, and may then pause at most that long between chunks.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Mapping
from typing import Any

import httpx

from ..config import UpstreamConfig
from ..errors import UpstreamError
from ..text import message_text

log = logging.getLogger("ombre_brain")

RETRY_PAUSE_S = 0.25   # first pause between attempts; doubles each time
RETRY_PAUSE_MAX_S = 2.0
# Failures that prove the request was never sent: safe to try again.
NEVER_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


def transport_error(exc: httpx.HTTPError, timeout_s: float, *, during: str = "answer") -> UpstreamError:
    """The 502 for a transport failure after the request may have reached the upstream."""
    if isinstance(exc, httpx.TimeoutException):
        what = (f"stream stalled for more than {timeout_s:g}s" if during == "stream"
                else f"answer did not arrive within {timeout_s:g}s")
        return UpstreamError(f"the upstream LLM's {what}", code="upstream_timeout")
    return UpstreamError(f"the upstream LLM broke off its {during} ({type(exc).__name__})", code="upstream_broken")


class UpstreamNotConfigured(UpstreamError):
    """Raised when a call needs the upstream but `upstream.base_url` is not set."""

    code = "upstream_not_configured"
    status = 503


class Upstream:
    """One pooled httpx client for `upstream.base_url`; safe to share between threads."""

    def __init__(self, cfg: UpstreamConfig, env: Mapping[str, str] | None = None) -> None:
        self.cfg = cfg
        self.env = os.environ if env is None else env
        self._client: httpx.Client | None = None
        self._lock = threading.Lock()

    @property
    def configured(self) -> bool:
        return bool(self.cfg.base_url)

    def url(self, path: str) -> str:
        if not self.cfg.base_url:
            raise UpstreamNotConfigured(
                "no upstream LLM is configured: set upstream.base_url (e.g. http://127.0.0.1:9000/v1) in the config")
        return self.cfg.base_url.rstrip("/") + "/" + path.lstrip("/")

    def headers(self, *, stream: bool = False) -> dict[str, str]:
        """JSON headers plus `Authorization: Bearer` from the env var named by upstream.api_key_env."""
        h = {"Content-Type": "application/json", "Accept": "text/event-stream" if stream else "application/json"}
        key = self.env.get(self.cfg.api_key_env) if self.cfg.api_key_env else None
        if key:
            h["Authorization"] = f"Bearer {key}"
        if stream:
            h["Accept-Encoding"] = "identity"  # pass SSE bytes through as they arrive, never a gzip stream
        return h

    @property
    def client(self) -> httpx.Client:
        with self._lock:
            if self._client is None:
                self._client = httpx.Client(timeout=httpx.Timeout(self.cfg.timeout_s), follow_redirects=False)
            return self._client

    def post(self, path: str, content: bytes, *, stream: bool = False) -> httpx.Response:
        """POST within the `upstream.timeout_s` deadline, retrying only requests that were never sent.

        Returns the upstream's response whatever its status. With ``stream=True`` the body is
        not read yet: the caller iterates it (each read may wait the configured timeout) and
        must close the response. Without it the whole body is read before the deadline.
        """
        return self._send("POST", path, content, stream=stream)

    def get(self, path: str) -> httpx.Response:
        """GET (the model list) under the same deadline, key and retry rules; the body is read whole."""
        return self._send("GET", path, None, stream=False)

    def _send(self, method: str, path: str, content: bytes | None, *, stream: bool) -> httpx.Response:
        url = self.url(path)
        headers = self.headers(stream=stream)
        if content is None:
            headers.pop("Content-Type", None)
        attempts = self.cfg.retries + 1
        deadline = time.monotonic() + self.cfg.timeout_s
        last: Exception | None = None
        for attempt in range(attempts):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            request = self.client.build_request(method, url, content=content, headers=headers,
                                                timeout=httpx.Timeout(left))
            try:
                resp = self.client.send(request, stream=True)
            except NEVER_SENT as exc:
                last = exc
                pause = min(RETRY_PAUSE_S * 2 ** attempt, RETRY_PAUSE_MAX_S)
                if attempt + 1 < attempts and time.monotonic() + pause < deadline:
                    log.info("upstream %s could not be reached (%s); retrying in %.2fs", url, type(exc).__name__,
                             pause)
                    time.sleep(pause)
                    continue
                break
            except httpx.HTTPError as exc:  # sent, or maybe sent: never again
                raise transport_error(exc, self.cfg.timeout_s) from None
            if not stream:
                self.read(resp, deadline)
            return resp
        if isinstance(last, httpx.TimeoutException) or last is None:
            raise UpstreamError(f"the upstream LLM at {self.cfg.base_url} could not be reached within "
                                f"{self.cfg.timeout_s:g}s", code="upstream_timeout")
        raise UpstreamError(f"cannot reach the upstream LLM at {self.cfg.base_url} after {attempt + 1} attempts: "
                            f"{type(last).__name__}", code="upstream_unreachable")

    def read(self, resp: httpx.Response, deadline: float | None = None) -> None:
        """Read a whole answer by the deadline (default: the timeout from now), then close it.

        An answer that breaks off or runs past the deadline is the 502 of :func:`transport_error`.
        """
        if deadline is None:
            deadline = time.monotonic() + self.cfg.timeout_s
        chunks = []
        try:
            for chunk in resp.iter_bytes():
                chunks.append(chunk)
                if time.monotonic() > deadline:
                    raise httpx.ReadTimeout("the deadline passed while the answer was still arriving")
        except httpx.HTTPError as exc:
            raise transport_error(exc, self.cfg.timeout_s) from None
        finally:
            resp.close()
        resp._content = b"".join(chunks)  # what Response.read() would have stored

    def chat(self, payload: dict[str, Any]) -> dict[str, Any]:
        """A non-streaming chat completion whose non-2xx answer is an error (for the extractor)."""
        resp = self.post("chat/completions", json.dumps(payload, ensure_ascii=False).encode())
        if resp.status_code >= 400:
            raise UpstreamError(f"upstream answered {resp.status_code}: {resp.text[:300]}", code="upstream_status")
        try:
            data = resp.json()
        except ValueError:
            raise UpstreamError("upstream answered with a body that is not JSON", code="upstream_bad_body") from None
        if not isinstance(data, dict):
            raise UpstreamError("upstream answered with JSON that is not an object", code="upstream_bad_body")
        return data

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None


def completion_text(data: Any) -> str:
    """The assistant text of a non-streaming chat completion (first choice)."""
    return parse_completion(data) or ""


def parse_completion(data: Any) -> str | None:
    """The first choice's text of a chat completion, or None when ``data`` is not one."""
    try:
        message = data["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        return None
    return message_text(message.get("content")) if isinstance(message, Mapping) else None


class SSEText:
    """Collects the assistant text from `data:` lines of a streamed completion, fed raw chunks.

    It also says whether the stream was a whole completion: ``events`` counts the completion
    chunks it understood, ``finished`` says the upstream ended its answer (``[DONE]`` or a
    ``finish_reason``), and ``error`` that the upstream sent an error event of its own.
    """

    def __init__(self) -> None:
        self._buf = b""
        self.parts: list[str] = []
        self.done = False
        self.events = 0
        self.finish_reason: str | None = None
        self.error = False

    def feed(self, chunk: bytes) -> None:
        self._buf += chunk
        while b"\n" in self._buf:
            line, self._buf = self._buf.split(b"\n", 1)
            self._line(line.strip())

    def _line(self, line: bytes) -> None:
        if not line.startswith(b"data:"):
            return
        data = line[5:].strip()
        if data == b"[DONE]":
            self.done = True
            return
        try:
            obj = json.loads(data)
        except ValueError:
            return
        if isinstance(obj, Mapping) and obj.get("error"):
            self.error = True
            return
        try:
            choice = obj["choices"][0]
            delta = choice.get("delta") or {}
        except (KeyError, IndexError, TypeError, AttributeError):
            return
        if not isinstance(delta, Mapping):
            return
        self.events += 1
        if isinstance(choice.get("finish_reason"), str):
            self.finish_reason = choice["finish_reason"]
        text = message_text(delta.get("content"))
        if text:
            self.parts.append(text)

    @property
    def text(self) -> str:
        return "".join(self.parts)

    @property
    def finished(self) -> bool:
        """The upstream said its answer is over (``[DONE]``, or a chunk with a ``finish_reason``)."""
        return self.done or self.finish_reason is not None

    @property
    def complete(self) -> bool:
        """A whole, understood completion: worth writing to memory."""
        return self.finished and self.events > 0 and not self.error
