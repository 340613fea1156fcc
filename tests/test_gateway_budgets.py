"""Gateway assembly: stable first, fixed dynamic order, per-section and total budgets, trims explained."""

from __future__ import annotations

import pytest

from ombre_brain import Brain
from ombre_brain.demo.seed import seed_persona
from ombre_brain.turn.budget import estimate_tokens

SPACE = "haven:xiaoyu"
ORDER = ["recent_context", "context_mode", "recalled_memory", "diffused_memory", "persona_state",
         "relationship_weather", "favorite_memory", "dream"]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    b = Brain.open(tmp_path_factory.mktemp("demo"), {"identity": {"ai_name": "Haven", "user_name": "Xiaoyu"}})
    seed_persona(b)
    yield b
    b.close()


def _tiny(demo, **budgets):
    cfg = {"identity": {"ai_name": "Haven"}, "gateway": {"budgets": budgets,
                                                          "persona_state": "Haven listens first. " * 20}}
    return Brain.open(demo.path, cfg)


QUERIES = ["还记得我们去海边那次吗", "最近我们都聊了些什么", "你最喜欢我们之间的哪一段回忆",
           "我们以前是不是因为搬家吵过架",
           "do you remember the trip to Kyoto", "还记得在京都的那几天吗"]


@pytest.mark.parametrize("query", QUERIES)
def test_tiny_budgets_hold_per_section_and_in_total(demo, query):
    budgets = {"total": 90, "recalled_memory": 40, "diffused_memory": 15, "recent_context": 20,
               "relationship_weather": 15, "favorite_memory": 30, "dream": 20, "persona_state": 12, "context_mode": 25}
    with _tiny(demo, **budgets) as b:
        turn = b.turn(SPACE, "tiny", query, now=None, dry_run=True)
        total = 0
        for sec in turn.sections:
            used = sum(estimate_tokens(i.text) for i in sec.items)
            assert used <= budgets[sec.key], (sec.key, used)
            total += used
        assert total <= budgets["total"]
        for s in turn.suppressed:
            if s.reason.startswith("budget"):
                assert s.runtime_gate["reason"] == s.reason and s.runtime_gate["decision"] == "suppressed"


def test_trims_are_recorded_with_a_budget_reason(demo):
    full = demo.turn(SPACE, "t", "还记得我们去海边那次吗", dry_run=True)
    assert full.section("recalled_memory") is not None
    with _tiny(demo, total=30, recalled_memory=12, diffused_memory=1) as b:
        turn = b.turn(SPACE, "t", "还记得我们去海边那次吗", dry_run=True)
        reasons = {s.reason for s in turn.suppressed}
        direct = full.section("recalled_memory").items
        kept = turn.section("recalled_memory")
        if kept is not None:
            # a single direct hit larger than its budget is cut, never dropped whole
            assert kept.items[0].bucket_id == direct[0].bucket_id
        assert reasons & {"budget_section", "budget_total", "budget_cut_to_moment"} or kept is not None
        dropped = {i.bucket_id for sec in full.sections for i in sec.items if i.bucket_id} - set(turn.item_ids())
        sup_ids = {s.bucket_id for s in turn.suppressed if s.reason.startswith("budget")}
        assert dropped <= sup_ids, "every item the budget removed shows in suppressed with a budget reason"


def test_sections_come_in_the_fixed_order_and_persona_state_renders(demo):
    with Brain.open(demo.path, {"gateway": {"persona_state": "Haven never lectures.",
                                            "weather_max_age_hours": 0}}) as b:
        turn = b.turn(SPACE, "order", "还记得我们去海边那次吗", dry_run=True)
        keys = [s.key for s in turn.sections]
        assert keys == [k for k in ORDER if k in keys]
        assert "persona_state" in keys and "Haven never lectures." in turn.rendered
        assert turn.rendered.index("## Recalled Memory") < turn.rendered.index("## Persona State")


def test_core_memory_is_stable_only_and_off_by_default(demo):
    turn = demo.turn(SPACE, "core", "还记得我们去海边那次吗", dry_run=True)
    assert turn.section("core_memory") is None
    with Brain.open(demo.path, {"gateway": {"budgets": {"core_memory": 200}}}) as b:
        t2 = b.turn(SPACE, "core", "还记得我们去海边那次吗", dry_run=True)
        core = t2.section("core_memory")
        assert core is not None and t2.stable[0].key == "core_memory"
        assert all(i.shape == "stable_rule" for i in core.items)
        recalled = set(t2.item_ids("recalled_memory"))
        assert not recalled & {i.bucket_id for i in core.items}
        assert t2.rendered.index("## Core Memory") < t2.rendered.index("## Recalled Memory")


def test_unknown_line_for_a_lookup_with_no_support(demo):
    turn = demo.turn(SPACE, "u", "你还记得我小时候养的那只鹦鹉叫什么名字吗", dry_run=True)
    rec = turn.section("recalled_memory")
    assert rec is not None and rec.items[0].shape == "note" and rec.items[0].bucket_id is None
    assert "UNKNOWN — no supporting memory found." in turn.rendered


def test_an_item_appears_in_at_most_one_section(demo):
    for q in QUERIES:
        turn = demo.turn(SPACE, "once", q, dry_run=True)
        ids = turn.item_ids()
        assert len(ids) == len(set(ids)), (q, ids)
