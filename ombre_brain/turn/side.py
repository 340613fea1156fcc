"""The side sections of a turn: Recent Context, weather, the favorite card, a dream, Core Memory, facts.

Each is read from the store by role (never by decoding the whole space) and passed through its
own gate; an item already taken by a section of higher precedence is not offered again (design §5:
one section per item). The dream engine scores and claims; the dream gate decides. The list each
section reads is decided once per turn (:func:`side_lists`): the same value is announced ahead
and read, so the two cannot drift apart.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from ..buckets import Bucket
from ..facts.select import background_line
from ..memory_layers import EPISODE_ROLE_HINTS, is_favorite
from ..recall_types import GateResult, Item, Suppressed
from ..store.interfaces import ListRead
from . import gates as G
from .budget import estimate_tokens
from .context import Decided, Side, Traced, TurnContext, suppressed
from .gate_registry import GateInput
from .gate_table import GATES, block_reason
from .items import item_of
from .render import render_dream, render_stable_rule

WEATHER = ListRead(role="weather", limit=20)
FAVORITE = ListRead(role="favorite", limit=1000)
CORE = ListRead(role="core", limit=1000)


def side_stage(ctx: TurnContext, direct: list[Decided], related: list[Decided], out: list[Suppressed]) -> Side:
    side = Side()
    taken = {d.bucket.id for d in direct} | {d.bucket.id for d in related}
    side.recent, side.recent_fired = recent(ctx, taken, direct, out)
    taken |= {d.bucket.id for d in side.recent}
    side.weather = weather(ctx, taken)
    taken |= {d.bucket.id for d in side.weather}
    side.favorites = favorites(ctx, taken)
    taken |= {d.bucket.id for d in side.favorites}
    side.dream = dream(ctx, taken)
    side.core = core(ctx, out)
    side.facts = facts(ctx)
    return side


def side_lists(ctx: TurnContext) -> dict[str, ListRead]:
    """The list each side section will read this turn, by section, each under the same condition as its
    section (a section that reads nothing this turn is absent)."""
    cfg = ctx.cfg
    lists = {"weather": WEATHER}
    if ctx.store.known_space(ctx.space):
        lists["recent"] = ListRead(limit=200, since=_recent_since(ctx))
    if G.favorite_gate(ctx.plan, ctx.state, cfg).allowed:
        lists["favorite"] = FAVORITE
    if ctx.parts.dreams is not None and cfg.gateway.dream_section:
        lists["dream"] = ctx.parts.dreams.LATENT  # what DreamEngine.latent reads
    if cfg.gateway.budgets.core_memory > 0:
        lists["core"] = CORE
    return lists


def announce_side_reads(ctx: TurnContext) -> None:
    """Send ahead what the side sections will read: the lists (kept on the turn, :func:`side_lists`, for
    the sections to read with), and whether the space has facts at all. On a shared ledger they travel
    with the turn's candidates read instead of in round trips of their own (a read announced and not
    used is wasted there, one used and not announced costs its own round trip; the answers are the
    same either way)."""
    cfg = ctx.cfg
    ctx.lists = side_lists(ctx)
    ctx.store.list_ahead(ctx.space, *(read.kwargs() for read in ctx.lists.values()))
    if ctx.carried:  # the memories carried from the last rounds, read for Recent Context (:func:`carried`)
        ctx.store.get_ahead(ctx.space, ctx.carried)
    if ctx.parts.facts is not None and cfg.gateway.budgets.facts > 0:
        ctx.ahead["facts"] = ctx.parts.facts.any_ahead(ctx.space)


def _listed(ctx: TurnContext, section: str) -> list[Bucket]:
    """The section's list, read with exactly the read announced for it."""
    return ctx.store.list(ctx.space, **ctx.lists[section].kwargs())


