"""The rule-based first pass at writer hints, from cue words in config (design §7).

Used when a writer gives no hints, and by the post-exchange writer when no LLM extractor is
configured. It is deliberately simple and predictable: persona designers extend the lists.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .config import WriterConfig


@dataclass(frozen=True)
class Classification:
    subject: str           # user | relationship | event
    layer: str | None      # stable_boundary | short_state | process_event | relationship_lesson | None (noise)
    cues: tuple[str, ...]  # the cue words that decided


def _hits(text: str, cues: tuple[str, ...]) -> list[str]:
    low = text.lower()
    out = []
    for cue in cues:
        c = cue.lower()
        if re.search(r"[a-z]", c):
            if re.search(r"(?<![a-z])" + re.escape(c) + r"(?![a-z])", low):
                out.append(cue)
        elif c in low:
            out.append(cue)
    return out


def classify(text: str, cfg: WriterConfig) -> Classification:
    """Ask the five questions in order: boundary, lesson, short state, process event, noise."""
    lesson = _hits(text, cfg.relationship_lesson)
    boundary = _hits(text, cfg.stable_boundary)
    state = _hits(text, cfg.short_state)
    event = _hits(text, cfg.process_event)
    rel = _hits(text, cfg.relationship_subject)
    if boundary and not lesson:
        return Classification("user", "stable_boundary", tuple(boundary))
    if lesson:
        return Classification("relationship", "relationship_lesson", tuple(lesson))
    if state:
        return Classification("user", "short_state", tuple(state))
    if event or len(text.strip()) >= 40:
        return Classification("relationship" if rel else "event", "process_event", tuple(event))
    return Classification("user", None, ())


def hints_for(text: str, cfg: WriterConfig) -> dict:
    """Writer-hint fields for a bucket that arrived without any."""
    c = classify(text, cfg)
    return {"memory_subject": c.subject, "memory_layer": c.layer or "process_event",
            "memory_classification_source": "rule"}
