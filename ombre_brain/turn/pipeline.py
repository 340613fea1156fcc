"""One turn of the read pipeline, as one straight line of plain data:

    plan_query -> candidates -> layers and gates -> diffusion -> render -> budget -> sections

Every decision is made once, here, into LayerDecision / RuntimeGate objects; the TURN the
gateway injects and the debug routes both serialise those same objects. A dry run (debug
routes) takes the same path and only skips the session bookkeeping at the end.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from time import perf_counter
from typing import Any

from . import gates as G
from ..buckets import Bucket
from .diffusion import diffuse
from ..memory_layers import infer_layer, is_favorite
from ..recall_types import (
    Candidate,
    DiffusionHit,
    GateResult,
    Item,
    LayerDecision,
    QueryPlan,
    RuntimeGate,
    SessionState,
    Suppressed,
)
from .render import (
    choose_shape,
    quote_block,
    render_capsule,
    render_chain_bundle,
    render_favorite_card,
    render_original,
    render_recent_compact,
    render_stable_rule,
    render_summary,
    render_weather,
    render_window,
)
from ..retrieval.candidates import Retrieval, Retriever
from .sections import Turn, assemble

DIRECT_SHAPES = ("bucket_original", "bucket_window", "bucket_capsule")


@dataclasses.dataclass
class Decided:
    """One bucket's trip through the gates this turn (mutable only while the turn is built)."""

    bucket: Bucket
    layer: LayerDecision
    gate: RuntimeGate
    score: float = 0.0
    candidate: Candidate | None = None
    diffusion: DiffusionHit | None = None


class TurnContext:
    """Per-turn memo so each bucket's layer is inferred exactly once."""

    def __init__(self, brain, space: str, plan: QueryPlan, state: SessionState) -> None:
        self.brain = brain
        self.cfg = brain.config
        self.space = space
        self.plan = plan
        self.state = state
        self._layers: dict[str, LayerDecision] = {}
        self.trace: dict[str, dict] = {}  # bucket_id -> {layer_debug, runtime_gate} for candidates left out quietly
        self.diffusion: dict[str, Any] = {}  # seeds, edges and every diffusion hit before gating (debug)

    def layer(self, bucket: Bucket) -> LayerDecision:
        d = self._layers.get(bucket.id)
        if d is None:
            d = self._layers[bucket.id] = infer_layer(bucket, self.cfg)
        return d


def _first_block(gate: RuntimeGate) -> str:
    for name in ("direct_seed", "topic_evidence", "recall_context", "related_target", "recent_context", "weather",
                 "cooldown"):
        g = gate.gates.get(name)
        if g is not None and g.allowed is False:
            return g.reason
    return gate.reason or "not_selected"