def _recent_since(ctx: TurnContext) -> str:
    """The recent window; on re-entry, the open-thread window when it is longer (an episode still open)."""
    gw = ctx.cfg.gateway
    hours = gw.head_recent_hours
    if gw.open_thread_days > 0 and gw.open_thread_items > 0 and \
            G.recent_trigger(ctx.plan, ctx.state, ctx.cfg).reason == "reentry_after_idle":
        hours = max(hours, gw.open_thread_days * 24)
    return (ctx.state.now - timedelta(hours=hours)).isoformat()


def open_threads(ctx: TurnContext, pool: list[Bucket]) -> frozenset[str]:
    """The space's newest ``open_thread_items`` episodes past the recent window whose words point ahead: what the
    user may come back to with how it went. Read only on re-entry (the list reads that far back only then)."""
    gw = ctx.cfg.gateway
    if gw.open_thread_days <= 0 or gw.open_thread_items <= 0:
        return frozenset()
    edge = ctx.state.now - timedelta(hours=gw.head_recent_hours)
    older = sorted((b for b in pool if b.memory_layer in EPISODE_ROLE_HINTS and b.created_dt() < edge),
                   key=lambda b: (b.created, b.id), reverse=True)
    found: list[str] = []
    for b in older:
        if ctx.parts.policy.points_ahead(b.main_text):
            found.append(b.id)
            if len(found) >= gw.open_thread_items:
                break
    return frozenset(found)


def recent(ctx: TurnContext, taken: set[str], direct: list[Decided],
           out: list[Suppressed]) -> tuple[list[Decided], bool]:
    cfg, plan, state = ctx.cfg, ctx.plan, ctx.state
    if not ctx.store.known_space(ctx.space):
        return [], False
    found: list[Decided] = carried(ctx, taken)
    taken = taken | {d.bucket.id for d in found}
    # A letter takes no part: it is never shown here, and were its words read for topic evidence, whether it is
    # listed as suppressed would confirm a sealed letter's words one guessed query at a time (design §19).
    pool = [b for b in _listed(ctx, "recent")
            if b.id not in taken and b.created_dt() <= state.now and b.type != "letter"]
    if not pool:
        return found[: cfg.gateway.recent_context_max_items], False
    evidence = {d.bucket.id for d in direct} | {b.id for b in pool if G.recent_topic_evidence(plan, b)}
    trigger = G.recent_trigger(plan, state, cfg)
    if not trigger.allowed:  # then only a memory on the turn's topic can pass or be named
        pool = [b for b in pool if b.id in evidence]
    fired = False
    threads = open_threads(ctx, pool) if trigger.reason == "reentry_after_idle" else frozenset()
    for b in pool:
        d = ctx.layer(b)
        gate = GATES.evaluate(GateInput("recent", plan, state, cfg, b, d, has_topic_evidence=b.id in evidence,
                                        in_profile=b.id in ctx.profile_ids, open_thread=b.id in threads))
        if GATES.passes(gate, "recent"):
            found.append(Decided(b, d, gate, GATES.weight(gate) * (1.0 if b.id in evidence else 0.5)))
            fired = True
        elif G.recent_worth_listing(gate.gates["recent_context"].reason, plan, evidence=b.id in evidence):
            out.append(suppressed(None, bucket=b, layer=d, gate=gate))
    found.sort(key=lambda x: (-x.score, x.bucket.last_active))
    return found[: cfg.gateway.recent_context_max_items], fired


def carried(ctx: TurnContext, taken: set[str]) -> list[Decided]:
    """Memories the session recalled in its last rounds, while the conversation is still on them (turn/carry.py):
    first in Recent Context, ahead of what is merely new."""
    asked = set(ctx.asked_again)
    ids = [b for b in dict.fromkeys([*ctx.asked_again, *ctx.carried]) if b not in taken]
    if not ids:
        return []
    found = []
    buckets = ctx.store.get_many(ctx.space, ids)
    for bid in ids:
        b = buckets.get(bid)
        if b is None:
            continue
        d = ctx.layer(b)
        gate = GATES.evaluate(GateInput("carried", ctx.plan, ctx.state, ctx.cfg, b, d, carried=True,
                                        in_profile=b.id in ctx.profile_ids, asked_again=bid in asked))
        if GATES.passes(gate, "carried"):
            found.append(Decided(b, d, gate, 2.0))
        else:
            g = gate.decide("suppressed", None, block_reason(gate))
            ctx.trace.setdefault(bid, {"layer_debug": d.to_dict(), "runtime_gate": g.to_dict()})
    return found


