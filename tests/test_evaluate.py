"""The evaluation harness: scores on hand-made rankings, data loading, and both commands on tiny data."""

from __future__ import annotations

import json

import pytest

from ombre_brain import cli
from ombre_brain.evaluate.ranking import (
    Memory,
    Question,
    evidence_ids,
    hit_at_k,
    load_locomo,
    load_recall_yaml,
    memory_bucket,
    parse_locomo_time,
    recall_at_k,
    reciprocal_rank,
    score_locomo,
)

from .conftest import LOCOMO, ZH_RECALL, needs_shared

# ---------------------------------------------------------------- scores, by hand


def test_recall_on_a_hand_made_three_question_example():
    questions = [
        Question("q1", ("D1:1",), 4),             # found at rank 1
        Question("q2", ("D1:2", "D2:1"), 1),      # one of two at rank 2, the other at rank 4
        Question("q3", ("D3:3",), 2),             # not retrieved at all
    ]
    rankings = [
        ["D1:1", "D1:5", "D2:2", "D2:3"],
        ["D1:4", "D1:2", "D2:2", "D2:1"],
        ["D1:1", "D1:2", "D2:2", "D2:3"],
    ]
    got = score_locomo(questions, rankings, [1, 2, 4])
    # recall@1: (1 + 0 + 0) / 3; recall@2: (1 + 1/2 + 0) / 3; recall@4: (1 + 1 + 0) / 3
    assert got["overall"] == {"recall@1": 33.33, "recall@2": 50.0, "recall@4": 66.67}
    assert got["by_category"] == {
        "1": {"recall@1": 0.0, "recall@2": 50.0, "recall@4": 100.0, "questions": 1},
        "2": {"recall@1": 0.0, "recall@2": 0.0, "recall@4": 0.0, "questions": 1},
        "4": {"recall@1": 100.0, "recall@2": 100.0, "recall@4": 100.0, "questions": 1},
    }


def test_hit_mrr_and_recall_helpers():
    ranked = ["a", "b", "c", "d"]
    assert recall_at_k(ranked, ["b", "z"], 2) == 0.5
    assert recall_at_k(ranked, ["b", "b"], 1) == 0.0 and recall_at_k(ranked, ["b", "b"], 2) == 1.0
    assert recall_at_k(ranked, [], 3) == 0.0
    assert hit_at_k(ranked, ["c", "z"], 2) == 0.0 and hit_at_k(ranked, ["c", "z"], 3) == 1.0
    assert reciprocal_rank(ranked, ["c", "d"]) == pytest.approx(1 / 3)
    assert reciprocal_rank(ranked, ["d"], depth=3) == 0.0


def test_context_lift_moves_a_reply_up_behind_the_turn_it_answers():
    from ombre_brain.buckets import Bucket, Moment
    from ombre_brain.recall_types import Candidate, Edge, MomentHit
    from ombre_brain.retrieval.fusion import lift_by_context

    def cand(bid: str, score: float) -> Candidate:
        hit = MomentHit(Moment(f"{bid}#0", bid, 0, "title", bid, False), fused=score)
        return Candidate(Bucket(id=bid, space="s:a", title=bid), hit, (hit,), score)

    cands = [cand("question", 0.9), cand("other", 0.5), cand("answer", 0.3), cand("far", 0.2)]
    edges = [Edge("question", "answer", "context_of", 1.0), Edge("far", "nowhere", "context_of", 1.0),
             Edge("other", "far", "relates_to", 1.0)]
    got = lift_by_context(cands, edges, 0.5)
    assert [c.bucket.id for c in got] == ["question", "answer", "other", "far"]
    assert [c.rank for c in got] == [1, 2, 3, 4]
    assert got[1].fused == pytest.approx(0.3 + 0.5 * 0.9) and got[0].fused == pytest.approx(0.9 + 0.5 * 0.3)
    assert lift_by_context(cands, edges, 0.0) == cands  # off: nothing moves


# ---------------------------------------------------------------- loading


def test_evidence_ids_fix_the_datas_typos():
    assert evidence_ids(["D8:6; D9:17", "D:11:26", "D1:3", "D1:3", "D"]) == ["D8:6", "D9:17", "D11:26", "D1:3"]


def test_locomo_times_and_long_turns():
    assert parse_locomo_time("1:56 pm on 8 May, 2023").isoformat() == "2023-05-08T13:56:00+00:00"
    assert parse_locomo_time("12:48 am on 1 February, 2023").hour == 0
    long = Memory("D1:1", "Caroline: " + "word " * 80, "2023-05-08T13:56:00+00:00")
    b = memory_bucket("s:a", long, 200)
    assert len(b["title"]) <= 200 and b["title"].endswith("…") and b["body"] == long.text
    short = memory_bucket("s:a", Memory("D1:2", "Mel: hi", "2023-05-08T13:56:00+00:00"), 200)
    assert short["title"] == "Mel: hi" and short["body"] == "" and short["id"] == "D1:2"