def run_turn(brain, space: str, session: str, query: str, now: datetime, *, dry_run: bool = False) -> Turn:
    cfg = brain.config
    timings: dict[str, float] = {}
    t = perf_counter()

    def lap(name: str) -> None:
        nonlocal t
        t2 = perf_counter()
        timings[name] = round((t2 - t) * 1000, 3)
        t = t2

    plan = brain.policy.plan_query(query, None)
    sessions = brain.gateway.sessions
    state = sessions.load(space, session, now, dry_run=dry_run)
    ctx = TurnContext(brain, space, plan, state)
    lap("plan")

    # -- candidates
    retrieval: Retrieval | None = None
    cands: tuple[Candidate, ...] = ()
    if not plan.skip_reason and brain.store.known_space(space):
        retrieval = Retriever(brain).search(space, plan)
        cands = retrieval.candidates
    lap("candidates")

    # -- layers and gates (direct)
    direct, suppressed = _direct(ctx, cands)
    lap("gates")

    # -- diffusion
    related = _related(ctx, direct, suppressed) if cfg.retrieval.mode == "graph" and direct else []
    lap("diffusion")

    taken = {d.bucket.id for d in direct} | {d.bucket.id for d in related}
    recent, recent_fired = _recent(ctx, taken, direct, suppressed)
    taken |= {d.bucket.id for d in recent}
    weather = _weather(ctx, taken, suppressed)
    taken |= {d.bucket.id for d in weather}
    favorites = _favorites(ctx, taken, suppressed)
    taken |= {d.bucket.id for d in favorites}
    dream_items = _dream(ctx, taken)
    core = _core(ctx)
    facts = _facts(ctx)
    lap("side_sections")

    # -- render
    items: dict[str, list[Item]] = {k: [] for k in ("recent_context", "recalled_memory", "diffused_memory",
                                                    "relationship_weather", "favorite_memory", "dream")}
    for d in direct:
        sec = "diffused_memory" if d.layer.layer == "archive" else "recalled_memory"
        items[sec].append(_render_direct(ctx, d, sec))
    for d in related:
        items["diffused_memory"].append(_render_related(ctx, d, direct))
    for d in recent:
        items["recent_context"].append(_item(d, "recent_compact", render_recent_compact(d.bucket, cfg.render),
                                             "recent_context"))
    for d in weather:
        items["relationship_weather"].append(_item(d, "weather", render_weather(d.bucket), "relationship_weather"))
    for d in favorites:
        items["favorite_memory"].append(_item(d, "favorite_card", render_favorite_card(d.bucket), "favorite_memory"))
    items["dream"].extend(dream_items)
    unknown = (not plan.skip_reason and plan.context_mode == "memory_lookup" and not direct
               and not any(s.reason == "skipped_recent_rounds" for s in suppressed)
               and not items["favorite_memory"])
    lap("render")

    turn = assemble(brain, plan=plan, state=state, query=query, core=core, facts=facts, items=items,
                    suppressed=suppressed, unknown=unknown, timings=timings)
    lap("budget")
    turn.debug.update(retrieval=retrieval, direct=direct, related=related, trace=ctx.trace, diffusion=ctx.diffusion)

    if not dry_run:
        injected = [(it.bucket_id, sec.key) for sec in (*turn.stable, *turn.sections) for it in sec.items
                    if it.bucket_id]
        mentioned = [b for b, _ in injected] + [s.bucket_id for s in turn.suppressed]
        recent_shown = any(s.key == "recent_context" for s in turn.sections)
        sessions.record(state, injected, recent_fired=recent_fired and recent_shown, turn=turn.to_dict(timings=True),
                        mentioned=mentioned)
        if dream_items:  # a claimed dream the budget trimmed away is released, not lost
            shown = set(turn.item_ids("dream"))
            brain.gateway.after_dream_surfaced(space, [i.bucket_id for i in dream_items if i.bucket_id in shown], now,
                                               trimmed=[i.bucket_id for i in dream_items if i.bucket_id not in shown])
    timings["record"] = round((perf_counter() - t) * 1000, 3)
    return turn


# ---------------------------------------------------------------- stages


def _direct(ctx: TurnContext, cands) -> tuple[list[Decided], list[Suppressed]]:
    cfg, plan, state = ctx.cfg, ctx.plan, ctx.state
    passed: list[Decided] = []
    suppressed: list[Suppressed] = []
    for c in cands:
        d = ctx.layer(c.bucket)
        te = G.topic_evidence_gate(plan, c, d, state, cfg)
        ds = G.direct_seed_gate(plan, c, d, state, cfg)
        cd, mult = G.cooldown_gate(plan, c.bucket.id, d, state, cfg)
        rc = G.recall_context_gate(plan, c, d, state, cfg)
        gate = G.build_runtime_gate(direct_seed=ds, topic_evidence=te, cooldown=cd, recall_context=rc)
        if ds.allowed and cd.allowed is not False:
            passed.append(Decided(c.bucket, d, gate, c.fused * mult, candidate=c))
        else:
            g = gate.decide("suppressed", None, _first_block(gate))
            if te.allowed or c.admission.admitted or c.rank <= 8:
                # only plausible candidates are listed in the TURN; the long tail stays in the debug trace
                suppressed.append(Suppressed(c.bucket.id, d.layer, g.reason, d.to_dict(), g.to_dict()))
            else:
                ctx.trace[c.bucket.id] = {"layer_debug": d.to_dict(), "runtime_gate": g.to_dict()}
    passed.sort(key=lambda x: (-x.score, x.bucket.id))
    if passed:
        top = passed[0].score or 1.0
        keep: list[Decided] = []
        for x in passed:
            if len(keep) >= cfg.retrieval.max_direct:
                reason = "below_max_direct"
            elif x.score < top * cfg.retrieval.min_relative_score:
                reason = "below_relative_score"
            else:
                keep.append(x)
                continue
            g = x.gate.decide("suppressed", None, reason)
            suppressed.append(Suppressed(x.bucket.id, x.layer.layer, reason, x.layer.to_dict(), g.to_dict()))
        passed = keep
    return passed, suppressed


