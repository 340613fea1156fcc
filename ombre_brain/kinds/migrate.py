"""Stores made before letters, plans and self entries were kinds of their own, converted once on open.

``import --from ombre-md`` used to bring a letter in as a ``journal`` bucket tagged
``ombre_type:letter``, a plan as a dynamic bucket tagged ``ombre_type:plan`` and
``plan_status:<status>`` (a closed plan ``resolved``), and a formal ``I`` entry as a dynamic bucket
tagged ``ombre_type:i``. Opening such a store converts each into its kind (type ``letter``,
``plan``, ``self`` with its ``kind_fields``; the marker tags go), and gives every anchored memory
the ``anchor`` role its count is read by. What the old import never kept cannot come back this
way: letters convert open (their locks were not mapped) and self-model candidates stay ordinary
memories; importing the same Ombre-Brain store again restores both, and changes nothing else.

The conversion runs once per ledger (``kinds_state``); a second process that races it does the
same idempotent work.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..buckets import Bucket
from ..timeutil import iso, now_utc

__all__ = ["ensure_tables", "legacy_changes", "migrate_on_open"]

log = logging.getLogger("ombre_brain")

SCHEMA = "CREATE TABLE IF NOT EXISTS kinds_state (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
DONE_KEY = "legacy_kinds_v1"
STATUS_TAG = "plan_status:"


def legacy_changes(bucket: Bucket) -> dict | None:
    """The update that turns one bucket of an old import into its kind, or None when it is not one."""
    tags = list(bucket.tags)
    low = [t.lower() for t in tags]
    if "ombre_type:letter" in low and bucket.type == "journal":
        kind = {"letter": {"lock_type": "none"}}
        return {"type": "letter", "kind_fields": kind, "tags": [t for t in tags if t.lower() != "ombre_type:letter"]}
    if "ombre_type:plan" in low and bucket.type == "dynamic":
        status = next((t[len(STATUS_TAG):] for t in low if t.startswith(STATUS_TAG)), "active")
        status = status if status in ("active", "resolved", "abandoned") else "active"
        history = [{"action": "imported", "to": status, "at": bucket.created or iso(now_utc())}]
        keep = [t for t in tags if t.lower() != "ombre_type:plan" and not t.lower().startswith(STATUS_TAG)]
        return {"type": "plan", "kind_fields": {"plan": {"status": status, "history": history}}, "tags": keep,
                "resolved": False}
    if "ombre_type:i" in low and bucket.type == "dynamic":
        return {"type": "self", "kind_fields": {"self": {"stage": "formal"}},
                "tags": [t for t in tags if t.lower() != "ombre_type:i"]}
    return None


def ensure_tables(ledger) -> None:
    """The kinds' own table (``migrate-ledger`` installs it in the target too, so the marker travels)."""
    ledger.ensure_schema("kinds", SCHEMA)


def migrate_on_open(store, update: Callable[..., Bucket]) -> dict:
    """Convert an old import's letters, plans and self entries, and index its anchors; once per ledger."""
    ledger = store.ledger
    ensure_tables(ledger)
    if ledger.one("SELECT value FROM kinds_state WHERE key = ?", (DONE_KEY,)) is not None:
        return {}
    done = {"letter": 0, "plan": 0, "self": 0, "anchors": 0}
    for space in store.spaces():
        for b in store.list(space, limit=None):
            changes = legacy_changes(b)
            if changes is not None:
                update(space, b.id, **changes)
                done[changes["type"]] += 1
            elif b.anchor:
                store.update(b)  # rewrites its storage roles, the anchor role among them
                done["anchors"] += 1
    with ledger.tx() as c:
        c.execute("INSERT INTO kinds_state(key, value) VALUES (?, ?) ON CONFLICT DO NOTHING",
                  (DONE_KEY, iso(now_utc())))
    if any(done.values()):
        log.info("converted an older store's kinds on open: %s", done)
    return done
