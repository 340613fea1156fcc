"""Issue 35: a pinned memory that answers an explicit lookup reaches the turn, in Core Memory (design §4).

Core memory is never a direct hit (the layer table: direct_seed ``explicit_or_interval``), so before
this a pinned allergy could not answer "what am I allergic to" at all while
``gateway.budgets.core_memory`` was 0, its default, and MCP ``breath_search("过敏")`` listed it as
kept out. Now a lookup it answers shows it in the stable Core Memory section, within the small
``gateway.budgets.core_memory_lookup`` budget, used only on such a turn.
"""

from __future__ import annotations

import anyio
from mcp import Client

from ombre_brain import Brain
from ombre_brain.mcp.access import Access
from ombre_brain.mcp.server import build_server

SPACE = "haven:xiaoyu"
ANSWERS = "core_memory_answers_lookup"


def seeded(path, config=None) -> tuple[Brain, str]:
    brain = Brain.open(path, config or {})
    allergy = brain.write(space=SPACE, title="过敏", body="小雨对花生过敏，推荐吃的时候先排除花生。", pinned=True)
    for i, (title, body) in enumerate([("公园", "我们周末去公园散步。"), ("电影", "一起看了千与千寻。"),
                                       ("火锅", "在重庆吃了很辣的火锅。")]):
        brain.write(space=SPACE, title=title, body=body, importance=5 + i)
    return brain, allergy


def where(turn, bucket_id: str) -> list[str]:
    return [s.key for s in (*turn.stable, *turn.sections) for i in s.items if i.bucket_id == bucket_id]


def test_a_pinned_memory_answers_a_lookup_in_core_memory_never_in_recalled_memory(tmp_path):
    brain, allergy = seeded(tmp_path / "data")
    try:
        for query in ("我对什么过敏来着？", "你还记得我对什么过敏吗", "what am I allergic to? 过敏"):
            turn = brain.turn(SPACE, "s1", query, dry_run=True)
            assert where(turn, allergy) == ["core_memory"], (query, turn.to_dict()["sections"])
            item = turn.section("core_memory").items[0]
            assert item.runtime_gate["reason"] == ANSWERS and item.shape == "stable_rule"
            assert allergy not in {s.bucket_id for s in turn.suppressed}  # shown, so not listed as kept out
            assert "UNKNOWN" not in turn.rendered and "花生过敏" in turn.rendered
        casual = brain.turn(SPACE, "s1", "今天天气真好", dry_run=True)
        assert casual.section("core_memory") is None  # only a lookup it answers: core_memory is still 0
        named = brain.turn(SPACE, "s1", "晚饭吃花生酱吧", dry_run=True)  # about it, but not a lookup
        assert where(named, allergy) == []
    finally:
        brain.close()


def test_the_lookup_budget_is_used_only_then_and_can_be_turned_off(tmp_path):
    brain, allergy = seeded(tmp_path / "small", {"gateway": {"budgets": {"core_memory_lookup": 5}}})
    try:
        turn = brain.turn(SPACE, "s1", "我对什么过敏来着？", dry_run=True)
        assert where(turn, allergy) == []  # the section's budget governs it, as any section's does
        assert "budget_section" in [s.reason for s in turn.suppressed if s.bucket_id == allergy]
    finally:
        brain.close()
    brain, allergy = seeded(tmp_path / "off", {"gateway": {"budgets": {"core_memory_lookup": 0}}})
    try:
        turn = brain.turn(SPACE, "s1", "我对什么过敏来着？", dry_run=True)
        assert where(turn, allergy) == [] and turn.section("core_memory") is None
        assert ANSWERS in [s.reason for s in turn.suppressed if s.bucket_id == allergy]
    finally:
        brain.close()
    brain, allergy = seeded(tmp_path / "every", {"gateway": {"budgets": {"core_memory": 300}}})
    try:  # Core Memory on every turn: the answer ranks first
        brain.write(space=SPACE, title="称呼", body="叫她小雨，不叫全名。", pinned=True, importance=10)
        turn = brain.turn(SPACE, "s1", "我对什么过敏来着？", dry_run=True)
        assert [i.bucket_id for i in turn.section("core_memory").items][0] == allergy
        assert len(turn.section("core_memory").items) == 2
    finally:
        brain.close()


def test_breath_search_finds_a_pinned_memory(tmp_path):
    brain, allergy = seeded(tmp_path / "data")
    server = build_server(brain, space=SPACE, stdio=Access("*"))

    async def go():
        async with Client(server.server) as client:
            return await client.call_tool("breath_search", {"query": "过敏"})

    try:
        r = anyio.run(go)
    finally:
        brain.close()
    rows = {i["bucket_id"]: i for i in r.structured_content["items"]}
    assert rows[allergy]["section"] == "core_memory" and rows[allergy]["reason"] == ANSWERS
    assert "花生过敏" in r.content[0].text and "## Core Memory" in r.content[0].text


def test_the_demo_core_profile_answers_its_lookup(demo_brain):
    turn = demo_brain.turn("haven:xiaoyu", "core-lookup", "我对什么过敏来着？", dry_run=True)
    assert where(turn, "core_profile") == ["core_memory"]
    assert "recalled_memory" not in where(turn, "core_profile")
