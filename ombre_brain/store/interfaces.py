"""What each wing may ask of the bucket store: narrow interfaces, one per kind of caller.

:class:`~ombre_brain.store.bucket_store.BucketStore` is one object with every method; a wing
that types its store as one of these says which of them it uses, so a reader (or a type checker)
sees that a turn only reads, that retrieval only searches, and that only the forget wing runs
the bucket-table half of a purge:

- :class:`TurnReads`: the turn stages and the read-only transports (debug pages, MCP status);
- :class:`Search`: retrieval's candidates and admission (both searches, vectors, encoders);
- :class:`Writes`: Brain's writes, imports;
- :class:`Forgetting`: the forget wing's purge;
- :class:`Dreaming`: the dream engine (reads recent material, mirrors dream state, rings edges).

:class:`ListRead` is one ``list()`` read as a value, so a read announced ahead of a turn
(``list_ahead``) and the read that takes it are the same object. A leaf module: it imports
nothing that imports the wings that use it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..buckets import Bucket, Moment
from ..recall_types import Edge

if TYPE_CHECKING:
    from ..retrieval.embedding import Embedder
    from ..retrieval.lexical import LexicalIndex
    from ..retrieval.second_opinion import SecondOpinion
    from .ledger import Ledger

__all__ = ["Dreaming", "Forgetting", "ListRead", "Search", "TurnReads", "Writes"]


@dataclass(frozen=True)
class ListRead:
    """One :meth:`TurnReads.list` read: its keywords (with list()'s defaults), hashable, so it can key a read
    sent ahead and name the read that later takes it."""

    type: str | None = None
    limit: int | None = 50
    since: str | None = None
    role: str | None = None

    def kwargs(self) -> dict[str, Any]:
        """list()'s keywords for this read."""
        return {"type": self.type, "limit": self.limit, "since": self.since, "role": self.role}


class TurnReads(Protocol):
    """What a turn reads: the space, its lists, buckets and their edges, inside one turn scope."""

    def turn_scope(self, space: str) -> AbstractContextManager[None]: ...

    def known_space(self, space: str) -> bool: ...

    def change_head(self, space: str) -> int: ...

    def list(self, space: str, *, type: str | None = None, limit: int | None = 50,
             since: str | None = None, role: str | None = None) -> list[Bucket]: ...

    def list_ahead(self, space: str, *reads: dict) -> None: ...

    def get_ahead(self, space: str, bucket_ids: Iterable[str]) -> None: ...

    def get(self, space: str, bucket_id: str) -> Bucket | None: ...

    def get_many(self, space: str, bucket_ids: Iterable[str]) -> dict[str, Bucket]: ...

    def edges(self, space: str, bucket_ids: Iterable[str] | None = None, *, ends: bool = False) -> list[Edge]: ...

    def count(self, space: str) -> int: ...

    def moments(self, space: str, bucket_id: str) -> list[Moment]: ...


class Search(Protocol):
    """What retrieval searches with: the encoders, both indexes, stored vectors, and the candidates' records."""

    @property
    def embedder(self) -> Embedder: ...

    @property
    def second(self) -> SecondOpinion | None: ...

    def tokens(self, text: str) -> list[str]: ...

    def lexical(self, space: str) -> LexicalIndex: ...

    def vector_search(self, space: str, vector: np.ndarray, k: int) -> dict[str, float]: ...

    def lexical_search(self, space: str, tokens: Sequence[str], k: int) -> dict[str, float]: ...

    def moments_with_buckets(self, space: str, moment_ids: Iterable[str], *,
                             seconds: bool = False) -> tuple[dict[str, Moment], dict[str, Bucket]]: ...

    def sample_moments(self, space: str, n: int) -> tuple[list[str], np.ndarray] | None: ...

    def second_vectors(self, space: str, moment_ids: Sequence[str]) -> dict[str, np.ndarray]: ...

    def moment_tokens(self, space: str, moment_ids: Sequence[str]) -> dict[str, tuple[str, list[str]]]: ...

    def get_vectors(self, space: str, moment_ids: Sequence[str]) -> dict[str, np.ndarray]: ...

    def vocabulary(self, limit: int) -> list[str]: ...

    def get_many(self, space: str, bucket_ids: Iterable[str]) -> dict[str, Bucket]: ...

    def edges(self, space: str, bucket_ids: Iterable[str] | None = None, *, ends: bool = False) -> list[Edge]: ...

    def edges_ahead(self, space: str, bucket_ids: Iterable[str]) -> None: ...


class Writes(Protocol):
    """What changes buckets: writes (one or many), updates, deletes, edges, claims, metadata-only rewrites."""

    def write(self, bucket: Bucket, *, dedupe: bool = True, given: Iterable[str] = ()) -> tuple[str, bool]: ...

    def write_many(self, buckets: Sequence[Bucket], *, dedupe: bool = True, batch_size: int = 256,
                   progress: Callable[[int], None] | None = None,
                   given: Sequence[Iterable[str]] | None = None, one_text: bool = False) -> list[tuple[str, bool]]: ...

    def update(self, bucket: Bucket) -> None: ...

    def delete(self, space: str, bucket_ids: Iterable[str]) -> list[str]: ...

    def bucket_lock(self, space: str, bucket_ids: Iterable[str]) -> AbstractContextManager[None]: ...

    def rewrite_metadata(self, space: str, bucket_id: str, changes: Mapping | Callable[[dict], Mapping], *,
                         conn: Any = None) -> bool: ...

    def add_edge(self, space: str, from_id: str, to_id: str, relation: str, confidence: float) -> Edge: ...

    def add_claims(self, space: str, claims: Iterable[tuple[str, str]]) -> None: ...

    def sources(self, space: str, bucket_id: str) -> list[str]: ...


class Forgetting(Protocol):
    """The bucket-table half of a purge: inside its transaction (``conn``), then its removal steps."""

    ledger: Ledger

    def purge_rows(self, conn: Any, space: str, *, bucket_ids: Sequence[str] | None = None,
                   source: str | None = None, whole_space: bool = False) -> list[tuple[str, str | None]]: ...

    def claims(self, conn: Any, space: str, bucket_ids: Sequence[str]) -> dict[str, set[str]]: ...

    def held_elsewhere(self, conn: Any, space: str, bucket_ids: Sequence[str], source: str) -> set[str]: ...

    def release_claims(self, conn: Any, space: str, source: str, bucket_ids: Sequence[str]) -> None: ...

    def dream_sources(self, conn: Any, space: str) -> dict[str, set[str]]: ...

    def row_counts(self, conn: Any, space: str, ids: Sequence[str] | None) -> dict[str, int]: ...

    def count_type(self, conn: Any, space: str, type: str) -> int: ...

    def mark_deleting(self, conn: Any, space: str, bucket_ids: Sequence[str] | None) -> None: ...

    def release_source(self, space: str, source: str) -> list[str]: ...

    def purged_terms(self, space: str, bucket_ids: Sequence[str]) -> list[str]: ...

    def delete(self, space: str, bucket_ids: Iterable[str]) -> list[str]: ...

    def drop_space(self, space: str) -> dict: ...

    def after_purge(self, space: str) -> None: ...

    def compact_vectors(self, space: str, *, dropped: bool = False) -> dict: ...


class Dreaming(Protocol):
    """What the dream engine uses: recent material and echoes, the embedder for cues, and the dream's own
    bucket (its state mirrored metadata-only, under its lock; its ring edges). Its own table is in ``ledger``."""

    ledger: Ledger

    @property
    def embedder(self) -> Embedder: ...

    def tokens(self, text: str) -> list[str]: ...

    def list(self, space: str, *, type: str | None = None, limit: int | None = 50,
             since: str | None = None, role: str | None = None) -> list[Bucket]: ...

    def get(self, space: str, bucket_id: str) -> Bucket | None: ...

    def get_many(self, space: str, bucket_ids: Iterable[str]) -> dict[str, Bucket]: ...

    def lexical_search(self, space: str, tokens: Sequence[str], k: int) -> dict[str, float]: ...

    def bucket_lock(self, space: str, bucket_ids: Iterable[str]) -> AbstractContextManager[None]: ...

    def rewrite_metadata(self, space: str, bucket_id: str, changes: Mapping | Callable[[dict], Mapping], *,
                         conn: Any = None) -> bool: ...

    def add_edge(self, space: str, from_id: str, to_id: str, relation: str, confidence: float) -> Edge: ...
