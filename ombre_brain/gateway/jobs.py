"""The ledger's job table: exchanges waiting to become memory, claimed once, retried, dead-lettered.

Usable without a Brain (the ``jobs`` command reads it directly). A job's payload holds the chat
text memory is written from; forgetting empties it (:meth:`JobTable.forget_exchanges`).
Job states: pending -> running -> done; running -> failed (retried after backoff) -> ... -> dead.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable
from datetime import datetime, timezone

from ..errors import NotFoundError, ValidationError
from ..store.ledger import Ledger
from .sessions import holds_any

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,               -- sha256 of the canonical exchange
    space TEXT NOT NULL,
    session TEXT NOT NULL,
    payload TEXT NOT NULL,             -- {user, assistant, context, model, at}
    state TEXT NOT NULL,               -- pending | running | done | failed | dead
    attempts INTEGER NOT NULL DEFAULT 0,
    next_at REAL NOT NULL,             -- unix time the job is next due
    last_error TEXT,
    created TEXT NOT NULL,
    updated TEXT NOT NULL,
    result TEXT                        -- {bucket_ids, noise, extractor} once done
);
CREATE INDEX IF NOT EXISTS jobs_due ON jobs(state, next_at);
CREATE INDEX IF NOT EXISTS jobs_space ON jobs(space);
"""
STATES = ("pending", "running", "done", "failed", "dead")


def _iso(t: float | None = None) -> str:
    return datetime.fromtimestamp(time.time() if t is None else t, timezone.utc).isoformat(timespec="seconds")



def ensure_tables(ledger: Ledger) -> None:
    ledger.ensure_schema("jobs", SCHEMA)


