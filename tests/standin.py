"""The stand-in upstream LLM: a small real OpenAI-compatible HTTP server on loopback (http.server).

The tests use it in-process (``tests/conftest.py`` re-exports it); ``make e2e-openwebui`` runs it beside a real
frontend. It records every request, answers ``GET /v1/models`` with ``models`` and chat calls from a script.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class StandInUpstream:
    """A real OpenAI-compatible LLM stand-in on loopback (http.server): records requests, answers from a script.

    ``status`` != 200 answers every chat call with that status and ``error_body``; ``delay`` slows
    chat answers; streamed answers send ``chunks`` as SSE events ``chunk_delay`` apart. Calls from
    the LLM extractor (recognised by its system prompt) answer ``extraction``, each one delayed
    by the next value popped from ``extract_delays`` and failing while ``extract_status`` != 200.
    ``responder`` (a function of the request body returning the reply text, or None for the default)
    scripts answers per request. ``GET /v1/models`` lists ``models`` (status ``models_status``).
    """

    def __init__(self, port: int = 0, on_request: Callable[[dict], None] | None = None) -> None:
        from ombre_brain.writing.extractor import EXTRACTOR_PROMPT

        self.reset()
        self.on_request = on_request
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _send(self, status: int, body: bytes, ctype: str = "application/json", extra=()) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                for k, v in extra:
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                outer.requests.append({"method": "GET", "path": self.path, "headers": dict(self.headers), "raw": b"",
                                       "body": None, "extractor": False})
                if self.path.rstrip("/") != "/v1/models":
                    return self._send(404, b'{"error": {"message": "no such route"}}')
                if outer.models_status != 200:
                    return self._send(outer.models_status, outer.error_body)
                data = [{"id": m, "object": "model", "created": 0, "owned_by": "stand-in"} for m in outer.models]
                return self._send(200, json.dumps({"object": "list", "data": data}).encode())

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = json.loads(raw)
                msgs = body.get("messages") or [{}]
                extractor = msgs[0].get("content") == EXTRACTOR_PROMPT
                record = {"method": "POST", "path": self.path, "headers": dict(self.headers), "raw": raw, "body": body,
                          "extractor": extractor, "at": time.time()}
                outer.requests.append(record)
                if outer.on_request is not None:
                    outer.on_request(record)
                try:
                    if extractor:
                        time.sleep(outer.extract_delays.pop(0) if outer.extract_delays else 0)
                        if outer.extract_status != 200:
                            return self._send(outer.extract_status, outer.error_body)
                        content = json.dumps(outer.extraction, ensure_ascii=False)
                        return self._send(200, json.dumps({"choices": [{"message": {
                            "role": "assistant", "content": content}}]}).encode())
                    time.sleep(outer.delay)
                    if outer.status != 200:
                        return self._send(outer.status, outer.error_body, extra=[("Retry-After", "7")])
                    scripted = outer.responder(body) if outer.responder is not None else None
                    reply = outer.reply if scripted is None else scripted
                    if body.get("stream") is not True or outer.ignore_stream:
                        return self._send(200, json.dumps({
                            "id": "cmpl-1", "object": "chat.completion", "model": body.get("model"),
                            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply},
                                         "finish_reason": "stop"}]}, ensure_ascii=False).encode())
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Connection", "close")
                    self.end_headers()
                    chunks = outer.chunks if scripted is None else _pieces(scripted)
                    for i, piece in enumerate([*chunks, None]):
                        if i:
                            time.sleep(outer.chunk_delay)
                        if piece is None:
                            self.wfile.write(b"data: [DONE]\n\n")
                        else:
                            event = {"choices": [{"index": 0, "delta": {"content": piece}}]}
                            self.wfile.write(f"data: {json.dumps(event, ensure_ascii=False)}\n\n".encode())
                        self.wfile.flush()
                except OSError:  # the caller went away (killed server, timeout)
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.server.block_on_close = False
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def reset(self) -> None:
        """Forget recorded requests and go back to the default script."""
        self.requests: list[dict] = []
        self.status, self.error_body, self.delay = 200, b'{"error": {"message": "stand-in error"}}', 0.0
        self.reply = "I remember the sea."
        self.chunks = ["I ", "remember ", "the ", "sea."]
        self.chunk_delay = 0.0
        self.ignore_stream = False  # answer JSON even when asked to stream
        self.extraction: dict = {"user": None, "relationship": None}
        self.extract_delays: list[float] = []
        self.extract_status = 200
        self.responder: Callable[[dict], str | None] | None = None
        self.models = ["stand-in-model", "stand-in-mini"]
        self.models_status = 200

    def chat_requests(self) -> list[dict]:
        return [r for r in self.requests if r["method"] == "POST" and not r["extractor"]]

    def extractor_requests(self) -> list[dict]:
        return [r for r in self.requests if r["extractor"]]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _pieces(text: str, size: int = 8) -> list[str]:
    """A scripted reply in small SSE pieces, so a frontend shows it streaming."""
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]
