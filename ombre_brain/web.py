"""Request helpers every blueprint shares: the Brain, JSON bodies, the caller's token and arguments.

The ``/v1`` API (``server/``), the debug pages (``debug_ui/``) and ``/mcp`` (``mcp/http.py``) all
take these, so a malformed body, a wrong type or a token for another space always becomes the
same clear JSON error, never a 500; none of those transports imports another's helpers. The
token rules themselves, which the stdio MCP server uses too, are in :mod:`ombre_brain.tokens`.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

from flask import current_app, g, request

from .errors import ValidationError
from .tokens import scope_of_token, side_of_token, space_in_scope, token_rules

MAX_DEPTH = 64           # no route reads a body nested deeper than a few levels
MAX_NUMBER_CHARS = 40    # far beyond any field's range; a 5,000-digit literal is refused, not converted
# Only the debug pages take the token from the address (a browser cannot send a header from a link);
# everywhere else a token in the URL would end up in logs and histories.
URL_TOKEN_BLUEPRINTS = frozenset({"debug_pages"})


def get_brain():
    return current_app.config["BRAIN"]


def json_body() -> dict:
    """The request's JSON object, or a ValidationError that says what is wrong with it.

    The token is checked first, so a caller without one learns nothing about what a good body
    looks like. Nesting deeper than :data:`MAX_DEPTH` and numbers longer than
    :data:`MAX_NUMBER_CHARS` are refused before anything walks them.
    """
    current_scope()
    raw = request.get_data(cache=True)
    if not raw:
        raise ValidationError("expected a JSON object body, got an empty body", code="bad_json")
    try:
        data = json.loads(raw, parse_constant=_no_constant, parse_int=_int, parse_float=_float)
    except UnicodeDecodeError:
        raise ValidationError("body is not UTF-8", code="bad_json") from None
    except json.JSONDecodeError as exc:
        raise ValidationError(f"malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}",
                              code="bad_json") from None
    except _BadNumber as exc:
        raise ValidationError(str(exc), code="bad_json") from None
    except RecursionError:
        data = _DEEP
    if data is _DEEP or _too_deep(data):
        raise ValidationError(f"JSON is nested more than {MAX_DEPTH} levels deep", code="bad_json")
    try:  # a \ud800 escape decodes to a lone surrogate, which no store, model or answer can encode
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError("body holds an unpaired UTF-16 surrogate escape (such as \\ud800); send valid "
                              "Unicode", code="bad_json") from None
    if not isinstance(data, dict):
        raise ValidationError(f"expected a JSON object, got {type(data).__name__}", code="bad_json")
    return data


def json_request() -> dict:
    """:func:`json_body` for a route that changes state or spends work on the server's behalf, sent only as
    ``application/json``.

    A page on another site can make a browser POST a form (urlencoded, multipart or ``text/plain``) anywhere,
    with no preflight, and with no token configured (the demo) nothing else stops it. ``application/json``
    (like an ``Authorization`` header) needs a CORS preflight this server never answers, so such a post is
    refused here before its body is read, whether or not tokens are configured.
    """
    current_scope()
    if request.mimetype != "application/json":
        got = request.mimetype or "no Content-Type"
        raise ValidationError(f"send the body as application/json (got {got}): a form post, which another site "
                              "can make a browser send, is refused here", code="bad_json")
    return json_body()


def _no_constant(name: str):
    raise json.JSONDecodeError(f"{name} is not valid JSON (numbers must be finite)", name, 0)


_DEEP = object()  # stands for a body the parser could not descend into


class _BadNumber(ValueError):
    """A number literal no field could use: too many digits, or overflowing to infinity."""


def _int(text: str) -> int:
    if len(text) > MAX_NUMBER_CHARS:
        raise _BadNumber(f"a number in the body has {len(text)} digits; at most {MAX_NUMBER_CHARS} are accepted")
    return int(text)


def _float(text: str) -> float:
    if len(text) > MAX_NUMBER_CHARS:
        raise _BadNumber(f"a number in the body has {len(text)} characters; at most {MAX_NUMBER_CHARS} are accepted")
    value = float(text)
    if math.isinf(value):
        raise _BadNumber(f"number {text[:40]} is too large (numbers must be finite)")
    return value


def _too_deep(data: Any) -> bool:
    """True when containers nest deeper than MAX_DEPTH (walked without recursion)."""
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list):
            if depth > MAX_DEPTH:
                return True
            stack.extend((v, depth + 1) for v in (value.values() if isinstance(value, dict) else value))
    return False


def _token_rules() -> list[tuple[str, Any]]:
    return token_rules(get_brain().config, current_app.config.get("ENV_TOKENS") or os.environ)


def auth_required() -> bool:
    return bool(_token_rules())


def current_scope() -> Any:
    """The spaces the caller's bearer token may touch ("*" for all); checked once per request."""
    if "ob_scope" in g:
        return g.ob_scope
    rules = _token_rules()
    if not rules:
        g.ob_scope = "*"
        return "*"
    g.ob_scope = scope_of_token(rules, _request_token())
    return g.ob_scope


def _request_token() -> str:
    header = request.headers.get("Authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:].strip()
    if request.blueprint in URL_TOKEN_BLUEPRINTS:
        return request.args.get("token", "")
    return ""


def current_side() -> str | None:
    """The side of letters the caller's token is bound to (None: either); after the token was checked."""
    current_scope()
    return side_of_token(get_brain().config, current_app.config.get("ENV_TOKENS") or os.environ, _request_token())


def authorize_space(space: Any) -> str:
    """Validate a space name and check the token may use it (403 when it may not)."""
    return space_in_scope(space, lambda: current_scope())


def token_default_space() -> str | None:
    """For the proxy: a token limited to exactly one space names that space."""
    scope = current_scope()
    if scope != "*" and len(scope) == 1:
        return scope[0]
    return None


def int_arg(name: str, default: int | None, lo: int | None = None, hi: int | None = None) -> int | None:
    raw = request.args.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValidationError(f"expected an integer, got {raw[:40]!r}", field=name) from None
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise ValidationError(f"expected an integer between {lo} and {hi}, got {value}", field=name)
    return value


def str_arg(name: str, default: str | None = None, *, required: bool = False, max_len: int = 8000) -> str | None:
    raw = request.args.get(name)
    if raw is None or raw == "":
        if required:
            raise ValidationError("is required", field=name)
        return default
    if len(raw) > max_len:
        raise ValidationError(f"is {len(raw)} characters; the limit is {max_len}", field=name)
    return raw
