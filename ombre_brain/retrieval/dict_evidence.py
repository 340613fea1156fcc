"""What the dictionary says about one memory against what a message asks (docs/design.md §18).

For each asked term group (jieba's overlapping cuts of one word, with its weight) the memory either holds
it — written in it, or through the dictionary (:mod:`.dictionary`): "beach" and 海边 share a gloss, 海边 and
沙滩 share one, "grandma" is close in meaning to 外婆's "grandmother" — or it does not. A term it does not
hold may meet a memory word the dictionary knows as a *different* thing of the *same kind*: "sister" against
哥哥 ("older brother"), 外公 against 外婆. Same kind is read from the second opinion's word vectors (sister
and brother sit at about 0.6, sister and Paris far lower); different is the dictionary's (no shared gloss).
That is the shape of a near miss, and admission gets it as a feature:

- ``dict_match``: the share of the asked weight the memory holds, written or through the dictionary;
- ``dict_conflict``: how strongly the heaviest unheld key term meets such a different word (its cosine;
  0 when none does).

Pure: the bridge, the memory's words and a word-cosine function in; numbers and the matched pairs out (the
debug pages show them as "beach→海边 (dict)").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, MutableMapping, Sequence

from ..text import CJK_RE
from .dict_kinds import THING_SHARE
from .dictionary import fold_english, known_kinds

__all__ = ["KIND", "SYNONYM", "DictEvidence", "dict_evidence"]

SYNONYM = 0.8  # an English word this close to a Chinese word's English gloss means the same (grandma/grandmother
# 0.91, kitty/cat 0.81; sister/brother 0.75 and aunt/uncle 0.79 stay below: measured with USE v3)
KIND = 0.55     # two words this close are the same kind of thing; a conflict when they differ. Measured with USE v3
# on the words' English senses: sister/brother 0.75, 外公/外婆 0.80, cat/dog 0.67, colleague/friend 0.64, coffee/tea
# 0.61, dad/mom 0.58 stand above; rabbit/pet 0.54 (a kind and its kind), smoothie/mouth 0.52, apple/banana 0.51,
# teacher/doctor 0.48 below: USE's word space puts unrelated everyday nouns near 0.5
KEY_SHARE = 0.5  # a key term weighs at least this share of the heaviest asked term
MOSTLY = 0.6     # a memory holding this share of the asked weight is about it: no conflict (min_dictionary_coverage)
MIN_ZIPF = 3.0   # English senses compared for kind are everyday words (wordfreq zipf ≥ 3: "sister" 4.9, "dango" 1.1)


@dataclasses.dataclass(frozen=True)
class DictEvidence:
    matched: float
    conflict: float
    pairs: tuple[tuple[str, str, str], ...]  # (asked term, memory word, "dict" | "conflict")


NONE = DictEvidence(0.0, 0.0, ())


def _near(term: str, word: str, bridge, cos: Callable[[str, str], float | None]) -> bool:
    """Two words whose English senses are close in meaning in the second opinion's word space: an English word and a
    Chinese word's glosses (grandma, 外婆's "grandmother"), or two Chinese words' glosses that share a character
    (猫咪 "kitty", 猫 "cat")."""
    t_cjk, w_cjk = bool(CJK_RE.search(term)), bool(CJK_RE.search(word))
    if not t_cjk and not w_cjk:
        return False
    if t_cjk and w_cjk and not set(term) & set(word):
        # two Chinese words glossed alike are one thing only when they share a morpheme (猫咪/猫, 小狗/狗): 外婆 and
        # 奶奶 both gloss "grandmother", and are two different grandmothers
        return False
    return any((cos(a, b) or 0.0) >= SYNONYM for a in bridge.head_words(term) for b in bridge.head_words(word))


def _kind(a: str, b: str, bridge, cos: Callable[[str, str], float | None]) -> float:
    """How much two words are the same kind of thing: the closest pair of their English senses in the second
    opinion's word space (sister/brother 0.75). Read on the senses, not the words: two Chinese words that share a
    character (阵子 "a while", 团子 "dumpling") embed close whatever they mean."""
    return max(((cos(x, y) or 0.0) for x in bridge.head_words(a) for y in bridge.head_words(b)
                if _common(x) and _common(y)), default=0.0)


def _common(word: str) -> bool:
    """An everyday English word, whose vector the second opinion knows well (a rare one, "dango", embeds generically
    close to anything)."""
    from wordfreq import zipf_frequency

    return zipf_frequency(word, "en") >= MIN_ZIPF


def names_thing(word: str, bridge, thing: Callable[[str], bool]) -> bool:
    """A word that names a thing (a person, an animal, a place, an object): a Chinese word jieba tags a noun; an
    English word most of whose Chinese headwords are nouns ("sister" 0.9, "again" 0.07, "scared" 0.06; a word the
    dictionary does not hold is not one). Only two things swap in a near miss: "again" against 那么 is no conflict."""
    if CJK_RE.search(word):
        return thing(word)
    return _mostly(word, bridge, thing)


def _bilingual(term: str, word: str) -> bool:
    """A pair the dictionary speaks for: at least one Chinese word. Two English words (Dani's, Dani) are lexical
    matching's business, which has its own coverage bar."""
    return bool(CJK_RE.search(term) or CJK_RE.search(word))


def _a_time(word: str, bridge, time: Callable[[str], bool]) -> bool:
    """A time or an amount: a Chinese word ``time`` says is one; an English word most of whose headwords are."""
    if CJK_RE.search(word):
        return time(word)
    return _mostly(word, bridge, time)


_MOSTLY: dict[tuple[int, str, Callable], bool] = {}


def _mostly(word: str, bridge, test: Callable[[str], bool]) -> bool:
    """Do at least ``THING_SHARE`` of an English word's Chinese headwords pass ``test``? Read from the preloaded
    table when there is one, else worked out and remembered per bridge and test: "find" has over a hundred headwords,
    each tagged by jieba."""
    stem = fold_english(word)
    known = known_kinds(bridge, test)  # the shipped table (:mod:`.dict_kinds`), when it fits this bridge
    if known is not None:
        return stem in known
    key = (id(bridge), stem, test)
    got = _MOSTLY.get(key)
    if got is None:
        heads = bridge.headwords(word)
        got = bool(heads) and sum(test(h) for h in heads) >= THING_SHARE * len(heads)
        if len(_MOSTLY) > 65536:
            _MOSTLY.clear()
        _MOSTLY[key] = got
    return got


def _firm(term: str, word: str, bridge, thing: Callable[[str], bool]) -> bool:
    """A single Chinese character matches only a word that names a thing (狗 = dog): one character glosses too many
    everyday senses ("nice, thanks" against 好, in any memory that says 好) to stand for an adjective or a verb."""
    single = [x for x in (term, word) if len(x) == 1 and CJK_RE.search(x)]
    if not single:
        return True
    other = word if single[0] == term else term
    return names_thing(other, bridge, thing) and names_thing(single[0], bridge, thing)


def swappable(term: str, word: str, bridge) -> bool:
    """Could a near miss swap these two words (my sister for 哥哥)? The dictionary must say they differ, and one of
    them must be Chinese: two English words are left to word alignment and the fitted model, since their vectors
    cannot tell a kind from its member (dental/teeth 0.83, dairy/milk 0.78, language/Spanish 0.60 stand as close as
    sister/brother 0.75). A Chinese word of two or more characters that ends as one of the other word's Chinese
    headwords ends (外语 and 西语, Spanish) names its kind, a category and its member, not a swap."""
    t_cjk, w_cjk = bool(CJK_RE.search(term)), bool(CJK_RE.search(word))
    if not (t_cjk or w_cjk) or not bridge.differs(term, word):
        return False
    if t_cjk != w_cjk:
        zh, en = (term, word) if t_cjk else (word, term)
        return not (len(zh) >= 2 and any(len(h) >= 2 and h[-1] == zh[-1] for h in bridge.headwords(en)))
    return True


def _same(term: str, word: str, bridge, cos: Callable[[str, str], float | None], thing: Callable[[str], bool],
          time: Callable[[str], bool], memo: MutableMapping | None) -> bool:
    """Does the dictionary hold this memory word for this asked term (one pair of :func:`dict_evidence`'s match)?"""
    key = ("same", term, word)
    got = memo.get(key) if memo is not None else None
    if got is None:
        got = bool(_bilingual(term, word)  # the cheap tests first
                   and (bridge.means_same(term, word) or _near(term, word, bridge, cos))
                   and _firm(term, word, bridge, thing)
                   and not (_a_time(term, bridge, time) and _a_time(word, bridge, time)))
        if memo is not None:
            memo[key] = got
    return got


def _kind_of(term: str, word: str, bridge, cos: Callable[[str, str], float | None], thing: Callable[[str], bool],
             memo: MutableMapping | None) -> float:
    """How much a swappable memory word is the same kind of thing as an asked term; 0 when it is no swap for it."""
    key = ("kind", term, word)
    got = memo.get(key) if memo is not None else None
    if got is None:
        got = (_kind(term, word, bridge, cos) if swappable(term, word, bridge) and names_thing(word, bridge, thing)
               else 0.0)
        if memo is not None:
            memo[key] = got
    return got


def dict_evidence(groups: Sequence[tuple[Sequence[str], float]], words: Sequence[str], bridge,
                  held: Callable[[str], bool], cos: Callable[[str, str], float | None], *,
                  conflicts: bool = True, thing: Callable[[str], bool] = lambda t: True,
                  time: Callable[[str], bool] = lambda t: False, memo: MutableMapping | None = None) -> DictEvidence:
    """The dictionary's reading of one memory: see the module docstring. ``held(term)``: the term is written in
    the memory; ``cos(a, b)``: the second opinion's cosine of two words (None when it cannot read one);
    ``conflicts``: whether the groups are the message's own terms (only those can conflict); ``thing(term)``: the
    term names a thing (a noun: a person, an animal, a place), the only kind of term a near miss swaps; ``time(term)``:
    the term names a time or an amount (two of those meeting is no match).

    What a pair of words gives depends on the two words alone (the bridge, the word vectors and ``thing``/``time``
    fixed), so a caller that keeps those fixed may pass a ``memo`` to keep each pair's answer across memories and
    turns: the same words meet again and again, and reading a pair costs up to a dozen cosines. Only with a real
    ``cos``: a dry run's answers are not the pair's."""
    total = sum(w for _, w in groups)
    if total <= 0:
        return NONE
    heaviest = max(w for _, w in groups)
    got = 0.0
    conflict = 0.0
    pairs: list[tuple[str, str, str]] = []
    missed: list[tuple[Sequence[str], float]] = []
    written: set[str] = set()
    for members, weight in groups:
        if any(held(m) for m in members):
            got += weight
            written.update(members)
            continue
        match = next(((m, w) for m in members for w in words if _same(m, w, bridge, cos, thing, time, memo)), None)
        if match is not None:
            got += weight
            pairs.append((*match, "dict"))
        else:
            missed.append((members, weight))
    # a memory word that answers one asked term is accounted for: it is no different thing for another
    # ("What song can I play on the guitar?": 吉他 is the guitar, not a swap for the song)
    used = {w for _, w, _ in pairs} | written
    # a memory that holds most of what is asked is about it: one word it lacks is a detail, not a swap ("the music
    # box by my bed" against 床头的八音盒, whose "music" meets 唱歌)
    for members, weight in missed if conflicts and got / total < MOSTLY else ():
        if weight < KEY_SHARE * heaviest:
            continue
        for m in members:
            if not names_thing(m, bridge, thing):
                continue
            for w in words:
                if w not in used:
                    c = _kind_of(m, w, bridge, cos, thing, memo)
                    if c >= KIND and c > conflict:
                        conflict = c
                        pairs = [p for p in pairs if p[2] != "conflict"] + [(m, w, "conflict")]
    return DictEvidence(round(got / total, 6), round(conflict, 6), tuple(pairs))
