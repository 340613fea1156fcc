"""The profile of one space: its lines, which are current, and which a turn shows (pure).

A :class:`Book` is built from the space's stable memories (:class:`Entry`, read by ``profile/cache.py`` once per
change of the space): each entry's line and frame, which entries a newer one superseded (``profile/frames.py``), and
which may never be shown (``dont_surface``, an anchor, a memory tagged sensitive). :meth:`Book.select` is the per-turn
half: when the current lines fit the budget they are all shown; when they do not, each is scored from what is cheap
and already known (the turn's search, importance, recency, restatements, recalls) and the best fill the budget. It
runs on arrays, so a store with thousands of stable memories costs a turn a fraction of a millisecond.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from ..config.profile import ProfileConfig
from ..memory_layers import EPISODE_ROLE_HINTS
from ..text import is_cjk_text
from ..turn.budget import estimate_tokens
from .frames import OTHER, SELF, Frame, Line, supersessions

SHOWN = "profile_line"
FITS = "profile_fits"
EARLIER = "profile_earlier"
PAST = "profile_episode_past"
HISTORY_FOUND = 0.9  # a superseded line a question about the past did not name by its frame: the search's best only
GENERIC = frozenset({"name"})  # "叫啥来着", "what's … called" asks a name of anything: of the user's own lines, no one


@dataclass(frozen=True)
class Entry:
    """One stable memory as the profile sees it."""

    id: str
    hint: str           # its writer hint (memory_layer): stable_boundary, relationship_lesson, …
    line: str           # what the profile shows (profile/lines.py)
    tokens: int         # the line's size in the gateway's tokens
    at: str             # created, ISO
    active: str         # last active, ISO
    importance: int
    restated: int       # claims beyond the first: the user said it again
    frame: Frame
    never: str | None = None  # why it may never be in the profile (a reason code), or None
    recalled: int = 0   # sessions that recalled it into a dynamic section
    layer: Any = field(default=None, compare=False)  # its LayerDecision (layer_debug of the line), decided when read

    def to_dict(self) -> dict:
        return {"id": self.id, "hint": self.hint, "line": self.line, "tokens": self.tokens, "at": self.at,
                "importance": self.importance, "restated": self.restated, "recalled": self.recalled,
                "frame": self.frame.to_dict(), "never": self.never}


@dataclass(frozen=True)
class Verdict:
    """Why one entry is in or out of this turn's profile."""

    allowed: bool
    reason: str           # profile_line | profile_budget_cut | profile_superseded | profile_same_line | a never-in
    score: float | None = None
    superseded_by: str | None = None
    rule: str | None = None

    def detail(self) -> dict:
        d: dict = {}
        if self.score is not None:
            d["score"] = round(self.score, 4)
        if self.superseded_by is not None:
            d.update(superseded_by=self.superseded_by, rule=self.rule)
        return d


