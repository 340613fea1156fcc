"""FactsStore.restore: the inverse of export, idempotent, all or nothing."""

from __future__ import annotations

import copy
import itertools
from datetime import datetime, timezone

import pytest

from ombre_brain.config import load_config
from ombre_brain.errors import ConflictError, SourceSuppressedError, ValidationError
from ombre_brain.facts import FactsStore

from .conftest import open_test_ledger

SPACE = "haven:xiaoyu"
OTHER = "haven:copy"
UTC = timezone.utc
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
_events = itertools.count(1)
AS_OF = ["2024-06-01", "2025-02-01", "2025-12-31", "2026-01-15", "2026-03-10", "2026-03-20", "2026-04-02",
         "2026-04-20", "2026-06-01", "2027-01-01"]


def T(s: str) -> str:
    return f"{s}T00:00:00+00:00"


def _store(path):
    ledger = open_test_ledger(path)
    return ledger, FactsStore(ledger, load_config())


@pytest.fixture
def stores(tmp_path):
    l1, src = _store(tmp_path / "src.db")
    l2, dst = _store(tmp_path / "dst.db")
    yield src, dst
    l1.close()
    l2.close()


def submit(fs, edits, *, role="structured_confirmation", subject="user", space=SPACE, text="evidence",
           fragment=None, source_refs=None):
    src = {"producer": "chat", "event_id": f"ev{next(_events)}"}
    if fragment:
        src["fragment"] = fragment
    body = {"space": space, "source": src, "subject": subject, "role": role, "text": text,
            "edits": edits if isinstance(edits, list) else [edits]}
    if source_refs:
        body["source_refs"] = source_refs
    return fs.submit(body, now=NOW)["records"][0]


def edit(op, rid, rev, key, **fields):
    return {"op": op, "key": key, "target": {"record_id": rid, "revision": rev}, **fields}


def seed(fs, space=SPACE) -> dict[str, str]:
    """Every kind of revision: establish, change, exception, correct, confirm, deny, pending, conditions."""
    ids = {}
    r = submit(fs, {"op": "establish", "key": "preference.drink", "value": "coffee", "valid_from": T("2025-01-01"),
                    "confidence": 0.8}, space=space, source_refs=["bucket:sea"], fragment="bucket:shell")
    ids["drink"] = rid = r["record_id"]
    submit(fs, edit("change", rid, 1, "preference.drink", value="tea", valid_from=T("2026-03-01")), space=space)
    submit(fs, edit("correct", rid, 2, "preference.drink", value="green tea", valid_from=T("2026-04-01")),
           space=space)
    submit(fs, edit("exception", rid, 3, "preference.drink", value="herbal tea", valid_from=T("2026-04-10"),
                    valid_until=T("2026-05-01")), space=space)
    # a pending change (user quote) later confirmed, and a pending inference left pending
    r = submit(fs, {"op": "establish", "key": "language", "value": "zh", "valid_from": T("2025-06-01")}, space=space)
    ids["language"] = lang = r["record_id"]
    submit(fs, edit("change", lang, 1, "language", value="en", valid_from=T("2026-01-01")), role="user_quote",
           space=space)
    submit(fs, edit("confirm", lang, 2, "language", value="en"), space=space)
    r = submit(fs, {"op": "establish", "key": "pet", "value": "cat", "basis": "inferred", "confidence": 0.4},
               role="inference", space=space)
    ids["pet"] = r["record_id"]
    # a denied record
    r = submit(fs, {"op": "establish", "key": "diet", "value": "vegetarian"}, space=space)
    ids["diet"] = r["record_id"]
    submit(fs, edit("deny", r["record_id"], 1, "diet", value="vegetarian"), text="No, I'm not", space=space)
    # conditions, and a second subject
    r = submit(fs, {"op": "establish", "key": "timezone", "value": "Asia/Tokyo",
                    "conditions": [{"key": "device", "value": "phone"}]}, role="observation", space=space)
    ids["tz"] = r["record_id"]
    r = submit(fs, {"op": "establish", "key": "diet", "value": "fish"}, subject="pet", space=space)
    ids["pet_diet"] = r["record_id"]
    return ids


