"""Word alignment: how much of what a query asks is said in a memory, in whatever words or language.

Lexical coverage needs the query's own words written in the memory. A paraphrase ("pup" for dog)
or another language ("beach" for 海边) shares none, and the sentence cosines of e5-small and USE
separate such answers from near misses poorly: "what's my sister's job?" sits as close to a
memory about a brother's job as a true answer does. Words separate them. A multilingual word
encoder (the second opinion, USE v3) puts a word and its translation or synonym close together
(dog/狗 0.90, grandma/外婆 0.59), related but different words lower (sister/brother 0.6,
Paris/京都 0.47). So each asked term is matched to the memory word closest to it, and admission
gets two features from those matches:

- ``aligned``: the mean over the asked terms, weighted by how specific each term is in its
  language, of its best cosine to a memory word (1 for a word written in the memory);
- ``aligned_min``: the weakest key term's best cosine. A near miss has one key term that nothing
  in the memory says (the sister, the cat, Paris).

A word the encoder's vocabulary does not hold (it reads as unknown pieces, and unknown words all
embed alike: 鹦鹉 and 搁 score 0.95) matches only where it is written. Pure: words and vectors in,
numbers out; the word vectors come from :meth:`SecondOpinion.words`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from .terms import normalize_term, specificity

__all__ = ["Alignment", "align", "memory_words"]

KEY_SHARE = 0.5  # a key term weighs at least this share of the heaviest asked term


def memory_words(texts: Iterable[str], tokenize, stop: frozenset[str], *,
                 cut: Iterable[Iterable[str]] = ()) -> tuple[str, ...]:
    """The distinct normalised words of a memory's admissible text, stop words left out. ``cut``: parts of that
    text already cut by the same ``tokenize`` (the tokens stored with its moments), read as they are."""
    out: set[str] = set()
    for text in texts:
        if text:
            out.update(normalize_term(w) for w in tokenize(text))
    for words in cut:
        out.update(normalize_term(w) for w in words)
    return tuple(sorted(out - stop))


@dataclasses.dataclass(frozen=True)
class Alignment:
    """The two features, and each asked term's best memory word (for the debug pages)."""

    aligned: float
    aligned_min: float
    pairs: tuple[tuple[str, str, float], ...]  # (asked term, closest memory word, cosine)


NONE = Alignment(0.0, 0.0, ())


def align(groups: Sequence[Sequence[str]], words: Sequence[str],
          vectors: Mapping[str, np.ndarray | None], *, stop: frozenset[str] = frozenset()) -> Alignment:
    """Match every asked term group (jieba's overlapping cuts of one word) to its closest memory word.

    ``vectors`` maps a word to its unit vector, or to None when the encoder does not know it. A group
    whose term is written in the memory scores 1 (a shorter cut of it, such as 朋友 of 女朋友, its share
    of the weight); a group or memory word without a vector can only match that way. Groups made only of
    stop words once clitics are cut ("what's") drop out, and so do numbers: the nearest word in meaning to
    a date or a count says nothing (in a chat, the date of a turn is not in its text).
    """
    present = set(words)
    known = [w for w in words if vectors.get(w) is not None]
    mem = np.stack([vectors[w] for w in known]) if known else None
    scored: list[tuple[float, float, str, str]] = []
    for group in groups:
        members = sorted({normalize_term(t) for t in group} - stop)
        if not members or any(ch.isdigit() for m in members for ch in m):
            continue  # a number is said where it is written (lexical coverage), or it is not said: 2023 ~ "recently"
        weight = max(specificity(m) for m in members)
        hit = max((m for m in members if m in present), key=specificity, default=None)
        if hit is not None and specificity(hit) >= weight:
            scored.append((1.0, weight, hit, hit))
            continue
        partial = (specificity(hit) / weight, weight, hit, hit) if hit is not None else (0.0, weight, members[0], "")
        asked = [m for m in members if vectors.get(m) is not None]
        if not asked or mem is None:
            scored.append(partial)
            continue
        sims = np.stack([vectors[m] for m in asked]) @ mem.T
        i, j = np.unravel_index(int(sims.argmax()), sims.shape)
        scored.append(max(partial, (max(float(sims[i, j]), 0.0), weight, asked[i], known[j])))
    if not scored:
        return NONE
    total = sum(w for _, w, _, _ in scored)
    heaviest = max(w for _, w, _, _ in scored)
    aligned = sum(s * w for s, w, _, _ in scored) / total
    weakest = min(s for s, w, _, _ in scored if w >= KEY_SHARE * heaviest)
    pairs = tuple((t, m, round(s, 4)) for s, _, t, m in scored)
    return Alignment(round(aligned, 6), round(weakest, 6), pairs)
