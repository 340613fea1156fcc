"""Chroma, embedded or over HTTP: one collection per space, embeddings always passed in.

We never give Chroma an embedding function, so it never tries to fetch its ONNX model, and
we never share a collection between spaces: a ``where`` filter on a shared collection costs
about 20x at 100k items (DESIGN §12) and one bug away from a cross-space read.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..config import ChromaConfig
from ..errors import StoreError

os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")


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

    def collection(self, space: str):
        col = self._collections.get(space)
        if col is None:
            meta = {"space": space, "store": self.namespace} if self.namespace else {"space": space}
            col = self.client.get_or_create_collection(
                collection_name(space, self.namespace), embedding_function=None,
                configuration={"hnsw": {"space": "cosine"}}, metadata=meta,
            )
            self._collections[space] = col
        return col

    def upsert(self, space: str, ids: Sequence[str], embeddings: np.ndarray, metadatas: Sequence[dict],
               documents: Sequence[str] | None = None) -> None:
        if not ids:
            return
        self.collection(space).upsert(ids=list(ids), embeddings=np.asarray(embeddings, dtype=np.float32),
                                      metadatas=list(metadatas),
                                      documents=list(documents) if documents is not None else None)

    def delete(self, space: str, ids: Sequence[str]) -> None:
        if ids:
            self.collection(space).delete(ids=list(ids))

    def ids_for_bucket(self, space: str, bucket_id: str) -> list[str]:
        return self.collection(space).get(where={"bucket_id": bucket_id}, include=[])["ids"]

    def all_ids(self, space: str) -> list[str]:
        col = self.collection(space)
        out: list[str] = []
        offset = 0
        while True:
            got = col.get(include=[], limit=5000, offset=offset)["ids"]
            out.extend(got)
            if len(got) < 5000:
                return out
            offset += len(got)

    def get_text_hashes(self, space: str, ids: Sequence[str]) -> dict[str, str | None]:
        """The moment-text hash each id was embedded from (Chroma holds hashes, never memory text)."""
        if not ids:
            return {}
        got = self.collection(space).get(ids=list(ids), include=["metadatas"])
        return {i: (m or {}).get("text_hash") for i, m in zip(got["ids"], got["metadatas"] or [], strict=False)}

    def get_vectors(self, space: str, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored vectors of these moment ids, by id (ids Chroma does not hold are left out)."""
        if not ids:
            return {}
        got = self.collection(space).get(ids=list(ids), include=["embeddings"])
        emb = got.get("embeddings")
        if emb is None:
            return {}
        return {i: np.asarray(v, dtype=np.float32) for i, v in zip(got["ids"], emb, strict=False)}

    def get_documents(self, space: str, ids: Sequence[str]) -> dict[str, str]:
        if not ids:
            return {}
        got = self.collection(space).get(ids=list(ids), include=["documents"])
        return dict(zip(got["ids"], got["documents"] or [], strict=False))

    def query(self, space: str, vector: np.ndarray, k: int) -> dict[str, float]:
        """Top-k moment ids with cosine similarity (1 - cosine distance).

        No ``count()`` first: Chroma 1.x answers an empty or smaller collection with fewer ids,
        and the count cost a second round trip (4 ms at 10k moments) on every turn.
        """
        res = self.collection(space).query(query_embeddings=np.asarray(vector, dtype=np.float32).reshape(1, -1),
                                           n_results=k, include=["distances"])
        return {i: 1.0 - float(d) for i, d in zip(res["ids"][0], res["distances"][0], strict=False)}

    def count(self, space: str) -> int:
        return self.collection(space).count()

    def drop_space(self, space: str) -> None:
        name = collection_name(space, self.namespace)
        self._collections.pop(space, None)
        try:
            self.client.delete_collection(name)
        except Exception:  # already gone is fine: the goal state holds
            pass

    def list_spaces(self) -> list[str]:
        out = []
        for col in self.client.list_collections():
            meta = getattr(col, "metadata", None) or {}
            if "space" in meta and meta.get("store", "") == self.namespace:
                out.append(meta["space"])
        return out

    def close(self) -> None:
        """Release Chroma's files and threads (PersistentClient keeps them until the last close)."""
        self._collections.clear()
        close = getattr(self.client, "close", None)
        if callable(close):
            try:
                close()
            except Exception:  # closing twice, or a server already gone: nothing left to release
                pass
