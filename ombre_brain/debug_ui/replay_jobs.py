"""Playground replays as background jobs: progress while they run, a cancel button, the result once done.

A replay of 500 recorded turns takes tens of seconds, longer than a request should hold a thread, so
it runs in a thread of its own and the page polls it. A job belongs to one space: only a token for that
space (or ``*``) sees or cancels it, so a replay cannot be read by another space's token. Results stay
in memory only (nothing is written), for :data:`KEEP_S` seconds after they finish, at most
:data:`MAX_KEPT` jobs; a job whose space saw a purge since it started is withheld (``stale``), since its
turns may quote what was forgotten.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from ..errors import ConflictError, NotFoundError, OmbreError

__all__ = ["KEEP_S", "MAX_KEPT", "MAX_RUNNING", "ReplayJob", "ReplayJobs"]

log = logging.getLogger("ombre_brain")

MAX_RUNNING = 2     # replays at once in one process (they share its cores with live turns)
MAX_KEPT = 16       # finished jobs kept for polling
KEEP_S = 1800.0     # how long a finished job's result is kept


class ReplayJob:
    """One replay: its space, progress, state (running, done, cancelled, failed, stale) and result."""

    def __init__(self, space: str, kind: str, total: int, purge_mark: Any) -> None:
        self.id = uuid.uuid4().hex
        self.space = space
        self.kind = kind
        self.done = 0
        self.total = total
        self.state = "running"
        self.result: dict | None = None
        self.error: dict | None = None
        self.started = time.time()
        self.finished: float | None = None
        self.cancel = threading.Event()
        self.purge_mark = purge_mark

    def progress(self, done: int, total: int) -> None:
        self.done, self.total = done, total

    def to_dict(self, *, with_result: bool = True) -> dict:
        d = {"id": self.id, "space": self.space, "kind": self.kind, "state": self.state, "done": self.done,
             "total": self.total, "seconds": round((self.finished or time.time()) - self.started, 2)}
        if self.error is not None:
            d["error"] = self.error
        if with_result and self.result is not None:
            d["result"] = self.result
        return d


class ReplayJobs:
    """The replays of one app: started in threads, looked up by id for a space, cancelled, forgotten in time."""

    def __init__(self, purge_mark: Callable[[str], Any]) -> None:
        self._jobs: dict[str, ReplayJob] = {}
        self._lock = threading.Lock()
        self._purge_mark = purge_mark  # space -> the id of its newest purge (a change withholds results)

    def start(self, space: str, kind: str, total: int, work: Callable[[ReplayJob], dict]) -> ReplayJob:
        with self._lock:
            self._forget_old()
            running = [j for j in self._jobs.values() if j.state == "running"]
            if any(j.space == space for j in running):
                raise ConflictError(f"a replay of space {space!r} is already running; cancel it or wait for it",
                                    code="replay_running")
            if len(running) >= MAX_RUNNING:
                raise ConflictError(f"{MAX_RUNNING} replays are running already; try again when one is done",
                                    code="replay_busy")
            job = ReplayJob(space, kind, total, self._purge_mark(space))
            self._jobs[job.id] = job
        threading.Thread(target=self._run, args=(job, work), name=f"replay-{job.id[:8]}", daemon=True).start()
        return job

    def _run(self, job: ReplayJob, work: Callable[[ReplayJob], dict]) -> None:
        from ..replay.pairs import Cancelled

        try:
            result = work(job)
            job.result, job.state = result, ("cancelled" if job.cancel.is_set() else "done")
        except Cancelled:
            job.state = "cancelled"
        except OmbreError as exc:
            job.state, job.error = "failed", exc.to_dict()["error"]
        except Exception as exc:  # a replay must never take the server down; say what kind of failure it was
            log.exception("playground replay %s failed", job.id)
            job.state, job.error = "failed", {"code": "internal", "message": f"replay failed ({type(exc).__name__})"}
        finally:
            job.finished = time.time()
            if job.state == "cancelled":
                job.result = None

    def get(self, job_id: str, space: str) -> ReplayJob:
        """The job, if it is this space's; a purge in the space since it started withholds its result."""
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None or job.space != space:
            raise NotFoundError(f"no replay {job_id!r} for space {space!r}")
        if job.state == "done" and self._purge_mark(space) != job.purge_mark:
            job.state, job.result = "stale", None
            job.error = {"code": "stale", "message": "a purge in this space since the replay ran: run it again"}
        return job

    def cancel(self, job_id: str, space: str) -> ReplayJob:
        job = self.get(job_id, space)
        job.cancel.set()
        return job

    def _forget_old(self) -> None:
        now = time.time()
        done = sorted((j for j in self._jobs.values() if j.finished is not None), key=lambda j: j.finished or 0)
        for j in done:
            if now - (j.finished or now) > KEEP_S or len(self._jobs) > MAX_KEPT:
                self._jobs.pop(j.id, None)
