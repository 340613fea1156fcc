"""The demo persona, asked as a new user would: paraphrases and English questions recall, absent topics do not.

tests/data/demo_en_questions.yaml was written before the admission score was fitted and is not used
to fit it; it runs through real turns on the seeded demo (no edits to the persona, no word lists).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

DATA = yaml.safe_load((Path(__file__).parent / "data" / "demo_en_questions.yaml").read_text(encoding="utf-8"))
SPACE = "haven:xiaoyu"
MEMORY = ("recalled_memory", "diffused_memory")


def _injected(brain, session: str, query: str) -> tuple[list[str], str]:
    """What the turn recalls for the question: Recalled or Diffused Memory, or a profile line the turn says answers
    it or reached from what it recalled (every stable line is in the profile on every turn: only those count)."""
    t = brain.turn(SPACE, session, query, dry_run=True)
    profile = t.section("profile")
    answers = [i.bucket_id for i in (profile.items if profile else ())
               if i.extra.get("answers") or i.extra.get("related")]
    return [b for k in MEMORY for b in t.item_ids(k)] + answers, t.rendered


def test_the_beach_trip_is_recalled_from_the_sea_memory(demo_brain):
    ids, rendered = _injected(demo_brain, "demo-beach", "do you remember the beach trip?")
    assert "sea_sunrise" in ids, rendered
    assert "UNKNOWN" not in rendered


def test_the_parrot_nobody_mentioned_stays_unknown(demo_brain):
    ids, rendered = _injected(demo_brain, "demo-parrot", "你还记得我小时候养的那只鹦鹉叫什么名字吗")
    assert ids == [] and "UNKNOWN — no supporting memory found." in rendered


def test_english_questions_about_chinese_memories(demo_brain):
    missed = []
    for i, q in enumerate(DATA["questions"]):
        ids, _ = _injected(demo_brain, f"demo-en-{i}", q["q"])
        if not set(ids) & set(q["want"]):
            missed.append((q["q"], ids))
    passed = len(DATA["questions"]) - len(missed)
    assert passed >= 10, f"{passed} of {len(DATA['questions'])} recalled; missed: {missed}"


@pytest.mark.parametrize("query", DATA["absent"])
def test_absent_topics_inject_nothing(demo_brain, query):
    ids, rendered = _injected(demo_brain, f"demo-absent-{query}", query)
    assert ids == [], (query, ids)
