"""A memory said again joins the one already kept, so a companion's store does not fill with copies.

Before a draft is written, the memories most like it (the store's own fused search) are compared with it in
words: the Dice overlap of their character bigrams (CJK) and words (Latin), on folded text without
punctuation, over the user's own words (a ``### context`` section is left out). Among the stored memories of
the same layer:

- **a repeat** (overlap at least ``writer.model.join_similarity``, 0.8): the exchange *joins* the stored
  memory as one more source claim on it (``bucket_sources``). Nothing is copied and nothing is overwritten:
  the stored text stays. Forgetting the exchange (a purge of its source ``exchange:<id>``) releases only its
  claim; the memory stays while another source holds it (docs/design.md §10).
- **an update** (overlap at least ``writer.model.update_similarity``, 0.5, but not a repeat: "我在杭州做前端"
  then "我现在在上海做前端了"): the exchange is written as its own memory, in its own words, and linked to
  the stored one by an ``old_version`` edge (new -> old). Forgetting the exchange deletes its memory and
  the edge with it; the older memory is untouched.

Words rather than embeddings decide, because a join must be exact: two sentences of the same shape about
different things ("我妹妹在北京" / "我妈妈在北京") sit close in an embedding and far apart here. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from ..buckets import Bucket
from ..config import WriterModelConfig
from ..text import CJK_RE, fold

__all__ = ["Join", "find_join", "similarity"]

_SECTION = re.compile(r"\n\s*###\s")
_NOT_WORD = re.compile(r"[^\w]+")


@dataclass(frozen=True)
class Join:
    """What a draft does with a stored memory: ``repeat`` (joins it) or ``update`` (links to it)."""

    kind: str
    bucket: Bucket
    similarity: float


def own_words(body: str) -> str:
    """A body's first part: the user's words, without the context sections after them."""
    return _SECTION.split(body, maxsplit=1)[0].strip()


def _units(text: str) -> set[str]:
    t = _NOT_WORD.sub(" ", fold(text))
    cjk = "".join(CJK_RE.findall(t))
    grams = {cjk[i:i + 2] for i in range(len(cjk) - 1)} or ({cjk} if cjk else set())
    words = {w for w in CJK_RE.sub(" ", t).split() if w}
    return grams | words


def similarity(a: str, b: str) -> float:
    """Dice overlap of two texts' CJK bigrams and Latin words (1.0: the same words)."""
    x, y = _units(a), _units(b)
    if not x or not y:
        return 1.0 if fold(a).strip() == fold(b).strip() else 0.0
    return 2 * len(x & y) / (len(x) + len(y))


def find_join(words: str, layer: str, stored: Iterable[Bucket], cfg: WriterModelConfig) -> Join | None:
    """The stored memory a draft repeats or updates (same layer, most alike), or None: write it as new."""
    best: Join | None = None
    for b in stored:
        if b.memory_layer != layer or b.archived or b.type not in ("dynamic", "permanent"):
            continue
        s = similarity(words, own_words(b.body or b.title))
        if best is None or s > best.similarity:
            best = Join("repeat" if s >= cfg.join_similarity else "update", b, s)
    if best is None or best.similarity < min(cfg.update_similarity, cfg.join_similarity):
        return None
    return best
