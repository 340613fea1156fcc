"""Memory writing after an exchange: a durable job queue in the ledger and one worker thread.

The proxy only enqueues (one insert keyed by a hash of the exchange, ignored when known), so the live
chat never waits for or fails because of writing, and replaying an exchange is a no-op. The
worker runs the write path (:class:`~ombre_brain.writing.writer.Writer`: the write decision, then the
writes; design §7). ``Brain.ingest_exchange`` runs the very same job in the caller's thread
(:meth:`IngestQueue.ingest_now`). Bucket ids derive from the job id, so a crash after writing but
before marking the job done cannot duplicate memory on retry. Failures back off exponentially, then
dead-letter.

Job states: pending -> running -> done; running -> failed (retried after backoff) -> ... -> dead.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime

from ..config import Config
from ..errors import UpstreamError, ValidationError
from ..store.ledger import Ledger
from ..timeutil import now_utc
from ..writing.exchange import Exchange, exchange_of
from ..writing.writer import WriteParts, Writer
from .jobs import JobTable

log = logging.getLogger("ombre_brain")

class IngestQueue:
    """Enqueue exchanges and run them on one background thread (`start()` / `stop()`)."""

    def __init__(self, config: Config, ledger: Ledger, parts: WriteParts) -> None:
        self.config = config
        self.writer = Writer(config, parts)  # parts: Brain.write (validation, hints, suppression), search, purge…
        self.cfg = config.ingest
        self.table = JobTable(ledger)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def exchange(self, space: str, session: str, messages: list, reply: str, *, now: datetime | None = None,
                 model: str | None = None, chat: bool = False) -> Exchange:
        """The validated exchange (ValidationError names what is wrong), at ``now`` (default: the clock).
        ``chat``: a proxied conversation, whose tool and developer messages are passed over."""
        gw = self.config.gateway
        return exchange_of(space, session, messages, reply, at=now or now_utc(), model=model,
                           context_messages=gw.context_messages, context_chars=gw.context_chars, chat=chat)

    def enqueue_exchange(self, space: str, session: str, messages: list, assistant_text: str, *,
                         model: str | None = None) -> str | None:
        """Queue one proxied exchange (the request's messages and the reply) for the worker; returns the job id,
        or None when there is nothing to remember from (no user message)."""
        try:
            ex = self.exchange(space, session, messages, assistant_text, model=model, chat=True)
        except ValidationError as exc:
            log.info("ingest: exchange not queued: %s", exc)
            return None
        if self.table.insert(ex.id, ex.space, ex.session, ex.payload()):
            self._wake.set()
        return ex.id

    def ingest_now(self, ex: Exchange, *, wait_s: float = 30.0) -> dict:
        """Run the write decision on one exchange now, in this thread, through the same job as the queue's: a job
        already done (a replay) returns its result and writes nothing; one another worker is running is waited
        for. The result is ``{bucket_ids, noise, extractor}``; a failure raises (the job is retried later)."""
        self.table.insert(ex.id, ex.space, ex.session, ex.payload())
        deadline = time.monotonic() + wait_s
        while True:
            job = self.table.get(ex.id)
            if job is None:  # forgotten in between (a purge of the space): nothing to write
                return {"bucket_ids": [], "noise": True, "extractor": self.writer.extractor}
            if job["state"] == "done":
                return job["result"] or {"bucket_ids": []}
            if job["state"] == "dead":
                raise UpstreamError(f"the write decision on this exchange failed for good: {job['last_error']}",
                                    code="ingest_dead")
            if job["state"] in ("pending", "failed"):
                with self.table.ledger.pinned():
                    claimed = self.table.claim(ex.id)
                    if claimed is not None:
                        try:
                            result = self._execute(claimed)
                            self.table.finish(ex.id, result)
                            return result
                        except Exception as exc:
                            self.table.fail(ex.id, claimed["attempts"], f"{type(exc).__name__}: {exc}",
                                            self.cfg.max_attempts, self.cfg.backoff_s)
                            raise
                        finally:
                            self.table.release(ex.id)
            if time.monotonic() > deadline:
                raise UpstreamError("another worker is still writing this exchange; try again", code="ingest_busy")
            time.sleep(0.05)

    # -- worker

    def start(self) -> None:
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            n = self.table.recover(self.cfg.max_attempts)
            if n:
                log.warning("ingest: %d job(s) were interrupted by a stop; they will be retried or dead-lettered", n)
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="ombre-ingest", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive():
                log.warning("ingest: a job is still running at shutdown; it will be retried on the next start")
        self._thread = None

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()
            try:
                ran = self.run_due()
            except Exception:  # the worker must outlive any one bad poll
                log.exception("ingest: poll failed")
                ran = 0
            if not ran:
                self._wake.wait(self.cfg.poll_s)

    def run_due(self, limit: int = 10) -> int:
        """Run the jobs that are due now, one at a time; returns how many ran.

        Workers in other processes run the same loop on the same table: each job is claimed once.
        """
        ran = 0
        while ran < limit and not self._stop.is_set():
            with self.table.ledger.pinned():  # the claim's lock lives on this connection until the job is done
                job = self.table.claim_next()
                if job is None:
                    break
                self._run(job)
            ran += 1
        return ran

    def process(self, job_id: str) -> str | None:
        """Claim and run one job; returns its new state (None if it was not due or taken)."""
        with self.table.ledger.pinned():
            job = self.table.claim(job_id)
            if job is None:
                return None
            return self._run(job)

    def _run(self, job: dict) -> str:
        job_id = job["id"]
        try:
            try:
                result = self._execute(job)
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
                state = self.table.fail(job_id, job["attempts"], error, self.cfg.max_attempts, self.cfg.backoff_s)
                log.warning("ingest: job %s attempt %d failed (%s) -> %s", job_id[:12], job["attempts"], error, state)
                return state
            self.table.finish(job_id, result)
            return "done"
        finally:
            self.table.release(job_id)

    def _execute(self, job: dict) -> dict:
        return self.writer.run(Exchange.from_job(job))
