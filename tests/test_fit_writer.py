"""`fit-writer`: labelled exchanges in either format, cross-validated figures, weights the writer then loads."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ombre_brain import Brain
from ombre_brain.errors import ValidationError
from ombre_brain.evaluate.fit_writer import fit_writer, format_fit, load_labelled
from ombre_brain.writing.model import load_model

KEEP = ["我在杭州做前端", "我养了一只猫叫年糕", "我对花生过敏", "my sister lives in Denver",
        "I work night shifts as a nurse", "我妈下周做手术", "I broke up with my girlfriend last week",
        "我最喜欢的歌手是陈奕迅", "i'm a vegetarian", "我家狗叫元宝"]
NOISE = ["哈哈哈", "早安", "你在干嘛呀？", "thanks!", "lol ok", "what's the weather like?", "晚安～", "帮我写首诗",
         "good morning", "嗯嗯好的"]


@pytest.fixture
def labelled(tmp_path):
    items = [{"id": f"k{i}", "lang": "en" if t.isascii() else "zh", "user": t, "assistant": "嗯嗯",
              "write": {"user": "stable_boundary"}, "keys": [t[:2]], "kind": "fact"} for i, t in enumerate(KEEP)]
    items += [{"id": f"n{i}", "lang": "en" if t.isascii() else "zh", "user": t, "assistant": "嗯嗯", "write": "none",
               "kind": "noise"} for i, t in enumerate(NOISE)]
    items[0]["context"] = [{"role": "assistant", "content": "你在哪工作呀？"}]
    p = tmp_path / "mine.yaml"
    p.write_text(json.dumps({"exchanges": items}, ensure_ascii=False), encoding="utf-8")
    return p


def test_both_formats_load_with_their_labels_and_groups(labelled, tmp_path):
    ex = load_labelled(labelled)
    assert len(ex) == 20 and ex[0].text.asked == "你在哪工作呀？" and ex[0].user_layer == "stable_boundary"
    assert {e.lang for e in ex} == {"zh", "en"} and len({e.group for e in ex}) == 20
    conv = tmp_path / "conv.yaml"
    conv.write_text(json.dumps({"conversations": [{"id": "c1", "sessions": [{"at": "2026-01-01T10:00:00+08:00",
        "exchanges": [{"user": "你好", "assistant": "你好呀，在哪上班？", "write": "none"},
                      {"user": "在杭州", "assistant": "好地方", "write": {"user": "stable_boundary",
                                                                      "relationship": "relationship_lesson"}}]}]}]},
        ensure_ascii=False), encoding="utf-8")
    a, b = load_labelled(conv)
    assert (b.text.asked, b.user_layer, b.relationship, a.group == b.group) == ("你好呀，在哪上班？", "stable_boundary",
                                                                                True, True)
    bad = tmp_path / "bad.yaml"
    bad.write_text('{"exchanges": [{"user": "x", "write": {"user": "favourite"}}]}', encoding="utf-8")
    with pytest.raises(ValidationError, match="favourite"):
        load_labelled(bad)


def test_the_fit_reports_cross_validated_figures_and_writes_a_model_the_writer_loads(labelled, tmp_path):
    res = fit_writer([labelled], blocks=("e5", "signals"), model_id="mine", folds=4, out=tmp_path / "models")
    cv = res["cv"]
    assert res["examples"] == 20 and set(cv["per_language"]) == {"zh", "en"}
    assert cv["overall"]["write_recall"]["n"] == 10 and cv["overall"]["noise_kept_out"]["n"] == 10
    assert set(cv["per_label"]) == {"none", "stable_boundary", "short_state", "process_event", "relationship_lesson"}
    assert cv["p_keep"]["auc"] > 0.5 and set(cv["threshold_sweep"]) == {"0.3", "0.4", "0.5", "0.6", "0.7"}
    text = format_fit(res)
    assert "write recall" in text and "| zh |" in text and "AUC" in text and "wrote" in text
    model = load_model("mine", tmp_path / "models")
    assert model.blocks == ("e5", "signals") and model.card["trained_on"] == {"mine.yaml": 20}
    cfg = {"writer": {"model": {"id": "mine", "path": str(tmp_path / "models")}}}
    with Brain.open(tmp_path / "data", cfg) as brain:
        brain.ingest_exchange("haven:x", "s", [{"role": "user", "content": "我养了一只狗叫可乐"}], "好可爱")
        (job,) = brain.gateway.jobs.list(("done",))
        assert job["result"]["extractor"] == "model"


def test_the_command_refuses_unknown_blocks_and_dry_runs(labelled):
    run = [sys.executable, "-m", "ombre_brain.cli", "fit-writer", "--data", str(labelled)]
    r = subprocess.run([*run, "--blocks", "words"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 2 and "--blocks" in r.stderr
    r = subprocess.run([*run, "--blocks", "signals", "--dry-run", "--json", "--folds", "3"], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["written"] is None and res["blocks"] == ["signals"]
