"""Bucket and Moment models, section parsing and validation (design §1, §3).

A bucket is what a writer gives us; moments are the pieces search can find. Keeping the
split here, in pure code, means the store, the lexical index and render all agree on which
text belongs to which section and which pieces may never prove a hit on their own.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import Any

import orjson

from .errors import ValidationError
from .fields import (
    MAX_AUTHOR_CHARS,
    MAX_COMMENT_CHARS,
    MAX_SUMMARY_CHARS,
    parse_bool,
    tag_text,
    validate_id,
    validate_space,
    visible,
)
from .fields import choice as _choice
from .fields import flag as _bool
from .fields import list_field as _list
from .fields import number as _number
from .fields import text_field as _text
from .kinds.fields import UNINDEXED_TYPES, validate_kind
from .text import clean, sentence_spans, split_sentences  # noqa: F401  (split_sentences re-exported)
from .timeutil import iso, now_utc, parse_time

SECTION_NAMES = (
    "moment", "original", "fact", "context", "reflection", "feeling", "affect_anchor", "comment", "favorite_reason",
)
SECTION_ALIASES = {
    "片段": "moment", "原文": "original", "事实": "fact", "背景": "context", "反思": "reflection",
    "感受": "feeling", "情绪锚点": "affect_anchor", "评论": "comment", "喜欢的理由": "favorite_reason",
}
CONTEXT_ONLY_SECTIONS = frozenset({"comment", "affect_anchor", "favorite_reason", "context"})  # never prove a hit
BUCKET_TYPES = ("dynamic", "permanent", "feel", "dream", "source", "journal", "letter", "plan", "self")
SUBJECTS = ("user", "relationship", "event")
WRITER_LAYERS = ("stable_boundary", "short_state", "process_event", "relationship_lesson")
CLASSIFICATION_SOURCES = ("model", "model_adjusted", "rule", "default")
ORIGINS = ("user", "assistant", "derived")
BASES = ("stated", "observed", "inferred", "unknown")
FLAGS = ("pinned", "protected", "anchor", "archived", "resolved", "digested", "dont_surface")
TIME_FIELDS = ("created", "updated", "last_active", "event_time")
PARAGRAPH_MAX = 300  # design §6: a longer paragraph is split at sentence boundaries, a longer sentence hard

# Dream-only fields (issue 6) ride along on the bucket so GET /v1/buckets shows them.
DREAM_FIELDS = ("core_affect", "recall_cues", "source_bucket_ids", "surfaced", "surface_attempts")

_HEADING_RE = re.compile(r"^###[ \t]+(.+?)[ \t]*#*[ \t]*$")


def new_id() -> str:
    return uuid.uuid4().hex[:16]


@dataclass(frozen=True)
class Comment:
    author: str
    created: str
    content: str


@dataclass(frozen=True)
class SourceRef:
    path: str
    start_line: int
    end_line: int


@dataclass(frozen=True)
class Bucket:
    """One memory (design §3). Times are ISO strings with offset; lists are tuples (frozen)."""

    id: str
    space: str
    title: str
    body: str = ""
    summary: str | None = None
    tags: tuple[str, ...] = ()
    type: str = "dynamic"
    importance: int = 5
    valence: float = 0.5
    arousal: float = 0.3
    pinned: bool = False
    protected: bool = False
    anchor: bool = False
    archived: bool = False
    resolved: bool = False
    digested: bool = False
    dont_surface: bool = False  # the user asked that it never surface: every gate refuses it (turn/gates.py)
    created: str = ""
    updated: str = ""
    last_active: str = ""
    event_time: str | None = None
    activation_count: int = 0
    comments: tuple[Comment, ...] = ()
    source_ref: SourceRef | None = None
    memory_subject: str | None = None
    memory_layer: str | None = None
    memory_classification_source: str | None = None
    origin: str = "user"
    basis: str = "unknown"
    confidence: float | None = None
    source: str | None = None  # source identity (producer/event) the bucket came from, for purge/suppression
    core_affect: dict | None = None
    recall_cues: tuple[str, ...] = ()
    source_bucket_ids: tuple[str, ...] = ()
    surfaced: bool | None = None
    surface_attempts: int | None = None
    kind_fields: dict | None = None  # a letter's, a plan's or a self entry's own fields (kinds/fields.py)

    # ------------------------------------------------------------ views

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["tags"] = list(self.tags)
        d["comments"] = [dataclasses.asdict(c) for c in self.comments]
        d["recall_cues"] = list(self.recall_cues)
        d["source_bucket_ids"] = list(self.source_bucket_ids)
        for k in (*(DREAM_FIELDS if self.type != "dream" else ()), *(() if self.kind_fields else ("kind_fields",))):
            d.pop(k, None)
        return d

    @property
    def tag_set(self) -> frozenset[str]:
        return frozenset(t.lower() for t in self.tags)

    @property
    def sections(self) -> list[Section]:
        return list(_sections_of(self.body))

    @property
    def evidence_text(self) -> str:
        """Title, summary, tags and the body minus context-only sections: what topic evidence may use."""
        return _evidence_text(self.title, self.summary or "", tuple(self.tags), self.body)

    @property
    def evidence_lower(self) -> str:
        """:attr:`evidence_text` lower-cased, kept per text (Recent Context matches terms in 200 memories a turn)."""
        return _lower(self.evidence_text)

    @property
    def main_text(self) -> str:
        """The body without its context-only sections, as a reader would quote it."""
        return main_text_of(self.body)

    def content_hash(self) -> str:
        payload = json.dumps([self.title, self.body, sorted(self.tags), self.type], ensure_ascii=False)
        return hashlib.sha256(payload.encode()).hexdigest()

    def created_dt(self) -> datetime:
        return datetime.fromisoformat(self.created)

    def last_active_dt(self) -> datetime:
        return datetime.fromisoformat(self.last_active or self.created)


@dataclass(frozen=True)
class Section:
    name: str
    text: str
    start: int  # character offset of the text inside the bucket body
    end: int


def moment_text_hash(text: str) -> str:
    """What Chroma keeps instead of a moment's text, so doctor can tell a vector made from stale text."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Moment:
    """One indexed piece of a bucket: its title, a section, or a window of a long section."""

    id: str
    bucket_id: str
    ordinal: int
    section: str  # "title" or a section name
    text: str
    context_only: bool
    start: int = -1  # offset inside body (-1 for the title)
    end: int = -1

    @property
    def text_hash(self) -> str:
        return moment_text_hash(self.text)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["text_hash"] = self.text_hash
        return d


