"""Changed facts without a language model: the frame of a profile line, and which lines a newer one supersedes.

A profile shows what is true now. When the user says a fact again with a new value ("我跳槽去了一家游戏公司", "we
moved to Leeds", "可乐上个月走了", "我之前说错了，其实是…"), the older line must stop being shown as current, yet stay
as history. Without an LLM the line is read as a **frame** from the cue lists of ``gateway.profile`` (persona designers
tune them; docs/design.md §24):

- its **holder**: the first holder word it says (妈妈/mom → ``mother``, 狗/dog → ``dog``), or a name an earlier line
  bound to a holder ("我家狗叫可乐": 可乐 is the dog), else the user (``self``);
- the **exclusive attributes** it states: a person has one job, one home, one partner, one age (``attributes``);
- whether it **says something changed** (``change_cues``: 现在, 不再, 搬到, no longer, quit, actually, 说错了);
- its **key terms**: its words of two or more characters (three or more letters) that are no cue.

Two rules, applied oldest first, make a newer line supersede an older one of the same holder:

1. **Same attribute**: both state the same exclusive attribute (the newest job line is the job).
2. **Said to change**: the newer says something changed and shares a key term with the older ("我现在不喝咖啡了"
   supersedes "我每天早上要喝两杯咖啡").

Pure: text, tokens and the config in; frames and supersessions out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from ..config.profile import ProfileConfig
from ..cues import cue_regex
from ..retrieval.dictionary import fold_english
from ..retrieval.terms import specificity
from ..text import CJK_RE, HAN, fold

SELF = "self"
OTHER = "other"  # a line about someone it names only by a pronoun: it supersedes nothing and nothing by attribute
_PRONOUNS = frozenset("我你他她它")
_LEAD = r"^\W*(?:(?:and|so|ok|also|well|oh|anyway|um|btw)\W+)*"  # what a line may open with before its subject
_SELF_SUBJECT = re.compile(_LEAD + r"(?:i|i'm|i've|i'd|i'll|me)\b|^\W*我(?!的|家|们)")
_OTHER_SUBJECT = re.compile(_LEAD + r"(?:she|he|they|she's|he's|they're)\b|^\W*(?:她|他|它)(?!们家)")
_OWNED = re.compile(r"^\W*$|" + _LEAD + r"(?:my|our)\s+$|^\W*我(?:的|家|们家)?的?$|^\W*家里(?:的)?$")
_NAME_AFTER = re.compile(r"\s+([A-Z][a-zA-Z'-]{1,20})\b")
_NOT_NAMES = frozenset({"i", "i'm", "and", "is", "was", "the", "a", "but", "so", "he", "she", "it", "they", "we"})
_CJK_NAME = re.compile(f"^[{HAN}]{{1,4}}")


@dataclass(frozen=True)
class Frame:
    """What a line says, as far as supersession goes."""

    holder: str
    attributes: frozenset[str]
    changed: bool
    terms: frozenset[str]
    care: bool = False  # it says something a companion must not forget (gateway.profile.care: an allergy, a fear)
    mentions: frozenset[str] = frozenset()  # every holder it names, by a holder word or a bound name, anywhere
    past: bool = False  # it asks for, or tells of, an old value (gateway.profile.history_cues: 以前, 前男友, used to)

    def to_dict(self) -> dict:
        return {"holder": self.holder, "attributes": sorted(self.attributes), "changed": self.changed,
                "terms": sorted(self.terms), "care": self.care, "mentions": sorted(self.mentions), "past": self.past}


class FrameReader:
    """The cue lists of ``gateway.profile``, compiled once per config."""

    def __init__(self, cfg: ProfileConfig) -> None:
        self.holders = [(h, p) for h, words in cfg.holders.items() for p in _patterns(words)]
        self.attributes = [(a, p) for a, words in cfg.attributes.items() for p in _patterns(words)]
        self.changes = list(_patterns(cfg.change_cues))
        self.trusted = list(_patterns(cfg.supersede.trusted_cues))
        self.care = list(_patterns(cfg.care))
        self.history = list(_patterns(cfg.history_cues))
        self.exclusive = frozenset(cfg.exclusive_holders)
        self.people = frozenset(cfg.people)
        self.min_specificity = cfg.min_term_specificity
        self.cjk_naming = list(_patterns(w for w in cfg.naming if CJK_RE.search(w)))
        latin = [re.escape(w.strip()).replace("\\ ", r"\s+") for w in cfg.naming if w.strip() and not CJK_RE.search(w)]
        self.latin_naming = (re.compile(r"(?i:\b(?:" + "|".join(latin) + r"))\s+([A-Z][a-zA-Z'-]{1,20})")
                             if latin else None)
        cue_words = {*(w for ws in (*cfg.holders.values(), *cfg.attributes.values()) for w in ws),
                     *cfg.change_cues, *cfg.naming}
        self.cue_words = frozenset(fold(w) for w in cue_words)

    def read(self, text: str, tokens: Iterable[str], names: dict[str, str]) -> Frame:
        """The frame of one line; ``names`` are the space's name bindings (name → holder, :meth:`bindings`)."""
        folded = fold(text)
        attributes = [(m.start(), a) for a, p in self.attributes for m in [p.search(folded)] if m]
        first_attribute = min((i for i, _ in attributes), default=len(folded))
        found = self._holders(folded)
        named = {fold(n): h for n, h in names.items()}
        spots = [(folded.find(n), h) for n, h in named.items() if n in folded]
        mentions = frozenset(h for _, h in self._holders(folded, everywhere=True)) | frozenset(h for _, h in spots)
        if _SELF_SUBJECT.match(folded):  # the user's own line: only a name said before what it states is its holder
            spots = [(i, h) for i, h in spots if i < first_attribute]
        found += spots
        holder = min(found)[1] if found else SELF
        changed = any(p.search(folded) for p in self.changes)
        own = set(named) | {fold(n) for n in self._names(text, folded)}  # a name says whose, never what changed
        terms = frozenset(_stem(t) for t in (fold(x) for x in tokens)
                          if _key_term(t) and t not in self.cue_words and t not in own
                          and specificity(t) >= self.min_specificity)
        return Frame(holder, frozenset(a for _, a in attributes), changed, terms,
                     any(p.search(folded) for p in self.care), mentions, any(p.search(folded) for p in self.history))

    def says_change_plainly(self, text: str) -> bool:
        """The line says outright that something changed (``supersede.trusted_cues``: 跳槽, 分手, switched, quit)."""
        folded = fold(text)
        return any(p.search(folded) for p in self.trusted)

    def bindings(self, text: str) -> tuple[tuple[str, str], ...]:
        """The names a line gives to a holder it names by a holder word: "我家狗叫可乐" (可乐 is the dog), "my cat
        Mothball", "my sister is called Delia". Read from the line alone, so the space's bindings do not depend on
        the order its lines are read in."""
        folded = fold(text)
        out = []
        for h, p in self.holders:
            for m in p.finditer(folded):
                if len(text) == len(folded):  # "my cat Mothball": a capitalised word right after the holder word
                    got = _NAME_AFTER.match(text[m.end():])
                    if got and got.group(1).lower() not in _NOT_NAMES:
                        out.append((got.group(1), h))
        found = self._holders(folded, everywhere=True)
        if found:
            holder = min(found)[1]
            out += [(n, holder) for n in self._names(text, folded)]
        return tuple(dict.fromkeys(out))

    def other_person(self, message: Frame, memory: str) -> bool:
        """Whether a message about one person (its holder among ``gateway.profile.people``: 表哥) meets a memory that
        names other people (表姐) and never that one: the memory cannot answer it, however close its words are."""
        if message.holder not in self.people:
            return False
        named = {h for _, h in self._holders(fold(memory), everywhere=True)} & self.people
        return bool(named) and not named & (message.mentions | {message.holder})  # "mom's there, dad drove her"

    def weight(self, sentence: str) -> int:
        """How plainly a sentence states a fact this reader knows the shape of: an attribute (2), a holder or a care
        cue (1), else 0. The profile's line is the sentence that says most (profile/lines.py)."""
        folded = fold(sentence)
        if any(p.search(folded) for _, p in self.attributes):
            return 2
        return int(any(p.search(folded) for _, p in self.holders) or any(p.search(folded) for p in self.care))

    def _holders(self, folded: str, *, everywhere: bool = False) -> list[tuple[int, str]]:
        """Holder words and where they stand; none when the line opens with the user as its subject and the word is
        not the user's own at the start ("I live in Milwaukee with my flatmate", "我跟室友合租": the user's home, not
        the flatmate's; "my cat…", "我妈…" are the cat's and the mother's)."""
        found = [(m.start(), h) for h, p in self.holders for m in [p.search(folded)] if m]
        if everywhere:
            return found
        if found and _SELF_SUBJECT.match(folded) and not _OWNED.match(folded[: min(found)[0]]):
            return []
        if not found and _OTHER_SUBJECT.match(folded):
            return [(0, OTHER)]  # "she lives in Madison": someone's, not the user's; whose, the line does not say
        return found

    def _names(self, text: str, folded: str) -> list[str]:
        """Names the line gives ("叫可乐", "named Miso"): what follows a naming word (a Chinese name of one to four
        characters, cut to two past that; a capitalised word in a Latin script)."""
        out = []
        for p in self.cjk_naming:
            for m in p.finditer(folded):
                got = _CJK_NAME.match(folded[m.end():].lstrip())
                if got and got.group(0)[0] not in _PRONOUNS:
                    out.append(got.group(0)[:2] if len(got.group(0)) > 2 else got.group(0))
        if self.latin_naming is not None:
            out += [m.group(1) for m in self.latin_naming.finditer(text)]
        return out