class JobTable:
    """The `jobs` rows in the ledger; usable without a Brain (the `jobs` command)."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        ensure_tables(ledger)

    def insert(self, job_id: str, space: str, session: str, payload: dict) -> bool:
        """Insert unless the id is known: True when the job is new, False for a replayed exchange."""
        now = _iso()
        with self.ledger.tx() as c:
            cur = c.execute("INSERT INTO jobs(id, space, session, payload, state, attempts, next_at, "
                            "created, updated) VALUES (?,?,?,?, 'pending', 0, ?, ?, ?) ON CONFLICT DO NOTHING",
                            (job_id, space, session, json.dumps(payload, ensure_ascii=False), time.time(), now, now))
            return cur.rowcount == 1

    def get(self, job_id: str) -> dict | None:
        row = self.ledger.one("SELECT * FROM jobs WHERE id = ?", (job_id,))
        return _row(row) if row else None

    def due(self, limit: int = 10) -> list[str]:
        return [r["id"] for r in self.ledger.query(
            "SELECT id FROM jobs WHERE state IN ('pending', 'failed') AND next_at <= ? ORDER BY next_at, created "
            "LIMIT ?", (time.time(), limit))]

    def claim_next(self) -> dict | None:
        """Claim the most overdue job, counting the attempt; None when nothing is due.

        Every worker of every process may call this at once: the row is locked as it is chosen
        (``FOR UPDATE SKIP LOCKED`` in PostgreSQL, the single writer in SQLite) and marked running
        before the lock goes, so each job is claimed by one worker only. The claimer holds the
        job's lock (:meth:`Ledger.hold`, inside ``ledger.pinned()``) until :meth:`release`, so
        :meth:`recover` in another process can tell a running job from one whose worker died.
        """
        with self.ledger.tx(serial=False) as c:
            row = c.execute("SELECT id FROM jobs WHERE state IN ('pending', 'failed') AND next_at <= ? ORDER BY "
                            f"next_at, created LIMIT 1{self.ledger.dialect.skip_locked}", (time.time(),)).fetchone()
            if row is None:
                return None
            self.ledger.hold("job", row["id"])
            c.execute("UPDATE jobs SET state = 'running', attempts = attempts + 1, updated = ? WHERE id = ?",
                      (_iso(), row["id"]))
            return _row(c.execute("SELECT * FROM jobs WHERE id = ?", (row["id"],)).fetchone())

    def claim(self, job_id: str) -> dict | None:
        """Mark a due job running and count the attempt; None if another worker got it first."""
        with self.ledger.tx() as c:
            cur = c.execute("UPDATE jobs SET state = 'running', attempts = attempts + 1, updated = ? "
                            "WHERE id = ? AND state IN ('pending', 'failed')", (_iso(), job_id))
            if cur.rowcount != 1:
                return None
            self.ledger.hold("job", job_id)
            return _row(c.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone())

    def release(self, job_id: str) -> None:
        """The claimer is done with the job (finished, failed or interrupted)."""
        self.ledger.release("job", job_id)

    def drop_finished_text(self) -> int:
        """Empty finished jobs that still hold chat text (written before finishing dropped it)."""
        with self.ledger.tx() as c:
            n = c.execute("UPDATE jobs SET payload = '{}' WHERE state = 'done' AND payload != '{}'").rowcount
        if n:  # fold the zeroed pages into the file now, not at some later checkpoint
            self.ledger.scrub()
        return n

    def finish(self, job_id: str, result: dict) -> None:
        """Mark a job done and drop its chat text: the row stays (its id keeps a replay a no-op)."""
        with self.ledger.tx() as c:
            c.execute("UPDATE jobs SET state = 'done', payload = '{}', result = ?, last_error = NULL, updated = ? "
                      "WHERE id = ?", (json.dumps(result, ensure_ascii=False), _iso(), job_id))

    def fail(self, job_id: str, attempts: int, error: str, max_attempts: int, backoff_s: float) -> str:
        """Back off (backoff_s, 2x, 4x, ...) or dead-letter after max_attempts; returns the new state."""
        state = "dead" if attempts >= max_attempts else "failed"
        next_at = time.time() + backoff_s * 2 ** max(attempts - 1, 0)
        with self.ledger.tx() as c:
            c.execute("UPDATE jobs SET state = ?, next_at = ?, last_error = ?, updated = ? WHERE id = ?",
                      (state, next_at, error[:1000], _iso(), job_id))
        return state

    def recover(self, max_attempts: int) -> int:
        """Jobs left running by a crashed process: retry them, or dead-letter those out of attempts."""
        note = "interrupted: the process stopped while this job was running"
        running = [r["id"] for r in self.ledger.query("SELECT id FROM jobs WHERE state = 'running'")]
        orphans = [j for j in running if not self.ledger.held("job", j)]  # a live worker elsewhere holds its own
        n = 0
        with self.ledger.tx() as c:
            for jid in orphans:
                n += c.execute("UPDATE jobs SET state = 'dead', last_error = ?, updated = ? "
                               "WHERE id = ? AND state = 'running' AND attempts >= ?",
                               (note, _iso(), jid, max_attempts)).rowcount
                n += c.execute("UPDATE jobs SET state = 'pending', next_at = ?, last_error = ?, updated = ? "
                               "WHERE id = ? AND state = 'running'", (time.time(), note, _iso(), jid)).rowcount
        return n

    def retry(self, target: str) -> list[str]:
        """Reset jobs to pending with fresh attempts: one id (or unique prefix), 'dead' or 'failed'."""
        with self.ledger.tx() as c:
            if target in ("dead", "failed"):
                ids = [r["id"] for r in c.execute("SELECT id FROM jobs WHERE state = ?", (target,))]
            else:
                if not re.fullmatch(r"[0-9a-fA-F]{4,64}", target):
                    raise ValidationError(f"expected a job id (at least 4 hex digits), 'dead' or 'failed', got "
                                          f"{target[:40]!r}", field="retry")
                ids = [r["id"] for r in c.execute("SELECT id FROM jobs WHERE id LIKE ? LIMIT 2",
                                                  (target.lower() + "%",))]
                if not ids:
                    raise NotFoundError(f"no job {target!r}; `ombre-brain jobs` lists them")
                if len(ids) > 1:
                    raise ValidationError(f"job id prefix {target!r} is ambiguous; give more of the id", field="retry")
                row = c.execute("SELECT state FROM jobs WHERE id = ?", (ids[0],)).fetchone()
                if row["state"] == "running":
                    raise ValidationError(f"job {ids[0][:16]} is running now", field="retry")
                if row["state"] == "done":  # its chat text was dropped when it finished
                    raise ValidationError(f"job {ids[0][:16]} is done; a finished job keeps no text to run again",
                                          field="retry")
            for jid in ids:
                c.execute("UPDATE jobs SET state = 'pending', attempts = 0, next_at = ?, updated = ? WHERE id = ?",
                          (time.time(), _iso(), jid))
        return ids

    def counts(self) -> dict[str, int]:
        got = {r["state"]: r["n"] for r in self.ledger.query("SELECT state, COUNT(*) AS n FROM jobs GROUP BY state")}
        return {s: got.get(s, 0) for s in STATES}

    def list(self, states: Iterable[str] = ("pending", "running", "failed", "dead"), limit: int = 100) -> list[dict]:
        states = tuple(states)
        marks = ",".join("?" * len(states))
        return [_row(r) for r in self.ledger.query(
            f"SELECT * FROM jobs WHERE state IN ({marks}) ORDER BY created DESC LIMIT ?", (*states, limit))]

    def forget_space(self, space: str) -> int:
        with self.ledger.tx() as c:
            return c.execute("DELETE FROM jobs WHERE space = ?", (space,)).rowcount

    def forget_exchanges(self, space: str, exchange_ids: Iterable[str]) -> int:
        """Empty the jobs of forgotten exchanges and mark them done.

        The row stays, emptied, so replaying the same exchange stays a no-op instead of queueing
        the forgotten text again.
        """
        ids = list(exchange_ids)
        n = 0
        with self.ledger.tx() as c:
            for i in range(0, len(ids), 400):
                chunk = ids[i:i + 400]
                marks = ",".join("?" * len(chunk))
                n += c.execute(f"UPDATE jobs SET payload = '{{}}', result = NULL, last_error = NULL, state = 'done' "
                               f"WHERE space = ? AND id IN ({marks})", (space, *chunk)).rowcount
        return n


    def forget_terms(self, space: str, terms: Iterable[str]) -> int:
        """Empty the jobs whose chat text or error holds any of these words (a purge's forgotten text).

        They are marked done, emptied, so the forgotten words are neither kept nor written again;
        a job running right now is left to finish (its write meets the purge's suppression).
        """
        terms = list(terms)
        if not terms:
            return 0
        rows = self.ledger.query("SELECT id, payload, last_error FROM jobs WHERE space = ? AND state != 'running' "
                                 "AND (payload != '{}' OR last_error IS NOT NULL)", (space,))
        hits = [r["id"] for r in rows if holds_any(f"{r['payload']}\n{r['last_error'] or ''}", terms)]
        with self.ledger.tx() as c:
            c.executemany("UPDATE jobs SET payload = '{}', last_error = NULL, state = 'done', updated = ? "
                          "WHERE id = ? AND state != 'running'", [(_iso(), j) for j in hits])
        return len(hits)


def _row(row) -> dict:
    d = dict(row)
    d["payload"] = json.loads(d["payload"])
    d["result"] = json.loads(d["result"]) if d.get("result") else None
    return d
