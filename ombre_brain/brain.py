"""Brain: the front object. It builds each capability once and hands it exactly what it needs.

Keeping Brain thin (txtai's Embeddings style) means the CLI, the HTTP app, the MCP server and
the tests all call the same few methods, while each capability lives in its own wing: the store
(``store/``), recall (``retrieval/`` and ``turn/``), the gateway (``gateway/``), dreams
(``dream/``), facts (``facts/``), forgetting (``forget/``) and the kinds read through their own tools
(``kinds/``: ``Brain.letters``, ``plans``, ``anchors``, ``self_model``). None of them imports Brain; they
receive the store, the config and the other parts they use when Brain is opened.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from .buckets import Bucket, Limits, bucket_from_dict, validate_id, validate_space
from .classify import hints_for
from .config import Config, load_config
from .dream.engine import DreamEngine
from .errors import NotFoundError, ProvenanceError, ValidationError
from .facts import FactsStore
from .forget.keys import ensure_local_key, require_shared_keys
from .forget.purge import Forgetter
from .gateway.core import Gateway
from .kinds.anchors import Anchors
from .kinds.letterbox import Letterbox
from .kinds.letters import public_view
from .kinds.migrate import migrate_on_open
from .kinds.plans import Plans
from .kinds.selfmodel import SelfModel
from .memory_layers import LayerMemo
from .profile.cache import ProfileCache
from .recall_policy import RecallPolicy
from .recall_types import Edge
from .retrieval.candidates import Retriever
from .retrieval.embedding import get_embedder
from .retrieval.evidence import Admitter
from .retrieval.lexical import init_jieba, tokenize
from .retrieval.second_opinion import get_second_opinion
from .store.bucket_store import BucketStore
from .store.dirlock import DataDirLock, stale_note
from .timeutil import now_utc, parse_time
from .turn.breath import breath_parts, lookup_parts
from .turn.context import TurnParts
from .turn.conversation import normalize_context
from .turn.pipeline import run_turn
from .turn.sections import Turn
from .writing.features import Encoders
from .writing.writer import WriteParts

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

log = logging.getLogger("ombre_brain")

ORIGIN_RANK = {"user": 3, "assistant": 2, "derived": 1}
PROTECTED_FIELDS = ("title", "body", "summary", "pinned", "protected", "anchor", "archived", "resolved", "digested",
                    "dont_surface", "memory_subject", "memory_layer")
MAX_QUERY_CHARS = 8000
TURN_LOCK_STRIPES = 64


def _as_config(config: Any) -> Config:
    if isinstance(config, Config):
        return config
    return load_config(config)


class Brain:
    """One data directory: buckets, edges, sessions, facts and receipts for any number of spaces."""

    def __init__(self, path: str | Path, config: Any = None) -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self.config = cfg = _as_config(config)
        # An embedded ledger or Chroma is written by one process at a time (store/dirlock.py); a shared
        # PostgreSQL ledger with a Chroma server is made for several.
        embedded = cfg.store.ledger.url is None or cfg.store.chroma.mode == "embedded"
        self._dir_lock = DataDirLock.acquire(self.path) if embedded else None
        stale = self._dir_lock.stale if self._dir_lock is not None else None
        self.lock_note = stale_note(stale) if stale else None  # `serve` and `doctor` say it; nothing to do
        if self.lock_note:
            log.warning("data directory lock: %s", self.lock_note)
        try:
            self._open(cfg)
        except BaseException:
            self._release()
            raise

    def _open(self, cfg: Config) -> None:
        init_jieba(self.path / "jieba_cache")
        stop = frozenset(w.lower() for w in cfg.lexical.stop_words)
        self.stop_words = stop
        self.tokenize = lambda text: tokenize(text, stop)
        shared = cfg.store.ledger.url is not None  # several processes serve from one PostgreSQL ledger
        if shared:
            require_shared_keys(cfg)  # refuse to start before anything is opened
        self.store = BucketStore(self.path, cfg, lambda: get_embedder(cfg.embedding), self.tokenize,
                                 lambda: get_second_opinion(cfg.embedding.second_opinion == "auto"))
        # the planner asks for tokens with and without stop words: one-character cues (它, 她) are stop words
        self.policy = RecallPolicy(cfg, tokenizer=lambda t, s=frozenset(): tokenize(t, s))
        self.retriever = Retriever(self.store, cfg, self.policy)
        self.admitter = Admitter(self.store, cfg)
        self.facts = FactsStore(self.store.ledger, cfg)
        cut = lambda text: tokenize(text, frozenset())  # noqa: E731  (every word: the kinds read particles too)
        self.letters = Letterbox(config=cfg, store=self.store, write=self.write, update=self.update, tokenize=cut)
        self.plans = Plans(store=self.store, write=self.write, update=self.update, cut=cut)
        self.anchors = Anchors(store=self.store, update=self.update, lock=self.store.bucket_lock)
        self.self_model = SelfModel(store=self.store, write=self.write, update=self.update)
        self.gateway = Gateway(cfg, self.store.ledger, WriteParts(
            write=self._exchange_write, encoders=lambda: Encoders(self.store.embedder, self.store.second),
            similar=self._similar, link=self.link, purge=lambda space, **target: self.purge(space, **target),
            written=self._warm_profile))
        self.dream_engine = DreamEngine(config=cfg, store=self.store, write=self.write, plan=self.policy.plan_query,
                                        upstream=lambda: self.gateway.upstream)
        if not cfg.forget.keys and not shared:  # the embedded default: forgetting works on the first day
            ensure_local_key(self.path)
        self.layers = LayerMemo()
        self.profile = ProfileCache(self.store, self.gateway.sessions.recall_counts)
        caches = [self.store, self.policy, self.admitter, self.dream_engine, self.layers, self.profile]
        self.forget = Forgetter(config=cfg, store=self.store, sessions=self.gateway.sessions, facts=self.facts,
                                jobs=self.gateway.jobs, participants=[self.dream_engine], caches=caches,
                                data_dir=None if shared else self.path)
        # a purge through another process: what this one derived from query or memory text goes too
        self.store.reset_listeners.append(lambda space: [c.clear_cache() for c in caches])
        self.parts = TurnParts(config=cfg, store=self.store, policy=self.policy, retriever=self.retriever,
                               admitter=self.admitter, sessions=self.gateway.sessions, dreams=self.dream_engine,
                               facts=self.facts, layers=self.layers, profile=self.profile)
        self.breath_parts = breath_parts(self.parts)
        self.lookup_parts = lookup_parts(self.parts)
        self._turn_locks = [threading.Lock() for _ in range(TURN_LOCK_STRIPES)]
        self.store.reconcile()
        self.forget.reconcile()
        migrate_on_open(self.store, self.update)

    @classmethod
    def open(cls, path: str | Path = "ombre-data", config: Any = None) -> Brain:
        return cls(path, config)

    def __enter__(self) -> Brain:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.gateway.close()
        self.store.close()
        self._release()

    def _release(self) -> None:
        if self._dir_lock is not None:
            self._dir_lock.release()

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

    # ------------------------------------------------------------ writes

    def write(self, space: str | None = None, *, now: datetime | None = None, dedupe: bool = True,
              **fields: Any) -> str:
        """Store one bucket (any §3 field); returns its id.

        An exact duplicate in the space (same title, body, tags and type) returns the existing id and
        records this write's ``source`` as another claim on it (design §10); if a field given here
        differs from the stored one, :class:`DuplicateError` says which and nothing is written.
        """
        data = dict(fields)
        if space is not None:
            data["space"] = space
        given = frozenset(fields)
        bucket = self._validated(data, now)
        self._check_suppressed(bucket)
        bid, _created = self.store.write(bucket, dedupe=dedupe, given=given)
        return bid

    def _exchange_write(self, space: str | None = None, **fields: Any) -> str:
        """A memory the write decision keeps from an exchange; a plan it says happened closes (kinds/plans.py)."""
        bid = self.write(space, **fields)
        try:
            self.plans.close_by(space or fields.get("space"), [bid])
        except Exception:  # a plan left open is no reason to lose the memory
            log.exception("closing plans after an exchange failed")
        return bid

    def write_many(self, items: list[Mapping], *, now: datetime | None = None, dedupe: bool = True,
                   progress=None, one_text: bool = False) -> list[str]:
        """Store many buckets through the store's batch path; every item is validated before any is written.

        Same validation, suppression check and dedupe as :meth:`write`, item by item; a bad item
        raises naming its position and nothing is stored. ``one_text``: the items are pieces of one
        text (MCP ``grow``), which share one memory's embedding budget (``embedding.max_tokens_per_memory``).
        """
        buckets, given = [], []
        for i, item in enumerate(items):
            given.append(frozenset(item))
            try:
                bucket = self._validated(dict(item), now)
                self._check_suppressed(bucket)
            except ValidationError as exc:
                raise ValidationError(exc.message, field=f"items[{i}]", code=exc.code) from None
            buckets.append(bucket)
        return [bid for bid, _created in self.store.write_many(buckets, dedupe=dedupe, progress=progress,
                                                                given=given, one_text=one_text)]

    def _validated(self, data: dict, now: datetime | None) -> Bucket:
        # A letter gets no hints from its words: they would describe a sealed letter's words to whoever reads its
        # metadata (design §19).
        if data.get("type") != "letter" and not any(data.get(k) for k in ("memory_subject", "memory_layer")):
            text = f"{data.get('title') or ''}\n{data.get('body') or ''}"
            if isinstance(data.get("title"), str) and isinstance(data.get("body", ""), str | None):
                hints = hints_for(text, self.config.writer)
                if data.get("memory_classification_source") is None:
                    data.update(hints)
        return bucket_from_dict(data, now=now, limits=self.limits)

    def _check_suppressed(self, bucket: Bucket) -> None:
        if bucket.source:
            self.forget.check_source(bucket.space, bucket.source)

    def get(self, space: str, bucket_id: str) -> Bucket | None:
        """One bucket; a sealed letter as its metadata only (its side reads it through ``letters``)."""
        validate_space(space)
        return public_view(self.store.get(space, bucket_id), now_utc())

    def get_many(self, space: str, bucket_ids) -> dict[str, Bucket]:
        """Buckets by id, sealed letters as their metadata only."""
        validate_space(space)
        now = now_utc()
        return {k: public_view(b, now) for k, b in self.store.get_many(space, list(bucket_ids)).items()}

    def sources(self, space: str, bucket_id: str) -> list[str]:
        """The sources holding a claim on a bucket ('' stands for a write without one; design §10)."""
        validate_space(space)
        return self.store.sources(space, bucket_id)

    def list(self, space: str, *, type: str | None = None, limit: int = 50) -> list[Bucket]:
        """Newest first; a sealed letter as its metadata only."""
        validate_space(space)
        now = now_utc()
        return [public_view(b, now) for b in self.store.list(space, type=type, limit=limit)]

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

    def search(self, space: str, query: str, k: int = 10, *, context: list | None = None) -> list:
        """The fused ranking that direct recall uses, before gates and budgets (for eval)."""
        return self.batchsearch(space, [query], k, contexts=[context])[0]

    def batchsearch(self, space: str, queries: list[str], k: int = 10, *,
                    contexts: list[list | None] | None = None) -> list[list]:
        gw = self.config.gateway
        contexts = contexts or [None] * len(queries)
        return [self.retriever.rank(space, q, k, normalize_context(c, max_messages=gw.context_messages,
                                                                   max_chars=gw.context_chars))
                for q, c in zip(queries, contexts, strict=True)]

    def turn(self, space: str, session: str = "default", query: str = "", now: datetime | str | None = None,
             *, context: list | None = None, dry_run: bool = False, lookup: bool = False) -> Turn:
        """Run one turn of the read pipeline and return its Turn (to_dict() is the §11 TURN).

        ``context`` is the conversation before ``query``: ``{role, content}`` messages, oldest first
        (design §14); only the last ``gateway.context_messages`` within ``gateway.context_chars`` are heard.
        ``lookup``: the query is an explicit search whatever its words (MCP ``breath_search``), so a pinned
        memory that answers it shows in Core Memory.
        """
        validate_space(space)
        if not isinstance(session, str) or not session or len(session) > 200:
            raise ValidationError("expected a non-empty string of at most 200 characters", field="session_id")
        if not isinstance(query, str):
            raise ValidationError("expected a string", field="query")
        if len(query) > MAX_QUERY_CHARS:
            raise ValidationError(f"is {len(query)} characters; the limit is {MAX_QUERY_CHARS}", field="query")
        when = parse_time(now, "now") if now is not None else now_utc()
        gw = self.config.gateway
        heard = normalize_context(context, max_messages=gw.context_messages, max_chars=gw.context_chars)
        parts = self.lookup_parts if lookup else self.parts
        if dry_run:
            with self.ledger.pinned(), self.store.turn_scope(space):
                return run_turn(parts, space, session, query, when, context=heard, dry_run=True)
        # A turn reads the session's round and cooldowns and records the next round; two turns of one
        # session at once would both take the same round. Serialise them: in this process (striped,
        # bounded memory), and across processes sharing the ledger (its session lock).
        with (self._turn_locks[hash((space, session)) % len(self._turn_locks)],
              self.ledger.session_lock("turn", space, session), self.store.turn_scope(space)):
            return run_turn(parts, space, session, query, when, context=heard, dry_run=False)

    def breath(self, space: str, session: str = "default", now: datetime | str | None = None) -> Turn:
        """What to hold in mind now, without a query (MCP ``breath()``): a dry-run turn through ``mcp.breath``.

        Core memory, recent context, weather and a dream, each through its gate; nothing is
        recorded (no round, cooldown or dream claim), so a tool call never spends a chat turn's.
        """
        validate_space(space)
        if not isinstance(session, str) or not session or len(session) > 200:
            raise ValidationError("expected a non-empty string of at most 200 characters", field="session_id")
        when = parse_time(now, "now") if now is not None else now_utc()
        return run_turn(self.breath_parts, space, session, "", when, dry_run=True)

    def ingest_exchange(self, space: str, session: str, messages: list, reply: str, *,
                        now: datetime | str | None = None, model: str | None = None) -> list[str]:
        """The write decision on one exchange, run now: the ids of the memories written or joined (``[]`` for noise).

        ``messages`` is the conversation in OpenAI form ending with the user's message; ``reply`` is the assistant's
        answer; ``now`` is when the exchange happened (the memories' ``created``). The proxy's queued ingestion runs
        this same job, keyed by the exchange's id, so an exchange sent again writes nothing new. Bad input (no user
        message, a last message that is not the user's, other roles, a reply too long) is a ValidationError naming
        the field, and nothing is written.
        """
        validate_space(space)
        when = parse_time(now, "now") if now is not None else None
        return self.gateway.ingest_exchange(space, session, messages, reply, now=when, model=model)

    def _similar(self, space: str, text: str, k: int) -> list[Bucket]:
        """The stored memories most like a text (the fused search), for the writer's repeat and update check."""
        if not self.store.known_space(space):
            return []
        return [b for b in (self.store.get(space, i) for i in self.search(space, text, k)) if b is not None]

    def _warm_profile(self, space: str) -> None:
        """After an exchange's writes, the space's profile is read again here, on the write's side (the proxy's
        ingestion runs after its reply): the next turn finds the book current instead of rebuilding it (the
        changed-fact model over a lived-in store's members, 25-50 ms). A failure only leaves the turn to do it."""
        if self.config.gateway.budgets.profile <= 0:
            return
        try:
            self.profile.book(space, self.config)
        except Exception:  # the write stands; the next turn reads the profile itself
            log.exception("profile: reading space %s again after a write failed", space)

    # ------------------------------------------------------------ forgetting and dreams

    def purge(self, space: str, *, bucket_ids=None, source=None, whole_space: bool = False) -> dict:
        """Forget buckets, a source or a whole space; returns the signed receipt ``{payload, signature}``."""
        return self.forget.purge(space, bucket_ids=bucket_ids, source=source, whole_space=whole_space)

    def dream(self, space: str, now: datetime | None = None) -> str | None:
        """Compose one dream from the space's recent material; its id, or None (the reason is logged)."""
        return self.dream_engine.dream(space, now=now)
