"""The difference a draft policy makes, turn by turn and in total (the policy playground, docs/design.md §22).

Two Turns of one message (serving policy, draft) are compared the way a person reads an injection: which
memories enter or leave which section, and for each, the gate whose verdict changed and the reason
before and after, read from the turns' own ``runtime_gate`` records (never judged again here); whether
the honest UNKNOWN line came or went; and the tokens each section took. The totals count turns changed,
memories newly injected and newly suppressed, UNKNOWN answers gained and lost, and tokens per section
under each policy. Pure: Turns in, plain data out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..turn.budget import item_tokens
from ..turn.sections import Turn

__all__ = ["diff_turn", "recorded_drift", "totals", "turn_items"]


def turn_items(turn: Turn) -> dict[str, tuple[str, Any]]:
    """bucket id -> (section key, Item) for every memory the turn injects."""
    return {it.bucket_id: (sec.key, it) for sec in (*turn.stable, *turn.sections) for it in sec.items
            if it.bucket_id}


def _unknown(turn: Turn) -> bool:
    return any(it.extra.get("note") == "unknown" for sec in turn.sections for it in sec.items)


def _tokens(turn: Turn) -> dict[str, int]:
    return {sec.key: sum(item_tokens(it) for it in sec.items) for sec in (*turn.stable, *turn.sections)}


def _decision(turn: Turn, bucket_id: str) -> dict:
    """The turn's own record of a bucket: its runtime_gate, or 'not_a_candidate' when the turn never saw it."""
    ex = turn.explain(bucket_id)
    if ex is None:
        return {"decision": "suppressed", "reason": "not_a_candidate", "gates": {}}
    rg = dict(ex.get("runtime_gate") or {})
    gates = {k: v for k, v in rg.items() if isinstance(v, Mapping) and "reason" in v}
    return {"decision": rg.get("decision"), "reason": rg.get("reason"), "gates": gates, "section": ex.get("section")}


def _gate_changes(before: dict, after: dict) -> list[dict]:
    """The gates whose verdict (allowed, reason) differs, with both verdicts and any number they carried."""
    out = []
    for name in dict.fromkeys((*before["gates"], *after["gates"])):
        b = before["gates"].get(name) or {"allowed": None, "reason": "not_applicable"}
        a = after["gates"].get(name) or {"allowed": None, "reason": "not_applicable"}
        if (b.get("allowed"), b.get("reason")) != (a.get("allowed"), a.get("reason")):
            out.append({"gate": name, "before": _verdict(b), "after": _verdict(a)})
    return out


def _verdict(g: Mapping) -> dict:
    v = {"allowed": g.get("allowed"), "reason": g.get("reason")}
    for k in ("evidence", "threshold", "threshold_name"):
        if g.get(k) is not None:
            v[k] = g[k]
    return v