@dataclass
class Book:
    """A space's profile at one change number: every entry, the current ones in display order, the superseded."""

    entries: dict[str, Entry]
    superseded: dict[str, tuple[str, str]]     # old id -> (new id, rule)
    current: list[str]                          # eligible ids, in display order (facts, then lessons; oldest first)
    names: dict[str, str] = field(default_factory=dict)  # the space's name bindings (可乐 → dog): a message's frame
    twins: dict[str, str] = field(default_factory=dict)  # id -> the entry whose line is its very words (shown once)
    cjk: bool = False  # most current lines are CJK (its budget is gateway.budgets.profile_cjk)
    _arrays: dict = field(default_factory=dict, repr=False)

    @classmethod
    def build(cls, entries: Sequence[Entry], cfg: ProfileConfig, linked: Mapping[str, str] | None = None,
              learned: Mapping[str, tuple[str, str]] | None = None, told: Sequence[Line] = ()) -> Book:
        """``linked``: old id -> new id of the writer's own ``old_version`` edges (an update it linked); ``learned``:
        the changed-fact model's supersessions (profile/supersede.py), else the frame rules decide, with ``told``:
        episodes, read for the endings they tell (``supersessions(…, told=)``)."""
        by_id = {e.id: e for e in entries}
        if learned is not None:
            sup = dict(learned)
        else:
            lines = [Line(e.id, e.at, e.frame, "lesson" if e.hint == "relationship_lesson" else "fact")
                     for e in entries if e.never is None]
            sup = supersessions([*lines, *told], cfg.endings, cfg.exclusive_holders, departures=cfg.departures,
                                told=[t.id for t in told])
        for old, new in (linked or {}).items():
            if old in by_id and new in by_id and old not in sup:
                sup[old] = (new, "linked_update")
        current = [e for e in entries if e.never is None and e.id not in sup]
        current.sort(key=lambda e: (e.hint == "relationship_lesson", e.at, e.id))
        # one message kept on both sides (a fact about the user and a lesson) has one line: it is said once, as the
        # lesson (how to be with them is the weightier reading), else as the oldest
        first: dict[str, str] = {}
        for e in sorted(current, key=lambda e: (e.hint != "relationship_lesson", e.at, e.id)):
            first.setdefault(" ".join(e.line.split()).casefold(), e.id)
        twins = {e.id: first[k] for e in current if first[k := " ".join(e.line.split()).casefold()] != e.id}
        shown = [e for e in current if e.id not in twins]
        cjk = 2 * sum(is_cjk_text(e.line) for e in shown) > len(shown)
        return cls(by_id, sup, [e.id for e in shown], twins=twins, cjk=cjk)

    def current_version(self, bid: str) -> str:
        """The line now standing for ``bid``: itself, or the newest line of its supersession chain. A search that
        found the old version of a fact ("and my cat Mothball…" for "what's my cat's name") found the fact: the line
        that replaced it ("Mothball turned fifteen yesterday") is what the profile should weigh."""
        seen = {bid}
        while bid in self.superseded:
            bid = self.superseded[bid][0]
            if bid in seen:
                break
            seen.add(bid)
        return self.twins.get(bid, bid)

    def arrays(self) -> dict:
        """The current entries as arrays, made once per book (the per-turn scoring is vector arithmetic)."""
        if not self._arrays:
            es = [self.entries[i] for i in self.current]
            self._arrays = {
                "index": {e.id: n for n, e in enumerate(es)},
                "importance": np.array([e.importance / 10.0 for e in es], dtype=np.float64),
                "active": np.array([_ts(e.active) for e in es], dtype=np.float64),
                "restated": np.array([1.0 - 1.0 / (1 + e.restated) for e in es], dtype=np.float64),
                "recalled": np.array([1.0 - 1.0 / (1 + e.recalled) for e in es], dtype=np.float64),
                "lesson": np.array([e.hint == "relationship_lesson" for e in es], dtype=np.float64),
                "care": np.array([e.frame.care for e in es], dtype=np.float64),
                "tokens": np.array([e.tokens for e in es], dtype=np.int64),
                "episode": np.array([e.hint in EPISODE_ROLE_HINTS for e in es], dtype=bool),
                "at": np.array([_ts(e.at) for e in es], dtype=np.float64),
                "holder": [e.frame.holder for e in es],
                "attributes": [e.frame.attributes for e in es],
            }
        return self._arrays

    def select(self, cfg: ProfileConfig, budget: int, now: datetime, similarity: Mapping[str, float],
               about: Callable[[], Frame | None] | None = None, history: bool = False) -> Selection:
        """This turn's lines. All current lines when they fit ``budget`` tokens and ``max_lines``; else the best by
        score, in display order. ``similarity``: entry id -> [0, 1], how strongly this turn's search found it (an
        old version found counts for the line that replaced it: :meth:`current_version`); ``about``: the message's
        frame, read only when the turn must choose (whose it is about, what it asks: "what's my cat's name again" is
        about the cat, and "Mothball turned fifteen" is a line about her, whatever its words). ``history``: the
        message is a question; when its frame asks for an old value (``past``), the superseded lines it is about come
        first (:meth:`earlier`), within the same budget."""
        a = self.arrays()
        n = len(self.current)
        if n == 0 or budget <= 0 or cfg.max_lines <= 0:
            return Selection(self, [], None, budget)
        past = self.past(cfg, now)
        frame = about() if about is not None and history else None
        earlier = self.earlier(cfg, frame, similarity) if frame is not None and frame.past else []
        if earlier:
            mark = estimate_tokens(cfg.history_mark)  # each is said with its mark
            budget_left = budget - sum(self.entries[b].tokens + mark for b in earlier)
            chosen = self.select(cfg, budget_left, now, similarity, (lambda: frame) if about is not None else None)
            return Selection(self, chosen.shown, chosen.scores, budget, chosen.about or frame, earlier, past)
        live = ~past
        if int(live.sum()) <= cfg.max_lines and int(a["tokens"][live].sum()) <= budget:
            return Selection(self, [b for b, ok in zip(self.current, live, strict=True) if ok], None, budget,
                             past=past)
        w = cfg.weights
        age_days = np.maximum(0.0, (now.timestamp() - a["active"]) / 86400.0)
        score = (w.importance * a["importance"] + w.recency * np.exp(-age_days / cfg.recency_days)
                 + w.restated * a["restated"] + w.recalled * a["recalled"] + w.lesson * a["lesson"]
                 + w.care * a["care"])
        found = np.zeros(n, dtype=np.float64)
        for bid, s in similarity.items():
            k = a["index"].get(self.current_version(bid))
            if k is not None:
                found[k] = max(found[k], s)
        score += w.similarity * found
        frame = frame or (about() if about is not None else None)
        if frame is not None and frame.holder != OTHER and (frame.holder != SELF or frame.attributes):
            for k, (holder, attrs) in enumerate(zip(a["holder"], a["attributes"], strict=True)):
                if holder == frame.holder:
                    score[k] += (w.holder if frame.holder != SELF else 0.0) + (
                        w.attribute if attrs & frame.attributes else 0.0)
        order = np.argsort(-score, kind="stable")
        chosen, used = [], 0
        for k in order:
            if past[k]:
                continue
            t = int(a["tokens"][k])
            if used + t > budget:
                continue
            chosen.append(int(k))
            used += t
            if len(chosen) >= cfg.max_lines:
                break
        keep = sorted(chosen)  # display order is the book's
        return Selection(self, [self.current[k] for k in keep], score, budget, frame, past=past)

    def past(self, cfg: ProfileConfig, now: datetime) -> np.ndarray:
        """Per current entry: an episode the profile holds (a persona whose ``hints`` take ``process_event``) told
        longer ago than ``episode_days``. What happened lately is part of who the user is now; a fight with a manager
        in January is not, and once his successor is named it would read as current."""
        a = self.arrays()
        if cfg.episode_days is None or not a["episode"].any():
            return np.zeros(len(self.current), dtype=bool)
        return a["episode"] & (now.timestamp() - a["at"] > cfg.episode_days * 86400.0)

    def earlier(self, cfg: ProfileConfig, frame: Frame, similarity: Mapping[str, float]) -> list[str]:
        """The superseded lines a question about an old value asks for, best first, at most ``history_items``: those
        of the holder it asks about (the user's own only for an attribute it asks: "where did i work before this
        job" is the user's job; "前男友叫啥" is any old line about a partner), or the search's best
        (``HISTORY_FOUND``: "我以前每天要灌多少咖啡来着")."""
        found: dict[str, float] = {}
        for old in self.superseded:
            e = self.entries.get(old)
            if e is None or e.never is not None or cfg.history_items <= 0 or e.hint in EPISODE_ROLE_HINTS:
                continue  # an episode states no value that changed: "i have a phone screen monday" is no old job
            f = e.frame
            named = frame.holder != OTHER and f.holder == frame.holder and (
                frame.holder != SELF or bool((f.attributes & frame.attributes) - GENERIC))
            s = similarity.get(old, 0.0)
            if named or s >= HISTORY_FOUND:
                found[old] = s + named
        return sorted(found, key=lambda b: (-found[b], b))[:cfg.history_items]


