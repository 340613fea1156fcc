"""``anchor`` and ``release``: mark an existing memory as a coordinate, or let it go (design §19).

An anchor does not surface unasked (not in ``breath()``, not in automatic Recent Context) but
search finds it; a space holds at most 24 (Ombre-Brain's hard cap), and the 25th is a tool error
(``anchor_cap``) until one is released. ``release`` only clears the flag: pinned, importance and
everything else stay. How the flag relates to the ``long_term_anchor`` layer is in
:mod:`ombre_brain.kinds.anchors`.
"""

from __future__ import annotations

from ..kinds.anchors import ANCHOR_LIMIT
from ..memory_layers import infer_layer
from .access import Call
from .format import Reply, quote
from .registry import Space, tool

__all__ = ["anchor", "release"]


def _reply(call: Call, tool_name: str, space: str, bucket, changed: bool, count: int, did: str, same: str) -> Reply:
    layer = infer_layer(bucket, call.config).layer
    text = (f"{did if changed else same} {bucket.id} · space {space} · {quote(bucket.title)} · layer {layer} · "
            f"anchors {count}/{ANCHOR_LIMIT}")
    return Reply(text, {"tool": tool_name, "space": space, "bucket_id": bucket.id, "changed": changed,
                        "anchor": bucket.anchor, "layer": layer, "anchors": count, "limit": ANCHOR_LIMIT})


@tool(f"""Mark an existing memory (hold it first) as an anchor: a coordinate that defines who you are together. It
      does not surface unasked, but search finds it. At most {ANCHOR_LIMIT} per space: release one to add another.""")
def anchor(call: Call, bucket_id: str, space: Space = None) -> Reply:
    space = call.space(space)
    bucket, changed, count = call.brain.anchors.anchor(space, bucket_id)
    return _reply(call, "anchor", space, bucket, changed, count, "anchored", "already an anchor:")


@tool("Release an anchor: the memory may surface normally again; pinned, importance and the rest stay.")
def release(call: Call, bucket_id: str, space: Space = None) -> Reply:
    space = call.space(space)
    bucket, changed, count = call.brain.anchors.release(space, bucket_id)
    return _reply(call, "release", space, bucket, changed, count, "released", "was not an anchor:")
