"""The render stage: each selected bucket becomes one Item of its section, in the shape its layer asks for.

Direct hits get their original, a window around the matched moment or a capsule (design §6),
with their context-only sections riding along; related memory gets a summary or a chain
bundle. The decision each item carries is the one the gates made; here it is only stamped
``injected`` with its section.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..recall_types import GateResult, Item, Suppressed
from . import gates as G
from .context import Decided, Side, TurnContext
from .gate_table import allowed_reason
from .render import (
    DIRECT_SHAPES,
    choose_shape,
    render_capsule,
    render_chain_bundle,
    render_favorite_card,
    render_original,
    render_recent_compact,
    render_summary,
    render_weather,
    render_window,
)

ITEM_SECTIONS = ("recent_context", "recalled_memory", "diffused_memory", "relationship_weather", "favorite_memory",
                 "dream")


def item_of(d: Decided, shape: str, text: str, section: str, extra: dict | None = None,
            moment_id: str | None = None, reason: str | None = None, ctx: TurnContext | None = None) -> Item:
    """An injected Item carrying the gates' own decision, stamped with its section. A memory a newer one superseded
    (the profile's changed facts, design §24) says so in front of its words: history, never shown as current."""
    gate = d.gate.decide("injected", section, reason or d.gate.reason or allowed_reason(d.gate))
    extra = extra or {}
    newer = ctx.superseded.get(d.bucket.id) if ctx is not None else None
    if newer is not None:
        text = ctx.cfg.gateway.profile.history_mark + text
        extra = {**extra, "superseded_by": newer[0], "supersede_rule": newer[1]}
    return Item(d.bucket.id, moment_id, shape, text, d.layer.layer, d.layer.to_dict(), gate.to_dict(),
                rank_score=d.score, extra=extra)


def render_items(ctx: TurnContext, direct: list[Decided], related: list[Decided], side: Side,
                 suppressed: list[Suppressed]) -> tuple[dict[str, list[Item]], bool]:
    """Items by section, and whether the honest UNKNOWN line answers an unanswered lookup."""
    cfg, plan = ctx.cfg, ctx.plan
    items: dict[str, list[Item]] = {k: [] for k in ITEM_SECTIONS}
    for d in direct:
        sec = "diffused_memory" if d.layer.layer == "archive" else "recalled_memory"
        items[sec].append(render_direct(ctx, d, sec))
    for d in related:
        items["diffused_memory"].append(render_related(ctx, d, direct))
    for d in side.recent:
        if d.bucket.id in ctx.asked_moments:  # asked for again: the part that answers, not the memory's opening
            moment = ctx.asked_moments[d.bucket.id]
            items["recent_context"].append(item_of(d, "asked_window", render_window(d.bucket, moment, cfg.render),
                                                   "recent_context", moment_id=moment.id if moment else None, ctx=ctx))
            continue
        items["recent_context"].append(item_of(d, "recent_compact", render_recent_compact(d.bucket, cfg.render),
                                               "recent_context", ctx=ctx))
    for d in side.weather:
        items["relationship_weather"].append(item_of(d, "weather", render_weather(d.bucket), "relationship_weather"))
    for d in side.favorites:
        items["favorite_memory"].append(item_of(d, "favorite_card", render_favorite_card(d.bucket),
                                                "favorite_memory"))
    items["dream"].extend(side.dream)
    # A candidate kept out only by cooldown was already shown in this conversation: it supports the answer.
    unknown = (not plan.skip_reason and plan.context_mode == "memory_lookup" and not direct
               and not ctx.profile_answers  # the profile shows what the lookup found: it is answered
               and not any(s.reason == "skipped_recent_rounds" for s in suppressed)
               and not items["favorite_memory"]
               and not any((i.runtime_gate or {}).get("reason") == "core_memory_answers_lookup" for i in side.core))
    return items, unknown


def render_direct(ctx: TurnContext, d: Decided, section: str) -> Item:
    c = d.candidate
    assert c is not None
    m = c.best.moment
    rc = ctx.cfg.render
    shape = choose_shape(d.bucket, m, ctx.plan, rc, related=False, chain=False, archive=d.layer.layer == "archive")
    if shape == "bucket_window":
        text = render_window(d.bucket, m, rc)
    elif shape == "bucket_capsule":
        text = render_capsule(d.bucket, m, rc)
    elif shape == "summary":
        text = render_summary(d.bucket, rc)
    else:
        text = render_original(d.bucket)
    extra: dict[str, Any] = {"moment_text": m.text, "score": round(d.score, 4)}
    context = G.ride_along(d.bucket) if shape in DIRECT_SHAPES else []
    if context:  # auxiliary colour beside a reliable direct hit on its parent (recall context gate)
        extra["context"] = [{"section": s.name, "text": s.text} for s in context]
        text = text + "\n" + "\n".join(f"[{s.name}] {s.text}" for s in context)
        d = dataclasses.replace(d, gate=d.gate.with_gate("recall_context", GateResult(True, "beside_reliable_parent")))
    return item_of(d, shape, text, section, extra, moment_id=m.id, ctx=ctx)


def render_related(ctx: TurnContext, d: Decided, direct: list[Decided]) -> Item:
    h = d.diffusion
    assert h is not None
    extra = {"path": [p.to_dict() for p in h.path], "seed_id": h.seed_id, "activation": round(h.activation, 4)}
    if h.reliable_chain and len(h.path) >= 2:
        seed = next((x.bucket for x in direct if x.bucket.id == h.seed_id), None)
        if seed is not None:
            mids = ctx.store.get_many(ctx.space, {p.to_id for p in h.path} | {p.from_id for p in h.path})
            titles = {bid: b.title for bid, b in mids.items()}
            return item_of(d, "chain_bundle", render_chain_bundle(seed, h.path, d.bucket, ctx.cfg.render,
                                                                  titles=titles), "diffused_memory", extra, ctx=ctx)
    return item_of(d, "summary", render_summary(d.bucket, ctx.cfg.render), "diffused_memory", extra, ctx=ctx)


__all__ = ["ITEM_SECTIONS", "item_of", "render_items"]
