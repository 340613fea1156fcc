"""``dream`` and ``pulse``: the dream engine, and a report on a space (design §15, §19).

``dream`` runs the dream engine (over ``window_hours`` when given), then, as Ombre-Brain's dream
does, shows the self-model candidates still settling (recording today's UTC date on each one
shown: a candidate is promoted after dreams on three dates) and, at its end, every active plan.

``pulse`` is a status page for a model: how many memories of each layer the space holds (layers
as :func:`~ombre_brain.memory_layers.infer_layer` decides them, at read time), the newest
memories (a sealed letter by its metadata only), the letters, plans, anchors and self entries,
the memory-writing jobs still waiting, the embedder, and the last dream.
"""

from __future__ import annotations

from collections import Counter
from typing import Annotated

from pydantic import Field

from ..errors import ValidationError
from ..kinds.anchors import ANCHOR_LIMIT
from ..memory_layers import infer_layer
from ..timeutil import now_utc
from .access import Access, Call
from .format import Reply, bucket_brief, plan_lines, quote, self_lines
from .registry import Bool, Int, Space, tool

__all__ = ["dream", "pulse"]

JOB_STATES = ("pending", "running", "failed", "dead")
DREAM_UNUSED = {"inspiration": "dreams are composed from memory alone"}
PULSE_UNUSED = {"include_archive": "archived memories are always counted, as the archive layer"}
MAX_WINDOW_HOURS = 336  # Ombre-Brain's bound: two weeks
MAX_JOBS_SCAN = 10000


@tool("Dream: weave recent memories (and one older echo) into a dream that may surface later.")
def dream(
    call: Call,
    window_hours: Annotated[Int, Field(description=f"the hours of recent memories to dream from, 1-{MAX_WINDOW_HOURS}; "
                                                   "0 = dream.window_hours from the config")] = 0,
    inspiration: Annotated[Bool, Field(description="Ombre-Brain's; not used here: "
                                                   + DREAM_UNUSED["inspiration"])] = False,
    space: Space = None,
) -> Reply:
    """Run the dream engine once (``ombre-brain dream run``); a dreamless run says why and is not an error."""
    space = call.space(space)
    if not isinstance(window_hours, int) or not (window_hours == 0 or 1 <= window_hours <= MAX_WINDOW_HOURS):
        raise ValidationError(f"expected 1-{MAX_WINDOW_HOURS} hours (0 = dream.window_hours from the config), "
                              f"got {window_hours!r}", field="window_hours")
    call.unused(DREAM_UNUSED)
    brain = call.brain
    run = brain.dream_engine.run(space, window_hours=window_hours or None)
    data = {"tool": "dream", "space": space, **run.to_dict()}
    if run.dream_id is None:
        text = f"no dream · space {space}: {run.message}"
    else:
        bucket = brain.get(space, run.dream_id)
        text = f"dreamed → {run.dream_id} · space {space} · {quote(bucket.title if bucket else '')}: {run.message}"
        if bucket is not None:
            text += "\n\n" + "\n".join(f"> {line}" for line in bucket.body.splitlines() or [""])
            text += ("\n\nIt waits, latent, until a turn resonates with it; breath() can surface it, and it "
                     "surfaces in a chat turn at most once.")
    candidates = brain.self_model.candidates(space)
    if candidates:  # shown in this dream: today counts as one of the dates a candidate needs
        brain.self_model.witness(space, [c.id for c in candidates], now_utc().date().isoformat())
        candidates = brain.self_model.candidates(space)
        text += ("\n\n=== I: candidates settling (seen in this dream today; I(promote=id) after 3 dates) ===\n"
                 + "\n".join(self_lines(candidates)))
    plans = brain.plans.plans(space, "active")
    if plans:
        text += "\n\n=== your active plans ===\n" + "\n".join(plan_lines(plans))
    data.update(self_candidates=[c.id for c in candidates], active_plans=[p.id for p in plans])
    return Reply(text, data)


@tool("The state of memory: counts by layer, the newest memories, pending jobs, the embedder, the last dream.",
      read_only=True)
