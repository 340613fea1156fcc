"""What a write decision hands on: drafts of buckets, one per side, in the user's own words.

A :class:`Draft` is one bucket to write from an exchange: ``side`` ``u`` (the user side: a stable
boundary, a short state or a process event) or ``r`` (the relationship side: a lesson, an agreement, a
promise), and the bucket's fields. Both sides of one exchange are two drafts, never one summary
(docs/design.md §7). Pure.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..text import clauses

__all__ = ["IMPORTANCE", "LAYERS", "SIDES", "Draft", "title_of"]

IMPORTANCE = {"stable_boundary": 7, "relationship_lesson": 7, "short_state": 4, "process_event": 5}
"""A draft's importance by layer when the decision gives none."""

LAYERS = ("stable_boundary", "short_state", "process_event", "relationship_lesson")
SIDES = {"u": "user", "r": "relationship"}
TITLE_CHARS = 40


@dataclasses.dataclass(frozen=True)
class Draft:
    """One bucket to write: ``side`` is "u" (user-side) or "r" (relationship-side)."""

    side: str
    fields: dict[str, Any]

    @property
    def layer(self) -> str | None:
        return self.fields.get("memory_layer")


def title_of(text: str, best: str | None = None) -> str:
    """A title from the user's own words: the clause that says the fact (``best``, chosen by the caller), else the
    first clause; cut to 40 characters."""
    first = best or next(iter(clauses(text)), text.strip())
    return first if len(first) <= TITLE_CHARS else first[:TITLE_CHARS - 1] + "…"
