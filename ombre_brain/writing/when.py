"""When a remembered thing happens: a time the user states ("下个月", "last Friday"), against the exchange's clock.

``dateparser`` finds and resolves time expressions in Chinese and English offline (``search_dates`` with
``RELATIVE_BASE`` set to the exchange's time), which is better kept than hand rules. Its search is eager, so
its hits are filtered: an English hit must name a time ("last Friday", "tomorrow", "the 16th of June"), not
be a word that happens to spell one ("We", "Sat", "may", "march"); "now" and "today" add nothing to the
exchange's own time; a year before 1900 is a misreading. A message that looks ahead resolves a bare weekday
forward, one that looks back resolves it backward.
"""

from __future__ import annotations

import logging
import re
import threading
from datetime import datetime

log = logging.getLogger("ombre_brain")

__all__ = ["event_time"]

_TIME_WORDS = re.compile(
    r"\b(today|tonight|tomorrow|yesterday|ago|last|next|this|coming|week|weeks|month|months|year|years|weekend|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|january|february|april|june|july|august|"
    r"september|october|november|december|\d{1,2}(st|nd|rd|th)|\d)\b")
_NOTHING_NEW = re.compile(r"^(now|right now|today|今天|现在|now on)$")
_AGE = re.compile(r"\d+\s*(years?|yrs?)\b(?!\s*ago)|\d+\s*岁")  # "30 years (old)" is an age, not a time
_lock = threading.Lock()
_search = None
_missing = False


def _searcher():
    """dateparser's ``search_dates``, imported on first use (it takes a moment); None where not installed."""
    global _search, _missing
    with _lock:
        if _search is None and not _missing:
            try:
                from dateparser.search import search_dates
            except ImportError:
                _missing = True
                log.warning("dateparser is not installed: stated times are not turned into event times")
                return None
            _search = search_dates
    return _search


def _kept(found: str) -> bool:
    text = found.strip().lower()
    if _NOTHING_NEW.match(text) or _AGE.search(text):
        return False
    if re.search(r"[a-z]", text):
        return _TIME_WORDS.search(text) is not None
    return True


def event_time(text: str, at: datetime, *, looks_ahead: bool = False, looks_back: bool = False) -> datetime | None:
    """The first time stated in ``text``, resolved against ``at`` (its timezone kept); None when none is stated."""
    search = _searcher()
    if search is None or not text.strip():
        return None
    base = at.replace(tzinfo=None)
    prefer = "future" if looks_ahead and not looks_back else "past" if looks_back and not looks_ahead \
        else "current_period"
    try:
        found = search(text, languages=["zh", "en"],
                       settings={"RELATIVE_BASE": base, "PREFER_DATES_FROM": prefer, "RETURN_AS_TIMEZONE_AWARE": False})
    except Exception as exc:  # a parser bug must never fail a write
        log.debug("dateparser failed on a message: %s", exc)
        return None
    for words, when in found or ():
        if _kept(words) and 1900 <= when.year <= base.year + 50:
            return when.replace(tzinfo=at.tzinfo)
    return None
