"""The ledger: what Chroma does not hold, and the write-ahead record of what it does.

One interface (:mod:`.base`), two engines: SQLite, the embedded default (:mod:`.sqlite`, a file
in the data directory), and PostgreSQL (:mod:`.postgres`, ``store.ledger.url``), which several
gateway processes on several hosts share. Every capability keeps its state here through
:meth:`Ledger.ensure_schema`, :meth:`Ledger.tx` and the queries, keyed by space.
"""

from __future__ import annotations

from pathlib import Path

from ...config import StoreConfig
from ...errors import ConfigError, NotFoundError
from .base import IDENTITY, Ahead, Dialect, Ledger, is_postgres_url, joined
from .sqlite import SqliteLedger

LEDGER_FILE = "ledger.db"


def open_ledger(store: StoreConfig, data_dir: str | Path, *, must_exist: bool = False) -> Ledger:
    """The ledger the config names: ``store.ledger.url``, or ``ledger.db`` in the data directory.

    ``must_exist``: refuse (NotFoundError) to create an embedded ledger where there is none (commands
    that only read one, such as `jobs`).
    """
    url = store.ledger.url
    if url is None:
        if must_exist and not (Path(data_dir) / LEDGER_FILE).exists():
            raise NotFoundError(f"no data directory at {data_dir} (no {LEDGER_FILE}); pass --data DIR")
        return SqliteLedger(Path(data_dir) / LEDGER_FILE, store.ledger_busy_timeout_ms)
    if not is_postgres_url(url):
        raise ConfigError("expected a postgresql://… URL (or null for the embedded SQLite ledger)",
                          key="store.ledger.url")
    try:
        from .postgres import PostgresLedger
    except ImportError:
        raise ConfigError("store.ledger.url names PostgreSQL, but its driver is not installed: "
                          "pip install 'ombre-brain[postgres]' (psycopg and psycopg-pool)",
                          key="store.ledger.url") from None
    return PostgresLedger(url, pool_size=store.ledger.pool_size, connect_timeout_s=store.ledger.connect_timeout_s)


__all__ = ["IDENTITY", "LEDGER_FILE", "Ahead", "Dialect", "Ledger", "SqliteLedger", "joined", "open_ledger"]
