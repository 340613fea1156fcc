"""Tool replies: text a model reads well, plus structured content that names bucket ids.

Memory text reaches the model the way a turn renders it (:func:`ombre_brain.turn.render.render_markdown`):
quoted with ``> `` under the framing line, so a memory can neither forge a heading nor speak as
the system. What the tool itself says (ids, layers, reason codes, notes) is written around that
block on lines of our own, and the same facts go into ``structured_content`` for clients that
read JSON.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..buckets import Bucket
from ..config import Config
from ..kinds.fields import kind_part
from ..kinds.selfmodel import PROMOTE_AFTER
from ..memory_layers import infer_layer
from ..recall_types import SectionOut
from ..turn.gate_table import describe
from ..turn.render import render_markdown
from ..turn.sections import Turn

__all__ = ["Reply", "bucket_brief", "history_lines", "plan_lines", "quote", "self_lines", "turn_view"]

MAX_KEPT_OUT = 10        # kept-out memories named in the text
MAX_KEPT_OUT_DATA = 50   # ... and in the structured content


@dataclass
class Reply:
    """One tool's answer: ``text`` for the model, ``data`` for ``structured_content``."""

    text: str
    data: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def finish(self, extra_notes: Iterable[str] = ()) -> tuple[str, dict[str, Any]]:
        notes = [*self.notes, *extra_notes]
        text = self.text
        if notes:
            text += "\n\nNotes:\n" + "\n".join(f"- {n}" for n in notes)
        return text, {**self.data, "notes": notes}


def quote(text: str, limit: int = 60) -> str:
    """A short, single-line, JSON-quoted rendering of user text (a title, a query) for our own lines."""
    one = " ".join(str(text).split())
    if len(one) > limit:
        one = one[: limit - 1] + "…"
    return json.dumps(one, ensure_ascii=False)


def bucket_brief(bucket: Bucket, cfg: Config) -> dict[str, Any]:
    """What a listing says about one bucket: id, title, layer, type, flags and times."""
    flags = [f for f in ("pinned", "protected", "anchor", "archived", "resolved", "digested") if getattr(bucket, f)]
    return {"bucket_id": bucket.id, "title": bucket.title, "layer": infer_layer(bucket, cfg).layer,
            "type": bucket.type, "importance": bucket.importance, "valence": bucket.valence,
            "arousal": bucket.arousal, "tags": list(bucket.tags), "flags": flags, "created": bucket.created,
            "last_active": bucket.last_active}


def _row(section: SectionOut, item, words: Mapping[str, str]) -> dict[str, Any]:
    gate = item.runtime_gate or {}
    reason = gate.get("reason") or ""
    return {"bucket_id": item.bucket_id, "section": section.key, "layer": item.layer, "shape": item.shape,
            "reason": reason, "why": words.get(reason) or describe(reason), "text": item.text,
            "layer_debug": item.layer_debug, "runtime_gate": gate}


