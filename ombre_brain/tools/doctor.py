"""Reindexing and `doctor`: make Chroma, the lexical index and the ledger agree again.

The ledger is the record of truth. Opening a store already rolls half-finished writes
forward and finishes half-done deletes and purges (``reconcile``); doctor then compares the
three stores space by space, and with ``repair`` fixes what it finds: it re-adds moments
Chroma lost or holds with stale text, deletes what Chroma holds that the ledger does not
know, rebuilds missing moment rows, drops dangling edges and orphan collections, and
rebuilds the lexical index. Every repair is named in the report so an operator sees what
happened; a second check after the repairs says whether the store is now consistent.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone

from ..buckets import bucket_from_stored, build_moments
from ..errors import OmbreError

ISSUES = ("unfinished", "missing_in_chroma", "orphans_in_chroma", "stale_in_chroma", "buckets_without_moments",
          "orphan_moment_rows", "dangling_edges", "missing_in_lexical", "extra_in_lexical")
DOC_CHUNK = 500


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
    """Put the ledger's moments of these buckets into Chroma again, embedded in one batch."""
    if not buckets:
        return 0
    moments = [(b, m) for b in buckets for m in store.moments(b.space, b.id)]
    if not moments:
        return 0
    vectors = store.embedder.passages([m.text for _, m in moments])
    for b in buckets:
        idx = [i for i, (bb, _) in enumerate(moments) if bb.id == b.id]
        if idx:
            store._chroma_put(b, [moments[i][1] for i in idx], vectors[idx])
    return len(moments)


# ---------------------------------------------------------------- checks


def _bucket_of(moment_id: str) -> str:
    return moment_id.rsplit("#", 1)[0]


def check_space(store, space: str) -> dict:
    """Compare the ledger, Chroma and the lexical index for one space; read-only."""
    states = {r["id"]: r["state"] for r in store.ledger.query("SELECT id, state FROM buckets WHERE space = ?",
                                                              (space,))}
    committed = {b for b, s in states.items() if s == "committed"}
    rows = store.ledger.query("SELECT id, bucket_id, text FROM moments WHERE space = ?", (space,))
    ledger_text = {r["id"]: r["text"] for r in rows if r["bucket_id"] in committed}
    with_moments = {r["bucket_id"] for r in rows}
    chroma_ids = set(store.chroma.all_ids(space))
    missing = sorted(set(ledger_text) - chroma_ids)
    without = committed - with_moments
    # Chroma ids of unfinished buckets are the reconcile's; those of buckets whose moment rows are being
    # rebuilt are theirs again afterwards: neither is an orphan.
    orphans = sorted(i for i in chroma_ids - set(ledger_text)
                     if states.get(_bucket_of(i), "committed") == "committed" and _bucket_of(i) not in without)
    present = sorted(set(ledger_text) & chroma_ids)
    stale = []
    for i in range(0, len(present), DOC_CHUNK):
        chunk = present[i:i + DOC_CHUNK]
        hashes = store.chroma.get_text_hashes(space, chunk)
        stale += [m for m in chunk if hashes.get(m) != _text_hash(ledger_text[m])]
    lex = store.lexical(space)
    lex_ids = set(getattr(lex, "_docs", ()))  # the moment ids it holds (LexicalIndex has no public listing)
    edges = store.ledger.query("SELECT from_id, to_id, relation FROM edges WHERE space = ?", (space,))
    return {
        "buckets": len(committed),
        "moments": len(ledger_text),
        "chroma_moments": len(chroma_ids),
        "unfinished": sorted(b for b, s in states.items() if s != "committed"),
        "missing_in_chroma": missing,
        "orphans_in_chroma": orphans,
        "stale_in_chroma": sorted(stale),
        "buckets_without_moments": sorted(without),
        "orphan_moment_rows": sorted(r["id"] for r in rows if r["bucket_id"] not in states),
        "dangling_edges": [(e["from_id"], e["to_id"], e["relation"]) for e in edges
                           if e["from_id"] not in states or e["to_id"] not in states],
        "missing_in_lexical": sorted(m for m in ledger_text if m not in lex),
        "extra_in_lexical": sorted(lex_ids - set(ledger_text)),
    }


def _orphan_collections(store) -> list[str]:
    try:
        in_chroma = set(store.chroma.list_spaces())
    except Exception:  # listing is best effort: a server without the call is not an inconsistency
        return []
    return sorted(in_chroma - set(store.spaces()))


# ---------------------------------------------------------------- repairs


