"""What a message asks back: the clauses that ask the companion for something the user told it before (pure).

The write decision keeps nothing of such a message's user side ("元宝是哪天生日来着，医生问我" says what the user
wants back; the clause beside it is why they ask: `writing/decision.py`). Searching a turn with the asking part alone
was measured and not kept (docs/benchmarks.md: lived zh turn recall up 2.5 points, its stale answers doubled).

The shapes are language structure, not persona policy, so they live here as patterns: 来着 with a question word, 还记得
…吗, a check of one's own fact (…对吧, …没错吧), and in English a question with "again", "remind me", "did i ever tell
you what…", "what was the name of…", or a question about "my" / "i" typed without its mark.
"""

from __future__ import annotations

import re

from .text import HAN_RE, clauses, fold, simplified, split_sentences, units

__all__ = ["asks_to_recall"]

_CJK = HAN_RE
_ZH_ASKS = re.compile(r"什么|怎么|为什么|为啥|咋|啥|谁|哪|几|多[少重大高远长久]")  # what 来着 asks with
_ZH_CONFIRMS = re.compile(r"(?:对吧|没错吧|是吧|对不对|没错吗|对吗)\W*$")  # "我现在是一个人住对吧"
_ZH_RIGHT = re.compile(r"对的|做得|做错|该|应该|可以")
_ZH_REMEMBER = re.compile(r"(?:还记得|记不记得|你记得|记得我).*(?:啥|什么|哪|谁|几|多少|吗|没)")  # "还记得我家狗叫啥吗"
_EN_LEAD = r"^(?:(?:so|and|wait|ok|okay|hey|um+|uh+|btw|also|oh)\W+)*"
_WH = r"(?:what|where|who|when|how)"
_EN_AGAIN = re.compile(_EN_LEAD + r"(?:what|where|who|when|which|how)\b.*\bagain\b")
_EN_RECALL = re.compile(
    r"\b(?:remind me|did i (?:ever )?(?:tell|mention) (?:you )?(?:" + _WH + r"|which)"
    r"|what (?:was|is|'s) the name of|what was (?:it|that|she|he) called|what did i (?:say|tell you)"
    r"|(?:do )?you remember (?:" + _WH + r"|which))\b")
_EN_ASKS_ABOUT_ME = re.compile(  # a fact of the user's asked for: "what's my dog's name", "where did i work before"
    _EN_LEAD + r"(?:(?:what|where|who|when|how)\s+did i\b"
    r"|(?:(?:what|where|who|when)(?:'s| is| was| were)|which (?:one|of|day|year|city|street|school)"
    r"|how (?:long|many|much|old|is|was))\b.*\b(?:my|i|me)\b)")  # never advice: "what do i do now", "how do i tell"


def _asks(clause: str) -> bool:
    folded = fold(simplified(clause)).strip()
    if _CJK.search(folded):
        if "来着" in folded and _ZH_ASKS.search(folded):
            return True
        if _ZH_REMEMBER.search(folded):
            return True
        # "我现在是一个人住对吧" checks a fact of theirs; "我做得对吧", "这样是对的对吧" ask to be told they were right
        return bool(_ZH_CONFIRMS.search(folded)) and "我" in folded and not _ZH_RIGHT.search(folded)
    return bool(_EN_AGAIN.search(folded) or _EN_RECALL.search(folded) or _EN_ASKS_ABOUT_ME.search(folded))


def _recall_clauses(text: str) -> list[tuple[str, bool]]:
    """The message's clauses in order, each with whether it asks for something the user told before. A Chinese
    message with no 我 in it checks someone else's words ("他说的没错吧"), never the user's own: none asks."""
    parts = [c for s in split_sentences(text) for c in clauses(s)]
    mine = not _CJK.search(text) or "我" in text or "my" in fold(text).split()
    return [(c, mine and _asks(c)) for c in parts]


def asks_to_recall(text: str) -> bool:
    """Whether the message opens by asking the companion for something the user told it ("what's Delia's husband
    called again", "元宝是哪天生日来着，医生问我", "我现在是一个人住对吧"), question mark or not; a greeting before it
    ("hey, …", "对了，…") does not count as its opening. Only the opening: "彤彤搬走了，新室友是个男生，叫什么来着"
    tells something first, and what it tells is the user's life."""
    parts = [(c, asks) for c, asks in _recall_clauses(text) if units(c) > 2]
    return bool(parts) and parts[0][1]
