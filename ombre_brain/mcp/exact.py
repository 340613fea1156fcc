"""Exact search: a quoted phrase in ``breath_search`` matches literally (design §19).

``breath_search(query='"给妈妈打电话"')`` lists the memories whose title, body or comments hold
every quoted phrase character for character (Latin letters compared without case), ranked by
the lexical score of the whole query, newest first on ties. Quotes are ASCII ``"…"`` or the CJK
pairs ``“…”``, ``「…」``, ``『…』``. Candidates come from the lexical index (every memory holding
the phrase's words), or, for a phrase with no indexed word at all, from the newest
``mcp.pulse_max_scan`` memories. A literal match is an explicit lookup, so archived and
``dont_surface`` memories are listed too, marked as such; letters, plans and self entries have
their own tools and are never matched here.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from ..buckets import Bucket, bucket_id_of
from ..kinds.fields import UNINDEXED_TYPES
from ..memory_layers import infer_layer
from .access import Call
from .format import bucket_brief

__all__ = ["ExactHit", "exact_rows", "exact_search", "phrases"]

_QUOTED = re.compile(r'"([^"]+)"|“([^”]+)”|「([^」]+)」|『([^』]+)』')
LEXICAL_K = 2000


@dataclass(frozen=True)
class ExactHit:
    bucket: Bucket
    score: float


def phrases(query: str) -> tuple[list[str], str]:
    """The quoted phrases of a query, and the query without them."""
    found = [next(g for g in m.groups() if g is not None).strip() for m in _QUOTED.finditer(query or "")]
    return [p for p in found if p], _QUOTED.sub(" ", query or "").strip()


def _text(b: Bucket) -> str:
    return "\n".join([b.title, b.summary or "", b.body, *(c.content for c in b.comments)]).casefold()


def exact_search(call: Call, space: str, query: str, wanted: list[str],
                 keep: Callable[[Bucket], bool] | None = None) -> list[ExactHit]:
    """Every memory of the space holding each phrase literally, best lexical score first."""
    brain = call.brain
    store = brain.store
    if not store.known_space(space):
        return []
    words = [t for p in wanted for t in brain.tokenize(p)]
    scores: dict[str, float] = {}
    if words:
        for mid, score in store.lexical_search(space, brain.tokenize(query), LEXICAL_K).items():
            bid = bucket_id_of(mid)
            scores[bid] = max(scores.get(bid, 0.0), score)
        pool = list(store.get_many(space, list(scores)).values())
    else:
        pool = store.list(space, limit=call.config.mcp.pulse_max_scan)
    folded = [p.casefold() for p in wanted]
    hits = [ExactHit(b, scores.get(b.id, 0.0)) for b in pool
            if b.type not in UNINDEXED_TYPES and all(p in _text(b) for p in folded) and (keep is None or keep(b))]
    hits.sort(key=lambda h: h.bucket.created, reverse=True)
    hits.sort(key=lambda h: -h.score)  # stable: equal scores stay newest first
    return hits


def exact_rows(call: Call, hits: list[ExactHit]) -> list[dict]:
    out = []
    for h in hits:
        b = h.bucket
        out.append({**bucket_brief(b, call.config), "text": b.main_text, "score": round(h.score, 4),
                    "dont_surface": b.dont_surface, "layer_debug": infer_layer(b, call.config).to_dict()})
    return out