def turn_view(turn: Turn, cfg: Config, *, keep: Callable[[str], bool] | None = None,
              limit: int | None = None, words: Mapping[str, str] | None = None) -> tuple[str, dict[str, Any]]:
    """A turn as the rendered sections plus an index of every memory with its id, layer and gate reason.

    Each memory shown carries the turn's own ``layer_debug`` and ``runtime_gate`` objects, the same
    explanations ``/v1/inject`` gives; a memory kept out carries its layer and reason code (the
    full objects of every candidate would triple the reply, and the SDK's serialisation of it
    costs more than the turn; ``/api/recall-debug`` has them all).

    ``keep`` drops memories (a domain or date filter); ``limit`` caps how many are listed; ``words``
    replaces the gates' words for some reason codes where the tool asked the question itself (breath has
    no query to ask about recent times). Notes that are not memories (the UNKNOWN line, the persona block) stay.
    """
    rows: list[dict[str, Any]] = []
    groups: list[list[SectionOut]] = []
    for sections in (turn.stable, turn.sections):
        kept_sections = []
        for sec in sections:
            items = []
            for it in sec.items:
                if it.bucket_id is not None:
                    if (keep is not None and not keep(it.bucket_id)) or (limit is not None and len(rows) >= limit):
                        continue
                    rows.append(_row(sec, it, words or {}))
                items.append(it)
            if items:
                kept_sections.append(SectionOut(sec.key, sec.title, tuple(items)))
        groups.append(kept_sections)
    seen = {r["bucket_id"] for r in rows}  # an item shown in one section may be suppressed from another
    kept_out: list[dict[str, Any]] = []
    for s in turn.suppressed:
        if s.bucket_id in seen or (keep is not None and not keep(s.bucket_id)):
            continue
        seen.add(s.bucket_id)
        kept_out.append({"bucket_id": s.bucket_id, "layer": s.layer, "reason": s.reason, "why": describe(s.reason)})
    rendered = render_markdown(groups[0], groups[1], cfg.render.framing_line)
    blocks = [rendered or "(no memory to show)"]
    if rows:
        blocks.append("\n".join(["Memories shown (bucket id · layer · section · reason: why):",
                                  *(f"- {r['bucket_id']} · {r['layer']} · {r['section']} · {r['reason']}: {r['why']}"
                                    for r in rows)]))
    if kept_out:
        more = [f"- … and {len(kept_out) - MAX_KEPT_OUT} more"] if len(kept_out) > MAX_KEPT_OUT else []
        blocks.append("\n".join(["Kept out (bucket id · layer · reason: why):",
                                  *(f"- {k['bucket_id']} · {k['layer']} · {k['reason']}: {k['why']}"
                                    for k in kept_out[:MAX_KEPT_OUT]), *more]))
    data = {"space": turn.space, "session": turn.session, "at": turn.at, "plan": turn.plan.to_dict(),
            "items": rows, "kept_out": kept_out[:MAX_KEPT_OUT_DATA], "kept_out_total": len(kept_out),
            "rendered": rendered, "tokens": turn.tokens}
    return "\n\n".join(blocks), data


def plan_lines(plans, *, history: bool = False) -> list[str]:
    """One line per plan (and, with ``history``, the reason it was last closed or changed)."""
    out = []
    for p in plans:
        f = kind_part(p, "plan") or {}
        out.append(f"- {p.id} · {f.get('status', 'active')} · weight {f.get('weight', 0.5):g} · {quote(p.body, 120)}")
        last = (f.get("history") or [{}])[-1]
        if history and last.get("reason"):
            out.append(f"  {last['at'][:16]}: {last['reason']}")
    return out


def history_lines(plan) -> list[str]:
    """A plan's trace: each change with its time, what it did, and why (a closure names its memory)."""
    out = []
    for h in (kind_part(plan, "plan") or {}).get("history") or []:
        move = f" {h['from']} → {h['to']}" if h.get("from") else f" → {h['to']}" if h.get("to") else ""
        who = f" by {h['by']}" if h.get("by") else ""
        out.append(f"- {h['at'][:16]} {h['action']}{move}{who}" + (f": {h['reason']}" if h.get("reason") else ""))
    return out


def self_lines(entries) -> list[str]:
    """One line per self-model entry: its aspect, how many dream dates a candidate has, its words."""
    out = []
    for b in entries:
        f = kind_part(b, "self") or {}
        aspect = f" · {f['aspect']}" if f.get("aspect") else ""
        dates = f.get("dream_dates") or []
        seen = f" · seen in dreams on {len(dates)}/{PROMOTE_AFTER} dates" if f.get("stage") == "candidate" else ""
        origin = "" if f.get("stage") != "formal" or f.get("from_candidate") else " · written directly, not settled"
        out.append(f"- {b.id}{aspect}{seen}{origin} · {quote(b.body, 160)}")
    return out
