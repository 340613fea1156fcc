"""``hold`` and ``grow``: writing memories with Ombre-Brain's arguments (design §3, §15).

Ombre-Brain's fields map onto ours as the importer maps them (:mod:`ombre_brain.portability.ombre_md`):
``content`` is the body, verbatim; ``domain`` entries become ``domain:<name>`` tags;
``why_remembered`` / ``meaning`` / ``quotes`` become comments by ``ombre:why_remembered``,
``ombre:meaning`` and ``ombre:quote``; ``-1`` means "not given". Without a title, the first
sentence is the title; without valence and arousal, the cue words of the text give them (the
planner's affect rows), else the neutral defaults; the writer hints come from the rule-based
classifier as for every write. Every memory is validated before any is written.

After a write, every active plan the new memories say happened is closed (the rule is
:mod:`ombre_brain.kinds.closure`), and the reply names each one. ``grow(content, items)`` keeps
``content`` as a source record and points each item with ``source_ranges`` at its lines, which
``source_read`` reads back.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from pydantic import Field

from ..buckets import new_id
from ..errors import NotFoundError, UpstreamError, ValidationError
from ..memory_layers import infer_layer
from ..timeutil import iso, now_utc
from .access import Call
from .format import Reply, quote
from .registry import Bool, Int, Number, Space, Tags, tag_list, tool
from .split import Piece, derive_title, split_by_llm, split_by_rules

__all__ = ["grow", "hold", "memory_fields"]

HOLD_UNUSED = {
    "media": "media files are not stored; describe them in the content",
    "test_data": "there is no test-data flag; purge test memories with trace(hard_delete=True)",
    "source_content": "the source text is not kept apart; grow(content=…, items=[…]) keeps it as a source record",
    "source_ranges": "hold keeps no source; grow(content=…, items=[{…, source_ranges}]) does",
    "references": "link memories with trace(bucket_id, link_to=…)",
}
GROW_UNUSED = {"test_data": HOLD_UNUSED["test_data"]}
AFFECT_CHARS = 2000  # what the planner reads of a text (recall_policy.MAX_QUERY_CHARS): cue words near its start
ITEM_KEYS = frozenset({"title", "name", "content", "tags", "importance", "domain", "valence", "arousal",
                       "why_remembered", "meaning", "quotes", "event_time", "source_ranges"})


def _comments(why: Any, meaning: Any, quotes: Any) -> list[dict]:
    out = []
    for author, value in (("ombre:why_remembered", why), ("ombre:meaning", meaning)):
        if isinstance(value, str) and value.strip():
            out.append({"author": author, "content": value.strip()})
        elif isinstance(value, list):
            out += [{"author": author, "content": v.strip()} for v in value if isinstance(v, str) and v.strip()]
    for q in quotes if isinstance(quotes, list) else []:
        text = q.get("text") if isinstance(q, dict) else q
        if isinstance(text, str) and text.strip():
            out.append({"author": "ombre:quote", "content": text.strip()})
    return out


def memory_fields(call: Call, *, content: Any, title: Any = "", tags: Any = "", domain: Any = "",
                  importance: Any = -1, valence: Any = -1, arousal: Any = -1, why_remembered: Any = "",
                  meaning: Any = None, quotes: Any = None, event_time: Any = "", field: str = "content") -> dict:
    """Ombre-Brain's arguments as design §3 fields (Brain.write validates the values, as on the HTTP API)."""
    if not isinstance(content, str) or not content.strip():
        raise ValidationError("is required: the text to remember", field=field)
    if title not in (None, "") and not isinstance(title, str):
        raise ValidationError("expected a string", field="title")
    fields: dict[str, Any] = {"title": (title or "").strip() or derive_title(content), "body": content}
    fields["tags"] = tag_list(tags, "tags") + [f"domain:{d}" for d in tag_list(domain, "domain")]
    if importance not in (None, -1):
        fields["importance"] = importance
    affect = None
    for name, value in (("valence", valence), ("arousal", arousal)):
        if value not in (None, -1):
            fields[name] = value
        else:
            affect = affect or call.brain.policy.plan_query(content[:AFFECT_CHARS])
            cue = affect.query_valence if name == "valence" else affect.query_arousal
            if cue is not None:
                fields[name] = cue
    if affect is not None and len(content) > AFFECT_CHARS:  # said, not hidden: the rest was not read for it
        call.note(f"{field}: valence and arousal were read from the cue words of the first {AFFECT_CHARS:,} of "
                  f"{len(content):,} characters; pass valence and arousal to set them for the whole text")
    comments = _comments(why_remembered, meaning, quotes)
    if comments:
        fields["comments"] = comments
    if event_time not in (None, ""):
        fields["event_time"] = event_time
    return fields


@tool("""Remember one thing. Without a title the first sentence is used; an identical memory is not stored
      twice.""", hidden=("quotes", *HOLD_UNUSED))