def answers(fs, space, ids):
    out = {}
    for ctx in (None, {"device": "phone"}):
        for day in AS_OF:
            read = fs.read(space, as_of=T(day), context=ctx, now=NOW)
            out[(str(ctx), day)] = (strip_space(read["facts"]), read["background"], read["refresh_at"])
        read = fs.read(space, context=ctx, now=NOW)
        out[(str(ctx), "now")] = (strip_space(read["facts"]), read["background"], read["refresh_at"])
    for rid in ids.values():
        (out[rid],) = strip_space([fs.history(space, rid)])
    return out


def strip_space(records):
    return [{k: v for k, v in r.items() if k != "space"} for r in records]


def test_roundtrip_export_read_history_and_as_of(stores):
    src, dst = stores
    ids = seed(src)
    exported = src.export(SPACE)
    assert len(exported) == 6
    assert dst.restore(SPACE, exported) == 6
    assert dst.export(SPACE) == exported
    assert answers(dst, SPACE, ids) == answers(src, SPACE, ids)
    assert dst.read(SPACE, now=NOW)["facts"] == src.read(SPACE, now=NOW)["facts"]
    assert dst.read(SPACE, as_of=T("2026-04-20"), now=NOW)["facts"][0]["space"] == SPACE
    statuses = {r["record_id"]: (r["state"], [e["status"] for e in r["revisions"]]) for r in exported}
    assert statuses[ids["drink"]] == ("live", ["live", "corrected", "live", "live"])
    assert statuses[ids["language"]] == ("live", ["live", "confirmed", "live"])
    assert statuses[ids["pet"]] == ("pending", ["pending"])
    assert statuses[ids["diet"]][0] == "denied"


def test_restore_is_idempotent(stores):
    src, dst = stores
    seed(src)
    exported = src.export(SPACE)
    assert dst.restore(SPACE, exported) == 6
    before = dst.changes(SPACE, "0.0")
    assert dst.restore(SPACE, exported) == 0
    assert dst.export(SPACE) == exported
    assert dst.changes(SPACE, "0.0") == before          # nothing written, no events


def test_changes_feed_sees_restored_revisions(stores):
    src, dst = stores
    ids = seed(src)
    cursor = dst.changes(SPACE)["cursor"]
    dst.restore(SPACE, src.export(SPACE))
    events = dst.changes(SPACE, cursor, limit=1000)["events"]
    assert len(events) == sum(len(r["revisions"]) for r in src.export(SPACE))
    drink = [(e["revision"], e["label"]) for e in events if e["record_id"] == ids["drink"]]
    assert drink == [(1, "established"), (2, "changed"), (3, "corrected"), (4, "exception")]
    assert dst.read(SPACE, now=NOW)["cursor"] != cursor


def test_conflicting_content_is_refused_and_nothing_is_written(stores):
    src, dst = stores
    ids = seed(src)
    exported = src.export(SPACE)
    dst.restore(SPACE, [r for r in exported if r["record_id"] == ids["drink"]])
    changed = copy.deepcopy(exported)
    for r in changed:
        if r["record_id"] == ids["drink"]:
            r["revisions"][0]["value"] = "espresso"
    before = dst.export(SPACE)
    with pytest.raises(ConflictError) as err:
        dst.restore(SPACE, changed)
    assert ids["drink"] in err.value.message and err.value.code == "record_conflict"
    assert dst.export(SPACE) == before                 # the other five records were not written either


