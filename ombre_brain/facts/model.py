"""Evidence bodies for the facts contract (design §9): parsing, validation, identity. Pure.

Everything a client sends is checked here before any SQLite work starts, so a malformed
batch is refused with the field it got wrong and never half-applied.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..buckets import validate_space
from ..config import Config
from ..errors import ValidationError
from ..text import digest
from ..timeutil import parse_time

OPS = ("establish", "change", "exception", "correct", "confirm", "deny")
ROLES = ("user_quote", "structured_confirmation", "observation", "inference")
BASES = ("stated", "observed", "inferred", "unknown")
# Roles whose edits are adopted on arrival; quotes and inferences wait for a confirm.
ADOPTING_ROLES = frozenset({"structured_confirmation", "observation"})
GROUNDED_BASES = frozenset({"stated", "observed"})
DEFAULT_BASIS = {"user_quote": "stated", "structured_confirmation": "stated",
                 "observation": "observed", "inference": "inferred"}
LABELS = {"establish": "established", "change": "changed", "exception": "exception",
          "correct": "corrected", "confirm": "confirmed", "deny": "denied"}
EDIT_FIELDS = frozenset({"op", "key", "value", "conditions", "target", "valid_from", "valid_until",
                         "basis", "confidence"})
BODY_FIELDS = frozenset({"space", "source", "subject", "role", "text", "edits", "source_refs"})
SOURCE_FIELDS = frozenset({"producer", "event_id", "revision", "fragment"})

MAX_VALUE_CHARS = 2000
MAX_TEXT_CHARS = 8000
MAX_SOURCE_CHARS = 256
MAX_CONDITION_VALUE_CHARS = 256
MAX_SOURCE_REFS = 16
BUCKET_REF_PREFIX = "bucket:"

_KEY_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:\-]{0,127}\Z")  # \Z: `$` also matches before a final "\n"
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")

Conditions = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Source:
    producer: str
    event_id: str
    revision: int | str | None = None
    fragment: str | None = None

    @property
    def bucket_id(self) -> str | None:
        """The bucket this source is a fragment of, when the fragment reads ``bucket:<id>``."""
        if self.fragment and self.fragment.startswith(BUCKET_REF_PREFIX):
            return self.fragment[len(BUCKET_REF_PREFIX):] or None
        return None


@dataclass(frozen=True)
class Target:
    record_id: str
    revision: int


@dataclass(frozen=True)
class Edit:
    index: int
    op: str
    key: str
    value: str | None = None
    conditions: Conditions | None = None      # None: not given (edits on a record inherit its conditions)
    target: Target | None = None
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    basis: str | None = None                  # None: not given
    confidence: float | None = None
    present: frozenset[str] = frozenset()     # which optional fields the client sent (null counts)

    def field(self, name: str) -> str:
        return f"edits[{self.index}].{name}"

    def to_canonical(self) -> dict:
        return {"op": self.op, "key": self.key, "value": self.value,
                "conditions": None if self.conditions is None else [list(c) for c in self.conditions],
                "target": None if self.target is None else [self.target.record_id, self.target.revision],
                "valid_from": iso(self.valid_from), "valid_until": iso(self.valid_until),
                "basis": self.basis, "confidence": self.confidence, "present": sorted(self.present)}


@dataclass(frozen=True)
class Evidence:
    space: str
    source: Source
    subject: str
    role: str
    text: str
    edits: tuple[Edit, ...]
    source_refs: tuple[str, ...] = ()
    digest: str = field(default="", compare=False)

    def payload_hash(self) -> str:
        """What 'the same payload' means for dedupe: everything but space and source, normalised."""
        payload = {"subject": self.subject, "role": self.role, "text": self.text,
                   "edits": [e.to_canonical() for e in self.edits], "source_refs": sorted(self.source_refs)}
        return digest(payload)


def iso(dt: datetime | None) -> str | None:
    return dt.isoformat() if dt is not None else None


def source_digest(space: str, producer: str, event_id: str, revision: int | str | None = None,
                  fragment: str | None = None) -> str:
    """The source identity of §9: sha256 over (space, producer, event_id, revision, fragment)."""
    return digest([space, producer, event_id, revision, fragment])


# ---------------------------------------------------------------- field checks


def _str(value: Any, name: str, *, max_chars: int, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise ValidationError(f"expected a string, got {type(value).__name__}", field=name)
    if not allow_empty and not value.strip():
        raise ValidationError("must not be empty", field=name)
    if len(value) > max_chars:
        raise ValidationError(f"is {len(value)} characters; the limit is {max_chars}", field=name)
    if "\x00" in value:
        raise ValidationError("contains a NUL character", field=name)
    return value


def _label(value: Any, name: str, max_chars: int = 128) -> str:
    """A one-line label: no control characters, no surrounding whitespace."""
    s = _str(value, name, max_chars=max_chars)
    if _CONTROL_RE.search(s) or s != s.strip():
        raise ValidationError("must be one line without control characters or surrounding spaces", field=name)
    return s


def validate_key(value: Any, name: str) -> str:
    if not isinstance(value, str) or not _KEY_RE.match(value):
        raise ValidationError(
            f"expected a key of letters, digits and _.:- (1-128 chars, e.g. 'preference.drink'), "
            f"got {json.dumps(value, ensure_ascii=False)[:60]}", field=name)
    return value


def _choice(value: Any, name: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ValidationError(f"expected one of {', '.join(choices)}, got {json.dumps(value, ensure_ascii=False)[:60]}",
                              field=name)
    return value


def _unknown(data: Mapping, allowed: frozenset[str], name: str) -> None:
    extra = sorted(set(data) - allowed)
    if extra:
        where = f"{name}." if name else ""
        raise ValidationError(f"unknown field (allowed: {', '.join(sorted(allowed))})", field=where + extra[0])


def parse_conditions(raw: Any, name: str, max_conditions: int) -> Conditions:
    """A list of exact ``{key, value}`` equalities, sorted by key; a key may appear once."""
    if not isinstance(raw, list):
        raise ValidationError("expected a list of {key, value} objects", field=name)
    if len(raw) > max_conditions:
        raise ValidationError(f"has {len(raw)} conditions; the limit is {max_conditions}", field=name)
    pairs: dict[str, str] = {}
    for i, cond in enumerate(raw):
        where = f"{name}[{i}]"
        if not isinstance(cond, Mapping):
            raise ValidationError("expected an object {key, value}", field=where)
        _unknown(cond, frozenset({"key", "value"}), where)
        ck = validate_key(cond.get("key"), f"{where}.key")
        cv = _label(cond.get("value"), f"{where}.value", MAX_CONDITION_VALUE_CHARS)
        if ck in pairs:
            raise ValidationError(f"condition key {ck!r} appears twice; conditions are exact equalities",
                                  field=f"{where}.key")
        pairs[ck] = cv
    return tuple(sorted(pairs.items()))


def conditions_json(conds: Conditions) -> str:
    return json.dumps([list(c) for c in conds], ensure_ascii=False, separators=(",", ":"))


def conditions_out(conds: Conditions) -> list[dict]:
    return [{"key": k, "value": v} for k, v in conds]


def parse_context(raw: Any) -> dict[str, str]:
    """Host context as a dict, from a mapping or the HTTP form ``k=v,k=v``."""
    if raw is None or raw == "":
        return {}
    if isinstance(raw, Mapping):
        out: dict[str, str] = {}
        for k, v in raw.items():
            validate_key(k, "context")
            if not isinstance(v, str):
                raise ValidationError(f"value of {k!r} must be a string, got {type(v).__name__}", field="context")
            out[k] = v
        return out
    if not isinstance(raw, str):
        raise ValidationError("expected 'k=v,k=v' or an object", field="context")
    out = {}
    for piece in raw.split(","):
        piece = piece.strip()
        if not piece:
            continue
        k, sep, v = piece.partition("=")
        k, v = k.strip(), v.strip()
        if not sep:
            raise ValidationError(f"expected 'k=v' pairs separated by commas, got {piece[:40]!r}", field="context")
        validate_key(k, "context")
        if k in out and out[k] != v:
            raise ValidationError(f"key {k!r} is given twice with different values", field="context")
        out[k] = v
    return out


def _target(raw: Any, name: str) -> Target:
    if not isinstance(raw, Mapping):
        raise ValidationError("expected an object {record_id, revision}", field=name)
    _unknown(raw, frozenset({"record_id", "revision"}), name)
    rid = raw.get("record_id")
    if not isinstance(rid, str) or not _KEY_RE.match(rid):
        raise ValidationError("expected a record id string", field=f"{name}.record_id")
    rev = raw.get("revision")
    if isinstance(rev, bool) or not isinstance(rev, int) or rev < 1:
        raise ValidationError("expected a revision number >= 1", field=f"{name}.revision")
    return Target(rid, rev)


def _time(raw: Any, name: str) -> datetime | None:
    return None if raw is None else parse_time(raw, name)


def parse_edit(raw: Any, index: int, max_conditions: int) -> Edit:
    name = f"edits[{index}]"
    if not isinstance(raw, Mapping):
        raise ValidationError("expected an edit object {op, key, value, ...}", field=name)
    _unknown(raw, EDIT_FIELDS, name)
    op = _choice(raw.get("op"), f"{name}.op", OPS)
    key = validate_key(raw.get("key"), f"{name}.key")
    present = frozenset(k for k in ("value", "conditions", "target", "valid_from", "valid_until",
                                    "basis", "confidence") if k in raw)
    value = raw.get("value")
    if value is not None:
        value = _str(value, f"{name}.value", max_chars=MAX_VALUE_CHARS)
    conds = None
    if raw.get("conditions") is not None:
        conds = parse_conditions(raw["conditions"], f"{name}.conditions", max_conditions)
    target = None if raw.get("target") is None else _target(raw["target"], f"{name}.target")
    vf, vu = _time(raw.get("valid_from"), f"{name}.valid_from"), _time(raw.get("valid_until"), f"{name}.valid_until")
    basis = None if raw.get("basis") is None else _choice(raw["basis"], f"{name}.basis", BASES)
    conf = raw.get("confidence")
    if conf is not None:
        if isinstance(conf, bool) or not isinstance(conf, int | float) or not 0 <= conf <= 1:
            raise ValidationError(f"expected a number between 0 and 1, got {conf!r}", field=f"{name}.confidence")
        conf = float(conf)
    edit = Edit(index, op, key, value, conds, target, vf, vu, basis, conf, present)
    _check_op_shape(edit)
    return edit


def _check_op_shape(e: Edit) -> None:
    """The per-op rules that need no stored state."""
    needs_value = e.op in ("establish", "change", "exception", "correct")
    if needs_value and e.value is None:
        raise ValidationError(f"{e.op} needs a value", field=e.field("value"))
    if e.op == "establish" and e.target is not None:
        raise ValidationError("establish creates a new record and takes no target", field=e.field("target"))
    if e.op != "establish" and e.target is None:
        raise ValidationError(f"{e.op} needs a target {{record_id, revision}}", field=e.field("target"))
    if e.op == "change" and e.valid_from is None:
        raise ValidationError("change needs an explicit onset; arrival time is never used as one",
                              field=e.field("valid_from"))
    if e.op == "exception" and (e.valid_from is None or e.valid_until is None):
        missing = "valid_from" if e.valid_from is None else "valid_until"
        raise ValidationError("exception needs both valid_from and valid_until", field=e.field(missing))
    if e.op in ("confirm", "deny"):
        for f in ("valid_from", "valid_until"):
            if f in e.present:
                raise ValidationError(f"{e.op} takes no {f}; it acts on the target exactly as it stands",
                                      field=e.field(f))
    if e.op == "confirm" and e.basis == "inferred":
        raise ValidationError("a confirmation cannot have basis 'inferred'", field=e.field("basis"))
    if e.valid_from is not None and e.valid_until is not None and e.valid_from >= e.valid_until:
        raise ValidationError("valid_until must be after valid_from (intervals are [valid_from, valid_until))",
                              field=e.field("valid_until"))


def parse_source(raw: Any) -> Source:
    if not isinstance(raw, Mapping):
        raise ValidationError("expected an object {producer, event_id, revision, fragment}", field="source")
    _unknown(raw, SOURCE_FIELDS, "source")
    producer = _label(raw.get("producer"), "source.producer", MAX_SOURCE_CHARS)
    event_id = _label(raw.get("event_id"), "source.event_id", MAX_SOURCE_CHARS)
    rev = raw.get("revision")
    if rev is not None and (isinstance(rev, bool) or not isinstance(rev, int | str)):
        raise ValidationError("expected an integer or string revision", field="source.revision")
    if isinstance(rev, str):
        _label(rev, "source.revision", MAX_SOURCE_CHARS)
    frag = raw.get("fragment")
    if frag is not None:
        frag = _label(frag, "source.fragment", MAX_SOURCE_CHARS)
    return Source(producer, event_id, rev, frag)


def parse_source_refs(raw: Any) -> tuple[str, ...]:
    """Extra supporting buckets, each ``bucket:<id>``."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or len(raw) > MAX_SOURCE_REFS:
        raise ValidationError(f"expected a list of at most {MAX_SOURCE_REFS} 'bucket:<id>' strings",
                              field="source_refs")
    out = []
    for i, ref in enumerate(raw):
        if not isinstance(ref, str) or not ref.startswith(BUCKET_REF_PREFIX) \
                or not _KEY_RE.match(ref[len(BUCKET_REF_PREFIX):]):
            raise ValidationError("expected 'bucket:<id>'", field=f"source_refs[{i}]")
        out.append(ref)
    return tuple(dict.fromkeys(out))


