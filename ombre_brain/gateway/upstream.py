"""A small client for the OpenAI-compatible upstream LLM (DESIGN §8).

Both the chat proxy and the LLM extractor go through it, so timeouts, retries and the API key
come from one place (`upstream.*` in config). Only failures to get an answer at all (connect
errors, timeouts) are retried: a received 4xx/5xx is the upstream's answer and is returned as is,
because retrying it would hide rate limits from the client and could bill a request twice.
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
        """POST with up to `upstream.retries` retries on connect errors and timeouts.

        Returns the upstream's response whatever its status. With ``stream=True`` the body is
        not read yet: the caller iterates it and must close the response.
        """
        url = self.url(path)
        headers = self.headers(stream=stream)
        attempts = self.cfg.retries + 1
        last: Exception | None = None
        for attempt in range(attempts):
            try:
                request = self.client.build_request("POST", url, content=content, headers=headers)
                return self.client.send(request, stream=stream)
            except (httpx.TimeoutException, httpx.ConnectError, httpx.RemoteProtocolError) as exc:
                last = exc
                if attempt + 1 < attempts:
                    pause = min(RETRY_PAUSE_S * 2 ** attempt, RETRY_PAUSE_MAX_S)
                    log.info("upstream %s failed (%s); retrying in %.2fs", url, type(exc).__name__, pause)
                    time.sleep(pause)
        if isinstance(last, httpx.TimeoutException):
            raise UpstreamError(f"the upstream LLM at {self.cfg.base_url} did not answer within "
                                f"{self.cfg.timeout_s:g}s ({attempts} attempts)", code="upstream_timeout")
        raise UpstreamError(f"cannot reach the upstream LLM at {self.cfg.base_url} after {attempts} attempts: "
                            f"{type(last).__name__}", code="upstream_unreachable")

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
    try:
        return message_text(data["choices"][0]["message"].get("content"))
    except (KeyError, IndexError, TypeError, AttributeError):
        return ""


class SSEText:
    """Collects the assistant text from `data:` lines of a streamed completion, fed raw chunks."""

    def __init__(self) -> None:
        self._buf = b""
        self.parts: list[str] = []
        self.done = False

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
            delta = obj["choices"][0].get("delta") or {}
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            return
        text = message_text(delta.get("content")) if isinstance(delta, Mapping) else ""
        if text:
            self.parts.append(text)

    @property
    def text(self) -> str:
        return "".join(self.parts)
