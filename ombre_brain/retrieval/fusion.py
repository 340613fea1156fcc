"""Score fusion: one ordering of the candidates from two channels' scores (design §12).

Dense and lexical search return scores on different scales. They are fused at score level,
not by rank (design §12: naive RRF lost to BM25 alone): dense cosines are min-max normalised
over the returned set, BM25 is max-normalised, and the two are mixed convexly with a dense
weight that adapts to the query's script and the embedder. Fusion only orders; whether a
bucket may become a direct hit is decided separately, by :mod:`.admission`.

Pure: no store, index or embedder is touched here; callers pass scores and callables in.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..buckets import Bucket, Moment
from ..recall_types import Candidate, MomentHit
from ..text import is_cjk_text

__all__ = ["ANCHOR_SHIFT", "dense_weight_for", "fuse", "group_by_bucket", "is_cjk_text", "lift_by_context"]

# Exact anchors a query can carry: quoted spans, digit groups, capitalised names after the first word.
_QUOTED_RE = re.compile(r"[\"“”「」『』‘’]([^\"“”「」『』‘’]{2,})[\"“”「」『』‘’]")
_DIGITS_RE = re.compile(r"\d{2,}")
_NAME_RE = re.compile(r"(?<=[\s\u3000-\u9fff])[A-Z][a-z]+")

ANCHOR_SHIFT = 0.15
"""How far exact anchors (quoted text, names, numbers) move the dense weight towards lexical."""


def _query_anchors(query: str) -> list[str]:
    return _QUOTED_RE.findall(query) + _DIGITS_RE.findall(query) + _NAME_RE.findall(query)


def dense_weight_for(query: str, cfg: Any, *, backend: str, cjk_capable: bool,
                     anchors: Sequence[str] | None = None, cjk: bool | None = None) -> float:
    """The dense share of the fused score for this query (design §12).

    - A CJK query under an embedder that cannot read CJK (MiniLM) gets
      ``dense_weight_minilm_cjk`` (0 by default): its cosines carry no topic there.
    - Otherwise CJK queries get ``dense_weight_cjk`` (~0.75), others ``dense_weight_latin``
      (~0.55), the best measured weights on the Chinese set and LoCoMo.
    - Exact anchors (quoted text, names, numbers; ``anchors`` from the plan, or found in the
      query when None) lean towards lexical by :data:`ANCHOR_SHIFT`, since an embedder blurs them.

    ``backend`` is accepted so that a future per-backend calibration has a home; today the
    script and ``cjk_capable`` decide.
    """
    del backend  # calibrated per script today; see docstring
    f = cfg.retrieval.fusion
    cjk = is_cjk_text(query) if cjk is None else cjk  # a turn passes its plan's own decision
    if cjk and not cjk_capable:
        return f.dense_weight_minilm_cjk
    w = f.dense_weight_cjk if cjk else f.dense_weight_latin
    found = list(anchors) if anchors is not None else _query_anchors(query)
    if found:
        w -= ANCHOR_SHIFT
    return min(1.0, max(0.0, w))


def _min_max(scores: Mapping[str, float], ids: Sequence[str]) -> dict[str, float]:
    """Each id's score scaled to 0..1 over the ids that have one (all equal: each gets 1)."""
    vals = [scores[i] for i in ids if i in scores]
    lo, hi = (min(vals), max(vals)) if vals else (0.0, 0.0)
    return {i: ((scores[i] - lo) / (hi - lo) if hi > lo else 1.0) for i in ids if i in scores}