def _repair_space(store, space: str, found: dict) -> list[str]:
    done: list[str] = []
    if found["orphan_moment_rows"]:
        ids = found["orphan_moment_rows"]
        with store.ledger.tx() as c:
            for i in range(0, len(ids), 900):
                chunk = ids[i:i + 900]
                c.execute(f"DELETE FROM moments WHERE space = ? AND id IN ({','.join('?' * len(chunk))})",
                          (space, *chunk))
        done.append(f"deleted {len(ids)} ledger moment rows whose bucket is gone")
    if found["buckets_without_moments"]:
        rebuilt = store.get_many(space, found["buckets_without_moments"])
        with store.ledger.tx() as c:
            for b in rebuilt.values():
                for m in build_moments(b):
                    c.execute('INSERT OR REPLACE INTO moments(space, id, bucket_id, ordinal, section, context_only, '
                              'text, tokens, start, "end") VALUES (?,?,?,?,?,?,?,?,?,?)',
                              (space, m.id, b.id, m.ordinal, m.section, int(m.context_only), m.text,
                               " ".join(store.tokens(m.text)), m.start, m.end))
        _reembed(store, list(rebuilt.values()))
        done.append(f"rebuilt the moments of {len(rebuilt)} buckets that had none")
    redo = {_bucket_of(m) for m in found["missing_in_chroma"] + found["stale_in_chroma"]}
    if redo:
        buckets = list(store.get_many(space, redo).values())
        for i in range(0, len(buckets), 64):
            _reembed(store, buckets[i:i + 64])
        if found["missing_in_chroma"]:
            done.append(f"re-added {len(found['missing_in_chroma'])} moments to Chroma")
        if found["stale_in_chroma"]:
            done.append(f"re-embedded {len(found['stale_in_chroma'])} moments whose Chroma text was stale")
    if found["orphans_in_chroma"]:
        ids = found["orphans_in_chroma"]
        for i in range(0, len(ids), 2000):
            store.chroma.delete(space, ids[i:i + 2000])
        done.append(f"deleted {len(ids)} orphan moments from Chroma")
    if found["dangling_edges"]:
        with store.ledger.tx() as c:
            c.executemany("DELETE FROM edges WHERE space = ? AND from_id = ? AND to_id = ? AND relation = ?",
                          [(space, *e) for e in found["dangling_edges"]])
        done.append(f"deleted {len(found['dangling_edges'])} edges to buckets that are gone")
    if found["missing_in_lexical"] or found["extra_in_lexical"] or done:
        with store._lock:
            store._lexical.pop(space, None)
        if found["missing_in_lexical"] or found["extra_in_lexical"]:
            done.append(f"rebuilt the lexical index ({len(found['missing_in_lexical'])} moments missing, "
                        f"{len(found['extra_in_lexical'])} extra)")
    return done


def _issue_count(entry: dict) -> int:
    return sum(len(entry[k]) for k in ISSUES)


def doctor(brain, *, repair: bool = True) -> dict:
    """Check every space of the store; with ``repair``, fix what can be fixed and check again.

    ``consistent`` says whether the store was consistent when checked (after the reconcile that
    repair runs first); ``consistent_after`` whether it is now.
    """
    store = brain.store
    report: dict = {"checked_at": datetime.now(timezone.utc).isoformat(), "repair": repair,
                    "reconciled": store.reconcile() if repair else {"rolled_forward": 0, "deleted": 0},
                    "spaces": {}}
    for space in store.spaces():
        entry = check_space(store, space)
        entry["repaired"] = []
        if repair and _issue_count(entry):
            try:
                entry["repaired"] = _repair_space(store, space, entry)
            except OmbreError as exc:
                entry["repaired"].append(f"could not repair: {exc.message}")
        report["spaces"][space] = entry
    orphan_cols = _orphan_collections(store)
    report["orphan_collections"] = orphan_cols
    if repair and orphan_cols:
        for space in orphan_cols:
            store.chroma.drop_space(space)
        report["repaired_collections"] = f"dropped {len(orphan_cols)} Chroma collections of unknown spaces"
    report["issues"] = sum(_issue_count(e) for e in report["spaces"].values()) + len(orphan_cols)
    report["consistent"] = report["issues"] == 0
    if repair and not report["consistent"]:
        after = [check_space(store, s) for s in store.spaces()]
        report["consistent_after"] = not any(_issue_count(e) for e in after) and not _orphan_collections(store)
    else:
        report["consistent_after"] = report["consistent"]
    return report


def _describe(space: str, e: dict) -> list[str]:
    lines = [f"{space}: {e['buckets']} buckets, {e['moments']} moments in the ledger, {e['chroma_moments']} in Chroma"]
    labels = {
        "unfinished": "unfinished writes or deletes", "missing_in_chroma": "moments missing in Chroma",
        "orphans_in_chroma": "orphan moments in Chroma", "stale_in_chroma": "moments with stale text in Chroma",
        "buckets_without_moments": "buckets without moments", "orphan_moment_rows": "moment rows without a bucket",
        "dangling_edges": "edges to missing buckets", "missing_in_lexical": "moments missing in the lexical index",
        "extra_in_lexical": "stale moments in the lexical index",
    }
    for key, label in labels.items():
        if e[key]:
            shown = ", ".join(str(x) for x in e[key][:5]) + (" …" if len(e[key]) > 5 else "")
            lines.append(f"  found {len(e[key])} {label}: {shown}")
    lines += [f"  repaired: {r}" for r in e["repaired"]]
    return lines


def cmd_doctor(args) -> int:
    from ..brain import Brain

    with Brain.open(args.data, args.config) as brain:
        report = doctor(brain)
    rec = report["reconciled"]
    print(f"reconciled on open: {rec['rolled_forward']} writes rolled forward, {rec['deleted']} deletes finished")
    for space, e in report["spaces"].items():
        print("\n".join(_describe(space, e)))
    if report["orphan_collections"]:
        print(f"orphan Chroma collections (spaces unknown to the ledger): {', '.join(report['orphan_collections'])}")
        print(f"  repaired: {report.get('repaired_collections', 'not repaired')}")
    if report["consistent"]:
        print(f"consistent: {len(report['spaces'])} spaces checked, nothing to repair")
        return 0
    if report["consistent_after"]:
        print(f"repaired {report['issues']} problems; the store is now consistent")
        return 0
    print("inconsistencies remain after repair (see above)", file=sys.stderr)
    return 1


def _text_hash(text: str) -> str:
    from ..buckets import Moment

    return Moment("", "", 0, "", text, False).text_hash
