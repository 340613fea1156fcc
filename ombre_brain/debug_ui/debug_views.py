"""Debug views: a Turn (plus a few store reads handed in) turned into the debug JSON shapes.

Pure: no Flask and no store access, so the JSON routes and the HTML pages render the very
same dicts. Nothing here scores, gates or ranks: every decision is read from the Turn
(``turn.explain``, ``turn.debug``). A bucket the pipeline never saw says so
(``not_a_candidate``) instead of being judged a second time.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..buckets import Bucket, Moment
from ..config import LAYER_NAMES, Config
from ..memory_layers import infer_layer
from ..recall_types import Edge, evidence_verdict
from ..turn.gate_table import GATES, build_runtime_gate
from ..turn.gate_table import describe as describe_reason
from ..turn.sections import Turn
from ..turn.words import words

describe = describe_reason  # one line for a reason code: the debug pages show it instead of the code


def _r(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(float(x), nd)


def plain(obj: Any) -> Any:
    """JSON-safe copy of whatever a stage left in turn.debug (dataclasses, tuples, floats)."""
    if hasattr(obj, "to_dict") and callable(obj.to_dict):
        return plain(obj.to_dict())
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return plain(dataclasses.asdict(obj))
    if isinstance(obj, Mapping):
        return {str(k): plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set | frozenset):
        return [plain(v) for v in obj]
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if obj is None or isinstance(obj, str | int | bool):
        return obj
    return str(obj)


# ---------------------------------------------------------------- one bucket's decision


def decision_of(turn: Turn | None, bucket: Bucket, cfg: Config) -> dict:
    """{layer_debug, runtime_gate, section, shape}: the turn's own decision, or why there is none."""
    ex = turn.explain(bucket.id) if turn is not None else None
    if ex is not None:
        return ex
    gate = build_runtime_gate(decision="suppressed", reason="not_a_candidate" if turn is not None else "no_query")
    return {"layer_debug": infer_layer(bucket, cfg).to_dict(), "runtime_gate": gate.to_dict(), "section": None,
            "shape": None}


def _decision_fields(ex: dict) -> dict:
    rg = ex["runtime_gate"] or {}
    ld = ex["layer_debug"] or {}
    return {"layer": ld.get("layer"), "decision": rg.get("decision"), "reason": rg.get("reason"),
            "section": ex.get("section"), "shape": ex.get("shape"), "layer_debug": ld, "runtime_gate": rg}


def gate_badges(runtime_gate: Mapping | None) -> list[dict]:
    """Every registered gate in precedence order, each with a state for colouring: allowed, refused or na."""
    out = []
    for name in GATES.names:
        g = (runtime_gate or {}).get(name) or {"allowed": None, "reason": "not_applicable"}
        state = "na" if g.get("allowed") is None else ("allowed" if g["allowed"] else "refused")
        number = None
        if isinstance(g.get("evidence"), int | float):  # the score and the threshold the gate's verdict used
            number = evidence_verdict(g["evidence"], g.get("threshold"), g.get("threshold_name"))
        out.append({"name": name, "allowed": g.get("allowed"), "reason": g.get("reason"), "state": state,
                    "description": describe(g.get("reason")), "number": number})
    return out


def _suppressions(turn: Turn, bucket_id: str) -> list[str]:
    return [s.reason for s in turn.suppressed if s.bucket_id == bucket_id]


def _returned(turn: Turn) -> list[dict]:
    """Every memory item of the turn (notes and facts carry no bucket and are left to `rendered`)."""
    out = []
    for sec in (*turn.stable, *turn.sections):
        for it in sec.items:
            if it.bucket_id:
                out.append({**it.to_dict(), "section": sec.key})
    return out


def turn_summary(turn: Turn) -> dict:
    return {"space": turn.space, "session": turn.session, "query": turn.query, "at": turn.at, "dry_run": True,
            "plan": turn.plan.debug_dict(), "tokens": turn.tokens, "rendered": turn.rendered,
            "timings_ms": dict(turn.timings),
            "sections": [{"key": s.key, "title": s.title, "items": len(s.items)} for s in (*turn.stable,
                                                                                          *turn.sections)]}


# ---------------------------------------------------------------- /api/recall-debug