def section_name(raw: str) -> str | None:
    name = raw.strip().lower()
    if name in SECTION_NAMES:
        return name
    return SECTION_ALIASES.get(raw.strip())


@lru_cache(maxsize=8192)
def _sections_of(body: str) -> tuple[Section, ...]:
    """A body's sections, parsed once per text (Recent Context tests every memory of its window each turn); frozen,
    so one tuple serves every reader. Quotes memories: :func:`clear_decoded` empties it."""
    return tuple(parse_sections(body))


@lru_cache(maxsize=8192)
def _evidence_text(title: str, summary: str, tags: tuple[str, ...], body: str) -> str:
    parts = [title, summary, " ".join(tags)]
    parts += [s.text for s in _sections_of(body) if s.name not in CONTEXT_ONLY_SECTIONS]
    return "\n".join(p for p in parts if p)


_lower = lru_cache(maxsize=8192)(str.lower)


@lru_cache(maxsize=8192)
def main_text_of(body: str) -> str:
    """A body without its context-only sections (comments, affect anchors, favorite reasons).

    Kept per body text (a turn reads each candidate's main text several times: admission, said-in, rendering);
    it quotes memories, so :func:`clear_decoded` empties it on a purge."""
    return "\n".join(s.text for s in parse_sections(body) if s.name not in CONTEXT_ONLY_SECTIONS).strip()


