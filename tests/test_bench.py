"""`ombre-brain bench` on a tiny store: the JSON shape, the partial runs, and a deterministic generator."""

from __future__ import annotations

import json

from ombre_brain import cli
from ombre_brain.evaluate.bench import synthetic_queries, synthetic_store


def _run_json(capsys, argv: list[str]) -> dict:
    assert cli.main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_bench_json_shape(capsys):
    res = _run_json(capsys, ["bench", "--buckets", "60", "--queries", "10", "--json"])
    assert res["buckets"] == 60 and res["moments"] >= 60 and res["edges"] > 0
    for key in ("write_per_s", "floor_write_per_s", "rss_mb", "overhead_p95"):
        assert isinstance(res[key], float) and res[key] > 0, key
    for key in ("turn_ms", "floor_ms"):
        assert set(res[key]) == {"p50", "p95"} and 0 < res[key]["p50"] <= res[key]["p95"]
    assert res["overhead_p95"] == round(res["turn_ms"]["p95"] / res["floor_ms"]["p95"], 2)
    assert res["overhead_p95_floor_after"] == round(res["turn_ms"]["p95"] / res["floor_after_ms"]["p95"], 2)


def test_the_floor_is_sampled_after_each_turn_and_again_in_a_phase_of_its_own(tmp_path, monkeypatch):
    """A floor sample follows every measured turn (a slow minute slows both alike); the earlier method's
    floor, sampled after all the turns, is measured too, on queries of its own."""
    from ombre_brain import Brain
    from ombre_brain.evaluate.bench import bench_turns, bench_write

    events: list[tuple[str, str]] = []
    with Brain.open(tmp_path / "data") as brain:
        bench_write(brain, synthetic_store(12, seed=2)[0], measure_floor=False)
        turn, queries = brain.turn, brain.store.embedder.queries
        # the embedder is the process's shared one: monkeypatch puts its method back for the tests after this one
        monkeypatch.setattr(brain, "turn", lambda space, session, q, **kw: (events.append(("turn", q)),
                                                                         turn(space, session, q, **kw))[1])
        monkeypatch.setattr(brain.store.embedder, "queries",
                            lambda texts: (events.extend(("embed", t) for t in texts), queries(texts))[1])
        qs = synthetic_queries(9, seed=3)
        res = bench_turns(brain, qs[1:4], qs[4:7], qs[:1], after_queries=qs[7:])
    measured = [e for e in events if e[1] not in qs[:1]]  # past the warm-up turn
    turns_and_floors = [e for e in measured if e[0] == "turn" or e[1] in qs[4:]]
    assert turns_and_floors == [("turn", qs[1]), ("embed", qs[4]), ("turn", qs[2]), ("embed", qs[5]),
                                ("turn", qs[3]), ("embed", qs[6]), ("embed", qs[7]), ("embed", qs[8])]
    assert set(res) == {"turn_ms", "floor_ms", "floor_after_ms"}


def test_bench_write_only_and_turns_only(capsys):
    w = _run_json(capsys, ["bench", "--write", "--buckets", "20", "--json"])
    assert "write_per_s" in w and "floor_write_per_s" in w and "turn_ms" not in w
    t = _run_json(capsys, ["bench", "--turns", "--buckets", "20", "--queries", "5", "--json"])
    assert "turn_ms" in t and "floor_ms" in t and "write_per_s" not in t


def test_synthetic_store_is_deterministic_and_bilingual():
    a_items, a_edges = synthetic_store(200, seed=3)
    b_items, b_edges = synthetic_store(200, seed=3)
    assert a_items == b_items and a_edges == b_edges
    assert synthetic_store(200, seed=4)[0] != a_items
    assert len({i["id"] for i in a_items}) == 200
    assert any(any("\u4e00" <= ch <= "\u9fff" for ch in i["title"]) for i in a_items)
    assert any(i["title"].isascii() for i in a_items)
    assert all(a != b for a, b, _, _ in a_edges)
    qs = synthetic_queries(50, seed=1)
    assert len(set(qs)) == 50 and not set(qs) & set(synthetic_queries(50, seed=2, avoid=set(qs)))


