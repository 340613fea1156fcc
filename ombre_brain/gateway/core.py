"""The gateway's state: durable sessions and cooldowns, the upstream LLM client, the ingestion queue.

A turn is built by :mod:`ombre_brain.turn`; the gateway owns what must survive between turns
and restarts (the ledger-backed session store) and what happens around a proxied exchange: the
upstream client and the background worker that turns finished exchanges into memory. The proxy
route itself lives with the other /v1 routes in :mod:`ombre_brain.server.api_gateway`.
"""

from __future__ import annotations

import dataclasses
import threading

from ..config import Config
from ..store.ledger import Ledger
from ..writing.writer import WriteParts
from .ingest import IngestQueue
from .jobs import JobTable
from .sessions import SessionStore
from .upstream import Upstream


class Gateway:
    def __init__(self, config: Config, ledger: Ledger, parts: WriteParts) -> None:
        self.config = config
        self.ledger = ledger
        self._parts = parts  # what the writer uses of the Brain (Brain.write, search, link, purge, encoders)
        gw = config.gateway
        self.sessions = SessionStore(ledger, log_size=gw.injection_log_size, expiry_days=gw.session_expiry_days)
        self.jobs = JobTable(ledger)
        self.jobs.drop_finished_text()  # a store from before finished jobs dropped their text
        self._upstream: Upstream | None = None
        self._ingest: IngestQueue | None = None
        self._init_lock = threading.Lock()

    def injections(self, space: str, session: str | None = None, limit: int = 20) -> list[dict]:
        return self.sessions.injections_log(space, session, limit)

    @property
    def upstream(self) -> Upstream:
        """The shared client for `upstream.*` (the chat proxy, the LLM extractor and the dream composer)."""
        with self._init_lock:
            if self._upstream is None:
                self._upstream = Upstream(self.config.upstream)
            return self._upstream

    @property
    def ingest(self) -> IngestQueue:
        """The durable queue of exchanges waiting to become memory (see :mod:`.ingest`)."""
        with self._init_lock:
            if self._ingest is None:
                parts = dataclasses.replace(self._parts, upstream=lambda: self.upstream)
                self._ingest = IngestQueue(self.config, self.ledger, parts)
            return self._ingest

    def start_worker(self) -> None:
        self.ingest.start()

    def enqueue_exchange(self, space: str, session: str, messages: list, assistant_text: str, *,
                         model: str | None = None) -> str | None:
        """Queue a finished exchange for memory writing; returns the job id (a replay returns the same id)."""
        return self.ingest.enqueue_exchange(space, session, messages, assistant_text, model=model)

    def ingest_exchange(self, space: str, session: str, messages: list, reply: str, *, now=None,
                        model: str | None = None) -> list[str]:
        """The write decision on one exchange, now: the ids written or joined ([] for noise; a replay writes nothing
        new and returns the same ids)."""
        q = self.ingest
        return list(q.ingest_now(q.exchange(space, session, messages, reply, now=now, model=model))["bucket_ids"])

    def close(self) -> None:
        if self._ingest is not None:
            self._ingest.stop()
        if self._upstream is not None:
            self._upstream.close()


__all__ = ["Gateway"]
