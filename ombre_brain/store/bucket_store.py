"""The bucket store Brain builds and every wing calls: one facade over small components.

Buckets and moments are kept consistent across the ledger, Chroma and the lexical index. Each
concern is a component of its own module, handed the shared :class:`~.core.StoreCore` (the
engines, encoders, lexical indexes, locks and turn scope) and the components it calls:

==============  ===================  ==========================================================
attribute       module               owns
==============  ===================  ==========================================================
``core``        :mod:`.core`         ledger, Chroma, encoders, lexical indexes, locks, spaces
``scope``       :mod:`.scope`        the turn each thread runs and what it has read (its memo)
``reader``      :mod:`.reads`        reads of buckets, lists and moments; both searches
``graph``       :mod:`.edges`        edges between buckets
``writer``      :mod:`.writes`       the write-ahead protocol: write, update, delete, recovery
``bulk``        :mod:`.bulk`         the same protocol a batch at a time (``write_many``)
``purger``      :mod:`.forgetting`   the bucket-table half of a purge, and its clean-up
``consistency`` :mod:`.consistency`  doctor's checks and repairs, reindex
==============  ===================  ==========================================================

:class:`BucketStore` names each public method once, as the component's method of the same name,
grouped by the interface of :mod:`.interfaces` it belongs to; a wing types its store as the
interface it uses.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..config import Config
from .bulk import BulkWriter
from .consistency import Consistency
from .core import StoreCore
from .edges import Graph
from .forgetting import Purger
from .reads import Reader
from .writes import Writer


class _via:
    """A facade member that is one component's member of the same name: ``get = _via("reader")``."""

    def __init__(self, component: str) -> None:
        self.component = component
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, store: Any, owner: type | None = None) -> Any:
        if store is None:
            return self
        return getattr(getattr(store, self.component), self.name)

    def __repr__(self) -> str:
        return f"<{self.component}.{self.name}>"


class BucketStore:
    """The storage facade used by Brain: each public method once, from the component that owns it."""

    def __init__(self, data_dir: Path, config: Config, embedder_factory, tokenizer, second_factory=None) -> None:
        self.core = core = StoreCore(data_dir, config, embedder_factory, tokenizer, second_factory)
        self.data_dir, self.config, self.ledger, self.chroma = core.data_dir, core.config, core.ledger, core.chroma
        self.reset_listeners = core.reset_listeners  # told when another process purged in a space
        self.scope = core.scope
        self.reader = Reader(core)
        self.graph = Graph(core, self.reader)
        self.writer = Writer(core, self.reader)
        self.bulk = BulkWriter(core, self.writer)
        self.purger = Purger(core, self.writer)
        self.consistency = Consistency(core, self.reader, self.writer)

    # TurnReads: the turn stages, the debug pages and MCP's reads
    turn_scope = _via("scope")
    known_space = _via("scope")
    change_head = _via("scope")
    list = _via("reader")
    list_ahead = _via("reader")
    get_ahead = _via("reader")
    get = _via("reader")
    get_many = _via("reader")
    edges = _via("graph")
    count = _via("reader")
    moments = _via("reader")

    # Search: retrieval's candidates and admission (and get_many, edges above)
    embedder = _via("core")
    second = _via("core")
    tokens = _via("core")
    lexical = _via("core")
    vector_search = _via("reader")
    lexical_search = _via("reader")
    moments_with_buckets = _via("reader")
    sample_moments = _via("reader")
    second_vectors = _via("reader")
    moment_tokens = _via("reader")
    get_vectors = _via("reader")
    vocabulary = _via("reader")
    edges_ahead = _via("graph")

    # Writes: Brain's writes and imports
    write = _via("writer")
    write_many = _via("bulk")
    update = _via("writer")
    delete = _via("writer")
    bucket_lock = _via("core")
    rewrite_metadata = _via("writer")
    add_edge = _via("graph")
    add_claims = _via("writer")
    sources = _via("writer")
    claim_counts = _via("writer")
    changed_since = _via("writer")

    # Forgetting: the forget wing's purge (and delete above)
    purge_rows = _via("purger")
    claims = _via("purger")
    held_elsewhere = _via("purger")
    release_claims = _via("purger")
    dream_sources = _via("purger")
    row_counts = _via("purger")
    count_type = _via("purger")
    mark_deleting = _via("purger")
    release_source = _via("purger")
    purged_terms = _via("purger")
    drop_space = _via("writer")
    after_purge = _via("purger")
    compact_vectors = _via("purger")

    # Upkeep, no wing's interface: Brain opening and closing the store, doctor, reindex, export
    reconcile = _via("writer")
    check_space = _via("consistency")
    repair_space = _via("consistency")
    orphan_collections = _via("consistency")
    reindex = _via("consistency")
    export_rows = _via("reader")
    spaces = _via("core")
    ensure_space = _via("core")
    store_id = _via("core")
    drop_lexical = _via("core")
    clear_cache = _via("core")
    close = _via("core")