def weather(ctx: TurnContext, taken: set[str]) -> list[Decided]:
    found = []
    for b in _listed(ctx, "weather"):
        if b.id in taken or b.created_dt() > ctx.state.now:
            continue
        d = ctx.layer(b)
        if d.layer != "relationship_weather":
            continue
        gate = GATES.evaluate(GateInput("weather", ctx.plan, ctx.state, ctx.cfg, b, d))
        if GATES.passes(gate, "weather"):
            found.append(Decided(b, d, gate, 1.0))
    found.sort(key=lambda x: x.bucket.created, reverse=True)
    return found[:1]


def favorites(ctx: TurnContext, taken: set[str]) -> list[Decided]:
    fg = G.favorite_gate(ctx.plan, ctx.state, ctx.cfg)
    if not fg.allowed:
        return []
    found = []
    for b in _listed(ctx, "favorite"):
        if b.id in taken or not is_favorite(b, ctx.cfg):
            continue
        d = ctx.layer(b)
        if d.layer != "favorite_memory" or _refused(ctx, b, d, "direct_seed"):
            continue
        gate = GATES.evaluate(GateInput("favorite", ctx.plan, ctx.state, ctx.cfg, b, d),
                              direct_seed=GateResult(None, fg.reason))
        if GATES.passes(gate, "favorite"):
            found.append(Decided(b, d, gate, b.importance * GATES.weight(gate)))
    found.sort(key=lambda x: (-x.score, x.bucket.id))
    return found[:1]


@dataclasses.dataclass
class _Dream:
    decided: Decided
    attempts: int
    resonance: object
    gate: GateResult


def dream(ctx: TurnContext, taken: set[str]) -> list[Item]:
    """At most one dream, surfaced by resonance and claimed once per space (never in a dry run).

    Near misses spend one of the dream's attempts; every dream scored is written into the turn's
    trace with its resonance, so the debug pages show why each one stayed latent.
    """
    engine, cfg, state = ctx.parts.dreams, ctx.cfg, ctx.state
    if engine is None or not cfg.gateway.dream_section:
        return []
    rows = engine.latent(ctx.space)
    if not rows:
        return []
    score = engine.scorer(ctx.space, ctx.plan, taken)
    scored: list[_Dream] = []
    for b, attempts in rows:
        if b.id in taken or b.created_dt() > state.now or _refused(ctx, b, ctx.layer(b), "direct_seed"):
            continue
        res = score(b)
        young = (state.now - b.created_dt()).total_seconds() / 3600 < cfg.dream.min_age_hours
        d = ctx.layer(b)
        shown = GATES.evaluate(GateInput("dream", ctx.plan, state, cfg, b, d))  # the dream gate below decides
        gate = G.dream_gate(res.score, young=young, cooled=b.id in state.injected, cfg=cfg.dream)
        scored.append(_Dream(Decided(b, d, shown), attempts, res, gate))
    ranked = sorted((s for s in scored if s.gate.allowed), key=lambda s: (-s.resonance.score, s.decided.bucket.id))
    budget = cfg.gateway.budgets.dream
    winner, why = G.surface_one_dream(
        ranked, fits=lambda s: estimate_tokens(render_dream(s.decided.bucket)) <= budget,
        claim=lambda s: state.dry_run or engine.claim(ctx.space, s.decided.bucket, state))
    verdict = {id(ranked[i]): g for i, g in why.items()}
    if not state.dry_run:
        for s in scored:
            if G.dream_near_miss(s.resonance.score, s.gate, cfg.dream):
                s.attempts, now_state = engine.count_attempt(ctx.space, s.decided.bucket)
                if now_state == "dropped":
                    verdict[id(s)] = GateResult(False, "dream_dropped")
    items: list[Item] = []
    for s in scored:
        extra = {"resonance": {**s.resonance.to_dict(), "threshold": cfg.dream.surface_threshold,
                               "attempt_threshold": cfg.dream.attempt_threshold, "attempts": s.attempts,
                               "max_attempts": cfg.dream.max_attempts}}
        if s is winner:
            d = dataclasses.replace(s.decided, score=s.resonance.score)
            items.append(item_of(d, "dream_original", render_dream(d.bucket), "dream", extra, reason=s.gate.reason))
        else:
            reason = verdict.get(id(s), s.gate).reason
            g = s.decided.gate.decide("suppressed", None, reason)
            ctx.trace[s.decided.bucket.id] = Traced(s.decided.layer, g, extra)
    return items


