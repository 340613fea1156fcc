"""The facts changes feed: one event per revision written or forgotten, with per-space cursors.

A cursor is ``<epoch>.<seq>``. The epoch changes when a whole space is forgotten, so a client
holding an old cursor is told to reset instead of silently missing the deletion. Events carry
no values: a client re-reads the facts it cares about, and forgetting never has to scrub them.
"""

from __future__ import annotations

import re
import secrets
from typing import Any

from ..errors import ValidationError

LIMIT_RANGE = (1, 1000)
_CURSOR_RE = re.compile(r"^([0-9a-f]{1,32})\.([0-9]{1,18})\Z")


def _position(conn: Any, space: str) -> tuple[str, int]:
    row = conn.execute("SELECT epoch, seq FROM facts_spaces WHERE space = ?", (space,)).fetchone()
    return (row["epoch"], row["seq"]) if row else ("0", 0)


def current_cursor(conn: Any, space: str) -> str:
    epoch, seq = _position(conn, space)
    return f"{epoch}.{seq}"


def emit(conn: Any, space: str, record_id: str, revision: int, label: str, adoption: str,
         subject: str, key: str, created: str) -> int:
    conn.execute("INSERT INTO facts_spaces(space, epoch, seq) VALUES (?, '0', 0) ON CONFLICT DO NOTHING", (space,))
    conn.execute("UPDATE facts_spaces SET seq = seq + 1 WHERE space = ?", (space,))
    seq = conn.execute("SELECT seq FROM facts_spaces WHERE space = ?", (space,)).fetchone()[0]
    conn.execute("INSERT INTO facts_events VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                 (space, seq, record_id, revision, label, adoption, subject, key, created))
    return seq


def new_epoch(conn: Any, space: str) -> None:
    epoch = secrets.token_hex(8)
    conn.execute("INSERT INTO facts_spaces(space, epoch, seq) VALUES (?, ?, 0) "
                 "ON CONFLICT(space) DO UPDATE SET epoch = excluded.epoch", (space, epoch))


def changes(conn: Any, space: str, cursor: str | None, limit: int) -> dict:
    lo, hi = LIMIT_RANGE
    if isinstance(limit, bool) or not isinstance(limit, int) or not lo <= limit <= hi:
        raise ValidationError(f"expected {lo} to {hi}, got {limit!r}", field="limit")
    epoch, seq = _position(conn, space)
    here = f"{epoch}.{seq}"
    reset = {"events": [], "cursor": here, "has_more": False, "reset_required": True}
    if cursor is None or cursor == "":
        return reset
    m = _CURSOR_RE.match(cursor) if isinstance(cursor, str) else None
    if m is None:
        raise ValidationError("expected a cursor returned by /v1/facts or /v1/facts/changes", field="cursor")
    after = int(m.group(2))
    if m.group(1) != epoch or after > seq:
        return reset
    rows = conn.execute("SELECT * FROM facts_events WHERE space = ? AND seq > ? ORDER BY seq LIMIT ?",
                        (space, after, limit + 1)).fetchall()
    has_more = len(rows) > limit
    rows = rows[:limit]
    events = [{"seq": r["seq"], "record_id": r["record_id"], "revision": r["revision"], "label": r["label"],
               "adoption": r["adoption"], "subject": r["subject"], "key": r["key"], "at": r["created"]}
              for r in rows]
    last = rows[-1]["seq"] if rows else after
    return {"events": events, "cursor": f"{epoch}.{last}", "has_more": has_more, "reset_required": False}
