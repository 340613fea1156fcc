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


def test_each_logged_turn_keeps_what_a_replay_needs(sessions):
    """The conversation heard and the state met travel with the TURN, and go with it (retention, purge)."""
    from ombre_brain.gateway.sessions import state_from_json
    from ombre_brain.turn.conversation import Message

    store = SessionStore(sessions.ledger, log_size=3)
    heard = (Message("user", "我们去海边吧"), Message("assistant", "好呀"))
    for i in range(5):
        state = store.load("haven:a", "s1", NOW + timedelta(minutes=i))
        store.record(state, [("sea", "direct")] if i < 2 else [("cat", "direct")], recent_fired=i == 0,
                     turn={"query": f"q{i}", "at": state.now.isoformat()}, mentioned=["sea"] if i < 2 else ["cat"],
                     context=heard)
    log = store.replay_log("haven:a", 50)
    assert [r["turn"]["query"] for r in log] == ["q2", "q3", "q4"]  # the last log_size turns, oldest first
    rec = log[0]["replay"]
    assert rec["v"] == 1 and rec["context"] == [{"role": "user", "content": "我们去海边吧"},
                                                 {"role": "assistant", "content": "好呀"}]
    st = state_from_json(rec["state"], space="haven:a", session="s1", now=NOW)
    assert st.round == 3 and st.injected == {"sea": (2, (NOW + timedelta(minutes=1)).isoformat())}
    assert st.last_seen == NOW + timedelta(minutes=1) and st.recent_context_fired_at == NOW and st.dry_run
    assert store.logged_turns("haven:a") == {"turns": 3, "replayable": 3, "sessions": 1, "per_session": 3}
    assert store.replay_log("haven:b", 50) == []  # read by space: another space's turns are never seen

    # a purged bucket leaves the state the remaining turns met; turns that mention it go whole
    store.forget_buckets("haven:a", ["sea"])
    log = store.replay_log("haven:a", 50)
    assert [r["turn"]["query"] for r in log] == ["q2", "q3", "q4"]
    assert all("sea" not in r["replay"]["state"]["injected"] for r in log)
    store.forget_buckets("haven:a", ["cat"])
    assert store.replay_log("haven:a", 50) == []


def test_a_purged_word_in_the_heard_conversation_takes_the_turn(sessions):
    from ombre_brain.turn.conversation import Message

    state = sessions.load("haven:a", "s1", NOW)
    sessions.record(state, [], recent_fired=False, turn={"query": "还记得吗"}, mentioned=[],
                    context=(Message("user", "我对花生过敏"),))
    assert sessions.forget_terms("haven:a", ["花生"]) == 1
    assert sessions.replay_log("haven:a", 10) == []



def test_a_turn_log_from_before_replay_records_gains_the_column_and_its_turns_are_skipped(sessions):
    """An older ledger's turn log gains the ``replay`` column on open; older ledgers recorded no schema versions,
    so the step may run again over a table that has it, and must not fail. Old turns stay, not replayable."""
    ledger = sessions.ledger
    state = sessions.load("haven:a", "s1", NOW)
    sessions.record(state, [], recent_fired=False, turn={"query": "new"}, mentioned=[])
    with ledger.tx() as c:
        c.execute("UPDATE turn_log SET replay = NULL")  # as an older version logged it
        c.execute("DELETE FROM schema_versions WHERE component = 'sessions'")
    ledger._schemas.discard("sessions")  # a new process: the steps run again
    fresh = SessionStore(ledger)
    assert ledger.schema_version("sessions") == 2
    assert [r["replay"] for r in fresh.replay_log("haven:a", 10)] == [None]
    assert fresh.logged_turns("haven:a") == {"turns": 1, "replayable": 0, "sessions": 1, "per_session": 50}
