"""Text helpers every wing shares: the named CJK ranges, normalising and folding, digests.

Three character classes, on purpose different:

- :data:`HAN` -- Han ideographs (with extensions and compatibility ideographs): what jieba cuts.
- :data:`CJK` -- Han plus kana and hangul: scripts written without spaces, which an English-only
  WordPiece vocabulary mostly maps to ``[UNK]``; a query in them is judged by script.
- :data:`WIDE` -- CJK plus CJK and fullwidth punctuation, bopomofo and jamo: characters a BPE
  tokenizer spends about one token on, and that call for fullwidth separators.

Folding comes in two strengths: :func:`normalize` (NFKC, lower case, straight apostrophes, no
invisible characters) is what the tokenizer and cue matcher see; :func:`fold` also collapses
whitespace, for comparing short strings such as dream cues. :func:`clean` is what a memory's text is
stored as: canonical composition (NFC, which changes nothing a reader sees; NFKC would turn Chinese
full-width punctuation into ASCII) without zero-width characters, bidi controls or a BOM, which are
invisible, split a word for search and dedupe ("别\u200b记"), and can make a title display as
something else (an RTL override). :func:`simplified` reads Traditional Chinese as Simplified (OpenCC's
``t2s``), for the cue words of the write decision. :func:`sentence_spans` cuts text into sentence-aligned pieces of
bounded length (bucket moments). Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from typing import Any

HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
CJK = "\u3040-\u30ff\uac00-\ud7af" + HAN
WIDE = ("\u1100-\u11ff\u3000-\u303f\u3040-\u30ff\u3100-\u312f\u3130-\u318f\u31f0-\u31ff\ua960-\ua97f"
        "\uac00-\ud7af\ud7b0-\ud7ff\ufe30-\ufe4f\uff00-\uffef" + HAN)

HAN_RE = re.compile(f"[{HAN}]")
CJK_RE = re.compile(f"[{CJK}]")
_CJK_RUN_RE = re.compile(f"[{CJK}]+")
WIDE_RE = re.compile(f"[{WIDE}]")
_LATIN_WORD_RE = re.compile(r"[^\W\d_]+")
_FOLD_RUN_RE = re.compile(r"([a-z])\1+")
_FOLD_UNIT_RE = re.compile(r"([a-z]{2})\1+")
_SENTENCE_END_RE = re.compile(r"(?<=[。！？!?；;…])|(?<=[.](?=\s))")
_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "\uff07": "'"})
ZERO_WIDTH = "\u200b\u2060\u2061\u2062\u2063\u2064\ufeff\u180e\u00ad"  # never seen, never needed in a memory
BIDI_CONTROLS = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
JOINERS = "\u200c\u200d"  # ZWNJ and ZWJ: meaningful inside Persian or Indic words and emoji sequences only
INVISIBLE = ZERO_WIDTH + BIDI_CONTROLS + JOINERS
_INVISIBLE_RE = re.compile(f"[{INVISIBLE}]")
_MATCH_TABLE = {**_QUOTES, **{ord(c): None for c in INVISIBLE}}  # one translate: straight quotes, nothing unseen

__all__ = ["BIDI_CONTROLS", "CJK", "CJK_RE", "HAN", "HAN_RE", "INVISIBLE", "JOINERS", "WIDE", "WIDE_RE", "ZERO_WIDTH",
           "canonical_json", "clauses", "clean", "digest", "fold", "fold_elongations", "has_cjk", "has_wide",
           "is_cjk_text", "message_text", "normalize", "sentence_spans", "simplified", "split_sentences", "units"]


def has_cjk(text: str) -> bool:
    """True when the text holds any CJK-script character."""
    return CJK_RE.search(text) is not None


def has_wide(text: str) -> bool:
    """True when the text holds any wide (CJK or fullwidth) character."""
    return WIDE_RE.search(text) is not None


def is_cjk_text(text: str) -> bool:
    """True when CJK characters outnumber Latin words: such text is judged by its CJK part."""
    cjk = sum(map(len, _CJK_RUN_RE.findall(text)))  # counted by runs: half the time of one match per character
    if cjk == 0:
        return False
    if 2 * cjk > len(text) - cjk:  # n Latin words take 2n - 1 other characters at least: they cannot outnumber
        return True
    latin_words = sum(1 for w in _LATIN_WORD_RE.findall(text) if not CJK_RE.search(w))
    return cjk >= latin_words


def normalize(text: str) -> str:
    """NFKC (full-width letters and digits become ASCII), lower case, straight apostrophes, no invisible
    characters (:data:`INVISIBLE`): what every match reads."""
    return unicodedata.normalize("NFKC", text).translate(_MATCH_TABLE).lower()


def _emoji_part(ch: str) -> bool:
    return unicodedata.category(ch) in ("So", "Sk") or ch == "\ufe0f"


def _keeps(text: str, i: int) -> bool:
    """Does the joiner at ``text[i]`` join something: ZWJ inside an emoji sequence (👩‍💻), ZWNJ between the
    letters or marks of a script that writes with it (Persian, the Indic scripts)?"""
    if i == 0 or i + 1 >= len(text):
        return False
    before, after = text[i - 1], text[i + 1]
    if text[i] == "\u200d":
        return _emoji_part(before) and _emoji_part(after)
    return all(unicodedata.category(c)[0] in "LM" and not c.isascii() and not has_cjk(c) for c in (before, after))


def clean(text: str) -> str:
    """A memory's text as stored: NFC, without zero-width characters, bidi controls or a BOM (a joiner stays
    where it joins, :func:`_keeps`). What a reader sees does not change."""
    if _INVISIBLE_RE.search(text) is not None:
        text = "".join(ch for i, ch in enumerate(text)
                       if ch not in INVISIBLE or (ch in JOINERS and _keeps(text, i)))
    return unicodedata.normalize("NFC", text)


_T2S = None


def simplified(text: str) -> str:
    """Traditional Chinese read as Simplified (OpenCC ``t2s``: 別記這個 -> 别记这个); other text is unchanged."""
    global _T2S
    if not has_cjk(text):
        return text
    if _T2S is None:
        import opencc  # a compiled converter with its dictionaries in the wheel: nothing is downloaded

        _T2S = opencc.OpenCC("t2s")
    return _T2S.convert(text)


def fold(text: str) -> str:
    """:func:`normalize` with every run of whitespace made one space: the form short strings are compared in."""
    return " ".join(normalize(text).split())


def fold_elongations(text: str) -> str:
    """Cut every Latin letter run and repeated two-letter unit to one (goooood -> god, hahaha -> ha).

    Not a normaliser for display: it makes elongated chat spellings match their cue words.
    CJK is left alone (the query planner collapses CJK repeats with its own rules).
    """
    return _FOLD_UNIT_RE.sub(r"\1", _FOLD_RUN_RE.sub(r"\1", text))


def message_text(content: Any) -> str:
    """The text of a chat message's content: a string, or a list of OpenAI content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "\n".join(parts)
    return ""


