"""Migration from Ombre-Brain's markdown buckets (``ombre-brain import --from ombre-md DIR --space S``).

Ombre-Brain keeps one ``.md`` file per memory: YAML frontmatter, then the body. Mapping onto
DESIGN §3:

- ``name`` -> ``title``; the body (with its ``### section`` headings) -> ``body``, verbatim.
- ``tags`` -> ``tags``; each ``domain`` entry becomes one more tag ``domain:<name>``
  (Ombre-Brain's placeholder domain 未分类, "unclassified", is dropped).
- ``valence``, ``arousal``, ``importance``, ``pinned``, ``protected``, ``anchor``, ``resolved``,
  ``digested``, ``archived``, ``created``, ``last_active``, ``activation_count``, ``comments``:
  same names. A file under an ``archive/`` folder is archived.
- ``type``: dynamic, permanent and feel keep their name; any other type (plan, letter, …) is
  stored as ``dynamic`` with a tag ``ombre_type:<type>``. Without a type the folder decides
  (``permanent/``, ``feel/``), else dynamic.
- ``id`` is kept when it is a legal id, otherwise (or when missing) a stable id is derived
  from it (or from the file's relative path), so a second run finds the same buckets.
- Times without a UTC offset are read in ``naive_tz`` (UTC unless the caller says otherwise);
  a file without ``created`` takes its modification time.
- ``source`` is ``ombre-md:<relative path>``, so a purged memory is refused if migrated again.
- Other frontmatter keys are not mapped; the report lists them.

A file that cannot be read or mapped is reported with its path and reason; the others are
imported.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from datetime import datetime, timezone, tzinfo
from pathlib import Path
from typing import Any

import yaml

from ..buckets import Bucket, bucket_from_dict, validate_space
from ..config_yaml import load_yaml_text
from ..errors import ValidationError
from ..timeutil import coerce_time
from .portability import ImportReport, Problem, apply_buckets

_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}$")
UNCLASSIFIED_DOMAINS = frozenset({"未分类", "unclassified", ""})
OMBRE_TYPES = ("dynamic", "permanent", "feel")
OMBRE_FLAGS = ("pinned", "protected", "anchor", "resolved", "digested", "archived")
OMBRE_MAPPED = frozenset({"id", "name", "tags", "domain", "valence", "arousal", "importance", "type", "created",
                          "last_active", "updated", "activation_count", "comments", *OMBRE_FLAGS})


class _Bad(Exception):
    """A markdown file that cannot be mapped; the message is the reason shown to the user."""


def _split_frontmatter(text: str) -> tuple[str, str, int]:
    """(frontmatter, body, body's first line number) of a ``---`` fenced markdown file."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise _Bad("no YAML frontmatter: the file must start with a '---' line")
    for i in range(1, len(lines)):
        if lines[i].strip() in ("---", "..."):
            return "".join(lines[1:i]), "".join(lines[i + 1:]), i + 2
    raise _Bad("the frontmatter is never closed: no second '---' line")


def _load_frontmatter(fm: str) -> dict:
    try:
        data = load_yaml_text(fm)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 2}" if mark else ""  # +1 for 1-based, +1 for the opening '---'
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise _Bad(f"invalid YAML frontmatter{where}: {problem}") from None
    if data is None:
        raise _Bad("the frontmatter is empty (it needs at least a name)")
    if not isinstance(data, dict):
        raise _Bad(f"the frontmatter must be a mapping of keys, got a {type(data).__name__}")
    return {str(k): v for k, v in data.items()}


def _time(value: Any, key: str, naive_tz: tzinfo) -> str | None:
    try:
        dt = coerce_time(value, naive_tz)
    except ValueError as exc:
        raise _Bad(f"{key}: {exc}") from None
    return dt.isoformat() if dt is not None else None


