"""The conversation a turn hears (design §14): recent messages, normalised at the door.

Clients resend the whole history every turn, so only the last ``gateway.context_messages``
messages and the last ``gateway.context_chars`` characters are kept; the rest is dropped
silently. Only a single oversized message is an error. System (and developer, tool) messages are
ignored: they are the client's instructions, not the conversation. Pure.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..config import Config
from ..errors import ValidationError
from ..recall_types import QueryPlan
from ..text import message_text

ROLES = ("user", "assistant")
IGNORED_ROLES = ("system", "developer", "tool", "function")
MAX_MESSAGE_CHARS = 8000


@dataclass(frozen=True)
class Message:
    """One earlier message of the conversation: who said it and its text."""

    role: str
    content: str

    def to_dict(self) -> dict:
        return {"role": self.role, "content": self.content}


def _message(raw: Any, field: str) -> Message | None:
    if not isinstance(raw, dict):
        raise ValidationError(f"expected a message object {{role, content}}, got {type(raw).__name__}", field=field)
    role = raw.get("role")
    if not isinstance(role, str) or not role:
        raise ValidationError("expected a role: user, assistant or system", field=f"{field}.role")
    if role in IGNORED_ROLES:
        return None
    if role not in ROLES:
        raise ValidationError(f"expected user, assistant or system, got {role!r:.40}", field=f"{field}.role")
    content = raw.get("content")
    if not isinstance(content, str | list) and content is not None:
        raise ValidationError("expected a string or a list of content parts", field=f"{field}.content")
    text = message_text(content).strip()
    if len(text) > MAX_MESSAGE_CHARS:
        raise ValidationError(f"is {len(text)} characters; the limit is {MAX_MESSAGE_CHARS}", field=f"{field}.content")
    return Message(role, text) if text else None


def normalize_context(raw: Any, *, max_messages: int, max_chars: int, field: str = "context") -> tuple[Message, ...]:
    """The recent messages worth hearing, oldest first: the last ``max_messages``, within ``max_chars``."""
    if raw is None:
        return ()
    if not isinstance(raw, list | tuple):
        raise ValidationError("expected a list of messages {role, content}, oldest first", field=field)
    msgs = [m for i, r in enumerate(raw) if (m := _message(r, f"{field}[{i}]")) is not None]
    msgs = msgs[-max_messages:] if max_messages > 0 else []
    kept: list[Message] = []
    room = max_chars
    for m in reversed(msgs):
        if room <= 0:
            break
        kept.append(m if len(m.content) <= room else Message(m.role, m.content[-room:]))
        room -= len(m.content)
    return tuple(reversed(kept))


def split_messages(raw: Any, field: str = "messages") -> tuple[str, list]:
    """An OpenAI ``messages`` list as (the last user message's text, the messages before it)."""
    if not isinstance(raw, list) or not raw:
        raise ValidationError("expected a non-empty list of message objects", field=field)
    for i, m in enumerate(raw):
        _message(m, f"{field}[{i}]")  # each must be a message; the error names the first that is not
    for i in range(len(raw) - 1, -1, -1):
        m = raw[i]
        if isinstance(m, dict) and m.get("role") == "user":
            return message_text(m.get("content")), list(raw[:i])
    raise ValidationError("holds no user message", field=field)


def context_messages(raw: Iterable) -> tuple[dict, ...]:
    """`user: …` / `assistant: …` strings (the shared sets' format) or {role, content} dicts, oldest first."""
    out = []
    for item in raw or ():
        if isinstance(item, dict) and isinstance(item.get("content"), str):
            out.append({"role": str(item.get("role") or "user"), "content": item["content"]})
            continue
        m = re.match(r"\s*(user|assistant|system)\s*[:：]\s*(.*)", str(item), re.S | re.I)
        if m:
            out.append({"role": m.group(1).lower(), "content": m.group(2).strip()})
        else:
            out.append({"role": "user", "content": str(item).strip()})
    return tuple(out)


def user_texts(context: Sequence[Message]) -> list[str]:
    return [m.content for m in context if m.role == "user"]


CARRIED_MODES = ("memory_lookup", "conflict_repair", "reflective_repair")
NEVER_CARRIED = ("tone_only", "skip_only", "empty")


def with_context(plan: QueryPlan, context: Sequence[Message], plan_of: Callable[[str], QueryPlan],
                 cfg: Config) -> QueryPlan:
    """The plan of a message as the conversation before it colours it (design §14).

    - The topic is the last ``retrieval.context.user_messages`` user messages, the previous one weighing
      ``decay``, the one before ``decay²``; a message that points back ("那天晚上", "that night", "它")
      weighs them ``anaphora_boost`` times more (at most as much as itself).
    - A lookup or a repair begun a message or two ago still counts: its mode carries over to a message
      that has no mode of its own (casual) and goes on with it, asking ("那她呢？") or pointing back ("那天晚上");
      a statement ("我下周要去成都出差") says something new and keeps its own mode. A vague lookup ("还记得吗") is
      not vague when the topic has terms.
    - Tone-only, filler and empty messages stay skipped: context never makes them recall, except a message that
      only points back ("那她现在怎么样了", "how is she now?", "那后来呢"): it is a follow-up on the conversation's
      topic, whose terms it takes.
    """
    cc = cfg.retrieval.context
    users = user_texts(context)[-cc.user_messages:] if cc.user_messages else []
    follow_up = plan.anaphoric and plan.skip_reason == "skip_only"  # "那她现在怎么样了": the conversation's topic
    if not users or (plan.skip_reason in NEVER_CARRIED and not follow_up):
        return plan
    boost = cc.anaphora_boost if plan.anaphoric else 1.0
    weights = [min(1.0, boost * cc.decay ** d) for d in range(len(users), 0, -1)]
    earlier = [plan_of(u) for u in users]
    terms: dict[str, float] = {}
    for p, w in zip(earlier, weights, strict=True):
        for t in p.terms:
            if t not in plan.terms:
                terms[t] = max(terms.get(t, 0.0), w)
    changes: dict = {"topic": tuple(zip(users, weights, strict=True)), "context_terms": tuple(terms.items())}
    carried = next((p.context_mode for p in reversed(earlier) if p.context_mode in CARRIED_MODES), None)
    if carried and plan.context_mode == "casual" and (plan.asks or plan.anaphoric):
        changes.update(context_mode=carried, carried=carried, memory_lookup=carried == "memory_lookup",
                       allow_caution_diffusion=carried != "memory_lookup")
    if (plan.skip_reason == "vague" or follow_up) and terms:
        changes["skip_reason"] = None
    return dataclasses.replace(plan, **changes)


__all__ = ["MAX_MESSAGE_CHARS", "Message", "context_messages", "normalize_context", "split_messages", "user_texts",
           "with_context"]
