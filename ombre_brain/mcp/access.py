"""Who may use which space through MCP, with the HTTP API's own token rules (design §8, §15).

Over HTTP, ``/mcp`` checks the bearer token exactly as every ``/v1`` route does
(:func:`ombre_brain.web.current_scope`) before the MCP app sees the request, and hands
the token's scope down with the request. Over stdio there are no headers; as the MCP spec asks of
stdio servers, the credential comes from the environment: ``OMBRE_MCP_TOKEN`` is checked against
the same rules (``server.tokens`` and ``OMBRE_TOKEN``). With no token configured, every space is
open, as on the HTTP API.

A tool's space is its ``space`` argument, else the ``X-Ombre-Space`` header, else the token's
only space (a token limited to one space names it), else the default space; whichever it is, the
token must allow it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..config import Config
from ..errors import AuthError
from ..tokens import require_side, scope_of_token, side_of_token, space_in_scope, token_rules

__all__ = ["NO_ACCESS", "STDIO_TOKEN_ENV", "Access", "Call", "default_space", "session_id", "stdio_access"]

STDIO_TOKEN_ENV = "OMBRE_MCP_TOKEN"
MAX_SESSION_CHARS = 200


@dataclass(frozen=True)
class Access:
    """One caller: the spaces its token allows ("*" for all), its X-Ombre-Space, and its session."""

    scope: Any
    header_space: str | None = None
    session: str = "mcp"
    bound_side: str | None = None  # the token's side of letters (server.tokens[].side); None: either

    def side(self) -> str:
        """MCP is the companion's channel (docs/design.md §19); a token bound to the person may not use it."""
        return require_side(self.bound_side, "companion")

    def space(self, requested: Any, default: str) -> str:
        """The space a call uses, checked against the token (ValidationError, or ForbiddenError: 403)."""
        for candidate in (requested, self.header_space):
            if candidate not in (None, ""):
                return space_in_scope(candidate, self.scope)
        if self.scope != "*" and len(self.scope) == 1:
            return self.scope[0]
        return space_in_scope(default, self.scope)

    def visible(self, spaces: list[str]) -> list[str]:
        return list(spaces) if self.scope == "*" else [s for s in spaces if s in self.scope]


NO_ACCESS = Access(scope=())
"""What a call gets when nothing vouched for it (an HTTP request that did not come through /mcp): no space."""


def default_space(config: Config, override: str | None = None) -> str:
    """``--space``, else ``mcp.default_space``, else ``server.default_space``."""
    return override or config.mcp.default_space or config.server.default_space


def session_id(value: str | None, prefix: str = "mcp") -> str:
    """The Ombre session of an MCP session: ``mcp:<id>`` (one label per MCP connection or client session)."""
    tail = (value or "").strip()
    name = f"{prefix}:{tail}" if tail else prefix
    return name[:MAX_SESSION_CHARS]


def stdio_access(config: Config, env: Mapping[str, str]) -> Access:
    """The access of a stdio server: the environment's ``OMBRE_MCP_TOKEN`` under the HTTP API's rules.

    Raises AuthError at start-up when tokens are configured and the variable is missing or wrong,
    so a misconfigured client fails loudly once instead of on every call.
    """
    rules = token_rules(config, env)
    token = env.get(STDIO_TOKEN_ENV)
    if rules and not token:
        raise AuthError(f"tokens are configured (server.tokens or OMBRE_TOKEN), so the stdio server needs one too: "
                        f"set {STDIO_TOKEN_ENV} in the MCP client's env for this server")
    return Access(scope=scope_of_token(rules, token), session=session_id("stdio"),
                  bound_side=side_of_token(config, env, token))


@dataclass
class Call:
    """One tool call: the Brain, who is calling, the arguments exactly as sent, and the notes for the reply."""

    brain: Any
    access: Access
    default_space: str
    raw: Mapping[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def config(self) -> Config:
        return self.brain.config

    def space(self, requested: Any = None) -> str:
        return self.access.space(requested, self.default_space)

    def given(self, name: str) -> bool:
        """Was the argument sent with a value that means something? Ombre-Brain's "no change" values
        (absent, null, "", [], false, -1) do not."""
        value = self.raw.get(name)
        if value is None or value is False or value == "" or value == []:
            return False
        return not (isinstance(value, int | float) and not isinstance(value, bool) and value == -1)

    def note(self, text: str) -> None:
        self.notes.append(text)

    def unused(self, meanings: Mapping[str, str]) -> None:
        """Note each given argument that Ombre Brain accepts for compatibility but does not use, and why."""
        for name, why in meanings.items():
            if self.given(name):
                self.note(f"{name} is accepted for Ombre-Brain compatibility and not used here: {why}")
