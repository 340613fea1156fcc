"""Token estimates and section budgets (design §7).

Every section has its own budget and the dynamic sections share a total. Trimming never
reorders anything: items claim room in rank order, and whatever no longer fits is trimmed and
recorded, so the gateway can report each trim as a suppression with its reason. A direct hit
is cut down to its matched moment before it is ever dropped.

Pure: sections in, sections and trim records out.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from ..config import Budgets
from ..recall_types import Item, SectionOut
from ..text import WIDE
from .render import DIRECT_SHAPES, ELLIPSIS

__all__ = ["STABLE_SECTIONS", "apply_budgets", "estimate_tokens", "item_tokens", "truncate_to_tokens"]

STABLE_SECTIONS = ("core_memory", "profile", "facts")
"""Sections with their own budgets that do not count toward ``budgets.total``."""

_CJK = WIDE  # CJK scripts and CJK/fullwidth punctuation: about one token each
_TOKEN_RE = re.compile(
    rf"(?P<cjk>[{_CJK}])"
    rf"|(?P<word>(?:(?![{_CJK}])[^\W\d_])+(?:['’](?:(?![{_CJK}])[^\W\d_])+)*)"
    r"|(?P<num>\d+(?:[.,:]\d+)*)"
    rf"|(?P<sym>(?:(?![{_CJK}])[^\s\w]|_)+)"
    r"|(?P<other>\S)"
)


def estimate_tokens(text: str) -> int:
    """About what a BPE tokenizer would count, without one (design §7).

    One per CJK character (ideographs, kana, hangul, CJK and fullwidth punctuation), 1.3 per
    Latin word rounded up over the text, one per digit group (``2026``, ``3.5``) and one per
    run of other symbols; whitespace is free. The empty string is 0.
    """
    cjk = words = other = 0
    for m in _TOKEN_RE.finditer(text):
        kind = m.lastgroup
        if kind == "cjk":
            cjk += 1
        elif kind == "word":
            words += 1
        else:
            other += 1
    return cjk + (13 * words + 9) // 10 + other


def item_tokens(item: Item) -> int:
    """What an item costs against a budget: the estimate of its text."""
    return estimate_tokens(item.text)


def truncate_to_tokens(text: str, limit: int) -> str | None:
    """The longest prefix of ``text`` plus an ellipsis that fits in ``limit`` tokens (None if none does)."""
    if estimate_tokens(text) <= limit:
        return text
    if estimate_tokens(ELLIPSIS) > limit:
        return None
    lo, hi = 0, len(text)
    while lo < hi:  # the estimate is not strictly monotone in the prefix, so keep lo always valid
        mid = (lo + hi + 1) // 2
        if estimate_tokens(text[:mid].rstrip() + ELLIPSIS) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo].rstrip() + ELLIPSIS


def _record(item: Item, section: str, reason: str, tokens: int) -> dict:
    return {"bucket_id": item.bucket_id, "section": section, "reason": reason, "tokens": tokens}


class _Costs(dict):
    """Each text's estimate, counted once per :func:`apply_budgets` call: an item is weighed in its section and again
    in the total, before and after it claims room (four estimates of the same text a turn, 0.5 ms at 40 items).
    Kept for one call only, so it never outlives the turn's texts (a purge has nothing to empty)."""

    def __missing__(self, text: str) -> int:
        n = self[text] = estimate_tokens(text)
        return n