def diff_turn(current: Turn, draft: Turn) -> dict:
    """What the draft changes in one turn: each memory that enters, leaves or moves, with the gate and reason."""
    cur, new = turn_items(current), turn_items(draft)
    changes = []
    for bid in dict.fromkeys((*cur, *new)):
        was, now = cur.get(bid), new.get(bid)
        sec_b, sec_a = (was[0] if was else None), (now[0] if now else None)
        shape_b, shape_a = (was[1].shape if was else None), (now[1].shape if now else None)
        text_b, text_a = (was[1].text if was else None), (now[1].text if now else None)
        if sec_b == sec_a and shape_b == shape_a and text_b == text_a:
            continue
        before, after = _decision(current, bid), _decision(draft, bid)
        kind = ("enters" if sec_b is None else "leaves" if sec_a is None else "moves" if sec_b != sec_a
                else "reshaped" if shape_b != shape_a else "recut")  # recut: the same memory in other words (budget)
        cut = (was[1].extra.get("budget_cut") if was else None, now[1].extra.get("budget_cut") if now else None)
        if kind == "recut":  # the gates agree; what changed is the budget's cut
            before["reason"] = "budget_cut_to_moment" if cut[0] else before["reason"]
            after["reason"] = "budget_cut_to_moment" if cut[1] else after["reason"]
        changes.append({"bucket_id": bid, "kind": kind, "section_before": sec_b, "section_after": sec_a,
                        "shape_before": shape_b, "shape_after": shape_a,
                        "reason_before": before["reason"], "reason_after": after["reason"],
                        "gates": _gate_changes(before, after), "layer": (now or was)[1].layer,
                        "tokens_before": item_tokens(was[1]) if was else 0,
                        "tokens_after": item_tokens(now[1]) if now else 0,
                        "budget_cut": list(cut)})
    unknown = (_unknown(current), _unknown(draft))
    tokens = (_tokens(current), _tokens(draft))
    return {"changed": current.rendered != draft.rendered, "changes": changes,
            "items_before": _by_section(cur), "items_after": _by_section(new),
            "unknown_before": unknown[0], "unknown_after": unknown[1],
            "tokens_before": current.tokens, "tokens_after": draft.tokens,
            "section_tokens": {k: [tokens[0].get(k, 0), tokens[1].get(k, 0)]
                               for k in dict.fromkeys((*tokens[0], *tokens[1]))},
            "context_mode": [current.plan.context_mode, draft.plan.context_mode],
            "skip_reason": [current.plan.skip_reason, draft.plan.skip_reason]}


def _by_section(items: Mapping[str, tuple[str, Any]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for bid, (sec, _it) in items.items():
        out.setdefault(sec, []).append(bid)
    return out


def recorded_drift(recorded: Mapping | None, current: Turn) -> list[str] | None:
    """Bucket ids whose section differs between the TURN that was sent and the serving policy's replay of it
    (memories written or purged since, or a policy changed since): None when nothing was recorded."""
    if recorded is None:
        return None
    sent = {it.get("bucket_id"): sec.get("key") for sec in (*recorded.get("stable", ()), *recorded.get("sections", ()))
            for it in sec.get("items", ()) if it.get("bucket_id")}
    now = {bid: sec for bid, (sec, _it) in turn_items(current).items()}
    return sorted(b for b in set(sent) | set(now) if sent.get(b) != now.get(b))


def totals(diffs: Sequence[Mapping]) -> dict:
    """The difference over all turns: turns changed, memories newly injected or suppressed, UNKNOWN gained or lost,
    and the tokens each section took under each policy (summed over the turns)."""
    sections: dict[str, list[int]] = {}
    for d in diffs:
        for key, (b, a) in d["section_tokens"].items():
            acc = sections.setdefault(key, [0, 0])
            acc[0] += b
            acc[1] += a
    kinds = [c["kind"] for d in diffs for c in d["changes"]]
    return {"turns": len(diffs), "changed": sum(bool(d["changed"]) for d in diffs),
            "memory_changed": sum(bool(d["changes"]) for d in diffs),
            "newly_injected": kinds.count("enters"), "newly_suppressed": kinds.count("leaves"),
            "moved": kinds.count("moves"), "reshaped": kinds.count("reshaped"), "recut": kinds.count("recut"),
            "unknown_gained": sum(1 for d in diffs if d["unknown_after"] and not d["unknown_before"]),
            "unknown_lost": sum(1 for d in diffs if d["unknown_before"] and not d["unknown_after"]),
            "tokens": {"before": sum(d["tokens_before"] for d in diffs),
                       "after": sum(d["tokens_after"] for d in diffs)},
            "section_tokens": sections, "reasons": _reason_counts(c for d in diffs for c in d["changes"])}


def _reason_counts(changes: Iterable[Mapping]) -> list[dict]:
    """How often each change of reason happened (e.g. skipped_recent_rounds -> cooldown_multiplier), most first."""
    counts: dict[tuple, int] = {}
    for c in changes:
        key = (c["kind"], c["reason_before"], c["reason_after"])
        counts[key] = counts.get(key, 0) + 1
    return [{"kind": k, "reason_before": b, "reason_after": a, "count": n}
            for (k, b, a), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
