"""`ombre-brain bench --playground N`: how long the policy playground takes to replay N recorded turns.

The bench store's space gets N real turns first (sessions of 20, every third message asking again what
was asked two turns before, so cooldowns bite), recorded in the turn log as the gateway records them;
then one playground replay runs them all under the serving policy and a draft (no skip rounds, half the
Recalled Memory budget), exactly as ``POST /api/playground/replay`` runs it, and is timed end to end.
Recording is not part of the replay's time, and the caches it warmed (query embeddings, plans) are cleared first,
as after a restart. The replay writes nothing (docs/design.md §22).
"""

from __future__ import annotations

from datetime import timedelta
from time import perf_counter

from ..config import load_config
from ..replay.playground import run_playground
from ..replay.sources import recorded_source
from .bench import BASE_TIME, REPLIES, SPACE, TURNS_PER_SESSION, _bar, synthetic_queries

__all__ = ["bench_playground", "format_playground"]

REASK_EVERY = 3  # every third message repeats the one two turns before it


def _record(brain, n: int, seed: int) -> None:
    queries = synthetic_queries(n, seed)
    bar = _bar(n, "recording turns", "turn")
    start = BASE_TIME + timedelta(days=1)
    history: list[dict] = []
    for i in range(n):
        q = queries[i - 2] if i % TURNS_PER_SESSION >= 2 and i % REASK_EVERY == 2 else queries[i]
        if i % TURNS_PER_SESSION == 0:
            history = []
        brain.turn(SPACE, f"play-{i // TURNS_PER_SESSION}", q, now=start + timedelta(minutes=i),
                   context=history[-6:] or None)
        history += [{"role": "user", "content": q}, {"role": "assistant", "content": REPLIES[i % len(REPLIES)]}]
        bar.update()
    bar.close()


def bench_playground(brain, turns: int, seed: int) -> dict:
    """Record ``turns`` turns in the bench space, then time one playground replay of them under a draft."""
    _record(brain, turns, seed + 3)
    serving = brain.config
    g = serving.gateway
    draft = load_config(serving, {"gateway": {"skip_recent_rounds": 0,
                                              "budgets": {"recalled_memory": g.budgets.recalled_memory // 2}}})
    for obj in brain.forget.caches:  # cold, as after a restart: no query embedding or plan left from recording
        obj.clear_cache()
    t0 = perf_counter()
    source = recorded_source(brain, SPACE, turns, draft)
    res = run_playground(source, serving, draft)
    seconds = perf_counter() - t0
    t = res["totals"]
    return {"turns": res["source"]["turns"], "seconds": round(seconds, 1),
            "per_turn_ms": round(seconds * 1000 / max(res["source"]["turns"], 1), 1),
            "changed": t["changed"], "newly_injected": t["newly_injected"], "newly_suppressed": t["newly_suppressed"],
            "changed_keys": res["changed_keys"]}


def format_playground(p: dict) -> str:
    return (f"replay  {p['turns']} recorded turns under two policies in {p['seconds']} s "
            f"({p['per_turn_ms']} ms a turn); {p['changed']} changed, {p['newly_injected']} newly injected, "
            f"{p['newly_suppressed']} newly suppressed")
