"""Render shapes (design §6) and the markdown of an injection (design §11).

Each shape is a small function from a bucket to plain text. Direct hits keep the user's exact
words (original, window, capsule); related and archived items are summaries; the layers with
blocks of their own (weather, favorite card, dream, stable rule, recent) get those blocks.

Memory text is data. :func:`render_markdown` quotes every memory line with ``> `` and escapes
note lines, so no body, title or config string can open a section or close a block.

Pure: buckets in, strings out.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

from ..buckets import CONTEXT_ONLY_SECTIONS, Bucket, Moment, Section, parse_sections
from ..config import RenderConfig
from ..recall_types import PathStep, QueryPlan, SectionOut
from ..text import has_wide

__all__ = [
    "DIRECT_SHAPES", "choose_shape", "first_clause", "first_sentence", "quote_block", "render_capsule",
    "render_chain_bundle", "render_dream", "render_favorite_card", "render_markdown", "render_original",
    "render_recent_compact", "render_stable_rule", "render_summary", "render_weather", "render_window",
    "section_heading", "temperature_notes", "title_and_text",
]

DIRECT_SHAPES = ("bucket_original", "bucket_window", "bucket_capsule")
ELLIPSIS = "…"

# A sentence ends after these (plus closing quotes), after ". " and at a line break.
_SENTENCE_END_RE = re.compile(r"[。！？!?；;…]+[」』”’\"')）]*|\.(?=\s)|\n")
# A clause ends at a comma, colon or sentence end ("10:30" and "3.5" are not clause ends).
_CLAUSE_END_RE = re.compile(r"[，,;；：。！？!?…\n]|:(?!\d)|\.(?=\s|$)")


def _rc(cfg: Any) -> RenderConfig:
    """Render functions take the whole Config or just its RenderConfig."""
    return cfg if isinstance(cfg, RenderConfig) else cfg.render


def _clip(text: str, limit: int) -> str:
    text = text.strip()
    if len(text) <= limit:
        return text
    return text[: max(0, limit - 1)].rstrip() + ELLIPSIS


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _sep(*texts: str) -> str:
    return "：" if any(has_wide(t) for t in texts) else ": "


def first_clause(text: str) -> str:
    """The text up to its first comma, colon or sentence end, on one line."""
    text = text.strip()
    m = _CLAUSE_END_RE.search(text)
    return _one_line(text[: m.start()] if m else text)


def first_sentence(text: str, start: int = 0) -> str:
    """The text up to and with its first sentence end at or after ``start``, on one line."""
    text = text.strip()
    m = _SENTENCE_END_RE.search(text, start)
    return _one_line(text[: m.end()] if m else text)


def title_and_text(bucket: Bucket, limit: int) -> str:
    """A memory in one line of at most ``limit`` characters: its title, then its text's first sentence.

    A title that is the text's own opening (the writer titles a memory with its first clause) is not said twice:
    the line is the text up to the end of the sentence the title ends in ("我养了一只猫叫豆包，三岁了", never
    "我养了一只猫叫豆包：我养了一只猫叫豆包"). A title ending in a colon takes no second one."""
    title, whole = _one_line(bucket.title), _one_line(bucket.main_text)
    if not whole:
        return _clip(title, limit)
    opening = title.rstrip(ELLIPSIS).strip()
    if not title or (opening and whole.startswith(opening)):
        return _clip(first_sentence(whole, max(0, len(opening) - 1)), limit)
    text = first_sentence(whole)
    sep = " " if title.endswith((":", "：")) else _sep(title, text)
    return _clip(title + sep + text, limit)


def temperature_notes(bucket: Bucket) -> str:
    """One or two words of emotional temperature from valence and arousal (never resolved/unresolved)."""
    v, a = bucket.valence, bucket.arousal
    notes = ["warm" if v >= 0.65 else "painful" if v <= 0.35 else "mixed"]
    if a >= 0.65:
        notes.append("intense")
    elif a <= 0.35:
        notes.append("calm")
    return ", ".join(notes)


# ---------------------------------------------------------------- shape choice


def choose_shape(bucket: Bucket, moment: Moment | None, plan: QueryPlan, cfg: Any, *, related: bool = False,
                 chain: bool = False, archive: bool = False) -> str:
    """Which §6 shape an item gets.

    Related items are summaries, or chain bundles when reached by a reliable chain; archive
    items are summaries. A direct hit on a short body (main text at most
    ``short_max_chars``) is the original; a long one is a capsule when important enough
    (never on a detail request), else a window around the matched moment.
    """
    rc = _rc(cfg)
    if related and chain:
        return "chain_bundle"
    if related or archive:
        return "summary"
    if len(bucket.main_text) <= rc.short_max_chars:
        return "bucket_original"
    if bucket.importance >= rc.capsule_min_importance and not plan.detail_request:
        return "bucket_capsule"
    return "bucket_window"


# ---------------------------------------------------------------- direct shapes


def render_original(bucket: Bucket) -> str:
    """The body verbatim, minus its context-only sections (they sit beside a reliable hit)."""
    return bucket.main_text


class _MainText:
    """The main text (body minus context-only sections) with a map back to body offsets."""

    def __init__(self, bucket: Bucket) -> None:
        self.sections: list[Section] = [s for s in parse_sections(bucket.body) if s.name not in CONTEXT_ONLY_SECTIONS]
        self.text = "\n".join(s.text for s in self.sections)
        self.starts: list[int] = []
        pos = 0
        for s in self.sections:
            self.starts.append(pos)
            pos += len(s.text) + 1

    def span(self, bucket: Bucket, moment: Moment | None) -> tuple[int, int] | None:
        """The moment's [start, end) in the main text, or None (title, comment, stale offsets)."""
        if moment is None or moment.section == "title" or moment.context_only:
            return None
        if 0 <= moment.start < moment.end and bucket.body[moment.start:moment.end] == moment.text:
            for sec, m0 in zip(self.sections, self.starts, strict=True):
                if sec.start <= moment.start and moment.end <= sec.end:
                    return m0 + moment.start - sec.start, m0 + moment.end - sec.start
        i = self.text.find(moment.text) if moment.text else -1
        return (i, i + len(moment.text)) if i >= 0 else None