def test_keep_builds_once_then_reuses_the_store(capsys, tmp_path):
    root = tmp_path / "kept"
    first = _run_json(capsys, ["bench", "--buckets", "12", "--queries", "3", "--keep", str(root), "--json"])
    assert "reused" not in first and (root / "bench-store.json").is_file()
    again = _run_json(capsys, ["bench", "--buckets", "12", "--queries", "3", "--keep", str(root), "--json"])
    assert again["reused"] is True
    # the write numbers are the ones recorded at build time, and the store was not written twice
    assert again["write_per_s"] == first["write_per_s"] and again["moments"] == first["moments"]
    assert 0 < again["turn_ms"]["p50"] <= again["turn_ms"]["p95"]
    from ombre_brain import Brain
    from ombre_brain.evaluate.bench import SPACE

    with Brain.open(root / "data") as brain:
        assert brain.store.count(SPACE) == 12


def test_keep_refuses_a_store_of_another_size_or_a_foreign_directory(capsys, tmp_path):
    root = tmp_path / "kept"
    _run_json(capsys, ["bench", "--buckets", "5", "--queries", "2", "--keep", str(root), "--json"])
    assert cli.main(["bench", "--buckets", "6", "--queries", "2", "--keep", str(root)]) != 0
    assert "holds a bench store of 5 buckets" in capsys.readouterr().err
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine", encoding="utf-8")
    assert cli.main(["bench", "--buckets", "5", "--keep", str(foreign)]) != 0
    assert "not empty" in capsys.readouterr().err
    assert (foreign / "notes.txt").read_text(encoding="utf-8") == "mine"


def test_plot_draws_from_saved_results_and_names_a_bad_file(capsys, tmp_path):
    runs = []
    for n, p95 in ((1000, 30.0), (10000, 40.0)):
        f = tmp_path / f"{n}.json"
        f.write_text(json.dumps({"buckets": n, "turn_ms": {"p50": 20.0, "p95": p95},
                                 "floor_ms": {"p50": 10.0, "p95": 12.0}, "overhead_p95": round(p95 / 12, 2)}))
        runs.append(str(f))
    out = tmp_path / "p95.png"
    assert cli.main(["bench", "--plot", str(out), *runs]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert cli.main(["bench", "--plot", str(out), str(bad)]) == 2
    assert "bad.json" in capsys.readouterr().err


def test_keep_refuses_an_unfinished_store(capsys, tmp_path):
    root = tmp_path / "kept"
    (root / "data").mkdir(parents=True)  # what a run stopped before its marker leaves behind
    assert cli.main(["bench", "--buckets", "5", "--keep", str(root)]) == 2
    assert "unfinished bench store" in capsys.readouterr().err


def test_a_repeated_memory_is_deduplicated_and_its_edges_follow_the_kept_id(tmp_path):
    """At 100k buckets the generator repeats a memory now and then; the bench must link to the id dedupe kept."""
    from ombre_brain import Brain
    from ombre_brain.evaluate.bench import SPACE, bench_write, link_edges

    items, _ = synthetic_store(6, seed=5)
    items[4] = {**items[1], "id": items[4]["id"]}  # word for word the same memory under another id
    edges = [(items[4]["id"], items[2]["id"], "relates_to", 0.8), (items[1]["id"], items[4]["id"], "same_event", 0.9)]
    with Brain.open(tmp_path / "data") as brain:
        res = bench_write(brain, items, measure_floor=False)
        assert res.duplicates == 1 and res.stored_as[items[4]["id"]] == items[1]["id"]
        assert brain.store.count(SPACE) == 5
        assert link_edges(brain, edges, res.stored_as) == 1  # the self-loop through the duplicate is skipped
        assert [(e.from_id, e.to_id) for e in brain.edges(SPACE)] == [(items[1]["id"], items[2]["id"])]


def test_bench_times_a_playground_replay_of_the_turns_it_records(capsys):
    res = _run_json(capsys, ["bench", "--turns", "--buckets", "40", "--queries", "3", "--playground", "24", "--json"])
    p = res["playground"]
    assert p["turns"] == 24 and p["seconds"] > 0 and abs(p["per_turn_ms"] * 24 / 1000 - p["seconds"]) < 0.1
    assert p["changed_keys"] == ["gateway.skip_recent_rounds", "gateway.budgets.recalled_memory"]
    assert "playground" not in _run_json(capsys, ["bench", "--turns", "--buckets", "20", "--queries", "3", "--json"])
    assert cli.main(["bench", "--buckets", "20", "--playground", "-1"]) == 2
    assert "--playground must be 0" in capsys.readouterr().err
