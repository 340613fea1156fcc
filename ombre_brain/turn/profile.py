"""The profile stage: who the user is and how to be with them, every turn, within its own budget (design §24).

Stable facts and relationship lessons are what a companion should simply know: gating each of them on whether this
message's words prove it (admission) told the model nothing most of the time. So they are not gated per question:
the space's current lines (``profile/``: one short line each, superseded values left out) all go into the stable
Profile section while they fit ``gateway.budgets.profile``; when a lived-in store outgrows it, the turn's own search
(the candidates it already ranked for this message and conversation) says which matter now, beside importance,
recency and how often each was said again or recalled. The stage runs after admission and before the gates, so the
gates can keep a line the profile shows out of Recalled Memory (``shown_in_profile``): said once, not twice.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..profile.book import Book, Selection
from ..recall_types import GateResult, Item
from .gate_table import GATES

SECTION = "profile"
SIMILAR_RANKS = 20  # candidates below this rank say nothing about what matters now


@dataclass
class ProfileView:
    """One turn's profile: the book it read, the selection it made, and the items it shows."""

    book: Book
    selection: Selection
    items: list[Item]

    moved: dict[str, str] = field(default_factory=dict)  # id -> the section that shows it whole instead

    @property
    def shown(self) -> frozenset[str]:
        """The ids whose line the profile shows, with their twins (the same line, said once)."""
        ids = frozenset(i.bucket_id for i in self.items if i.bucket_id)
        return ids | frozenset(t for t, kept in self.book.twins.items() if kept in ids)

    def after_gates(self, elsewhere: Mapping[str, str], answers: Sequence[str],
                    related: Sequence[str] = ()) -> ProfileView:
        """The view once the gates and the side sections have judged the turn: a line another section shows whole
        (``elsewhere``: id -> section: a direct hit, an episode diffusion or Recent Context took) is taken out
        (``in_<section>``); a line that answers the turn's lookup says so (``extra.answers``: the turn says no UNKNOWN
        beside it), and one diffusion reached from a direct hit too (``extra.related``)."""
        twins = self.book.twins
        where = {b: sec for b, sec in elsewhere.items() if b in self.shown}
        where |= {twins[t]: w for t, w in where.items() if t in twins}  # its twin shown whole: not said twice
        gone = set(where)
        said = {twins.get(b, b) for b in answers} - gone
        near = {twins.get(b, b) for b in related} - gone
        if not gone and not said and not near:
            return self

        def marked(i: Item) -> Item:
            extra = {**i.extra, **({"answers": True} if i.bucket_id in said else {}),
                     **({"related": True} if i.bucket_id in near else {})}
            return dataclasses.replace(i, extra=extra) if extra != i.extra else i

        items = [marked(i) for i in self.items if i.bucket_id not in gone]
        return ProfileView(self.book, self.selection, items, {**self.moved, **where})

    def to_dict(self) -> dict:
        """Every entry with its verdict, for the debug pages: serialised from this very selection."""
        out = []
        for bid, v in self.selection.verdicts().items():
            e = self.book.entries[bid]
            row = {**e.to_dict(), "allowed": v.allowed, "reason": v.reason, **v.detail()}
            if bid in self.moved:
                row.update(allowed=False, reason=f"in_{self.moved[bid]}", section=self.moved[bid])
            out.append(row)
        out.sort(key=lambda r: (not r["allowed"], -(r.get("score") or 0.0), r["at"]))
        shown = [i.bucket_id for i in self.items]
        return {"shown": shown, "budget": self.selection.budget,
                "tokens": sum(self.book.entries[b].tokens for b in shown),
                "chose": self.selection.scores is not None, "entries": out,
                "about": self.selection.about.to_dict() if self.selection.about is not None else None}


def profile_stage(ctx, candidates) -> ProfileView | None:
    """This turn's profile (None when it is off or the space holds nothing yet)."""
    cfg = ctx.cfg
    budgets = cfg.gateway.budgets
    cache = ctx.parts.profile
    if cache is None or budgets.profile <= 0 or not ctx.store.known_space(ctx.space):
        return None
    book = cache.book(ctx.space, cfg, ctx.store.change_head(ctx.space))
    if not book.entries:
        return None
    budget = budgets.profile_cjk if book.cjk and budgets.profile_cjk is not None else budgets.profile
    query = ctx.plan.query or ctx.plan.normalized
    plan = ctx.plan
    sel = book.select(cfg.gateway.profile, budget, ctx.state.now, similarity(candidates),
                      about=lambda: cache.message_frame(cfg, book, query, ctx.store.tokens(query)) if query else None,
                      history=plan.context_mode == "memory_lookup" or plan.asks)
    # what a question about the past asks for first, then the current lines
    items = [line_item(book, sel, bid, history_mark=cfg.gateway.profile.history_mark) for bid in sel.earlier]
    items += [line_item(book, sel, bid) for bid in sel.shown]
    ctx.profile_answers.extend(sel.earlier)  # the old value it asked for is shown: no UNKNOWN beside it
    return ProfileView(book, sel, items)


def similarity(candidates) -> dict[str, float]:
    """How strongly this turn's search found each memory, in [0, 1]: its fused score against the best one's."""
    ranked = [c for c in candidates if c.rank < SIMILAR_RANKS]
    top = max((c.fused for c in ranked), default=0.0)
    if top <= 0:
        return {}
    return {c.bucket.id: max(0.0, c.fused / top) for c in ranked}


def line_item(book: Book, sel: Selection, bid: str, history_mark: str | None = None) -> Item:
    """A line's item; a superseded line a question about the past asked for (``history_mark``) says it is history,
    and names what replaced it (``extra.superseded_by``), as a superseded memory recalled anywhere does."""
    e = book.entries[bid]
    v = sel.verdict(bid)
    gate = GATES.build(profile=GateResult(True, v.reason, v.detail() or None)).decide("injected", SECTION, v.reason)
    extra = {"hint": e.hint}
    if history_mark is not None:
        extra |= {"superseded_by": v.superseded_by, "supersede_rule": v.rule}
    return Item(bid, None, "profile_line", (history_mark or "") + e.line, e.layer.layer if e.layer else None,
                e.layer.to_dict() if e.layer else None, gate.to_dict(), rank_score=v.score or 0.0, extra=extra)


__all__ = ["SECTION", "ProfileView", "profile_stage"]
