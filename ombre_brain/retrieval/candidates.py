"""Candidates: vector search, BM25 and exact anchors, fused and admitted (the I/O half).

The pure scoring lives in :mod:`fusion`; this module only fetches from the store and hands
plain data to it, so eval, the gateway and the debug routes all rank with the same code.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from time import perf_counter

from ..config import Config
from ..recall_types import Candidate, QueryPlan
from .fusion import admit, asked_terms, dense_weight_for, fuse, group_by_bucket, is_cjk_text, lift_by_context


@dataclasses.dataclass(frozen=True)
class Retrieval:
    """What one query found: the candidates plus the raw channels, for debug and eval."""

    candidates: tuple[Candidate, ...]
    vector: dict
    lexical: dict
    dense_weight: float
    ms: dict


class Retriever:
    """Candidates for a planned query from one store: both searches, fused, grouped and admitted."""

    def __init__(self, store, config: Config, policy) -> None:
        self.store = store
        self.cfg = config
        self.policy = policy

    def search(self, space: str, plan: QueryPlan, *, lexical_terms: Sequence[str] | None = None,
               vector_k: int | None = None, lexical_k: int | None = None) -> Retrieval:
        rc = self.cfg.retrieval
        t0 = perf_counter()
        emb = self.store.embedder
        query = plan.query or plan.normalized
        vector: dict[str, float] = {}
        if query.strip():
            vector = self.store.vector_search(space, emb.query(query), vector_k or rc.vector_k)
        t1 = perf_counter()
        terms = list(lexical_terms if lexical_terms is not None else plan.terms)
        lexical = self.store.lexical_search(space, terms, lexical_k or rc.lexical_k)
        t2 = perf_counter()
        moments = self.store.moments_by_id(space, set(vector) | set(lexical))
        vector = {k: v for k, v in vector.items() if k in moments}
        lexical = {k: v for k, v in lexical.items() if k in moments}
        anchors = [a.lower() for a in plan.anchors if a.strip()]
        anchor_hits = {mid for mid, m in moments.items() if anchors and any(a in m.text.lower() for a in anchors)}
        w = dense_weight_for(query, self.cfg, backend=emb.backend, cjk_capable=emb.cjk_capable, anchors=plan.anchors)
        hits = fuse(vector, lexical, moments, dense_weight=w, anchors_hit=anchor_hits,
                    anchor_bonus=rc.fusion.anchor_bonus)
        buckets = self.store.get_many(space, {m.bucket_id for m in moments.values()})
        cands = group_by_bucket(hits, buckets)
        if rc.fusion.context_share > 0 and len(cands) > 1:
            edges = self.store.edges(space, [c.bucket.id for c in cands])
            cands = lift_by_context(cands, edges, rc.fusion.context_share)
        idx = self.store.lexical(space)
        query_is_cjk = is_cjk_text(query)
        asked = asked_terms(plan.terms, idf=idx.idf, cfg=self.cfg)
        cands = [dataclasses.replace(c, admission=admit(
            c, asked, idf=idx.idf, cfg=self.cfg, backend=emb.backend, cjk_capable=emb.cjk_capable,
            query_is_cjk=query_is_cjk)) for c in cands]
        t3 = perf_counter()
        ms = {"vector": (t1 - t0) * 1000, "lexical": (t2 - t1) * 1000, "fuse": (t3 - t2) * 1000}
        return Retrieval(tuple(cands), vector, lexical, w, ms)

    def rank(self, space: str, query: str, k: int = 10) -> list[str]:
        """Bucket ids in fused order for a raw query (eval: before gates and budgets)."""
        plan = self.policy.plan_query(query, None)
        terms = plan.terms or tuple(self.store.tokens(query))
        res = self.search(space, plan, lexical_terms=terms, vector_k=max(k * 4, self.cfg.retrieval.vector_k),
                          lexical_k=max(k * 4, self.cfg.retrieval.lexical_k))
        return [c.bucket.id for c in res.candidates[:k]]
