"""`eval plan`: how often the query planner reads a message's context mode right, on a labelled set.

The mode decides what the companion is told (design §5, `gateway.context_mode_lines`): telling a
user who mentions a headache to "answer from the recalled memories only" is wrong, so the planner is
measured on messages labelled by hand (lookups, sharing, venting, greetings, requests, intimacy,
play, conflict, repair; Chinese and English). A message may carry the conversation before it
(``context``: "user: …" / "assistant: …" lines, as the shared sets write them): it is planned as a turn
hears it (design §14). Needs no store: planning is pure.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import yaml

from ..config import CONTEXT_MODES, load_config
from ..errors import ValidationError
from ..recall_policy import RecallPolicy
from ..retrieval.lexical import init_jieba, tokenize
from ..text import is_cjk_text
from ..turn.conversation import context_messages, normalize_context


def load_modes(path: str | Path) -> list[tuple[str, str, tuple]]:
    """(message, labelled mode, the conversation before it) rows."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ValidationError(f"cannot read {path}: {exc}") from None
    rows = []
    for i, m in enumerate(data.get("messages") or ()):
        if not isinstance(m, dict) or not isinstance(m.get("q"), str) or m.get("mode") not in CONTEXT_MODES:
            raise ValidationError(f"{path}: messages[{i}] needs a text `q` and a `mode` in {', '.join(CONTEXT_MODES)}")
        context = m.get("context") or []
        if not isinstance(context, list) or not all(isinstance(c, str) for c in context):
            raise ValidationError(f"{path}: messages[{i}].context must be a list of 'user: …' / 'assistant: …' lines")
        rows.append((m["q"], m["mode"], context_messages(context)))
    if not rows:
        raise ValidationError(f"{path}: no `messages`")
    return rows


def eval_plan(path: str | Path, *, config=None) -> dict:
    cfg = load_config(config)
    init_jieba(None)
    stop = frozenset(w.lower() for w in cfg.lexical.stop_words)
    policy = RecallPolicy(cfg, tokenizer=lambda t, s=None: tokenize(t, stop))
    rows = load_modes(path)
    confusion: Counter = Counter()
    by_lang: dict[str, list[int]] = {}
    misses = []
    gw = cfg.gateway
    for q, want, context in rows:
        heard = normalize_context(list(context), max_messages=gw.context_messages, max_chars=gw.context_chars)
        got = policy.plan_query(q, heard or None).context_mode
        confusion[(want, got)] += 1
        by_lang.setdefault("zh" if is_cjk_text(q) else "en", []).append(int(got == want))
        if got != want:
            misses.append({"q": q, "want": want, "got": got})
    ok = sum(confusion[(m, m)] for m in CONTEXT_MODES)
    return {"messages": len(rows), "accuracy": round(100 * ok / len(rows), 1),
            "by_language": {k: round(100 * sum(v) / len(v), 1) for k, v in sorted(by_lang.items())},
            "by_mode": {m: {"n": sum(n for (w, _), n in confusion.items() if w == m),
                            "right": confusion[(m, m)]} for m in CONTEXT_MODES},
            "misses": misses}


def format_plan(res: dict) -> str:
    lines = [f"context_mode: {res['accuracy']}% right on {res['messages']} messages "
             f"({', '.join(f'{k} {v}%' for k, v in res['by_language'].items())})", "",
             "| mode | n | right |", "|---|---|---|"]
    lines += [f"| {m} | {r['n']} | {r['right']} |" for m, r in res["by_mode"].items() if r["n"]]
    if res["misses"]:
        lines += ["", "misread:"] + [f"  {x['q']!r}: {x['got']} (labelled {x['want']})" for x in res["misses"]]
    return "\n".join(lines)


__all__ = ["eval_plan", "format_plan", "load_modes"]
