"""Extension points: a gate and an admission feature are each one registry entry, and nothing else.

A toy gate and a toy feature are added here through their registries alone, then seen where a user
sees decisions: the TURN's ``runtime_gate``, the reason texts and the debug JSON of a real server.
A config fitted before the toy feature existed still loads and decides exactly as before.
"""

from __future__ import annotations

import httpx
import pytest

from ombre_brain import Brain
from ombre_brain.errors import ConfigError
from ombre_brain.recall_types import GateResult
from ombre_brain.retrieval.features import FEATURES, Feature
from ombre_brain.turn.gate_registry import GateSpec
from ombre_brain.turn.gate_table import GATES, REASONS, describe

from .conftest import LiveServer

SPACE = "haven:xiaoyu"
QUERY = "还记得我们在海边的时候吗"
NOW = "2026-12-01T21:00:00+08:00"

TOY_GATE = GateSpec(
    "toy_gate", frozenset({"direct"}),
    fn=lambda x: GateResult(False, "toy_refused") if "toy" in x.bucket.tags else GateResult(True, "toy_welcome"),
    reasons={"toy_refused": "the toy gate keeps out memories tagged toy", "toy_welcome": "the toy gate lets it by"})

TOY_FEATURE = Feature("toy_title_chars", lambda x: len(x.c.bucket.title) / 10.0, frozenset(),
                      "how long the memory's title is (a toy)")


@pytest.fixture
def seeded(tmp_path):
    # the reader off: these tests are about the registries under admission as design §13 (the reader would keep the
    # sand bucket out of "还记得我们在海边的时候吗" as a near miss, leaving the toy gate nothing to refuse)
    with Brain.open(tmp_path / "data", {"identity": {"ai_name": "Haven", "user_name": "Xiaoyu"},
                                        "retrieval": {"reader": {"id": None}}}) as b:
        b.write(space=SPACE, id="sea", title="一起去海边看日出", body="我们凌晨四点起床，去海边看日出。", tags=["海边"],
                created="2026-10-01T08:00:00+08:00")
        b.write(space=SPACE, id="toy", title="海边的玩具沙桶", body="在海边捡到一个红色的沙桶。", tags=["海边", "toy"],
                created="2026-10-02T08:00:00+08:00")
        for i, (t, body) in enumerate([("学游泳", "夏天在泳池学会了换气。"), ("第一次做蛋糕", "蛋糕塌了但很好吃。"),
                                       ("搬家", "搬到了城东的新公寓。"), ("外婆的生日", "给外婆买了一束向日葵。")]):
            b.write(space=SPACE, id=f"o{i}", title=t, body=body, created="2026-09-01T08:00:00+08:00")
        yield b


def _admissions(turn) -> dict:
    d = turn.to_dict()
    out = {}
    for s in d["sections"]:
        for it in s["items"]:
            if it["bucket_id"]:
                out[it["bucket_id"]] = it["runtime_gate"]["direct_seed"]
    for s in d["suppressed"]:
        out.setdefault(s["bucket_id"], s["runtime_gate"]["direct_seed"])
    return out


def test_a_toy_gate_is_one_registry_entry(seeded):
    assert "toy_gate" not in GATES.names
    before = seeded.turn(SPACE, "s0", QUERY, now=NOW, dry_run=True)
    assert "toy" in before.item_ids("recalled_memory")
    with GATES.added(TOY_GATE):
        assert GATES.names[-1] == "toy_gate"
        assert describe("toy_refused") == "the toy gate keeps out memories tagged toy" and "toy_welcome" in REASONS
        turn = seeded.turn(SPACE, "s1", QUERY, now=NOW, dry_run=True)
        d = turn.to_dict()
        recalled = turn.item_ids("recalled_memory")
        assert "sea" in recalled and "toy" not in recalled
        kept_out = {s["bucket_id"]: s for s in d["suppressed"]}
        assert kept_out["toy"]["reason"] == "toy_refused"
        assert kept_out["toy"]["runtime_gate"]["toy_gate"] == {"allowed": False, "reason": "toy_refused"}
        sea = next(it for s in d["sections"] for it in s["items"] if it["bucket_id"] == "sea")
        assert sea["runtime_gate"]["toy_gate"] == {"allowed": True, "reason": "toy_welcome"}
        server = LiveServer(seeded)
        try:
            with httpx.Client(base_url=server.url, timeout=60) as c:
                r = c.get("/api/recall-debug", params={"space": SPACE, "q": QUERY})
                assert r.status_code == 200
                rows = {b["bucket_id"]: b for b in r.json()["candidates"]}
                assert rows["toy"]["runtime_gate"]["toy_gate"]["reason"] == "toy_refused"
                page = c.get("/debug/", params={"space": SPACE, "q": QUERY})
                assert page.status_code == 200 and "the toy gate keeps out memories tagged toy" in page.text
        finally:
            server.close()
    assert "toy_gate" not in GATES.names and "toy_refused" not in REASONS
    after = seeded.turn(SPACE, "s2", QUERY, now=NOW, dry_run=True)
    sea = next(it for s in after.to_dict()["sections"] for it in s["items"] if it["bucket_id"] == "sea")
    assert "toy_gate" not in sea["runtime_gate"] and "toy" in after.item_ids("recalled_memory")


