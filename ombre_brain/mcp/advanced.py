"""``breath_advanced``: breath's full form, with every parameter Ombre-Brain's single ``breath`` had (design §19).

One entry, five modes, decided in Ombre-Brain's order:

1. **feel** (``domain="feel"`` or a ``feel`` tag): the feel buckets, newest first, whole within
   ``max_tokens`` (default 6,000); older ones folded to one 60-character line each.
2. **importance** (``importance_min`` 1–10): up to 20 memories at or above it, most important
   first; anchors and pinned included, feel, letters, plans, self entries and ``dont_surface`` not.
3. **catalog** (``catalog=True``): one metadata line per memory (id, layer, importance,
   domains, title; no body, no model), filtered by ``domain`` and ``tags``, within ``max_tokens``.
4. **search** (a ``query``): ``breath_search``'s dry-run turn, its memories filtered by ``tags``
   (all of them), ``domain`` and by ``valence``/``arousal`` (within 0.25 of the values given).
5. **affect** (``valence`` or ``arousal`` without a query): the memories nearest those values.

Without any of these it is ``breath()``. Every mode is a read: nothing is touched or cooled.
Modes that list memories scan the newest ``mcp.pulse_max_scan`` of them and say so when the space
holds more. Letters, plans and self entries are never listed here (their own tools read them).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ..buckets import Bucket
from ..errors import ValidationError
from ..kinds.fields import UNINDEXED_TYPES
from ..memory_layers import infer_layer
from ..turn.budget import estimate_tokens
from .access import Call
from .format import Reply, quote, turn_view
from .recall import breath
from .registry import Bool, Int, Number, Space, Tags, tag_list, tool

__all__ = ["breath_advanced"]

MAX_TOKENS = 20000
FEEL_TOKENS = 6000
IMPORTANCE_CAP = 20
AFFECT_NEAR = 0.25
FOLD_CHARS = 60


def _domains(b: Bucket) -> set[str]:
    return {t.lower().removeprefix("domain:") for t in b.tags if t.lower().startswith("domain:")}


def _quoted(call: Call, buckets: list[Bucket], budget: int) -> tuple[str, list[dict], list[Bucket]]:
    """Memories quoted whole while ``budget`` lasts; the rest come back to be folded or counted."""
    lines, rows, rest = [call.config.render.framing_line], [], []
    used = estimate_tokens(lines[0])
    for b in buckets:
        layer = infer_layer(b, call.config).layer
        block = [f"> [{b.id} · {layer} · importance {b.importance}] {b.title}",
                 *(f"> {line}" for line in b.main_text.splitlines() or [""]), ""]
        cost = estimate_tokens("\n".join(block))
        if rows and used + cost > budget:
            rest.append(b)
            continue
        used += cost
        lines += block
        rows.append({"bucket_id": b.id, "title": b.title, "layer": layer, "importance": b.importance,
                     "valence": b.valence, "arousal": b.arousal, "created": b.created, "text": b.main_text})
    return ("\n".join(lines).rstrip() if rows else ""), rows, rest


def _scan(call: Call, space: str) -> tuple[list[Bucket], str]:
    """The newest memories (no letters, plans or self entries), and a note when the space holds more."""
    brain = call.brain
    total = brain.store.count(space) if brain.store.known_space(space) else 0
    found = brain.list(space, limit=call.config.mcp.pulse_max_scan) if total else []
    note = f" (the newest {len(found)} of {total} were read)" if len(found) < total else ""
    return [b for b in found if b.type not in UNINDEXED_TYPES], note


def _given(value: float, field: str) -> float | None:
    if value is None or value == -1:
        return None
    if not 0 <= value <= 1:
        raise ValidationError(f"expected 0-1 (-1 for none), got {value}", field=field)
    return float(value)


@tool("""breath with every parameter: catalog=True lists one metadata line per memory (cheapest); tags (all must
      match), importance_min (the most important first), valence/arousal (memories of that feeling), domain="feel"
      (the feel notes), max_tokens; with a query it searches. Read-only.""", read_only=True)
def breath_advanced(
    call: Call,
    query: Annotated[str, Field(description="search words; empty: no search")] = "",
    max_tokens: Annotated[Int, Field(description="0 = default; at most 20000")] = 0,
    domain: Annotated[str, Field(description="comma-separated domains; 'feel' reads the feel notes")] = "",
    valence: Annotated[Number, Field(description="0 painful .. 1 sweet; -1 none")] = -1,
    arousal: Annotated[Number, Field(description="0 calm .. 1 intense; -1 none")] = -1,
    max_results: Annotated[Int, Field(description="0 = default; at most 50")] = 0,
    importance_min: Annotated[Int, Field(description="1-10: list memories at least this important; -1 none")] = -1,
    tags: Tags = "",
    catalog: Annotated[Bool, Field(description="one metadata line per memory, no bodies")] = False,
    space: Space = None,
) -> Reply:
    space = call.space(space)
    if not 0 <= max_tokens <= MAX_TOKENS:
        raise ValidationError(f"expected 0 (default) to {MAX_TOKENS}, got {max_tokens}", field="max_tokens")
    if not 0 <= max_results <= 50:
        raise ValidationError(f"expected 0 (default) to 50, got {max_results}", field="max_results")
    if importance_min != -1 and not 1 <= importance_min <= 10:
        raise ValidationError(f"expected 1-10 (-1 for none), got {importance_min}", field="importance_min")
    v, a = _given(valence, "valence"), _given(arousal, "arousal")
    wanted_tags = [t.lower() for t in tag_list(tags, "tags")]
    domains = {d.strip().lower() for d in domain.split(",") if d.strip()}
    if "feel" in domains or {"feel", "__feel__"} & set(wanted_tags):
        return _feel(call, space, max_tokens or FEEL_TOKENS)
    wanted_tags = [t for t in wanted_tags if t not in ("feel", "__feel__")]

    def keep(b: Bucket) -> bool:
        have = {t.lower() for t in b.tags}
        return (not domains or bool(domains & _domains(b))) and all(t in have for t in wanted_tags) and (
            v is None or abs(b.valence - v) <= AFFECT_NEAR) and (a is None or abs(b.arousal - a) <= AFFECT_NEAR)

    if importance_min != -1:
        return _importance(call, space, importance_min, keep, max_tokens or MAX_TOKENS)
    if catalog:
        return _catalog(call, space, domains, wanted_tags, max_tokens or FEEL_TOKENS)
    if query.strip():
        return _search(call, space, query, keep, max_results)
    if v is not None or a is not None:
        return _affect(call, space, v, a, domains, wanted_tags, max_results or call.config.mcp.search_max_results,
                       max_tokens or FEEL_TOKENS)
    if max_tokens or max_results or wanted_tags or domains:
        call.note("without a query, catalog, importance_min or valence/arousal this is breath(): its budgets are "
                  "mcp.breath's, and domain/tags/max_results/max_tokens do not apply")
    return breath(call)


def _feel(call: Call, space: str, budget: int) -> Reply:
    feels = [b for b in call.brain.list(space, type="feel", limit=call.config.mcp.pulse_max_scan)]
    text, rows, rest = _quoted(call, feels, budget)
    folded = [f"- {b.id} · {b.created[:10]} · {quote(b.main_text, FOLD_CHARS)}" for b in rest]
    head = f"breath_advanced · space {space} · feel: {len(feels)} feel note{'s' if len(feels) != 1 else ''}"
    parts = [head, text] + ([f"older feel notes, folded ({len(rest)}):\n" + "\n".join(folded)] if folded else [])
    return Reply("\n\n".join(p for p in parts if p), {"tool": "breath_advanced", "mode": "feel", "space": space,
                                                     "items": rows, "folded": [b.id for b in rest]})


def _importance(call: Call, space: str, least: int, keep, budget: int) -> Reply:
    found, scanned = _scan(call, space)
    chosen = [b for b in found if b.importance >= least and b.type != "feel" and not b.dont_surface and keep(b)]
    chosen.sort(key=lambda b: -b.importance)  # newest first (the scan's order) among equals
    text, rows, _ = _quoted(call, chosen[:IMPORTANCE_CAP], budget)
    head = (f"breath_advanced · space {space} · importance ≥ {least}: {len(chosen)} "
            f"memor{'ies' if len(chosen) != 1 else 'y'}"
            + (f", the first {len(rows)} shown" if len(chosen) > len(rows) else "") + scanned)
    return Reply(f"{head}\n\n{text}".rstrip(), {"tool": "breath_advanced", "mode": "importance", "space": space,
                                              "items": rows, "total": len(chosen)})


def _catalog(call: Call, space: str, domains: set[str], wanted_tags: list[str], budget: int) -> Reply:
    found, scanned = _scan(call, space)
    chosen = [b for b in found if (not domains or domains & _domains(b))
              and all(t in {x.lower() for x in b.tags} for t in wanted_tags)]
    lines, rows, used = [], [], 0
    for b in chosen:
        layer = infer_layer(b, call.config).layer
        line = (f"- {b.id} · {layer} · importance {b.importance} · {','.join(sorted(_domains(b))) or '-'} · "
                f"{quote(b.title)}")
        used += estimate_tokens(line)
        if rows and used > budget:
            break
        lines.append(line)
        rows.append({"bucket_id": b.id, "title": b.title, "layer": layer, "importance": b.importance,
                     "domains": sorted(_domains(b)), "created": b.created})
    head = (f"breath_advanced · space {space} · catalog: {len(chosen)} memor{'ies' if len(chosen) != 1 else 'y'}"
            + (f", {len(rows)} listed within max_tokens" if len(rows) < len(chosen) else "") + scanned
            + " (letters, plans and self entries: letter_read, dream, I)")
    return Reply("\n".join([head, *lines]), {"tool": "breath_advanced", "mode": "catalog", "space": space,
                                             "items": rows, "total": len(chosen)})


def _search(call: Call, space: str, query: str, keep, max_results: int) -> Reply:
    brain = call.brain
    turn = brain.turn(space, call.access.session, query, dry_run=True)
    ids = [*turn.item_ids(), *(s.bucket_id for s in turn.suppressed)]
    buckets = brain.store.get_many(space, ids)
    text, data = turn_view(turn, call.config, keep=lambda bid: bid in buckets and keep(buckets[bid]),
                           limit=max_results or call.config.mcp.search_max_results)
    head = (f"breath_advanced {quote(query)} · space {space}: {len(data['items'])} memories (a dry-run search, "
            "filtered by tags, domain and feeling)")
    return Reply(f"{head}\n\n{text}", {"tool": "breath_advanced", "mode": "search", "query": query, **data})


def _affect(call: Call, space: str, v: float | None, a: float | None, domains: set[str], wanted_tags: list[str],
            n: int, budget: int) -> Reply:
    found, scanned = _scan(call, space)
    pool = [b for b in found if not (b.dont_surface or b.archived) and b.type != "feel"
            and (not domains or domains & _domains(b)) and all(t in {x.lower() for x in b.tags} for t in wanted_tags)]

    def distance(b: Bucket) -> float:
        return ((b.valence - v) ** 2 if v is not None else 0) + ((b.arousal - a) ** 2 if a is not None else 0)

    pool.sort(key=distance)
    text, rows, _ = _quoted(call, pool[:n], budget)
    want = ", ".join(x for x in (f"valence {v:g}" if v is not None else "", f"arousal {a:g}" if a is not None
                                 else "") if x)
    head = f"breath_advanced · space {space} · nearest to {want}: {len(rows)} memories" + scanned
    return Reply(f"{head}\n\n{text}".rstrip(), {"tool": "breath_advanced", "mode": "affect", "space": space,
                                              "items": rows})

