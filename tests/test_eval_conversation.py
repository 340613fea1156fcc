"""`eval conversation`: the loop over a small labelled chat of our own, both with the write decision and the labels."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ombre_brain.errors import ValidationError
from ombre_brain.evaluate.conversation import eval_conversation, format_conversation, load_conversations

CHAT = """\
conversations:
  - id: t1
    user_name: 阿柚
    ai_name: 星星
    sessions:
      - at: "2026-04-02T21:00:00+08:00"
        exchanges:
          - user: "哈哈好吧"
            assistant: "嘿嘿"
            write: none
          - user: "我在成都当护士，三班倒"
            assistant: "护士太辛苦了。"
            write: {user: stable_boundary}
            keys: ["护士"]
      - at: "2026-04-15T22:10:00+08:00"
        exchanges:
          - user: "你还记得我是做护士的吗"
            assistant: "记得，成都的护士。"
            write: none
            recall: ["护士"]  # direct
          - user: "我跟你说过我弟在哪读书吗"
            assistant: "没提过呢。"
            write: none
            recall: none  # nearmiss
"""


@pytest.fixture
def chat(tmp_path):
    p = tmp_path / "chat.yaml"
    p.write_text(CHAT, encoding="utf-8")
    return p


def test_the_file_loads_with_kinds_from_the_comments(chat):
    (conv,) = load_conversations(chat)
    ex = [e for s in conv.sessions for e in s.exchanges]
    assert (conv.user_name, len(conv.sessions), len(ex)) == ("阿柚", 2, 4)
    assert ex[1].write == {"user": "stable_boundary"} and ex[1].keys == ("护士",)
    assert (ex[2].recall, ex[2].kind, ex[3].recall, ex[3].kind) == (("护士",), "direct", (), "nearmiss")


def test_oracle_writes_store_the_labels_and_the_lookup_recalls_them(chat):
    res = eval_conversation(chat, oracle_writes=True, progress=False)
    assert res["write_recall"] == {"n": 1, "ok": 1, "pct": 100.0}
    assert res["noise_kept_out"]["ok"] == 3 and res["layer_accuracy"]["ok"] == 1
    assert res["turn_recall"]["ok"] == 1 and res["turn_recall_by_kind"]["direct"]["ok"] == 1
    assert res["false_recall"] == {"n": 1, "ok": 0, "pct": 0.0}
    text = format_conversation(res)
    assert "turn recall | 100.0% (1/1)" in text and "oracle-writes" in text


def test_the_command_prints_json_with_every_failure(chat):
    out = subprocess.run([sys.executable, "-m", "ombre_brain.cli", "eval", "conversation", "--data", str(chat),
                          "--json"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)
    checks = {f["check"] for f in res["failures"]}
    assert res["noise_kept_out"]["n"] == 3 and res["write_recall"]["n"] == 1
    # whatever the write decision did, each miss is listed with what was written or injected
    assert (res["write_recall"]["ok"] == 1) == ("write recall" not in checks)
    assert all("user" in f and "conversation" in f for f in res["failures"])


def test_a_bad_label_names_its_place(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text(CHAT.replace("write: {user: stable_boundary}", "write: {user: favourite}"), encoding="utf-8")
    with pytest.raises(ValidationError, match=r"exchanges\[1\].*write.user: favourite"):
        load_conversations(p)


def test_the_llm_extractor_runs_the_loop_too(chat, standin):
    standin.extraction = {"user": {"layer": "stable_boundary", "title": "成都护士", "body": "我在成都当护士，三班倒"},
                          "relationship": None}
    cfg = {"ingest": {"extractor": "llm"}, "upstream": {"base_url": standin.url, "model": "x", "retries": 0}}
    res = eval_conversation(chat, config=cfg, progress=False)
    assert len(standin.extractor_requests()) == 4  # every exchange asked the stand-in upstream
    assert res["write_recall"] == {"n": 1, "ok": 1, "pct": 100.0} and res["layer_accuracy"]["ok"] == 1


CHANGED = """\
conversations:
  - id: t2
    user_name: Sam
    ai_name: Haven
    sessions:
      - at: "2026-04-02T21:00:00+08:00"
        exchanges:
          - user: "I work as a baker at Crumbs"
            assistant: "Early mornings then!"
            write: {user: stable_boundary}
            keys: ["baker"]
          - user: "we had a huge fight with my flatmate Jo about the dishes"
            assistant: "Ugh, sorry."
            write: {user: process_event}
            keys: ["Jo"]
          - user: "where do I work now"
            assistant: "At the library."
            write: none
            recall: ["library"]  # direct updated
            stale: ["Crumbs"]
"""


def _turn(*sections):
    from types import SimpleNamespace

    from ombre_brain.recall_types import Item, SectionOut
    out = [SectionOut(key, key, tuple(Item(bid, None, "bucket_original", text, "x", {}, {}, extra=extra)
                                      for bid, text, extra in items)) for key, items in sections]
    return SimpleNamespace(stable=[s for s in out if s.key == "profile"],
                           sections=[s for s in out if s.key != "profile"], plan=None, suppressed=[])


def test_stale_counts_an_old_value_shown_as_current_and_not_one_marked_as_history(tmp_path):
    from ombre_brain.evaluate.conversation import Scores, _score_turn, memory_chars, wanted_layer
    p = tmp_path / "changed.yaml"
    p.write_text(CHANGED, encoding="utf-8")
    (conv,) = load_conversations(p)
    q = conv.sessions[0].exchanges[2]
    assert (q.kind, q.updated, q.stale) == ("direct", True, ("Crumbs",))
    current = _turn(("profile", [("b2", "I started at the library", {}), ("b1", "I work as a baker at Crumbs", {})]))
    history = _turn(("profile", [("b2", "I started at the library", {})]),
                    ("recalled_memory", [("b1", "I work as a baker at Crumbs", {"superseded_by": "b2"})]))
    scores = Scores()
    _score_turn(current, q, {}, scores, "stable_boundary")
    _score_turn(history, q, {}, scores, "stable_boundary")
    assert scores.stale.to_dict() == {"n": 2, "ok": 1, "pct": 50.0}  # ok counts the stale turns
    assert scores.turn_recall.ok == 2 and scores.hit_source == {"profile": 2}
    assert memory_chars(history) == len("I started at the library") + len("I work as a baker at Crumbs")
    said = [(e.user, e.write) for e in conv.sessions[0].exchanges if e.write]
    assert wanted_layer(said, ("Jo",)) == "process_event" and wanted_layer(said, ("Mars",)) == "unknown"


def test_the_report_has_the_new_columns(chat):
    res = eval_conversation(chat, oracle_writes=True, progress=False)
    assert res["memory_chars_per_turn"]["n"] == 4 and res["turn_recall_by_layer"]["stable_boundary"]["ok"] == 1
    assert res["episodes"] == {"n": 0, "ok": 0, "pct": None} and res["stale"]["n"] == 0
    text = format_conversation(res)
    assert "memory characters per turn | median" in text and "hits by section:" in text
