"""One Ombre-Brain markdown bucket onto design §3 fields (the pure half of ``--from ombre-md``).

Ombre-Brain writes one ``.md`` file per memory: YAML frontmatter (keys sorted, times naive
server-local), a blank line, then the body verbatim. The mapping:

- ``id`` is kept when it is a legal id; an illegal one gets a stable derived id. Without an id,
  the file name's ``_<12 hex>`` suffix (or its stem) is the id, as in Ombre-Brain, so a memory
  that moves between folders keeps its id. ``source`` is ``ombre-md:<id>`` for the same reason:
  purging it suppresses the memory wherever its file sits next time.
- ``title``, else ``name`` without its ``YYYY-MM-DD HH-MM-SS`` prefix, else the body's first
  line (plans and feels have only the timestamp as their name).
- ``tags`` without Ombre-Brain's system tags (``__feel__``, ``__plan__``…), plus one
  ``domain:<d>`` tag per domain (the placeholder 未分类 dropped).
- ``type``: dynamic, permanent and feel keep their name. A letter, a plan and a formal ``I``
  entry become our kinds (``letter``, ``plan``, ``self``) with their own fields, lock and status
  included (:mod:`.ombre_md_kinds`); an ``I`` candidate stays dynamic with its self-model fields.
  ``type: archived`` (forgotten by decay) is archived, its kind recovered from its system tags,
  ``source_tool`` or domain. Any other type becomes ``dynamic``, kept as a tag
  ``ombre_type:<kind>``. Without a type, the top folder decides.
- The flags ``pinned``, ``protected``, ``anchor``, ``resolved``, ``digested``, ``archived`` and
  ``dont_surface`` (never surface it: every gate refuses it); a file under the top ``archive/``
  folder is archived.
- ``valence``, ``arousal``, ``importance``; the ``weight`` of a file without importance becomes
  importance ``round(weight × 10)`` (a plan keeps its weight as ``kind_fields.plan.weight``);
  ``activation_count`` is rounded (Ombre-Brain's ripple adds 0.3).
- ``created``, ``last_active``, ``event_time`` (and a non-upstream ``updated``); times without
  an offset are read in ``naive_tz``. Ombre-Brain writes naive server-local time, so pass the
  zone its server ran in (``--tz +08:00``); the default is UTC. A file without ``created``
  takes its modification time.
- ``why_remembered`` and each ``meaning`` become comments by ``ombre:why_remembered`` and
  ``ombre:meaning``: context that rides along with the memory and never proves a hit by itself.
  A non-upstream ``comments`` list is kept too.

The other keys are listed by the import report. Soft-deleted files (:func:`deletion_marker`)
are not mapped at all.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import date, datetime, timezone, tzinfo
from pathlib import Path
from typing import Any

import yaml

from ..config.parse import load_yaml_text
from ..timeutil import coerce_time
from .ombre_md_kinds import KIND_KEYS, kind_mapping

_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}$")
_STEM_ID_RE = re.compile(r"_([0-9a-f]{12})$")
_NAME_TIME_RE = re.compile(r"^\d{4}-\d\d-\d\d \d\d-\d\d-\d\d ?")
_SYSTEM_TAG_RE = re.compile(r"^__\w+__$")
UNCLASSIFIED_DOMAINS = frozenset({"未分类", "unclassified", ""})
NATIVE_TYPES = ("dynamic", "permanent", "feel")
KIND_FOLDERS = {"permanent": "permanent", "feel": "feel", "plans": "plan", "letters": "letter"}
BUCKET_ROOTS = ("dynamic", "permanent", "archive", "feel", "plans", "letters")
OMBRE_FLAGS = ("pinned", "protected", "anchor", "resolved", "digested", "archived", "dont_surface")
OMBRE_MAPPED = frozenset({"id", "name", "title", "tags", "domain", "valence", "arousal", "importance", "weight",
                          "type", "status", "created", "last_active", "updated", "event_time", "activation_count",
                          "comments", "why_remembered", "meaning", *OMBRE_FLAGS, *KIND_KEYS})
DELETED_TIMES = ("deleted_at", "tombstoned_at", "erased_at")
DELETED_FLAGS = ("tombstone", "deleted", "physical_erasure")
DELETED_STATUS = frozenset({"deleted", "tombstone", "erased"})


class Bad(Exception):
    """A markdown file that cannot be mapped; the message is the reason shown to the user."""


# ---------------------------------------------------------------- reading


def _split_frontmatter(text: str) -> tuple[str, str]:
    """(frontmatter, body) of a ``---`` fenced file; a ``---`` in the body (a merge) stays in the body."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise Bad("no YAML frontmatter: the file must start with a '---' line")
    for i in range(1, len(lines)):
        if lines[i].strip() in ("---", "..."):
            return "".join(lines[1:i]), "".join(lines[i + 1:])
    raise Bad("the frontmatter is never closed: no second '---' line")


