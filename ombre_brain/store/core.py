"""What every part of the bucket store shares: the engines, the encoders, the lexical indexes, the locks.

:class:`StoreCore` owns the ledger and the Chroma backend, the embedder and the second-opinion
encoder (each loaded on first use), the tokenizer, each space's lexical index (following the
ledger's change sequence, :mod:`.changes`), which spaces' models were checked, the per-bucket
locks, the per-thread turn scope (:mod:`.scope`) and the listeners told when another process
purged in a space. The store's components (reads, edges, writes, purging, consistency) are each
handed this one object, so none of them reaches into another's attributes for shared state.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from ..buckets import clear_decoded
from ..config import Config
from ..errors import EmbeddingError
from ..retrieval.lexical import LexicalIndex
from ..retrieval.second_opinion import encode_blob
from . import changes
from .chroma import ChromaBackend, collection_name
from .ledger import open_ledger
from .schema import ensure_store_schema, space_names, store_id
from .scope import TurnScope

BUCKET_LOCK_STRIPES = 64


class StoreCore:
    """The shared state of one bucket store; see the module docstring for what it owns."""

    def __init__(self, data_dir: Path, config: Config, embedder_factory, tokenizer, second_factory=None) -> None:
        self.data_dir = Path(data_dir)
        self.config = config
        self.ledger = open_ledger(config.store, self.data_dir)
        ensure_store_schema(self.ledger)
        namespace = self.store_id() if config.store.chroma.mode == "http" else ""
        self.chroma = ChromaBackend(config.store.chroma, self.data_dir / "chroma", namespace=namespace)
        self.scope = TurnScope(self.ledger)  # the turn this thread is running
        self._embedder_factory = embedder_factory
        self._embedder = None
        self._second_factory = second_factory or (lambda: None)
        self._second: object | None = None
        self._second_loaded = False
        self._tokenize = tokenizer
        self._lexical: dict[str, changes.Followed] = {}
        self.reset_listeners: list[Callable[[str], None]] = []  # told when another process purged in a space
        self._lock = threading.RLock()
        self._checked_spaces: set[str] = set()
        self._bucket_locks = [threading.RLock() for _ in range(BUCKET_LOCK_STRIPES)]

    # ------------------------------------------------------------ locks

    @contextmanager
    def bucket_lock(self, space: str, bucket_ids: Iterable[str]) -> Iterator[None]:
        """Serialise changes to the same buckets (striped, reentrant, deadlock-free), across processes too
        where they share the ledger (its advisory locks, taken in one order).

        Two updates of one bucket, or an update racing a delete, would otherwise interleave their
        ledger and Chroma steps: the loser gets a false 404, or Chroma keeps moments of a deleted bucket.
        """
        ids = sorted(set(bucket_ids))
        stripes = sorted({hash((space, b)) % BUCKET_LOCK_STRIPES for b in ids})
        for i in stripes:
            self._bucket_locks[i].acquire()
        try:
            with self.ledger.locks([("bucket", space, b) for b in ids]):
                yield
        finally:
            for i in reversed(stripes):
                self._bucket_locks[i].release()

    # ------------------------------------------------------------ encoders

    @property
    def embedder(self):
        if self._embedder is None:
            self._embedder = self._embedder_factory()
        return self._embedder

    @property
    def second(self):
        """The second-opinion encoder for admission, or None where it is off or not installed."""
        if not self._second_loaded:
            self._second = self._second_factory()
            self._second_loaded = True
        return self._second

    def seconds(self, texts: Sequence[str]) -> list[bytes | None]:
        """The second-opinion vector of each text as the ledger stores it (None where the encoder is off)."""
        enc = self.second
        if enc is None or not texts:
            return [None] * len(texts)
        return [encode_blob(v) for v in enc.passages(texts)]

    def embed_moments(self, memories: Sequence[Sequence[str]], *, shared: bool = False) -> np.ndarray:
        """The vectors of several memories' moment texts, one row per text: each memory within
        ``embedding.max_tokens_per_memory`` tokens of the model (retrieval/lanes.py), however it is written
        (a write, a batch, a re-embedding), so the same memory always gets the same vectors; ``shared``:
        the memories are pieces of one text, which share that budget (MCP grow; re-embedded, each piece
        has the whole budget to itself)."""
        return self.embedder.memory_passages(memories, budget=self.config.embedding.max_tokens_per_memory,
                                             shared=shared)

    def tokens(self, text: str) -> list[str]:
        return self._tokenize(text)

    def clear_cache(self) -> None:
        """Forget the loaded encoders' cached queries and words (nothing to do before they are loaded), and the
        decoded buckets (they quote memories)."""
        clear_decoded()
        if self._embedder is not None:
            self._embedder.clear_cache()
        if self._second_loaded and self._second is not None:
            self._second.clear_cache()

    # ------------------------------------------------------------ spaces

    def store_id(self) -> str:
        """This installation's random id, made once; it namespaces collections on a shared Chroma server."""
        return store_id(self.ledger)

    def ensure_space(self, space: str, create: bool = True) -> bool:
        """Record which model a space is embedded with; refuse to mix models in one space.

        A write to a shared ledger checks every time: another process may have dropped the space since.
        """
        if space in self._checked_spaces and not (create and self.ledger.shared):
            return True
        row = self.ledger.one("SELECT model_id, dimension FROM spaces WHERE space = ?", (space,))
        emb = self.embedder
        if row is None:
            if not create:
                return False
            with self.ledger.tx() as c:
                c.execute("INSERT INTO spaces(space, collection, model_id, dimension, created) VALUES (?,?,?,?,?) "
                          "ON CONFLICT DO NOTHING", (space, collection_name(space, self.chroma.namespace), emb.model_id,
                                                     emb.dimension, datetime.now(timezone.utc).isoformat()))
        elif row["model_id"] != emb.model_id:
            raise EmbeddingError(
                f"space {space!r} was embedded with {row['model_id']} but the configured embedder is "
                f"{emb.model_id}; run `ombre-brain reindex --space {space}` to re-embed it, or configure "
                f"embedding.backend/model to match")
        self._checked_spaces.add(space)
        return True

    def recheck_space(self, space: str) -> None:
        """The space was dropped or re-embedded: the next use checks its model again."""
        self._checked_spaces.discard(space)

    def spaces(self) -> list[str]:
        return space_names(self.ledger)

    # ------------------------------------------------------------ the lexical indexes

    def lexical(self, space: str) -> LexicalIndex:
        """The space's BM25 index, caught up with the ledger's change sequence first (changes.py)."""
        turn = self.scope.turn(space)
        if turn is not None and turn["synced"]:
            with self._lock:
                f = self._lexical.get(space)
            if f is not None:
                return f.index
        now = turn["head"] if turn is not None else changes.head(self.ledger, space)
        if turn is not None:
            turn["synced"] = True
        with self._lock:
            f = self._lexical.get(space)
            if f is None:
                f = changes.build(self.ledger, space)
            elif f.seq < now:
                f = changes.catch_up(self.ledger, space, f, now, self._on_reset)
            self._lexical[space] = f
            return f.index

    def _on_reset(self, space: str) -> None:
        """Another process purged in this space: what this one derived from query or memory text goes too."""
        self.recheck_space(space)  # a whole-space purge dropped it
        for listener in self.reset_listeners:
            listener(space)

    def drop_lexical(self, space: str) -> None:
        """Forget the space's cached lexical index; the next search rebuilds it from the ledger.

        A purge calls this so that not even the dead vocabulary of removed moments stays in memory.
        """
        with self._lock:
            self._lexical.pop(space, None)

    def drop_all_lexical(self) -> None:
        """Forget every space's cached lexical index (after crash recovery changed what is committed)."""
        with self._lock:
            self._lexical.clear()

    def close(self) -> None:
        self.chroma.close()
        self.ledger.close()
