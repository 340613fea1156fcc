"""A data directory opened for reading only: what ``export`` reads, beside the process that writes it.

A writer holds the data directory's lock (:mod:`ombre_brain.store.dirlock`) and opens Chroma, whose
index files only one process may own. An export needs neither: buckets, edges, claims, facts and
suppressed sources are all in the ledger, and the ledger's engine serves readers beside a writer
(SQLite's WAL, PostgreSQL). So :func:`open_reader` opens the ledger alone (it must exist; nothing
is created, reconciled or migrated past what a current ledger needs) and offers the few members of
:class:`~ombre_brain.brain.Brain` that :func:`~ombre_brain.portability.jsonl.export_rows` reads.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ..config import Config, load_config
from ..facts import FactsStore
from ..forget.purge import check_source
from ..store.ledger import open_ledger
from ..store.reads import export_rows
from ..store.schema import space_names


class LedgerReader:
    """The ledger of one data directory, read-only, with Brain's names for what export reads."""

    def __init__(self, path: str | Path, config: Any = None) -> None:
        self.path = Path(path)
        self.config = cfg = config if isinstance(config, Config) else load_config(config)
        self.ledger = open_ledger(cfg.store, self.path, must_exist=True)
        self.store = SimpleNamespace(export_rows=export_rows)
        self.facts = FactsStore(self.ledger, cfg)
        self.forget = SimpleNamespace(check_source=lambda space, source: check_source(self.ledger, space, source))

    def spaces(self) -> list[str]:
        return space_names(self.ledger)

    def close(self) -> None:
        self.ledger.close()

    def __enter__(self) -> LedgerReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_reader(path: str | Path, config: Any = None) -> LedgerReader:
    """The data directory's ledger for reading; NotFoundError when there is none."""
    return LedgerReader(path, config)


__all__ = ["LedgerReader", "open_reader"]