def read_bucket_file(path: Path) -> tuple[dict, str]:
    """(frontmatter keys, body) of one markdown bucket; raises Bad naming what is wrong."""
    raw = path.read_bytes()
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Bad(f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})") from None
    fm_text, body = _split_frontmatter(text)
    try:
        data = load_yaml_text(fm_text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 2}" if mark else ""  # +1 for 1-based, +1 for the opening '---'
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise Bad(f"invalid YAML frontmatter{where}: {problem}") from None
    if data is None:
        raise Bad("the frontmatter is empty (it needs at least a name)")
    if not isinstance(data, dict):
        raise Bad(f"the frontmatter must be a mapping of keys, got a {type(data).__name__}")
    return {str(k): v for k, v in data.items()}, body


# ---------------------------------------------------------------- values


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "yes", "1", "on")
    return value is True or (isinstance(value, int | float) and not isinstance(value, bool) and value == 1)


def _time(value: Any, key: str, naive_tz: tzinfo) -> str | None:
    try:
        dt = coerce_time(value, naive_tz)
    except ValueError as exc:
        raise Bad(f"{key}: {exc}") from None
    return dt.isoformat() if dt is not None else None


def is_naive_time(value: Any) -> bool:
    """Whether a frontmatter time carries no UTC offset (Ombre-Brain writes server-local time so)."""
    if isinstance(value, datetime):
        return value.tzinfo is None
    if isinstance(value, date):
        return True
    if isinstance(value, str) and value.strip():
        try:
            return datetime.fromisoformat(value.strip().replace("Z", "+00:00")).tzinfo is None
        except ValueError:
            return False
    return False


def _number(value: Any, key: str, lo: float, hi: float, integer: bool = False) -> float | int | None:
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise Bad(f"{key}: expected a number between {lo:g} and {hi:g}, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise Bad(f"{key}: expected a number between {lo:g} and {hi:g}, got {json.dumps(value, default=str)[:40]}")
    if not lo <= value <= hi:
        raise Bad(f"{key}: expected a number between {lo:g} and {hi:g}, got {value:g}")
    if integer:
        if not float(value).is_integer():
            raise Bad(f"{key}: expected a whole number between {lo:g} and {hi:g}, got {value:g}")
        return int(value)
    return float(value)


def _flag(value: Any, key: str) -> bool:
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "yes", "1", "false", "no", "0", ""):
        return value.strip().lower() in ("true", "yes", "1")
    raise Bad(f"{key}: expected true or false, got {json.dumps(value, ensure_ascii=False, default=str)[:40]}")