def pulse(
    call: Call,
    include_archive: Annotated[Bool, Field(description="Ombre-Brain's; not used here: "
                                                      + PULSE_UNUSED["include_archive"])] = False,
    space: Space = None,
) -> Reply:
    """How the space is doing: counts by layer, the newest memories, pending jobs, the embedder, the last dream."""
    space = call.space(space)
    call.unused(PULSE_UNUSED)
    brain, cfg = call.brain, call.config
    total = brain.store.count(space) if brain.store.known_space(space) else 0
    scanned = brain.list(space, limit=cfg.mcp.pulse_max_scan) if total else []
    layers = Counter(infer_layer(b, cfg).layer for b in scanned)
    newest = [bucket_brief(b, cfg) for b in scanned[: cfg.mcp.pulse_newest]]
    jobs = Counter(j["state"] for j in brain.gateway.jobs.list(JOB_STATES, limit=MAX_JOBS_SCAN)
                   if j["space"] == space)
    dreams = brain.list(space, type="dream", limit=1) if total else []
    last_dream = bucket_brief(dreams[0], cfg) | {"surfaced": bool(dreams[0].surfaced)} if dreams else None
    emb = brain.embedder
    embedder = {"model_id": emb.model_id, "dimension": emb.dimension, "cjk_capable": emb.cjk_capable}
    known = brain.store.known_space(space)
    spaces = _visible_spaces(call.access, brain.spaces())
    kinds = {"letters": brain.letters.counts(space), "plans": brain.plans.counts(space),
             "anchors": len(brain.anchors.anchored(space)), "anchor_limit": ANCHOR_LIMIT,
             "self": brain.self_model.counts(space)}
    lines = [f"pulse · space {space}: {total} {'memory' if total == 1 else 'memories'}"
             + (f" (layers counted over the newest {len(scanned)})" if len(scanned) < total else "")
             + ("" if known else " (nothing was ever written to this space)")]
    if layers:
        lines.append("by layer: " + ", ".join(f"{k} {n}" for k, n in sorted(layers.items(), key=lambda x: -x[1])))
    if newest:
        lines.append("newest:")
        lines += [f"- {b['bucket_id']} · {b['layer']} · {b['created'][:16]} · {quote(b['title'])}" for b in newest]
    lines.append(f"letters {kinds['letters']['letters']} ({kinds['letters']['sealed']} sealed) · plans "
                 + ", ".join(f"{s} {n}" for s, n in kinds["plans"].items())
                 + f" · anchors {kinds['anchors']}/{ANCHOR_LIMIT} · I: {kinds['self']['formal']} formal, "
                 f"{kinds['self']['candidates']} candidates")
    lines.append("memory-writing jobs: " + ", ".join(f"{s} {jobs.get(s, 0)}" for s in JOB_STATES))
    lines.append(f"embedder: {emb.model_id} ({emb.dimension} dimensions{', CJK-capable' if emb.cjk_capable else ''})")
    lines.append(f"last dream: {last_dream['bucket_id']} · {quote(last_dream['title'])} · {last_dream['created'][:16]}"
                 f" · {'surfaced' if last_dream['surfaced'] else 'latent'}" if last_dream else "last dream: none yet")
    written = [s for s, w in spaces.items() if w]
    lines.append("spaces this token can see: " + (", ".join(
        f"{s}{'' if w else ' (never written)'}" for s, w in spaces.items()) or "none written yet")
        + ("; pass space=… to use another" if len(spaces) > 1 or (written and written != [space]) else ""))
    return Reply("\n".join(lines), {
        "tool": "pulse", "space": space, "space_known": known, "total": total, "scanned": len(scanned),
        "layers": dict(layers), "newest": newest, "jobs": {s: jobs.get(s, 0) for s in JOB_STATES},
        "embedder": embedder, "last_dream": last_dream, "spaces": list(spaces), "written_spaces": written,
        "kinds": kinds})


def _visible_spaces(access: Access, written: list[str]) -> dict[str, bool]:
    """Every space the caller's token can see, with whether anything was ever written to it: all written
    spaces for a token of every space ("*"), else each space the token names."""
    have = set(written)
    if access.scope == "*":
        return dict.fromkeys(sorted(have), True)
    return {s: s in have for s in sorted(access.scope)}
