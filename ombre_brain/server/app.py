"""The Flask app: HTTP API, debug JSON routes and debug pages, one error policy for all.

Any OmbreError becomes `{"error": {"code", "message"}}` with its 4xx status; anything else
is logged and answered 500 with no traceback, so a caller never sees our internals.
"""

from __future__ import annotations

import logging

from flask import Flask, jsonify
from werkzeug.exceptions import HTTPException

from ..debug_ui import api_debug, api_playground, pages
from ..errors import OmbreError
from ..mcp import http as mcp_http
from . import api_buckets, api_facts, api_forget, api_gateway, api_letters

log = logging.getLogger("ombre_brain")

# The production /v1 API, the MCP tools at /mcp, then the debug JSON routes and pages (blueprints of the same app).
BLUEPRINTS = (api_buckets.bp, api_facts.bp, api_gateway.bp, api_forget.bp, api_letters.bp, mcp_http.bp, api_debug.bp,
              api_playground.bp, pages.bp)


def create_app(brain, *, env_tokens: dict | None = None) -> Flask:
    app = Flask(__name__)
    app.config["BRAIN"] = brain
    app.config["ENV_TOKENS"] = env_tokens
    app.config["MAX_CONTENT_LENGTH"] = brain.config.server.max_body_bytes
    app.json.ensure_ascii = False  # Chinese stays readable UTF-8, never \uXXXX escapes
    app.json.mimetype = "application/json; charset=utf-8"  # and says so, for clients that guess otherwise
    app.json.sort_keys = False

    for bp in BLUEPRINTS:
        app.register_blueprint(bp)

    @app.errorhandler(OmbreError)
    def _ombre_error(exc: OmbreError):
        return jsonify(exc.to_dict()), exc.status

    @app.errorhandler(HTTPException)
    def _http_error(exc: HTTPException):
        code = {413: "body_too_large", 404: "not_found", 405: "method_not_allowed"}.get(exc.code, "http_error")
        msg = exc.description
        if exc.code == 413:
            msg = f"request body is larger than the limit of {brain.config.server.max_body_bytes} bytes"
        return jsonify({"error": {"code": code, "message": msg}}), exc.code

    @app.errorhandler(Exception)
    def _unexpected(exc: Exception):
        log.exception("unexpected error")
        return jsonify({"error": {"code": "internal", "message": f"internal error ({type(exc).__name__})"}}), 500

    @app.get("/healthz")
    def healthz():
        return jsonify({"status": "ok"})

    return app
