"""Export and import: the versioned JSONL format, exact round trips into any store, purge-awareness."""

from __future__ import annotations

import json

import pytest

from ombre_brain import Brain, cli
from ombre_brain.portability.jsonl import FORMAT, export_rows, export_space, import_jsonl
from ombre_brain.store.doctor import doctor

SPACE = "haven:xiaoyu"
KEY_ENV = "OMBRE_TEST_PURGE_KEY"
CFG = {"identity": {"ai_name": "Haven", "user_name": "Xiaoyu"}, "forget": {"keys": {"k1": KEY_ENV}}}


@pytest.fixture
def src(tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "test-secret-for-receipts")
    with Brain.open(tmp_path / "src", CFG) as b:
        yield b


def seed(brain) -> dict[str, str]:
    ids = {
        "sea": brain.write(space=SPACE, id="sea", title="一起去海边", body="### moment\n捡贝壳\n\n### feeling\n安心",
                           tags=["海边"], importance=7, valence=0.8, arousal=0.4, source="chat:1",
                           comments=[{"author": "Haven", "created": "2026-08-02T10:00:00+08:00", "content": "她笑了"}],
                           created="2026-08-01T19:30:00+08:00", event_time="2026-08-01T18:00:00+08:00"),
        "shell": brain.write(space=SPACE, id="shell", title="The shell on the desk", body="She kept the shell.",
                             source="chat:2", pinned=True, memory_subject="relationship",
                             memory_layer="relationship_lesson", memory_classification_source="model"),
        "fight": brain.write(space=SPACE, id="fight", title="为搬家吵架", body="后来和好了。", archived=True,
                             source="chat:3", source_ref={"path": "diary/2025.md", "start_line": 3, "end_line": 9}),
        "dream": brain.write(space=SPACE, id="dream1", title="梦见海", body="海水是粉色的。", type="dream",
                             core_affect={"valence": 0.7, "arousal": 0.2}, recall_cues=["海"],
                             source_bucket_ids=["sea"]),
    }
    brain.link(SPACE, "sea", "shell", "same_event", 0.9)
    brain.link(SPACE, "fight", "sea", "old_version", 0.4)
    brain.write(space="haven:other", title="another space", body="must not leak")
    return ids


def submit_fact(brain, event_id: str, key: str, value: str, bucket: str | None = None) -> None:
    body = {"space": SPACE, "source": {"producer": "test", "event_id": event_id}, "subject": "user",
            "role": "structured_confirmation", "text": f"{key} is {value}",
            "edits": [{"op": "establish", "key": key, "value": value}]}
    if bucket:
        body["source_refs"] = [f"bucket:{bucket}"]
    brain.facts.submit(body)


def read_export(path) -> tuple[dict, list[dict]]:
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    return lines[0], lines[1:]


def test_export_format(src, tmp_path):
    seed(src)
    submit_fact(src, "e1", "diet", "vegetarian")
    out = tmp_path / "haven.jsonl"
    header = export_space(src, SPACE, out)
    first, rows = read_export(out)
    assert first == header
    assert set(first) == {"format", "version", "space", "exported_at", "model_id", "counts"}
    assert (first["format"], first["version"], first["space"]) == (FORMAT, 1, SPACE)
    assert first["model_id"] == src.embedder.model_id
    assert first["counts"] == {"buckets": 4, "edges": 2, "facts": 1}
    kinds = [r["kind"] for r in rows]
    assert kinds == ["bucket"] * 4 + ["edge"] * 2 + ["fact"]  # buckets, then edges, then facts
    for r in rows:
        assert r["space"] == SPACE
        assert not any("embedding" in k or "vector" in k for k in r)
    buckets = [r for r in rows if r["kind"] == "bucket"]
    assert buckets[0] == {"kind": "bucket", **src.get(SPACE, "sea").to_dict()}
    assert {r["id"] for r in buckets} == {"sea", "shell", "fight", "dream1"}
    edges = [r for r in rows if r["kind"] == "edge"]
    assert edges[0] == {"kind": "edge", "space": SPACE, "from_id": "fight", "to_id": "sea", "relation": "old_version",
                        "confidence": 0.4}
    assert all(set(e) == {"kind", "space", "from_id", "to_id", "relation", "confidence"} for e in edges)
    assert rows[-1]["key"] == "diet" and rows[-1]["record_id"]