def canonical_json(value: Any) -> bytes:
    """Sorted keys, no whitespace, UTF-8, no NaN: the bytes digests and signatures are taken over.

    Raises ValueError or TypeError for values JSON cannot hold exactly.
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def digest(value: Any) -> str:
    """SHA-256 hex of :func:`canonical_json`: one digest space for bucket and fact source identities."""
    return hashlib.sha256(canonical_json(value)).hexdigest()


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``, each keeping its end mark (。！？!?；;… or a full stop before a space)."""
    parts = [p for p in _SENTENCE_END_RE.split(text) if p]
    return parts or [text]


_CLAUSE_RE = re.compile(r"[，,。！？!?；;\n]")
_UNIT_WORD_RE = re.compile(r"[a-z0-9']+")


def clauses(text: str) -> list[str]:
    """The clauses of a message (cut at commas, sentence ends and line breaks), stripped, empty ones left out."""
    return [c.strip() for c in _CLAUSE_RE.split(text) if c.strip()]


def units(text: str) -> int:
    """A message's length as a reader feels it: CJK characters plus Latin words."""
    return len(CJK_RE.findall(text)) + len(_UNIT_WORD_RE.findall(fold(CJK_RE.sub(" ", text))))


def _soft_cut(text: str, start: int, limit: int) -> int:
    """Where to cut an over-long run with no sentence end: after the last space or comma in its second half."""
    hi = start + limit
    for i in range(hi, start + limit // 2, -1):
        if text[i - 1].isspace() or text[i - 1] in "，、,:：":
            return i
    return hi


def sentence_spans(text: str, limit: int) -> list[tuple[int, int]]:
    """Spans of ``text`` of at most ``limit`` characters: whole sentences packed together, and a
    sentence longer than ``limit`` (or a paragraph without any sentence end) cut hard.

    Bucket moments are these spans, so none is longer than the embedding model reads.
    """
    spans: list[tuple[int, int]] = []
    start = cur = 0
    for sent in split_sentences(text):
        end = cur + len(sent)
        if cur > start and end - start > limit:
            spans.append((start, cur))
            start = cur
        cur = end
        while cur - start > limit:
            cut = _soft_cut(text, start, limit)
            spans.append((start, cut))
            start = cut
    if cur > start:
        spans.append((start, cur))
    return spans
