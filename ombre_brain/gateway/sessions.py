"""Durable session state in the ledger: rounds, injected items, last-seen times, turn log.

Cooldowns and re-entry only mean something if they survive a restart, so every turn's
bookkeeping is one ledger transaction. Dry runs (debug routes) read but never write here.

Each logged turn also keeps what a replay of it needs (the policy playground, docs/design.md §22):
the conversation the turn heard and the session state it met (round, what was injected when, the
space's last turn, when Recent Context last fired), in the row's ``replay`` column. It lives and dies
with its turn: the last ``gateway.injection_log_size`` turns of a session are kept, and a purge that
removes a turn removes it in the same statement; a purged bucket is also taken out of the state of the
turns that stay (the transaction that drops the turns that mention it).
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timedelta

import orjson

from ..recall_types import SessionState
from ..store.ledger import IDENTITY, Ledger
from ..timeutil import parse_iso

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS sessions (
    space TEXT NOT NULL,
    session TEXT NOT NULL,
    round INTEGER NOT NULL,
    last_seen TEXT NOT NULL,
    recent_fired_at TEXT,
    PRIMARY KEY (space, session)
);
CREATE TABLE IF NOT EXISTS injections (
    space TEXT NOT NULL,
    session TEXT NOT NULL,
    bucket_id TEXT NOT NULL,
    round INTEGER NOT NULL,
    at TEXT NOT NULL,
    section TEXT NOT NULL,
    PRIMARY KEY (space, session, bucket_id)
);
CREATE INDEX IF NOT EXISTS injections_bucket ON injections(space, bucket_id);
CREATE TABLE IF NOT EXISTS space_state (
    space TEXT PRIMARY KEY,
    last_seen TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS turn_log (
    seq {IDENTITY},
    space TEXT NOT NULL,
    session TEXT NOT NULL,
    at TEXT NOT NULL,
    bucket_ids TEXT NOT NULL,          -- space-separated ids injected or suppressed, for purge
    turn TEXT NOT NULL                 -- the TURN object as sent, with timings
);
CREATE INDEX IF NOT EXISTS turn_log_space ON turn_log(space, session, seq);
"""
REPLAY_VERSION = 1


_dt = parse_iso


def holds_any(text: str, terms: Sequence[str]) -> bool:
    """Whether ``text``, folded as the tokenizer folds (NFKC, lower case), contains any of ``terms``."""
    folded = unicodedata.normalize("NFKC", text).lower()
    return any(t in folded for t in terms)


def _chunks(items: list, n: int) -> Iterator[list]:
    for i in range(0, len(items), n):
        yield items[i:i + n]


def ensure_tables(ledger: Ledger) -> None:
    ledger.ensure_schema("sessions", SCHEMA, _add_replay)


def _add_replay(ledger: Ledger, c) -> None:
    """Logged turns keep their replay record (JSON ``{v, context, state}``) in a ``replay`` column; a turn logged
    before it existed has none. Idempotent: a ledger that recorded no schema versions runs every step again."""
    if "replay" not in ledger.columns(c, "turn_log"):
        ledger.run_ddl(c, "ALTER TABLE turn_log ADD COLUMN replay TEXT")


def state_to_json(state: SessionState) -> dict:
    """The session state a turn met, as the turn log keeps it for a replay."""
    return {"round": state.round, "injected": {b: [r, at] for b, (r, at) in sorted(state.injected.items())},
            "shown_in": dict(sorted(state.shown_in.items())),
            "last_seen": state.last_seen.isoformat() if state.last_seen else None,
            "recent_context_fired_at": (state.recent_context_fired_at.isoformat()
                                        if state.recent_context_fired_at else None)}


def state_from_json(data: dict, *, space: str, session: str, now: datetime) -> SessionState:
    """A recorded state back as the SessionState the gates read, for a dry run at ``now``."""
    return SessionState(space=space, session=session, now=now, round=int(data.get("round") or 1),
                        injected={b: (int(r), str(at)) for b, (r, at) in (data.get("injected") or {}).items()},
                        shown_in={str(b): str(k) for b, k in (data.get("shown_in") or {}).items()},
                        last_seen=_dt(data.get("last_seen")),
                        recent_context_fired_at=_dt(data.get("recent_context_fired_at")), dry_run=True)


def replay_json(state: SessionState, context: Iterable) -> str:
    messages = [m.to_dict() if hasattr(m, "to_dict") else dict(m) for m in context]
    return _dumps({"v": REPLAY_VERSION, "context": messages, "state": state_to_json(state)})


def _dumps(data: dict) -> str:
    """The turn log's JSON, by orjson: a turn's record is 50–130 kB, and the standard library took 0.7 ms of every
    turn to write it (orjson 0.1 ms; design §23)."""
    return orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY).decode()