def _candidate(turn: Turn, c, scores: Mapping[str, float], cfg: Config) -> dict:
    ex = decision_of(turn, c.bucket, cfg)
    best = c.best
    returned = next((i.moment_id for s in (*turn.stable, *turn.sections) for i in s.items
                     if i.bucket_id == c.bucket.id), None)
    return {
        "bucket_id": c.bucket.id, "title": c.bucket.title, "type": c.bucket.type, "rank": c.rank,
        "vector_score": _r(best.vector_score), "lexical_score": _r(best.lexical_score),
        "vector_norm": _r(best.vector_norm), "lexical_norm": _r(best.lexical_norm), "anchor_hit": best.anchor_hit,
        "fused": _r(c.fused), "score": _r(scores.get(c.bucket.id)),
        "admission": c.admission.to_dict(), "admission_summary": c.admission.summary(turn.query),
        "best_moment": {**best.to_dict(), "text": best.moment.text},
        "hits": [h.to_dict() for h in c.hits],
        "returned_moment": returned,
        "suppressions": _suppressions(turn, c.bucket.id),
        **_decision_fields(ex),
    }


def recall_debug(turn: Turn, cfg: Config) -> dict:
    """The plan, every candidate with its scores and verdicts, and what was returned."""
    r = turn.debug.get("retrieval")
    scores = {d.bucket.id: d.score for d in turn.debug.get("direct") or []}
    cands = [_candidate(turn, c, scores, cfg) for c in (r.candidates if r is not None else ())]
    retrieval = None
    if r is not None:
        retrieval = {"mode": cfg.retrieval.mode, "dense_weight": _r(r.dense_weight), "vector_hits": len(r.vector),
                     "lexical_hits": len(r.lexical), "candidates": len(r.candidates),
                     "ms": {k: _r(v, 3) for k, v in r.ms.items()}}
    dream = turn.debug.get("dream")
    return {**turn_summary(turn), "retrieval": retrieval, "candidates": cands, "returned": _returned(turn),
            "suppressed": [s.to_dict() for s in turn.suppressed], "dream": plain(dream) if dream is not None else None}


# ---------------------------------------------------------------- /api/moments


def _moment_row(m: Moment, ex: dict, hits: Mapping[str, Any], returned: str | None,
                beside: set[str], *, with_text: bool) -> dict:
    h = hits.get(m.id)
    row = {"moment_id": m.id, "ordinal": m.ordinal, "section": m.section, "context_only": m.context_only,
           "text_hash": m.text_hash, "chars": len(m.text), "start": m.start, "end": m.end,
           "hit": h.to_dict() if h is not None else None, "returned": m.id == returned,
           "shown_beside_parent": m.section in beside,
           "layer_debug": ex["layer_debug"], "runtime_gate": ex["runtime_gate"]}
    if with_text:
        row["text"] = m.text
    return row


def moments_view(turn: Turn | None, cfg: Config, bucket: Bucket, moments: Sequence[Moment],
                 edges: Sequence[Edge]) -> dict:
    """One bucket's moments, each with this turn's decision on its bucket, and the bucket's edges."""
    ex = decision_of(turn, bucket, cfg)
    hits: dict[str, Any] = {}
    returned = None
    beside: set[str] = set()
    if turn is not None:
        r = turn.debug.get("retrieval")
        for c in (r.candidates if r is not None else ()):
            if c.bucket.id == bucket.id:
                hits = {h.moment.id: h for h in c.hits}
        for s in (*turn.stable, *turn.sections):
            for it in s.items:
                if it.bucket_id == bucket.id:
                    returned = it.moment_id
                    beside = {x.get("section") for x in it.extra.get("context", ())}
    return {
        "space": bucket.space, "bucket_id": bucket.id, "title": bucket.title, "type": bucket.type,
        "query": turn.query if turn is not None else None, "plan": turn.plan.debug_dict() if turn else None,
        **_decision_fields(ex),
        "moments": [_moment_row(m, ex, hits, returned, beside, with_text=True) for m in moments],
        "edges": [e.to_dict() for e in edges],
    }


def moments_stats(turn: Turn | None, cfg: Config, buckets: Sequence[Bucket],
                  moments: Mapping[str, Sequence[Moment]], edges: Sequence[Edge], *, total: int) -> dict:
    """Bulk view: per bucket its moment counts by section, its edges and this turn's decision."""
    degree: dict[str, int] = {}
    for e in edges:
        degree[e.from_id] = degree.get(e.from_id, 0) + 1
        degree[e.to_id] = degree.get(e.to_id, 0) + 1
    by_section: dict[str, int] = {}
    rows = []
    for b in buckets:
        ms = moments.get(b.id, ())
        secs: dict[str, int] = {}
        for m in ms:
            secs[m.section] = secs.get(m.section, 0) + 1
            by_section[m.section] = by_section.get(m.section, 0) + 1
        ex = decision_of(turn, b, cfg)
        rows.append({"bucket_id": b.id, "title": b.title, "type": b.type, "moments": len(ms),
                     "context_only": sum(1 for m in ms if m.context_only), "sections": secs,
                     "edges": degree.get(b.id, 0), **_decision_fields(ex)})
    return {
        "space": buckets[0].space if buckets else None, "query": turn.query if turn is not None else None,
        "totals": {"buckets": total, "listed": len(rows), "moments": sum(r["moments"] for r in rows),
                   "context_only": sum(r["context_only"] for r in rows), "edges": len(edges),
                   "by_section": dict(sorted(by_section.items()))},
        "buckets": rows,
    }