def test_roundtrip_into_a_chroma_server_store_is_exact_and_idempotent(src, tmp_path, chroma_server):
    seed(src)
    out = tmp_path / "x.jsonl"
    export_space(src, SPACE, out)
    host, port = chroma_server
    with Brain.open(tmp_path / "dst", {"store": {"chroma": {"mode": "http", "host": host, "port": port}}}) as dst:
        report = import_jsonl(dst, out)
        assert report.ok and (report.created, report.edges) == (4, 2)
        for b in src.list(SPACE):
            assert dst.get(SPACE, b.id).to_dict() == b.to_dict()
        assert dst.edges(SPACE) == src.edges(SPACE)
        assert dst.get("haven:other", "x") is None and dst.spaces() == [SPACE]
        store = dst.store
        assert any(m.startswith("sea#") for m in store.lexical_search(SPACE, store.tokens("捡贝壳"), 3))
        assert any(m.startswith("shell#") for m in store.vector_search(SPACE, dst.embedder.query(
            "She kept the shell."), 3))
        assert doctor(dst, repair=False)["consistent"]
        again = import_jsonl(dst, out)
        assert (again.created, again.replaced, again.unchanged, again.edges) == (0, 0, 4, 0)
        _, rows = export_rows(dst, SPACE)
        _, original = export_rows(src, SPACE)
        assert rows == original


def test_export_purge_import_into_another_space_roundtrips_exactly(src, tmp_path):
    seed(src)
    out = tmp_path / "before.jsonl"
    export_space(src, SPACE, out)
    _, before_rows = read_export(out)

    src.purge(SPACE, bucket_ids=["shell"])
    after = tmp_path / "after.jsonl"
    header = export_space(src, SPACE, after)
    _, after_rows = read_export(after)
    assert header["counts"] == {"buckets": 3, "edges": 1, "facts": 0}
    assert "shell" not in after.read_text(encoding="utf-8")  # purged material never appears in an export

    src.purge(SPACE, whole_space=True)
    with pytest.raises(Exception, match="nothing to export"):
        export_space(src, SPACE, tmp_path / "empty.jsonl")

    report = import_jsonl(src, out, space="haven:restored")
    assert report.ok and report.created == 4
    _, restored = export_rows(src, "haven:restored")
    assert restored == [{**r, "space": "haven:restored"} for r in before_rows]
    assert doctor(src, repair=False)["consistent"]


def test_reimport_into_the_purged_space_refuses_purged_sources(src, tmp_path):
    seed(src)
    out = tmp_path / "before.jsonl"
    export_space(src, SPACE, out)
    src.purge(SPACE, bucket_ids=["shell"])
    report = import_jsonl(src, out)
    assert (report.created, report.unchanged) == (0, 3)
    assert len(report.refused) == 2
    assert report.refused[0].where.endswith("(bucket 'shell')")
    assert "source 'chat:2' was purged" in report.refused[0].reason
    assert "an end was refused" in report.refused[1].reason
    assert src.get(SPACE, "shell") is None
    assert not report.ok


def test_import_replaces_a_bucket_that_changed_since_the_export(src, tmp_path):
    seed(src)
    out = tmp_path / "x.jsonl"
    export_space(src, SPACE, out)
    original = src.get(SPACE, "sea").to_dict()
    src.update(SPACE, "sea", importance=2, body="改过的内容")
    report = import_jsonl(src, out)
    assert (report.created, report.replaced, report.unchanged) == (0, 1, 3)
    assert src.get(SPACE, "sea").to_dict() == original
    assert doctor(src, repair=False)["consistent"]


def test_facts_travel_with_the_export(src, tmp_path):
    from ombre_brain.facts import FactsStore

    if not hasattr(FactsStore, "restore"):
        pytest.skip("FactsStore.restore is not available in this build")
    seed(src)
    submit_fact(src, "e1", "diet", "vegetarian")
    submit_fact(src, "e2", "city", "Shanghai", bucket="sea")
    out = tmp_path / "x.jsonl"
    export_space(src, SPACE, out)
    with Brain.open(tmp_path / "dst", CFG) as dst:
        report = import_jsonl(dst, out)
        assert report.ok and report.facts == 2
        assert dst.facts.export(SPACE) == src.facts.export(SPACE)
        assert import_jsonl(dst, out).facts == 0


def test_cli_export_and_import(src, tmp_path, capsys):
    seed(src)
    src.close()
    out = tmp_path / "cli.jsonl"
    assert cli.main(["export", "--data", str(tmp_path / "src"), "--space", SPACE, str(out)]) == 0
    assert f"exported space {SPACE}: 4 buckets, 2 edges, 0 facts -> {out}" in capsys.readouterr().out
    assert cli.main(["import", "--data", str(tmp_path / "dst"), "--space", "haven:copy", str(out)]) == 0
    assert f"imported {out} into haven:copy: 4 created, 0 replaced, 0 unchanged; 2 edges, 0 facts" in \
        capsys.readouterr().out
    assert cli.main(["import", "--data", str(tmp_path / "dst"), "--space", "haven:copy", str(out)]) == 0
    assert "0 created, 0 replaced, 4 unchanged; 0 edges" in capsys.readouterr().out
    assert cli.main(["export", "--data", str(tmp_path / "dst"), "--space", "haven:nobody", str(out)]) == 2
    assert "space 'haven:nobody' has nothing to export (spaces in this store: haven:copy)" in capsys.readouterr().err
