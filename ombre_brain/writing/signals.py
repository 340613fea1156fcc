"""What an exchange says about itself, read from cue words: the learned write decision's cue features.

An embedding says what a message is about; it says little about what the message *does*. "我妈下个月做手术"
and "我妈下个月做手术吗？" sit side by side in e5's space, one a fact about the user's life and the other a
question. So the model also reads the message's form, with the persona's cue lists (``writer.signals``):
whether it asks, asks to recall, greets, thanks, laughs, supposes, jokes, asks for a task, talks about the
companion, asks not to be kept; whom it is about (I, you, we, family, pets); what it tells (identity,
likes, habits, lessons, states, events) and when (now, before, later). The exchange around it counts too: a
short answer to the companion's question is usually a fact ("杭州" after "你在哪个城市呀？").

Each cue list is one feature; the model's weights say how much each matters. ``dont_keep`` is also a rule
(:func:`dont_keep`). Pure: text and cue lists in, numbers out.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Sequence
from functools import lru_cache

from ..config import WriterSignals
from ..text import CJK_RE, fold, simplified, split_sentences, units

__all__ = ["CUE_LISTS", "SIGNAL_NAMES", "Signals", "compiled", "dont_keep", "introduces_name", "is_question",
           "names_someone", "read", "sentences", "signals"]

CUE_LISTS = tuple(f.name for f in dataclasses.fields(WriterSignals)
                  if f.name not in ("question_words", "question_endings", "refers_back"))
"""The cue lists that are features of their own (the question lists make ``question``; ``refers_back`` only
serves the dont_keep rule)."""

FORM = ("question", "question_word", "all_questions", "length", "short", "sentences", "cjk_share", "digits",
        "exclaims", "asked_before", "answer_to_question", "reply_asks", "reply_length", "dont_keep_only", "names")
SIGNAL_NAMES = tuple(f"cue:{n}" for n in CUE_LISTS) + FORM
"""Every feature this module gives, in the order the model's weights are stored."""

_TRAILING = re.compile(r"[\s。．.！!~～…,，、;；:：)）\]】\"'”’`*\-_=+^]+$")
_END_PARTICLES = ("啊", "呀", "哈", "啦", "哇", "哦", "噢", "喔", "呐", "捏", "嘞", "咧")
_EMOJI = re.compile("[\U0001F000-\U0001FAFF\u2600-\u27BF\uFE0F]+$")
_LATIN_WORD = re.compile(r"[a-z0-9']+")


def read(text: str) -> str:
    """A message (or a cue word) as the cue lists read it: Traditional Chinese as Simplified (別記這個 is 别记这个),
    then folded (NFKC, lower case, no zero-width or bidi characters: 别\u200b记 is 别记)."""
    return fold(simplified(text))


class Signals:
    """The compiled cue lists of one ``writer.signals``: a pattern per list, made once per config."""

    def __init__(self, cfg: WriterSignals) -> None:
        self.cfg = cfg
        self.lists = {f.name: _pattern(getattr(cfg, f.name)) for f in dataclasses.fields(WriterSignals)}
        self.endings = tuple(sorted({read(e) for e in cfg.question_endings if e.strip()}, key=len, reverse=True))

    def hit(self, name: str, folded: str) -> bool:
        p = self.lists[name]
        return p is not None and p.search(folded) is not None

    def spans(self, name: str, folded: str) -> list[tuple[int, int]]:
        p = self.lists[name]
        return [] if p is None else [m.span() for m in p.finditer(folded)]


@lru_cache(maxsize=8)
def compiled(cfg: WriterSignals) -> Signals:
    return Signals(cfg)


def _pattern(words: Sequence[str]) -> re.Pattern | None:
    """One alternation: a Latin cue as whole words, anything else (CJK, emoji, marks) as a substring."""
    alts = []
    for w in sorted({read(x) for x in words if x and x.strip()}, key=len, reverse=True):
        if re.search(r"[a-z0-9]", w):
            alts.append(r"(?<![a-z0-9'])" + r"\s+".join(re.escape(p) for p in w.split()) + r"(?![a-z0-9'])")
        else:
            alts.append(re.escape(w))
    return re.compile("|".join(alts)) if alts else None


def _bare(sentence: str) -> str:
    s = _EMOJI.sub("", sentence.strip())
    s = _TRAILING.sub("", s)
    while s and s.endswith(_END_PARTICLES) and len(s) > 1:
        s = s[:-1]
    return s


_NOT_A_PARTICLE = re.compile(r"(?:什|怎|这|那|多|要)么$")  # 么 ending a word (什么, 这么): no question particle


_EN_ASKS = re.compile(r"^(?:(?:so|and|but|wait|ok|okay|hey|um+|uh+|btw|also|oh|like|honestly)\W+)*"
                      r"(?:(?:what|where|who|when|why|which|how)(?:'s|'re|'d)?\s+(?!a\b|an\b)"
                      r"(?:is|are|was|were|do|does|did|can|could|would|will|should|have|has|had|am|time|long|many|"
                      r"much|often|old|far|come|else|about|kind|one|of)\b"
                      r"|(?:do|does|did|can|could|would|will|should|shall|is|are|am|was|were|have|has)\s+"
                      r"(?:i|you|we|he|she|it|they|u|people|anyone|someone|that|this|there)\b)")