def hold(
    call: Call,
    content: Annotated[str, Field(description="the memory, verbatim")],
    title: str = "",
    tags: Tags = "",
    importance: Annotated[Int, Field(description="1-10")] = 5,
    valence: Annotated[Number, Field(description="0 painful .. 1 sweet; -1 = from cue words")] = -1,
    arousal: Annotated[Number, Field(description="0 calm .. 1 intense; -1 = from cue words")] = -1,
    pinned: Annotated[Bool, Field(description="core memory: always held in mind")] = False,
    feel: Annotated[Bool, Field(description="a feeling about another memory (source_bucket)")] = False,
    source_bucket: str = "",
    domain: Tags = "",
    why_remembered: str = "",
    meaning: Annotated[str | list[str] | None,
                       Field(description="why it is worth remembering, first person (kept as a comment)")] = None,
    media: Annotated[Any, Field(description="Ombre-Brain's; not used here: " + HOLD_UNUSED["media"])] = None,
    test_data: Annotated[Bool, Field(description="Ombre-Brain's; not used here: " + HOLD_UNUSED["test_data"])] = False,
    event_time: Annotated[str, Field(description="when it happened, ISO-8601 with offset")] = "",
    space: Space = None,
) -> Reply:
    """Store one memory (Ombre-Brain's ``hold``); an identical memory already held is not written twice."""
    space = call.space(space)
    brain = call.brain
    fields = memory_fields(call, content=content, title=title, tags=tags, domain=domain, importance=importance,
                           valence=valence, arousal=arousal, why_remembered=why_remembered,
                           meaning=meaning, quotes=call.raw.get("quotes"), event_time=event_time)
    if feel:
        fields["type"] = "feel"
        if source_bucket:
            if brain.get(space, source_bucket) is None:
                raise NotFoundError(f"no bucket {source_bucket!r} in space {space!r}")
            fields["tags"].append(f"ombre_source:{source_bucket}")
        call.note("feel=True: stored as a feel bucket (affect context, shown beside its parent memory, never alone); "
                  "the source memory is not marked digested")
    elif source_bucket:
        call.note("source_bucket only applies with feel=True")
    if pinned:
        fields["pinned"] = True
    call.unused(HOLD_UNUSED)
    now = now_utc()
    bid = brain.write(space, now=now, **fields)
    closed = _close_plans(call, space, [bid])
    bucket = brain.get(space, bid)
    layer = infer_layer(bucket, call.config).layer
    fresh = bucket.created == iso(now)
    verb = "held" if fresh else "already held (an identical memory exists; nothing new was written)"
    text = (f"{verb} → {bid} · space {space} · {quote(bucket.title)} · layer {layer} · importance "
            f"{bucket.importance} · valence {bucket.valence:g} · arousal {bucket.arousal:g}")
    return Reply(text, {"tool": "hold", "space": space, "bucket_id": bid, "created": fresh, "title": bucket.title,
                        "layer": layer, "type": bucket.type, "tags": list(bucket.tags),
                        "memory_layer": bucket.memory_layer, "memory_subject": bucket.memory_subject,
                        "closed_plans": closed})


def _close_plans(call: Call, space: str, ids: list[str]) -> list[dict]:
    """Close the active plans these new memories say happened (kinds/closure.py), each named in the notes."""
    closed = call.brain.plans.close_by(space, ids)
    for c in closed:
        call.note(f"closed plan {c['plan_id']} ({quote(c['title'])}): {c['reason']} (memory {c['memory_id']}; "
                  "the plan's history keeps why)")
    return closed


def _ranges(i: int, item: Any, lines: int) -> dict | None:
    """An item's ``source_ranges`` (1-based, inclusive, within ``lines``) as one ``source_ref`` span."""
    raw = item.get("source_ranges") if isinstance(item, dict) else None
    if raw in (None, [], ()):
        return None
    where = f"items[{i}].source_ranges"
    if not lines:
        raise ValidationError("needs content: the shared source text the ranges point into", field=where)
    if not isinstance(raw, list) or not all(isinstance(r, list | tuple) and len(r) == 2 and all(
            isinstance(n, int) and not isinstance(n, bool) for n in r) for r in raw):
        raise ValidationError("expected [[start, end], …], 1-based line numbers", field=where)
    for a, b in raw:
        if not 1 <= a <= b <= lines:
            raise ValidationError(f"[{a}, {b}] is not within the source's lines 1-{lines}", field=where)
    return {"start_line": min(a for a, _ in raw), "end_line": max(b for _, b in raw), "spans": len(raw)}


def _pieces(call: Call, content: str) -> tuple[list[Piece], str]:
    """The pieces of a text and how they were cut: ``llm`` or ``rules``."""
    cfg, brain = call.config, call.brain
    g = cfg.mcp.grow
    upstream = brain.gateway.upstream
    if g.llm and upstream.configured and len(content.strip()) >= g.short_chars:
        try:
            return split_by_llm(upstream, content, model=cfg.upstream.model, min_items=g.min_items,
                                max_items=g.max_items, max_chars=cfg.store.max_body_chars), "llm"
        except UpstreamError as exc:
            call.note(f"the upstream LLM could not split the text ({exc.message}); split by paragraphs and topics")
    return split_by_rules(content, tokenize=brain.tokenize, min_items=g.min_items, max_items=g.max_items,
                          short_chars=g.short_chars), "rules"


