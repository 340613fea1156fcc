"""Sections: ordered assembly, budgets and the rendered prompt block (design §7, §11).

Stable context (Core Memory, facts) first and outside the dynamic budget; then the dynamic
sections in their fixed order. Every trim becomes a suppression with its reason, so the
TURN explains what the budget cost as well as what the gates kept out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ..config import Config
from ..recall_types import Item, QueryPlan, SectionOut, SessionState, Suppressed
from .budget import apply_budgets, estimate_tokens
from .render import render_markdown

STABLE_ORDER = ("core_memory", "profile", "facts")
DYNAMIC_ORDER = ("recent_context", "context_mode", "recalled_memory", "diffused_memory", "persona_state",
                 "relationship_weather", "favorite_memory", "dream")
TITLES = {
    "core_memory": "Core Memory", "profile": "Profile", "facts": "Confirmed Facts", "recent_context": "Recent Context",
    "context_mode": "Context Mode", "recalled_memory": "Recalled Memory", "diffused_memory": "Diffused Memory",
    "persona_state": "Persona State", "relationship_weather": "Relationship Weather",
    "favorite_memory": "{ai_name} Favorite Memory", "dream": "Dream",
}


@dataclasses.dataclass
class Turn:
    """One turn's answer; ``to_dict()`` is the §11 TURN object."""

    query: str
    session: str
    at: str
    space: str
    plan: QueryPlan
    stable: list[SectionOut]
    sections: list[SectionOut]
    suppressed: list[Suppressed]
    rendered: str
    tokens: int
    timings: dict = dataclasses.field(default_factory=dict)
    debug: dict = dataclasses.field(default_factory=dict)
    space_known: bool = True  # False: nothing was ever written to the space (not an error: it just holds nothing)

    def to_dict(self, *, timings: bool = False) -> dict:
        d: dict[str, Any] = {
            "query": self.query, "session": self.session, "at": self.at, "space": self.space,
            "space_known": self.space_known, "plan": self.plan.to_dict(),
            "stable": [s.to_dict() for s in self.stable], "sections": [s.to_dict() for s in self.sections],
            "suppressed": [s.to_dict() for s in self.suppressed], "rendered": self.rendered, "tokens": self.tokens,
        }
        if timings:
            d["timings_ms"] = dict(self.timings)
        return d

    def section(self, key: str) -> SectionOut | None:
        for s in (*self.stable, *self.sections):
            if s.key == key:
                return s
        return None

    def explain(self, bucket_id: str) -> dict | None:
        """The decision this turn made about a bucket, read from the turn itself (never recomputed)."""
        for sec in (*self.stable, *self.sections):
            for it in sec.items:
                if it.bucket_id == bucket_id:
                    return {"layer_debug": it.layer_debug, "runtime_gate": it.runtime_gate, "section": sec.key,
                            "shape": it.shape}
        for s in self.suppressed:
            if s.bucket_id == bucket_id:
                return {"layer_debug": s.layer_debug, "runtime_gate": s.runtime_gate, "section": None, "shape": None}
        traced = self.debug.get("trace", {}).get(bucket_id)
        if traced is not None:
            return {**traced, "section": None, "shape": None}
        return None

    def item_ids(self, key: str | None = None) -> list[str]:
        return [i.bucket_id for s in (*self.stable, *self.sections) if key in (None, s.key) for i in s.items
                if i.bucket_id]


class _Names(dict):
    """``str.format_map`` names for section titles: a persona's title naming something else keeps its braces."""

    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def _note(text: str, key: str) -> Item:
    return Item(None, None, "note", text, None, None, None, rank_score=1e9, extra={"note": key})


def _answers_lookup(item: Item) -> bool:
    """A core memory shown because it answers the turn's explicit lookup (turn/side.py)."""
    return (item.runtime_gate or {}).get("reason") == "core_memory_answers_lookup"


def assemble(cfg: Config, *, plan: QueryPlan, state: SessionState, query: str, core: list[Item], facts: list[Item],
             items: dict[str, list[Item]], suppressed: list[Suppressed], unknown: bool, timings: dict,
             profile: Sequence[Item] = (), profile_budget: int | None = None) -> Turn:
    gw = cfg.gateway
    names = {"ai_name": cfg.identity.ai_name, "user_name": cfg.identity.user_name}
    title = {k: v.format(**names) for k, v in TITLES.items()}
    title["profile"] = gw.profile.title.format_map(_Names(names))
    dyn: dict[str, list[Item]] = {k: list(items.get(k, [])) for k in DYNAMIC_ORDER}
    if unknown:
        dyn["recalled_memory"] = [_note(gw.unknown_line_with_profile if profile else gw.unknown_line, "unknown")]
    has_memory = any(dyn[k] for k in DYNAMIC_ORDER)
    mode_line = gw.context_mode_lines.get(plan.context_mode)
    if mode_line and (has_memory or not plan.skip_reason):
        dyn["context_mode"] = [_note(mode_line, "context_mode")]
    if gw.persona_state.strip():
        dyn["persona_state"] = [_note(gw.persona_state.strip(), "persona_state")]

    stable = [SectionOut(k, title[k], tuple(v)) for k, v in (("core_memory", core), ("profile", profile),
                                                             ("facts", facts)) if v]
    dynamic = [SectionOut(k, title[k], tuple(dyn[k])) for k in DYNAMIC_ORDER if dyn[k]]
    budgets = gw.budgets
    if profile_budget is not None and profile_budget != budgets.profile:  # the one the profile chose by (its script)
        budgets = dataclasses.replace(budgets, profile=profile_budget)
    if budgets.core_memory < budgets.core_memory_lookup and any(_answers_lookup(i) for i in core):
        budgets = dataclasses.replace(budgets, core_memory=budgets.core_memory_lookup)  # only on such a turn
    kept, trims = apply_budgets([*stable, *dynamic], budgets, order=(*STABLE_ORDER, *DYNAMIC_ORDER))
    kept = [s for s in kept if s.items]
    stable = [s for s in kept if s.key in STABLE_ORDER]
    dynamic = [s for s in kept if s.key not in STABLE_ORDER]
    by_id = {i.bucket_id: i for s in (*stable, *dynamic) for i in s.items if i.bucket_id}
    all_items = {i.bucket_id: (sec.key, i) for sec in [SectionOut(k, "", tuple(v)) for k, v in dyn.items()]
                 for i in sec.items if i.bucket_id}
    sup = list(suppressed)
    for tr in trims:
        bid = tr.get("bucket_id")
        if not bid or bid in by_id and tr.get("reason") == "budget_cut_to_moment":
            continue
        if bid in by_id:
            continue
        _sec, item = all_items.get(bid, (tr.get("section"), None))
        gate = dict(item.runtime_gate or {}) if item else {}
        gate.update(decision="suppressed", section=None, reason=tr["reason"])
        sup.append(Suppressed(bid, item.layer if item else "unknown", tr["reason"],
                              item.layer_debug if item else {}, gate))
    rendered = render_markdown(stable, dynamic, cfg.render.framing_line)
    return Turn(query=query, session=state.session, at=state.now.isoformat(), space=state.space, plan=plan,
                stable=stable, sections=dynamic, suppressed=sup, rendered=rendered,
                tokens=estimate_tokens(rendered), timings=timings)
