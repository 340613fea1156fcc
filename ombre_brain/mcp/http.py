"""``/mcp`` inside ``ombre-brain serve``: the SDK's streamable-HTTP app, answered from waitress threads.

``serve`` is Flask on waitress (WSGI); the SDK's streamable-HTTP app is ASGI (Starlette). The
arrangement, chosen so that nothing about ``serve`` changes for the ``/v1`` API:

- The MCP app runs in **stateless, JSON-response** mode (the mode Ombre-Brain itself runs):
  every POST is one complete JSON-RPC exchange answered with one JSON body — no session id, no
  SSE stream to keep open — so a WSGI worker can carry it like any other request. ``GET`` (a
  server-to-client event stream) and ``DELETE`` (ending a session) answer 405, as the MCP spec
  allows a server that offers neither.
- The SDK's session manager runs on one asyncio loop in a daemon thread, started by the first
  ``/mcp`` request. A waitress thread hands the request to that loop and waits for the whole
  response; tool functions run in the loop's worker threads, so a slow tool never stalls it.
- ``/mcp`` is an ordinary Flask route: the bearer token is checked by the same code as every
  ``/v1`` route (401/403 as JSON, before the MCP app sees the request), and the token's scope,
  ``X-Ombre-Space`` and the session label travel with the request to the tools.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import weakref
from typing import Any

from flask import Blueprint, Flask, Response, current_app, jsonify, request

from ..errors import OmbreError
from ..web import current_scope, current_side
from .access import Access, session_id
from .server import ACCESS_KEY, OmbreMCP

__all__ = ["McpBridge", "bp"]

bp = Blueprint("mcp", __name__)

START_TIMEOUT_S = 30


class McpUnavailable(OmbreError):
    """Raised when the MCP app's event loop did not start, or a tool call outlived ``mcp.tool_timeout_s``."""

    code = "mcp_unavailable"
    status = 503


class McpBridge:
    """The MCP app's session manager on its own event loop; :meth:`exchange` runs one request on it."""

    def __init__(self, mcp: OmbreMCP, *, host: str, timeout_s: float, max_body_bytes: int) -> None:
        self.mcp = mcp
        self.timeout_s = timeout_s
        mcp.server.streamable_http_app(stateless_http=True, json_response=True, host=host,
                                       max_request_body_size=max_body_bytes)
        self.manager = mcp.server.session_manager
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._failed: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="ombre-mcp", daemon=True)
        self._thread.start()
        if not self._ready.wait(START_TIMEOUT_S) or self._failed is not None:
            why = type(self._failed).__name__ if self._failed else "timeout"
            raise McpUnavailable(f"the MCP server did not start ({why})")

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # the loop is gone: say so to every later request
            self._failed = exc
            self._ready.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with self.manager.run():
            self._ready.set()
            await self._stop.wait()

    def close(self) -> None:
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(stop.set)
            except RuntimeError:  # closed in between
                return
            self._thread.join(5)

    def exchange(self, scope: dict[str, Any], body: bytes) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """One HTTP exchange with the ASGI app: (status, headers, body)."""
        if self._failed is not None or self._loop is None:
            raise McpUnavailable("the MCP server's event loop has stopped; restart `ombre-brain serve`")
        future = asyncio.run_coroutine_threadsafe(self._asgi(scope, body), self._loop)
        try:
            return future.result(self.timeout_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise McpUnavailable(f"the tool call took longer than mcp.tool_timeout_s ({self.timeout_s:g} s)",
                                 code="mcp_timeout") from None

    async def _asgi(self, scope: dict[str, Any], body: bytes) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        sent = False
        status, headers, chunks = 500, [], []

        async def receive() -> dict:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await asyncio.Event().wait()  # the client stays connected until the response is complete
            return {"type": "http.disconnect"}

        async def send(message: dict) -> None:
            nonlocal status, headers
            if message["type"] == "http.response.start":
                status, headers = message["status"], list(message.get("headers") or [])
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))

        await self.manager.handle_request(scope, receive, send)
        return int(status), headers, b"".join(chunks)


def _bridge(app: Flask) -> McpBridge:
    ext = app.extensions
    with ext.setdefault("ombre_mcp_lock", threading.Lock()):
        bridge = ext.get("ombre_mcp")
        if bridge is None:
            brain = app.config["BRAIN"]
            bridge = McpBridge(OmbreMCP(brain), host=app.config.get("OMBRE_BIND_HOST", "127.0.0.1"),
                               timeout_s=brain.config.mcp.tool_timeout_s,
                               max_body_bytes=brain.config.server.max_body_bytes)
            ext["ombre_mcp"] = bridge
            weakref.finalize(app, bridge.close)
        return bridge


@bp.route("/mcp", methods=["GET", "POST", "DELETE"])
def endpoint():
    """The MCP tools over streamable HTTP, with the /v1 API's tokens and scopes."""
    scope = current_scope()  # 401 here, as on every /v1 route, before the MCP app sees anything
    if request.method != "POST":
        resp = jsonify({"error": {"code": "method_not_allowed", "message": "this MCP server is stateless: POST "
                                  "JSON-RPC messages to /mcp (there is no event stream and no session to end)"}})
        resp.status_code = 405
        resp.headers["Allow"] = "POST"
        return resp
    body = request.get_data(cache=False)
    session = request.headers.get("X-Ombre-Session-Id") or request.headers.get("Mcp-Session-Id")
    access = Access(scope=scope, header_space=request.headers.get("X-Ombre-Space") or None,
                    session=session_id(session), bound_side=current_side())
    asgi_scope = {
        "type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
        "method": "POST", "scheme": request.scheme, "path": "/mcp", "raw_path": b"/mcp",
        "query_string": request.query_string, "root_path": "",
        "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in request.headers.items()],
        "client": (request.remote_addr or "", 0),
        "server": (request.environ.get("SERVER_NAME", ""), int(request.environ.get("SERVER_PORT") or 0)),
        ACCESS_KEY: access,
    }
    status, headers, payload = _bridge(current_app._get_current_object()).exchange(asgi_scope, body)
    out = Response(payload, status=status)
    for k, v in headers:
        name = k.decode("latin-1")
        if name.lower() not in ("content-length", "connection", "transfer-encoding"):
            out.headers[name] = v.decode("latin-1")
    return out
