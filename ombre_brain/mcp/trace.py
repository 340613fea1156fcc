"""``trace``: edit, pin, archive, restore, reinforce, link or purge one memory (design §10, §15).

As in Ombre-Brain, ``-1`` and ``""`` mean "no change", and ``delete=True`` is recoverable: it
archives the memory (our archive layer: found only by an explicit old lookup or by its id) and
tags it ``ombre:deleted``; ``restore=True`` brings it back. ``hard_delete=True`` is our purge:
the memory is forgotten everywhere and the reply carries the signed receipt, which
``ombre-brain verify-receipt --data DIR FILE`` checks.

One call makes one change of state: an edit (``Brain.update``, one atomic write of every field
given), a link (``Brain.link``), or a purge (``Brain.purge``). Everything is validated before
anything is written, so a bad argument never leaves half an edit behind.

On a plan, ``status`` and ``weight`` change it as Ombre-Brain's trace does (each a line of the
plan's history, which the reply shows). ``anchor=1`` passes the cap of 24 anchors per space that
``anchor()`` keeps. A letter is refused: its words never change, and only ``letter_lock_update``
changes its lock.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from ..errors import NotFoundError, ValidationError
from ..forget.purge import answer
from ..kinds.fields import PLAN_STATUSES
from ..memory_layers import infer_layer
from ..store.edges import RELATIONS
from ..timeutil import now_utc
from .access import Call
from .format import Reply, history_lines, quote
from .registry import Bool, Flag, Int, Number, Space, Tags, tag_list, tool

__all__ = ["trace"]

FLAGS = ("pinned", "protected", "anchor", "resolved", "digested")
DELETED_TAG = "ombre:deleted"
HIDDEN_TAG = "ombre:dont_surface"
SYSTEM_TAGS = ("domain:", "ombre:", "ombre_", "grow_batch:")
"""Tags that record where a memory came from; ``tags=`` replaces the others and keeps these."""
TRACE_UNUSED = {
    "meaning_replace": "meanings are comments and are only appended (meaning_append)",
    "media_append": "media files are not stored",
    "media_replace": "media files are not stored",
    "deletion_request_id": "there is no deletion-request queue; trace(hard_delete=True) purges at once",
    "deletion_decision": "there is no deletion-request queue",
    "deletion_ai_reason": "there is no deletion-request queue",
}


def _flag(name: str, value: Any) -> bool | None:
    """Ombre-Brain's -1 / 0 / 1 (or a bool): None for no change."""
    if value is None or (value == -1 and not isinstance(value, bool)):
        return None
    if value in (0, 1):
        return bool(value)
    raise ValidationError(f"expected -1 (no change), 0 or 1, got {value!r}", field=name)


@tool("""Change one memory: edit it, pin it, archive it (delete=True, recoverable), restore it, reinforce it,
      link it, or purge it for good (hard_delete=True, with a signed receipt). The reply says which happened.""",
      destructive=True, hidden=TRACE_UNUSED)