def _fit(item: Item, room: int, *, alone: bool, cost: _Costs) -> tuple[Item | None, str | None]:
    """The item as it fits in ``room`` tokens: whole, cut to its moment, truncated, or None.

    Only a direct hit is ever cut; it is hard-truncated only when it stands ``alone`` (nothing
    of higher rank took room), so a single oversized hit is shortened rather than dropped.
    """
    if cost[item.text] <= room:
        return item, None
    if item.shape not in DIRECT_SHAPES:
        return None, None
    moment = item.extra.get("moment_text")
    if isinstance(moment, str) and moment.strip() and cost[moment] <= room:
        return dataclasses.replace(item, text=moment, extra={**item.extra, "budget_cut": "moment"}), "moment"
    if alone:
        base = moment if isinstance(moment, str) and moment.strip() else item.text
        cut = truncate_to_tokens(base, room)
        if cut is not None and cut.strip(ELLIPSIS).strip():
            return dataclasses.replace(item, text=cut, extra={**item.extra, "budget_cut": "truncated"}), "truncated"
    return None, None


def _by_rank(items: Sequence[Item]) -> list[int]:
    """Positions in the order items claim room: highest rank_score first, earlier first on ties."""
    return sorted(range(len(items)), key=lambda i: (-items[i].rank_score, i))


def _claim(items: list[Item], room: int, section: str, reason: str, *, allow_alone: bool,
           records: list[dict], cost: _Costs) -> tuple[list[Item | None], int]:
    """Let items claim ``room`` in rank order; returns the kept items (None where trimmed) and room left."""
    kept: list[Item | None] = list(items)
    any_kept = False
    for i in _by_rank(items):
        item = items[i]
        before = cost[item.text]
        fitted, how = _fit(item, room, alone=allow_alone and not any_kept, cost=cost)
        if fitted is None:
            kept[i] = None
            records.append(_record(item, section, reason, before))
            continue
        after = cost[fitted.text]
        if how is not None:
            records.append(_record(item, section, "budget_cut_to_moment", before - after))
        kept[i] = fitted
        room -= after
        any_kept = True
    return kept, room


def apply_budgets(sections: Sequence[SectionOut], budgets: Budgets, *,
                  order: Sequence[str]) -> tuple[list[SectionOut], list[dict]]:
    """Fit sections into their budgets, then the dynamic sections into ``budgets.total``.

    1. Per section (a key without a field in Budgets has no section limit; 0 turns a
       section off): items claim room in rank order. An item that does not fit is
       trimmed (``budget_section``), except that a direct hit is first cut to its matched
       moment (``Item.extra["moment_text"]``), and a direct hit that would be the
       section's first item is hard-truncated with an ellipsis rather than dropped
       (both ``budget_cut_to_moment``).
    2. The total: dynamic sections claim the shared room in ``order`` (highest priority
       first; keys missing from ``order`` come last, as given), items in rank order, so
       the trimming falls on the end of the order. Misfits are ``budget_total``, with the
       same cut-to-moment rules. Stable sections (core_memory, facts) do not count.

    Section and item order are kept; sections left empty are dropped. Each record is
    ``{bucket_id, section, reason, tokens}``, where tokens is what the trim removed.
    """
    records: list[dict] = []
    cost = _Costs()
    fitted: dict[int, list[Item | None]] = {}
    for si, sec in enumerate(sections):
        limit = getattr(budgets, sec.key, None) if sec.key != "total" else None
        if limit is None:
            fitted[si] = list(sec.items)
            continue
        fitted[si], _ = _claim(list(sec.items), int(limit), sec.key, "budget_section", allow_alone=True,
                               records=records, cost=cost)

    rank_of = {k: i for i, k in enumerate(order)}
    dynamic = [si for si, sec in enumerate(sections) if sec.key not in STABLE_SECTIONS]
    dynamic.sort(key=lambda si: (rank_of.get(sections[si].key, len(rank_of)), si))
    room = budgets.total
    for si in dynamic:
        present = [it for it in fitted[si] if it is not None]
        kept, room = _claim(present, room, sections[si].key, "budget_total", allow_alone=True, records=records,
                              cost=cost)
        fitted[si] = kept

    out = []
    for si, sec in enumerate(sections):
        items = tuple(it for it in fitted[si] if it is not None)
        if items:
            out.append(dataclasses.replace(sec, items=items))
    return out, records