def _edges_near(ctx: TurnContext, seeds: list[str]):
    """Edges within max_hops of the seeds, fetched hop by hop (never the whole graph)."""
    seen: set[str] = set(seeds)
    frontier = list(seeds)
    edges = {}
    for _ in range(max(ctx.cfg.diffusion.max_hops, 1)):
        if not frontier:
            break
        nxt = []
        for e in ctx.brain.store.edges(ctx.space, frontier):
            edges[(e.from_id, e.to_id, e.relation)] = e
            for b in (e.from_id, e.to_id):
                if b not in seen:
                    seen.add(b)
                    nxt.append(b)
        frontier = nxt
    return list(edges.values())


def _related(ctx: TurnContext, direct: list[Decided], suppressed: list[Suppressed]) -> list[Decided]:
    cfg, plan, state = ctx.cfg, ctx.plan, ctx.state
    seeds_ok = [d for d in direct if d.layer.policy.diffusion not in ("never",)]
    if not seeds_ok:
        return []
    top = max(d.score for d in seeds_ok) or 1.0
    seeds = [(d.bucket.id, d.score / top) for d in seeds_ok]
    edges = _edges_near(ctx, [s for s, _ in seeds])
    ctx.diffusion.update(seeds=seeds, edges=edges, hits=[])
    if not edges:
        return []
    targets = ctx.brain.store.get_many(ctx.space, {e.from_id for e in edges} | {e.to_id for e in edges})

    def target_ok(bid: str, path) -> bool:
        b = targets.get(bid)
        return b is not None

    hits = diffuse(seeds, edges, cfg=cfg.diffusion, caution=plan.allow_caution_diffusion,
                   blocked={d.bucket.id for d in direct}, target_ok=target_ok)
    ctx.diffusion["hits"] = hits
    out: list[Decided] = []
    for h in hits:
        b = targets.get(h.bucket_id)
        if b is None:
            continue
        d = ctx.layer(b)
        rt = G.related_target_gate(plan, b, d, state, cfg, path_ok=h.reliable_chain)
        cd, mult = G.cooldown_gate(plan, b.id, d, state, cfg)
        gate = G.build_runtime_gate(related_target=rt, cooldown=cd)
        if rt.allowed and cd.allowed is not False:
            out.append(Decided(b, d, gate, h.activation * mult, diffusion=h))
        else:
            g = gate.decide("suppressed", None, _first_block(gate))
            suppressed.append(Suppressed(b.id, d.layer, g.reason, d.to_dict(), g.to_dict()))
    out.sort(key=lambda x: (-x.score, x.bucket.id))
    return out[: cfg.diffusion.max_related]