# ---------------------------------------------------------------- /api/diffusion-debug


def _stage_record(turn: Turn, bucket_id: str, gate: str) -> dict | None:
    """The suppression written at the stage that ran ``gate`` (e.g. related_target), if any."""
    for s in turn.suppressed:
        g = (s.runtime_gate or {}).get(gate) or {}
        if s.bucket_id == bucket_id and g.get("reason", "not_applicable") != "not_applicable":
            return {"layer_debug": s.layer_debug, "runtime_gate": s.runtime_gate, "section": None, "shape": None}
    return None


def diffusion_debug(turn: Turn, cfg: Config, buckets: Mapping[str, Bucket]) -> dict:
    """Seeds, every diffusion hit with its path, and whether each target was taken or refused."""
    rec = turn.debug.get("diffusion") or {}
    strength = dict(rec.get("seeds") or ())
    edges: list[Edge] = list(rec.get("edges") or ())
    hits = list(rec.get("hits") or ())
    direct = list(turn.debug.get("direct") or [])
    related = {d.bucket.id for d in turn.debug.get("related") or []}

    def title(bid: str) -> str:
        b = buckets.get(bid)
        return b.title if b is not None else bid

    seeds = []
    for d in direct:
        if cfg.retrieval.mode != "graph":
            spread = "retrieval_mode_bucket"
        elif d.bucket.id in strength:
            spread = "seed"
        else:
            spread = "layer_diffusion_never"
        seeds.append({"bucket_id": d.bucket.id, "title": d.bucket.title, "score": _r(d.score),
                      "fused": _r(d.candidate.fused) if d.candidate is not None else None,
                      "strength": _r(strength.get(d.bucket.id)), "spreads": d.bucket.id in strength,
                      "spread_reason": spread, **_decision_fields(decision_of(turn, d.bucket, cfg))})
    targets = []
    for h in hits:
        taken = h.bucket_id in related
        # taken: the final decision (diffused item, or a later budget trim); refused: the diffusion stage's record
        ex = turn.explain(h.bucket_id) if taken else _stage_record(turn, h.bucket_id, "related_target")
        if ex is None and h.bucket_id in buckets:
            ex = decision_of(turn, buckets[h.bucket_id], cfg)
        if ex is None:
            continue
        fields = _decision_fields(ex)
        rt = (fields["runtime_gate"] or {}).get("related_target") or {}
        path = [{**p.to_dict(), "activation": _r(p.activation), "from_title": title(p.from_id),
                 "to_title": title(p.to_id)} for p in h.path]
        targets.append({"bucket_id": h.bucket_id, "title": title(h.bucket_id), "seed_id": h.seed_id,
                        "activation": _r(h.activation), "hops": len(h.path), "reliable_chain": h.reliable_chain,
                        "path": path, "taken": taken, "related_target": rt, **fields})
    return {
        **turn_summary(turn), "mode": cfg.retrieval.mode,
        "config": {"relation_weights": dict(cfg.diffusion.relation_weights),
                   "caution_weights": dict(cfg.diffusion.caution_weights),
                   "caution": turn.plan.allow_caution_diffusion, "hop_decay": list(cfg.diffusion.hop_decay),
                   "max_hops": cfg.diffusion.max_hops, "min_activation": cfg.diffusion.min_activation,
                   "max_paths_per_hit": cfg.diffusion.max_paths_per_hit, "max_related": cfg.diffusion.max_related},
        "seeds": seeds, "hits": targets, "edges": [e.to_dict() for e in edges],
        "graph": graph_layout(seeds, targets, edges, {d.bucket.id for d in direct}, title),
    }


