"""How writer input is read, one field at a time: the forms each kind of field accepts, and the refusal.

Every write path (HTTP, MCP, imports, the write decision) goes through these, so a field means the
same everywhere and a mistake is refused naming the field (a 400 ``{"error": {"code", "message"}}``
or a tool error), never cut to fit or guessed at. The README lists the forms ("Fields and the forms
they accept"); :func:`parse_bool` is the one reading of a flag.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping
from typing import Any

from .errors import ValidationError
from .text import clean

MAX_SUMMARY_CHARS = 2000
MAX_COMMENT_CHARS = 2000
MAX_AUTHOR_CHARS = 100

# Used with fullmatch: `$` would also match before a trailing newline ("id\n").
_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}")
_SPACE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}")


def validate_space(space: Any) -> str:
    if not isinstance(space, str) or not _SPACE_RE.fullmatch(space):
        raise ValidationError(
            "expected a space name of letters, digits and _.:- (1-128 chars, e.g. 'haven:xiaoyu'), "
            f"got {json.dumps(space, ensure_ascii=False)[:60]}",
            field="space",
            code="bad_space",
        )
    return space


def validate_id(value: Any, field_name: str = "id") -> str:
    if not isinstance(value, str) or not _ID_RE.fullmatch(value):
        raise ValidationError(
            "expected an id of letters, digits and _.:- (1-128 chars), got "
            f"{json.dumps(value, ensure_ascii=False)[:60]}",
            field=field_name,
        )
    return value


BOOLEAN_FORMS = 'true/false, 1/0 or "true"/"false"'


def parse_bool(value: Any, field: str) -> bool:
    """A flag as any client sends it: true/false, 1/0, or the strings "true"/"false" (any case).

    Anything else ("yes", "on", 2, null, "") is refused naming the field: guessing what a writer
    meant by a flag would pin or archive a memory nobody asked to.
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ValidationError(f"expected true or false, got {json.dumps(value, ensure_ascii=False)[:40]} (a flag is "
                          f"{BOOLEAN_FORMS})", field=field)


def flag(data: Mapping, key: str) -> bool:
    return parse_bool(data.get(key, False), key)


def list_field(data: Mapping, key: str, what: str) -> list | tuple:
    """A list field: absent or null is empty; any other non-list (an object, a string) is refused, not emptied."""
    v = data.get(key)
    if v is None:
        return []
    if not isinstance(v, list | tuple):
        raise ValidationError(f"expected {what}, got {type(v).__name__ if not isinstance(v, dict) else 'an object'}",
                              field=key)
    return v


def number(data: Mapping, key: str, default: float, lo: float, hi: float, integer: bool = False) -> Any:
    v = data.get(key, default)
    if v is None:
        v = default
    if isinstance(v, bool) or not isinstance(v, int | float) or (integer and not float(v).is_integer()):
        kind = "an integer" if integer else "a number"
        raise ValidationError(f"expected {kind} between {lo} and {hi}, got {json.dumps(v, ensure_ascii=False)[:40]}",
                              field=key)
    if not lo <= v <= hi:
        raise ValidationError(f"expected a value between {lo} and {hi}, got {v}", field=key)
    return int(v) if integer else float(v)


def choice(data: Mapping, key: str, choices: tuple[str, ...], default: str | None) -> str | None:
    v = data.get(key, default)
    if v is None:
        return default
    if v not in choices:
        raise ValidationError(f"expected one of {', '.join(choices)}, got {json.dumps(v, ensure_ascii=False)[:40]}",
                              field=key)
    return v


def visible(text: str) -> bool:
    """True when the text has a character a reader can see (not only spaces or zero-width marks)."""
    return any(not c.isspace() and unicodedata.category(c) not in ("Cf", "Cc", "Zs") for c in text)


def tag_text(tag: str, max_chars: int) -> str:
    """A tag as stored: :func:`~ombre_brain.text.clean`, then NFKC (a tag is a label compared with others, so
    ａｉ_favorite and ai_favorite are one tag), stripped; one with nothing visible, too long or with a NUL is
    refused."""
    t = unicodedata.normalize("NFKC", clean(tag)).strip()
    if not visible(t) or len(t) > max_chars or "\x00" in t:
        raise ValidationError(f"each tag must be 1-{max_chars} visible characters, got {tag!r}", field="tags")
    return t


def text_field(data: Mapping, key: str, max_chars: int, required: bool = False) -> str | None:
    v = data.get(key)
    if v is None:
        if required:
            raise ValidationError("is required", field=key)
        return None
    if not isinstance(v, str):
        raise ValidationError(f"expected a string, got {type(v).__name__}", field=key)
    v = clean(v)  # stored without zero-width characters, bidi controls or a BOM (text.clean)
    if required and not visible(v):
        raise ValidationError("must not be empty (or only spaces and invisible characters)", field=key)
    if len(v) > max_chars:
        raise ValidationError(f"is {len(v)} characters; the limit is {max_chars}", field=key)
    if "\x00" in v:
        raise ValidationError("contains a NUL character", field=key)
    return v


__all__ = [
    "BOOLEAN_FORMS", "MAX_AUTHOR_CHARS", "MAX_COMMENT_CHARS", "MAX_SUMMARY_CHARS", "choice", "flag", "list_field",
    "number", "parse_bool", "tag_text", "text_field", "validate_id", "validate_space", "visible",
]