def _strings(value: Any, key: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [s.strip() for s in re.split(r"[,，]", value) if s.strip()]
    if isinstance(value, list | tuple):
        out = []
        for v in value:
            if isinstance(v, dict | list):
                raise Bad(f"{key}: expected a list of words, got an item {json.dumps(v, ensure_ascii=False)[:40]}")
            if v is not None and str(v).strip():
                out.append(str(v).strip())
        return out
    raise Bad(f"{key}: expected a list of words, got {type(value).__name__}")


def _comments(value: Any, naive_tz: tzinfo) -> list[dict]:
    if value is None:
        return []
    if not isinstance(value, list):
        value = [value]
    out = []
    for i, c in enumerate(value):
        if isinstance(c, str):
            out.append({"author": "unknown", "content": c})
        elif isinstance(c, dict):
            content = c.get("content", c.get("text", c.get("comment")))
            if not isinstance(content, str) or not content.strip():
                raise Bad(f"comments[{i}]: expected a content text")
            author = c.get("author", c.get("by", c.get("who"))) or "unknown"
            created = _time(c.get("created", c.get("time", c.get("at"))), f"comments[{i}].created", naive_tz)
            out.append({"author": str(author), "content": content, **({"created": created} if created else {})})
        else:
            raise Bad(f"comments[{i}]: expected a text or {{author, created, content}}")
    return out


def _reasons(fm: dict) -> list[dict]:
    """``why_remembered`` and ``meaning`` as comments: the writer's own reasons, context beside the memory."""
    out = []
    why = fm.get("why_remembered")
    if isinstance(why, str) and why.strip():
        out.append({"author": "ombre:why_remembered", "content": why.strip()})
    meaning = fm.get("meaning")
    for m in [meaning] if isinstance(meaning, str) else meaning if isinstance(meaning, list) else []:
        if isinstance(m, str) and m.strip():
            out.append({"author": "ombre:meaning", "content": m.strip()})
    return out


# ---------------------------------------------------------------- identity and kind


def derived_id(seed: str) -> str:
    return "omd-" + hashlib.sha256(seed.encode()).hexdigest()[:16]


def bucket_id(fm: dict, stem: str) -> str:
    """The bucket id: a legal ``id`` as is; else one derived from it, or from the file name (not its folder)."""
    raw = fm.get("id")
    if raw is not None and str(raw).strip():
        bid = str(raw).strip()
        return bid if _ID_RE.fullmatch(bid) else derived_id(bid)
    m = _STEM_ID_RE.search(stem)
    if m:
        return m.group(1)
    return stem if _ID_RE.fullmatch(stem) else derived_id(stem)


def top_folder(rel: str) -> str:
    """The first folder under the vault root (``dynamic``, ``archive``…), lower case; '' for a file at the root."""
    parts = rel.split("/")
    return parts[0].lower() if len(parts) > 1 else ""


def deletion_marker(fm: dict) -> str | None:
    """The soft-delete marker a file carries (``deleted_at``, ``tombstone: true``…), or None when it is live."""
    for key in DELETED_TIMES:
        if fm.get(key) not in (None, "", False):
            return key
    for key in DELETED_FLAGS:
        if _truthy(fm.get(key)):
            return f"{key}: true"
    if fm.get("erasure_mode") not in (None, "", False):
        return "erasure_mode"
    for key, bad in (("type", {"tombstone"}), ("status", DELETED_STATUS)):
        if isinstance(fm.get(key), str) and fm[key].strip().lower() in bad:
            return f"{key}: {fm[key].strip()}"
    return None


def ombre_kind(fm: dict, rel: str) -> str:
    """What the memory is in Ombre-Brain (dynamic, permanent, feel, plan, letter, i…), archived ones included."""
    t = fm.get("type")
    kind = t.strip().lower() if isinstance(t, str) and t.strip() else ""
    if kind and kind != "archived":
        return kind
    if kind == "archived":
        tags = {str(x).strip().lower() for x in (fm.get("tags") or []) if isinstance(x, str | int | float)}
        domains = {str(x).strip().lower() for x in (fm.get("domain") or []) if isinstance(x, str | int | float)}
        tool = str(fm.get("source_tool") or "").lower()
        for k in ("feel", "letter", "plan"):
            if f"__{k}__" in tags or tool == k or k in domains:
                return k
        return "dynamic"
    return KIND_FOLDERS.get(top_folder(rel), "dynamic")


def _title(fm: dict, body: str) -> str:
    for key in ("title", "name"):
        v = fm.get(key)
        if isinstance(v, dict | list):
            raise Bad(f"{key}: expected a text")
    title = fm.get("title")
    if title is not None and str(title).strip():
        return str(title).strip()
    name = fm.get("name")
    if name is None or not str(name).strip():
        raise Bad("the frontmatter has no name or title (Ombre-Brain's title fields)")
    clean = _NAME_TIME_RE.sub("", str(name).strip()).strip()
    if clean:
        return clean
    first = next((line.strip() for line in body.splitlines() if line.strip()), "")
    return (first[:60] + "…" if len(first) > 60 else first) or str(name).strip()


# ---------------------------------------------------------------- the mapping


def map_fields(fm: dict, body: str, *, rel: str, stem: str, space: str, naive_tz: tzinfo,
               mtime: float | None = None) -> tuple[dict, list[str]]:
    """§3 fields of one live Ombre-Brain bucket, and the frontmatter keys left unmapped. Raises Bad."""
    bid = bucket_id(fm, stem)
    body = body.strip("\n").rstrip()
    title = _title(fm, body)
    tags = [t for t in _strings(fm.get("tags"), "tags") if not _SYSTEM_TAG_RE.match(t)]
    tags += [f"domain:{d}" for d in _strings(fm.get("domain"), "domain") if d not in UNCLASSIFIED_DOMAINS]
    kind = ombre_kind(fm, rel)
    flags = {f: _flag(fm.get(f), f) for f in OMBRE_FLAGS}
    if top_folder(rel) == "archive" or str(fm.get("type") or "").strip().lower() == "archived":
        flags["archived"] = True
    created = _time(fm.get("created"), "created", naive_tz)
    if created is None and mtime is not None:  # the file's own time, so a second run maps it the same
        created = datetime.fromtimestamp(int(mtime), timezone.utc).isoformat()
    ktype, kfields, tags = kind_mapping(kind, fm, tags, naive_tz=naive_tz, when=_time, created=created)
    btype = ktype or (kind if kind in NATIVE_TYPES else "dynamic")
    if ktype is None and kind not in NATIVE_TYPES:
        tags.append(f"ombre_type:{kind}")
    seen: set[str] = set()
    tags = [t for t in tags if not (t.lower() in seen or seen.add(t.lower()))]
    last_active = _time(fm.get("last_active"), "last_active", naive_tz) or created
    data: dict[str, Any] = {
        "id": bid, "space": space, "title": title, "body": body, "tags": tags, "type": btype,
        "source": f"ombre-md:{bid}", "origin": "user", **flags,
        "comments": _comments(fm.get("comments"), naive_tz) + _reasons(fm),
        **({"kind_fields": kfields} if kfields else {}),
    }
    for key, lo, hi, integer in (("valence", 0, 1, False), ("arousal", 0, 1, False), ("importance", 1, 10, True)):
        v = _number(fm.get(key), key, lo, hi, integer)
        if v is not None:
            data[key] = v
    weight = _number(fm.get("weight"), "weight", 0, 1)
    if weight is not None and "importance" not in data:  # a plan keeps its weight in kind.plan
        data["importance"] = min(10, max(1, round(weight * 10)))
    count = _number(fm.get("activation_count"), "activation_count", 0, 10**9)
    if count is not None:
        data["activation_count"] = round(count)
    if created is not None:
        data["created"] = created
    data["updated"] = _time(fm.get("updated"), "updated", naive_tz) or last_active
    data["last_active"] = last_active
    data["event_time"] = _time(fm.get("event_time"), "event_time", naive_tz)
    return data, sorted(set(fm) - OMBRE_MAPPED)


def ombre_md_fields(path: Path, root: Path, space: str, *, naive_tz: tzinfo = timezone.utc) -> tuple[dict, list[str]]:
    """Map one Ombre-Brain markdown file onto §3 fields; returns (fields, unmapped keys). Raises Bad."""
    fm, body = read_bucket_file(path)
    return map_fields(fm, body, rel=path.relative_to(root).as_posix(), stem=path.stem, space=space,
                      naive_tz=naive_tz, mtime=path.stat().st_mtime)


__all__ = [
    "BUCKET_ROOTS", "Bad", "bucket_id", "deletion_marker", "is_naive_time", "map_fields", "ombre_kind",
    "ombre_md_fields", "read_bucket_file", "top_folder",
]