def parse_sections(body: str) -> list[Section]:
    """Split a body at `### name` headings; text before the first is `original`.

    An unknown `###` heading stays as plain text of the section it sits in, so writers can
    use headings freely without invalidating a bucket.
    """
    sections: list[Section] = []
    current, start = "original", 0
    pos = 0
    chunks: list[tuple[str, int, int]] = []
    for line in body.splitlines(keepends=True):
        m = _HEADING_RE.match(line.rstrip("\n"))
        name = section_name(m.group(1)) if m else None
        if name is not None:
            chunks.append((current, start, pos))
            current, start = name, pos + len(line)
        pos += len(line)
    chunks.append((current, start, len(body)))
    for name, s, e in chunks:
        raw = body[s:e]
        text = raw.strip()
        if not text:
            continue
        lead = len(raw) - len(raw.lstrip())
        sections.append(Section(name, text, s + lead, s + lead + len(text)))
    return sections


def _paragraphs(section: Section) -> list[tuple[str, int, int]]:
    """Paragraphs of a section with their body offsets; long paragraphs split at sentences, then hard."""
    out: list[tuple[str, int, int]] = []
    offset = section.start
    for para in re.split(r"(\n\s*\n|\n)", section.text):
        if para.strip() and not para.startswith("\n"):
            for a, b in sentence_spans(para, PARAGRAPH_MAX):
                piece = para[a:b]
                text = piece.strip()
                if text:
                    s = offset + a + len(piece) - len(piece.lstrip())
                    out.append((text, s, s + len(text)))
        offset += len(para)
    return out


def bucket_id_of(moment_id: str) -> str:
    """The bucket a moment belongs to: moment ids are ``{bucket id}#{ordinal}`` (:func:`build_moments`)."""
    return moment_id.rsplit("#", 1)[0]


def build_moments(bucket: Bucket) -> list[Moment]:
    """Title, then each section, one moment per paragraph; none for a letter, plan or self entry (own tools)."""
    if bucket.type in UNINDEXED_TYPES:
        return []
    moments = [Moment(f"{bucket.id}#0", bucket.id, 0, "title", bucket.title, False)]
    for sec in bucket.sections:
        ctx = sec.name in CONTEXT_ONLY_SECTIONS
        for text, s, e in _paragraphs(sec):
            n = len(moments)
            moments.append(Moment(f"{bucket.id}#{n}", bucket.id, n, sec.name, text, ctx, s, e))
    for c in bucket.comments:
        n = len(moments)
        moments.append(Moment(f"{bucket.id}#{n}", bucket.id, n, "comment", c.content, True))
    return moments


# ---------------------------------------------------------------- validation

_FIELD_NAMES = BUCKET_FIELDS = frozenset(f.name for f in dataclasses.fields(Bucket))


def _comment(c: Any, i: int, created: str) -> Comment:
    """One ``{author, created, content}`` comment; a content or author past its limit is refused, never cut."""
    if not isinstance(c, Mapping) or not isinstance(c.get("content"), str) or "\x00" in c["content"]:
        raise ValidationError("each comment is {author, created, content} with content a string (no NUL)",
                              field=f"comments[{i}]")
    if len(c["content"]) > MAX_COMMENT_CHARS:
        raise ValidationError(f"is {len(c['content'])} characters; the limit is {MAX_COMMENT_CHARS}",
                              field=f"comments[{i}].content")
    author = c.get("author")
    if author is not None and (not isinstance(author, str) or len(author) > MAX_AUTHOR_CHARS or "\x00" in author):
        raise ValidationError(f"expected a string of at most {MAX_AUTHOR_CHARS} characters (no NUL)",
                              field=f"comments[{i}].author")
    c_created = c.get("created")
    return Comment(author=author or "unknown",
                   created=iso(parse_time(c_created, f"comments[{i}].created")) if c_created else created,
                   content=clean(c["content"]))


@dataclass(frozen=True)
class Limits:
    max_title_chars: int = 200
    max_body_chars: int = 20000
    max_tags: int = 32
    max_tag_chars: int = 64
    max_comments: int = 64


