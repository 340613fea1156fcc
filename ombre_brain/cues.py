"""Cue words: a message normalised as cues are matched against it, and a persona's cue lists compiled.

Every cue list comes from ``config.cues`` (Chinese and English); :mod:`.recall_policy` reads a message with
these and decides what it asks for. Pure: text and cue lists in, patterns and normalised text out.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from functools import lru_cache

from .config import Cues
from .text import CJK, fold_elongations, has_cjk
from .text import fold as text_fold

__all__ = ["CueSet", "Normalizer", "collapse_sets", "cue_regex", "fold", "normalize", "normalizer"]

_CJK_RUN_RE = re.compile(f"([{CJK}])\\1+")
_CJK_UNIT_RE = re.compile(f"([{CJK}])([{CJK}])(?:\\1\\2)+")
_LATIN_RUN3_RE = re.compile(r"([a-z])\1{2,}")
_LATIN_UNIT3_RE = re.compile(r"([a-z]{2})\1{2,}")
_L, _R = r"(?<![a-z0-9])", r"(?![a-z0-9])"
_WILD_GAP = r"([^。！？!?.\n]*?)"
_NEGATION = r"(?<![不没别])(?<!not )(?<!n't )(?<!never )(?<!no )"  # a cue right after one is not matched
_is_cjk = has_cjk
_base = text_fold  # NFKC, lower case, straight apostrophes, single spaces


def _all_cues(cues: Cues) -> Iterable[str]:
    for f in dataclasses.fields(cues):
        yield from getattr(cues, f.name)


@lru_cache(maxsize=16)
def collapse_sets(cues: Cues) -> tuple[frozenset[str], frozenset[str], tuple[str, ...]]:
    """Characters kept doubled, characters cut to one, and the particles (longest first)."""
    words = [_base(c) for c in _all_cues(cues)]
    doubled = frozenset(w[i] for w in words for i in range(len(w) - 1) if w[i] == w[i + 1] and _is_cjk(w[i]))
    particles = tuple(sorted({_base(p) for p in cues.trailing_particles if _base(p)}, key=len, reverse=True))
    singles = frozenset(w for w in words if len(w) == 1 and _is_cjk(w)) | frozenset(p for p in particles
                                                                                     if len(p) == 1)
    return doubled, singles, particles


def _collapse(text: str, doubled: frozenset[str], singles: frozenset[str]) -> str:
    def cjk_run(m: re.Match) -> str:
        c, run = m.group(1), m.group(0)
        if c in doubled:
            return c * 2
        if c in singles:
            return c
        return c * 2 if len(run) >= 3 else run

    text = _CJK_RUN_RE.sub(cjk_run, text)
    text = _CJK_UNIT_RE.sub(lambda m: m.group(0) if m.group(1) == m.group(2) else m.group(1) + m.group(2), text)
    text = _LATIN_RUN3_RE.sub(r"\1", text)
    return _LATIN_UNIT3_RE.sub(r"\1\1", text)


def _strip_tail(text: str, particles: tuple[str, ...]) -> str:
    while True:
        before = text
        text = text.rstrip()
        while text and not text[-1].isalnum():
            text = text[:-1].rstrip()
        for p in particles:
            rest = text[: -len(p)]
            latin_ok = _is_cjk(p) or not rest or not rest[-1].isalnum()
            if text.endswith(p) and latin_ok and any(ch.isalnum() for ch in rest):
                text = rest
                break
        if text == before:
            return text


@dataclasses.dataclass(frozen=True)
class Normalizer:
    """:func:`normalize` for one cue config, its sets looked up once: compiling N cues normalises each of them,
    and looking the sets up again per cue (hashing every cue list) made that quadratic in N."""

    doubled: frozenset[str]
    singles: frozenset[str]
    particles: tuple[str, ...]

    def __call__(self, text: str) -> str:
        return _strip_tail(_collapse(_base(text), self.doubled, self.singles), self.particles)


def normalizer(cues: Cues) -> Normalizer:
    return Normalizer(*collapse_sets(cues))


def normalize(text: str, cues: Cues) -> str:
    """The query as cues are matched against it: collapsed repeats, no trailing particles or punctuation."""
    return normalizer(cues)(text)


fold = fold_elongations  # cue matching is elongation-proof: goooood night matches "good night"


# ---------------------------------------------------------------- cue matching


def cue_regex(cue: str, negation: bool = False) -> re.Pattern | None:
    """A pattern for one (already normalised) cue; wildcard gaps are capture groups."""
    parts = []
    for part in cue.split("*"):
        part = part.strip()
        if not part:
            continue
        if _is_cjk(part):
            parts.append(re.escape(part))
        else:
            parts.append(_L + r"\s+".join(re.escape(w) for w in part.split()) + _R)
    if not parts:
        return None
    prefix = _NEGATION if negation else ""
    return re.compile(prefix + _WILD_GAP.join(parts))


class CueSet:
    """One cue list, compiled: patterns on the folded text, one-character CJK cues as whole tokens."""

    def __init__(self, words: Iterable[str], cues: Cues, negation: bool = False,
                 norm: Normalizer | None = None) -> None:
        self.patterns: list[tuple[str, re.Pattern]] = []
        chars = set()
        norm = norm or normalizer(cues)
        for raw in words:
            w = fold(norm(raw)) if "*" not in raw else fold(_base(raw))
            if not w:
                continue
            if len(w) == 1 and _is_cjk(w):
                chars.add(w)
                continue
            pattern = cue_regex(w, negation)
            if pattern is not None:
                self.patterns.append((w, pattern))
        self.patterns.sort(key=lambda p: len(p[0]), reverse=True)
        self.chars = frozenset(chars)

    def matches(self, folded: str, tokens: frozenset[str]) -> bool:
        return bool(self.chars & tokens) or any(p.search(folded) for _, p in self.patterns)


