"""Brain: the front object. It owns the store and hands each job to a small stage object.

Keeping Brain thin (txtai's Embeddings style) means the CLI, the HTTP app and tests all call
the same few methods, and each capability (recall, gateway, facts, forgetting, dreams) lives
in its own module.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from .buckets import Bucket, Limits, bucket_from_dict, now_utc, parse_time, validate_id, validate_space
from .classify import hints_for
from .config import Config, load_config
from .errors import NotFoundError, ProvenanceError, ValidationError
from .recall_types import Edge
from .store.bucket_store import BucketStore

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

log = logging.getLogger("ombre_brain")

ORIGIN_RANK = {"user": 3, "assistant": 2, "derived": 1}
OPTIONAL_MODULES = {"dream_engine": "dream.engine", "forget": "forget.purge", "gateway": "gateway.core"}  # capability property -> the module that implements it
PROTECTED_FIELDS = ("title", "body", "summary", "pinned", "protected", "anchor", "archived", "resolved", "digested",
                    "memory_subject", "memory_layer")


def _as_config(config: Any) -> Config:
    if isinstance(config, Config):
        return config
    return load_config(config)


class Brain:
    """One data directory: buckets, edges, sessions, facts and receipts for any number of spaces."""

    def __init__(self, path: str | Path, config: Any = None) -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self.config = _as_config(config)
        from .retrieval.lexical import init_jieba, tokenize

        init_jieba(self.path / "jieba_cache")
        stop = frozenset(w.lower() for w in self.config.lexical.stop_words)
        self.stop_words = stop
        self.tokenize = lambda text: tokenize(text, stop)
        self.store = BucketStore(self.path, self.config, self._make_embedder, self.tokenize)
        self._lock = threading.RLock()
        self._turn_locks = [threading.Lock() for _ in range(64)]
        self._extras: dict[str, Any] = {}
        self.store.reconcile()
        self._after_open()

    def _after_open(self) -> None:
        """Let optional capabilities (forget, gateway, dreams) recover their own half-done work."""
        for hook in ("forget", "gateway"):
            obj = self._optional(hook)
            rec = getattr(obj, "reconcile", None)
            if callable(rec):
                rec()

    def _make_embedder(self):
        from .retrieval.embedding import get_embedder

        return get_embedder(self.config.embedding)

    @classmethod
    def open(cls, path: str | Path = "ombre-data", config: Any = None) -> Brain:
        return cls(path, config)

    def __enter__(self) -> Brain:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for obj in self._extras.values():
            stop = getattr(obj, "close", None)
            if callable(stop):
                stop()
        self.store.close()

    def _extra(self, name: str, factory):
        with self._lock:
            obj = self._extras.get(name)
            if obj is None:
                obj = factory()
                self._extras[name] = obj
            return obj

    # ------------------------------------------------------------ stage objects

    @property
    def embedder(self):
        return self.store.embedder

    @property
    def ledger(self):
        return self.store.ledger

    @property
    def limits(self) -> Limits:
        s = self.config.store
        return Limits(s.max_title_chars, s.max_body_chars, s.max_tags, s.max_tag_chars, s.max_comments)

    @property
    def facts(self):
        from .facts import FactsStore

        return self._extra("facts", lambda: FactsStore(self.ledger, self.config))

    @property
    def policy(self):
        from .recall_policy import RecallPolicy

        return self._extra("policy", lambda: RecallPolicy(self.config, tokenizer=lambda t, s=None: self.tokenize(t)))

    # ------------------------------------------------------------ writes

    def write(self, space: str | None = None, *, now: datetime | None = None, dedupe: bool = True,
              **fields: Any) -> str:
        """Store one bucket (any §3 field); an exact duplicate in the space returns the existing id."""
        data = dict(fields)
        if space is not None:
            data["space"] = space
        bucket = self._validated(data, now)
        self._check_suppressed(bucket)
        bid, _created = self.store.write(bucket, dedupe=dedupe)
        return bid

    def write_many(self, items: list[Mapping], *, now: datetime | None = None, dedupe: bool = True,
                   progress=None) -> list[str]:
        """Store many buckets through the store's batch path; every item is validated before any is written.

        Same validation, suppression check and dedupe as :meth:`write`, item by item; a bad item
        raises naming its position and nothing is stored.
        """
        buckets = []
        for i, item in enumerate(items):
            try:
                bucket = self._validated(dict(item), now)
                self._check_suppressed(bucket)
            except ValidationError as exc:
                raise ValidationError(exc.message, field=f"items[{i}]", code=exc.code) from None
            buckets.append(bucket)
        return [bid for bid, _created in self.store.write_many(buckets, dedupe=dedupe, progress=progress)]

    def _validated(self, data: dict, now: datetime | None) -> Bucket:
        if not any(data.get(k) for k in ("memory_subject", "memory_layer")):
            text = f"{data.get('title') or ''}\n{data.get('body') or ''}"
            if isinstance(data.get("title"), str) and isinstance(data.get("body", ""), str | None):
                hints = hints_for(text, self.config.writer)
                if data.get("memory_classification_source") is None:
                    data.update(hints)
        return bucket_from_dict(data, now=now, limits=self.limits)

    def _check_suppressed(self, bucket: Bucket) -> None:
        forget = self._optional("forget")
        if forget is not None and bucket.source:
            forget.check_source(bucket.space, bucket.source)

    def _optional(self, name: str):
        """A capability whose module is present (lets the core run before every module lands)."""
        if importlib.util.find_spec(f"ombre_brain.{OPTIONAL_MODULES.get(name, name)}") is None:
            return None
        return getattr(self, name)

    def get(self, space: str, bucket_id: str) -> Bucket | None:
        validate_space(space)
        return self.store.get(space, bucket_id)

    def list(self, space: str, *, type: str | None = None, limit: int = 50) -> list[Bucket]:
        validate_space(space)
        return self.store.list(space, type=type, limit=limit)

    def update(self, space: str, bucket_id: str, *, origin: str | None = None, now: datetime | None = None,
               **changes: Any) -> Bucket:
        """Change some fields; a lower origin may not overwrite a higher one's text or flags."""
        validate_space(space)
        with self.store.bucket_lock(space, [bucket_id]):  # read-modify-write: concurrent edits never lose one
            return self._update(space, bucket_id, origin, now, changes)

    def _update(self, space: str, bucket_id: str, origin: str | None, now: datetime | None,
                changes: dict[str, Any]) -> Bucket:
        current = self.store.get(space, bucket_id)
        if current is None:
            raise NotFoundError(f"no bucket {bucket_id!r} in space {space!r}")
        if origin is not None and (not isinstance(origin, str) or origin not in ORIGIN_RANK):
            raise ValidationError(f"expected one of {', '.join(ORIGIN_RANK)}, got {origin!r:.60}", field="origin")
        writer = origin or changes.get("origin") or current.origin
        if ORIGIN_RANK.get(writer, 0) < ORIGIN_RANK.get(current.origin, 0):
            touched = [k for k in PROTECTED_FIELDS if k in changes and changes[k] != getattr(current, k)]
            if touched:
                raise ProvenanceError(
                    f"a {writer} update cannot overwrite {', '.join(touched)} written by {current.origin}")
            changes.pop("origin", None)
        elif origin is not None:
            changes.setdefault("origin", current.origin if ORIGIN_RANK[origin] < ORIGIN_RANK[current.origin]
                               else origin)
        changes.setdefault("updated", (now or now_utc()).isoformat())
        bucket = bucket_from_dict(changes, limits=self.limits, partial_of=current, now=now)
        if bucket.source != current.source:
            self._check_suppressed(bucket)
        self.store.update(bucket)
        return bucket

    def delete(self, space: str, bucket_id: str) -> bool:
        validate_space(space)
        return bool(self.store.delete(space, [bucket_id]))

    def link(self, space: str, from_id: str, to_id: str, relation: str = "relates_to",
             confidence: float = 0.8) -> Edge:
        validate_space(space)
        validate_id(from_id, "from_id")
        validate_id(to_id, "to_id")
        return self.store.add_edge(space, from_id, to_id, relation, confidence)

    def edges(self, space: str, bucket_ids=None) -> list[Edge]:
        return self.store.edges(space, bucket_ids)

    def spaces(self) -> list[str]:
        return self.store.spaces()

    # ------------------------------------------------------------ reads

    def search(self, space: str, query: str, k: int = 10) -> list:
        """The fused ranking that direct recall uses, before gates and budgets (for eval)."""
        return self.batchsearch(space, [query], k)[0]

    def batchsearch(self, space: str, queries: list[str], k: int = 10) -> list[list]:
        from .retrieval.candidates import Retriever

        r = Retriever(self)
        return [r.rank(space, q, k) for q in queries]

    def turn(self, space: str, session: str = "default", query: str = "", now: datetime | str | None = None,
             *, dry_run: bool = False):
        """Run one turn of the read pipeline and return its Turn (to_dict() is the §11 TURN)."""
        from .turn.pipeline import run_turn

        validate_space(space)
        if not isinstance(session, str) or not session or len(session) > 200:
            raise ValidationError("expected a non-empty string of at most 200 characters", field="session_id")
        if not isinstance(query, str):
            raise ValidationError("expected a string", field="query")
        if len(query) > 8000:
            raise ValidationError(f"is {len(query)} characters; the limit is 8000", field="query")
        when = parse_time(now, "now") if now is not None else now_utc()
        if dry_run:
            return run_turn(self, space, session, query, when, dry_run=True)
        # A turn reads the session's round and cooldowns and records the next round; two turns of one
        # session at once would both take the same round. Serialise them (striped: bounded memory).
        with self._turn_locks[hash((space, session)) % len(self._turn_locks)]:
            return run_turn(self, space, session, query, when, dry_run=False)

    @property
    def forget(self):
        from .forget.purge import Forgetter

        return self._extra("forget", lambda: Forgetter(self))

    @property
    def gateway(self):
        from .gateway.core import Gateway

        return self._extra("gateway", lambda: Gateway(self))

    def purge(self, space: str, *, bucket_ids=None, source=None, whole_space: bool = False) -> dict:
        return self.forget.purge(space, bucket_ids=bucket_ids, source=source, whole_space=whole_space)

    @property
    def dream_engine(self):
        from .dream.engine import DreamEngine

        return self._extra("dream", lambda: DreamEngine(self))

    def dream(self, space: str, now: datetime | None = None) -> str | None:
        """Compose one dream from the space's recent material; its id, or None (the reason is logged)."""
        return self.dream_engine.dream(space, now=now)