def trace(
    call: Call,
    bucket_id: str,
    name: Annotated[str, Field(description="new title")] = "",
    title: Annotated[str, Field(description="new title")] = "",
    content: Annotated[str, Field(description="new body")] = "",
    old_str: Annotated[str, Field(description="replace this exact text in the body…")] = "",
    new_str: Annotated[str | None, Field(description="…with this")] = None,
    tags: Tags = "",
    domain: Tags = "",
    importance: Annotated[Int, Field(description="1-10; -1 no change")] = -1,
    valence: Annotated[Number, Field(description="0-1; -1 no change")] = -1,
    arousal: Annotated[Number, Field(description="0-1; -1 no change")] = -1,
    pinned: Flag = -1, protected: Flag = -1, anchor: Flag = -1, resolved: Flag = -1, digested: Flag = -1,
    dont_surface: Annotated[Flag, Field(description="1 (or true): archive it quietly; 0 (or false): let it surface "
                                                    "again")] = -1,
    delete: Annotated[Bool, Field(description="archive it (recoverable with restore=True)")] = False,
    restore: Annotated[Bool, Field(description="bring an archived memory back")] = False,
    hard_delete: Annotated[Bool, Field(description="forget it for good; returns a signed receipt")] = False,
    delete_reason: str = "",
    reinforce: Annotated[Bool, Field(description="it came up again: count one more activation")] = False,
    link_to: Annotated[str, Field(description="a bucket id to link this memory to")] = "",
    relation: Annotated[str, Field(description="same_event, context_of, evidenced_by, relates_to, "
                                               "old_version, conflict")] = "relates_to",
    why_remembered: str = "",
    meaning_append: str = "",
    meaning_replace: Annotated[str | None, Field(description="Ombre-Brain's; not used here: "
                                                             + TRACE_UNUSED["meaning_replace"])] = None,
    media_append: Annotated[Any, Field(description="Ombre-Brain's; not used here: "
                                                   + TRACE_UNUSED["media_append"])] = None,
    media_replace: Annotated[Any, Field(description="Ombre-Brain's; not used here: "
                                                    + TRACE_UNUSED["media_replace"])] = None,
    event_time: Annotated[str, Field(description="ISO-8601 with offset; \\clear removes it")] = "",
    status: Annotated[str, Field(description="a plan's status: active, resolved or abandoned")] = "",
    weight: Annotated[Number, Field(description="a plan's weight, 0-1; -1 no change")] = -1,
    space: Space = None,
) -> Reply:
    space = call.space(space)
    brain = call.brain
    if not isinstance(bucket_id, str) or not bucket_id.strip():
        raise ValidationError("is required: the id of the memory to change", field="bucket_id")
    call.unused(TRACE_UNUSED)
    if delete and restore:
        raise ValidationError("delete and restore contradict each other; send one", field="restore")
    if getattr(brain.get(space, bucket_id), "type", None) == "letter":
        raise ValidationError("is a letter: letters are kept whole; letter_lock_update changes only its lock, and "
                              "`ombre-brain purge` or POST /v1/purge forgets it", field="bucket_id")
    if hard_delete:
        edits = [k for k in call.raw if call.given(k) and k not in ("bucket_id", "hard_delete", "delete",
                                                                    "delete_reason", "space", "relation")]
        if edits:
            raise ValidationError(f"purges the memory, so it cannot be combined with {', '.join(sorted(edits))}; "
                                  "send the edit in another call", field="hard_delete")
        return _purge(call, space, bucket_id)
    current = brain.get(space, bucket_id)
    if current is None:
        raise NotFoundError(f"no bucket {bucket_id!r} in space {space!r}")
    plan_change = _plan_change(call, current, status, weight)
    if _flag("anchor", anchor) and not current.anchor:
        brain.anchors.require_room(space, bucket_id)  # the cap of 24 holds here as in anchor()
    if link_to:
        if relation not in RELATIONS:
            raise ValidationError(f"expected one of {', '.join(RELATIONS)}, got {relation!r}", field="relation")
        if brain.get(space, link_to) is None:
            raise NotFoundError(f"link_to: no bucket {link_to!r} in space {space!r}")
    changes, did = _changes(call, current, {
        "title": title or name, "content": content, "old_str": old_str, "new_str": new_str, "tags": tags,
        "domain": domain, "importance": importance, "valence": valence, "arousal": arousal, "pinned": pinned,
        "protected": protected, "anchor": anchor, "resolved": resolved, "digested": digested,
        "dont_surface": dont_surface, "delete": delete, "restore": restore, "delete_reason": delete_reason,
        "reinforce": reinforce, "why_remembered": why_remembered, "meaning_append": meaning_append,
        "event_time": event_time})
    if plan_change:
        current = brain.plans.change(space, bucket_id, by="trace", **plan_change)
        did += [f"plan {k} {v}" for k, v in plan_change.items()]
    if not changes and not link_to and not plan_change:
        raise ValidationError("nothing to change: give a field to edit, delete=True, restore=True, reinforce=True, "
                              "link_to=… or hard_delete=True", field="bucket_id")
    bucket = brain.update(space, bucket_id, **changes) if changes else current
    if link_to:
        brain.link(space, from_id=bucket_id, to_id=link_to, relation=relation)
        did.append(f"linked to {link_to} ({relation})")
    layer = infer_layer(bucket, call.config).layer
    action = "archived" if delete else "restored" if restore else "linked" if link_to and not changes else \
        "plan_status" if plan_change and not changes else "edited"
    text = (f"{action} {bucket_id} · space {space} · {quote(bucket.title)} · layer {layer}: " + "; ".join(did))
    if delete:
        text += (f". Recoverable: trace(bucket_id=\"{bucket_id}\", restore=True) brings it back; "
                 "hard_delete=True would forget it for good")
    if bucket.type == "plan":
        text += "\nits history:\n" + "\n".join(history_lines(bucket))
    return Reply(text, {"tool": "trace", "space": space, "bucket_id": bucket_id, "action": action, "done": did,
                        "layer": layer, "bucket": bucket.to_dict()})