def bucket_from_dict(data: Any, *, space: str | None = None, now: datetime | None = None,
                     limits: Limits = Limits(), partial_of: Bucket | None = None) -> Bucket:
    """Validate writer input into a Bucket; every mistake names the field and what was expected.

    With ``partial_of``, ``data`` is a PATCH: only the given fields change.
    """
    if not isinstance(data, Mapping):
        raise ValidationError(f"expected a JSON object for a bucket, got {type(data).__name__}")
    unknown = sorted(set(data) - _FIELD_NAMES)
    if unknown:
        raise ValidationError(f"unknown field(s) {', '.join(unknown)}; known fields are the design §3 names",
                              code="unknown_field")
    if partial_of is not None:
        for key in ("id", "space", "created"):
            if key in data and data[key] != getattr(partial_of, key):
                raise ValidationError("cannot be changed by an update", field=key)
        base = partial_of.to_dict()
        base.update(data)
        data = base
    now = now or now_utc()
    sp = validate_space(data.get("space", space))
    if space is not None and sp != space:
        raise ValidationError(f"bucket says space {sp!r} but the request is for {space!r}", field="space")
    bid = validate_id(data["id"]) if data.get("id") is not None else new_id()
    title = _text(data, "title", limits.max_title_chars, required=True)
    body = _text(data, "body", limits.max_body_chars) or ""
    summary = _text(data, "summary", MAX_SUMMARY_CHARS)
    tags_raw = _list(data, "tags", "a list of strings")
    if not all(isinstance(t, str) for t in tags_raw):
        raise ValidationError("expected a list of strings", field="tags")
    if len(tags_raw) > limits.max_tags:
        raise ValidationError(f"has {len(tags_raw)} tags; the limit is {limits.max_tags}", field="tags")
    tags = tuple(tag_text(t, limits.max_tag_chars) for t in tags_raw)  # clean, NFKC, stripped, visible
    times: dict[str, str | None] = {}
    for key in TIME_FIELDS:
        v = data.get(key)
        times[key] = iso(parse_time(v, key)) if v not in (None, "") else None
    created = times["created"] or iso(now)
    comments_raw = _list(data, "comments", f"a list of at most {limits.max_comments} comments")
    if len(comments_raw) > limits.max_comments:
        raise ValidationError(f"has {len(comments_raw)} comments; the limit is {limits.max_comments}",
                              field="comments")
    comments = [_comment(c, i, created) for i, c in enumerate(comments_raw)]
    ref = data.get("source_ref")
    source_ref = None
    if ref is not None:
        if not isinstance(ref, Mapping) or not isinstance(ref.get("path"), str):
            raise ValidationError("expected {path, start_line, end_line}", field="source_ref")
        s = _number(ref, "start_line", 1, 1, 10**9, integer=True)
        e = _number(ref, "end_line", s, s, 10**9, integer=True)
        source_ref = SourceRef(ref["path"], s, e)
    confidence = data.get("confidence")
    if confidence is not None:
        confidence = _number(data, "confidence", 0, 0, 1)
    layer = _choice(data, "memory_layer", WRITER_LAYERS, None)
    subject = _choice(data, "memory_subject", SUBJECTS, None)
    csrc = _choice(data, "memory_classification_source", CLASSIFICATION_SOURCES, None)
    if (layer or subject) and csrc is None:
        csrc = "model"
    btype = _choice(data, "type", BUCKET_TYPES, "dynamic")
    extra: dict[str, Any] = _dream_fields(data) if btype == "dream" else {}
    kind = validate_kind(btype, data.get("kind_fields"))
    source = data.get("source")
    if source is not None and (not isinstance(source, str) or not source or len(source) > 512 or "\x00" in source):
        raise ValidationError("expected a source identity string of at most 512 characters (no NUL)", field="source")
    return Bucket(
        id=bid, space=sp, title=title.strip(), body=body, summary=summary, tags=tags,
        type=btype,
        importance=_number(data, "importance", 5, 1, 10, integer=True),
        valence=_number(data, "valence", 0.5, 0, 1), arousal=_number(data, "arousal", 0.3, 0, 1),
        **{f: _bool(data, f) for f in FLAGS},
        created=created, updated=times["updated"] or iso(now), last_active=times["last_active"] or created,
        event_time=times["event_time"],
        activation_count=_number(data, "activation_count", 0, 0, 10**9, integer=True),
        comments=tuple(comments), source_ref=source_ref,
        memory_subject=subject, memory_layer=layer, memory_classification_source=csrc,
        origin=_choice(data, "origin", ORIGINS, "user"), basis=_choice(data, "basis", BASES, "unknown"),
        confidence=confidence, source=source, kind_fields=kind, **extra,
    )


