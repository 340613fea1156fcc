"""What kind of answer a question asks for, and whether a memory holds one (the reader's answer-type features).

The reader's commonest near miss is the same person or thing with another attribute: "when's Tasha's birthday" beside
a memory of Tasha's pregnancy, "what does Ethan do for work" beside a memory of Ethan's trip. Both sit close in any
encoder. What tells them apart is old-fashioned question answering: the question asks for a date, and the memory holds
none; it asks for a job, and the memory names none. :func:`asked_types` reads what a message asks for (a date or time, a
place, a name, a number or an age, a job, a reason) from its question words in both languages; :func:`held_types` what
a memory could answer with (a date, a number, a place or a person jieba tags, a capitalised name, a job word, a
because). The reader reads both, and whether every asked type is held (design §25). Pure; cached per text.
"""

from __future__ import annotations

import re
from functools import lru_cache

from ..text import HAN

TYPES = ("date", "place", "name", "number", "job", "reason")

_ASK = {
    "date": r"\bwhen\b|what (?:day|date|time|year|month)|\bbirthday\b|how long ago|什么时候|哪天|哪一天|几号|几月|哪年|"
            r"几点|生日|啥时候|多久以前",
    "place": r"\bwhere\b|which (?:city|town|country|hospital|school|restaurant|hotel|place|street)|在哪|哪里|哪儿|"
             r"哪个城市|哪家|什么地方|哪个国家|住哪",
    "name": r"\bwho\b|what(?:'s| is| was)? (?:\w+ )?(?:name|called)|\bname\b|\bsurname\b|叫什么|叫啥|名字|是谁|谁|"
            r"什么牌子|哪个牌子|\bbrand\b",
    "number": r"how (?:many|much|old|far|long|tall|heavy)|\bage\b|多少|几个|几岁|几次|多大|多重|多高|多远|多久|几年|"
              r"几斤|几分",
    "job": r"do(?:es)? for (?:work|a living)|what (?:does|do|did) \w+ do\b|\bjob\b|\bwork(?:s|ed)? (?:as|at)\b|"
           r"occupation|干嘛的|干啥的|做什么工作|做什么的|什么工作|职业|在哪上班|哪家公司",
    "reason": r"\bwhy\b|how come|what (?:made|caused|sent)|为什么|为啥|怎么会|因为什么",
}
_ASK_RE = {k: re.compile(v, re.I) for k, v in _ASK.items()}

_MONTHS = (r"january|february|march|april|may|june|july|august|september|october|november|december|jan|feb|mar|apr|"
           r"jun|jul|aug|sep|sept|oct|nov|dec")
_DAYS = r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|weekend|tomorrow|yesterday|tonight|today"
_DATE = re.compile(rf"\b(?:{_MONTHS}|{_DAYS})\b|\b\d{{1,2}}(?:st|nd|rd|th)\b|\b(?:19|20)\d\d\b|\d+\s*(?:am|pm)\b|"
                   rf"\b\d{{1,2}}[/.-]\d{{1,2}}\b|"
                   rf"[0-9一二三四五六七八九十两]+\s*[月号日点]|周[一二三四五六日天末]|星期[一二三四五六日天]|"
                   rf"[昨今明前后]天|上周|下周|这周|上个月|下个月|去年|今年|明年|年底|春节|国庆", re.I)
_NUMBER = re.compile(r"\d|[一二三四五六七八九十两百千万半]+\s*[个岁次斤年天周月分块元条只本杯公里米]|"
                     r"\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|"
                     r"sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|hundred|dozen|a couple)\b", re.I)
_BECAUSE = re.compile(r"\bbecause\b|\bcause\b|\bsince\b|\bso\b|\bafter\b|因为|所以|由于|结果|害得|导致", re.I)
_CAPITAL = re.compile(r"(?<![.!?]\s)(?<![A-Za-z'])(?<!^)[A-Z][a-z]{2,}(?![A-Za-z])")  # "被主管Linda骂" too
_PLACE_EN = re.compile(r"\b(?:in|at|to|from|near)\s+(?:the\s+)?[A-Z][a-z]+")
_JOB = re.compile(r"\b(?:nurse|teacher|engineer|developer|designer|doctor|lawyer|chef|cook|driver|accountant|manager|"
                  r"student|programmer|barista|writer|artist|electrician|plumber|consultant|analyst|researcher|"
                  r"works? (?:as|at|for)|job|intern)\b|护士|老师|工程师|程序员|设计|医生|律师|厨师|司机|会计|经理|学生|"
                  r"上班|工作|公司|实习|开店|做生意|销售|运营|策划|编辑|记者", re.I)
_HAN_RE = re.compile(f"[{HAN}]")


@lru_cache(maxsize=4096)
def asked_types(text: str) -> frozenset[str]:
    """The kinds of answer a message asks for (empty for one that asks no such thing)."""
    return frozenset(k for k, r in _ASK_RE.items() if r.search(text))


@lru_cache(maxsize=16384)
def held_types(text: str) -> frozenset[str]:
    """The kinds of answer a memory's words could give."""
    held = set()
    if _DATE.search(text):
        held.add("date")
    if _NUMBER.search(text):
        held.add("number")
    if _BECAUSE.search(text):
        held.add("reason")
    if _JOB.search(text):
        held.add("job")
    if _PLACE_EN.search(text):
        held.add("place")
    if _CAPITAL.search(_PLACE_EN.sub(" ", text)):  # a capitalised word that is not a place ("to Vancouver")
        held.add("name")
    if _HAN_RE.search(text):
        held |= _chinese_held(text)
    return frozenset(held)


def _chinese_held(text: str) -> set[str]:
    """A place or a person jieba tags in Chinese words (``ns``, ``nr``), and a 叫X name."""
    from .lexical import pos_tags

    out = set()
    for _word, flag in pos_tags(text):
        if flag.startswith("ns"):
            out.add("place")
        elif flag.startswith("nr") or flag == "nz":
            out.add("name")
    if re.search(f"叫[{HAN}A-Za-z]", text):
        out.add("name")
    return out


def answer_type_features(question: str, memory: str) -> list[float]:
    """``[asks any, every asked type held, some asked type missing, one flag per type asked]`` for the reader."""
    asked = asked_types(question)
    held = held_types(memory) if asked else frozenset()  # nothing asked: what it holds changes nothing, costs jieba
    return [float(bool(asked)), float(bool(asked) and asked <= held), float(bool(asked - held)),
            *(float(t in asked) for t in TYPES)]


__all__ = ["TYPES", "answer_type_features", "asked_types", "held_types"]
