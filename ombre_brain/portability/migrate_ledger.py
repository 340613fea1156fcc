"""`migrate-ledger`: move an embedded installation's ledger into PostgreSQL (docs/deploy.md).

Every table of ``DIR/ledger.db`` (all spaces: buckets, moments, edges, sessions, jobs, facts,
purges and receipts, suppressions, dreams, the change sequence) is copied into the target in one
transaction, after both ledgers are brought to the current schema. The target must be empty: a
copy cut short leaves it empty and can be run again, and running it again after it finished says
so (the store id matches) instead of copying twice.

Vectors. The store id (``store_meta``) moves with the ledger, so collections a Chroma server
already holds for this installation stay valid. Vectors in the embedded Chroma (``DIR/chroma``)
stay there for a deployment that keeps embedded Chroma in DIR; when the config names a Chroma
server, they are copied into it, under the store id, without re-embedding. ``ombre-brain doctor``
afterwards re-embeds anything missing either way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from ..config import Config
from ..dream import engine as dream_engine
from ..errors import NotFoundError, ValidationError
from ..facts import store as facts_store
from ..forget import purge
from ..gateway import jobs, sessions
from ..kinds import migrate as kinds_migrate
from ..store.chroma import ChromaBackend
from ..store.dirlock import DataDirLock
from ..store.ledger import LEDGER_FILE, Ledger, SqliteLedger, open_ledger
from ..store.ledger.base import is_postgres_url
from ..store.ledger.transfer import copy_ledger, filled_tables
from ..store.schema import ensure_store_schema, recorded_store_id, space_names, store_id

SCHEMAS = (ensure_store_schema, sessions.ensure_tables, jobs.ensure_tables, facts_store.ensure_tables,
           purge.ensure_tables, dream_engine.ensure_tables, kinds_migrate.ensure_tables)


def install_schemas(ledger: Ledger) -> None:
    """Every capability's tables, at their current version."""
    for ensure in SCHEMAS:
        ensure(ledger)


def migrate_ledger(source: str | Path, url: str, config: Config, *,
                   progress: Callable[[str, int], None] | None = None) -> dict:
    """Copy ``source``'s embedded ledger into the PostgreSQL database at ``url``; returns what was done."""
    source = Path(source)
    if not is_postgres_url(url):
        raise ValidationError("expected a postgresql://… URL", field="to")
    if not (source / LEDGER_FILE).is_file():
        raise NotFoundError(f"no embedded ledger at {source / LEDGER_FILE}; --from takes the data directory")
    store_cfg = dataclasses.replace(config.store, ledger=dataclasses.replace(config.store.ledger, url=url))
    hold = DataDirLock.acquire(source)  # a moving installation must be stopped: its writer would go on without us
    src = SqliteLedger(source / LEDGER_FILE, config.store.ledger_busy_timeout_ms)
    dst = open_ledger(store_cfg, source)
    try:
        install_schemas(src)
        install_schemas(dst)
        out: dict = {"from": str(source / LEDGER_FILE), "to": dst.describe(), "store_id": store_id(src)}
        there = filled_tables(dst)
        if there:
            if recorded_store_id(dst) == out["store_id"] and there == filled_tables(src):
                out |= {"status": "already_migrated", "tables": there, "vectors": _vectors(source, config, 0)}
                return out
            shown = ", ".join(f"{t} ({n} rows)" for t, n in sorted(there.items())[:5])
            raise ValidationError(f"{dst.describe()} already holds data ({shown}); migrate-ledger copies into an "
                                  "empty database only: create a new one (createdb …) or a new schema, and point "
                                  "--to at it", code="target_not_empty")
        out["tables"] = copy_ledger(src, dst, progress=progress)
        out["status"] = "migrated"
        out["vectors"] = _vectors(source, config, _copy_vectors(source, config, src, out["store_id"]))
        return out
    finally:
        src.close()
        dst.close()
        hold.release()


def _copy_vectors(source: Path, config: Config, src: Ledger, namespace: str) -> int:
    """Embedded vectors into the configured Chroma server, under the store id; how many were copied."""
    if config.store.chroma.mode != "http" or not (source / "chroma").is_dir():
        return 0
    embedded = ChromaBackend(dataclasses.replace(config.store.chroma, mode="embedded"), source / "chroma")
    server = ChromaBackend(config.store.chroma, source / "chroma", namespace=namespace)
    try:
        return sum(embedded.copy_space_to(server, s) for s in space_names(src))
    finally:
        embedded.close()
        server.close()


def _vectors(source: Path, config: Config, copied: int) -> str:
    if config.store.chroma.mode == "http":
        if copied:
            return (f"copied {copied} vectors from {source / 'chroma'} into the Chroma server at "
                    f"{config.store.chroma.host}:{config.store.chroma.port}")
        return "the Chroma server keeps this store's collections (they are named by its store id, which moved too)"
    return (f"vectors stay in {source / 'chroma'} (embedded Chroma): keep serving with --data {source}, or set "
            "store.chroma.mode: http and run migrate-ledger again with that config to copy them to a server")


__all__ = ["install_schemas", "migrate_ledger"]
