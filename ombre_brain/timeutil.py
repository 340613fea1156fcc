"""The one time parser: ISO-8601 with an offset, plus the scenario offsets and a lenient read.

Stored times keep their own offsets; a naive time is ambiguous across timezones, so input
without one is refused (:func:`parse_time`) or given an explicit zone by the caller
(:func:`coerce_time`, for imports of files written without zones). Pure: no I/O.

Every time that comes in lies between the years :data:`MIN_YEAR` and :data:`MAX_YEAR`. The
pipeline subtracts windows from ``now`` (72 hours of recent context, session expiry, dream
windows; a configured window may reach 100,000 days, about 274 years) and shifts by offsets of
up to a day; Python's datetime stops at the years 1 and 9999, so a ``now`` in the first hours of
year 1 overflowed deep inside a turn. Checking here, once, turns that into a 400 at the door.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta, timezone, tzinfo
from typing import Any

from .errors import ValidationError

__all__ = ["MAX_YEAR", "MIN_YEAR", "coerce_time", "in_range", "iso", "now_utc", "parse_iso", "parse_time",
           "relative_time"]

_OFFSET_RE = re.compile(r"([+-]?)(\d+(?:\.\d+)?)([smhd])")
MIN_YEAR, MAX_YEAR = 1000, 9000  # room on either side for every window the config allows
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def now_utc() -> datetime:
    return datetime.now(timezone.utc)


def iso(dt: datetime | None) -> str | None:
    return dt.isoformat() if dt is not None else None


def _from_string(value: str) -> datetime:
    return datetime.fromisoformat(value.strip().replace("Z", "+00:00"))


def parse_time(value: Any, field_name: str) -> datetime:
    """ISO-8601 with an explicit offset (a datetime passes through); anything else is a ValidationError."""
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, str):
        try:
            dt = _from_string(value)
        except ValueError:
            raise ValidationError(
                f"expected an ISO-8601 time with offset like 2026-11-30T20:00:00+08:00, got {value!r:.80}",
                field=field_name,
            ) from None
    else:
        raise ValidationError(f"expected an ISO-8601 time string, got {type(value).__name__}", field=field_name)
    if dt.tzinfo is None:
        raise ValidationError(f"time {value!s:.80} has no UTC offset; add one like +08:00 or Z", field=field_name)
    if not in_range(dt):
        raise ValidationError(f"time {value!s:.80} is outside the years {MIN_YEAR}-{MAX_YEAR} this store accepts",
                              field=field_name)
    return dt


def in_range(dt: datetime) -> bool:
    """True for times the pipeline can do arithmetic on (years MIN_YEAR to MAX_YEAR)."""
    return MIN_YEAR <= dt.year <= MAX_YEAR


def parse_iso(value: str | None) -> datetime | None:
    """A stored time, or None when it is empty or unreadable (stored data is read leniently)."""
    if not value:
        return None
    try:
        return _from_string(value)
    except ValueError:
        return None


def coerce_time(value: Any, naive_tz: tzinfo) -> datetime | None:
    """A datetime, date or ISO string as an aware datetime; a naive one gets ``naive_tz``.

    None or "" is None; anything unreadable raises ValueError naming what was expected.
    """
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, date):
        dt = datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        try:
            dt = _from_string(value)
        except ValueError:
            raise ValueError(f"expected an ISO-8601 time like 2026-11-30T20:00:00+08:00, got {value!r:.80}") from None
    else:
        raise ValueError(f"expected a time, got {type(value).__name__}")
    if not in_range(dt):
        raise ValueError(f"time {value!s:.80} is outside the years {MIN_YEAR}-{MAX_YEAR} this store accepts")
    return dt if dt.tzinfo is not None else dt.replace(tzinfo=naive_tz)


def relative_time(value: str, start: datetime) -> datetime:
    """Scenario times: an offset like -72h / +30m / 2d from ``start``, or an absolute ISO time."""
    m = _OFFSET_RE.fullmatch(value.strip())
    if m:
        sign = -1 if m.group(1) == "-" else 1
        return start + timedelta(seconds=sign * float(m.group(2)) * _UNITS[m.group(3)])
    return parse_time(value, "time")
