"""One exchange, validated at the door and named: the user's message, the reply, the messages before it.

An exchange is what the write decision judges: the user's last message (the words a memory keeps),
the assistant's reply and the recent messages before them (context, never a user fact). Its id is
the sha256 of the canonical exchange (space, session, every user message so far, the reply), so the
same exchange sent twice, by the proxy's retry or a gateway's, is one job and writes once. ``at``
is when it happened: the memories' ``created``, so an import or an evaluation replays a conversation
on its own clock. ``previous`` names the session's exchange before it (the same messages, one user message
and one reply shorter), the one a message like "别记这个" asks to forget. Pure.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ..buckets import validate_space
from ..errors import ValidationError
from ..text import message_text
from ..turn.conversation import IGNORED_ROLES, Message, normalize_context

__all__ = ["EXCHANGE_ROLES", "MAX_REPLY_CHARS", "Exchange", "exchange_id", "exchange_of"]

MAX_REPLY_CHARS = 20000
MAX_SESSION_CHARS = 200


def exchange_id(space: str, session: str, user_texts: list[str], assistant: str) -> str:
    """The job id: sha256 of the canonical exchange (sorted keys, no whitespace)."""
    canon = json.dumps({"space": space, "session": session, "user": user_texts, "assistant": assistant},
                       ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canon.encode()).hexdigest()


@dataclasses.dataclass(frozen=True)
class Exchange:
    """One finished exchange: what the write decision reads, and the clock its memories are written at."""

    space: str
    session: str
    user: str                        # the user's message, verbatim: what a memory of it keeps
    reply: str                       # the assistant's answer: context for the decision, never a user fact
    context: tuple[Message, ...]     # the recent messages before the user's, oldest first
    at: str                          # ISO-8601: when it happened (the memories' created)
    id: str
    model: str | None = None
    previous: str | None = None      # the id of the session's exchange before this one, when the messages hold it

    def payload(self) -> dict:
        """The job row's payload (the ledger's ``jobs.payload``)."""
        return {"user": self.user, "assistant": self.reply, "context": [m.to_dict() for m in self.context],
                "model": self.model, "at": self.at, "previous": self.previous}

    @classmethod
    def from_job(cls, job: Mapping[str, Any]) -> Exchange:
        p = job["payload"]
        context = tuple(Message(m["role"], m["content"]) for m in p.get("context") or ()
                        if isinstance(m, Mapping) and m.get("role") in ("user", "assistant"))
        return cls(job["space"], job["session"], p.get("user", ""), p.get("assistant", ""), context,
                   p.get("at") or "", job["id"], p.get("model"), p.get("previous"))


EXCHANGE_ROLES = ("user", "assistant", "system")


INSTRUCTIONS = ("system", "developer")  # a client's instructions, wherever it puts them: never what anyone said


def exchange_of(space: Any, session: Any, messages: Any, reply: Any, *, at: datetime, model: str | None = None,
                context_messages: int = 6, context_chars: int = 3000, chat: bool = False) -> Exchange:
    """Validate an exchange (OpenAI ``messages`` ending with the user's, and the ``reply``) and name it.

    Every mistake is a ValidationError naming its field: no user message, a message of another role, a
    last message that is not the user's, a reply that is not text or is over :data:`MAX_REPLY_CHARS`.
    Roles are :data:`EXCHANGE_ROLES`; with ``chat`` (the proxy's conversation, as a client sent it), tool,
    developer and function messages before the user's are passed over. Either way the very last message is
    the user's (a system or developer instruction after it aside, as SillyTavern sends its post-history notes): a
    reply to a tool's result is not something the user said.
    """
    space = validate_space(space)
    if not isinstance(session, str) or not session.strip() or len(session) > MAX_SESSION_CHARS:
        raise ValidationError(f"expected a non-empty string of at most {MAX_SESSION_CHARS} characters",
                              field="session_id")
    if not isinstance(messages, list | tuple) or not messages:
        raise ValidationError("expected a non-empty list of {role, content} messages, ending with the user's",
                              field="messages")
    normalize_context(list(messages), max_messages=len(messages), max_chars=10**9, field="messages")  # validates
    if not chat:
        for i, m in enumerate(messages):
            if m.get("role") not in EXCHANGE_ROLES:
                raise ValidationError(f"expected {', '.join(EXCHANGE_ROLES[:-1])} or {EXCHANGE_ROLES[-1]}, got "
                                      f"{m.get('role')!r:.40}: an exchange is what the user said before the reply",
                                      field=f"messages[{i}].role")
    heard = [m for m in messages if m.get("role") not in IGNORED_ROLES]
    # the proxy's chat may end with a client's note after the user's message (SillyTavern's post-history
    # instructions); an exchange posted to /v1/exchanges says exactly what was said, the user's last
    said = [m for m in messages if m.get("role") not in INSTRUCTIONS] if chat else list(messages)
    if not heard or not said or said[-1].get("role") != "user":
        raise ValidationError("the last message must be the user's (the assistant's answer goes in reply)",
                              field="messages")
    user = message_text(heard[-1].get("content")).strip()
    if not user:
        raise ValidationError("the user's message is empty: there is nothing to remember", field="messages")
    if not isinstance(reply, str):
        raise ValidationError(f"expected the assistant's answer as a string, got {type(reply).__name__}",
                              field="reply")
    if len(reply) > MAX_REPLY_CHARS:
        raise ValidationError(f"is {len(reply)} characters; the limit is {MAX_REPLY_CHARS}", field="reply")
    users = [message_text(m.get("content")) for m in heard if m.get("role") == "user"]
    context = normalize_context(heard[:-1], max_messages=context_messages, max_chars=context_chars)
    previous = None  # the exchange before: the same conversation one user message and one reply shorter
    if len(heard) >= 3 and heard[-2].get("role") == "assistant" and len(users) >= 2:
        previous = exchange_id(space, session, users[:-1], message_text(heard[-2].get("content")))
    return Exchange(space, session, user, reply, context, at.isoformat(timespec="seconds"),
                    exchange_id(space, session, users, reply), model, previous)