def parse_evidence(body: Any, config: Config) -> Evidence:
    """Validate a §9 evidence body completely, or raise ValidationError naming the first bad field."""
    if not isinstance(body, Mapping):
        raise ValidationError(f"expected a JSON object, got {type(body).__name__}")
    _unknown(body, BODY_FIELDS, "")
    space = validate_space(body.get("space"))
    source = parse_source(body.get("source"))
    subject = _label(body.get("subject"), "subject")
    role = _choice(body.get("role"), "role", ROLES)
    text = body.get("text", "")
    text = "" if text is None else _str(text, "text", max_chars=MAX_TEXT_CHARS, allow_empty=True)
    raw_edits = body.get("edits")
    max_edits = config.facts.max_edits
    if not isinstance(raw_edits, list) or not raw_edits:
        raise ValidationError("expected a non-empty list of edits", field="edits")
    if len(raw_edits) > max_edits:
        raise ValidationError(f"has {len(raw_edits)} edits; the limit is {max_edits}", field="edits")
    edits = tuple(parse_edit(e, i, config.facts.max_conditions) for i, e in enumerate(raw_edits))
    for e in edits:
        if e.op == "confirm" and role not in ADOPTING_ROLES:
            raise ValidationError(f"only {' or '.join(sorted(ADOPTING_ROLES))} evidence may confirm; "
                                  f"a {role} stays pending itself", field=e.field("op"))
    refs = parse_source_refs(body.get("source_refs"))
    digest = source_digest(space, source.producer, source.event_id, source.revision, source.fragment)
    return Evidence(space, source, subject, role, text, edits, refs, digest)