def render_window(bucket: Bucket, moment: Moment | None, cfg: Any) -> str:
    """The matched moment verbatim plus up to ``window_chars`` of original text on each side.

    The sides are cut at sentence boundaries (。！？!?；; ". " and line breaks); an ellipsis
    marks a cut. When the bucket has a ``source_ref``, whole lines are taken instead. A hit
    on the title opens the window at the start of the text, after the title.
    """
    rc = _rc(cfg)
    main = _MainText(bucket)
    text = main.text
    span = main.span(bucket, moment)
    lead = ""
    if span is None:
        span = (0, 0)
        lead = bucket.title + "\n"
    if bucket.source_ref is not None:
        return lead + _line_window(text, span, rc.window_chars)
    ms, me = span
    bounds = sorted({0, len(text), ms, me} | {m.end() for m in _SENTENCE_END_RE.finditer(text)})
    left = min(b for b in bounds if b <= ms and ms - b <= rc.window_chars)
    right = max(b for b in bounds if b >= me and b - me <= rc.window_chars)
    out = text[left:right].strip()
    if left > 0 and text[:left].strip():
        out = ELLIPSIS + out
    if right < len(text) and text[right:].strip():
        out += ELLIPSIS
    return (lead + out).strip("\n")


def _line_window(text: str, span: tuple[int, int], limit: int) -> str:
    """The lines holding the span, plus neighbouring whole lines while each side stays within limit."""
    lines: list[tuple[int, int]] = []
    pos = 0
    for line in text.split("\n"):
        lines.append((pos, pos + len(line)))
        pos += len(line) + 1
    ms, me = span
    hit = [i for i, (s, e) in enumerate(lines) if s < max(me, ms + 1) and e >= ms] or [0]
    i0, i1 = hit[0], hit[-1]
    room = limit
    while i0 > 0 and lines[i0 - 1][1] - lines[i0 - 1][0] + 1 <= room:
        i0 -= 1
        room -= lines[i0][1] - lines[i0][0] + 1
    room = limit
    while i1 + 1 < len(lines) and lines[i1 + 1][1] - lines[i1 + 1][0] + 1 <= room:
        i1 += 1
        room -= lines[i1][1] - lines[i1][0] + 1
    return text[lines[i0][0]:lines[i1][1]].strip("\n")


