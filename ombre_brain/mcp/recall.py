"""``breath`` and ``breath_search``: reading a space through the turn pipeline (design §15).

Both are **dry runs**: they read the session (the MCP session, ``mcp:<id>``) but record nothing
— no round, no cooldown, no dream claim. That is how ``breath_search`` ignores cooldowns: a
session that never records an injection has nothing cooled, so every gate but the cooldown
decides as in a chat turn, and no cooldown can hide a result. It also means a tool call never
spends what the chat gateway would show next, however often a client calls it (Ombre-Brain's
``breath`` likewise never touches a bucket).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import Field

from ..errors import ValidationError
from ..kinds.fields import kind_part
from ..memory_layers import infer_layer
from ..turn.conversation import context_messages
from .access import Call
from .exact import exact_rows, exact_search, phrases
from .format import Reply, bucket_brief, history_lines, quote, self_lines, turn_view
from .registry import Int, Space, tool

__all__ = ["breath", "breath_search"]

MAX_RESULTS = 50
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}$")

BREATH_UNUSED = {
    "max_tokens": "breath() uses the mcp.breath budgets",
    "valence": "emotional filtering is not a breath() option here",
    "arousal": "emotional filtering is not a breath() option here",
    "importance_min": "breath() shows core memory (pinned, protected, permanent) instead",
    "tags": "breath() has no tag filter; use breath_search",
    "catalog": "there is no catalog listing; pulse() lists the newest memories",
}
BREATH_WORDS = {  # breath() asks for recent memory itself; there is no query to ask about recent times
    "explicit_recent": "breath() holds the newest memories in mind (created or active within mcp.breath.recent_hours)",
}
SEARCH_UNUSED = {"quotes": "quotes are stored as comments and shown with their bucket, not listed by search"}


def _arg(call: Call, name: str, kind: type | tuple[type, ...], default: Any) -> Any:
    """A hidden (unadvertised) argument of an expected type, or ValidationError naming it."""
    value = call.raw.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) and kind is not bool or not isinstance(value, kind):
        raise ValidationError(f"expected {getattr(kind, '__name__', 'a value')}, got {type(value).__name__}",
                              field=name)
    return value


@tool("""What to hold in mind now: core memory (pinned), recent memories, relationship weather and a dream.
      Takes no parameters; read-only. Call it at the start of a conversation.""", read_only=True,
      hidden=("space", "query", "max_tokens", "domain", "valence", "arousal", "max_results", "importance_min", "tags",
              "catalog", "date_from", "date_to"))
def breath(call: Call) -> Reply:
    """What to hold in mind now: core memory, recent context, weather and a surfacing dream."""
    space = call.space(call.raw.get("space"))
    query = _arg(call, "query", str, "")
    if query.strip():
        call.note("breath(query=…) searched, as Ombre-Brain's breath does; breath_search is the explicit tool")
        return breath_search(call, query, max_results=_arg(call, "max_results", int, 0),
                             domain=_arg(call, "domain", str, ""), date_from=_arg(call, "date_from", str, ""),
                             date_to=_arg(call, "date_to", str, ""), space=space)
    for name in ("domain", "max_results", "date_from", "date_to"):
        if call.given(name):
            call.note(f"{name} only applies to a search (breath with a query, or breath_search)")
    call.unused(BREATH_UNUSED)
    turn = call.brain.breath(space, call.access.session)
    text, data = turn_view(turn, call.config, words=BREATH_WORDS)
    head = (f"breath · space {space}: what to hold in mind now, {len(data['items'])} memories "
            "(read only: nothing was recorded, no cooldown was spent)")
    selves = call.brain.self_model.newest(space)  # the start of a session carries them; they never surface
    if selves:
        text += ("\n\nI (the newest formal self entries, carried at the start of a session; not recalled "
                 "memories):\n" + "\n".join(self_lines(selves)))
    data["self"] = [{"bucket_id": b.id, "content": b.body} for b in selves]
    return Reply(f"{head}\n\n{text}", {"tool": "breath", **data})


@tool("""Search memory explicitly (cooldowns do not hide anything; read-only). Returns the memories as they
      would be injected, each with its bucket id, layer and the reason it surfaced or was kept out.""",
      read_only=True, hidden=SEARCH_UNUSED)
def breath_search(
    call: Call,
    query: Annotated[str, Field(description="what to remember: words, a question, or a bucket id")],
    max_results: Annotated[Int, Field(description="0 = default; at most 50")] = 0,
    domain: Annotated[str, Field(description="comma-separated domains to keep")] = "",
    date_from: Annotated[str, Field(description="YYYY-MM-DD, inclusive")] = "",
    date_to: Annotated[str, Field(description="YYYY-MM-DD, inclusive")] = "",
    space: Space = None,
    context: Annotated[list | None, Field(description="the conversation before the query, oldest first: "
                                                      "{role, content} messages or 'user: …' lines")] = None,
) -> Reply:
    """An explicit search: a dry-run turn on the MCP session, listing each memory's id, layer and reason."""
    space = call.space(space)
    if not isinstance(query, str) or not query.strip():
        raise ValidationError("is required: the words to search memory for", field="query")
    if not 0 <= max_results <= MAX_RESULTS:
        raise ValidationError(f"expected 0 (the default, mcp.search_max_results) to {MAX_RESULTS}, got {max_results}",
                              field="max_results")
    for name, value in (("date_from", date_from), ("date_to", date_to)):
        if value and not _DATE.match(value):
            raise ValidationError(f"expected a date like 2026-03-14, got {quote(value)}", field=name)
    call.unused(SEARCH_UNUSED)
    brain = call.brain
    exact = brain.get(space, query.strip()) if _ID.fullmatch(query.strip()) else None
    if exact is not None:  # Ombre-Brain answers a bucket id with that bucket, archived or not
        brief = bucket_brief(exact, call.config)
        text = (f"breath_search · space {space}: {quote(query)} is the id of a memory (layer {brief['layer']}"
                f"{', archived' if exact.archived else ''}, found by its id).\n\n{call.config.render.framing_line}\n\n"
                + "\n".join(f"> {line}" for line in _lines(exact.title, exact.body)))
        item = {**brief, "text": exact.body, "layer_debug": infer_layer(exact, call.config).to_dict()}
        if exact.type == "plan":  # a plan's trace: its status, and each change with why (a closure names its memory)
            item["plan"] = kind_part(exact, "plan") or {}
            text += (f"\n\nplan {item['plan'].get('status', 'active')} · weight {item['plan'].get('weight', 0.5):g}; "
                     "its history:\n" + "\n".join(history_lines(exact)))
        return Reply(text, {"tool": "breath_search", "space": space, "found_by": "bucket_id", "items": [item],
                            "kept_out": []})
    wanted, _rest = phrases(query)
    if wanted:
        return _exact(call, space, query, wanted, domain, date_from, date_to, max_results)
    heard = list(context_messages(context)) if context else None  # design §14: the conversation before the query
    turn = brain.turn(space, call.access.session, query, context=heard, dry_run=True, lookup=True)
    keep = _filter(brain, space, turn, domain, date_from, date_to)
    text, data = turn_view(turn, call.config, keep=keep, limit=max_results or call.config.mcp.search_max_results)
    n = len(data["items"])
    head = (f"breath_search {quote(query)} · space {space}: {n} {'memory' if n == 1 else 'memories'} "
            "(an explicit search: a dry run, so no cooldown hid anything and nothing was recorded)")
    return Reply(f"{head}\n\n{text}", {"tool": "breath_search", "query": query, **data})