def test_shared_locomo_conversation_loads():
    ds = load_locomo(needs_shared(LOCOMO / "26.json"))
    ids = {m.id for m in ds.memories}
    assert len(ds.memories) == 419 and all(set(q.wanted) <= ids for q in ds.questions)
    assert ("D1:1", "D1:2") in ds.links and not any(a.split(":")[0] != b.split(":")[0] for a, b in ds.links)
    assert {q.category for q in ds.questions} <= {1, 2, 3, 4, 5}


def test_shared_recall_yaml_loads():
    ds = load_recall_yaml(needs_shared(ZH_RECALL))
    assert len(ds.memories) == 40 and len(ds.questions) == 34


@pytest.mark.parametrize("name", ["companion_mixed", "companion_mixed_structured"])
def test_the_mixed_sets_keep_both_scripts_in_one_store(name):
    """The mixed-script sets (docs/benchmarks.md, "Stores that mix scripts") load, and each is one store holding
    memories in both scripts, with questions in the other script than the memory they want."""
    from pathlib import Path

    from ombre_brain.evaluate.inject import load_inject_yaml
    from ombre_brain.text import is_cjk_text

    ds = load_inject_yaml(Path(__file__).parent / "data" / f"{name}.yaml")
    cjk = {m.id: is_cjk_text(m.text) for m in ds.memories}
    assert 0 < sum(cjk.values()) < len(cjk)
    cross = [c for c in ds.cases if c.kind == "crosslingual"]
    assert cross and all(any(cjk[w] != is_cjk_text(c.text) for w in c.wanted) for c in cross)


def test_a_set_may_write_a_memory_as_a_bucket_with_sections(tmp_path):
    """`memories: {id: {title, body, tags}}` is stored as written (the companion's own memories look like this),
    beside memories given as one text; a structured memory without a title is refused, naming it."""
    from ombre_brain.errors import ValidationError
    from ombre_brain.evaluate.inject import load_inject_yaml

    path = tmp_path / "structured.yaml"
    path.write_text("memories:\n  m1:\n    title: 一起去爬山\n    body: |\n      ### moment\n      我们在山顶看云海。\n"
                    "    tags: [爬山]\n  m2: 周末做了红烧肉\nqueries:\n  - {q: 还记得爬山吗, want: [m1]}\n",
                    encoding="utf-8")
    for ds in (load_recall_yaml(path), load_inject_yaml(path)):
        m1, m2 = ds.memories
        assert memory_bucket("a:b", m1, 40) == {"space": "a:b", "id": "m1", "title": "一起去爬山",
                                                "body": "### moment\n我们在山顶看云海。", "tags": ["爬山"],
                                                "created": m1.created}
        assert m1.text == "一起去爬山\n### moment\n我们在山顶看云海。"
        assert memory_bucket("a:b", m2, 40)["title"] == "周末做了红烧肉" and m2.title is None
    path.write_text("memories:\n  m1: {body: 没有标题}\nqueries:\n  - {q: 标题, want: [m1]}\n", encoding="utf-8")
    with pytest.raises(ValidationError, match="memory m1 needs a text `title`"):
        load_inject_yaml(path)


# ---------------------------------------------------------------- the commands on tiny data

TINY_CONVERSATION = {
    "speaker_a": "Caroline",
    "speaker_b": "Melanie",
    "session_1_date_time": "1:56 pm on 8 May, 2023",
    "session_1": [
        {"speaker": "Caroline", "dia_id": "D1:1", "text": "I adopted a green parrot named Kiwi last week."},
        {"speaker": "Melanie", "dia_id": "D1:2", "text": "Lovely! I have been painting sunsets by the lake."},
        {"speaker": "Caroline", "dia_id": "D1:3", "text": "My sister moved to Lisbon for a violin scholarship."},
    ],
    "session_2_date_time": "7:55 pm on 9 June, 2023",
    "session_2": [
        {"speaker": "Melanie", "dia_id": "D2:1", "text": "We went camping and roasted marshmallows.",
         "blip_caption": "a photo of a tent in a forest"},
        {"speaker": "Caroline", "dia_id": "D2:2", "text": "Kiwi the parrot learned to whistle a song!"},
    ],
    "qa": [
        {"question": "What is the name of the green parrot Caroline adopted?", "answer": "Kiwi", "evidence": ["D1:1"],
         "category": 4},
        {"question": "Where did Caroline's sister move for the violin scholarship?", "answer": "Lisbon",
         "evidence": ["D1:3"], "category": 1},
        {"question": "What did Melanie roast when camping?", "answer": "marshmallows", "evidence": ["D2:1; D9:9"],
         "category": 2},
        {"question": "No evidence here", "answer": "-", "evidence": [], "category": 5},
    ],
}


