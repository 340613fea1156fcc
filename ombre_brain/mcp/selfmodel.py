"""``I``: the self-model, written slowly (design §19; the rules are :mod:`ombre_brain.kinds.selfmodel`).

``I(content)`` writes a candidate, an ordinary memory about yourself ("我觉得…"); each ``dream()``
shows it and records the day; ``I(promote=id)`` makes it a formal entry once it was seen on three
different dates (with ``content``, in refined words). ``I()`` or ``I(read=True)`` lists the formal
entries and the candidates still waiting. Formal entries never surface in recall; ``breath()``
carries the newest three.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ..kinds.fields import ASPECTS, kind_part
from ..kinds.selfmodel import PROMOTE_AFTER
from .access import Call
from .format import Reply, quote, self_lines
from .registry import Bool, Int, Space, tool

__all__ = ["I"]


@tool(f"""The self-model: what you come to know about yourself. I(content) writes a candidate, an ordinary memory
      that dreams return to; I(promote=id) makes it a formal entry once dreams have seen it on {PROMOTE_AFTER} different
      dates; I() or I(read=True) lists both. Formal entries never surface in recall; breath() carries the newest
      three. aspect: {', '.join(ASPECTS)}.""")
def I(  # noqa: E743  (Ombre-Brain's tool name)
    call: Call,
    content: Annotated[str, Field(description="what you have come to think about yourself (a candidate), or, with "
                                              "promote, the formal entry's refined words")] = "",
    aspect: Annotated[str, Field(description=", ".join(ASPECTS))] = "",
    read: Annotated[Bool, Field(description="list the entries")] = False,
    limit: Annotated[Int, Field(description="formal entries listed, 1-100")] = 20,
    promote: Annotated[str, Field(description="the id of a candidate to make a formal entry")] = "",
    space: Space = None,
) -> Reply:
    space = call.space(space)
    sm = call.brain.self_model
    if promote:
        entry, cand = sm.promote(space, promote, content=content, aspect=aspect)
        text = (f"promoted {cand.id} → formal entry {entry.id} · space {space} · {quote(entry.body, 160)}. "
                "It will not surface in recall; breath() carries the newest three.")
        return Reply(text, {"tool": "I", "space": space, "action": "promoted", "bucket_id": entry.id,
                            "candidate_id": cand.id, "self": kind_part(entry, "self")})
    if content.strip() and not read:
        cand = sm.write(space, content, aspect=aspect)
        text = (f"candidate held → {cand.id} · space {space} · {quote(cand.body, 160)}. It lives as an ordinary "
                "memory; "
                f"dream() returns to it, and after dreams on {PROMOTE_AFTER} different dates I(promote=\"{cand.id}\") "
                "can make it part of who you are.")
        return Reply(text, {"tool": "I", "space": space, "action": "candidate", "bucket_id": cand.id,
                            "self": kind_part(cand, "self")})
    if not 1 <= limit <= 100:
        limit = max(1, min(100, limit))
        call.note(f"limit is 1-100; used {limit}")
    formal, waiting = sm.formal(space), sm.candidates(space)
    lines = [f"I · space {space}: {len(formal)} formal entr{'ies' if len(formal) != 1 else 'y'}, "
             f"{len(waiting)} candidate{'s' if len(waiting) != 1 else ''} settling"]
    if formal:
        lines += ["formal:", *self_lines(formal[:limit])]
    if waiting:
        lines += ["candidates:", *self_lines(waiting)]
    return Reply("\n".join(lines), {"tool": "I", "space": space, "action": "read",
                                    "formal": [_row(b) for b in formal[:limit]],
                                    "candidates": [_row(b) for b in waiting]})


def _row(b) -> dict:
    return {"bucket_id": b.id, "content": b.body, "created": b.created, **(kind_part(b, "self") or {})}