@dataclass
class Selection:
    """One turn's profile: the ids shown (in display order) and, read lazily, why each entry is in or out."""

    book: Book
    shown: list[str]
    scores: np.ndarray | None   # per current entry when the turn had to choose; None when all fit
    budget: int
    about: Frame | None = None  # the message's frame the choice read (whose it is about, what it asks)
    earlier: list[str] = field(default_factory=list)  # superseded lines a question about the past asks for (history)
    past: np.ndarray | None = None  # per current entry: an episode older than episode_days (Book.past)

    def __post_init__(self) -> None:
        self._shown_set = frozenset(self.shown)

    def verdict(self, bid: str) -> Verdict:
        book = self.book
        e = book.entries.get(bid)
        if e is None:
            raise KeyError(bid)
        if e.never is not None:
            return Verdict(False, e.never)
        if bid in book.superseded:
            new, rule = book.superseded[bid]
            if bid in self.earlier:
                return Verdict(True, EARLIER, superseded_by=new, rule=rule)
            return Verdict(False, "profile_superseded", superseded_by=new, rule=rule)
        if bid in book.twins:
            return Verdict(False, "profile_same_line", superseded_by=book.twins[bid], rule="same_line")
        score, k = None, book.arrays()["index"][bid]
        if self.past is not None and self.past[k]:
            return Verdict(False, PAST)
        if self.scores is not None:
            score = float(self.scores[k])
        if bid in self._shown_set:
            return Verdict(True, SHOWN if self.scores is not None else FITS, score)
        return Verdict(False, "profile_budget_cut", score)

    def verdicts(self) -> dict[str, Verdict]:
        """Every entry's verdict (for the debug pages; a turn never needs them all)."""
        return {bid: self.verdict(bid) for bid in self.book.entries}


def _ts(iso: str) -> float:
    try:
        return datetime.fromisoformat(iso).timestamp()
    except (TypeError, ValueError):
        return 0.0


__all__ = ["EARLIER", "FITS", "PAST", "SHOWN", "Book", "Entry", "Selection", "Verdict"]
