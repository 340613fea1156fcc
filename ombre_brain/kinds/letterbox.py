"""Letters on the store: written by a side, read by a side, relocked only by the side holding the lock.

Every call names the caller's side (:mod:`.letters`): the MCP tools pass ``companion``, the
person's route ``/v1/letters`` passes ``person``. Letters have no moments (they are never
searched), so ``read(query=…)`` ranks the letters this side may read by the query's words,
weighed by how rare each word is among them; a sealed letter is dropped before any ranking, so
its words never decide, or show in, an answer to the other side. Letters are few (Ombre-Brain's
published store holds 20), so reading all of a space's letters is the honest cost.

``Brain.letters`` is a :class:`Letterbox`; it writes through ``Brain.write`` (validation, the
kind's fields) and changes a lock through ``Brain.update`` (``kind_fields`` only: a letter's words are
never edited).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from ..buckets import Bucket, validate_space
from ..config import Config
from ..errors import NotFoundError, ValidationError
from ..store.interfaces import TurnReads
from ..timeutil import now_utc
from .fields import kind_part
from .letters import letter_meta, lock_request, public_view, readable_by, require_owner, side_name

__all__ = ["LetterRead", "Letterbox", "letter_title"]

MAX_LIMIT = 100
LETTER_IMPORTANCE = 10  # Ombre-Brain files letters at importance 10: they never decay
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")
COMPANION_WORDS = frozenset({"ai", "companion", "assistant", "claude"})
PERSON_WORDS = frozenset({"user", "person", "human"})


def letter_title(content: str, limit: int = 40) -> str:
    """A letter without a title is titled by its first line (a salutation, usually), cut at ``limit``."""
    first = next((line.strip() for line in content.splitlines() if line.strip()), "letter")
    return first if len(first) <= limit else first[: limit - 1] + "…"


@dataclass(frozen=True)
class LetterRead:
    """One letter as a side sees it: whole (``bucket`` is the letter) or sealed (``bucket`` holds metadata only)."""

    bucket: Bucket
    meta: dict
    score: float | None = None

    @property
    def readable(self) -> bool:
        return bool(self.meta["readable"])

    def to_dict(self) -> dict:
        out = dict(self.meta)
        if self.readable:
            out.update(title=self.bucket.title, content=self.bucket.body,
                       user_name=(kind_part(self.bucket, "letter") or {}).get("user_name"),
                       ai_name=(kind_part(self.bucket, "letter") or {}).get("ai_name"),
                       date=(kind_part(self.bucket, "letter") or {}).get("date"))
        if self.score is not None:
            out["score"] = round(self.score, 4)
        return out


class Letterbox:
    """Writing, reading and relocking the letters of any space, for one side at a time."""

    def __init__(self, *, config: Config, store: TurnReads, write: Callable[..., str],
                 update: Callable[..., Bucket], tokenize: Callable[[str], list[str]]) -> None:
        self.config = config
        self.store = store
        self._write = write
        self._update = update
        self._tokenize = tokenize

    def write(self, space: str, side: str, *, content: str, title: str = "", author: str = "", user_name: str = "",
              ai_name: str = "", date: str = "", lock_type: str = "none", unlock_date: str = "",
              now: datetime | None = None) -> Bucket:
        """Keep one letter, its lock held by ``side`` (the writer's side, whatever ``author`` says)."""
        validate_space(space)
        side = side_name(side)
        now = now or now_utc()
        if not isinstance(content, str) or not content.strip():
            raise ValidationError("is required: the letter's words", field="content")
        lock, unlock_at = lock_request(lock_type, unlock_date, now)
        ident = self.config.identity
        signature = (author or "").strip() or (ai_name or ident.ai_name if side == "companion"
                                               else user_name or ident.user_name)
        kind = {"letter": {"author": signature, "side": side, "locked_by": side, "lock_type": lock,
                           "unlock_at": unlock_at, "user_name": user_name or None, "ai_name": ai_name or None,
                           "date": date or None}}
        bid = self._write(space, now=now, type="letter", title=(title or "").strip() or letter_title(content),
                          body=content, importance=LETTER_IMPORTANCE, kind_fields=kind, dedupe=False,
                          origin="assistant" if side == "companion" else "user")
        return self.store.get(space, bid)

    def letters(self, space: str) -> list[Bucket]:
        """Every letter of the space, newest first, whole (callers show them through :meth:`read`)."""
        validate_space(space)
        return self.store.list(space, type="letter", limit=None) if self.store.known_space(space) else []

    def get(self, space: str, side: str, letter_id: str, now: datetime | None = None) -> LetterRead:
        """One letter as ``side`` sees it (NotFoundError when the space holds no such letter)."""
        side = side_name(side)
        b = self.store.get(space, letter_id) if self.store.known_space(space) else None
        if b is None or b.type != "letter":
            raise NotFoundError(f"no letter {letter_id!r} in space {space!r}")
        now = now or now_utc()
        return LetterRead(public_view(b, now, side), letter_meta(b, now, side))

    def read(self, space: str, side: str, *, query: str = "", limit: int = 10, author: str = "", date_from: str = "",
             date_to: str = "", now: datetime | None = None) -> list[LetterRead]:
        """Ombre-Brain's ``letter_read``: newest first, or ranked by ``query`` among the letters ``side`` may read."""
        side = side_name(side)
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
            raise ValidationError(f"expected 1 to {MAX_LIMIT}, got {limit!r}", field="limit")
        for name, value in (("date_from", date_from), ("date_to", date_to)):
            if value and not _DATE.match(value):
                raise ValidationError(f"expected a date like 2026-08-14, got {value!r:.40}", field=name)
        now = now or now_utc()
        found = [b for b in self.letters(space) if _by(b, author) and _within(b, date_from, date_to)]
        if not (query or "").strip():
            return [LetterRead(public_view(b, now, side), letter_meta(b, now, side)) for b in found[:limit]]
        readable = [b for b in found if readable_by(b, side, now)]  # the other side's sealed words never rank
        scored = _rank(self._tokenize, query, readable)
        return [LetterRead(b, letter_meta(b, now, side), s) for b, s in scored[:limit]]

    def relock(self, space: str, side: str, letter_id: str, lock_type: str, unlock_date: str = "",
               now: datetime | None = None) -> LetterRead:
        """Ombre-Brain's ``letter_lock_update``: only the lock's side changes it; title, words, author never."""
        side = side_name(side)
        now = now or now_utc()
        b = self.store.get(space, letter_id) if self.store.known_space(space) else None
        if b is None or b.type != "letter":
            raise NotFoundError(f"no letter {letter_id!r} in space {space!r}")
        require_owner(b, side)
        lock, unlock_at = lock_request(lock_type, unlock_date, now)
        fields = {**(kind_part(b, "letter") or {}), "lock_type": lock, "unlock_at": unlock_at}
        updated = self._update(space, letter_id, kind_fields={"letter": fields}, now=now)
        return LetterRead(public_view(updated, now, side), letter_meta(updated, now, side))

    def counts(self, space: str, now: datetime | None = None) -> dict:
        """How many letters the space holds and how many are sealed now (for pulse)."""
        now = now or now_utc()
        letters = self.letters(space)
        return {"letters": len(letters), "sealed": sum(1 for b in letters if not readable_by(b, None, now))}


def _by(b: Bucket, author: str) -> bool:
    """Ombre-Brain's author filter: "user"/"person" and "ai"/"companion" name a side; anything else a signature."""
    wanted = (author or "").strip().casefold()
    if not wanted:
        return True
    f = kind_part(b, "letter") or {}
    if wanted in PERSON_WORDS:
        return f.get("side") == "person" or (f.get("author") or "").casefold() in PERSON_WORDS
    if wanted in COMPANION_WORDS:
        return f.get("side") == "companion" or (f.get("author") or "").casefold() in COMPANION_WORDS
    names = {(f.get(k) or "").casefold() for k in ("author", "user_name", "ai_name")}
    return wanted in names


def _within(b: Bucket, date_from: str, date_to: str) -> bool:
    day = (b.created or "")[:10]
    return not (date_from and day < date_from[:10] or date_to and day > date_to[:10])


def _rank(tokenize: Callable[[str], list[str]], query: str, letters: list[Bucket]) -> list[tuple[Bucket, float]]:
    """Letters holding the query's words, by the summed rarity (idf) of the words each holds; ties newest first."""
    words = {w for w in tokenize(query) if w.strip()}
    if not words or not letters:
        return []
    held = [(b, set(tokenize(f"{b.title}\n{b.body}"))) for b in letters]
    n = len(held)
    idf = {w: math.log(1 + n / (1 + sum(1 for _, ws in held if w in ws))) for w in words}
    scored = [(b, sum(idf[w] for w in words & ws)) for b, ws in held]
    return [(b, s) for b, s in sorted(scored, key=lambda x: -x[1]) if s > 0]
