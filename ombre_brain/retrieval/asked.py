"""What a message asks and where a memory writes it: the lexical evidence of admission (design §13).

The asked terms are worked out once per turn (:func:`asked_terms`); each candidate's admissible text (title,
summary, tags, main body) is case-folded once per version of the memory, and a term is looked for there as a
word start (:func:`found`). Admission reads the matched terms, the first field holding one and the share of the
asked weight they cover (:func:`lexical_match`). Pure, with per-text caches a purge empties (:func:`clear_cache`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

from ..buckets import main_text_of
from ..recall_types import Candidate
from ..text import CJK_RE
from .terms import term_weight

__all__ = ["AskedTerms", "admissible_texts", "asked_terms", "clear_cache", "discriminative_terms", "found",
           "lexical_match"]


@lru_cache(maxsize=8)
def _casefolded(words: tuple[str, ...]) -> frozenset[str]:
    """The stop words, case-folded once per config rather than once per candidate."""
    return frozenset(w.casefold() for w in words)


def _query_terms(terms: Sequence[str], *, idf: Callable[[str], float], cfg: Any,
                 keep_unseen: bool) -> list[str]:
    """Query terms long enough to mean something, minus stop words and terms common in the space.

    A term with CJK needs ``retrieval.min_term_chars`` characters; any other term needs three
    letters or digits. Every term needs ``idf(term) >= retrieval.min_idf``, except that with
    ``keep_unseen`` a term no moment contains (idf 0) is kept too.
    """
    stop = _casefolded(tuple(cfg.lexical.stop_words))
    out: list[str] = []
    for raw in terms:
        t = raw.strip().casefold()
        if not t or t in stop or t in out:
            continue
        if CJK_RE.search(t):
            long_enough = len(t) >= cfg.retrieval.min_term_chars
        else:
            long_enough = sum(ch.isalnum() for ch in t) >= 3
        score = idf(t)
        if long_enough and (score >= cfg.retrieval.min_idf or (keep_unseen and score == 0.0)):
            out.append(t)
    return out


def discriminative_terms(terms: Sequence[str], *, idf: Callable[[str], float], cfg: Any) -> list[str]:
    """Query terms that can prove a topic: long enough, not stop words, not common in the space."""
    return _query_terms(terms, idf=idf, cfg=cfg, keep_unseen=False)


def found(term: str, text: str) -> bool:
    """Case-insensitive substring; a Latin term must start at a word start (parrot~parrots, not cat~educate)."""
    if CJK_RE.search(term):
        return term in text
    i = text.find(term)
    while i != -1:
        prev = text[i - 1] if i else " "
        if not prev.isalnum() or CJK_RE.match(prev):
            return True
        i = text.find(term, i + 1)
    return False


def _term_groups(plan_terms: Sequence[str], *, idf: Callable[[str], float], cfg: Any) -> list[tuple[set[str], float]]:
    """What the query asks about: its terms, with jieba's overlapping cuts (小时/小时候) grouped.

    Terms the space has never seen still count (they are what an honest UNKNOWN is about);
    terms so common in the space that they carry no information do not.
    """
    kept = _query_terms(plan_terms, idf=idf, cfg=cfg, keep_unseen=True)
    groups: list[tuple[set[str], float]] = []
    for t in sorted(kept, key=len, reverse=True):
        for members, _w in groups:
            if any(t in m for m in members):
                members.add(t)
                break
        else:
            groups.append(({t}, 0.0))
    return [(members, max(term_weight(m) for m in members)) for members, _ in groups]


@dataclasses.dataclass(frozen=True)
class AskedTerms:
    """What a query asks about, worked out once per query: admission runs once per candidate."""

    terms: tuple[str, ...]                             # discriminative terms a field may contain
    groups: tuple[tuple[frozenset[str], float], ...]  # weighted term groups, for coverage
    message_groups: int | None = None                  # how many of ``groups`` are the message's own

    @functools.cached_property
    def groups_of(self) -> dict[str, tuple[int, ...]]:
        """Each member term's groups, by index: a candidate's coverage visits only the groups it holds."""
        out: dict[str, list[int]] = {}
        for i, (members, _w) in enumerate(self.groups):
            for m in members:
                out.setdefault(m, []).append(i)
        return {m: tuple(ix) for m, ix in out.items()}

    @functools.cached_property
    def totals(self) -> dict[int, float]:
        """The asked weight of the first n groups, summed in order, for n = all and n = the message's own."""
        ns = {len(self.groups), *(() if self.message_groups is None else (self.message_groups,))}
        return {n: sum(w for _, w in self.groups[:n]) for n in ns}