def _item(call: Call, i: int, item: Any) -> dict:
    if isinstance(item, str):
        return memory_fields(call, content=item, field=f"items[{i}]")
    if not isinstance(item, dict):
        raise ValidationError("expected a string or an object with content", field=f"items[{i}]")
    extra = sorted(set(item) - ITEM_KEYS)
    if extra:
        call.note(f"items[{i}]: ignored {', '.join(extra)}")
    return memory_fields(call, content=item.get("content"), title=item.get("title") or item.get("name") or "",
                         tags=item.get("tags"), domain=item.get("domain"), importance=item.get("importance", -1),
                         valence=item.get("valence", -1), arousal=item.get("arousal", -1),
                         why_remembered=item.get("why_remembered"), meaning=item.get("meaning"),
                         quotes=item.get("quotes"), event_time=item.get("event_time"), field=f"items[{i}].content")


@tool("""File a longer text as 2-6 memories, cut at paragraph and topic boundaries (by the upstream LLM when one
      is configured). All are validated before any is stored.""", hidden=GROW_UNUSED)
def grow(
    call: Call,
    content: Annotated[str, Field(description="a longer text (a diary entry, a day) to file")] = "",
    items: Annotated[list[str | dict[str, Any]] | None,
                     Field(description="already split memories: strings or {title, content, tags, …}")] = None,
    space: Space = None,
) -> Reply:
    """File a longer text as several memories (Ombre-Brain's ``grow``), all validated before any is written."""
    space = call.space(space)
    batch = f"g_{uuid.uuid4().hex[:12]}"
    cap = call.config.mcp.grow.max_given_items
    if items and len(items) > cap:
        raise ValidationError(f"has {len(items)} memories; one grow files at most {cap} (Ombre-Brain cuts a text "
                              f"into 2-6; mcp.grow.max_given_items): send the rest in another call", field="items")
    if items:
        rows, how = [_item(call, i, it) for i, it in enumerate(items)], "items"
        shared = content if isinstance(content, str) and content.strip() else ""
        source_id = new_id()
        for i, (row, it) in enumerate(zip(rows, items, strict=True)):
            span = _ranges(i, it, len(shared.splitlines()))
            if span is not None:  # source_read(bucket_id, title) reads these lines back
                row["source_ref"] = {"path": f"bucket:{source_id}", "start_line": span["start_line"],
                                     "end_line": span["end_line"]}
                if span["spans"] > 1:
                    call.note(f"items[{i}]: {span['spans']} source ranges kept as one span, lines "
                              f"{span['start_line']}-{span['end_line']}")
        if shared:  # Ombre-Brain keeps the text the items came from as hidden evidence
            rows.append({"id": source_id, "title": f"grow source {batch}", "body": content, "type": "source",
                         "tags": ["raw_source"]})
    elif isinstance(content, str) and content.strip():
        pieces, how = _pieces(call, content)
        rows = []
        for p in pieces:
            row = memory_fields(call, content=p.content, title=p.title, tags=list(p.tags),
                                importance=p.importance if p.importance is not None else -1,
                                valence=p.valence if p.valence is not None else -1,
                                arousal=p.arousal if p.arousal is not None else -1)
            rows.append(row)
        if len(rows) == 1:
            call.note(f"the text is short or a single sentence, so it was held as one memory "
                      f"(grow cuts {call.config.mcp.grow.min_items}-{call.config.mcp.grow.max_items})")
    else:
        raise ValidationError("is required: the text to file (or items, a list of memories)", field="content")
    for row in rows:
        row.update(space=space, tags=[*row.get("tags", []), f"grow_batch:{batch}"])
    call.unused(GROW_UNUSED)
    ids = call.brain.write_many(rows, now=now_utc(), one_text=True)  # one text: one memory's embedding budget
    closed = _close_plans(call, space, ids)
    memories = [{"bucket_id": bid, "title": row["title"], "type": row.get("type", "dynamic")}
                for bid, row in zip(ids, rows, strict=True)]
    shown = [m for m in memories if m["type"] != "source"]
    lines = [f"grew {len(shown)} {'memory' if len(shown) == 1 else 'memories'} · space {space} · batch {batch} "
             f"· cut by {how}"]
    lines += [f"- {m['bucket_id']} · {quote(m['title'])}" for m in shown]
    if len(shown) < len(memories):
        lines.append(f"- source record (never recalled on its own): {memories[-1]['bucket_id']}")
    return Reply("\n".join(lines), {"tool": "grow", "space": space, "batch": batch, "cut_by": how,
                                    "buckets": memories, "closed_plans": closed})