def graph_layout(seeds: Sequence[dict], hits: Sequence[dict], edges: Sequence[Edge], direct_ids: set[str],
                 title, *, max_nodes: int = 80) -> dict:
    """Columns by hop distance from the seeds; coordinates for a plain server-rendered SVG."""
    kind: dict[str, str] = {}
    for s in seeds:
        kind[s["bucket_id"]] = "seed" if s["spreads"] else "direct"
    for h in hits:
        kind[h["bucket_id"]] = "taken" if h["taken"] else "refused"
    adj: dict[str, set[str]] = {}
    for e in edges:
        adj.setdefault(e.from_id, set()).add(e.to_id)
        adj.setdefault(e.to_id, set()).add(e.from_id)
    depth = {s["bucket_id"]: 0 for s in seeds if s["spreads"]}
    frontier = sorted(depth)
    while frontier:
        nxt = []
        for n in frontier:
            for m in sorted(adj.get(n, ())):
                if m not in depth:
                    depth[m] = depth[n] + 1
                    nxt.append(m)
        frontier = nxt
    for s in seeds:
        depth.setdefault(s["bucket_id"], 0)
    ids = sorted(depth, key=lambda b: (depth[b], b))[:max_nodes]
    cols: dict[int, list[str]] = {}
    for b in ids:
        cols.setdefault(depth[b], []).append(b)
    col_w, row_h, pad = 320, 74, 40
    row: dict[str, float] = {}
    for c, members in sorted(cols.items()):
        # barycentre ordering: a node sits near the nodes of the previous column it hangs from (fewer crossings)
        def key(b: str, c: int = c) -> tuple:
            parents = [row[p] for p in adj.get(b, ()) if p in row and depth.get(p) == c - 1]
            return (sum(parents) / len(parents) if parents else math.inf, b)

        members.sort(key=key)
        for i, b in enumerate(members):
            row[b] = i
    pos = {b: (pad + 90 + depth[b] * col_w, pad + 30 + int(row[b]) * row_h) for b in ids}
    walked = {(frozenset((p["from_id"], p["to_id"])), p["relation"]): (p["from_id"], p["to_id"])
              for h in hits for p in h["path"]}  # an edge on a hit's path is drawn the way diffusion walked it
    nodes = [{"id": b, "title": title(b), "label": _short(title(b)), "kind": kind.get(b, "unreached"),
              "depth": depth[b], "x": pos[b][0], "y": pos[b][1],
              "describe": NODE_KINDS[kind.get(b, "unreached")]} for b in ids]
    lines = []
    for e in edges:
        if e.from_id in pos and e.to_id in pos:
            a, b = walked.get((frozenset((e.from_id, e.to_id)), e.relation), (e.from_id, e.to_id))
            (x1, y1), (x2, y2) = _clip(pos[a], pos[b]), _clip(pos[b], pos[a])
            lines.append({**e.to_dict(), "x1": x1, "y1": y1, "x2": x2, "y2": y2,
                          "mx": round((x1 + x2) / 2) + (6 if x1 == x2 else 0), "my": round((y1 + y2) / 2) - 5,
                          "anchor": "start" if x1 == x2 else "middle",
                          "on_path": (frozenset((e.from_id, e.to_id)), e.relation) in walked})
    width = pad * 2 + 180 + max(len(cols) - 1, 0) * col_w
    height = pad * 2 + 30 + max((len(m) for m in cols.values()), default=1) * row_h
    return {"nodes": nodes, "edges": lines, "width": width, "height": height, "truncated": len(depth) > len(ids),
            "direct": sorted(direct_ids)}


NODE_KINDS = {
    "seed": "a direct hit that spreads activation",
    "direct": "a direct hit whose layer never spreads (or bucket mode)",
    "taken": "a diffusion hit that passed the related-target gate",
    "refused": "a diffusion hit refused by the related-target or cooldown gate",
    "unreached": "within max_hops of a seed but not a hit (below min_activation, or beyond max_paths_per_hit)",
}


def _clip(a: tuple[int, int], b: tuple[int, int], half_w: int = 82, half_h: int = 22) -> tuple[int, int]:
    """Where the line from box centre a towards b leaves box a (so arrowheads stay visible)."""
    dx, dy = b[0] - a[0], b[1] - a[1]
    if dx == 0 and dy == 0:
        return a
    t = min(half_w / abs(dx) if dx else math.inf, half_h / abs(dy) if dy else math.inf)
    return round(a[0] + dx * t), round(a[1] + dy * t)


def _short(text: str, n: int = 16) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


# ---------------------------------------------------------------- /api/breath-debug


