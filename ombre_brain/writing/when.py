"""When a remembered thing happens: a time the user states ("下个月", "last Friday"), against the exchange's clock.

``dateparser`` finds and resolves time expressions in Chinese and English offline (``search_dates`` with
``RELATIVE_BASE`` set to the exchange's time), which is better kept than hand rules. Its search is eager, so
its hits are filtered: an English hit must name a time ("last Friday", "tomorrow", "the 16th of June"), not
be a word that happens to spell one ("We", "Sat", "may", "march"); "now" and "today" add nothing to the
exchange's own time; a year before 1900 is a misreading. A number is a quantity, not a date (issue 53): a
range ("每周跑步3-5次", "1-3 cups", "7-8 hours"), a decimal ("1.5公斤"), a bare number ("95分"), a frequency
("a week", "per day"), unless it says it is a date (a year, 月/日/号, a month's name, a slash date "12/24").
A message that looks ahead resolves a bare weekday forward, one that looks back resolves it backward.
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
_RANGE = re.compile(r"\d\s*(?:-|~|～|–|—|到|至)\s*\d")
_YEAR = re.compile(r"(?<!\d)(?:19|20)\d\d(?!\d)")
_SAYS_DATE = re.compile(r"[年月日号號]|星期|礼拜|周[一二三四五六日天]|\d(?:st|nd|rd|th)\b"
                        r"|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\b")
_NUMBER_ONLY = re.compile(r"^[^\w]*[\d\s.,:/\-~～–—]+[^\w]*$")
_FREQUENCY = re.compile(r"^(?:a|an|per|every|each|once a|twice a)\s+(?:day|night|week|weekend|month|year)s?$")
_ZH_DATE = re.compile(r"(?:(\d{4})\s*年)?\s*(\d{1,2})\s*月\s*(\d{1,2})\s*[日号號]")  # dateparser misreads it
_ZH_QUANTITY = re.compile(r"^\d+(?:\.\d+)?\s*(?:分钟?|秒钟?|小时|个?钟头|天|周|个?星期|个?月|年|点)$")
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


def _quantity(text: str) -> bool:
    """A number the parser took for a date: a range, a decimal or a bare number, a frequency, a count of units."""
    if _YEAR.search(text) or _SAYS_DATE.search(text):
        return False
    if _RANGE.search(text) or _FREQUENCY.match(text) or _ZH_QUANTITY.match(text):
        return True
    return bool(_NUMBER_ONLY.match(text)) and "/" not in text and ":" not in text  # "12/24", "8:30" stay


def _zh_date(m: re.Match, base: datetime, prefer: str) -> datetime | None:
    """"3月5日" / "2027年3月5日" as that day (dateparser 1.2 reads "3月5日" as some day in September); without a
    year, the one the message looks towards."""
    year = int(m.group(1)) if m.group(1) else base.year
    try:
        day = datetime(year, int(m.group(2)), int(m.group(3)))
    except ValueError:
        return None
    if not m.group(1) and prefer == "future" and day.date() < base.date():
        day = day.replace(year=year + 1)
    elif not m.group(1) and prefer == "past" and day.date() > base.date():
        day = day.replace(year=year - 1)
    return day


def _kept(found: str) -> bool:
    text = found.strip().lower()
    if _NOTHING_NEW.match(text) or _AGE.search(text) or _quantity(text):
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
        zh = _ZH_DATE.search(words)
        if zh is not None:
            when = _zh_date(zh, base, prefer)
            if when is None:
                continue
        if _kept(words) and 1900 <= when.year <= base.year + 50:
            return when.replace(tzinfo=at.tzinfo)
    return None