def test_a_gate_entry_is_checked_when_registered():
    with pytest.raises(ValueError, match="already"):
        GATES.register(GateSpec("cooldown", frozenset({"direct"}), fn=lambda x: None, reasons={}))
    with pytest.raises(ValueError, match="already have a text"):
        GATES.register(GateSpec("dup_reason", frozenset({"direct"}), fn=lambda x: None, reasons={"fresh": "x"}))
    with pytest.raises(ValueError, match="unknown stage"):
        GateSpec("bad_stage", frozenset({"lunch"}), fn=lambda x: None, reasons={})


def test_a_toy_feature_leaves_a_model_fitted_before_it_unchanged(seeded, tmp_path):
    before = _admissions(seeded.turn(SPACE, "f0", QUERY, now=NOW, dry_run=True))
    assert any(v.get("evidence") is not None for v in before.values()), "the default model weighs candidates"
    with FEATURES.added(TOY_FEATURE):
        assert "toy_title_chars" in FEATURES.names
        same = _admissions(seeded.turn(SPACE, "f1", QUERY, now=NOW, dry_run=True))
        assert same == before  # the shipped model was fitted without it: the same evidence, the same features

        # a model fitted with it names it; its weight now counts, and the debug JSON shows it
        model_id = seeded.admitter.model_key()
        shipped = seeded.config.retrieval.admission.models[model_id]
        overlay = {"retrieval": {"reader": {"id": None}, "admission": {"models": {model_id: {
            "features": [*shipped.feature_names, "toy_title_chars"],
            "weights": {**shipped.weights, "toy_title_chars": -40.0}}}}}}
        with Brain.open(seeded.path, seeded.config.raw | overlay) as toyed:
            got = _admissions(toyed.turn(SPACE, "f2", QUERY, now=NOW, dry_run=True))
            weighed = [v for v in got.values() if v.get("evidence") is not None]
            assert weighed and all("toy_title_chars" in v["features"] for v in weighed)
            long_titles = [v for v in weighed if v["features"]["toy_title_chars"] >= 0.4]
            assert long_titles and all(v["evidence"] < 0.01 for v in long_titles)  # 4+ characters weigh -16 or less
            server = LiveServer(toyed)
            try:
                r = httpx.get(f"{server.url}/api/recall-debug", params={"space": SPACE, "q": QUERY}, timeout=60)
                feats = [b["runtime_gate"]["direct_seed"].get("features", {}) for b in r.json()["candidates"]]
                assert any("toy_title_chars" in f for f in feats)
            finally:
                server.close()

        # a model that says it was fitted on a feature but carries no weight for it is refused, by key
        broken = {"retrieval": {"admission": {"models": {"m": {"features": ["lexical", "toy_title_chars"],
                                                               "weights": {"lexical": 1.0}}}}}}
        with pytest.raises(ConfigError, match="retrieval.admission.models.m.weights"):
            Brain.open(tmp_path / "other", broken)
    with pytest.raises(ConfigError, match="unknown feature 'toy_title_chars'"):
        Brain.open(tmp_path / "other2", {"retrieval": {"admission": {"models": {"m": {
            "weights": {"toy_title_chars": 1.0}}}}}})