def render_capsule(bucket: Bucket, moment: Moment | None, cfg: Any) -> str:
    """Title, the matched moment verbatim, and the first clause of other paragraphs.

    Clauses of the paragraphs nearest the moment come first while the whole stays within
    ``capsule_chars``; they are printed in document order, each ending in an ellipsis. The
    moment is kept whole even when it alone is longer than the limit.
    """
    rc = _rc(cfg)
    main = _MainText(bucket)
    text = main.text
    span = main.span(bucket, moment)
    paras: list[tuple[int, int]] = []
    pos = 0
    for line in text.split("\n"):
        if line.strip():
            paras.append((pos, pos + len(line)))
        pos += len(line) + 1
    if span is None:
        center, keep = 0, ""
        others = list(range(len(paras)))
    else:
        ms, me = span
        center = ms
        keep = text[ms:me].strip()
        others = [i for i, (s, e) in enumerate(paras) if e <= ms or s >= me]
    used = len(bucket.title) + (len(keep) + 1 if keep else 0)
    chosen: dict[int, str] = {}
    for i in sorted(others, key=lambda i: (abs(paras[i][0] - center), paras[i][0])):
        clause = first_clause(text[paras[i][0]:paras[i][1]])
        if not clause:
            continue
        clause += ELLIPSIS
        if used + len(clause) + 1 <= rc.capsule_chars:
            chosen[paras[i][0]] = clause
            used += len(clause) + 1
    parts: list[tuple[int, str]] = list(chosen.items())
    if keep:
        parts.append((span[0] if span else 0, keep))
    parts.sort()
    return "\n".join([bucket.title] + [p for _, p in parts])


# ---------------------------------------------------------------- summary shapes


def render_summary(bucket: Bucket, cfg: Any) -> str:
    """The bucket's summary, else its title and first sentence (:func:`title_and_text`), within ``summary_chars``."""
    rc = _rc(cfg)
    if bucket.summary and bucket.summary.strip():
        return _clip(_one_line(bucket.summary), rc.summary_chars)
    return title_and_text(bucket, rc.summary_chars)


def _relation_label(relation: str) -> str:
    return relation.replace("_", " ")


def render_chain_bundle(seed_bucket: Bucket, path: Sequence[PathStep], target_bucket: Bucket, cfg: Any, *,
                        titles: Mapping[str, str] | None = None) -> str:
    """``seed title → relation → … → target summary (temperature)`` for a reliable chain.

    Intermediate buckets are shown by their title when ``titles`` has it, else as "…".
    """
    titles = titles or {}
    parts = [_one_line(seed_bucket.title)]
    for step in path[:-1]:
        parts += [_relation_label(step.relation), _one_line(titles.get(step.to_id, ELLIPSIS))]
    if path:
        parts.append(_relation_label(path[-1].relation))
    parts.append(render_summary(target_bucket, cfg))
    return " → ".join(parts) + f" ({temperature_notes(target_bucket)})"


# ---------------------------------------------------------------- layer blocks


def _section_texts(bucket: Bucket, name: str) -> str:
    return "\n".join(s.text for s in parse_sections(bucket.body) if s.name == name)


def render_weather(bucket: Bucket) -> str:
    """The impression itself and its temperature: it colours the reply, it proves nothing."""
    return f"{bucket.main_text or bucket.title} ({temperature_notes(bucket)})"


