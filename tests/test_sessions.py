"""Session state (gateway/sessions.py) on both ledgers: a session's round, what it was shown and when its
space was last seen are read in one statement, and read back as they were recorded."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from ombre_brain.gateway.sessions import SessionStore

from .conftest import open_ledger

NOW = datetime(2026, 11, 30, 21, 0, tzinfo=timezone(timedelta(hours=8)))


@pytest.fixture(params=["sqlite", "postgres"])
def sessions(request, tmp_path):
    ledger = open_ledger(request.param, request, tmp_path)
    yield SessionStore(ledger)
    ledger.close()


def test_a_session_reads_back_what_it_recorded_in_one_statement(sessions, monkeypatch):
    ledger = sessions.ledger
    seen: list[str] = []
    real = ledger.query

    def query(sql, params=()):
        seen.append(sql)
        return real(sql, params)

    monkeypatch.setattr(ledger, "query", query)
    fresh = sessions.load("haven:a", "s1", NOW)
    assert (fresh.round, fresh.injected, fresh.last_seen, fresh.recent_context_fired_at) == (1, {}, None, None)
    assert len(seen) == 1
    sessions.record(fresh, [("sea", "direct"), ("cat", "recent_context")], recent_fired=True, turn={"q": 1},
                    mentioned=["sea", "cat"])
    later = NOW + timedelta(minutes=5)
    state = sessions.load("haven:a", "s1", later)
    assert state.round == 2 and state.last_seen == NOW and state.recent_context_fired_at == NOW
    assert state.injected == {"sea": (1, NOW.isoformat()), "cat": (1, NOW.isoformat())}
    sessions.record(state, [("sea", "direct")], recent_fired=False, turn={"q": 2}, mentioned=["sea"])
    again = sessions.load("haven:a", "s1", later)
    assert again.round == 3 and again.recent_context_fired_at == NOW  # kept when this turn did not fire
    assert again.injected == {"sea": (2, later.isoformat()), "cat": (1, NOW.isoformat())}
    other = sessions.load("haven:a", "s2", later)  # another session: the space's last visit, none of the items
    assert (other.round, other.injected, other.last_seen) == (1, {}, later)
    assert sessions.load("haven:b", "s1", later).last_seen is None
    assert len(seen) == 5