def _run_json(capsys, argv: list[str]) -> dict:
    assert cli.main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_eval_locomo_json_on_tiny_data(tmp_path, capsys):
    (tmp_path / "tiny.json").write_text(json.dumps(TINY_CONVERSATION), encoding="utf-8")
    out = tmp_path / "rankings.json"
    res = _run_json(capsys, ["eval", "locomo", "--data", str(tmp_path), "--k", "1,3", "--json",
                             "--rankings", str(out)])
    assert res["conversations"] == 1 and res["questions"] == 3
    rows = json.loads(out.read_text(encoding="utf-8"))  # every question's ranking, which the recall is read from
    assert [r["conversation"] for r in rows] == ["tiny.json"] * 3
    for system in ("ombre", "dense", "bm25"):
        hits = [len(set(r[system][:3]) & set(r["wanted"])) / len(r["wanted"]) for r in rows]
        assert all(len(r[system]) <= 3 for r in rows)
        assert round(100 * sum(hits) / len(hits), 2) == res["systems"][system]["overall"]["recall@3"]
    assert res["dropped_evidence"] == 1  # D9:9 names no turn
    assert set(res["systems"]) == {"ombre", "dense", "bm25"}
    for r in res["systems"].values():
        assert set(r) == {"overall", "by_category", "ms_per_query"}
        assert set(r["overall"]) == {"recall@1", "recall@3"}
        assert set(r["by_category"]) == {"1", "2", "4"}
        assert all(0 <= v <= 100 for v in r["overall"].values()) and r["ms_per_query"] >= 0
    # Every question names a rare word of its one turn: exact-word retrieval finds all three first.
    assert res["systems"]["bm25"]["overall"]["recall@1"] == 100.0
    assert res["systems"]["ombre"]["overall"]["recall@3"] == 100.0


def test_eval_recall_json_on_tiny_data(tmp_path, capsys):
    (tmp_path / "tiny.yaml").write_text(
        "memories:\n"
        "  m1: 阿哲养了一只边牧，叫豆包，周末带它去公园接飞盘。\n"
        "  m2: 阿哲对花生过敏，外卖都要备注不放花生。\n"
        "  m3: 阿哲在学吉他，现在能弹《晴天》的前奏了。\n"
        "queries:\n"
        "  - {q: 我家的边牧叫什么, want: [m1]}\n"
        "  - {q: 点外卖要备注什么, want: [m2]}\n"
        "  - {q: 我吉他练得怎么样, want: [m3, m1]}\n", encoding="utf-8")
    res = _run_json(capsys, ["eval", "recall", "--data", str(tmp_path / "tiny.yaml"), "--json"])
    assert res["queries"] == 3 and set(res["systems"]) == {"ombre", "dense", "bm25"}
    for r in res["systems"].values():
        assert {"hit@1", "hit@3", "hit@5", "mrr"} <= set(r)
        assert r["hit@1"] <= r["hit@3"] <= r["hit@5"] <= 100 and 0 <= r["mrr"] <= 1
        assert r["hit@3"] == 100.0  # three memories: any ranking of all of them hits by 3
    assert res["systems"]["ombre"]["hit@1"] == 100.0


def test_eval_refuses_missing_data(tmp_path, capsys):
    assert cli.main(["eval", "locomo", "--data", str(tmp_path), "--json"]) == 2
    assert cli.main(["eval", "recall", "--data", str(tmp_path / "none.yaml")]) == 2
    assert cli.main(["eval", "locomo", "--data", str(tmp_path), "--k", "5,x"]) == 2
    assert "error" in capsys.readouterr().err


def test_outside_scripts_keep_their_imports(brain):
    """Evaluation scripts outside the repo import these names from ombre_brain.evaluate."""
    from ombre_brain.evaluate import Memory, Rankers, load_locomo, memory_bucket, parse_locomo_time

    assert callable(load_locomo) and parse_locomo_time("1:56 pm on 8 May, 2023").year == 2023
    items = [memory_bucket("ev:x", Memory(f"m{i}", f"memory number {i} about kites", "2026-01-01T00:00:00+00:00"), 200)
             for i in range(3)]
    ids = brain.write_many(items, dedupe=False)
    assert ids == ["m0", "m1", "m2"]
    assert Rankers(brain, "ev:x").bm25("kites", 3)