def render_favorite_card(bucket: Bucket) -> str:
    """Title, the moment, and why it is a favorite."""
    lines = [bucket.title]
    if bucket.main_text:
        lines.append(bucket.main_text)
    reason = _section_texts(bucket, "favorite_reason")
    if reason:
        lines.append(f"Why it stays with me: {reason}")
    return "\n".join(lines)


def render_dream(bucket: Bucket) -> str:
    """The dream's own words."""
    return bucket.main_text or bucket.title


def render_stable_rule(bucket: Bucket) -> str:
    """A core memory as one standing line: title and its summary (or text)."""
    body = _one_line(bucket.summary or bucket.main_text)
    if not body or body == bucket.title:
        return _one_line(bucket.title)
    return _one_line(bucket.title) + _sep(bucket.title, body) + body


def render_recent_compact(bucket: Bucket, cfg: Any) -> str:
    """Title and first sentence (:func:`title_and_text`), within ``summary_chars``: what was said, detail kept."""
    return title_and_text(bucket, _rc(cfg).summary_chars)


# ---------------------------------------------------------------- markdown

# Everything Python's str.splitlines() treats as a line break becomes "\n" before quoting.
_LINE_BREAKS_RE = re.compile(r"\r\n|[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\ufeff")
_FENCE_RE = re.compile(r"`{3,}|~{3,}")
_SETEXT_RE = re.compile(r"^(=+|-+)$")  # would turn the line above into a heading


def _clean(text: str) -> str:
    """Normalise line breaks, drop control and bidi-override characters, defuse code fences."""
    text = _LINE_BREAKS_RE.sub("\n", text).replace("\t", " ")
    text = "".join(ch for ch in text
                   if ch == "\n" or (unicodedata.category(ch) != "Cc" and ch not in _BIDI))
    return _FENCE_RE.sub(lambda m: ("'" if m.group()[0] == "`" else "\u02dc") * len(m.group()), text)


def quote_block(text: str) -> str:
    """Memory text as a markdown quote: every line starts with "> " (an empty one is ">")."""
    return "\n".join("> " + line if line.strip() else ">" for line in _clean(text).strip("\n").split("\n"))


def _note_lines(text: str) -> list[str]:
    """A note as plain lines, escaped so that no line can be a heading."""
    out = []
    for line in _clean(text).split("\n"):
        line = line.strip()
        if line.startswith("#") or _SETEXT_RE.match(line):
            line = "\\" + line
        if line:
            out.append(line)
    return out


def section_heading(title: str) -> str:
    """``## <title>`` on one line, whatever the title holds."""
    return "## " + (_one_line(_clean(title).replace("\n", " ")) or "Section")


def _section_lines(section: SectionOut) -> list[str]:
    lines = [section_heading(section.title)]
    for item in section.items:
        if item.bucket_id is None and item.shape == "note":
            block = _note_lines(item.text)
        else:
            block = quote_block(item.text).split("\n")
        if block:
            lines += [""] + block
    return lines


def render_markdown(stable_sections: Sequence[SectionOut], dynamic_sections: Sequence[SectionOut],
                    framing_line: str) -> str:
    """The injected prompt text: the framing line, then the stable sections and the dynamic ones.

    The framing line opens the whole block (design §6), stable sections (Core Memory, Confirmed
    Facts) included: everything after it is quoted data, never instructions. Memory items are
    quoted; note items (no bucket, shape ``note``) are plain escaped lines. The only lines that
    start with "#" are the section headings.
    """
    blocks: list[list[str]] = []
    if stable_sections or dynamic_sections:
        framing = _note_lines(framing_line)
        if framing:
            blocks.append(framing)
    blocks += [_section_lines(s) for s in stable_sections]
    blocks += [_section_lines(s) for s in dynamic_sections]
    return "\n\n".join("\n".join(b) for b in blocks)