def _dream_fields(data: Mapping) -> dict:
    ca = data.get("core_affect")
    ca = {} if ca is None else ca
    if not isinstance(ca, Mapping):
        raise ValidationError("expected {valence, arousal}", field="core_affect")
    core = {"valence": _number(ca, "valence", 0.5, 0, 1), "arousal": _number(ca, "arousal", 0.3, 0, 1)}
    cues = _list(data, "recall_cues", "a list of at most five strings")
    if not all(isinstance(c, str) for c in cues) or len(cues) > 5:
        raise ValidationError("expected a list of at most five strings", field="recall_cues")
    srcs = _list(data, "source_bucket_ids", "a list of bucket ids")
    if not all(isinstance(c, str) for c in srcs):
        raise ValidationError("expected a list of bucket ids", field="source_bucket_ids")
    surfaced = parse_bool(data.get("surfaced", False), "surfaced")
    return {
        "core_affect": core, "recall_cues": tuple(cues), "source_bucket_ids": tuple(srcs), "surfaced": surfaced,
        "surface_attempts": _number(data, "surface_attempts", 0, 0, 10**6, integer=True),
    }


_DEFAULTS = {f.name: f.default for f in dataclasses.fields(Bucket) if f.default is not dataclasses.MISSING}


def bucket_from_stored(d: Mapping) -> Bucket:
    """Rebuild a bucket from its stored JSON without re-validating (it was validated on write), its fields set
    at once, not one ``object.__setattr__`` each: 30 µs a memory became 8, and at 100k a turn meets ~60 new ones."""
    vals = _DEFAULTS | {k: v for k, v in d.items() if k in _FIELD_NAMES}
    if len(vals) < len(_FIELD_NAMES):
        return Bucket(**vals)  # the dataclass's own error names the field the record lacks
    vals["tags"] = tuple(vals["tags"] or ())
    vals["comments"] = tuple(Comment(**c) for c in vals["comments"] or ())
    vals["source_ref"] = SourceRef(**vals["source_ref"]) if vals["source_ref"] else None
    vals["recall_cues"] = tuple(vals["recall_cues"] or ())
    vals["source_bucket_ids"] = tuple(vals["source_bucket_ids"] or ())
    b = object.__new__(Bucket)
    b.__dict__.update(vals)
    return b


STORED_CACHE = 8192  # decoded buckets kept by their stored text (a few KB each)


@lru_cache(maxsize=STORED_CACHE)
def _decoded(text: str) -> Bucket:
    return bucket_from_stored(orjson.loads(text))


def bucket_from_json(text: str) -> Bucket:
    """A bucket from the ledger's stored JSON text, decoded once per text: a turn reads the same recent, role and
    candidate memories again and again, and a bucket is frozen, so one decoding serves every read of that version
    (design §23). The cache quotes memories: :func:`clear_decoded` empties it on a purge."""
    return _decoded(text)


def clear_decoded() -> None:
    _decoded.cache_clear()
    main_text_of.cache_clear()
    _sections_of.cache_clear()
    _evidence_text.cache_clear()
    _lower.cache_clear()


def jsonable(obj: Any) -> Any:
    """Plain JSON data from dataclasses, tuples and datetimes (used by every to_dict)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {k: jsonable(v) for k, v in dataclasses.asdict(obj).items()}
    if isinstance(obj, Mapping):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set | frozenset):
        return [jsonable(v) for v in obj]
    if isinstance(obj, datetime):
        return obj.isoformat()
    return obj


__all__ = [
    "BUCKET_FIELDS", "Bucket", "Comment", "Limits", "Moment", "Section", "SourceRef", "bucket_from_dict",
    "bucket_from_json", "bucket_from_stored", "build_moments", "clear_decoded", "parse_sections",
    "CONTEXT_ONLY_SECTIONS", "field", "visible",
]