def _exact(call: Call, space: str, query: str, wanted: list[str], domain: str, date_from: str, date_to: str,
           max_results: int) -> Reply:
    """A quoted phrase matches literally (mcp/exact.py): the memories holding every phrase, as written."""
    domains = {d.strip().lower() for d in domain.split(",") if d.strip()}

    def keep(b) -> bool:
        day = (b.created or "")[:10]
        if domains and not domains & {t.lower().removeprefix("domain:") for t in b.tags}:
            return False
        return not (date_from and day < date_from[:10] or date_to and day > date_to[:10])

    hits = exact_search(call, space, query, wanted, keep)
    limit = max_results or call.config.mcp.search_max_results
    rows = exact_rows(call, hits[:limit])
    said = " and ".join(quote(p) for p in wanted)
    head = (f"breath_search {quote(query)} · space {space}: {len(hits)} "
            f"{'memory holds' if len(hits) == 1 else 'memories hold'} {said} literally"
            + (f" (the best {len(rows)} shown)" if len(hits) > len(rows) else ""))
    blocks = [head]
    if rows:
        quoted = [call.config.render.framing_line]
        for r in rows:
            marks = "".join(f", {f}" for f in r["flags"]) + (", dont_surface" if r["dont_surface"] else "")
            quoted += [f"> [{r['bucket_id']} · {r['layer']}{marks}] {r['title']}",
                       *(f"> {line}" for line in r["text"].splitlines() or [""]), ""]
        blocks.append("\n".join(quoted).rstrip())
    return Reply("\n\n".join(blocks), {"tool": "breath_search", "query": query, "space": space,
                                        "found_by": "exact_phrase", "phrases": wanted, "items": rows,
                                        "total": len(hits), "kept_out": []})


def _lines(title: str, body: str) -> list[str]:
    lines = body.splitlines() or [""]
    return lines if lines[0].strip().startswith(title.rstrip("…")) else [title, *lines]


def _filter(brain, space: str, turn, domain: str, date_from: str, date_to: str) -> Callable[[str], bool] | None:
    """Ombre-Brain's domain and date prefilters, applied to what the turn found (domains are `domain:` tags)."""
    domains = {d.strip().lower() for d in domain.split(",") if d.strip()} if domain else set()
    if not (domains or date_from or date_to):
        return None
    ids = [*turn.item_ids(), *(s.bucket_id for s in turn.suppressed)]
    buckets = brain.store.get_many(space, ids)

    def keep(bucket_id: str) -> bool:
        b = buckets.get(bucket_id)
        if b is None:
            return False
        if domains and not domains & {t.lower().removeprefix("domain:") for t in b.tags}:
            return False
        day = (b.created or "")[:10]
        return not (date_from and day < date_from[:10] or date_to and day > date_to[:10])

    return keep