ANSWERS = "core_memory_answers_lookup"


def core(ctx: TurnContext, out: list[Suppressed]) -> list[Item]:
    """Core Memory: every core memory while ``gateway.budgets.core_memory`` is above 0; otherwise only those that
    answer an explicit lookup (the direct seed gate refused them as ``core_memory_answers_lookup``), within
    ``gateway.budgets.core_memory_lookup``. An answer ranks first and leaves the suppressed list: it is shown."""
    answers = {s.bucket_id for s in out if s.reason == ANSWERS}
    if ctx.cfg.gateway.budgets.core_memory > 0:
        pool = _listed(ctx, "core")
    elif answers and ctx.cfg.gateway.budgets.core_memory_lookup > 0:
        pool = list(ctx.store.get_many(ctx.space, sorted(answers)).values())
    else:
        return []
    found = []
    for b in pool:
        if not (b.pinned or b.protected or b.type == "permanent"):
            continue
        d = ctx.layer(b)
        if d.layer != "core_memory" or _refused(ctx, b, d, "direct_seed"):
            continue
        reason = ANSWERS if b.id in answers else "core_memory_stable_only"
        gate = GATES.build(direct_seed=GateResult(None, reason))
        score = b.importance + (100 if b.id in answers else 0)
        found.append(item_of(Decided(b, d, gate, score), "stable_rule", render_stable_rule(b), "core_memory",
                             reason=reason))
    found.sort(key=lambda i: i.bucket_id not in answers)  # answers first, the rest in their listed order
    shown = {i.bucket_id for i in found}
    out[:] = [s for s in out if s.bucket_id not in shown]
    return found


def _refused(ctx: TurnContext, b, d, gate_name: str) -> bool:
    """A side-section item its bucket's own flag keeps out (``dont_surface``), traced for the debug pages."""
    blocked = G.surface_block(b)
    if blocked is None:
        return False
    g = GATES.build(**{gate_name: blocked}).decide("suppressed", None, blocked.reason)
    ctx.trace[b.id] = Traced(d, g)
    return True


def facts(ctx: TurnContext) -> list[Item]:
    store = ctx.parts.facts
    if store is None or ctx.cfg.gateway.budgets.facts <= 0:
        return []
    any_facts = ctx.ahead.get("facts")
    if any_facts is not None and any_facts.one() is None:
        return []
    rows = store.stable_section(ctx.space, None, ctx.state.now, query=ctx.plan.query)
    n = len(rows)
    # facts matching the query's alias keys come first; rank keeps that order through budgeting
    return [Item(None, None, "fact", background_line(r), None, None, None, rank_score=float(n - i),
                 extra={"fact": r}) for i, r in enumerate(rows)]


__all__ = ["Side", "announce_side_reads", "side_lists", "side_stage"]
