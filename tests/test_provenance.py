"""Provenance on duplicates (design §10): one bucket keeps every source that wrote its text.

On 0105570 a second source writing the same text got the old id back and its source was dropped,
so purging that source deleted nothing; a duplicate carrying other ``pinned``/``importance`` values
reported success and dropped them. Here each source holds a claim, a purge by source removes that
claim, the text goes when no claim is left, and the receipt says which buckets were only released.
"""

from __future__ import annotations

import json

import pytest

from ombre_brain import DuplicateError
from ombre_brain.forget.keys import signing_key
from ombre_brain.forget.receipts import verify

SPACE = "haven:xiaoyu"
TEXT = {"title": "一起去海边看日出", "body": "那天风很大，我们捡了好多贝壳。"}


def _bucket_ids(brain) -> list[str]:
    return sorted(b.id for b in brain.list(SPACE, limit=100))


def test_a_second_source_adds_its_claim_to_the_same_bucket(brain):
    a = brain.write(SPACE, source="diary:2026-11-02", **TEXT)
    b = brain.write(SPACE, source="chat:e17", **TEXT)
    assert a == b
    assert brain.sources(SPACE, a) == ["chat:e17", "diary:2026-11-02"]
    assert _bucket_ids(brain) == [a]


def test_purging_one_source_keeps_the_text_the_other_still_holds(brain):
    bid = brain.write(SPACE, source="diary:2026-11-02", **TEXT)
    brain.write(SPACE, source="chat:e17", **TEXT)
    receipt = brain.purge(SPACE, source="diary:2026-11-02")
    payload = receipt["payload"]
    assert payload["released"] == [bid] and payload["deleted"]["buckets"] == 0
    kept = brain.get(SPACE, bid)
    assert kept is not None and kept.title == TEXT["title"]
    assert kept.source == "chat:e17"  # the purged identity is no longer shown as its source
    assert brain.sources(SPACE, bid) == ["chat:e17"]

    receipt = brain.purge(SPACE, source="chat:e17")
    assert receipt["payload"]["released"] == [] and receipt["payload"]["deleted"]["buckets"] == 1
    assert brain.get(SPACE, bid) is None
    assert _bucket_ids(brain) == []


def test_the_receipt_that_releases_a_claim_verifies(brain):
    brain.write(SPACE, source="a", **TEXT)
    brain.write(SPACE, source="b", **TEXT)
    receipt = brain.purge(SPACE, source="a")
    kid, secret = signing_key(brain.config, brain.path)
    assert verify(receipt, {kid: secret}) == kid and receipt["payload"]["released"]
    assert brain.purge(SPACE, source="a") == receipt  # a repeat returns the original receipt


def test_a_write_without_a_source_also_holds_the_text(brain):
    bid = brain.write(SPACE, **TEXT)
    assert brain.write(SPACE, source="import:notes.md", **TEXT) == bid
    assert brain.sources(SPACE, bid) == ["", "import:notes.md"]
    brain.purge(SPACE, source="import:notes.md")
    assert brain.get(SPACE, bid) is not None


def test_a_purged_source_may_not_claim_the_text_again(brain):
    brain.write(SPACE, source="a", **TEXT)
    bid = brain.write(SPACE, source="b", **TEXT)
    brain.purge(SPACE, source="a")
    with pytest.raises(Exception) as exc:
        brain.write(SPACE, source="a", **TEXT)
    assert getattr(exc.value, "code", "") == "source_suppressed"
    assert brain.sources(SPACE, bid) == ["b"]


@pytest.mark.parametrize("extra,named", [({"importance": 9}, ["importance"]), ({"pinned": True}, ["pinned"]),
                                         ({"importance": 9, "valence": 0.1}, ["importance", "valence"])])
def test_a_duplicate_with_other_values_is_refused_and_writes_nothing(brain, extra, named):
    bid = brain.write(SPACE, source="a", importance=5, **TEXT)
    with pytest.raises(DuplicateError) as exc:
        brain.write(SPACE, source="b", **TEXT, **extra)
    assert exc.value.existing_id == bid and exc.value.fields == named
    assert exc.value.status == 409
    stored = brain.get(SPACE, bid)
    assert stored.importance == 5 and stored.pinned is False
    assert brain.sources(SPACE, bid) == ["a"]  # no claim was added either


def test_repeating_the_stored_values_is_a_plain_duplicate(brain):
    bid = brain.write(SPACE, source="a", importance=8, pinned=True, **TEXT)
    assert brain.write(SPACE, source="b", importance=8, pinned=True, **TEXT) == bid
    # the write event's own id and time are not the memory's: the stored id comes back
    assert brain.write(SPACE, source="c", id="mine", created="2026-01-01T00:00:00+00:00", **TEXT) == bid
    assert brain.sources(SPACE, bid) == ["a", "b", "c"]


