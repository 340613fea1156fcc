"""A profile line: the sentence of a memory that states its fact, in the user's own words.

The write decision keeps a whole message ("救命，今天被主管骂惨了，一个标题改了八遍…"), and a profile shows every
stable memory on every turn: it must show the fact, not the whole ramble. The line is the memory's ``summary`` when
its writer chose one (the write decision chooses it when it writes, docs/design.md §7.4), else its main text when
short enough, else the sentence that says the most (not a question, not a bare exclamation), cut at a clause
boundary. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ..buckets import CONTEXT_ONLY_SECTIONS, Bucket, parse_sections
from ..text import CJK_RE, split_sentences

NOT_THE_FACT = CONTEXT_ONLY_SECTIONS | {"context"}  # what rides beside the user's words: never the line
_CLAUSE_END = "，,、；;：:"
_QUESTION = re.compile(r"[?？]\s*$|[吗嘛呢吧]\s*[。.!！]?\s*$")
_CORRECTION = re.compile(r"说错了|记错了|搞错了|弄错了"
                         r"|(?i:\b(?:i (?:had|got) (?:it|that) wrong|i was wrong|i misspoke)\b)")
_SUBJECT = re.compile(r"(?<=[a-z,] )([A-Z][a-z]{1,20})(?:'s|’s| is| was)\b")


def source_text(bucket: Bucket) -> str:
    """The user's words of a memory: its summary, else its body without context, comments or anchors, else its
    title; on one line."""
    return _one_line(bucket, bucket.summary or _own_words(bucket))


def user_words(bucket: Bucket) -> str:
    """All the user's words of a memory, what its frame reads: its body without context, comments or anchors, else
    its summary, else its title; on one line. Not the line alone: the write decision keeps "Boise was her old post.
    she's in Santa Fe now" as the line of "i told you Romilly's in Boise but i had it wrong, …", and whose it is
    (Romilly) and that it corrects something are said before it."""
    return _one_line(bucket, _own_words(bucket) or bucket.summary)


def _own_words(bucket: Bucket) -> str:
    return "\n".join(s.text for s in parse_sections(bucket.body) if s.name not in NOT_THE_FACT)


def _one_line(bucket: Bucket, text: str | None) -> str:
    return " ".join(((text or "").strip() or bucket.title).split())


def profile_line(bucket: Bucket, max_chars: int, weight: Callable[[str], int] = lambda s: 0) -> str:
    """The line the profile shows for a memory (at most ``max_chars`` characters, ``…`` where it was cut).
    ``weight`` says how plainly a sentence states a fact (the frame reader's cues: an attribute, a holder)."""
    text = corrected(source_text(bucket))
    if len(text) <= max_chars:
        return text
    sentences = [s.strip() for s in split_sentences(text) if s.strip()]
    best = max(sentences, key=lambda s: _says(s, weight), default=text)
    return best if len(best) <= max_chars else _cut(best, max_chars)


def corrected(text: str) -> str:
    """What a correction says now. "i told you Romilly's in Boise but i had it wrong, Boise was her old post. she's
    in Santa Fe now": the words up to the correction state the old value, so the line is what follows it (the next
    sentences, else the clauses after a first clause that holds it: "我之前说错了，我爸其实是初中老师"), after the
    name the correction was about when the rest does not say it ("Romilly: she's in Santa Fe now")."""
    cues = list(_CORRECTION.finditer(text))
    if not cues:
        return text
    at = cues[-1].end()
    sentences = [m.end() for m in re.finditer(r"[。！？!?；;]|\.(?=\s)", text) if m.end() > at]
    rest = text[sentences[0]:].strip() if sentences else ""
    if not rest and not re.search(f"[{_CLAUSE_END}]", text[:cues[-1].start()]):  # "我之前说错了，我爸其实是…"
        rest = re.sub(f"^[^{_CLAUSE_END}]*[{_CLAUSE_END}]", "", text[at:], count=1).strip()
    if len(rest) < 4:
        return text
    who = next((m.group(1) for m in _SUBJECT.finditer(text[:at]) if m.group(1) not in rest), None)
    return f"{who}: {rest}" if who else rest


def _says(sentence: str, weight: Callable[[str], int]) -> tuple[int, int, int]:
    """How much a sentence says, for choosing the line: a statement before a question, then how plainly it states
    a fact, then its content length (up to a point: a long sentence is no better than a full one)."""
    content = len(CJK_RE.findall(sentence)) + len(re.findall(r"[A-Za-z]+", sentence)) * 2
    return (0 if _QUESTION.search(sentence) else 1, weight(sentence), min(content, 24))


def _cut(text: str, max_chars: int) -> str:
    """At the last clause boundary within ``max_chars`` (past its first half), else hard; with ``…``."""
    limit = max_chars - 1
    for i in range(limit, limit // 2, -1):
        if text[i - 1] in _CLAUSE_END or (text[i - 1] == " " and not CJK_RE.search(text[i - 2: i])):
            return text[: i - 1].rstrip() + "…"
    return text[:limit].rstrip() + "…"


__all__ = ["NOT_THE_FACT", "corrected", "profile_line", "source_text", "user_words"]
