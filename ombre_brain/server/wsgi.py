"""The app under waitress, with waitress's own refusals in the API's JSON error shape.

Waitress answers some requests before Flask ever sees them: a body over its size limit (413),
a header block too large (431), a malformed request line or chunked body (400). Its stock answer
is plain text; a client of this API always gets ``{"error": {"code", "message"}}`` instead.
"""

from __future__ import annotations

import json

from waitress import create_server
from waitress.channel import HTTPChannel
from waitress.task import ErrorTask

# waitress's error class name -> our error code
CODES = {413: "body_too_large", 431: "headers_too_large", 400: "bad_request", 501: "not_implemented"}
# waitress needs a little slack above the app's own limit so Flask, not waitress, refuses a body
# that is only just over it (Flask's answer names the limit); larger ones never reach the app.
BODY_SLACK = 1024


class JSONErrorTask(ErrorTask):
    """Waitress's error answer, as the JSON every other error of this server has."""

    def execute(self) -> None:
        error = self.request.error
        code = CODES.get(error.code, "http_error")
        message = error.reason
        if error.code == 413:
            limit = self.channel.server.adj.max_request_body_size - BODY_SLACK
            message = f"request body is larger than the limit of {limit} bytes"
        elif error.body:
            message = f"{error.reason}: {error.body}"
        body = json.dumps({"error": {"code": code, "message": message}}, ensure_ascii=False).encode("utf-8")
        self.status = f"{error.code} {error.reason}"
        self.response_headers.append(("Content-Type", "application/json"))
        self.set_close_on_finish()
        self.content_length = len(body)
        self.write(body)


class JSONErrorChannel(HTTPChannel):
    error_task_class = JSONErrorTask


def make_server(app, *, host: str, port: int, threads: int, max_body_bytes: int):
    """A waitress server for ``app`` whose own refusals (413, 431, 400) are JSON errors."""
    server = create_server(app, host=host, port=port, threads=threads, asyncore_use_poll=True,
                           max_request_body_size=max_body_bytes + BODY_SLACK)
    for listener in [server, *getattr(server, "map", {}).values()]:  # one, or one per address of a name
        if hasattr(listener, "channel_class"):
            listener.channel_class = JSONErrorChannel
    return server


__all__ = ["JSONErrorChannel", "make_server"]
