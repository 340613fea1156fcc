"""Diffusion as a turn stage: edges near the direct hits, spreading activation, the related gate.

The spreading itself is pure (:mod:`ombre_brain.turn.diffusion`); this stage fetches the edges
hop by hop (never the whole graph) and the reached buckets, then lets the related-target and
cooldown gates decide. Related memory exists only in ``graph`` retrieval mode.
"""

from __future__ import annotations

from ..recall_types import Edge, Suppressed
from .context import Decided, TurnContext, suppressed
from .diffusion import diffuse
from .gate_registry import GateInput
from .gate_table import GATES


def edges_near(ctx: TurnContext, seeds: list[str]) -> list[Edge]:
    """Edges within max_hops of the seeds, fetched hop by hop, with the buckets at their ends (the targets)."""
    seen: set[str] = set(seeds)
    frontier = list(seeds)
    edges: dict[tuple, Edge] = {}
    for _ in range(max(ctx.cfg.diffusion.max_hops, 1)):
        if not frontier:
            break
        nxt = []
        for e in ctx.store.edges(ctx.space, frontier, ends=True):
            edges[(e.from_id, e.to_id, e.relation)] = e
            for b in (e.from_id, e.to_id):
                if b not in seen:
                    seen.add(b)
                    nxt.append(b)
        frontier = nxt
    return list(edges.values())


def related_stage(ctx: TurnContext, direct: list[Decided], out: list[Suppressed]) -> list[Decided]:
    """Buckets reached from the direct hits along edges that the related-target gate lets in."""
    cfg, plan, state = ctx.cfg, ctx.plan, ctx.state
    if cfg.retrieval.mode != "graph" or not direct:
        return []
    seeds_ok = [d for d in direct if d.layer.policy.diffusion != "never"]
    if not seeds_ok:
        return []
    top = max(d.score for d in seeds_ok) or 1.0
    seeds = [(d.bucket.id, d.score / top) for d in seeds_ok]
    edges = edges_near(ctx, [s for s, _ in seeds])
    ctx.diffusion.update(seeds=seeds, edges=edges, hits=[])
    if not edges:
        return []
    targets = ctx.store.get_many(ctx.space, {e.from_id for e in edges} | {e.to_id for e in edges})
    letters = {bid for bid, b in targets.items() if b.type == "letter"}
    if letters:  # an edge may name a letter; no letter is related memory, listed or traced (design §19)
        edges = [e for e in edges if e.from_id not in letters and e.to_id not in letters]
        targets = {bid: b for bid, b in targets.items() if bid not in letters}
        ctx.diffusion["edges"] = edges
    hits = diffuse(seeds, edges, cfg=cfg.diffusion, caution=plan.allow_caution_diffusion,
                   blocked={d.bucket.id for d in direct}, target_ok=lambda bid, path: bid in targets)
    ctx.diffusion["hits"] = hits
    found: list[Decided] = []
    for h in hits:
        b = targets[h.bucket_id]
        d = ctx.layer(b)
        gate = GATES.evaluate(GateInput("related", plan, state, cfg, b, d, path_ok=h.reliable_chain,
                                                in_profile=b.id in ctx.profile_ids))
        if GATES.passes(gate, "related"):
            found.append(Decided(b, d, gate, h.activation * GATES.weight(gate), diffusion=h))
        elif b.id in ctx.profile_ids:  # related to what the turn recalls, and already in front of the model
            ctx.profile_related.append(b.id)
            out.append(suppressed(None, bucket=b, layer=d, gate=gate))
        else:
            out.append(suppressed(None, bucket=b, layer=d, gate=gate))
    found.sort(key=lambda x: (-x.score, x.bucket.id))
    return found[: cfg.diffusion.max_related]


__all__ = ["edges_near", "related_stage"]
