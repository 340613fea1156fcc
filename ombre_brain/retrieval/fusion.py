"""Score fusion and topic-evidence admission: the stage between search and the gates.

Dense and lexical search return scores on different scales. They are fused at score level,
not by rank (DESIGN §12: naive RRF lost to BM25 alone): dense cosines are min-max normalised
over the returned set, BM25 is max-normalised, and the two are mixed convexly with a dense
weight that adapts to the query's script and the embedder. Fusion only orders; whether a
bucket may become a direct hit is decided separately by :func:`admit`, from topic evidence.

Pure: no store, index or embedder is touched here; callers pass scores and callables in.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

from ..buckets import Bucket, Moment
from ..recall_types import Admission, Candidate, MomentHit
from ..text import CJK_RE as _CJK_RE
from ..text import is_cjk_text

__all__ = ["ANCHOR_SHIFT", "admit", "dense_weight_for", "discriminative_terms", "fuse", "group_by_bucket",
           "is_cjk_text", "lift_by_context"]

# Exact anchors a query can carry: quoted spans, digit groups, capitalised names after the first word.
_QUOTED_RE = re.compile(r"[\"“”「」『』‘’]([^\"“”「」『』‘’]{2,})[\"“”「」『』‘’]")
_DIGITS_RE = re.compile(r"\d{2,}")
_NAME_RE = re.compile(r"(?<=[\s\u3000-\u9fff])[A-Z][a-z]+")

ANCHOR_SHIFT = 0.15
"""How far exact anchors (quoted text, names, numbers) move the dense weight towards lexical."""


def _query_anchors(query: str) -> list[str]:
    return _QUOTED_RE.findall(query) + _DIGITS_RE.findall(query) + _NAME_RE.findall(query)


def dense_weight_for(query: str, cfg: Any, *, backend: str, cjk_capable: bool,
                     anchors: Sequence[str] | None = None) -> float:
    """The dense share of the fused score for this query (DESIGN §12).

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
    cjk = is_cjk_text(query)
    if cjk and not cjk_capable:
        return f.dense_weight_minilm_cjk
    w = f.dense_weight_cjk if cjk else f.dense_weight_latin
    found = list(anchors) if anchors is not None else _query_anchors(query)
    if found:
        w -= ANCHOR_SHIFT
    return min(1.0, max(0.0, w))


def fuse(vector: Mapping[str, float], lexical: Mapping[str, float], moments: Mapping[str, Moment], *,
         dense_weight: float, anchors_hit: set[str] | frozenset[str] = frozenset(),
         anchor_bonus: float = 0.0) -> list[MomentHit]:
    """Fuse per-moment dense and BM25 scores into MomentHits, best first.

    Dense cosines are min-max normalised over the returned set (all equal: each gets 1), BM25
    is divided by its maximum (negative scores count as 0). A moment missing from a channel
    scores 0 there. ``anchor_bonus`` is added when the moment holds an exact anchor of the
    query. Ties break by moment id, so the order is deterministic. Ids missing from
    ``moments`` (deleted since indexing) are skipped.
    """
    ids = sorted((set(vector) | set(lexical)) & set(moments))
    dense = [vector[i] for i in ids if i in vector]
    d_lo, d_hi = (min(dense), max(dense)) if dense else (0.0, 0.0)
    lex_max = max((max(0.0, lexical[i]) for i in ids if i in lexical), default=0.0)
    w = min(1.0, max(0.0, dense_weight))
    hits = []
    for mid in ids:
        v = vector.get(mid)
        b = lexical.get(mid)
        if v is None:
            vn = 0.0
        elif d_hi > d_lo:
            vn = (v - d_lo) / (d_hi - d_lo)
        else:
            vn = 1.0
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


@lru_cache(maxsize=8)
def _casefolded(words: tuple[str, ...]) -> frozenset[str]:
    """The stop words, case-folded once per config rather than once per candidate (admit runs per candidate)."""
    return frozenset(w.casefold() for w in words)


def _query_terms(terms: Sequence[str], *, idf: Callable[[str], float], cfg: Any,
                 keep_unseen: bool) -> list[str]:
    """Query terms long enough to mean something, minus stop words and terms common in the space.

    A term with CJK needs ``retrieval.min_term_chars`` characters; any other term needs three
    letters or digits. Every term needs ``idf(term) >= retrieval.min_idf``, except that with
    ``keep_unseen`` a term no moment contains (idf 0) is kept too.
    """
    stop = _casefolded(tuple(cfg.lexical.stop_words))
    out: list[str] = []
    for raw in terms:
        t = raw.strip().casefold()
        if not t or t in stop or t in out:
            continue
        if _CJK_RE.search(t):
            long_enough = len(t) >= cfg.retrieval.min_term_chars
        else:
            long_enough = sum(ch.isalnum() for ch in t) >= 3
        score = idf(t)
        if long_enough and (score >= cfg.retrieval.min_idf or (keep_unseen and score == 0.0)):
            out.append(t)
    return out


