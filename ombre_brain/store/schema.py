"""The store's own tables and their numbered migrations (see :meth:`Ledger.ensure_schema`).

Steps are never renumbered or edited once released: a change is a new step at the end. Every
step is idempotent, because ledgers written before versions were recorded run all of them.
"""

from __future__ import annotations

import uuid

from ..buckets import bucket_from_json
from ..memory_layers import storage_roles

CORE = """
CREATE TABLE IF NOT EXISTS spaces (
    space TEXT PRIMARY KEY,
    collection TEXT NOT NULL,
    model_id TEXT NOT NULL,
    dimension INTEGER NOT NULL,
    created TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS buckets (
    space TEXT NOT NULL,
    id TEXT NOT NULL,
    state TEXT NOT NULL,               -- pending | updating | committed | deleting
    data TEXT NOT NULL,                -- the bucket's §3 JSON
    content_hash TEXT NOT NULL,
    type TEXT NOT NULL,
    created TEXT NOT NULL,
    last_active TEXT NOT NULL,
    source TEXT,
    seq INTEGER NOT NULL,
    PRIMARY KEY (space, id)
);
CREATE INDEX IF NOT EXISTS buckets_hash ON buckets(space, content_hash);
CREATE INDEX IF NOT EXISTS buckets_created ON buckets(space, created);
CREATE INDEX IF NOT EXISTS buckets_state ON buckets(state);
CREATE TABLE IF NOT EXISTS moments (
    space TEXT NOT NULL,
    id TEXT NOT NULL,
    bucket_id TEXT NOT NULL,
    ordinal INTEGER NOT NULL,
    section TEXT NOT NULL,
    context_only INTEGER NOT NULL,
    text TEXT NOT NULL,
    tokens TEXT NOT NULL,              -- space-joined lexical tokens
    start INTEGER NOT NULL,
    "end" INTEGER NOT NULL,
    PRIMARY KEY (space, id)
);
CREATE INDEX IF NOT EXISTS moments_bucket ON moments(space, bucket_id);
CREATE TABLE IF NOT EXISTS edges (
    space TEXT NOT NULL,
    from_id TEXT NOT NULL,
    to_id TEXT NOT NULL,
    relation TEXT NOT NULL,
    confidence REAL NOT NULL,
    created TEXT NOT NULL,
    PRIMARY KEY (space, from_id, to_id, relation)
);
CREATE INDEX IF NOT EXISTS edges_to ON edges(space, to_id);
CREATE TABLE IF NOT EXISTS counters (
    name TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS store_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
INDEXES = ("CREATE INDEX IF NOT EXISTS buckets_active ON buckets(space, last_active);"  # list(since=...)
           "DROP INDEX IF EXISTS buckets_type;"  # list(type=...): newest of a type from the index, no sort
           "CREATE INDEX IF NOT EXISTS buckets_type2 ON buckets(space, type, created);")
# list(role=...): the few buckets that may stand in a side section, found without decoding the space.
# Roles sit in the index so a role absent from the space costs an index walk, not a row fetch per bucket.
ROLES_INDEX = ("DROP INDEX IF EXISTS buckets_roles; "
               "CREATE INDEX IF NOT EXISTS buckets_roles2 ON buckets(space, roles, created) WHERE roles != '';")
# The change sequence (design §16): per space, a number that grows with every bucket written, updated or
# deleted, and with every purge; each change names bucket ids, never text. Every process keeps its lexical
# index current from it (reads.py), so a write through one process is searchable through all of them.
CHANGES = """
CREATE TABLE IF NOT EXISTS change_heads (
    space TEXT PRIMARY KEY,
    seq INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS changes (
    space TEXT NOT NULL,
    seq INTEGER NOT NULL,
    op TEXT NOT NULL,                  -- write | update | delete | reset (the whole index: a purge, a dropped space)
    bucket_ids TEXT NOT NULL,          -- space-joined ids ('' for reset)
    PRIMARY KEY (space, seq)
);
"""


def _add_roles(ledger, c) -> None:
    """Add and fill the ``roles`` column in a ledger made before it existed."""
    if "roles" in ledger.columns(c, "buckets"):
        return
    ledger.run_ddl(c, "ALTER TABLE buckets ADD COLUMN roles TEXT NOT NULL DEFAULT ''")
    for r in c.execute("SELECT space, id, data FROM buckets").fetchall():
        roles = storage_roles(bucket_from_json(r["data"]))
        if roles:
            c.execute("UPDATE buckets SET roles = ? WHERE space = ? AND id = ?", (roles, r["space"], r["id"]))


def _add_second(ledger, c) -> None:
    """Moments keep their second-opinion vector (retrieval/second_opinion.py) beside their text; older ledgers
    gain the column empty (admission encodes a missing one when it needs it)."""
    if "second" not in ledger.columns(c, "moments"):
        ledger.run_ddl(c, "ALTER TABLE moments ADD COLUMN second BLOB")


# Provenance (design §10): every source that wrote a bucket's text holds a claim on it; '' is a write
# without a source identity. A purge by source removes that source's claims and deletes only the
# buckets no claim holds any more. ``buckets.source`` stays the first (displayed) source.
CLAIMS = """
CREATE TABLE IF NOT EXISTS bucket_sources (
    space TEXT NOT NULL,
    bucket_id TEXT NOT NULL,
    source TEXT NOT NULL,
    PRIMARY KEY (space, bucket_id, source)
);
CREATE INDEX IF NOT EXISTS bucket_sources_source ON bucket_sources(space, source);
"""


def _fill_claims(ledger, c) -> None:
    """Ledgers written before claims existed: each bucket is claimed by the source it was written with."""
    c.execute("INSERT INTO bucket_sources(space, bucket_id, source) SELECT space, id, COALESCE(source, '') "
              "FROM buckets WHERE true ON CONFLICT DO NOTHING")  # WHERE: SQLite's parser needs it here


def _context_never_proves(ledger, c) -> None:
    """A ``context`` section (the companion's question beside a short answer) became context-only: moments stored
    before keep their text and vectors and only stop proving a hit on their bucket (``CONTEXT_ONLY_SECTIONS``)."""
    c.execute("UPDATE moments SET context_only = 1 WHERE section = 'context' AND context_only = 0")


def _profile_roles(ledger, c) -> None:
    """Ledgers written before the profile existed: buckets with a stable hint gain the ``profile`` role."""
    for r in c.execute("SELECT space, id, data, roles FROM buckets").fetchall():
        roles = storage_roles(bucket_from_json(r["data"]))
        if roles != r["roles"]:
            c.execute("UPDATE buckets SET roles = ? WHERE space = ? AND id = ?", (roles, r["space"], r["id"]))


def _episode_roles(ledger, c) -> None:
    """Ledgers written before the profile read endings from episodes: buckets with an episode hint gain the
    ``profile`` role too (the same refill as the profile's step)."""
    _profile_roles(ledger, c)


STEPS = (CORE, INDEXES, _add_roles, ROLES_INDEX, _add_second, CHANGES, CLAIMS, _fill_claims, _context_never_proves,
         _profile_roles, _episode_roles)


def ensure_store_schema(ledger) -> None:
    ledger.ensure_schema("store", *STEPS)


def store_id(ledger) -> str:
    """This installation's random id, made once; it namespaces collections on a shared Chroma server."""
    with ledger.tx() as c:
        c.execute("INSERT INTO store_meta(key, value) VALUES ('store_id', ?) ON CONFLICT DO NOTHING",
                  (uuid.uuid4().hex,))
        return c.execute("SELECT value FROM store_meta WHERE key = 'store_id'").fetchone()[0]


def recorded_store_id(ledger) -> str | None:
    """The store id if one was made (an embedded installation makes one only once it uses a Chroma server)."""
    row = ledger.one("SELECT value FROM store_meta WHERE key = 'store_id'")
    return row[0] if row is not None else None


def space_names(ledger) -> list[str]:
    return [r[0] for r in ledger.query("SELECT space FROM spaces ORDER BY space")]
