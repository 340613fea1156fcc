"""The client adapters: one registry entry per chat frontend (design §7.3, §20.4).

A :class:`ClientAdapter` says what one client can send and what it means: the headers by which it names itself,
its chat and user ids, and the shapes of its **background tasks**, the requests it makes through the same
``/v1/chat/completions`` that are not the user talking (a chat title, tags, follow-up suggestions, a summary, an
image prompt, an impersonation). Each task is a :class:`TaskTemplate` (the opening words of the client's default
prompt, in the message where the client puts it) or a :class:`TaskShape` (a test on the request's structure).
:meth:`ClientRegistry.read` turns a request into a :class:`~.request.Reading`:

1. ``X-Ombre-Task`` decides when it is sent with a value: a task of that name, or ``none`` / ``chat`` for a turn
   (Open WebUI fills it from ``{{TASK}}``, empty on a chat turn).
2. Otherwise each adapter's templates and shapes, in registry order: the first that matches makes it a task.
3. Anything else is an ordinary chat turn: an unknown template is never an error.

The session is ``X-Ombre-Session-Id``, else the chat id the recognised client sends on its own, else one derived
from the conversation's opening (:func:`~.request.derived_session`). Adding a client is one ``CLIENTS.register``;
:mod:`.table` registers the built-in ones. Pure: no I/O.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import threading
import unicodedata
from collections.abc import Callable, Iterator

from .request import CHAT, TASK, ChatRequest, Reading, derived_session, task_name

__all__ = ["CLIENTS", "PLACES", "ClientAdapter", "ClientRegistry", "TaskShape", "TaskTemplate", "template"]

PLACES = ("last_user", "first_system", "trailing_system")
"""Where a client puts a task's instruction: the last user message, a leading system message (a raw generation)
or a system message after the conversation (a quiet prompt)."""
CHAT_VALUES = frozenset({"none", "chat", "no", "false", "0"})
_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


def _flat(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).split())


@dataclasses.dataclass(frozen=True)
class TaskTemplate:
    """A task recognised by the opening of the client's default prompt in one place of the request."""

    task: str
    place: str
    pattern: re.Pattern

    def matches(self, req: ChatRequest) -> bool:
        text = getattr(req, self.place)
        return bool(text) and self.pattern.match(_flat(text)) is not None


def template(task: str, place: str, *openings: str) -> TaskTemplate:
    """A template from the literal opening words of a prompt (any of ``openings``), spacing and case aside."""
    if place not in PLACES:
        raise ValueError(f"a task template's place is one of {PLACES}, not {place!r}")
    alternatives = "|".join(r"\s*".join(re.escape(w) for w in _flat(o).split(" ")) for o in openings)
    return TaskTemplate(task, place, re.compile(f"(?:{alternatives})", re.IGNORECASE))


@dataclasses.dataclass(frozen=True)
class TaskShape:
    """A task recognised by the request's structure (``test``), e.g. a quiet prompt after the companion's reply."""

    task: str
    test: Callable[[ChatRequest], bool]
    doc: str = ""

    def matches(self, req: ChatRequest) -> bool:
        return bool(self.test(req))


def _nothing(_req: ChatRequest) -> str | None:
    return None


@dataclasses.dataclass(frozen=True)
class ClientAdapter:
    """One chat frontend: its name, which of its versions' templates are covered, and how to read its requests.

    ``sent_by`` tells from the headers whether the client sent the request (headers it adds on its own);
    ``chat_id`` reads the chat id it sends without being asked (None: it sends none); ``templates`` and
    ``shapes`` recognise its background tasks."""

    name: str
    title: str
    covers: str
    templates: tuple[TaskTemplate, ...] = ()
    shapes: tuple[TaskShape, ...] = ()
    sent_by: Callable[[ChatRequest], bool] = lambda _req: False
    chat_id: Callable[[ChatRequest], str | None] = _nothing
    doc: str = ""

    def task_of(self, req: ChatRequest) -> tuple[str, str] | None:
        """(task, "template" | "shape") when the request is one of this client's background tasks."""
        for t in self.templates:
            if t.matches(req):
                return t.task, "template"
        for s in self.shapes:
            if s.matches(req):
                return s.task, "shape"
        return None


class ClientRegistry:
    """The adapters in the order their templates are tried; the last resort is the generic OpenAI client."""

    def __init__(self, fallback: str = "openai") -> None:
        self._adapters: tuple[ClientAdapter, ...] = ()
        self._lock = threading.Lock()
        self.fallback = fallback

    def register(self, adapter: ClientAdapter, *, before: str | None = None) -> ClientAdapter:
        if not _NAME_RE.match(adapter.name):
            raise ValueError(f"a client adapter's name is a snake_case word, not {adapter.name!r}")
        for t in adapter.templates:
            if t.place not in PLACES:
                raise ValueError(f"client {adapter.name}: a template's place is one of {PLACES}, not {t.place!r}")
        with self._lock:
            if any(a.name == adapter.name for a in self._adapters):
                raise ValueError(f"a client adapter named {adapter.name!r} is already registered")
            items = list(self._adapters)
            at = next((i for i, a in enumerate(items) if a.name == before), len(items)) if before else len(items)
            items.insert(at, adapter)
            self._adapters = tuple(items)
        return adapter

    def unregister(self, name: str) -> None:
        with self._lock:
            self._adapters = tuple(a for a in self._adapters if a.name != name)

    @contextlib.contextmanager
    def added(self, adapter: ClientAdapter, *, before: str | None = None) -> Iterator[ClientAdapter]:
        """An adapter registered for the duration of a ``with`` block (tests)."""
        self.register(adapter, before=before)
        try:
            yield adapter
        finally:
            self.unregister(adapter.name)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self._adapters)

    def __iter__(self) -> Iterator[ClientAdapter]:
        return iter(self._adapters)

    def __getitem__(self, name: str) -> ClientAdapter:
        for a in self._adapters:
            if a.name == name:
                return a
        raise KeyError(name)

    def read(self, headers, body) -> Reading:
        """What the request is and which session it belongs to (the module's docstring gives the order)."""
        req = ChatRequest(headers, body)
        adapters = self._adapters
        sender = next((a for a in adapters if a.sent_by(req)), None)
        found, client = None, sender
        for a in ([sender] if sender else []) + [a for a in adapters if a is not sender]:
            found = a.task_of(req)
            if found:
                client = a
                break
        kind, task, via = (TASK, *found) if found else (CHAT, None, "")
        said = req.header("X-Ombre-Task")
        if said:  # the client's own word decides; its template still tells which client it is
            kind, task, via = (CHAT, None, "header") if said.lower() in CHAT_VALUES else (TASK, task_name(said),
                                                                                           "header")
        name = client.name if client else self.fallback
        session, session_via = req.header("X-Ombre-Session-Id") or None, "header"
        if session is None and sender is not None:
            session, session_via = sender.chat_id(req) or None, sender.name
        if session is None:
            session, session_via = derived_session(req), "derived"
        if session is None:
            session_via = ""
        return Reading(name, kind, task, via, session, session_via)


CLIENTS = ClientRegistry()