def fuse(vector: Mapping[str, float], lexical: Mapping[str, float], moments: Mapping[str, Moment], *,
         dense_weight: float, anchors_hit: set[str] | frozenset[str] = frozenset(),
         anchor_bonus: float = 0.0, second: Mapping[str, float] | None = None,
         second_share: float = 0.0) -> list[MomentHit]:
    """Fuse per-moment dense and BM25 scores into MomentHits, best first.

    Dense cosines are min-max normalised over the returned set (all equal: each gets 1), BM25
    is divided by its maximum (negative scores count as 0). A moment missing from a channel
    scores 0 there. With ``second`` (a second embedder's cosines for some dense moments), those
    moments' dense score is ``second_share`` its normalised cosine and the rest the first
    model's (the caller passes the moments where the second reads better: across scripts).
    ``anchor_bonus`` is added when the moment holds an exact anchor of the query. Ties break by
    moment id, so the order is deterministic. Ids missing from ``moments`` (deleted since
    indexing) are skipped.
    """
    ids = sorted((set(vector) | set(lexical)) & set(moments))
    dense_n = _min_max(vector, ids)
    second_n = _min_max(second, [i for i in ids if i in vector]) if second and second_share > 0 else {}
    lex_max = max((max(0.0, lexical[i]) for i in ids if i in lexical), default=0.0)
    w = min(1.0, max(0.0, dense_weight))
    hits = []
    for mid in ids:
        v = vector.get(mid)
        b = lexical.get(mid)
        vn = dense_n.get(mid, 0.0)
        if mid in second_n:
            vn = (1.0 - second_share) * vn + second_share * second_n[mid]
        ln = max(0.0, b) / lex_max if b is not None and lex_max > 0 else 0.0
        anchor = mid in anchors_hit
        fused = w * vn + (1.0 - w) * ln + (anchor_bonus if anchor else 0.0)
        hits.append(MomentHit(moments[mid], vector_score=v, lexical_score=b, vector_norm=vn, lexical_norm=ln,
                              anchor_hit=anchor, fused=fused))
    hits.sort(key=lambda h: (-h.fused, h.moment.id))
    return hits


def group_by_bucket(hits: Sequence[MomentHit], buckets: Mapping[str, Bucket]) -> list[Candidate]:
    """One Candidate per bucket, best first, ranked 1..n.

    ``best`` is the bucket's best non-context-only hit when it has one, else its best hit;
    the candidate's score is that hit's fused score. A bucket found only through context-only
    moments keeps its score for display, and :func:`admit` refuses it.
    """
    by_bucket: dict[str, list[MomentHit]] = {}
    for h in hits:
        if h.moment.bucket_id in buckets:
            by_bucket.setdefault(h.moment.bucket_id, []).append(h)
    cands = []
    for bid, hs in by_bucket.items():
        hs.sort(key=lambda h: (-h.fused, h.moment.id))
        best = next((h for h in hs if not h.moment.context_only), hs[0])
        cands.append(Candidate(bucket=buckets[bid], best=best, hits=tuple(hs), fused=best.fused))
    cands.sort(key=lambda c: (-c.fused, c.bucket.id))
    return [Candidate(c.bucket, c.best, c.hits, c.fused, rank=i) for i, c in enumerate(cands, 1)]


def lift_by_context(cands: Sequence[Candidate], edges: Iterable[Any], share: float) -> list[Candidate]:
    """Let a candidate borrow a share of its conversational neighbour's score (design §12).

    A reply often answers what the turn before it asked ("how long have you played piano?" /
    "about four months"), so the query matches the neighbour, not the answer. Along each
    ``context_of`` edge joining two candidates, each end gains ``share × confidence ×`` the
    other's fused score (its best neighbour's, not a sum). Only candidates already found move:
    none is added, so admission still asks every bucket for its own topic evidence. The lifted
    score becomes the candidate's ``fused``; ranks are renumbered, ties broken by bucket id.
    """
    cands = list(cands)
    if share <= 0 or len(cands) < 2:
        return cands
    base = {c.bucket.id: max(0.0, c.fused) for c in cands}
    lift: dict[str, float] = {}
    for e in edges:
        if e.relation != "context_of" or e.from_id not in base or e.to_id not in base:
            continue
        for a, b in ((e.from_id, e.to_id), (e.to_id, e.from_id)):
            lift[a] = max(lift.get(a, 0.0), share * e.confidence * base[b])
    if not lift:
        return cands
    moved = [dataclasses.replace(c, fused=c.fused + lift.get(c.bucket.id, 0.0)) for c in cands]
    moved.sort(key=lambda c: (-c.fused, c.bucket.id))
    return [dataclasses.replace(c, rank=i) for i, c in enumerate(moved, 1)]
