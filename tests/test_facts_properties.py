"""Property tests for the facts contract (design §9) over random edit sequences on real SQLite.

The oracle below tracks only what the test itself did (which values it wrote, under which
role, which it confirmed, corrected, denied or forgot); the store's answers must agree with it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ombre_brain.config import load_config
from ombre_brain.errors import ConflictError, NotFoundError, ValidationError
from ombre_brain.facts import FactsStore
from ombre_brain.facts.timeline import Revision, resolve

from .conftest import open_test_ledger

UTC = timezone.utc
NOW = datetime(2026, 6, 1, tzinfo=UTC)
TIMES = [datetime(2025, 1, 1, tzinfo=UTC) + timedelta(days=61 * i) for i in range(10)]
PROBES = [TIMES[0] - timedelta(days=1)] + [t + d for t in TIMES for d in (timedelta(0), timedelta(days=30))]
KEYS = ("diet", "language")
CONDS = ((), (("channel", "work"),))
ROLES = ("structured_confirmation", "observation", "user_quote", "inference")
CONTENT_OPS = ("establish", "change", "exception", "correct", "confirm")
CONFIG = load_config()
TABLES = ("facts_records", "facts_revisions", "facts_support", "facts_receipts", "facts_events")


@dataclass
class Oracle:
    space: str
    values: dict[tuple[str, int], dict] = field(default_factory=dict)   # (rid, rev) -> what we wrote
    records: dict[str, tuple[str, tuple]] = field(default_factory=dict)  # rid -> (key, conditions)
    confirmed: set[str] = field(default_factory=set)
    corrected: set[str] = field(default_factory=set)
    denied: set[str] = field(default_factory=set)
    forgotten_events: set[str] = field(default_factory=set)
    events: list[str] = field(default_factory=list)
    history: dict[str, list[tuple]] = field(default_factory=dict)
    heads: dict[str, int] = field(default_factory=dict)                 # rid -> current revision, as read

    def pending_values(self) -> set[str]:
        return {w["value"] for w in self.values.values()
                if w["adoption"] == "pending" and w["op"] in CONTENT_OPS and w["value"]}

    def forgotten_values(self) -> set[str]:
        carriers: dict[str, list[str]] = {}
        for w in self.values.values():
            if w["op"] in CONTENT_OPS and w["value"]:
                carriers.setdefault(w["value"], []).append(w["event"])
        return {v for v, evs in carriers.items() if all(e in self.forgotten_events for e in evs)}


def _iso(t: datetime) -> str:
    return t.isoformat()


@st.composite
def actions(draw, oracle: Oracle, counter):
    kinds = ["establish"] if not oracle.records else [
        "establish", "change", "exception", "correct", "confirm", "deny", "forget"]
    kind = draw(st.sampled_from(kinds))
    role = draw(st.sampled_from(ROLES[:1] + ROLES))       # structured confirmations twice as often
    if kind == "forget":
        return ("forget", draw(st.sampled_from(oracle.events)) if oracle.events else None)
    value = f"v{next(counter)}"
    if kind == "establish":
        edit = {"op": "establish", "key": draw(st.sampled_from(KEYS)), "value": value}
        conds = draw(st.sampled_from(CONDS))
        if conds:
            edit["conditions"] = [{"key": k, "value": v} for k, v in conds]
        if draw(st.booleans()):
            edit["valid_from"] = _iso(draw(st.sampled_from(TIMES[:4])))
        if draw(st.integers(0, 3)) == 0:
            edit["valid_until"] = _iso(draw(st.sampled_from(TIMES[5:])))
    else:
        rid = draw(st.sampled_from(list(oracle.records)))     # creation order: ids are random
        key, conds = oracle.records[rid]
        revs = sorted(r for (r_id, r) in oracle.values if r_id == rid)
        head = oracle.heads.get(rid)
        likely = [head] * 3 if head else []
        target = draw(st.sampled_from(likely + [max(revs)] * 2 + revs + [max(revs) + 1]))
        edit = {"op": kind, "key": key, "target": {"record_id": rid, "revision": target}}
        if kind in ("change", "exception", "correct"):
            edit["value"] = value
        if kind in ("change", "exception"):
            i = draw(st.integers(0, len(TIMES) - 2))
            edit["valid_from"] = _iso(TIMES[i])
            if kind == "exception":
                edit["valid_until"] = _iso(TIMES[draw(st.integers(i + 1, len(TIMES) - 1))])
        if kind == "confirm":
            role = draw(st.sampled_from(ROLES[:2]))
            written = oracle.values.get((rid, target), {}).get("value")
            edit["value"] = written if draw(st.integers(0, 5)) else "wrong"
            if written is None:
                edit.pop("value")
    if draw(st.integers(0, 4)) == 0:
        edit["basis"] = "inferred"
    return ("submit", role, edit)


def _counts(fs: FactsStore) -> dict:
    return {t: fs.ledger.one(f"SELECT COUNT(*) FROM {t}")[0] for t in TABLES}


def _apply(fs: FactsStore, oracle: Oracle, action, event_id: str) -> None:
    if action[0] == "forget":
        if action[1] is not None:
            fs.forget_sources(oracle.space, [fs.source_digest(oracle.space, "prop", action[1])])
            oracle.forgotten_events.add(action[1])
        return
    _, role, edit = action
    before = _counts(fs)
    body = {"space": oracle.space, "source": {"producer": "prop", "event_id": event_id}, "subject": "user",
            "role": role, "text": f"text of {event_id}", "edits": [edit]}
    try:
        res = fs.submit(body, now=NOW)
    except (ValidationError, ConflictError, NotFoundError):
        assert _counts(fs) == before, "a refused batch wrote something"
        return
    oracle.events.append(event_id)
    (rec,) = res["records"]
    rid, rev = rec["record_id"], rec["revision"]
    written = fs.history(oracle.space, rid, after_revision=rev - 1, max_bytes=1_048_576)["revisions"][0]
    adoption = written["adoption"]
    if role in ("user_quote", "inference"):
        assert adoption == "pending", "a quote or inference was adopted without a confirm"
    if edit["op"] == "establish":
        oracle.records[rid] = (edit["key"], tuple((c["key"], c["value"]) for c in edit.get("conditions", [])))
    target = edit.get("target", {}).get("revision")
    tgt = oracle.values.get((rid, target)) if target else None
    value = tgt["value"] if edit["op"] == "confirm" else edit.get("value")
    oracle.values[(rid, rev)] = {"value": value, "op": edit["op"], "adoption": adoption, "event": event_id,
                                 "target": target, "effective": edit["op"]}
    if adoption != "adopted":
        return
    op = edit["op"]
    if op == "confirm" and tgt is not None and tgt["adoption"] == "pending":
        oracle.confirmed.add(value)
        op, target, tgt = tgt["effective"], tgt["target"], oracle.values.get((rid, tgt["target"]))
        oracle.values[(rid, rev)]["effective"] = op
    if op == "correct" and tgt is not None:
        oracle.corrected.add(tgt["value"])
    if op == "deny" and tgt is not None and tgt["adoption"] != "pending":
        oracle.denied.add(rid)


def _check(fs: FactsStore, oracle: Oracle) -> None:
    pending_only = oracle.pending_values() - oracle.confirmed
    forgotten = oracle.forgotten_values()
    ever = {w["value"] for w in oracle.values.values() if w["value"]}
    for ctx in ({}, {"channel": "work"}):
        for t in [None, *PROBES]:
            res = fs.read(oracle.space, as_of=None if t is None else _iso(t), context=ctx, max_facts=64,
                          max_bytes=1_048_576, now=NOW)
            for f in res["facts"]:
                v = f["value"]
                assert v in ever, f"read invented {v!r}"
                assert v not in pending_only, f"pending value {v!r} was read"
                assert v not in oracle.corrected, f"corrected value {v!r} was read"
                assert v not in forgotten, f"forgotten value {v!r} was read"
                assert f["record_id"] not in oracle.denied, f"denied record {f['record_id']} was read"
                assert f["adoption"] in ("adopted", "confirmed")
            assert len({(f["subject"], f["key"]) for f in res["facts"]}) == len(res["facts"])
    live: dict[tuple, list[str]] = {}
    for rec in fs.export(oracle.space):
        if rec["state"] == "live":
            ident = (rec["subject"], rec["key"], tuple((c["key"], c["value"]) for c in rec["conditions"]))
            live.setdefault(ident, []).append(rec["record_id"])
        if rec["record_id"] in oracle.denied:
            assert rec["state"] == "denied"
    assert all(len(rids) == 1 for rids in live.values()), f"two confirmed base facts coexist: {live}"
    for rid in oracle.records:
        h = fs.history(oracle.space, rid, max_bytes=1_048_576)
        oracle.heads[rid] = h["current_revision"]
        revs = h["revisions"]
        now_rows = [(r["revision"], r["label"], r["adoption"], r["target_revision"], r["valid_from"],
                     r["valid_until"], r["basis"], r["role"], r["created"]) for r in revs]
        old = oracle.history.get(rid, [])
        assert now_rows[:len(old)] == old, "history is not append-only"
        for r in revs:                       # revisions never change, short of being forgotten
            w = oracle.values[(rid, r["revision"])]
            if r["status"] != "forgotten" and w["op"] != "deny":
                assert r["value"] == w["value"]
        oracle.history[rid] = now_rows


_spaces = itertools.count(1)


@pytest.fixture
def store(tmp_path):
    """One ledger for the whole test; each hypothesis example gets a fresh space in it."""
    ledger = open_test_ledger(tmp_path)
    yield FactsStore(ledger, CONFIG)
    ledger.close()


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_edit_sequences_keep_the_facts_invariants(store, data):
    oracle, counter = Oracle(space=f"haven:p{next(_spaces)}"), itertools.count(1)
    steps = data.draw(st.integers(3, 14), label="steps")
    for i in range(steps):
        action = data.draw(actions(oracle, counter), label=f"action {i}")
        _apply(store, oracle, action, f"e{i}")
        _check(store, oracle)


# ---------------------------------------------------------------- timeline against a slow reference


def _reference_value(base: list[Revision], exceptions: list[Revision], t: datetime) -> str | None:
    """The latest-adopted exception covering t, else the base slot with the latest onset at or before t."""
    covering = [e for e in exceptions if e.valid_from <= t < e.valid_until]
    if covering:
        return max(covering, key=lambda e: e.revision).value
    started = [b for b in base if b.valid_from is None or b.valid_from <= t]
    if not started:
        return None
    last = max(started, key=lambda b: b.revision)
    return last.value if last.valid_until is None or t < last.valid_until else None


@settings(max_examples=200, deadline=None)
@given(onsets=st.lists(st.sampled_from(range(len(TIMES))), min_size=0, max_size=4, unique=True),
       first_known=st.booleans(), ends=st.lists(st.one_of(st.none(), st.integers(1, 4)), min_size=5, max_size=5),
       spans=st.lists(st.tuples(st.integers(0, len(TIMES) - 2), st.integers(1, 3)), max_size=3),
       order=st.randoms(use_true_random=False))
def test_timeline_resolution_matches_a_slow_reference(onsets, first_known, ends, spans, order):
    onsets = sorted(onsets)
    base = [Revision(1, "establish", "adopted", "b1", TIMES[0] if first_known else None,
                     TIMES[0] + timedelta(days=30 * ends[0]) if ends[0] else None)]
    for i, o in enumerate(onsets):
        if first_known and o == 0:
            continue
        end = TIMES[o] + timedelta(days=30 * ends[i + 1]) if ends[i + 1] else None
        base.append(Revision(len(base) + 1, "change", "adopted", f"b{len(base) + 1}", TIMES[o], end, target=1))
    exceptions = []
    for start, length in spans:
        n = len(base) + len(exceptions) + 1
        exceptions.append(Revision(n, "exception", "adopted", f"x{n}", TIMES[start],
                                   TIMES[min(start + length, len(TIMES) - 1)] + timedelta(days=1), target=1))
    revisions = base + exceptions
    view = resolve(order.sample(revisions, len(revisions)))     # storage order must not matter
    for t in PROBES:
        seg = view.segment_at(t)
        assert (seg.revision.value if seg else None) == _reference_value(base, exceptions, t)