def test_restore_into_another_space(stores):
    src, dst = stores
    ids = seed(src)
    exported = src.export(SPACE)
    assert dst.restore(OTHER, exported) == 6
    assert dst.export(SPACE) == []
    assert strip_space(dst.export(OTHER)) == strip_space(exported)
    assert all(r["space"] == OTHER for r in dst.export(OTHER))
    assert answers(dst, OTHER, ids) == answers(src, SPACE, ids)
    assert {f["space"] for f in dst.read(OTHER, now=NOW)["facts"]} == {OTHER}
    # the same store can hold both: restoring into the source's own store under a new space
    assert src.restore(OTHER, exported) == 6
    assert answers(src, OTHER, ids) == answers(src, SPACE, ids)


def test_a_live_duplicate_identity_is_refused(stores):
    src, dst = stores
    seed(src)
    submit(dst, {"op": "establish", "key": "timezone", "value": "UTC",
                 "conditions": [{"key": "device", "value": "phone"}]})
    with pytest.raises(ConflictError) as err:
        dst.restore(SPACE, src.export(SPACE))
    assert err.value.code == "duplicate_fact"


def test_a_forgotten_source_is_not_restored(stores):
    src, dst = stores
    seed(src)
    exported = src.export(SPACE)
    digest = next(ref for r in exported for e in r["revisions"] for ref in e["source_refs"]
                  if not ref.startswith("bucket:"))
    dst.suppress_source(SPACE, digest)
    with pytest.raises(SourceSuppressedError):
        dst.restore(SPACE, exported)
    assert dst.export(SPACE) == []


@pytest.mark.parametrize(("mutate", "field"), [
    (lambda rs: rs[1].pop("subject"), "records[1].subject"),
    (lambda rs: rs[1].update(record_id=""), "records[1].record_id"),
    (lambda rs: rs[2].update(revisions=[]), "records[2].revisions"),
    (lambda rs: rs[0]["revisions"][1].update(label="rewritten"), "records[0].revisions[1].label"),
    (lambda rs: rs[0]["revisions"][1].update(revision=1), "records[0].revisions[1].revision"),
    (lambda rs: rs[0]["revisions"][0].update(valid_from="yesterday"), "records[0].revisions[0].valid_from"),
    (lambda rs: rs[0]["revisions"][0].update(confidence=3), "records[0].revisions[0].confidence"),
    (lambda rs: rs[0]["revisions"][0].update(source_refs=["nope"]), "records[0].revisions[0].source_refs[0]"),
    (lambda rs: rs[0]["revisions"][0].update(extra=1), "records[0].revisions[0].extra"),
    (lambda rs: rs[3].update(conditions=[{"key": "a"}]), "records[3].conditions[0].value"),
    # a revision another depends on is missing: the claimed status no longer holds
    (lambda rs: rs[0]["revisions"].pop(2), "records[0].revisions[1].status"),
    (lambda rs: rs[0].update(current_revision=9), "records[0].current_revision"),
    (lambda rs: rs.append(copy.deepcopy(rs[0])), f"records[{6}].record_id"),
])
def test_malformed_input_names_the_record_and_field(stores, mutate, field):
    src, dst = stores
    ids = seed(src)
    records = sorted(copy.deepcopy(src.export(SPACE)), key=lambda r: r["record_id"] != ids["drink"])
    mutate(records)
    with pytest.raises(ValidationError) as err:
        dst.restore(SPACE, records)
    assert err.value.field == field
    assert dst.export(SPACE) == []


def test_not_a_list_is_refused(stores):
    _, dst = stores
    with pytest.raises(ValidationError) as err:
        dst.restore(SPACE, {"record_id": "x"})
    assert err.value.field == "records"


def test_forgetting_a_source_works_on_restored_revisions(stores):
    src, dst = stores
    ids = seed(src)
    dst.restore(SPACE, src.export(SPACE))
    pet = next(r for r in src.export(SPACE) if r["record_id"] == ids["pet_diet"])
    (digest,) = pet["revisions"][0]["source_refs"]
    assert src.forget_sources(SPACE, [digest]) == dst.forget_sources(SPACE, [digest]) == 1
    assert dst.export(SPACE) == src.export(SPACE)
    assert dst.read(SPACE, subject="pet", now=NOW)["facts"] == []
