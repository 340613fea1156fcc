"""How ``grow`` cuts a longer text into 2–6 memories: by rules, or with the upstream LLM.

Without an LLM the cut follows the writer's own structure: paragraphs (blank lines, headings,
``---`` rules) are the units, and a single paragraph falls back to sentences. Units are then
merged, neighbours only, so the text's order is kept: first down to ``max_items``, then further
while the units on either side of a boundary share enough words to be one topic (jieba tokens,
Jaccard overlap), never below ``min_items``; the most similar, shortest pair merges first.
Nothing is paraphrased, so every memory quotes the writer verbatim.

With ``upstream.base_url`` set (and ``mcp.grow.llm`` on), the LLM splits the text as Ombre-Brain's
``grow`` does; an answer that is not usable falls back to the rules, and the reply says so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..buckets import split_sentences
from ..errors import UpstreamError
from ..gateway.upstream import completion_text

__all__ = ["Piece", "derive_title", "split_by_llm", "split_by_rules"]

TITLE_CHARS = 40
TOPIC_OVERLAP = 0.25       # neighbours at least this similar (Jaccard) are one topic
SENTENCE_TARGET_CHARS = 160  # a paragraph cut into sentences aims at pieces about this long
_BREAK = re.compile(r"\n[ \t]*\n|\n(?=#{1,6}[ \t])|\n[ \t]*(?:-{3,}|\*{3,}|_{3,})[ \t]*(?:\n|$)")
_RULE = re.compile(r"^[ \t]*(?:-{3,}|\*{3,}|_{3,})[ \t]*$", re.M)
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")

LLM_PROMPT = (
    "You file a companion's long text into separate memories. Split the text at event or topic boundaries "
    "into {lo} to {hi} self-contained memories, in the text's order. Keep the writer's own words wherever you "
    "can and never invent facts. Answer with JSON only, no prose: "
    '{{"memories": [{{"title": "a short title", "content": "the memory", "tags": ["a few", "keywords"], '
    '"importance": 1-10, "valence": 0-1, "arousal": 0-1}}]}}'
)


@dataclass(frozen=True)
class Piece:
    """One memory cut from a text; scores are None when the splitter has no opinion."""

    title: str
    content: str
    tags: tuple[str, ...] = ()
    importance: int | None = None
    valence: float | None = None
    arousal: float | None = None


def derive_title(text: str, limit: int = TITLE_CHARS) -> str:
    """The first sentence of the first line that is not a heading or a rule, cut to ``limit`` characters."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")
                 and not _RULE.match(ln)), "") or text.strip().lstrip("#").strip()
    first = split_sentences(line)[0].strip() if line else ""
    title = first or line or "memory"
    return title if len(title) <= limit else title[: limit - 1].rstrip() + "…"


def _units(text: str) -> list[str]:
    return [u.strip() for u in _BREAK.split(text) if u and u.strip() and not _RULE.fullmatch(u.strip())]


def split_by_rules(text: str, *, tokenize: Callable[[str], Sequence[str]], min_items: int = 2,
                   max_items: int = 6, short_chars: int = 30) -> list[Piece]:
    """Paragraph and topic boundaries, no LLM: ``min_items``–``max_items`` pieces (one for a short text)."""
    text = text.strip()
    if len(text) < short_chars:
        return [Piece(derive_title(text), text)]
    units, joiner, target = _units(text), "\n\n", max_items
    if len(units) < min_items:  # one paragraph: its sentences are the units, kept with their own spacing
        units, joiner = [s for s in split_sentences(text) if s.strip()], ""
        target = max(min_items, min(max_items, round(len(text) / SENTENCE_TARGET_CHARS)))
    if len(units) < min_items:
        return [Piece(derive_title(text), text)]
    groups = [[i] for i in range(len(units))]
    tokens = [set(tokenize(u)) for u in units]
    total = sum(len(u) for u in units) or 1

    def seam(k: int) -> float:  # how much the two sides of a boundary talk about the same thing
        return _overlap(tokens[groups[k][-1]], tokens[groups[k + 1][0]])

    while len(groups) > min_items:
        size = [sum(len(units[i]) for i in g) for g in groups]
        k = max(range(len(groups) - 1), key=lambda j: (seam(j) + 0.3 * (1 - (size[j] + size[j + 1]) / total), -j))
        if len(groups) <= target and seam(k) < TOPIC_OVERLAP:
            break
        groups[k:k + 2] = [groups[k] + groups[k + 1]]
    texts = [joiner.join(units[i] for i in g).strip() for g in groups]
    return [Piece(derive_title(t), t) for t in texts]


def _overlap(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def split_by_llm(upstream, text: str, *, model: str | None, min_items: int = 2, max_items: int = 6,
                 max_chars: int = 20000) -> list[Piece]:
    """The upstream LLM's split; UpstreamError when it cannot be had or its answer is not usable."""
    payload = {"messages": [{"role": "system", "content": LLM_PROMPT.format(lo=min_items, hi=max_items)},
                            {"role": "user", "content": text}], "temperature": 0.2, "stream": False}
    if model:
        payload["model"] = model
    answer = completion_text(upstream.chat(payload)).strip()
    try:
        data = json.loads(_FENCE.sub("", answer))
    except json.JSONDecodeError:
        raise UpstreamError("the upstream LLM's split was not JSON", code="upstream_bad_body") from None
    memories = data.get("memories") if isinstance(data, dict) else data
    if not isinstance(memories, list) or not min_items <= len(memories) <= max_items:
        raise UpstreamError(f"the upstream LLM's split did not hold {min_items}-{max_items} memories",
                            code="upstream_bad_body")
    pieces = []
    for m in memories:
        content = m.get("content") if isinstance(m, dict) else None
        if not isinstance(content, str) or not content.strip() or len(content) > max_chars:
            raise UpstreamError("the upstream LLM's split held a memory without usable content",
                                code="upstream_bad_body")
        title = m.get("title") if isinstance(m.get("title"), str) and m["title"].strip() else derive_title(content)
        tags = tuple(str(t)[:64] for t in m.get("tags") or () if isinstance(t, str) and t.strip())[:8]
        pieces.append(Piece(title.strip()[:200], content.strip(), tags, _num(m.get("importance"), 1, 10, int),
                            _num(m.get("valence"), 0, 1, float), _num(m.get("arousal"), 0, 1, float)))
    return pieces


def _num(value, lo: float, hi: float, kind: type):
    """A score the LLM offered, clamped into range; None when it offered none or nonsense."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return kind(min(hi, max(lo, round(value) if kind is int else value)))