def test_write_many_claims_and_refuses_like_write(brain):
    first = brain.write(SPACE, source="a", **TEXT)
    ids = brain.write_many([{"space": SPACE, "source": "b", **TEXT},
                            {"space": SPACE, "source": "b", "title": "外婆的桂花糕"},
                            {"space": SPACE, "source": "c", "title": "外婆的桂花糕"}])
    assert ids[0] == first and ids[1] == ids[2]
    assert brain.sources(SPACE, first) == ["a", "b"] and brain.sources(SPACE, ids[1]) == ["b", "c"]
    before = _bucket_ids(brain)
    with pytest.raises(DuplicateError) as exc:
        brain.write_many([{"space": SPACE, "source": "d", "title": "新的一条"},
                          {"space": SPACE, "source": "d", "importance": 10, **TEXT}])
    assert "items[1]" in exc.value.message and exc.value.existing_id == first
    assert _bucket_ids(brain) == before  # the valid first item was not written either
    assert brain.sources(SPACE, first) == ["a", "b"]


def test_purge_by_id_removes_every_claim_and_suppresses_every_source(brain):
    bid = brain.write(SPACE, source="a", **TEXT)
    brain.write(SPACE, source="b", **TEXT)
    brain.purge(SPACE, bucket_ids=[bid])
    assert brain.get(SPACE, bid) is None
    assert brain.ledger.one("SELECT COUNT(*) FROM bucket_sources WHERE space = ?", (SPACE,))[0] == 0
    for src in ("a", "b"):
        with pytest.raises(Exception) as exc:
            brain.write(SPACE, source=src, **TEXT)
        assert getattr(exc.value, "code", "") == "source_suppressed"


def test_a_ledger_from_before_claims_is_filled_on_open(brain_path):
    from ombre_brain import Brain

    b = Brain.open(brain_path)
    bid = b.write(SPACE, source="old-source", **TEXT)
    from ombre_brain.store.schema import CLAIMS, STEPS

    with b.ledger.tx() as c:  # as a ledger written before the claims step existed
        c.execute("DROP TABLE bucket_sources")
        c.execute("UPDATE schema_versions SET version = ? WHERE component = 'store'", (STEPS.index(CLAIMS),))
    b.close()
    b = Brain.open(brain_path)
    try:
        assert b.sources(SPACE, bid) == ["old-source"]
        assert b.write(SPACE, source="new-source", **TEXT) == bid
        b.purge(SPACE, source="old-source")
        assert b.get(SPACE, bid) is not None
    finally:
        b.close()


def test_http_names_the_conflict_and_lists_the_sources(client):
    r = client.post("/v1/buckets", json={"space": SPACE, "source": "a", **TEXT})
    assert r.status_code == 201
    bid = r.json()["id"]
    r = client.post("/v1/buckets", json={"space": SPACE, "source": "b", "pinned": True, **TEXT})
    assert r.status_code == 409
    err = r.json()["error"]
    assert err["code"] == "duplicate_differs" and err["existing_id"] == bid and err["fields"] == ["pinned"]
    assert client.post("/v1/buckets", json={"space": SPACE, "source": "b", **TEXT}).json()["id"] == bid
    assert client.get(f"/v1/buckets/{bid}/sources", params={"space": SPACE}).json() == {"id": bid,
                                                                                       "sources": ["a", "b"]}
    assert client.get("/v1/buckets/nope/sources", params={"space": SPACE}).status_code == 404
    r = client.post("/v1/buckets", json={"space": SPACE, "source": "c", "dedupe": False, **TEXT})
    assert r.status_code == 400 and "dedupe" in r.json()["error"]["message"]


def test_export_and_import_keep_every_claim(brain, tmp_path):
    from ombre_brain import Brain
    from ombre_brain.portability.jsonl import export_space, import_jsonl

    bid = brain.write(SPACE, source="a", **TEXT)
    brain.write(SPACE, source="b", **TEXT)
    solo = brain.write(SPACE, source="c", title="外婆的桂花糕")
    out = tmp_path / "export.jsonl"
    export_space(brain, SPACE, out)
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()[1:]]
    assert {r["id"]: r.get("sources") for r in rows if r["kind"] == "bucket"} == {bid: ["b"], solo: None}
    with Brain.open(tmp_path / "copy") as copy:
        import_jsonl(copy, out)
        assert copy.sources(SPACE, bid) == ["a", "b"] and copy.sources(SPACE, solo) == ["c"]
        copy.purge(SPACE, source="a")
        assert copy.get(SPACE, bid) is not None  # "b" still holds it in the copy too


def test_an_import_refuses_sources_that_are_not_strings(brain, tmp_path):
    from ombre_brain.portability.jsonl import ImportProblems, export_space, import_jsonl

    brain.write(SPACE, source="a", **TEXT)
    out = tmp_path / "export.jsonl"
    export_space(brain, SPACE, out)
    lines = out.read_text(encoding="utf-8").splitlines()
    row = json.loads(lines[1])
    row["sources"] = [5]
    out.write_text("\n".join([lines[0], json.dumps(row, ensure_ascii=False)]) + "\n", encoding="utf-8")
    with pytest.raises(ImportProblems, match="sources must be a list of source strings"):
        import_jsonl(brain, out, space="haven:other")
