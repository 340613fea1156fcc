"""Implicit recall: the things a statement names (design §13, route 2c of admission).

"同事给我带了一大杯芒果冰沙" asks nothing, yet a companion that knows "我对芒果过敏" should have it in mind.
Coverage cannot see it: a statement is mostly about other things (同事, 冰沙), so the mango is a quarter of its
weight. The route reads the store's own words, not a word list: a key term of the message (at least
``KEY_SHARE`` of its heaviest own term) that names a thing (jieba tags it a noun; an English word, when the
dictionary reads most of its headwords as nouns) and is written in a memory's title or tags, which say what the
memory is about (:func:`~.admission.mentioned`). It is stricter than a lookup where that matters: never for a
memory tagged sensitive (admission refuses those first), never against a dictionary conflict, only for the
weighed candidates, and at most ``retrieval.max_unasked`` a turn (the direct seed gate).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .dict_evidence import KEY_SHARE
from .lexical import names_a_thing


def key_things(groups: Sequence[tuple[frozenset[str], float]], own: int | None,
               thing: Callable[[str], bool] = names_a_thing) -> tuple[str, ...]:
    """The message's own key terms that name things, heaviest first (the conversation's terms are no mention)."""
    mine = groups[:own] if own is not None else groups
    if not mine:
        return ()
    top = max(w for _, w in mine)
    keys = sorted(((w, t) for g, w in mine if w >= KEY_SHARE * top for t in g), key=lambda p: (-p[0], p[1]))
    return tuple(t for _, t in keys if thing(t))
