"""The topic in play: what the session recalled in its last rounds, carried while the conversation stays on it.

Through the proxy a memory recalled two messages ago is not in the client's history (the proxy adds it to one
request only), and a cooldown keeps it out of Recalled Memory for the next ``gateway.skip_recent_rounds``
rounds so that it is not repeated unasked. Neither may leave a follow-up unanswered ("它后来好了吗", "how is
she now?", the same lookup asked again): cooldowns keep a memory from resurfacing, not from being answered.
So a memory recalled in the session's last ``gateway.carry_rounds`` rounds is **carried**, in the compact
form Recent Context uses, while the conversation is still on it: the message points back (``anaphoric``) or
says one of its words. Carrying re-reads nothing and re-ranks nothing; the Recalled Memory of the turn stays
what the gates admitted this turn. A message that points back also searches with the carried memories' words
(:func:`with_carried_topic`): "它前阵子是不是住过院" after the rabbit was recalled is about the rabbit.

Pure: the session state, the plan and the buckets in; ids and a plan out (with the dictionary on, English words are
read through the process's dictionary bridge, a fixed table).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence

from ..buckets import Bucket
from ..recall_types import QueryPlan, SessionState
from ..retrieval.dict_evidence import names_thing
from ..retrieval.dictionary import bridge as dictionary_bridge
from ..retrieval.lexical import names_a_thing
from ..text import CJK_RE

__all__ = ["CARRIED_FROM", "carried_ids", "on_topic", "points_back", "says_a_term", "with_carried_topic"]

CARRIED_TOPIC = 3
"""How many of the carried memories, the most recent first, a message that points back takes its words from."""
CARRIED_TERMS = 12
"""The words a message that points back takes from each memory it points back to (:func:`with_carried_topic`)."""
CARRIED_FROM = ("recalled_memory", "diffused_memory")
"""The sections a carried memory was recalled into (Recent Context and the side sections carry themselves)."""
PERSONS = frozenset({"he", "she", "him", "her", "his", "hers", "they", "them", "their"})
"""English pronouns that point at a person the conversation named (:func:`points_back`)."""


def carried_ids(state: SessionState, rounds: int) -> list[str]:
    """Memories this session recalled in its last ``rounds`` rounds, the most recent first."""
    if rounds <= 0:
        return []
    recent = [(r, bid) for bid, (r, _at) in state.injected.items()
              if state.shown_in.get(bid) in CARRIED_FROM and 0 < state.round - r <= rounds]
    return [bid for _r, bid in sorted(recent, key=lambda x: (-x[0], x[1]))]


def on_topic(plan: QueryPlan, bucket: Bucket, *, dictionary: bool = False) -> bool:
    """Is the conversation still on this memory: the message points back, or says one of its words?"""
    if plan.skip_reason and not plan.anaphoric:
        return False
    return says_a_term(plan, bucket) or points_back(plan, dictionary=dictionary)


def says_a_term(plan: QueryPlan, bucket: Bucket) -> bool:
    """Does the memory's text hold one of the message's terms (of two characters or more)?"""
    terms = plan.topic_terms
    if not terms:
        return False
    text = bucket.evidence_lower
    return any(t in text for t in terms)


def points_back(plan: QueryPlan, *, dictionary: bool = False) -> bool:
    """Does the message point back to the topic in play ("那她现在怎么样了")? Not when it names a thing of its own:
    "豆包最近怎么样" is about the dog and "讲讲给猫洗澡那天" about that day, whatever was said before.

    With the dictionary (``retrieval.dictionary``) the same holds for an English message whose only pointer is an
    impersonal one ("it", "that", "there"): "when was it that my mom went to a concert?" is about the concert; its
    words name things as admission reads them (most of their Chinese headwords are nouns). A person pointed at
    ("he already bought her a onesie") is somebody the conversation named: that message still points back."""
    if not plan.anaphoric:
        return False
    if any(CJK_RE.search(t) and names_a_thing(t) for t in plan.terms):
        return False
    if not dictionary or PERSONS.intersection(re.findall(r"[a-z]+", (plan.query or plan.normalized).lower())):
        return True
    bridge = dictionary_bridge()
    return not any(not CJK_RE.search(t) and names_thing(t, bridge, names_a_thing) for t in plan.terms)


def with_carried_topic(plan: QueryPlan, buckets: Sequence[Bucket], tokens: Callable[[str], list[str]], *,
                       dictionary: bool = False) -> QueryPlan:
    """A message that points back searches with the words of the memories it points back to (the ``CARRIED_TOPIC``
    most recent), at full weight."""
    if not points_back(plan, dictionary=dictionary) or not buckets:
        return plan
    buckets = buckets[:CARRIED_TOPIC]
    have = {t for t, _w in plan.context_terms} | set(plan.terms)
    extra: dict[str, float] = {}
    for b in buckets:  # its title's words first (what it is about), then its text's, at most CARRIED_TERMS of them:
        mine = 0       # every word of a long memory would make each later match weigh them all
        for t in tokens(f"{b.title}\n{b.main_text}"):
            t = t.strip().lower()
            if mine >= CARRIED_TERMS:
                break
            if len(t) >= 2 and t not in have and t not in extra:
                extra[t] = 1.0
                mine += 1
    if not extra:
        return plan
    return dataclasses.replace(plan, context_terms=(*plan.context_terms, *extra.items()))
