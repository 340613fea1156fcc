"""Diffusion against a brute-force enumeration of simple paths, and the §5 defaults."""

from __future__ import annotations

import dataclasses
import itertools
import math
import random

import pytest

from ombre_brain.config import load_config
from ombre_brain.recall_types import DiffusionHit, Edge, PathStep
from ombre_brain.turn.diffusion import diffuse, relation_weight

CFG = load_config().diffusion
RELATIONS = ("same_event", "context_of", "evidenced_by", "relates_to", "old_version", "conflict", "dream_ring")


# ---------------------------------------------------------------- brute force reference


def brute_force(seeds, edges, cfg, caution, blocked, target_ok):
    strength = {}
    for sid, s in seeds:
        strength[sid] = max(strength.get(sid, 0.0), s)
    if not strength or max(strength.values()) <= 0 or cfg.max_hops <= 0:
        return []
    top = max(strength.values())
    oriented = []
    for e in edges:
        if e.from_id != e.to_id:
            oriented += [(e.from_id, e.to_id, e), (e.to_id, e.from_id, e)]

    def key(h):
        return (-h.activation, len(h.path), h.bucket_id, h.seed_id, tuple((s.to_id, s.relation) for s in h.path))

    best = {}
    for sid in sorted(strength):
        per_target = {}
        for n in range(1, cfg.max_hops + 1):
            for combo in itertools.product(oriented, repeat=n):
                nodes = [sid]
                ok = True
                for a, b, _ in combo:
                    if a != nodes[-1] or b in nodes:
                        ok = False
                        break
                    nodes.append(b)
                if not ok or any(x in blocked for x in nodes[1:]):
                    continue
                act = strength[sid] / top
                steps = []
                for h, (a, b, e) in enumerate(combo):
                    conf = min(1.0, max(0.0, e.confidence))
                    act = act * (conf * relation_weight(e.relation, cfg, caution=caution)) * cfg.hop_decay[h]
                    steps.append(PathStep(a, b, e.relation, conf, act))
                path = tuple(steps)
                target = nodes[-1]
                if any(s.activation <= 0 for s in path) or act < cfg.min_activation or target in strength:
                    continue
                if target_ok is not None and not target_ok(target, path):
                    continue
                chain = len(path) >= 2 and all(s.confidence >= cfg.chain_min_confidence for s in path)
                hit = DiffusionHit(target, sid, act, path, chain)
                if target not in per_target or key(hit) < key(per_target[target]):
                    per_target[target] = hit
        for hit in sorted(per_target.values(), key=key)[:cfg.max_paths_per_hit]:
            if hit.bucket_id not in best or key(hit) < key(best[hit.bucket_id]):
                best[hit.bucket_id] = hit
    return sorted(best.values(), key=key)[:cfg.max_related]


def random_graph(rng: random.Random):
    nodes = [f"n{i}" for i in range(rng.randint(3, 7))]
    pairs = [rng.sample(nodes, 2) if rng.random() < 0.9 else [nodes[0]] * 2 for _ in range(rng.randint(0, 14))]
    edges = [Edge(a, b, rng.choice(RELATIONS),
                  rng.choice([0.2, 0.6, 0.75, 0.9, 0.9, 1.0, 1.0, 1.2, round(rng.random(), 2)]))
             for a, b in pairs]
    ends = [x for e in edges for x in (e.from_id, e.to_id)] or nodes
    seeds = [(rng.choice(ends), rng.choice([1.0, 0.5, round(rng.uniform(0.1, 3), 2)]))
             for _ in range(rng.choice([0, 1, 1, 1, 2, 2, 3]))]
    blocked = {n for n in nodes if rng.random() < 0.1}
    max_hops = rng.choice([1, 2, 2, 3])
    cfg = dataclasses.replace(
        CFG, max_hops=max_hops, hop_decay=(0.8, 0.6, 0.5), min_activation=rng.choice([0.02, 0.1, 0.18, 0.3]),
        max_paths_per_hit=rng.randint(1, 5), max_related=rng.randint(1, 6))
    target_ok = None
    if rng.random() < 0.5:
        def target_ok(t, path):  # e.g. a "dream" node reachable only along dream_ring
            return t != "n2" or path[-1].relation == "dream_ring"
    return seeds, edges, cfg, rng.random() < 0.5, blocked, target_ok


