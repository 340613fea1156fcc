"""Spreading activation from direct hits along typed edges (design §5, diffusion defaults).

Related memory arrives only along edges. A target's activation is the seed's strength times,
for each step of the path, the edge confidence, the relation weight and the hop decay:

    activation = strength(seed) × Π_h confidence_h × weight(relation_h) × hop_decay[h]

Edges are undirected for spreading; each step records the direction it was walked. A target
reached several ways keeps its best path. What a target may be (layer policy, archive,
dream chain-only rules) is the caller's call, through ``blocked`` and ``target_ok``.

Pure: edges come in as data; nothing is read from the ledger here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..config import DiffusionConfig
from ..recall_types import DiffusionHit, Edge, PathStep

__all__ = ["diffuse", "is_reliable_chain", "relation_weight"]

TargetOk = Callable[[str, tuple[PathStep, ...]], bool]


def relation_weight(relation: str, cfg: DiffusionConfig, *, caution: bool) -> float:
    """The relation's weight; in repair modes the caution weights replace old_version/conflict."""
    if caution and relation in cfg.caution_weights:
        return cfg.caution_weights[relation]
    return cfg.relation_weights.get(relation, 0.0)


def is_reliable_chain(path: Sequence[PathStep], cfg: DiffusionConfig) -> bool:
    """Two or more steps, each at least ``chain_min_confidence``: worth showing as a chain bundle."""
    return len(path) >= 2 and all(s.confidence >= cfg.chain_min_confidence for s in path)


def _adjacency(edges: Sequence[Edge], cfg: DiffusionConfig, caution: bool,
               blocked: set[str] | frozenset[str]) -> dict[str, list[tuple[str, str, float, float]]]:
    """node -> [(neighbour, relation, confidence, confidence × weight)], walkable both ways, never into blocked."""
    adj: dict[str, list[tuple[str, str, float, float]]] = {}
    for e in edges:
        if e.from_id == e.to_id:
            continue
        conf = min(1.0, max(0.0, float(e.confidence)))
        factor = conf * relation_weight(e.relation, cfg, caution=caution)
        if factor <= 0:
            continue
        if e.to_id not in blocked:
            adj.setdefault(e.from_id, []).append((e.to_id, e.relation, conf, factor))
        if e.from_id not in blocked:
            adj.setdefault(e.to_id, []).append((e.from_id, e.relation, conf, factor))
    for nbrs in adj.values():
        nbrs.sort(key=lambda n: (n[0], n[1], -n[2]))
    return adj


def _future_bound(cfg: DiffusionConfig, adj: dict) -> list[float]:
    """bound[h]: the most that walking on from hop h can multiply an activation by (≥ 1: stop here)."""
    top = max((n[3] for nbrs in adj.values() for n in nbrs), default=0.0)
    bound = [1.0] * (cfg.max_hops + 1)
    for h in range(cfg.max_hops - 1, -1, -1):
        bound[h] = max(1.0, top * cfg.hop_decay[h] * bound[h + 1])
    return bound


def _rank_key(hit: DiffusionHit) -> tuple:
    return (-hit.activation, len(hit.path), hit.bucket_id, hit.seed_id, tuple((s.to_id, s.relation)
                                                                               for s in hit.path))


def diffuse(seeds: Sequence[tuple[str, float]], edges: Sequence[Edge], *, cfg: DiffusionConfig, caution: bool,
            blocked: set[str] | frozenset[str] = frozenset(), target_ok: TargetOk | None = None
            ) -> list[DiffusionHit]:
    """Related buckets reached from the seeds, best activation first.

    - Seed strengths are divided by the largest, so the turn's top direct hit spreads with 1.
    - Paths are simple (no bucket twice), at most ``max_hops`` steps; a target needs
      ``min_activation``. Paths may pass through other seeds; a seed is never a target.
    - ``blocked`` ids are neither returned nor walked through (a blocked seed still spreads,
      so passing every id already shown is safe). ``target_ok(id, path)`` may
      refuse a target (layer policy; e.g. a dream only when the path ends in ``dream_ring``);
      a refused target can still be walked through.
    - Per seed, each target keeps its best path and only the best ``max_paths_per_hit``
      targets count; across seeds a target keeps its best path; at most ``max_related`` hits.
    - Ties break by path length, target id, seed id, then the path itself: deterministic.
    """
    if cfg.max_hops <= 0 or cfg.max_related <= 0 or cfg.max_paths_per_hit <= 0:
        return []
    strength: dict[str, float] = {}
    for sid, s in seeds:
        strength[sid] = max(strength.get(sid, 0.0), float(s))
    top = max(strength.values(), default=0.0)
    if top <= 0:
        return []
    seed_ids = set(strength)
    adj = _adjacency(edges, cfg, caution, blocked)
    bound = _future_bound(cfg, adj)
    best: dict[str, DiffusionHit] = {}
    for sid in sorted(seed_ids):
        s0 = strength[sid] / top
        if s0 <= 0:
            continue
        per_target: dict[str, DiffusionHit] = {}

        def walk(node: str, act: float, path: tuple[PathStep, ...], seen: frozenset[str],
                 sid: str = sid, per_target: dict[str, DiffusionHit] = per_target) -> None:
            h = len(path)
            if h >= cfg.max_hops:
                return
            for nbr, rel, conf, factor in adj.get(node, ()):
                if nbr in seen:
                    continue
                a = act * factor * cfg.hop_decay[h]
                if a * bound[h + 1] < cfg.min_activation:
                    continue
                step_path = path + (PathStep(node, nbr, rel, conf, a),)
                if (a >= cfg.min_activation and nbr not in seed_ids
                        and (target_ok is None or target_ok(nbr, step_path))):
                    hit = DiffusionHit(nbr, sid, a, step_path, is_reliable_chain(step_path, cfg))
                    old = per_target.get(nbr)
                    if old is None or _rank_key(hit) < _rank_key(old):
                        per_target[nbr] = hit
                walk(nbr, a, step_path, seen | {nbr})

        walk(sid, s0, (), frozenset({sid}))
        for hit in sorted(per_target.values(), key=_rank_key)[:cfg.max_paths_per_hit]:
            old = best.get(hit.bucket_id)
            if old is None or _rank_key(hit) < _rank_key(old):
                best[hit.bucket_id] = hit
    return sorted(best.values(), key=_rank_key)[:cfg.max_related]
