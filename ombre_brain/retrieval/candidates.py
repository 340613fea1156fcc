"""Candidates: vector search, BM25 and exact anchors, fused (the I/O half of ranking).

The pure scoring lives in :mod:`fusion`; this module only fetches from the store and hands
plain data to it, so eval, the gateway and the debug routes all rank with the same code. With
conversation context (design §14) the dense channel searches with the message's own vector (the
conversation's where the message points back) and BM25 adds the recent user messages' terms at their
weights, and, with ``retrieval.dictionary_expansion``, the query's terms in the other script.
Admission is the next stage (:mod:`.evidence`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from time import perf_counter

import numpy as np

from ..buckets import bucket_id_of
from ..config import Config
from ..recall_types import Candidate, QueryPlan
from ..store.interfaces import Search
from ..text import CJK_RE, is_cjk_text
from .dictionary import bridge as dictionary_bridge
from .fusion import dense_weight_for, fuse, group_by_bucket, lift_by_context


@dataclasses.dataclass(frozen=True)
class Retrieval:
    """What one query found: the candidates plus the raw channels, for debug and eval."""

    candidates: tuple[Candidate, ...]
    vector: dict
    lexical: dict
    dense_weight: float
    ms: dict
    qvec: np.ndarray | None = None      # the query vector searched with (query_vector: the message's, or the
    # conversation's for a message that points back)


EXPANSION_WEIGHT = 0.5
EXPANSION_PER_TERM = 6


def dictionary_expansion(terms: Sequence[str]) -> tuple[tuple[str, float], ...]:
    """The query's terms in the other script, through the dictionary (beach → 海边, 沙滩; 过敏 → allergic), at half
    weight: a Chinese memory can then be a lexical candidate of an English question at all (design §18)."""
    bridge = dictionary_bridge()
    out: dict[str, float] = {}
    for t in terms:
        if CJK_RE.search(t):
            found = sorted(bridge.head_words(t))
        else:
            found = sorted((w for w in bridge.headwords(t) if len(w) >= 2), key=lambda w: (len(w), w))
        for w in found[:EXPANSION_PER_TERM]:
            if w not in terms:
                out.setdefault(w, EXPANSION_WEIGHT)
    return tuple(out.items())


def query_vector(encode, plan: QueryPlan, cfg) -> np.ndarray:
    """The vector a turn searches and weighs evidence with: the message's own, or the conversation's.

    In a chat the messages before this one are mostly about other things, and their words are often
    memories already (the write decision stored them): mixed into the query they rank those first and
    bury what the message asks about (on our labelled conversations the answer ranked first for 20 of
    106 questions with the conversation's vector, 49 with the message's). So the conversation's vector
    is used only where the message points back ("那她现在怎么样了", "how is she now?", ``plan.anaphoric``),
    or everywhere with ``retrieval.context.vector: always``.
    """
    if plan.anaphoric or cfg.retrieval.context.vector == "always":
        return conversation_vector(encode, plan)
    vec = np.array(encode(plan.query or plan.normalized), dtype=np.float32)
    n = np.linalg.norm(vec)
    return vec / n if n > 0 else vec


def conversation_vector(encode, plan: QueryPlan) -> np.ndarray:
    """The message's vector plus the recent user messages' at their weights, normalised (design §14)."""
    vec = np.array(encode(plan.query or plan.normalized), dtype=np.float32)
    for text, w in plan.topic:
        if text.strip() and w > 0:
            vec += w * np.asarray(encode(text), dtype=np.float32)
    n = np.linalg.norm(vec)
    return vec / n if n > 0 else vec


class Retriever:
    """Candidates for a planned query from one store: both searches, fused, grouped and admitted."""

    def __init__(self, store: Search, config: Config, policy) -> None:
        self.store = store
        self.cfg = config
        self.policy = policy

    def search(self, space: str, plan: QueryPlan, *, lexical_terms: Sequence[str] | None = None,
               vector_k: int | None = None, lexical_k: int | None = None, second_ahead: bool = False) -> Retrieval:
        rc = self.cfg.retrieval
        t0 = perf_counter()
        emb = self.store.embedder
        query = plan.query or plan.normalized
        vector: dict[str, float] = {}
        qvec = query_vector(emb.query, plan, self.cfg) if query.strip() else None
        if second_ahead and query.strip() and self.store.second is not None:
            self.store.second.query_ahead(query)  # admission's second opinion, encoded while the store is searched
        if qvec is not None:
            vector = self.store.vector_search(space, qvec, vector_k or rc.vector_k)
        t1 = perf_counter()
        terms = list(lexical_terms if lexical_terms is not None else plan.terms)
        extra = dictionary_expansion(terms) if rc.dictionary_expansion else ()
        lexical = self._lexical(space, terms, (*plan.context_terms, *extra), lexical_k or rc.lexical_k)
        t2 = perf_counter()
        found = set(vector) | set(lexical)
        if rc.fusion.context_share > 0:  # the candidates' context edges travel with their moments (inside a turn)
            self.store.edges_ahead(space, {bucket_id_of(m) for m in found})
        moments, buckets = self.store.moments_with_buckets(space, found, seconds=self.store.second is not None)
        vector = {k: v for k, v in vector.items() if k in moments}
        lexical = {k: v for k, v in lexical.items() if k in moments}
        anchors = [a.lower() for a in plan.anchors if a.strip()]
        anchor_hits = {mid for mid, m in moments.items() if anchors and any(a in m.text.lower() for a in anchors)}
        w = dense_weight_for(query, self.cfg, backend=emb.backend, cjk_capable=emb.cjk_capable, anchors=plan.anchors,
                             cjk=plan.query_is_cjk)
        second = self._second_opinion(space, plan, vector, moments) if rc.fusion.second_opinion_share else None
        hits = fuse(vector, lexical, moments, dense_weight=w, anchors_hit=anchor_hits,
                    anchor_bonus=rc.fusion.anchor_bonus, second=second,
                    second_share=rc.fusion.second_opinion_share)
        cands = group_by_bucket(hits, buckets)
        if rc.fusion.context_share > 0 and len(cands) > 1:
            edges = self.store.edges(space, [c.bucket.id for c in cands])
            cands = lift_by_context(cands, edges, rc.fusion.context_share)
        t3 = perf_counter()
        ms = {"vector": (t1 - t0) * 1000, "lexical": (t2 - t1) * 1000, "fuse": (t3 - t2) * 1000}
        return Retrieval(tuple(cands), vector, lexical, w, ms, qvec)

    def _second_opinion(self, space: str, plan: QueryPlan, vector: dict[str, float],
                        moments: dict) -> dict[str, float] | None:
        """The second embedder's cosines for the dense moments, when some are in another script than the query.

        e5-small prefers text in the query's own language: an English question about a Chinese
        memory loses to any English memory. USE ranks across scripts far better, while within one
        script e5 is the better of the two (on the Chinese set, mixing USE in cost 6 points of
        hit@1). So it is consulted only when the query meets memories in another script (None otherwise).
        """
        enc = self.store.second
        cjk = plan.query_is_cjk
        if enc is None or all(is_cjk_text(moments[mid].text) == cjk for mid in vector):
            return None
        qv = query_vector(enc.query, plan, self.cfg)
        return {mid: float(v @ qv) for mid, v in self.store.second_vectors(space, list(vector)).items()}

    def _lexical(self, space: str, terms: Sequence[str], context: Sequence[tuple[str, float]],
                 k: int) -> dict[str, float]:
        """BM25 for the message's terms, plus the conversation's terms at their lower weights (design §14)."""
        scores = dict(self.store.lexical_search(space, terms, k))
        by_weight: dict[float, list[str]] = {}
        for t, w in context:
            by_weight.setdefault(w, []).append(t)
        for w, group in by_weight.items():
            for mid, sc in self.store.lexical_search(space, group, k).items():
                scores[mid] = scores.get(mid, 0.0) + w * sc
        if len(scores) > k:
            scores = dict(sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:k])
        return scores


    def rank(self, space: str, query: str, k: int = 10, context: Sequence = ()) -> list[str]:
        """Bucket ids in fused order for a raw query and its conversation (eval: before gates and budgets)."""
        plan = self.policy.plan_query(query, tuple(context) or None)
        terms = plan.terms or tuple(self.store.tokens(query))
        res = self.search(space, plan, lexical_terms=terms, vector_k=max(k * 4, self.cfg.retrieval.vector_k),
                          lexical_k=max(k * 4, self.cfg.retrieval.lexical_k))  # ranking only: no admission
        return [c.bucket.id for c in res.candidates[:k]]