class SessionStore:
    def __init__(self, ledger: Ledger, *, log_size: int = 50, expiry_days: float = 30) -> None:
        self.ledger = ledger
        self.log_size = log_size
        self.expiry_days = expiry_days
        ensure_tables(ledger)

    def load(self, space: str, session: str, now: datetime, *, dry_run: bool = False) -> SessionState:
        """The session's round, what it was shown and when the space was last seen: one statement
        (one row per injected item, or one row of NULLs for a new session)."""
        rows = self.ledger.query(
            "SELECT s.round, s.recent_fired_at, st.last_seen, i.bucket_id, i.round AS shown_round, i.at, i.section "
            "FROM (SELECT 1 AS one) k LEFT JOIN sessions s ON s.space = ? AND s.session = ? "
            "LEFT JOIN space_state st ON st.space = ? LEFT JOIN injections i ON i.space = ? AND i.session = ?",
            (space, session, space, space, session))
        first = rows[0]
        injected = {r["bucket_id"]: (r["shown_round"], r["at"]) for r in rows if r["bucket_id"] is not None}
        shown_in = {r["bucket_id"]: r["section"] for r in rows if r["bucket_id"] is not None}
        return SessionState(
            space=space, session=session, now=now, round=(first["round"] or 0) + 1, injected=injected,
            shown_in=shown_in,
            last_seen=_dt(first["last_seen"]), recent_context_fired_at=_dt(first["recent_fired_at"]), dry_run=dry_run)

    def record(self, state: SessionState, injected: Iterable[tuple[str, str]], *, recent_fired: bool,
               turn: dict, mentioned: Iterable[str], context: Iterable = ()) -> None:
        """Advance the round, remember what was injected, and log the turn with its replay record, atomically.

        The caller holds the session's turn lock (``Brain.turn``), so the session's rows need no more;
        it is bookkeeping, so a database crash may lose the last fraction of a second of it (durable=False).
        On a shared ledger it goes out with the turn's next round trip, the release of that lock
        (defer=True): the next holder of the lock finds it committed.
        """
        now = state.now.isoformat()
        with self.ledger.tx(serial=False, durable=False, batch=True, defer=True) as c:
            c.execute(
                "INSERT INTO sessions(space, session, round, last_seen, recent_fired_at) VALUES (?,?,?,?,?) "
                "ON CONFLICT(space, session) DO UPDATE SET round = excluded.round, last_seen = excluded.last_seen, "
                "recent_fired_at = COALESCE(excluded.recent_fired_at, sessions.recent_fired_at)",
                (state.space, state.session, state.round, now, now if recent_fired else None))
            c.executemany(
                "INSERT INTO injections(space, session, bucket_id, round, at, section) VALUES (?,?,?,?,?,?) "
                "ON CONFLICT(space, session, bucket_id) DO UPDATE SET round = excluded.round, at = excluded.at, "
                "section = excluded.section",
                [(state.space, state.session, bid, state.round, now, section) for bid, section in injected])
            c.execute("INSERT INTO space_state(space, last_seen) VALUES (?, ?) ON CONFLICT(space) DO UPDATE SET "
                      "last_seen = CASE WHEN space_state.last_seen > excluded.last_seen THEN space_state.last_seen "
                      "ELSE excluded.last_seen END", (state.space, now))
            c.execute("INSERT INTO turn_log(space, session, at, bucket_ids, turn, replay) VALUES (?,?,?,?,?,?)",
                      (state.space, state.session, now, " ".join(sorted(set(mentioned))),
                       _dumps(turn), replay_json(state, context)))
            c.execute("DELETE FROM turn_log WHERE space = ? AND session = ? AND seq NOT IN (SELECT seq FROM turn_log "
                      "WHERE space = ? AND session = ? ORDER BY seq DESC LIMIT ?)",
                      (state.space, state.session, state.space, state.session, self.log_size))

    def injections_log(self, space: str, session: str | None = None, limit: int = 20) -> list[dict]:
        if session:
            rows = self.ledger.query("SELECT turn FROM turn_log WHERE space = ? AND session = ? ORDER BY seq DESC "
                                     "LIMIT ?", (space, session, limit))
        else:
            rows = self.ledger.query("SELECT turn FROM turn_log WHERE space = ? ORDER BY seq DESC LIMIT ?",
                                     (space, limit))
        return [json.loads(r["turn"]) for r in rows]

    def replay_log(self, space: str, limit: int) -> list[dict]:
        """The space's last ``limit`` logged turns, oldest first: ``{seq, session, at, turn, replay}`` (``replay``
        None for a turn logged before replay records were kept). Read for one space only: a replay of one space
        never sees another's turns."""
        rows = self.ledger.query("SELECT seq, session, at, turn, replay FROM turn_log WHERE space = ? "
                                 "ORDER BY seq DESC LIMIT ?", (space, limit))
        return [{"seq": r["seq"], "session": r["session"], "at": r["at"], "turn": json.loads(r["turn"]),
                 "replay": json.loads(r["replay"]) if r["replay"] else None} for r in reversed(rows)]

    def logged_turns(self, space: str) -> dict:
        """How many turns the log keeps for the space, how many of them can be replayed, and over how many sessions."""
        row = self.ledger.one("SELECT COUNT(*) AS n, COUNT(replay) AS replayable, COUNT(DISTINCT session) AS sessions "
                              "FROM turn_log WHERE space = ?", (space,))
        return {"turns": int(row["n"]), "replayable": int(row["replayable"]), "sessions": int(row["sessions"]),
                "per_session": self.log_size}

    def sessions(self, space: str) -> list[dict]:
        return [dict(r) for r in self.ledger.query(
            "SELECT session, round, last_seen FROM sessions WHERE space = ? ORDER BY last_seen DESC", (space,))]

    def recall_counts(self, space: str) -> dict[str, int]:
        """In how many live sessions each memory was recalled into a dynamic section (the profile's "recalled")."""
        return {r[0]: int(r[1]) for r in self.ledger.query(
            "SELECT bucket_id, COUNT(*) FROM injections WHERE space = ? AND section IN "
            "('recalled_memory', 'diffused_memory', 'recent_context') GROUP BY bucket_id", (space,))}

    def bucket_injections(self, space: str, bucket_id: str, limit: int = 20) -> list[dict]:
        return [dict(r) for r in self.ledger.query(
            "SELECT session, round, at, section FROM injections WHERE space = ? AND bucket_id = ? "
            "ORDER BY at DESC LIMIT ?", (space, bucket_id, limit))]

    def forget_buckets(self, space: str, bucket_ids: Iterable[str]) -> int:
        """Drop injection history and logged turns that mention purged buckets (their replay records with them),
        and take the buckets out of the session state the remaining turns' replay records hold."""
        ids = list(bucket_ids)
        n = 0
        with self.ledger.tx() as c:
            for bid in ids:
                n += c.execute("DELETE FROM injections WHERE space = ? AND bucket_id = ?", (space, bid)).rowcount
                n += c.execute("DELETE FROM turn_log WHERE space = ? AND (' ' || bucket_ids || ' ') LIKE ?",
                               (space, f"% {bid} %")).rowcount
            gone = set(ids)
            for chunk in _chunks(ids, 200):  # a turn met the bucket's cooldown: the state it met forgets the bucket
                like = " OR ".join("replay LIKE ?" for _ in chunk)
                rows = c.execute(f"SELECT seq, replay FROM turn_log WHERE space = ? AND ({like})",
                                 (space, *(f'%{json.dumps(b)}%' for b in chunk))).fetchall()
                for row in rows:
                    record = json.loads(row["replay"])
                    injected = record.get("state", {}).get("injected") or {}
                    shown_in = record.get("state", {}).get("shown_in") or {}
                    if gone & (set(injected) | set(shown_in)):
                        record["state"]["injected"] = {b: v for b, v in injected.items() if b not in gone}
                        record["state"]["shown_in"] = {b: v for b, v in shown_in.items() if b not in gone}
                        c.execute("UPDATE turn_log SET replay = ? WHERE seq = ?",
                                  (json.dumps(record, ensure_ascii=False), row["seq"]))
                        n += 1
        return n

    def forget_terms(self, space: str, terms: Sequence[str]) -> int:
        """Drop logged turns whose query, answer or heard conversation holds any of these words (a purge's
        forgotten text).

        The logged TURN and its replay record are folded the way the tokenizer folds text (NFKC, lower case)
        and searched for each word, so a query typed before the memory existed, or the message the memory
        was written from, goes too.
        """
        if not terms:
            return 0
        rows = self.ledger.query("SELECT seq, turn, replay FROM turn_log WHERE space = ?", (space,))
        hits = [r["seq"] for r in rows
                if holds_any(r["turn"], terms) or (r["replay"] and holds_any(r["replay"], terms))]
        with self.ledger.tx() as c:
            for chunk in _chunks(hits, 500):
                c.execute(f"DELETE FROM turn_log WHERE seq IN ({','.join('?' * len(chunk))})", chunk)
        return len(hits)

    def forget_space(self, space: str) -> int:
        n = 0
        with self.ledger.tx() as c:
            for table in ("sessions", "injections", "space_state", "turn_log"):
                n += c.execute(f"DELETE FROM {table} WHERE space = ?", (space,)).rowcount
        return n

    def expire(self, now: datetime) -> int:
        """Remove sessions idle longer than gateway.session_expiry_days (their cooldowns lapse)."""
        cutoff = (now - timedelta(days=self.expiry_days)).isoformat()
        with self.ledger.tx() as c:
            old = [(r["space"], r["session"]) for r in c.execute(
                "SELECT space, session FROM sessions WHERE last_seen < ?", (cutoff,))]
            for space, session in old:
                c.execute("DELETE FROM sessions WHERE space = ? AND session = ?", (space, session))
                c.execute("DELETE FROM injections WHERE space = ? AND session = ?", (space, session))
        return len(old)
