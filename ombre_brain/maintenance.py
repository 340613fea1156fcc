"""Reindexing and `doctor`: make Chroma, the lexical index and the ledger agree again.

The ledger is the record of truth: doctor re-adds moments Chroma lost, deletes moments
Chroma holds for buckets the ledger does not know, and finishes half-done writes and
deletes, printing each repair so an operator can see what happened.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone

from .buckets import bucket_from_stored, build_moments


def reindex(brain, space: str) -> dict:
    """Re-embed every bucket of a space with the configured model (after a model change)."""
    store = brain.store
    rows = store.ledger.query("SELECT data FROM buckets WHERE space = ? AND state = 'committed'", (space,))
    store.chroma.drop_space(space)
    with store.ledger.tx() as c:
        c.execute("UPDATE spaces SET model_id = ?, dimension = ? WHERE space = ?",
                  (store.embedder.model_id, store.embedder.dimension, space))
    store._checked_spaces.discard(space)
    n = 0
    batch = []
    for r in rows:
        batch.append(bucket_from_stored(json.loads(r["data"])))
        if len(batch) >= 64:
            n += _reembed(store, batch)
            batch = []
    n += _reembed(store, batch)
    return {"space": space, "buckets": len(rows), "moments": n, "model_id": store.embedder.model_id}


def _reembed(store, buckets) -> int:
    if not buckets:
        return 0
    moments = [(b, m) for b in buckets for m in store.moments(b.space, b.id)]
    vectors = store.embedder.passages([m.text for _, m in moments])
    for b in buckets:
        idx = [i for i, (bb, _) in enumerate(moments) if bb.id == b.id]
        store._chroma_put(b, [moments[i][1] for i in idx], vectors[idx])
    return len(moments)


def doctor(brain, *, repair: bool = True) -> dict:
    """Compare the three stores per space; repair by treating the ledger as the truth."""
    store = brain.store
    report = {"checked_at": datetime.now(timezone.utc).isoformat(), "reconciled": store.reconcile(), "spaces": {}}
    for space in store.spaces():
        ledger_ids = {r["id"]: r["bucket_id"] for r in store.ledger.query(
            "SELECT m.id, m.bucket_id FROM moments m JOIN buckets b ON b.space = m.space AND b.id = m.bucket_id "
            "WHERE m.space = ? AND b.state = 'committed'", (space,))}
        chroma_ids = set(store.chroma.all_ids(space))
        missing = sorted(set(ledger_ids) - chroma_ids)
        orphans = sorted(chroma_ids - set(ledger_ids))
        lex = store.lexical(space)
        lex_missing = [m for m in ledger_ids if m not in lex]
        entry = {"buckets": store.count(space), "moments": len(ledger_ids), "missing_in_chroma": len(missing),
                 "orphans_in_chroma": len(orphans), "missing_in_lexical": len(lex_missing), "repaired": []}
        if repair and missing:
            buckets = store.get_many(space, {ledger_ids[m] for m in missing})
            for b in buckets.values():
                ms = build_moments(b)
                store._chroma_put(b, ms, store.embedder.passages([m.text for m in ms]))
            entry["repaired"].append(f"re-added {len(missing)} moments to Chroma")
        if repair and orphans:
            store.chroma.delete(space, orphans)
            entry["repaired"].append(f"deleted {len(orphans)} orphan moments from Chroma")
        if repair and lex_missing:
            with store._lock:
                store._lexical.pop(space, None)
            entry["repaired"].append(f"rebuilt the lexical index ({len(lex_missing)} moments were missing)")
        report["spaces"][space] = entry
    report["consistent"] = all(not (e["missing_in_chroma"] or e["orphans_in_chroma"] or e["missing_in_lexical"])
                               for e in report["spaces"].values())
    return report


def cmd_doctor(args) -> int:
    from .brain import Brain

    with Brain.open(args.data, args.config) as brain:
        report = doctor(brain)
    for space, e in report["spaces"].items():
        print(f"{space}: {e['buckets']} buckets, {e['moments']} moments; missing in Chroma {e['missing_in_chroma']}, "
              f"orphans {e['orphans_in_chroma']}, missing in lexical {e['missing_in_lexical']}")
        for r in e["repaired"]:
            print(f"  repaired: {r}")
    rec = report["reconciled"]
    print(f"reconciled on open: {rec['rolled_forward']} writes rolled forward, {rec['deleted']} deletes finished")
    print("consistent" if report["consistent"] else "inconsistencies found (repaired where possible)", file=sys.stderr)
    return 0