def _plan_change(call: Call, current, status: str, weight: float) -> dict[str, Any]:
    """A plan's status and weight, as Ombre-Brain's trace sets them (noted, not errors, on another memory)."""
    out: dict[str, Any] = {}
    if current.type != "plan":
        for name in ("status", "weight"):
            if call.given(name):
                call.note(f"{name} applies to plans only; {current.id} is not a plan")
        return out
    if status:
        if status not in PLAN_STATUSES:
            raise ValidationError(f"expected one of {', '.join(PLAN_STATUSES)}, got {status!r}", field="status")
        out["status"] = status
    if weight is not None and weight != -1:
        if not 0 <= weight <= 1:
            raise ValidationError(f"expected 0-1 (-1 no change), got {weight}", field="weight")
        out["weight"] = float(weight)
    return out


def _changes(call: Call, current, args: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The update that the arguments ask for, and a line per change for the reply."""
    changes: dict[str, Any] = {}
    did: list[str] = []
    if args["title"]:
        changes["title"] = args["title"]
        did.append("title changed")
    body = current.body
    if args["content"]:
        body = args["content"]
        did.append("body replaced")
    if args["old_str"]:
        n = body.count(args["old_str"])
        if n != 1:
            raise ValidationError(f"occurs {n} times in the body; it must occur exactly once", field="old_str")
        if args["new_str"] is None:
            raise ValidationError("is required with old_str (\"\" deletes the text)", field="new_str")
        body = body.replace(args["old_str"], args["new_str"], 1)
        did.append("body edited")
    if body != current.body:
        changes["body"] = body
    tags = list(current.tags)
    if call.given("tags"):
        tags = [t for t in tags if t.startswith(SYSTEM_TAGS)]
        tags += tag_list(args["tags"], "tags")
        did.append("tags replaced")
    if call.given("domain"):
        tags = [t for t in tags if not t.startswith("domain:")] + [f"domain:{d}" for d in tag_list(args["domain"],
                                                                                               "domain")]
        did.append("domain replaced")
    for name in ("importance", "valence", "arousal"):
        if args[name] is not None and args[name] != -1:
            changes[name] = args[name]
            did.append(f"{name} {args[name]:g}")
    for name in FLAGS:
        value = _flag(name, args[name])
        if value is not None:
            changes[name] = value
            did.append(f"{name} {'on' if value else 'off'}")
    hidden = _flag("dont_surface", args["dont_surface"])
    if hidden is not None:
        changes["archived"] = hidden
        tags = [t for t in tags if t != HIDDEN_TAG] + ([HIDDEN_TAG] if hidden else [])
        did.append("kept from surfacing (archived)" if hidden else "allowed to surface again")
    if args["delete"]:
        changes["archived"] = True
        tags = [t for t in tags if t != DELETED_TAG] + [DELETED_TAG]
        did.append("archived (recoverable)")
    if args["restore"]:
        changes["archived"] = False
        tags = [t for t in tags if t not in (DELETED_TAG, HIDDEN_TAG)]
        did.append("restored from the archive" if current.archived else "restore: it was not archived")
    if tags != list(current.tags):
        changes["tags"] = tags
    comments = [{"author": c.author, "created": c.created, "content": c.content} for c in current.comments]
    for author, text in (("ombre:why_remembered", args["why_remembered"]), ("ombre:meaning", args["meaning_append"]),
                         ("ombre:delete_reason", args["delete_reason"] if args["delete"] else "")):
        if text:
            comments.append({"author": author, "content": text})
            did.append(f"{author.removeprefix('ombre:')} noted")
    if len(comments) != len(current.comments):
        changes["comments"] = comments
    if args["delete_reason"] and not args["delete"]:
        call.note("delete_reason is kept only with delete=True (a purge keeps nothing)")
    if args["event_time"]:
        changes["event_time"] = None if args["event_time"] in ("\\clear", "clear") else args["event_time"]
        did.append("event_time cleared" if changes["event_time"] is None else "event_time set")
    if args["reinforce"]:
        changes["activation_count"] = current.activation_count + 1
        changes["last_active"] = now_utc().isoformat()
        did.append(f"reinforced (activation {current.activation_count + 1})")
    return changes, did


def _purge(call: Call, space: str, bucket_id: str) -> Reply:
    receipt = call.brain.purge(space, bucket_ids=[bucket_id])
    payload = receipt["payload"]
    gone = payload.get("deleted", {}).get("buckets", 0)
    what = (f"purged {bucket_id} for good ({gone} bucket{'s' if gone != 1 else ''} removed, with its moments, "
            "edges and session traces)" if gone else f"nothing held {bucket_id} any more (already purged or never "
                                                       "there); the receipt records the purge")
    text = (f"{what} · space {space}. Signed receipt {payload['purge_id']} (key {payload['kid']}): save the "
            "structured content's `receipt` as a file and check it with `ombre-brain verify-receipt --data DIR FILE`.")
    out = answer(receipt)
    return Reply(text, {"tool": "trace", "space": space, "bucket_id": bucket_id, "action": out["status"],
                        "receipt": out})
