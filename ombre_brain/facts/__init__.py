"""Facts: the current truth about a user, as records with immutable revisions (design §9).

Pure modules: ``model`` (evidence validation), ``timeline`` (what a record says when),
``plan`` (the write rules), ``select`` (conditions, budgets, rendering); I/O: ``store``
and ``feed`` on the ledger.
"""

from __future__ import annotations

from .model import source_digest
from .select import background_line
from .store import FactsStore

__all__ = ["FactsStore", "background_line", "source_digest"]