def _dream_by_bucket(dream: Any, known: set[str]) -> dict[str, Any]:
    """Per-bucket entries from whatever the dream stage recorded (mapping by id, or rows with bucket_id)."""
    out: dict[str, Any] = {}

    def walk(obj: Any) -> None:
        if hasattr(obj, "to_dict") and callable(obj.to_dict):
            obj = obj.to_dict()
        if isinstance(obj, Mapping):
            bid = obj.get("bucket_id")
            if isinstance(bid, str):
                out.setdefault(bid, plain(obj))
            for k, v in obj.items():
                if k in known:
                    out.setdefault(k, plain(v))
                walk(v)
        elif isinstance(obj, list | tuple):
            for v in obj:
                walk(v)

    walk(dream)
    return out


def breath_debug(turn: Turn, cfg: Config, buckets: Sequence[Bucket], *, total: int) -> dict:
    """The surfacing view: every bucket's score components and whether this turn would surface it."""
    r = turn.debug.get("retrieval")
    cands = {c.bucket.id: c for c in (r.candidates if r is not None else ())}
    scores = {d.bucket.id: d.score for d in (*(turn.debug.get("direct") or []), *(turn.debug.get("related") or []))}
    activation = {d.bucket.id: d.diffusion.activation for d in turn.debug.get("related") or [] if d.diffusion}
    dream = turn.debug.get("dream")
    dreams = _dream_by_bucket(dream, {b.id for b in buckets}) if dream is not None else {}
    rows = []
    for b in buckets:
        c = cands.get(b.id)
        comps = None
        if c is not None:
            comps = {"rank": c.rank, "vector": _r(c.best.vector_score), "vector_norm": _r(c.best.vector_norm),
                     "lexical": _r(c.best.lexical_score), "lexical_norm": _r(c.best.lexical_norm),
                     "anchor_hit": c.best.anchor_hit, "fused": _r(c.fused), "admission": c.admission.reason}
        fields = _decision_fields(decision_of(turn, b, cfg))
        rows.append({"bucket_id": b.id, "title": b.title, "type": b.type, "importance": b.importance,
                     "valence": b.valence, "arousal": b.arousal, "created": b.created, "last_active": b.last_active,
                     "candidate": c is not None, "scores": comps, "score": _r(scores.get(b.id)),
                     "activation": _r(activation.get(b.id)), "dream": dreams.get(b.id),
                     "would_surface": fields["decision"] == "injected", **fields})
    rows.sort(key=lambda x: (not x["would_surface"], x["scores"]["rank"] if x["scores"] else math.inf,
                             x["bucket_id"]))
    return {**turn_summary(turn), "dense_weight": _r(r.dense_weight) if r is not None else None,
            "count": total, "listed": len(rows), "surfacing": sum(1 for x in rows if x["would_surface"]),
            "buckets": rows, "dream": plain(dream) if dream is not None else None}


# ---------------------------------------------------------------- recorded turns and policy


def turn_items(turn: Mapping) -> Iterable[tuple[str, dict]]:
    """(section key, item) for every memory item of a recorded TURN dict."""
    for sec in (*turn.get("stable", ()), *turn.get("sections", ())):
        for it in sec.get("items", ()):
            if it.get("bucket_id"):
                yield sec.get("key"), it


def layer_policy_table(cfg: Config) -> list[dict]:
    """Each layer's policy row, each value with its words beside it (``<field>_words``)."""
    rows = []
    for name in LAYER_NAMES:
        if name in cfg.layers:
            row = cfg.layers[name].to_dict()
            rows.append({"layer": name, "layer_words": words(name, "layer"), **row,
                         **{f"{k}_words": words(v, k) for k, v in row.items() if isinstance(v, str)}})
    return rows


def profile_view(turn: Turn, cfg: Config) -> dict:
    """The profile a turn showed, each stable memory with why it is in or out (``runtime_gate.profile`` of the lines
    shown; the same verdicts, serialised from the turn's own selection, for those left out)."""
    view = turn.debug.get("profile")
    section = turn.section("profile")
    out = {"space": turn.space, "query": turn.query, "at": turn.at, "title": section.title if section else None,
           "budget": cfg.gateway.budgets.profile, "max_lines": cfg.gateway.profile.max_lines, "shown": [],
           "tokens": 0, "chose": False, "entries": []}
    if view is None:
        return out
    data = view.to_dict()
    shown = {i.bucket_id: i for i in (section.items if section else ())}
    for e in data["entries"]:
        item = shown.get(e["id"])
        e["runtime_gate"] = item.runtime_gate if item is not None else None
        e["words"] = describe(e["reason"])
        e["answers"] = bool(item is not None and item.extra.get("answers"))
    out.update(shown=list(shown), tokens=data["tokens"], chose=data["chose"], entries=data["entries"])
    return out