@pytest.mark.parametrize("seed", range(300))
def test_diffuse_matches_brute_force(seed):
    seeds, edges, cfg, caution, blocked, target_ok = random_graph(random.Random(seed))
    got = diffuse(seeds, edges, cfg=cfg, caution=caution, blocked=blocked, target_ok=target_ok)
    assert got == brute_force(seeds, edges, cfg, caution, blocked, target_ok)


# ---------------------------------------------------------------- the defaults


def test_related_memory_spreads_both_ways():
    edges = [Edge("adopt", "vet", "same_event", 0.9)]
    fwd = diffuse([("adopt", 0.7)], edges, cfg=CFG, caution=False)
    back = diffuse([("vet", 0.7)], edges, cfg=CFG, caution=False)
    assert [h.bucket_id for h in fwd] == ["vet"] and [h.bucket_id for h in back] == ["adopt"]
    assert math.isclose(fwd[0].activation, 0.9 * 1.15 * 0.8)  # strength normalised to 1
    assert fwd[0].path == (PathStep("adopt", "vet", "same_event", 0.9, fwd[0].activation),)
    assert not fwd[0].reliable_chain


def test_min_activation_and_hop_decay():
    edges = [Edge("move", "a", "relates_to", 0.8), Edge("a", "b", "relates_to", 0.8)]
    hits = diffuse([("move", 1.0)], edges, cfg=CFG, caution=False)
    assert [h.bucket_id for h in hits] == ["a"]  # b: 0.448 × 0.8 × 0.7 × 0.6 ≈ 0.15 < 0.18


def test_caution_weights_in_repair_modes():
    edges = [Edge("now", "then", "old_version", 0.6)]
    assert diffuse([("now", 1.0)], edges, cfg=CFG, caution=False) == []  # 0.6 × 0.35 × 0.8 = 0.168
    hits = diffuse([("now", 1.0)], edges, cfg=CFG, caution=True)
    assert math.isclose(hits[0].activation, 0.6 * 0.85 * 0.8)


def test_reliable_chain_needs_two_confident_steps():
    edges = [Edge("s", "m", "same_event", 0.9), Edge("m", "t", "context_of", 0.8),
             Edge("m", "u", "context_of", 0.5)]
    hits = {h.bucket_id: h for h in diffuse([("s", 1.0)], edges, cfg=CFG, caution=False)}
    assert hits["t"].reliable_chain and len(hits["t"].path) == 2
    assert not hits["u"].reliable_chain
    assert not hits["m"].reliable_chain


def test_seeds_and_blocked_ids_are_never_targets_and_blocked_is_not_walked():
    edges = [Edge("s1", "s2", "same_event", 1.0), Edge("s1", "x", "same_event", 1.0),
             Edge("x", "y", "same_event", 1.0)]
    hits = diffuse([("s1", 1.0), ("s2", 0.5)], edges, cfg=CFG, caution=False, blocked={"x"})
    assert hits == []
    # A blocked seed still spreads: callers may block every id already shown.
    spread = diffuse([("s1", 1.0)], edges, cfg=CFG, caution=False, blocked={"s1", "y"})
    assert [h.bucket_id for h in spread] == ["s2", "x"]


def test_target_ok_refuses_a_target_but_it_can_be_walked_through():
    edges = [Edge("s", "dream", "relates_to", 1.0), Edge("dream", "t", "same_event", 1.0)]
    ok = diffuse([("s", 1.0)], edges, cfg=CFG, caution=False,
                 target_ok=lambda t, path: t != "dream" or path[-1].relation == "dream_ring")
    assert [h.bucket_id for h in ok] == ["t"]


def test_limits_per_seed_and_per_turn():
    edges = [Edge("s", f"t{i}", "same_event", 0.5 + i / 20) for i in range(6)]
    hits = diffuse([("s", 1.0)], edges, cfg=CFG, caution=False)
    assert [h.bucket_id for h in hits] == ["t5", "t4", "t3"]  # max_paths_per_hit 3
    many = diffuse([("s", 1.0), ("r", 1.0)], edges + [Edge("r", f"u{i}", "same_event", 0.9) for i in range(3)],
                   cfg=CFG, caution=False)
    assert len(many) == CFG.max_related


def test_a_target_keeps_its_best_path():
    edges = [Edge("s", "t", "relates_to", 0.9), Edge("s", "m", "same_event", 1.0), Edge("m", "t", "same_event", 1.0)]
    (t,) = [h for h in diffuse([("s", 1.0)], edges, cfg=CFG, caution=False) if h.bucket_id == "t"]
    assert math.isclose(t.activation, max(0.9 * 0.7 * 0.8, 1.15 * 0.8 * 1.15 * 0.6))
