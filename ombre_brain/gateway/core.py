"""The gateway's state holder: durable sessions, cooldowns and the injection log.

`Brain.turn` builds each turn through :mod:`pipeline` and :mod:`sections`; this object owns
what must survive between turns and restarts (the ledger-backed session store) and the
background ingestion worker that turns finished exchanges into memory.
"""

from __future__ import annotations

import threading
from datetime import datetime

from .sessions import SessionStore


class Gateway:
    def __init__(self, brain) -> None:
        self.brain = brain
        gw = brain.config.gateway
        self.sessions = SessionStore(brain.ledger, log_size=gw.injection_log_size, expiry_days=gw.session_expiry_days)
        self._upstream = None
        self._ingest = None
        self._init_lock = threading.Lock()

    def after_dream_surfaced(self, space: str, dream_ids: list[str], now: datetime,
                             trimmed: list[str] | None = None) -> None:
        """Ring the dreams a real turn showed; release those it claimed but the budget trimmed away."""
        engine = self.brain._optional("dream_engine")
        if engine is not None:
            engine.after_surfaced(space, dream_ids, now, trimmed=trimmed or ())

    def injections(self, space: str, session: str | None = None, limit: int = 20) -> list[dict]:
        return self.sessions.injections_log(space, session, limit)

    def reconcile(self) -> None:
        """Nothing half-done to finish for sessions: each turn is one ledger transaction."""

    # ------------------------------------------------------------ proxy and post-exchange writing

    @property
    def upstream(self):
        """The shared client for `upstream.*` (the chat proxy and the LLM extractor)."""
        with self._init_lock:
            if self._upstream is None:
                from .upstream import Upstream

                self._upstream = Upstream(self.brain.config.upstream)
            return self._upstream

    @property
    def ingest(self):
        """The durable queue of exchanges waiting to become memory (see :mod:`ingest`)."""
        upstream = self.upstream
        with self._init_lock:
            if self._ingest is None:
                from .ingest import IngestQueue

                self._ingest = IngestQueue(self.brain, upstream)
            return self._ingest

    def start_worker(self) -> None:
        self.ingest.start()

    def enqueue_exchange(self, space: str, session: str, messages: list, assistant_text: str, *,
                         model: str | None = None) -> str | None:
        """Queue a finished exchange for memory writing; returns the job id (a replay returns the same id)."""
        return self.ingest.enqueue_exchange(space, session, messages, assistant_text, model=model)

    def close(self) -> None:
        if self._ingest is not None:
            self._ingest.stop()
        if self._upstream is not None:
            self._upstream.close()