def _number(value: Any, key: str, lo: float, hi: float, integer: bool = False) -> float | int | None:
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise _Bad(f"{key}: expected a number between {lo:g} and {hi:g}, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise _Bad(f"{key}: expected a number between {lo:g} and {hi:g}, got {json.dumps(value, default=str)[:40]}")
    if not lo <= value <= hi:
        raise _Bad(f"{key}: expected a number between {lo:g} and {hi:g}, got {value:g}")
    if integer:
        if not float(value).is_integer():
            raise _Bad(f"{key}: expected a whole number between {lo:g} and {hi:g}, got {value:g}")
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
    raise _Bad(f"{key}: expected true or false, got {json.dumps(value, ensure_ascii=False, default=str)[:40]}")


def _strings(value: Any, key: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [s.strip() for s in re.split(r"[,，]", value) if s.strip()]
    if isinstance(value, list | tuple):
        out = []
        for v in value:
            if isinstance(v, dict | list):
                raise _Bad(f"{key}: expected a list of words, got an item {json.dumps(v, ensure_ascii=False)[:40]}")
            if v is not None and str(v).strip():
                out.append(str(v).strip())
        return out
    raise _Bad(f"{key}: expected a list of words, got {type(value).__name__}")


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
                raise _Bad(f"comments[{i}]: expected a content text")
            author = c.get("author", c.get("by", c.get("who"))) or "unknown"
            created = _time(c.get("created", c.get("time", c.get("at"))), f"comments[{i}].created", naive_tz)
            out.append({"author": str(author), "content": content, **({"created": created} if created else {})})
        else:
            raise _Bad(f"comments[{i}]: expected a text or {{author, created, content}}")
    return out


def _derived_id(seed: str) -> str:
    return "omd-" + hashlib.sha256(seed.encode()).hexdigest()[:16]


def ombre_md_fields(path: Path, root: Path, space: str, *, naive_tz: tzinfo = timezone.utc) -> tuple[dict, list[str]]:
    """Map one Ombre-Brain markdown file onto §3 fields; returns (fields, unmapped keys). Raises _Bad."""
    raw = path.read_bytes()
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Bad(f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})") from None
    fm_text, body, _ = _split_frontmatter(text)
    fm = _load_frontmatter(fm_text)
    rel = path.relative_to(root).as_posix()
    folders = {p.lower() for p in path.relative_to(root).parts[:-1]}

    name = fm.get("name")
    if name is None or (isinstance(name, str) and not name.strip()):
        raise _Bad("the frontmatter has no name (Ombre-Brain's title field)")
    if isinstance(name, dict | list):
        raise _Bad("name: expected a text")
    raw_id = fm.get("id")
    if raw_id is None or str(raw_id).strip() == "":
        bid = _derived_id(rel)
    else:
        bid = str(raw_id).strip()
        if not _ID_RE.match(bid):
            bid = _derived_id(bid)
    tags = _strings(fm.get("tags"), "tags")
    tags += [f"domain:{d}" for d in _strings(fm.get("domain"), "domain") if d not in UNCLASSIFIED_DOMAINS]
    otype = fm.get("type")
    if otype is None or otype == "":
        otype = "permanent" if "permanent" in folders else "feel" if "feel" in folders else "dynamic"
    if not isinstance(otype, str):
        raise _Bad(f"type: expected a text, got {json.dumps(otype, default=str)[:40]}")
    btype = otype.strip().lower()
    if btype not in OMBRE_TYPES:
        tags.append(f"ombre_type:{btype}")
        btype = "dynamic"
    seen: set[str] = set()
    tags = [t for t in tags if not (t.lower() in seen or seen.add(t.lower()))]
    created = _time(fm.get("created"), "created", naive_tz)
    if created is None:  # the file's own time, so a second run maps the file to the same bucket
        created = datetime.fromtimestamp(int(path.stat().st_mtime), timezone.utc).isoformat()
    last_active = _time(fm.get("last_active"), "last_active", naive_tz) or created
    data: dict[str, Any] = {
        "id": bid, "space": space, "title": str(name).strip(), "body": body.strip("\n").rstrip(), "tags": tags,
        "type": btype, "source": f"ombre-md:{rel}", "origin": "user",
        **{f: _flag(fm.get(f), f) for f in OMBRE_FLAGS},
        "comments": _comments(fm.get("comments"), naive_tz),
    }
    if "archive" in folders:
        data["archived"] = True
    for key, lo, hi, integer in (("valence", 0, 1, False), ("arousal", 0, 1, False), ("importance", 1, 10, True),
                                 ("activation_count", 0, 10**9, True)):
        v = _number(fm.get(key), key, lo, hi, integer)
        if v is not None:
            data[key] = v
    data["created"] = created
    data["updated"] = _time(fm.get("updated"), "updated", naive_tz) or last_active
    data["last_active"] = last_active
    return data, sorted(set(fm) - OMBRE_MAPPED)


def import_ombre_md(brain, folder: str | Path, *, space: str, naive_tz: tzinfo = timezone.utc,
                    progress: Callable[[int], None] | None = None) -> ImportReport:
    """Migrate a folder of Ombre-Brain markdown buckets into ``space``; bad files are reported, not skipped."""
    validate_space(space)
    root = Path(folder)
    if not root.is_dir():
        raise ValidationError(f"{root}: no such folder (--from ombre-md takes the folder of .md buckets)")
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() == ".md")
    if not files:
        raise ValidationError(f"{root}: no .md files found")
    report = ImportReport(source=str(root), space=space)
    parsed: list[tuple[Path, Bucket]] = []
    unmapped: dict[str, int] = {}
    validate = getattr(brain, "_validated", None)
    for path in files:
        try:
            data, extra = ombre_md_fields(path, root, space, naive_tz=naive_tz)
            bucket = validate(data, None) if callable(validate) else bucket_from_dict(data, limits=brain.limits)
        except _Bad as exc:
            report.problems.append(Problem(str(path), str(exc)))
        except ValidationError as exc:
            report.problems.append(Problem(str(path), exc.message))
        except OSError as exc:
            report.problems.append(Problem(str(path), f"cannot read: {exc.strerror}"))
        else:
            parsed.append((path, bucket))
            for k in extra:
                unmapped[k] = unmapped.get(k, 0) + 1
            continue
        if progress is not None:
            progress(1)
    by_id: dict[str, list[Path]] = {}
    for path, bucket in parsed:
        by_id.setdefault(bucket.id, []).append(path)
    items: list[tuple[str, Bucket]] = []
    for path, bucket in parsed:  # two files claiming one id: neither wins silently
        others = [str(p) for p in by_id[bucket.id] if p != path]
        if others:
            report.problems.append(Problem(str(path), f"id {bucket.id!r} is also used by {', '.join(others)}"))
            if progress is not None:
                progress(1)
        else:
            items.append((str(path), bucket))
    if unmapped:
        shown = ", ".join(f"{k} ({n} file{'s' if n != 1 else ''})" for k, n in sorted(unmapped.items()))
        report.notes.append(f"frontmatter keys not mapped: {shown}")
    apply_buckets(brain, space, items, report, progress)
    return report


__all__ = ["import_ombre_md", "ombre_md_fields"]