def _patterns(words: Iterable[str]) -> Iterable[re.Pattern]:
    for w in words:
        p = _compiled(w[3:]) if w.startswith("re:") else _compiled_cue(fold(w))
        if p is not None:
            yield p


@lru_cache(maxsize=4096)
def _compiled_cue(word: str) -> re.Pattern | None:
    return cue_regex(word) if word else None


@lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern:
    """A cue written ``re:<pattern>``: a regular expression over the folded line (an age said as a number)."""
    return re.compile(pattern)


def _stem(t: str) -> str:
    """A Latin word stemmed (cortados, cortado → cortado): a change said in another form still meets its line."""
    return t if CJK_RE.search(t) else fold_english(t)


def _key_term(t: str) -> bool:
    if CJK_RE.search(t):
        return len(t) >= 2
    return len(t) >= 3 and t.isalpha()


@dataclass(frozen=True)
class Line:
    """One profile line as supersession sees it: its id, when it was said, its frame, and its family (a fact about
    the user and a lesson on how to be with them never supersede one another)."""

    id: str
    at: str  # ISO time it was said (created), for the order
    frame: Frame
    family: str = "fact"


def supersessions(lines: Sequence[Line], endings: Iterable[str] = (), exclusive: Iterable[str] = (),
                  accept: Callable[[str, str], bool] | None = None,
                  departures: Iterable[str] = (), told: Iterable[str] = ()) -> dict[str, tuple[str, str]]:
    """``{older id: (newer id, rule)}`` for every line a newer one supersedes: ``same_attribute``, ``said_to_change``,
    ``holder_ended`` (the newer states one of ``endings`` of a holder other than the user: a pet that died
    supersedes every older line about it), ``holder_replaced`` (the newer says a change about a holder one has
    one of, ``exclusive``: a new manager) or ``holder_left`` (the newer states one of ``departures`` or ``endings``
    of a holder other than the user: the user's own older lines that name that holder go, "I live … with my flatmate
    Yusuf" once "Yusuf moved out"; a care line never). Each line is superseded by the first newer line that does so.
    A line in ``told`` (an episode: the user told it as an event) only ends: it supersedes by ``holder_ended`` and
    ``holder_left`` and is never itself a current line.

    One pass, oldest first, over indexes of the lines still current (by holder and attribute, by holder, and by
    holder and key term): a space with thousands of stable memories is read in milliseconds. ``accept(old, new)``,
    when given, may refuse a link (the changed-fact model reads the pair as no change): the older line then stays
    current, for a later line to supersede.
    """
    ends, only_one = frozenset(endings), frozenset(exclusive)
    gone = ends | frozenset(departures)
    events = frozenset(told)
    out: dict[str, tuple[str, str]] = {}
    by_attribute: dict[tuple, set[str]] = {}
    by_holder: dict[tuple, set[str]] = {}
    by_term: dict[tuple, set[str]] = {}
    by_mention: dict[tuple, set[str]] = {}  # the user's own lines (no care line) by a holder they name

    def drop(old: str, new: str, rule: str) -> None:
        if old != new and old not in out and (accept is None or accept(old, new)):
            out[old] = (new, rule)

    for line in sorted(lines, key=lambda x: (x.at, x.id)):
        f, new = line.frame, line.id
        if f.holder == OTHER:
            continue
        holder = (line.family, f.holder)
        told_only = new in events  # an episode tells an ending; it states no current value
        for a in () if told_only else f.attributes:
            for old in by_attribute.get((holder, a), ()):
                drop(old, new, "same_attribute")
        if f.holder != SELF and f.attributes & ends:
            for old in by_holder.get(holder, ()):
                drop(old, new, "holder_ended")
        if f.holder != SELF and f.attributes & gone:
            for old in by_mention.get(holder, ()):
                drop(old, new, "holder_left")
        if told_only:
            continue
        if f.holder in only_one and f.changed:
            for old in by_holder.get(holder, ()):
                drop(old, new, "holder_replaced")
        if f.changed:
            for piece in _pieces(f.terms):
                for old in by_term.get((holder, piece), ()):
                    drop(old, new, "said_to_change")
        for a in f.attributes:  # an attribute's current lines: the newest, and any older one a link was refused
            by_attribute[(holder, a)] = {new} | {o for o in by_attribute.get((holder, a), ()) if o not in out}
        by_holder.setdefault(holder, set()).add(new)
        if f.holder == SELF and not f.care:
            for h in f.mentions - {SELF}:
                by_mention.setdefault((line.family, h), set()).add(new)
        for piece in _pieces(f.terms):
            by_term.setdefault((holder, piece), set()).add(new)
    return out


def _pieces(terms: Iterable[str]) -> set[str]:
    """A line's key terms and, for a Chinese term, its pieces of two or more characters (咖啡 in 喝咖啡: jieba cuts
    a verb with its object), so that a term inside another's is found by lookup."""
    out = set()
    for t in terms:
        out.add(t)
        if CJK_RE.search(t) and 2 < len(t) <= 6:
            out.update(t[i:j] for i in range(len(t)) for j in range(i + 2, len(t) + 1) if j - i < len(t))
    return out


def shares_term(a: frozenset[str], b: frozenset[str]) -> bool:
    """A key term in both, or a Chinese one inside the other's (咖啡 in 喝咖啡: jieba cuts verbs with their objects)."""
    if a & b:
        return True
    return any(x in y or y in x for x in a if CJK_RE.search(x) for y in b if CJK_RE.search(y))


__all__ = ["OTHER", "SELF", "Frame", "FrameReader", "Line", "supersessions"]
