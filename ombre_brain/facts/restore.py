"""Parsing exported fact records back into records and revisions (the inverse of export). Pure.

An exported record is ``{record_id, space, subject, key, conditions, created, state,
current_revision, revisions}`` with history entries from ``select.revision_entry``. Everything
is checked here before any SQLite work starts; a bad record is refused with its index and the
field it got wrong (``records[3].revisions[1].valid_from``).

What an export cannot carry is rebuilt conservatively: the first source reference that is a
source digest is taken as the revision's own source (export lists it first), the others are
plain support; the bucket a source digest was a fragment of is not known.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ValidationError
from ..timeutil import parse_time
from .model import (
    _KEY_RE,
    BASES,
    BUCKET_REF_PREFIX,
    LABELS,
    MAX_TEXT_CHARS,
    MAX_VALUE_CHARS,
    ROLES,
    _label,
    _str,
    parse_conditions,
    validate_key,
)
from .plan import RecordState
from .select import revision_entry
from .timeline import Revision

OPS_BY_LABEL = {label: op for op, label in LABELS.items()}
ADOPTIONS = ("adopted", "pending")
RECORD_FIELDS = frozenset({"record_id", "space", "subject", "key", "conditions", "created", "state",
                           "current_revision", "revisions", "kind"})
ENTRY_FIELDS = frozenset({"revision", "label", "adoption", "status", "target_revision", "value", "valid_from",
                          "valid_until", "basis", "role", "confidence", "text", "source_refs", "created"})
MAX_CREATED_CHARS = 64
_DIGEST_RE = re.compile(r"^[0-9a-f]{64}\Z")


@dataclass
class Incoming:
    """One parsed record, with what the export claimed about its derived state (checked later)."""

    index: int
    record: RecordState
    own: dict[int, str | None]            # revision -> its own source digest, when known
    claimed_state: str | None
    claimed_head: int | None
    claimed_head_given: bool
    claimed_status: dict[int, str]

    def field(self, name: str) -> str:
        return f"records[{self.index}].{name}"


def _int(value: Any, name: str, *, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValidationError(f"expected an integer >= {low}, got {value!r}", field=name)
    return value


def _opt_str(value: Any, name: str, max_chars: int) -> str | None:
    return None if value is None else _str(value, name, max_chars=max_chars, allow_empty=True)


def _unknown(data: Mapping, allowed: frozenset[str], name: str) -> None:
    extra = sorted(set(data) - allowed)
    if extra:
        raise ValidationError(f"unknown field (allowed: {', '.join(sorted(allowed))})", field=f"{name}.{extra[0]}")


def _refs(raw: Any, name: str) -> tuple[tuple[str, ...], str | None]:
    """Source references in export order (own source first, then sorted); returns (refs, own digest)."""
    if raw is None:
        return (), None
    if not isinstance(raw, list):
        raise ValidationError("expected a list of source digests and 'bucket:<id>' references", field=name)
    for i, ref in enumerate(raw):
        ok = isinstance(ref, str) and (
            _DIGEST_RE.match(ref) is not None
            or (ref.startswith(BUCKET_REF_PREFIX) and _KEY_RE.match(ref[len(BUCKET_REF_PREFIX):]) is not None))
        if not ok:
            raise ValidationError("expected a 64-hex source digest or 'bucket:<id>'", field=f"{name}[{i}]")
        if ref in raw[:i]:
            raise ValidationError(f"reference {ref!r} appears twice", field=f"{name}[{i}]")
    if not raw:
        return (), None
    own = raw[0] if not raw[0].startswith(BUCKET_REF_PREFIX) else None
    rest = sorted(r for r in raw if r != own)
    return ((own,) if own else ()) + tuple(rest), own


def parse_entry(raw: Any, name: str, previous: int) -> tuple[Revision, str | None, str | None]:
    """One history entry -> (revision, its own source digest, the status the export claimed)."""
    if not isinstance(raw, Mapping):
        raise ValidationError("expected a history entry object", field=name)
    _unknown(raw, ENTRY_FIELDS, name)
    rev = _int(raw.get("revision"), f"{name}.revision")
    if rev <= previous:
        raise ValidationError(f"revisions must increase; {rev} follows {previous}", field=f"{name}.revision")
    label = raw.get("label")
    if label not in OPS_BY_LABEL:
        raise ValidationError(f"expected one of {', '.join(OPS_BY_LABEL)}, got {label!r}", field=f"{name}.label")
    adoption = raw.get("adoption")
    if adoption not in ADOPTIONS:
        raise ValidationError(f"expected adopted or pending, got {adoption!r}", field=f"{name}.adoption")
    status = raw.get("status")
    if status is not None and not isinstance(status, str):
        raise ValidationError("expected a status string", field=f"{name}.status")
    target = raw.get("target_revision")
    if target is not None:
        target = _int(target, f"{name}.target_revision")
        if target >= rev:
            raise ValidationError(f"a revision may only target an earlier one, got {target} from {rev}",
                                  field=f"{name}.target_revision")
    value = _opt_str(raw.get("value"), f"{name}.value", MAX_VALUE_CHARS)
    valid_from = None if raw.get("valid_from") is None else parse_time(raw["valid_from"], f"{name}.valid_from")
    valid_until = None if raw.get("valid_until") is None else parse_time(raw["valid_until"], f"{name}.valid_until")
    if valid_from is not None and valid_until is not None and valid_from >= valid_until:
        raise ValidationError("valid_until must be after valid_from", field=f"{name}.valid_until")
    basis = raw.get("basis")
    if basis not in BASES:
        raise ValidationError(f"expected one of {', '.join(BASES)}, got {basis!r}", field=f"{name}.basis")
    role = raw.get("role")
    if role not in ROLES:
        raise ValidationError(f"expected one of {', '.join(ROLES)}, got {role!r}", field=f"{name}.role")
    conf = raw.get("confidence")
    if conf is not None and (isinstance(conf, bool) or not isinstance(conf, int | float) or not 0 <= conf <= 1):
        raise ValidationError(f"expected a number between 0 and 1, got {conf!r}", field=f"{name}.confidence")
    text = _opt_str(raw.get("text"), f"{name}.text", MAX_TEXT_CHARS)
    refs, own = _refs(raw.get("source_refs"), f"{name}.source_refs")
    created = _label(raw.get("created"), f"{name}.created", MAX_CREATED_CHARS)
    revision = Revision(rev, OPS_BY_LABEL[label], adoption, value, valid_from, valid_until, basis,
                        None if conf is None else float(conf), role, target, False, text, created, refs)
    return revision, own, status


def parse_record(raw: Any, index: int, max_conditions: int) -> Incoming:
    name = f"records[{index}]"
    if not isinstance(raw, Mapping):
        raise ValidationError("expected an exported fact record object", field=name)
    _unknown(raw, RECORD_FIELDS, name)
    rid = raw.get("record_id")
    if not isinstance(rid, str) or not _KEY_RE.match(rid):
        raise ValidationError(f"expected a record id string, got {rid!r}"[:120], field=f"{name}.record_id")
    subject = _label(raw.get("subject"), f"{name}.subject")
    key = validate_key(raw.get("key"), f"{name}.key")
    conds = parse_conditions(raw.get("conditions") if raw.get("conditions") is not None else [],
                             f"{name}.conditions", max_conditions)
    created = _label(raw.get("created"), f"{name}.created", MAX_CREATED_CHARS)
    state = raw.get("state")
    if state is not None and not isinstance(state, str):
        raise ValidationError("expected a state string", field=f"{name}.state")
    head = raw.get("current_revision")
    if head is not None:
        head = _int(head, f"{name}.current_revision")
    entries = raw.get("revisions")
    if not isinstance(entries, list) or not entries:
        raise ValidationError("expected a non-empty list of history entries", field=f"{name}.revisions")
    rec = RecordState(rid, subject, key, conds, created)
    own: dict[int, str | None] = {}
    status: dict[int, str] = {}
    previous = 0
    for j, entry in enumerate(entries):
        revision, own_ref, claimed = parse_entry(entry, f"{name}.revisions[{j}]", previous)
        previous = revision.revision
        rec.append(revision)
        own[revision.revision] = own_ref
        if claimed is not None:
            status[revision.revision] = claimed
    return Incoming(index, rec, own, state, head, "current_revision" in raw, status)


def parse_records(raw: Any, max_conditions: int) -> list[Incoming]:
    if not isinstance(raw, list):
        raise ValidationError(f"expected a list of exported fact records, got {type(raw).__name__}",
                              field="records")
    out: list[Incoming] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(raw):
        inc = parse_record(item, i, max_conditions)
        rid = inc.record.record_id
        if rid in seen:
            raise ValidationError(f"record {rid!r} appears twice (first at records[{seen[rid]}])",
                                  field=inc.field("record_id"))
        seen[rid] = i
        out.append(inc)
    return out


# ---------------------------------------------------------------- what export writes


def export_record(space: str, rec: RecordState) -> dict | None:
    """One record as export writes it; None when every revision was forgotten."""
    view = rec.view
    revs = [revision_entry(r, view.status.get(r.revision, "applied"))
            for r in sorted(rec.revisions, key=lambda r: r.revision) if not r.forgotten]
    if not revs:
        return None
    return {"record_id": rec.record_id, "space": space, "subject": rec.subject, "key": rec.key,
            "conditions": [{"key": k, "value": v} for k, v in rec.conditions],
            "created": rec.created, "state": record_state(rec), "current_revision": view.head, "revisions": revs}


def check_claims(space: str, inc: Incoming) -> None:
    """What the export said each revision became must be what these revisions resolve to here.

    A mismatch means revisions are missing (an export leaves forgotten ones out) or were edited;
    restoring would change what the record answers, so it is refused.
    """
    out = export_record(space, inc.record)
    assert out is not None
    for j, entry in enumerate(out["revisions"]):
        claimed = inc.claimed_status.get(entry["revision"])
        if claimed is not None and claimed != entry["status"]:
            raise ValidationError(
                f"the export says revision {entry['revision']} is {claimed!r}, but these revisions make it "
                f"{entry['status']!r} (a revision it depends on is missing or was changed)",
                field=inc.field(f"revisions[{j}].status"))
    if inc.claimed_state is not None and inc.claimed_state != out["state"]:
        raise ValidationError(f"the export says {inc.claimed_state!r}, but these revisions make it {out['state']!r}",
                              field=inc.field("state"))
    if inc.claimed_head_given and inc.claimed_head != out["current_revision"]:
        raise ValidationError(f"the export says {inc.claimed_head!r}, but these revisions make it "
                              f"{out['current_revision']!r}", field=inc.field("current_revision"))


def record_state(rec: RecordState) -> str:
    view = rec.view
    if all(r.forgotten for r in rec.revisions):
        return "forgotten"
    if view.denied:
        return "denied"
    if view.live:
        return "live"
    if any(s == "pending" for s in view.status.values()):
        return "pending"
    return "inactive"