def asked_terms(plan_terms: Sequence[str], *, idf: Callable[[str], float], cfg: Any,
                context: Sequence[tuple[str, float]] = ()) -> AskedTerms:
    """The message's terms, plus the conversation's (``context``: (term, weight)) at their lower weights."""
    groups = [(frozenset(m), w) for m, w in _term_groups(plan_terms, idf=idf, cfg=cfg)]
    terms = list(discriminative_terms(plan_terms, idf=idf, cfg=cfg))
    own = len(groups)
    for t, weight in context:
        for m, w in _term_groups([t], idf=idf, cfg=cfg):
            if not any(m & g for g, _ in groups):
                groups.append((frozenset(m), w * weight))
        terms += [x for x in discriminative_terms([t], idf=idf, cfg=cfg) if x not in terms]
    return AskedTerms(tuple(terms), tuple(groups), own if len(groups) > own else None)


def _coverage(asked: AskedTerms, matched: Sequence[str]) -> float:
    """The share of the asked term weight a memory holds: of the message's own terms, or of the message's
    and the conversation's together, whichever is more. Context adds a way in (a memory of the topic the
    conversation is on); it never dilutes a memory that answers the message itself.

    A group held only through a shorter cut (朋友 of 女朋友, 火锅 of 重庆火锅) counts for that cut's share
    of the group's weight: a memory about a boyfriend or a best friend does not say what a girlfriend is.

    Only the groups a matched term is in are visited (:attr:`AskedTerms.groups_of`), in the groups' order, so
    the sums are the same floats as over every group: with a conversation in play a turn asks some twenty
    groups and a memory holds two or three of them.
    """
    best: dict[int, float] = {}
    for t in matched:
        w = term_weight(t)
        for i in asked.groups_of.get(t, ()):
            if w > best.get(i, -1.0):
                best[i] = w
    whole = _share(asked, best, len(asked.groups))
    if asked.message_groups is None:
        return whole
    return max(whole, _share(asked, best, asked.message_groups))


def _share(asked: AskedTerms, best: dict[int, float], upto: int) -> float:
    """The weighted share of the first ``upto`` groups held, each by its best matched member's share."""
    total = asked.totals[upto]
    if not total > 0:
        return 0.0
    held = 0
    for i in sorted(best):
        if i < upto:
            members, w = asked.groups[i]
            held += w * min(1.0, best[i] / _heaviest(members))
    return held / total


@lru_cache(maxsize=4096)
def _heaviest(members: frozenset[str]) -> float:
    """A term group's weight: its heaviest member's (a group is read for every candidate of the turn)."""
    return max(term_weight(m) for m in members)


@lru_cache(maxsize=4096)
def _admissible(title: str, summary: str, tags: tuple[str, ...], body: str) -> tuple[tuple[str, str], ...]:
    """The fields topic evidence may use, case-folded: cut once per version of a memory's text, not once per
    turn (a turn matches some sixty candidates). :func:`clear_cache` empties it (a purge)."""
    return (("title", title.casefold()), ("summary", summary.casefold()), ("tags", "\n".join(tags).casefold()),
            ("body", main_text_of(body).casefold()))


def admissible_texts(b: Any) -> tuple[tuple[str, str], ...]:
    """(field, case-folded text) of the fields topic evidence may use: title, summary, tags, main body."""
    return _admissible(b.title, b.summary or "", b.tags, b.body)


@lru_cache(maxsize=4096)
def _admissible_joined(title: str, summary: str, tags: tuple[str, ...], body: str) -> str:
    """The admissible fields in one text: a term that is not in it is in none of them (one C-level test per term
    and candidate, before the per-field word-start test)."""
    return "\n".join(low for _, low in _admissible(title, summary, tags, body))


def clear_cache() -> None:
    """Forget the case-folded memory texts (they quote memories; a purge calls this)."""
    _admissible.cache_clear()
    _admissible_joined.cache_clear()


def lexical_match(candidate: Candidate, asked: AskedTerms) -> tuple[tuple[str, ...], str | None, float]:
    """(matched terms, first field that holds one, coverage) over the bucket's admissible text."""
    b = candidate.bucket
    key = (b.title, b.summary or "", b.tags, b.body)
    whole = _admissible_joined(*key)
    terms = [t for t in asked.terms if t in whole]
    matched: list[str] = []
    first: str | None = None
    if not terms:
        return (), None, 0.0
    for name, low in _admissible(*key):
        for t in terms:
            if found(t, low):
                first = first or name
                if t not in matched:
                    matched.append(t)
    return tuple(matched), first, _coverage(asked, matched) if first else 0.0
