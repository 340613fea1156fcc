"""Chroma, embedded or over HTTP: one collection per space, embeddings always passed in.

We never give Chroma an embedding function, so it never tries to fetch its ONNX model, and
we never share a collection between spaces: a ``where`` filter on a shared collection costs
about 20x at 100k items (design §12) and one bug away from a cross-space read.

Forgetting and Chroma's files (chromadb 1.5, embedded). Chroma keeps each vector in three
places: its write-ahead log (the ``embeddings_queue`` table of ``chroma.sqlite3``, until the
vector index next persists), the metadata segment (rows of the same file) and the HNSW segment
directory (``<segment uuid>/data_level0.bin``), where a deleted vector is only marked deleted
and stays until its slot is reused. So :meth:`ChromaBackend.rebuild` copies a space's live
vectors into a fresh collection and drops the old one, and :meth:`ChromaBackend.compact_files`
cleans what Chroma's API cannot reach (:mod:`.chroma_files`: orphaned segment directories, freed
SQLite pages, and index slots Chroma wrote from uninitialised memory). A new index's files are
also scrubbed after this process first uses its space (:meth:`ChromaBackend._settle`), so bytes a
purge freed cannot land in a collection made afterwards. docs/forgetting.md says what remains and
how to clear it on a Chroma server.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from ..config import ChromaConfig
from ..errors import StoreError
from .chroma_files import Scrubber, compact
from .rwgate import SharedGate

os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

log = logging.getLogger("ombre_brain")

REBUILD_SUFFIX = "-rebuild"  # a space's collection while it is rebuilt; never listed as a space
COPY_BATCH = 4000
COSINE = {"hnsw": {"space": "cosine"}}


def collection_name(space: str, namespace: str = "") -> str:
    """A Chroma-legal, stable name for a space (space names may contain ':').

    ``namespace`` is the data directory's store id in server mode, so two data directories
    sharing one `chroma run` never read or drop each other's collections.
    """
    key = f"{namespace}\x00{space}" if namespace else space
    return "ob_" + hashlib.sha256(key.encode()).hexdigest()[:32]


class ChromaBackend:
    """The thin layer over chromadb; everything it returns is plain Python data."""

    def __init__(self, cfg: ChromaConfig, path: Path, namespace: str = "") -> None:
        import chromadb
        from chromadb.config import Settings

        settings = Settings(anonymized_telemetry=False, allow_reset=False)
        self.mode = cfg.mode
        self.path = path
        self.namespace = namespace
        try:
            if cfg.mode == "http":
                self.client = chromadb.HttpClient(host=cfg.host, port=cfg.port, settings=settings)
                self.client.heartbeat()
            else:
                path.mkdir(parents=True, exist_ok=True)
                self.client = chromadb.PersistentClient(path=str(path), settings=settings)
        except Exception as exc:  # chromadb raises many types; name the target and the cause
            where = f"http://{cfg.host}:{cfg.port}" if cfg.mode == "http" else str(path)
            raise StoreError(f"cannot open Chroma ({cfg.mode}) at {where}: {exc}") from None
        self._collections: dict[str, Any] = {}
        self._files = SharedGate()                   # exclusive: compact_files, scrubbing (every file of chroma/)
        self._spaces: dict[str, SharedGate] = {}      # exclusive: rebuild of one space
        self._gates_lock = threading.Lock()
        self._scrubber = Scrubber(path) if cfg.mode == "embedded" else None
        self._settled: set[str] = set()          # spaces whose index files were scrubbed since this process used them

    # ------------------------------------------------------------ gates

    @contextmanager
    def _use(self, space: str) -> Iterator[None]:
        with self._files.shared(), self._gate(space).shared():
            yield

    def _gate(self, space: str) -> SharedGate:
        with self._gates_lock:
            return self._spaces.setdefault(space, SharedGate())

    def _meta(self, space: str) -> dict:
        return {"space": space, "store": self.namespace} if self.namespace else {"space": space}

    def collection(self, space: str):
        col = self._collections.get(space)
        if col is None:
            with self._use(space):
                col = self._open(space)
        return col

    def _open(self, space: str):
        """The space's collection; finishes a rebuild a crash cut short between its drop and rename.

        On a server other processes may be rebuilding this space right now, so there a copy beside an
        intact original is left to its maker (the next rebuild removes one a crash left behind).
        """
        name = collection_name(space, self.namespace)
        col = _get(self.client, name)
        leftover = _get(self.client, name + REBUILD_SUFFIX)
        if col is None and leftover is not None:  # the old one was dropped: the copy is whole
            _rename(self.client, leftover, name)
            col = _get(self.client, name)
        elif leftover is not None and self.mode == "embedded":  # a copy that never finished; the original is intact
            self.client.delete_collection(name + REBUILD_SUFFIX)
        if col is None:
            col = self.client.get_or_create_collection(name, embedding_function=None, configuration=COSINE,
                                                       metadata=self._meta(space))
        self._collections[space] = col
        return col

    # ------------------------------------------------------------ reads and writes

    def _do(self, space: str, fn: Callable[[Any], Any]) -> Any:
        """``fn(collection)`` for the space; once more on a freshly opened handle when the cached one is
        gone (another process sharing the server rebuilt or dropped the collection since)."""
        with self._use(space):
            try:
                out = fn(self.collection(space))
            except Exception as exc:  # chromadb's NotFoundError: the handle names a collection that is gone
                if type(exc).__name__ != "NotFoundError":
                    raise
                self._collections.pop(space, None)
                out = fn(self.collection(space))
        if space not in self._settled:
            self._settle(space)
        return out

    def _settle(self, space: str) -> None:
        """Scrub the index files Chroma wrote from uninitialised memory, once this process has used the space.

        Chroma creates a space's index files on its first use in a process (a new collection, or one
        too small to have persisted yet), and fills their unused slots from freed memory, which may
        hold another memory's vectors, purged ones included (:mod:`.chroma_files`). Every Chroma call
        of the process waits meanwhile, so no index persists while its file is zeroed.
        """
        if self._scrubber is None:
            self._settled.add(space)
            return
        with self._files.exclusive():
            self._scrubber.run()
            self._settled.add(space)

    def upsert(self, space: str, ids: Sequence[str], embeddings: np.ndarray, metadatas: Sequence[dict],
               documents: Sequence[str] | None = None) -> None:
        if not ids:
            return
        vecs = np.asarray(embeddings, dtype=np.float32)
        docs = list(documents) if documents is not None else None
        self._do(space, lambda col: col.upsert(ids=list(ids), embeddings=vecs, metadatas=list(metadatas),
                                               documents=docs))

    def delete(self, space: str, ids: Sequence[str]) -> None:
        if ids:
            self._do(space, lambda col: col.delete(ids=list(ids)))

    def ids_for_bucket(self, space: str, bucket_id: str) -> list[str]:
        return self._do(space, lambda col: col.get(where={"bucket_id": bucket_id}, include=[])["ids"])

    def all_ids(self, space: str) -> list[str]:
        def every(col) -> list[str]:
            out: list[str] = []
            while True:
                got = col.get(include=[], limit=5000, offset=len(out))["ids"]
                out.extend(got)
                if len(got) < 5000:
                    return out

        return self._do(space, every)

    def get_text_hashes(self, space: str, ids: Sequence[str]) -> dict[str, str | None]:
        """The moment-text hash each id was embedded from (Chroma holds hashes, never memory text)."""
        if not ids:
            return {}
        got = self._do(space, lambda col: col.get(ids=list(ids), include=["metadatas"]))
        return {i: (m or {}).get("text_hash") for i, m in zip(got["ids"], got["metadatas"] or [], strict=False)}

    def get_vectors(self, space: str, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored vectors of these moment ids, by id (ids Chroma does not hold are left out)."""
        if not ids:
            return {}
        got = self._do(space, lambda col: col.get(ids=list(ids), include=["embeddings"]))
        emb = got.get("embeddings")
        if emb is None:
            return {}
        return {i: np.asarray(v, dtype=np.float32) for i, v in zip(got["ids"], emb, strict=False)}

    def get_documents(self, space: str, ids: Sequence[str]) -> dict[str, str]:
        if not ids:
            return {}
        got = self._do(space, lambda col: col.get(ids=list(ids), include=["documents"]))
        return dict(zip(got["ids"], got["documents"] or [], strict=False))

    def query(self, space: str, vector: np.ndarray, k: int) -> dict[str, float]:
        """Top-k moment ids with cosine similarity (1 - cosine distance).

        No ``count()`` first: Chroma 1.x answers an empty or smaller collection with fewer ids,
        and the count cost a second round trip (4 ms at 10k moments) on every turn.
        """
        q = np.asarray(vector, dtype=np.float32).reshape(1, -1)
        res = self._do(space, lambda col: col.query(query_embeddings=q, n_results=k, include=["distances"]))
        return {i: 1.0 - float(d) for i, d in zip(res["ids"][0], res["distances"][0], strict=False)}

    def count(self, space: str) -> int:
        return self._do(space, lambda col: col.count())

    def drop_space(self, space: str) -> None:
        name = collection_name(space, self.namespace)
        with self._files.shared(), self._gate(space).exclusive():
            self._collections.pop(space, None)
            self._settled.discard(space)
            for n in (name, name + REBUILD_SUFFIX):
                try:
                    self.client.delete_collection(n)
                except Exception:  # already gone is fine: the goal state holds
                    pass

    def list_spaces(self) -> list[str]:
        out = []
        for col in self.client.list_collections():
            meta = getattr(col, "metadata", None) or {}
            if getattr(col, "name", "").endswith(REBUILD_SUFFIX):
                continue
            if "space" in meta and meta.get("store", "") == self.namespace:
                out.append(meta["space"])
        return out

    # ------------------------------------------------------------ compaction (forgetting)

    def rebuild(self, space: str) -> int:
        """Copy the space's live vectors into a fresh collection and drop the old one; returns how many.

        The old collection's HNSW files keep deleted vectors (only marked deleted) and its log
        keeps upserts until the index persists; a fresh collection holds neither. Writers and
        readers of this space wait while it runs; other spaces do not.
        """
        name = collection_name(space, self.namespace)
        with self._files.shared(), self._gate(space).exclusive():
            old = self._collections.get(space) or self._open(space)
            if _get(self.client, name + REBUILD_SUFFIX) is not None:
                self.client.delete_collection(name + REBUILD_SUFFIX)
            fresh = self.client.create_collection(name + REBUILD_SUFFIX, embedding_function=None,
                                                  configuration=COSINE, metadata=self._meta(space))
            copied, offset = 0, 0
            while True:
                got = old.get(include=["embeddings", "metadatas"], limit=COPY_BATCH, offset=offset)
                if not got["ids"]:
                    break
                fresh.upsert(ids=got["ids"], embeddings=np.asarray(got["embeddings"], dtype=np.float32),
                             metadatas=got["metadatas"])
                copied += len(got["ids"])
                offset += len(got["ids"])
            self._collections.pop(space, None)
            self._settled.discard(space)  # a new index: its files are scrubbed before the space is used again
            self.client.delete_collection(name)
            _rename(self.client, fresh, name)
            self._collections[space] = _get(self.client, name)
            return copied

    def copy_space_to(self, other: ChromaBackend, space: str) -> int:
        """Copy a space's vectors and metadata into another Chroma (a move to a server); returns how many."""
        copied, offset = 0, 0
        with self._use(space):
            col = self.collection(space)
            while True:
                got = col.get(include=["embeddings", "metadatas"], limit=COPY_BATCH, offset=offset)
                if not got["ids"]:
                    return copied
                other.upsert(space, got["ids"], np.asarray(got["embeddings"], dtype=np.float32), got["metadatas"])
                copied += len(got["ids"])
                offset += len(got["ids"])

    def compact_files(self) -> dict:
        """Embedded only: remove segment directories no collection owns, VACUUM chroma.sqlite3 and zero the
        index slots Chroma wrote from uninitialised memory (:mod:`.chroma_files`).

        Returns what was done; on a Chroma server there is nothing this process can reach.
        """
        if self._scrubber is None:
            return {"orphan_dirs": 0, "vacuumed": False, "scrubbed_bytes": 0}
        with self._files.exclusive():
            return compact(self.path, self._scrubber)

    def close(self) -> None:
        """Release Chroma's files and threads (PersistentClient keeps them until the last close).

        The index files are scrubbed once more first: a space whose index Chroma recreated since its
        last scrub (its cache let it go and took it back) leaves no uninitialised bytes behind.
        """
        if self._scrubber is not None:
            with self._files.exclusive():
                self._scrubber.run(force=True)
        self._collections.clear()
        close = getattr(self.client, "close", None)
        if callable(close):
            try:
                close()
            except Exception:  # closing twice, or a server already gone: nothing left to release
                pass


def _rename(client, col, name: str) -> None:
    """Give a finished copy its space's name; another process sharing the server may have done it first."""
    try:
        col.modify(name=name)
    except Exception:  # the name is taken: by this very copy, renamed by another process, or it is an error
        if _get(client, name) is None:
            raise


def _get(client, name: str):
    """The named collection, or None when there is none."""
    try:
        return client.get_collection(name, embedding_function=None)
    except Exception:  # chromadb raises NotFoundError (1.x) or ValueError (older) for a missing one
        return None