def _recent(ctx: TurnContext, taken: set[str], direct: list[Decided],
            suppressed: list[Suppressed]) -> tuple[list[Decided], bool]:
    cfg, plan, state = ctx.cfg, ctx.plan, ctx.state
    if not ctx.brain.store.known_space(ctx.space):
        return [], False
    since = (state.now - timedelta(hours=cfg.gateway.head_recent_hours)).isoformat()
    pool = [b for b in ctx.brain.store.list(ctx.space, limit=200, since=since) if b.id not in taken]
    pool = [b for b in pool if b.created_dt() <= state.now]
    if not pool:
        return [], False
    evidence = {d.bucket.id for d in direct}
    if ctx.plan.terms and not plan.skip_reason:
        for b in pool:
            text = b.evidence_text.lower()
            if any(len(t) >= 2 and t.lower() in text for t in plan.terms):
                evidence.add(b.id)
    out: list[Decided] = []
    fired = False
    for b in pool:
        d = ctx.layer(b)
        rg = G.recent_context_gate(plan, b, d, state, cfg, has_topic_evidence=b.id in evidence)
        cd, mult = G.cooldown_gate(plan, b.id, d, state, cfg)
        gate = G.build_runtime_gate(recent_context=rg, cooldown=cd)
        if rg.allowed and cd.allowed is not False:
            out.append(Decided(b, d, gate, mult * (1.0 if b.id in evidence else 0.5)))
            fired = True
        elif rg.reason not in ("not_recent", "no_trigger", "not_applicable"):
            g = gate.decide("suppressed", None, _first_block(gate))
            suppressed.append(Suppressed(b.id, d.layer, g.reason, d.to_dict(), g.to_dict()))
    out.sort(key=lambda x: (-x.score, x.bucket.last_active), reverse=False)
    return out[: cfg.gateway.recent_context_max_items], fired


def _weather(ctx: TurnContext, taken: set[str], suppressed: list[Suppressed]) -> list[Decided]:
    out = []
    for b in ctx.brain.store.list(ctx.space, role="weather", limit=20):
        if b.id in taken or b.created_dt() > ctx.state.now:
            continue
        d = ctx.layer(b)
        if d.layer != "relationship_weather":
            continue
        wg = G.weather_gate(ctx.plan, b, d, ctx.state, ctx.cfg)
        gate = G.build_runtime_gate(weather=wg)
        if wg.allowed:
            out.append(Decided(b, d, gate, 1.0))
    out.sort(key=lambda x: x.bucket.created, reverse=True)
    return out[:1]


def _favorites(ctx: TurnContext, taken: set[str], suppressed: list[Suppressed]) -> list[Decided]:
    fg = G.favorite_gate(ctx.plan, ctx.state, ctx.cfg)
    if not fg.allowed:
        return []
    out = []
    for b in ctx.brain.store.list(ctx.space, role="favorite", limit=1000):
        if b.id in taken or not is_favorite(b, ctx.cfg):
            continue
        d = ctx.layer(b)
        if d.layer != "favorite_memory":
            continue
        cd, mult = G.cooldown_gate(ctx.plan, b.id, d, ctx.state, ctx.cfg)
        gate = G.build_runtime_gate(cooldown=cd).with_gate("direct_seed", GateResult(None, fg.reason))
        if cd.allowed is not False or ctx.plan.favorite_request:
            out.append(Decided(b, d, gate, b.importance * mult))
    out.sort(key=lambda x: (-x.score, x.bucket.id))
    return out[:1]


def _dream(ctx: TurnContext, taken: set[str]) -> list[Item]:
    engine = ctx.brain._optional("dream_engine")
    if engine is None or not ctx.cfg.gateway.dream_section:
        return []
    return engine.surface(ctx.space, ctx.plan, ctx.state, taken, trace=ctx.trace)


def _core(ctx: TurnContext) -> list[Item]:
    if ctx.cfg.gateway.budgets.core_memory <= 0:
        return []
    out = []
    for b in ctx.brain.store.list(ctx.space, role="core", limit=1000):
        if not (b.pinned or b.protected or b.type == "permanent"):
            continue
        d = ctx.layer(b)
        if d.layer != "core_memory":
            continue
        gate = G.build_runtime_gate(direct_seed=GateResult(None, "core_memory_stable_only"))
        out.append(_item(Decided(b, d, gate, b.importance), "stable_rule", render_stable_rule(b), "core_memory"))
    return out


