"""One playground replay from start to result (docs/design.md §22): a source's turns under two policies, compared.

:func:`run_playground` opens each batch of the source (a space's own store, or a scratch store), runs its
turns under the serving policy and the draft (:func:`~.pairs.replay_pairs`), and turns every pair
into its difference (:mod:`.diff`) as it goes, so a long replay reports progress turn by turn and
can be cancelled between turns. The result is plain data: per turn the memories that entered or left
which section with the gate and reason that changed, the outcome a labelled turn was scored on, and for
a recorded turn whether the serving policy's replay still shows what was sent; then the totals and, for a
labelled set or scenarios, the score under each policy.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from time import perf_counter

from ..config import Config
from .diff import diff_turn, recorded_drift, totals
from .draft import changed_keys
from .pairs import Cancelled, Pair, replay_pairs
from .sources import Source

__all__ = ["MAX_RENDERED", "run_playground"]

MAX_RENDERED = 100  # changed turns whose rendered text (both policies) the result carries, for side-by-side reading


def run_playground(source: Source, serving: Config, draft: Config, *,
                   progress: Callable[[int, int], None] | None = None,
                   cancel: threading.Event | None = None) -> dict:
    """Replay every turn of ``source`` under both policies; the per-turn differences, totals and scores."""
    t0 = perf_counter()
    total = source.size
    rows: list[dict] = []
    pairs: list[Pair] = []
    rendered = 0

    def heard(pair: Pair) -> None:
        nonlocal rendered
        t = pair.turn
        d = diff_turn(pair.current, pair.draft)
        row = {"key": t.key, "session": t.session, "query": t.query, "at": t.now.isoformat(), **d,
               "outcome": source.outcome(pair), "drift": recorded_drift(t.recorded, pair.current)}
        if d["changed"] and rendered < MAX_RENDERED:
            row["rendered"] = [pair.current.rendered, pair.draft.rendered]
            rendered += 1
        rows.append(row)
        pair.current.debug.clear()  # candidates and traces are not needed past the diff: keep the job small
        pair.draft.debug.clear()
        pairs.append(pair)
        if progress is not None:
            progress(len(rows), total)

    if progress is not None:
        progress(0, total)
    for batch in source.batches:
        if cancel is not None and cancel.is_set():  # before a scenario's scratch store is built
            raise Cancelled()
        with batch.open() as (brain, turns, current, draft_parts):
            replay_pairs(brain, turns, current, draft_parts, on_turn=heard, cancel=cancel)
    drifted = [r for r in rows if r["drift"]]
    return {
        "source": {"kind": source.kind, "name": source.name, "turns": len(rows), "skipped": source.skipped},
        "changed_keys": changed_keys(draft, serving),
        "totals": totals(rows),
        "metric": source.metric(pairs),
        "drift": len(drifted),
        "turns": rows,
        "seconds": round(perf_counter() - t0, 2),
    }
