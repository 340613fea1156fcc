"""`doctor` and `reindex`: make Chroma, the lexical index and the ledger agree again.

The checks and repairs are the store's own (:mod:`ombre_brain.store.consistency`); this module
runs them over every space and turns the result into a report an operator can read. Every
repair is named, and a second check after the repairs says whether the store is now consistent.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone

from ..errors import OmbreError
from .consistency import ISSUES, issue_count


def reindex(brain, space: str) -> dict:
    """Re-embed every bucket of a space with the configured model (after a model change)."""
    return brain.store.reindex(space)


def check_space(store, space: str) -> dict:
    return store.check_space(space)


def _lock(brain) -> str:
    """The data directory's writer lock, in words: who holds it, and what the last holder left."""
    if getattr(brain, "_dir_lock", None) is None:
        return "none: a shared ledger with a Chroma server is written by several processes (docs/deploy.md)"
    if brain.lock_note:
        return f"taken over: {brain.lock_note}"
    return (f"held by this process (pid {os.getpid()}); no earlier writer left it unreleased. The lock is the "
            "operating system's, on the directory: ombre.lock only names the holder, never delete it by hand")


def doctor(brain, *, repair: bool = True) -> dict:
    """Check every space of the store; with ``repair``, fix what can be fixed and check again.

    ``consistent`` says whether the store was consistent when checked (after the reconcile that
    repair runs first); ``consistent_after`` whether it is now.
    """
    store = brain.store
    report: dict = {"checked_at": datetime.now(timezone.utc).isoformat(), "repair": repair, "lock": _lock(brain),
                    "reconciled": store.reconcile() if repair else {"rolled_forward": 0, "deleted": 0},
                    "spaces": {}}
    for space in store.spaces():
        entry = store.check_space(space)
        entry["repaired"] = []
        if repair and issue_count(entry):
            try:
                entry["repaired"] = store.repair_space(space, entry)
            except OmbreError as exc:
                entry["repaired"].append(f"could not repair: {exc.message}")
        report["spaces"][space] = entry
    orphan_cols = store.orphan_collections()
    report["orphan_collections"] = orphan_cols
    if repair and orphan_cols:
        for space in orphan_cols:
            store.chroma.drop_space(space)
        report["repaired_collections"] = f"dropped {len(orphan_cols)} Chroma collections of unknown spaces"
    report["issues"] = sum(issue_count(e) for e in report["spaces"].values()) + len(orphan_cols)
    report["consistent"] = report["issues"] == 0
    if repair and not report["consistent"]:
        after = [store.check_space(s) for s in store.spaces()]
        report["consistent_after"] = not any(issue_count(e) for e in after) and not store.orphan_collections()
    else:
        report["consistent_after"] = report["consistent"]
    return report


def describe_space(space: str, e: dict) -> list[str]:
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



__all__ = ["ISSUES", "check_space", "describe_space", "doctor", "reindex"]
