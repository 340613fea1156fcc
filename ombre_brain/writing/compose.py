"""From a verdict to drafts: what each kept side stores, in the user's own words.

- **The body is the user's message**, verbatim: never a summary, never the companion's words. A short answer
  to the companion's question ("杭州" after "你在哪个城市呀？") means nothing alone, so the question (only the
  question, never the rest of the companion's message) goes with it as a ``### context`` section: a context-only
  section, shown beside a hit on the memory, never proving one (``buckets.CONTEXT_ONLY_SECTIONS``).
- **Both sides** of one message ("我不吃香菜。下次点菜记得提醒我") are two drafts. When the message's
  sentences split cleanly (some are the lesson, the others are not, judged sentence by sentence), each side
  keeps its own sentences; otherwise both keep the whole message.
- **Temperature and time** follow the exchange: valence and arousal from :mod:`.affect`, and a stated time
  ("下个月", "last Friday") becomes ``event_time`` (:mod:`.when`).

Pure apart from the sentence judge the caller passes in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from ..text import CJK_RE, clauses, units
from .affect import affect_of
from .decision import Verdict
from .drafts import IMPORTANCE, Draft, title_of
from .exchange import Exchange
from .signals import sentences
from .when import event_time

__all__ = ["compose", "split_sides"]

SUBJECTS = {"stable_boundary": "user", "short_state": "user", "process_event": "event",
            "relationship_lesson": "relationship"}
ANSWER_UNITS = 16  # an answer this short to the companion's question keeps the question as its context
LINE_CHARS = 90  # a message longer than this gets a profile line of its own (its summary): the sentence of its fact
TITLE_UNITS = 4  # a clause shorter than this (an exclamation, a reply word, a bare number) never titles a memory
CLEARER = 1.5    # a later clause titles the memory when the model weighs it this many times the first one


def split_sides(text: str, is_lesson: Callable[[Sequence[str]], Sequence[bool]]) -> tuple[str, str] | None:
    """(user part, lesson part) when the sentences split cleanly into both, else None."""
    sents = sentences(text)
    if len(sents) < 2:
        return None
    flags = list(is_lesson(sents))
    lesson = _join([s for s, f in zip(sents, flags, strict=True) if f])
    other = _join([s for s, f in zip(sents, flags, strict=True) if not f])
    if units(lesson) < 2 or units(other) < 2:
        return None
    return other, lesson


def _join(parts: Sequence[str]) -> str:
    """Sentences back into one text: CJK sentences run on, Latin ones take a space between them."""
    out = ""
    for p in parts:
        out += (" " if out and not (CJK_RE.match(p[:1]) or CJK_RE.match(out[-1:])) else "") + p
    return out


def _body(words: str, asked: str | None, signals: Mapping[str, float]) -> str:
    if asked and signals.get("answer_to_question") and units(words) <= ANSWER_UNITS:
        return f"{words}\n\n### context\n{asked.strip()}"
    return words


def _fields(words: str, body: str, layer: str, subject: str, affect: tuple[float, float],
            when: datetime | None, weigh: Weigh | None = None) -> dict[str, Any]:
    # a short answer to the companion's question is titled by the answer itself, however short ("成都，离我爸妈近一点")
    best, line = (None, None) if body != words else stating(words, layer, weigh)
    fields: dict[str, Any] = {
        "title": title_of(words, best), "body": body, "importance": IMPORTANCE[layer],
        "valence": affect[0], "arousal": affect[1], "memory_subject": subject, "memory_layer": layer,
        "memory_classification_source": "model", "origin": "user", "basis": "stated"}
    if when is not None:
        fields["event_time"] = when.isoformat(timespec="seconds")
    if line:
        fields["summary"] = line
    return fields


Weigh = Callable[[Sequence[str], str], Sequence[float]]
"""How strongly each of some texts, alone, says something of a layer (the write model, read on each clause)."""


def stating(words: str, layer: str, weigh: Weigh | None) -> tuple[str | None, str | None]:
    """(the clause that says the fact, the line a profile shows for it): among clauses of ``TITLE_UNITS`` or more
    (never "救命", "行" or "三岁了" alone), the first, unless the model weighs another ``CLEARER`` times more on its own
    ("今天只想躺着，我下周要去成都面试" → 我下周要去成都面试); for a message longer than ``LINE_CHARS``, the
    sentence that holds it (shorter messages are their own line). None where the first clause already says it."""
    parts = [c for c in clauses(words) if units(c) >= TITLE_UNITS]  # never "救命", "行", "三岁了" alone
    if weigh is None or len(parts) < 2:
        return (parts[0] if parts and parts[0] != clauses(words)[0] else None), None
    scores = list(weigh(parts, layer))
    top = max(range(len(parts)), key=lambda i: (scores[i], -i))
    best = parts[top] if scores[top] >= CLEARER * scores[0] else parts[0]  # the first unless another says it clearly
    if len(words) <= LINE_CHARS:
        return best, None
    sentence = next((s for s in sentences(words) if best in s), best)
    return best, sentence if len(sentence) <= LINE_CHARS else best


def compose(ex: Exchange, verdict: Verdict, signals: Mapping[str, float], at: datetime, *, asked: str | None = None,
            is_lesson: Callable[[Sequence[str]], Sequence[bool]] | None = None,
            weigh: Weigh | None = None) -> list[Draft]:
    """The drafts of a verdict: the user side (``u``) and the relationship side (``r``), each in the user's words."""
    if verdict.noise:
        return []
    words = ex.user.strip()
    user_words = lesson_words = words
    if verdict.user_layer and verdict.relationship and is_lesson is not None:
        parts = split_sides(words, is_lesson)
        if parts is not None:
            user_words, lesson_words = parts
    affect = affect_of(words, ex.reply)
    drafts = []
    if verdict.user_layer:
        layer = verdict.user_layer
        subject = SUBJECTS[layer]
        if layer == "process_event" and signals.get("cue:we"):
            subject = "relationship"  # "我们吵了一架" is the relationship's own history
        when = event_time(user_words, at, looks_ahead=bool(signals.get("cue:time_future")),
                          looks_back=bool(signals.get("cue:time_past")))
        drafts.append(Draft("u", _fields(user_words, _body(user_words, asked, signals), layer, subject, affect,
                                         when, weigh)))
    if verdict.relationship:
        drafts.append(Draft("r", _fields(lesson_words, _body(lesson_words, asked, signals), "relationship_lesson",
                                         "relationship", affect, None, weigh)))
    return drafts
