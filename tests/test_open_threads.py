"""Open threads and answers asked again (design §5, §14): what a companion brings back without being asked, and what it
shows when asked a second time inside a cooldown."""

from __future__ import annotations

import pytest

from ombre_brain import Brain
from ombre_brain.config import load_config
from ombre_brain.recall_policy import plan_query

SPACE = "haven:cass"
MAY = "2026-05-{:02d}T21:{:02d}:00+00:00"


@pytest.fixture
def cass(tmp_path):
    with Brain.open(tmp_path / "data", {"identity": {"ai_name": "Wren", "user_name": "Cass"}}) as b:
        yield b


def episode(brain, bid, text, day, layer="process_event"):
    brain.write(SPACE, id=bid, title=text[:20], body=text, created=MAY.format(day, 0), memory_layer=layer,
                memory_subject="event" if layer == "process_event" else "user")


def recent(turn) -> dict[str, str]:
    sec = turn.section("recent_context")
    return {i.bucket_id: i.runtime_gate["recent_context"]["reason"] for i in sec.items} if sec else {}


def test_on_reentry_the_newest_open_episode_comes_back(cass):
    episode(cass, "pottery", "first pottery class was thursday, i made a lopsided bowl", 1)
    episode(cass, "mri", "went back to urgent care, they referred me for an MRI on the 24th for the shoulder", 10)
    episode(cass, "surgery", "爸爸下周三做膝盖手术，我要回去陪他", 2)
    cass.turn(SPACE, "s1", "night!", MAY.format(10, 5))
    back = cass.turn(SPACE, "s2", "results are in", MAY.format(25, 0))
    assert recent(back) == {"mri": "open_thread"} and "MRI" in back.rendered  # the newest open one only
    assert back.rendered.count("MRI on the 24th") == 1  # the thread whole, not again as the profile's line
    mri = next(e for e in back.debug["profile"].to_dict()["entries"] if e["id"] == "mri")
    assert (mri["reason"], mri["section"]) == ("in_recent_context", "recent_context")
    again = cass.turn(SPACE, "s2", "anyway what should i cook tonight", MAY.format(25, 1))
    assert "mri" not in recent(again)  # a re-entry's, not every turn's


def test_an_episode_that_points_nowhere_a_stale_one_or_a_fact_is_no_thread(cass):
    episode(cass, "bowl", "first pottery class was great, i made a lopsided bowl", 20)
    episode(cass, "old", "my interview at Halverson is on monday, so nervous", 1)  # 24 days before: past the window
    episode(cass, "fact", "i'm allergic to tree nuts, my epipen appointment is next week", 20, layer="stable_boundary")
    cass.turn(SPACE, "s1", "night!", MAY.format(20, 5))
    back = cass.turn(SPACE, "s2", "hey", MAY.format(25, 0))
    assert not set(recent(back)) & {"bowl", "old", "fact"}


def test_open_threads_can_be_turned_off(tmp_path):
    with Brain.open(tmp_path / "data", {"gateway": {"open_thread_days": 0}}) as b:
        episode(b, "mri", "they referred me for an MRI on the 24th", 10)
        b.turn(SPACE, "s1", "night!", MAY.format(10, 5))
        assert "mri" not in recent(b.turn(SPACE, "s2", "results are in", MAY.format(25, 0)))


@pytest.mark.parametrize("message", ["wait, remind me what Romilly does for work", "元宝是哪天生日来着，医生问我",
                                     "what does my cousin do again"])
def test_a_message_that_asks_to_be_reminded_is_a_lookup(message):
    assert plan_query(message, load_config()).context_mode == "memory_lookup"


def test_asked_again_inside_a_cooldown_shows_the_part_that_answers(cass):
    text = ("also my cousin Romilly texted out of nowhere, first time in years. she moved to Boise last spring. "
            "she's a park ranger there now, which fits her completely.")
    episode(cass, "rom", text, 2)
    q = "what does Romilly do for work again"
    first = cass.turn(SPACE, "s", q, MAY.format(20, 0))
    assert "rom" in first.item_ids("recalled_memory")
    ctx = [{"role": "user", "content": q}, {"role": "assistant", "content": "She's a park ranger."}]
    cass.turn(SPACE, "s", "ok cool. how was your day", MAY.format(20, 1), context=ctx)
    ctx += [{"role": "user", "content": "ok cool. how was your day"}, {"role": "assistant", "content": "Quiet!"}]
    again = cass.turn(SPACE, "s", "wait, remind me what Romilly does for work", MAY.format(20, 2), context=ctx)
    item = next(i for i in again.section("recent_context").items if i.bucket_id == "rom")
    assert item.shape == "asked_window" and "park ranger" in item.text and "UNKNOWN" not in again.rendered