def _facts(ctx: TurnContext) -> list[Item]:
    facts = ctx.brain._optional("facts")
    if facts is None or ctx.cfg.gateway.budgets.facts <= 0:
        return []
    from ..facts import background_line

    rows = facts.stable_section(ctx.space, None, ctx.state.now, query=ctx.plan.query)
    n = len(rows)
    # facts matching the query's alias keys come first; rank keeps that order through budgeting
    return [Item(None, None, "fact", background_line(r), None, None, None, rank_score=float(n - i),
                 extra={"fact": r}) for i, r in enumerate(rows)]


# ---------------------------------------------------------------- render


def _item(d: Decided, shape: str, text: str, section: str, extra: dict | None = None,
          moment_id: str | None = None) -> Item:
    gate = d.gate.decide("injected", section, d.gate.reason or _allowed_reason(d.gate))
    return Item(d.bucket.id, moment_id, shape, text, d.layer.layer, d.layer.to_dict(), gate.to_dict(),
                rank_score=d.score, extra=extra or {})


def _allowed_reason(gate: RuntimeGate) -> str:
    for name in ("direct_seed", "related_target", "recent_context", "weather", "cooldown"):
        g = gate.gates.get(name)
        if g is not None and g.allowed:
            return g.reason
    for g in gate.gates.values():
        if g.reason != "not_applicable":
            return g.reason
    return "selected"


def _render_direct(ctx: TurnContext, d: Decided, section: str) -> Item:
    c = d.candidate
    assert c is not None
    m = c.best.moment
    archive = d.layer.layer == "archive"
    shape = choose_shape(d.bucket, m, ctx.plan, ctx.cfg.render, related=False, chain=False, archive=archive)
    if shape == "bucket_window":
        text = render_window(d.bucket, m, ctx.cfg.render)
    elif shape == "bucket_capsule":
        text = render_capsule(d.bucket, m, ctx.cfg.render)
    elif shape == "summary":
        text = render_summary(d.bucket, ctx.cfg.render)
    else:
        text = render_original(d.bucket)
    extra: dict[str, Any] = {"moment_text": m.text, "score": round(d.score, 4)}
    # context-only sections ride along beside a reliable direct hit (recall context gate)
    context = [s for s in d.bucket.sections if s.name in ("affect_anchor", "comment")] if shape in DIRECT_SHAPES else []
    if context:
        # auxiliary colour beside a reliable direct hit on its parent (recall context gate)
        extra["context"] = [{"section": s.name, "text": s.text} for s in context]
        text = text + "\n" + "\n".join(f"[{s.name}] {s.text}" for s in context)
        d = dataclasses.replace(d, gate=d.gate.with_gate("recall_context", GateResult(True, "beside_reliable_parent")))
    return _item(d, shape, text, section, extra, moment_id=m.id)


def _render_related(ctx: TurnContext, d: Decided, direct: list[Decided]) -> Item:
    h = d.diffusion
    assert h is not None
    extra = {"path": [p.to_dict() for p in h.path], "seed_id": h.seed_id, "activation": round(h.activation, 4)}
    if h.reliable_chain and len(h.path) >= 2:
        seed = next((x.bucket for x in direct if x.bucket.id == h.seed_id), None)
        if seed is not None:
            mids = ctx.brain.store.get_many(ctx.space, {p.to_id for p in h.path} | {p.from_id for p in h.path})
            titles = {bid: b.title for bid, b in mids.items()}
            return _item(d, "chain_bundle", render_chain_bundle(seed, h.path, d.bucket, ctx.cfg.render, titles=titles),
                         "diffused_memory", extra)
    return _item(d, "summary", render_summary(d.bucket, ctx.cfg.render), "diffused_memory", extra)


__all__ = ["run_turn", "Turn", "quote_block"]