def lift_by_context(cands: Sequence[Candidate], edges: Iterable[Any], share: float) -> list[Candidate]:
    """Let a candidate borrow a share of its conversational neighbour's score (DESIGN §12).

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


def discriminative_terms(terms: Sequence[str], *, idf: Callable[[str], float], cfg: Any) -> list[str]:
    """Query terms that can prove a topic: long enough, not stop words, not common in the space."""
    return _query_terms(terms, idf=idf, cfg=cfg, keep_unseen=False)


def _found(term: str, text: str) -> bool:
    """Case-insensitive substring; a Latin term must start at a word start (parrot~parrots, not cat~educate)."""
    if _CJK_RE.search(term):
        return term in text
    i = text.find(term)
    while i != -1:
        prev = text[i - 1] if i else " "
        if not prev.isalnum() or _CJK_RE.match(prev):
            return True
        i = text.find(term, i + 1)
    return False


@dataclasses.dataclass(frozen=True)
class AskedTerms:
    """What a query asks about, worked out once per query: admission runs once per candidate."""

    terms: tuple[str, ...]                             # discriminative terms a field may contain
    groups: tuple[tuple[frozenset[str], float], ...]  # weighted term groups, for coverage


def asked_terms(plan_terms: Sequence[str], *, idf: Callable[[str], float], cfg: Any) -> AskedTerms:
    return AskedTerms(tuple(discriminative_terms(plan_terms, idf=idf, cfg=cfg)),
                      tuple((frozenset(m), w) for m, w in _term_groups(plan_terms, idf=idf, cfg=cfg)))


def admit(candidate: Candidate, plan_terms: Sequence[str] | AskedTerms, *, idf: Callable[[str], float], cfg: Any,
          backend: str, cjk_capable: bool, query_is_cjk: bool) -> Admission:
    """Whether a candidate has topic evidence for a direct hit (DESIGN §5, direct seed gate).

    In order:
    1. only context-only moments matched -> ``context_only_match``, never admitted;
    2. a discriminative query term in the title, summary, tags or main body (context-only
       sections and the comments field never count) -> ``term_in_<field>`` (first field wins);
    3. the best non-context-only cosine at or above ``retrieval.semantic_admit[backend]`` ->
       ``semantic_above_threshold``; but a CJK query under an embedder that cannot read CJK
       never admits on a cosine -> ``semantic_not_evidence_for_cjk``;
    4. otherwise ``no_topic_evidence``.
    """
    b = candidate.bucket
    content = [h for h in candidate.hits if not h.moment.context_only]
    cosines = [h.vector_score for h in content if h.vector_score is not None]
    semantic = max(cosines) if cosines else None
    if not content:
        return Admission(False, "context_only_match", semantic_score=semantic)

    asked = plan_terms if isinstance(plan_terms, AskedTerms) else asked_terms(plan_terms, idf=idf, cfg=cfg)
    terms = asked.terms
    fields = (("title", b.title), ("summary", b.summary or ""), ("tags", "\n".join(b.tags)),
              ("body", b.main_text))
    matched: list[str] = []
    first_field: str | None = None
    for name, text in fields:
        low = text.casefold()
        for t in terms:
            if _found(t, low):
                first_field = first_field or name
                if t not in matched:
                    matched.append(t)
    coverage = _coverage(asked.groups, matched)
    if first_field is not None and coverage >= cfg.retrieval.min_term_coverage:
        return Admission(True, f"term_in_{first_field}", tuple(matched), semantic, coverage)
    weak = first_field is not None

    if query_is_cjk and not cjk_capable:
        return Admission(False, "semantic_not_evidence_for_cjk", semantic_score=semantic)
    threshold = cfg.retrieval.semantic_admit.get(backend)
    if semantic is not None and threshold is not None and semantic >= threshold:
        return Admission(True, "semantic_above_threshold", tuple(matched), semantic, coverage if weak else None)
    if weak:
        return Admission(False, "weak_term_coverage", tuple(matched), semantic, coverage)
    return Admission(False, "no_topic_evidence", semantic_score=semantic)


def term_weight(term: str) -> float:
    """What a query term is worth as topic evidence: how specific it is in the language.

    Everyday words (名字, 样子, 觉得) weigh little, specific ones (鹦鹉, 年糕) a lot; Latin words
    have no prior here and weigh 1 each.
    """
    from .lexical import general_idf

    if _CJK_RE.search(term):
        return max(general_idf(term) - 4.0, 0.5)
    return 1.0


def _term_groups(plan_terms: Sequence[str], *, idf: Callable[[str], float], cfg: Any) -> list[tuple[set[str], float]]:
    """What the query asks about: its terms, with jieba's overlapping cuts (小时/小时候) grouped.

    Terms the space has never seen still count (they are what an honest UNKNOWN is about);
    terms so common in the space that they carry no information do not.
    """
    kept = _query_terms(plan_terms, idf=idf, cfg=cfg, keep_unseen=True)
    groups: list[tuple[set[str], float]] = []
    for t in sorted(kept, key=len, reverse=True):
        for members, _w in groups:
            if any(t in m for m in members):
                members.add(t)
                break
        else:
            groups.append(({t}, 0.0))
    return [(members, max(term_weight(m) for m in members)) for members, _ in groups]


def _coverage(groups: Sequence[tuple[frozenset[str], float]], matched: Sequence[str]) -> float:
    total = sum(w for _, w in groups)
    if total <= 0:
        return 0.0
    got = set(matched)
    return sum(w for members, w in groups if members & got) / total
