"""``source_read``: the words a memory was filed from, checked line by line (design §19).

Only ``grow(content=…, items=[{…, "source_ranges": [[start, end]]}])`` keeps source evidence:
``content`` is stored once as a source record (never injected, never recalled) and each item
points at its lines (``source_ref``: ``bucket:<source id>``, 1-based, inclusive). ``source_read``
reads them back by the memory's exact id **and** exact title (an intent check, not a password),
without search, diffusion or any model. ``scope="event"`` reads only the item's declared lines
and refuses a memory that declares none, or lines the source does not have (never the whole text
instead); ``scope="full_source"`` reads the whole shared text on purpose. Long evidence is
paginated by ``max_tokens`` with ``next_cursor``; nothing is summarised. The text is quoted as
memory text is: stored data, not instructions.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ..errors import NotFoundError, ValidationError
from ..turn.budget import estimate_tokens
from .access import Call
from .format import Reply, quote
from .registry import Int, Space, tool

__all__ = ["source_read"]

MAX_TITLE = 120
SOURCE_PREFIX = "bucket:"


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


@tool("""Read the hidden source a memory was filed from (grow with content and items' source_ranges), by its exact
      bucket id and exact title. scope="event" reads only its declared lines; "full_source" the whole shared text.
      Long sources are paginated: call again with next_cursor. No search, no summary.""", read_only=True)
def source_read(
    call: Call,
    bucket_id: str,
    expected_title: Annotated[str, Field(description="the memory's exact title (one line, at most 120 characters)")],
    scope: Annotated[Literal["event", "full_source"], Field(description="event: its declared lines; full_source: "
                                                                         "the whole shared text")] = "event",
    cursor: Annotated[Int, Field(description="0 first; then the next_cursor of the previous page")] = 0,
    max_tokens: Annotated[Int, Field(description="200-20000")] = 6000,
    space: Space = None,
) -> Reply:
    space = call.space(space)
    wanted = _one_line(expected_title)
    if not wanted or len(wanted) > MAX_TITLE:
        raise ValidationError(f"expected the memory's title on one line, 1-{MAX_TITLE} characters",
                              field="expected_title")
    if not 200 <= max_tokens <= 20000:
        raise ValidationError(f"expected 200-20000, got {max_tokens}", field="max_tokens")
    if cursor < 0:
        raise ValidationError(f"expected 0 or a next_cursor, got {cursor}", field="cursor")
    memory = call.brain.get(space, bucket_id)
    if memory is None or _one_line(memory.title) != wanted:
        raise NotFoundError(f"no memory {bucket_id!r} titled {quote(wanted)} in space {space!r} (both must match "
                            "exactly)")
    ref = memory.source_ref
    if ref is None or not ref.path.startswith(SOURCE_PREFIX):
        raise ValidationError(f"{bucket_id!r} declares no source lines: only grow(content=…, items=[{{…, "
                              "source_ranges}}]) keeps source evidence", field="bucket_id", code="no_source")
    source = call.brain.get(space, ref.path[len(SOURCE_PREFIX):])
    if source is None:
        raise NotFoundError(f"the source of {bucket_id!r} ({ref.path}) is no longer stored")
    lines = source.body.splitlines()
    if scope == "event":
        if ref.end_line > len(lines):
            raise ValidationError(f"declares lines {ref.start_line}-{ref.end_line}, but the source has {len(lines)}: "
                                  "nothing is read rather than the wrong text", field="bucket_id", code="bad_range")
        numbered = list(enumerate(lines[ref.start_line - 1: ref.end_line], ref.start_line))
        if not any(text.strip() for _, text in numbered):
            raise ValidationError(f"its declared lines {ref.start_line}-{ref.end_line} are empty",
                                  field="bucket_id", code="empty_range")
    else:
        numbered = list(enumerate(lines, 1))
    if cursor > len(numbered):
        raise ValidationError(f"is past the end ({len(numbered)} lines)", field="cursor")
    head = (f"source_read · {bucket_id} · {quote(memory.title)} · {scope} · lines "
            f"{numbered[0][0] if numbered else 0}-{numbered[-1][0] if numbered else 0} of source {source.id}")
    page: list[tuple[int, str]] = []
    used = estimate_tokens(head) + estimate_tokens(call.config.render.framing_line)
    for n, text in numbered[cursor:]:
        cost = estimate_tokens(text) + 2
        if page and used + cost > max_tokens:
            break
        page.append((n, text))
        used += cost
    next_cursor = cursor + len(page) if cursor + len(page) < len(numbered) else 0
    body = "\n".join(f"> {n:>4} | {text}" for n, text in page)
    more = f"\n\nmore: call again with cursor={next_cursor}" if next_cursor else ""
    return Reply(f"{head}\n\n{call.config.render.framing_line}\n\n{body}{more}",
                 {"tool": "source_read", "space": space, "bucket_id": bucket_id, "source_id": source.id,
                  "scope": scope, "lines": [{"line": n, "text": t} for n, t in page], "next_cursor": next_cursor,
                  "total_lines": len(numbered)})
