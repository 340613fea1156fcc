"""A proxied chat request as the client adapters read it, and what they make of it (design §7.3).

:class:`ChatRequest` is the request's headers (names folded to lower case) and its JSON body, with the few views
an adapter needs: the messages as plain text by role, the last user message, the system messages after it, the
first system message. :class:`Reading` is the verdict: which client sent it, whether it is a chat turn or a
background task (a title, tags, follow-ups, a summary …), and the session it belongs to. Pure: no I/O.

A session a client does not name is derived from the chat itself (:func:`derived_session`): a stable hash of what
opens the conversation, the companion's greeting(s) and the user's first message, never the system prompt (a
character card or world info changes from turn to turn). Two chats are two sessions; the same chat sent again is
the same session.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import unicodedata
from collections.abc import Mapping
from functools import cached_property
from typing import Any

from ...text import message_text

__all__ = ["CHAT", "TASK", "ChatRequest", "Reading", "derived_session", "task_name"]

CHAT, TASK = "chat", "task"
_TASK_NAME_RE = re.compile(r"[^a-z0-9_]+")
MAX_TASK_CHARS = 40


@dataclasses.dataclass(frozen=True)
class Message:
    role: str
    text: str
    name: str | None = None


class ChatRequest:
    """The headers (lower-case names) and the JSON body of one ``POST /v1/chat/completions``."""

    def __init__(self, headers: Mapping[str, str], body: Mapping[str, Any]) -> None:
        self.headers = {str(k).lower(): str(v) for k, v in headers.items()}
        self.body = body

    def header(self, name: str) -> str | None:
        """A header's value stripped, or None when it is absent."""
        value = self.headers.get(name.lower())
        return None if value is None else value.strip()

    @cached_property
    def messages(self) -> tuple[Message, ...]:
        out = []
        for m in self.body.get("messages") or ():
            if isinstance(m, Mapping):
                name = m.get("name")
                out.append(Message(str(m.get("role") or ""), message_text(m.get("content")).strip(),
                                   name if isinstance(name, str) else None))
        return tuple(out)

    @cached_property
    def last_user_index(self) -> int | None:
        for i in range(len(self.messages) - 1, -1, -1):
            if self.messages[i].role == "user":
                return i
        return None

    @property
    def last_user(self) -> str | None:
        i = self.last_user_index
        return None if i is None else self.messages[i].text

    @property
    def user_count(self) -> int:
        return sum(1 for m in self.messages if m.role == "user")

    @property
    def first_system(self) -> str | None:
        """The first message's text when it is a system message (a raw generation's instruction)."""
        return self.messages[0].text if self.messages and self.messages[0].role == "system" else None

    @property
    def trailing_system(self) -> str | None:
        """The last message's text when it is a system message that follows the conversation (a quiet prompt)."""
        if len(self.messages) >= 2 and self.messages[-1].role == "system":
            return self.messages[-1].text
        return None

    @property
    def last_spoken(self) -> Message | None:
        """The conversation's last message that is not a system message."""
        return next((m for m in reversed(self.messages) if m.role in ("user", "assistant")), None)


@dataclasses.dataclass(frozen=True)
class Reading:
    """What a request is: ``kind`` chat (a turn of the conversation) or task (a background request).

    ``client`` is the adapter that recognised it (``openai`` when none did), ``task`` the task's name,
    ``via`` how the kind was decided (``header``, ``template``, ``shape`` or ``""`` for an ordinary turn), and
    ``session`` with ``session_via`` where the session came from (``header``, the adapter's name, ``derived``).
    """

    client: str
    kind: str = CHAT
    task: str | None = None
    via: str = ""
    session: str | None = None
    session_via: str = ""

    @property
    def is_task(self) -> bool:
        return self.kind == TASK

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def task_name(value: str) -> str:
    """A client's own task name as a short snake_case word ("title_generation", "Quiet" -> "quiet")."""
    name = _TASK_NAME_RE.sub("_", unicodedata.normalize("NFKC", value).lower()).strip("_")
    return name[:MAX_TASK_CHARS] or "task"


def _key_text(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).split())


def derived_session(request: ChatRequest) -> str | None:
    """``chat-<16 hex>``: a hash of the conversation's opening, what every later request of the same chat repeats.

    The opening is the companion's messages before the user's first message (a greeting) and that first message.
    A request with no user message has no session of its own (None)."""
    opening: list[str] = []
    for m in request.messages:
        if m.role == "assistant":
            opening.append("a:" + _key_text(m.text))
        elif m.role == "user":
            opening.append("u:" + _key_text(m.text))
            break
    else:
        return None
    return "chat-" + hashlib.sha256("\n".join(opening).encode("utf-8")).hexdigest()[:16]