def is_question(text: str, sig: Signals) -> bool:
    """Whether a sentence asks: a question mark, a question particle at its end (吗, 呢…), or an English sentence
    that opens as a question does ("what did the vet say about her back", "can you help me word it", "is it bad that
    i'm excited"), typed without its mark as people text. A 么 that ends a word ("我真不知道她到底要什么") is no
    particle: the sentence says something."""
    if re.search(r"[?？]\s*\W*$", text.strip()):
        return True
    if not CJK_RE.search(text) and _EN_ASKS.search(read(text).strip()):
        return True
    bare = _bare(read(text))
    if not bare or _NOT_A_PARTICLE.search(bare):
        return False
    return any(bare.endswith(e) for e in sig.endings if e not in ("?", "？"))


_SAID_RE = re.compile(r"[。！!.]\W*$")  # "好的，我听着呢。": a particle, but the full stop says it is no question


def question_of(asked: str | None, sig: Signals) -> str | None:
    """The question the companion asked just before (its question sentences among its last two), or None.

    Only that question gives a short answer its meaning ("杭州" under "你在哪个城市呀？"); the rest of the
    companion's message is the companion's talk, never part of the user's memory. A sentence that ends with a full
    stop is no question whatever its last particle ("好的，我听着呢。")."""
    if not asked:
        return None
    asks = [s for s in sentences(asked)[-2:] if is_question(s, sig) and not _SAID_RE.search(s)]
    return " ".join(asks) if asks else None


def sentences(text: str) -> list[str]:
    """The sentences of a message that say something (a line break ends one too), stripped."""
    parts = [p.strip() for line in text.splitlines() for p in split_sentences(line)]
    return [p for p in parts if _bare(p)] or [text.strip()]


def dont_keep(text: str, sig: Signals) -> tuple[bool, bool]:
    """(asks not to be kept, says only that): a ``dont_keep`` cue, and whether little else is left.

    A message that says only "别记这个" or "forget I said that" refers to what came before it: the
    writer then forgets the session's previous exchange. One that says "don't save this but I have a
    crush on my coworker" is about itself: nothing of it is kept, and nothing else is touched.
    """
    folded = read(text)
    spans = sig.spans("dont_keep", folded)
    if not spans:
        return False, False
    rest = folded
    for name in ("dont_keep", "refers_back", "laughter", "greeting"):
        rest = sig.lists[name].sub(" ", rest) if sig.lists[name] is not None else rest
    rest = re.sub(r"[^\w]+", " ", rest)
    return True, units(rest) <= 8


def signals(user: str, reply: str, asked: str | None, sig: Signals) -> dict[str, float]:
    """The cue features of one exchange: the user's message, the reply, and the companion's message before it."""
    folded = read(user)
    out = {f"cue:{n}": float(sig.hit(n, folded)) for n in CUE_LISTS}
    sents = sentences(user)
    questions = [is_question(s, sig) for s in sents]
    n = units(user)
    latin = len(_LATIN_WORD.findall(CJK_RE.sub(" ", folded)))
    asked_before = bool(asked) and any(is_question(s, sig) for s in sentences(asked or "")[-2:])
    out.update({
        "question": float(any(questions)),
        "question_word": float(sig.hit("question_words", folded)),
        "all_questions": float(all(questions)),
        "length": math.log1p(n),
        "short": float(n <= 4),
        "sentences": float(min(len(sents), 4)),
        "cjk_share": len(CJK_RE.findall(user)) / max(1, len(CJK_RE.findall(user)) + latin),
        "digits": float(bool(re.search(r"\d", folded))),
        "exclaims": float("!" in folded or "！" in user),
        "asked_before": float(asked_before),
        "answer_to_question": float(asked_before and not any(questions) and n <= 16),
        "reply_asks": float(bool(reply) and is_question(sentences(reply)[-1], sig)),
        "reply_length": math.log1p(units(reply)),
        "dont_keep_only": float(dont_keep(user, sig)[1]),
        "names": float(names_someone(user)),
    })
    return out


_INTRODUCES = re.compile(r"\b(?:named|(?<![Ii] )(?<!we )(?<!he )(?<!ey )(?<!ou )called|name is|name's)\s+"
                         r"(?!Me\b|Him\b|Her\b)[A-Z][\w'’-]+"
                         r"|(?:名叫|名字叫|名字是|取名叫?|起名叫?|叫做)[\u4e00-\u9fff]")


def introduces_name(text: str) -> bool:
    """Whether a message gives someone or something its name ("a chocolate lab named Moose", "a company called
    Halverson", "名字叫豆豆"): what it names is part of the user's life from now on, whatever the words around it."""
    return _INTRODUCES.search(text) is not None


_LATIN_NAME = re.compile(r"(?<![.!?]\s)(?<![A-Za-z'])(?<!^)[A-Z][a-z]{2,}(?![A-Za-z])")
_NOT_NAMES = frozenset({"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday", "January",
                        "February", "March", "April", "June", "July", "August", "September", "October", "November",
                        "December", "The", "And", "But", "Lol", "Omg", "Haha", "Okay", "Hey", "Yeah"})


def names_someone(text: str) -> bool:
    """Whether a message names someone: a person jieba tags in its Chinese (``nr``: 蔚蔚, 小林, 阿屿) or a capitalised
    word inside a sentence ("a fight with Priya", "被主管Linda骂"; a sentence's first word is capitalised anyway).
    "跟蔚蔚吵架了" is an event in the user's life because 蔚蔚 is a person in it; no cue list can hold every name."""
    if any(m.group(0) not in _NOT_NAMES for m in _LATIN_NAME.finditer(text.strip())):
        return True
    if not CJK_RE.search(text):
        return False
    from ..retrieval.lexical import pos_tags

    return any(flag.startswith("nr") and len(word) >= 2 for word, flag in pos_tags(text))
