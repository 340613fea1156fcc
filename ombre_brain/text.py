"""Text helpers every wing shares: the named CJK ranges, normalising and folding, digests.

Three character classes, on purpose different:

- :data:`HAN` -- Han ideographs (with extensions and compatibility ideographs): what jieba cuts.
- :data:`CJK` -- Han plus kana and hangul: scripts written without spaces, which an English-only
  WordPiece vocabulary mostly maps to ``[UNK]``; a query in them is judged by script.
- :data:`WIDE` -- CJK plus CJK and fullwidth punctuation, bopomofo and jamo: characters a BPE
  tokenizer spends about one token on, and that call for fullwidth separators.

Folding comes in two strengths: :func:`normalize` (NFKC, lower case, straight apostrophes) is
what the tokenizer and cue matcher see; :func:`fold` also collapses whitespace, for comparing
short strings such as dream cues. :func:`sentence_spans` cuts text into sentence-aligned pieces of
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

__all__ = ["CJK", "CJK_RE", "HAN", "HAN_RE", "WIDE", "WIDE_RE", "canonical_json", "digest", "fold", "fold_elongations",
           "has_cjk", "has_wide", "is_cjk_text", "message_text", "normalize", "sentence_spans", "split_sentences"]


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
    """NFKC (full-width letters and digits become ASCII), lower case, straight apostrophes."""
    return unicodedata.normalize("NFKC", text).translate(_QUOTES).lower()


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
