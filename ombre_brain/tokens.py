"""Bearer tokens and the spaces they open: the rules every transport applies (docs/design.md §8).

A token is ``OMBRE_TOKEN`` (every space) or one of ``server.tokens`` (``{token_env, spaces}``);
with none configured, every space is open. The HTTP API, the debug pages and ``/mcp`` read the
token from the request (:mod:`ombre_brain.web`); the stdio MCP server reads it from its
environment. Pure: no Flask, so any transport can take it.
"""

from __future__ import annotations

import hmac
from typing import Any

from .buckets import validate_space
from .errors import AuthError, ForbiddenError, ValidationError

__all__ = ["require_side", "scope_of_token", "side_of_token", "space_in_scope", "token_rules"]


def token_rules(cfg, env) -> list[tuple[str, Any]]:
    """(secret, spaces) pairs from config `server.tokens` plus OMBRE_TOKEN (all spaces); no Flask needed."""
    rules: list[tuple[str, Any]] = []
    master = env.get("OMBRE_TOKEN")
    if master:
        rules.append((master, "*"))
    for rule in cfg.server.tokens:
        secret = env.get(rule.token_env)
        if secret:
            rules.append((secret, rule.spaces))
    return rules


def scope_of_token(rules: list[tuple[str, Any]], token: str | None) -> Any:
    """The spaces a presented token may touch ("*" for all, or when no token is configured at all)."""
    if not rules:
        return "*"
    if not token:
        raise AuthError("missing bearer token: send 'Authorization: Bearer <token>'")
    for secret, spaces in rules:
        if hmac.compare_digest(secret.encode(), token.encode()):
            return spaces
    raise AuthError("invalid bearer token")


def side_of_token(cfg, env, token: str | None) -> str | None:
    """The one side of letters a presented token is bound to (``server.tokens[].side``), or None for either.

    Tokens scope spaces; a side (companion or person, docs/design.md §19) is told apart by the channel,
    and a token bound to one side may not use the other side's channel. Call after the token was accepted.
    """
    if not token:
        return None
    for rule in cfg.server.tokens:
        secret = env.get(rule.token_env)
        if secret and rule.side and hmac.compare_digest(secret.encode(), token.encode()):
            return rule.side
    return None


def require_side(bound: str | None, side: str) -> str:
    """``side`` when the token may act for it (ForbiddenError when the token is bound to the other side)."""
    if bound is not None and bound != side:
        raise ForbiddenError(f"this token acts for the {bound}; the {side}'s letters need the {side}'s token")
    return side


def space_in_scope(space: Any, scope) -> str:
    """Validate a space name and check it is in ``scope`` (a scope, or a callable that gives it).

    The scope is worked out first: a caller without a valid token learns nothing about spaces.
    """
    scope = scope() if callable(scope) else scope
    if space is None or space == "":
        raise ValidationError("is required", field="space")
    space = validate_space(space)
    if scope != "*" and space not in scope:
        raise ForbiddenError(f"this token is not allowed for space {space!r}")
    return space
