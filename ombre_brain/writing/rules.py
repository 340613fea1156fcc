"""The rule writer: the five questions of the write decision asked with cue words from ``writer:`` in config.

Deliberately simple and predictable, and a persona designer extends its lists in YAML; it is the
write decision when neither the learned model nor an LLM extractor is configured
(``ingest.extractor: rule``). Lesson sentences go to a separate relationship-side draft. Pure.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from typing import Any

from ..classify import classify
from ..config import WriterConfig
from .drafts import IMPORTANCE, Draft, title_of

__all__ = ["rule_drafts"]

_SENTENCE_RE = re.compile(r"(?<=[。！？!?；;…\n])|(?<=[.](?=\s))")


def rule_drafts(user_text: str, cfg: WriterConfig) -> list[Draft]:
    """The five questions over the user's words; lesson sentences go to a separate relationship bucket."""
    text = user_text.strip()
    if len(text) < cfg.min_chars:
        return []
    only_lesson = dataclasses.replace(cfg, stable_boundary=(), short_state=(), process_event=())
    no_lesson = dataclasses.replace(cfg, relationship_lesson=())
    lesson, other = [], []
    for piece in _SENTENCE_RE.split(text):
        if piece.strip():
            (lesson if classify(piece, only_lesson).layer else other).append(piece)
    drafts = []
    user_part = "".join(other).strip()
    if user_part:
        c = classify(user_part, no_lesson)
        if c.layer is not None and len(user_part) >= cfg.min_chars:
            drafts.append(Draft("u", _fields(user_part, c.subject, c.layer, c.cues)))
    lesson_part = "".join(lesson).strip()
    if lesson_part:
        c = classify(lesson_part, only_lesson)
        drafts.append(Draft("r", _fields(lesson_part, "relationship", "relationship_lesson", c.cues)))
    return drafts


def _fields(text: str, subject: str, layer: str, cues: Iterable[str]) -> dict[str, Any]:
    tags = list(dict.fromkeys(c for c in cues if 0 < len(c) <= 64))[:4]
    return {"title": title_of(text), "body": text, "tags": tags, "importance": IMPORTANCE[layer],
            "memory_subject": subject, "memory_layer": layer, "memory_classification_source": "rule",
            "origin": "user", "basis": "stated"}
