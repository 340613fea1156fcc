"""All sixteen Ombre-Brain tools, through the official SDK client over both transports (docs/design.md §19).

``tools/list`` over stdio (``ombre-brain mcp``) and over ``/mcp`` of a live ``ombre-brain serve``
lists the sixteen in Ombre-Brain's order with its parameter names; one scenario then calls each
tool and checks what it did, on a store migrated from tests/data/ombre_md_kinds (letters of each
lock, plans, anchors, I entries). In-process: every Ombre-Brain parameter is accepted (advertised
or named in the notes), and the anchor cap's 25th is a clear tool error.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import anyio
import pytest
import yaml
from mcp import Client

from ombre_brain import Brain
from ombre_brain.cli import main as cli_main
from ombre_brain.kinds.anchors import ANCHOR_LIMIT
from ombre_brain.mcp.access import Access
from ombre_brain.mcp.registry import TOOLS
from ombre_brain.mcp.server import build_server
from ombre_brain.timeutil import now_utc

from .test_mcp import CONFIG, SPACE_A, TOKENS, ServeProcess, _http_client, _stdio_client

KINDS = Path(__file__).parent / "data" / "ombre_md_kinds"
ORDER = ["breath", "breath_search", "breath_advanced", "hold", "grow", "source_read", "trace", "dream", "pulse",
         "plan", "anchor", "release", "letter_write", "letter_read", "letter_lock_update", "I"]
# Ombre-Brain 2.16.9's signatures (docs/INTERNALS.md §3 of the published store)
OMBRE = {
    "breath": set(), "breath_search": {"query", "domain", "max_results"},
    "breath_advanced": {"query", "max_tokens", "domain", "valence", "arousal", "max_results", "importance_min", "tags",
                        "catalog"},
    "hold": {"content", "title", "tags", "importance", "pinned", "feel", "source_bucket", "valence", "arousal",
             "why_remembered", "meaning", "media", "test_data"},
    "grow": {"content", "items"}, "source_read": {"bucket_id", "expected_title", "scope", "cursor", "max_tokens"},
    "trace": {"bucket_id", "name", "domain", "valence", "arousal", "importance", "tags", "resolved", "pinned",
              "protected", "digested", "content", "delete", "status", "weight", "dont_surface", "why_remembered",
              "meaning_append", "meaning_replace", "media_append", "media_replace", "hard_delete", "delete_reason",
              "restore", "old_str", "new_str"},
    "pulse": {"include_archive"}, "dream": {"window_hours", "inspiration"},
    "plan": {"content", "status", "related_bucket", "weight", "why_remembered"},
    "letter_write": {"author", "content", "user_name", "title", "date", "ai_name", "lock_type", "unlock_date"},
    "letter_read": {"query", "limit", "author", "date_from", "date_to"},
    "letter_lock_update": {"letter_id", "lock_type", "unlock_date"}, "anchor": {"bucket_id"}, "release": {"bucket_id"},
    "I": {"content", "aspect", "read", "limit", "promote"},
}
NOTED = {"hold": {"media": ["河边.jpg"], "test_data": True},
         "trace": {"meaning_replace": "新的含义", "media_append": ["a.jpg"], "media_replace": ["b.jpg"]},
         "pulse": {"include_archive": True}, "dream": {"inspiration": True}}
"""Listed like every other but meaning nothing here: a reply names each one sent (README's table says why)."""
REQUIRED = {"breath_search": ["query"], "source_read": ["bucket_id", "expected_title"], "plan": ["content"],
            "letter_write": ["author", "content"], "letter_lock_update": ["letter_id", "lock_type"],
            "anchor": ["bucket_id"], "release": ["bucket_id"], "hold": ["content"], "trace": ["bucket_id"]}
SOURCE = "第一行：早上一起跑步。\n第二行：跑完去吃了豆浆油条。\n第三行：晚上她给我读了一首诗。\n第四行：诗是聂鲁达的。"


def test_every_ombre_brain_parameter_is_accepted():
    for name, params in OMBRE.items():
        spec = TOOLS[name]
        assert params <= spec.declared, (name, params - spec.declared)


def _seed(root: Path) -> dict:
    data, config = root / "data", root / "config.yaml"
    config.write_text(yaml.safe_dump(CONFIG, allow_unicode=True), encoding="utf-8")
    with Brain.open(data, config) as brain:
        brain.write(space=SPACE_A, title="早餐", body="早餐吃了豆浆油条。")
    assert cli_main(["import", "--from", "ombre-md", "--space", SPACE_A, "--tz", "+08:00", "--data", str(data),
                     "--config", str(config), str(KINDS)]) == 0
    return {"data": data, "config": config, "root": root}


async def _tool(client, name: str, args: dict):
    r = await client.call_tool(name, args)
    assert not r.is_error, (name, args, r.content[0].text)
    return r, r.structured_content, r.content[0].text


async def scenario(client) -> None:
    listed = (await client.list_tools()).tools
    assert [t.name for t in listed] == ORDER
    schemas = {t.name: t.input_schema for t in listed}
    for name, params in OMBRE.items():
        assert params <= set(schemas[name].get("properties", {})), (name, params - set(schemas[name]["properties"]))
        assert schemas[name].get("required", []) == REQUIRED.get(name, []), name

    _, data, text = await _tool(client, "breath", {})  # the newest formal self entries start the session
    assert [s["bucket_id"] for s in data["self"]] == ["d40000000003", "d40000000001"] and "I (the newest" in text
    assert "d40000000003" not in {i["bucket_id"] for i in data["items"]}  # attached, never surfaced

    _, data, _ = await _tool(client, "breath_search", {"query": '"聂鲁达的诗集"'})  # an anchor, found by search
    assert data["found_by"] == "exact_phrase" and [i["bucket_id"] for i in data["items"]] == ["c30000000001"]
    _, data, _ = await _tool(client, "breath_search", {"query": '"聂鲁达的小说"'})
    assert data["items"] == [] and data["total"] == 0

    _, data, text = await _tool(client, "breath_advanced", {"catalog": True})
    ids = {i["bucket_id"] for i in data["items"]}
    assert {"c30000000001", "c30000000003"} <= ids and not {"a10000000001", "b20000000001", "d40000000001"} & ids
    _, data, _ = await _tool(client, "breath_advanced", {"importance_min": 9})
    assert [i["bucket_id"] for i in data["items"]] == ["c30000000001"]

    _, data, text = await _tool(client, "hold", {"content": "她今天给妈妈打了电话，聊了很久。"})
    assert [c["plan_id"] for c in data["closed_plans"]] == ["b20000000001"] and "closed plan b20000000001" in text
    held = data["bucket_id"]
    _, data, text = await _tool(client, "breath_search", {"query": "b20000000001"})  # the plan's trace says why
    assert data["items"][0]["plan"]["status"] == "resolved" and "plan resolved" in text
    assert f"status active → resolved by {held}: closed by {held}: it says 妈妈, 打电话" in text

    _, data, _ = await _tool(client, "grow", {"content": SOURCE, "items": [
        {"title": "一起跑步", "content": "早上一起跑步，跑完吃了豆浆油条。", "source_ranges": [[1, 2]]},
        {"title": "读诗", "content": "晚上她读了聂鲁达的诗。", "source_ranges": [[3, 4]]}]})
    poem = next(b["bucket_id"] for b in data["buckets"] if b["title"] == "读诗")
    _, data, text = await _tool(client, "source_read", {"bucket_id": poem, "expected_title": "读诗"})
    assert [ln["line"] for ln in data["lines"]] == [3, 4] and "> " in text and "聂鲁达的。" in text
    _, data, _ = await _tool(client, "source_read", {"bucket_id": poem, "expected_title": "读诗",
                                                     "scope": "full_source", "max_tokens": 200})
    assert data["lines"][0]["line"] == 1 and data["total_lines"] == 4
    wrong = await client.call_tool("source_read", {"bucket_id": poem, "expected_title": "跑步"})
    assert wrong.is_error and wrong.structured_content["error"]["code"] == "not_found"
    none = await client.call_tool("source_read", {"bucket_id": held,
                                                  "expected_title": "她今天给妈妈打了电话，聊了很久。"})
    assert none.is_error and none.structured_content["error"]["code"] == "no_source"

    _, data, text = await _tool(client, "trace", {"bucket_id": "b20000000003", "status": "active",
                                                  "weight": 0.4})
    assert data["action"] == "plan_status" and "abandoned → active" in text and "its history:" in text

    _, data, text = await _tool(client, "dream", {})
    assert data["active_plans"] == ["b20000000003"] and "=== your active plans ===" in text
    assert data["self_candidates"] == ["d40000000004"] and "seen in dreams on 3/3 dates" in text

    _, data, _ = await _tool(client, "pulse", {})
    assert data["kinds"]["plans"] == {"active": 1, "resolved": 2, "abandoned": 0}
    assert data["kinds"]["letters"] == {"letters": 5, "sealed": 2} and data["kinds"]["anchors"] == 2
    assert data["kinds"]["self"] == {"formal": 2, "candidates": 1, "promoted": 1}

    _, first, _ = await _tool(client, "plan", {"content": "周六带豆包去打疫苗", "weight": 0.9})
    _, again, _ = await _tool(client, "plan", {"content": "周六带豆包去打疫苗"})
    assert first["created"] and not again["created"] and again["bucket_id"] == first["bucket_id"]
    heavy = await client.call_tool("plan", {"content": "周六带豆包去打疫苗", "weight": 3})
    assert heavy.is_error and heavy.content[0].text.startswith("Error (invalid): weight: expected a number from 0 to 1")

    _, data, text = await _tool(client, "anchor", {"bucket_id": held})
    assert data["changed"] and data["anchors"] == 3 and f"anchors 3/{ANCHOR_LIMIT}" in text
    _, data, _ = await _tool(client, "release", {"bucket_id": held})
    assert data["changed"] and data["anchors"] == 2 and not data["anchor"]

    _, data, _ = await _tool(client, "letter_write", {"author": "Haven", "content": "小雨：明年春天再一起去看樱花。",
                                                      "lock_type": "permanent"})
    mine = data["letter_id"]
    assert data["locked_by"] == "companion" and data["readable"] and data["content"].startswith("小雨")
    _, data, text = await _tool(client, "letter_read", {"limit": 10})
    rows = {r["letter_id"]: r for r in data["letters"]}
    assert not rows["a10000000002"]["readable"] and "银杏叶" not in text  # the person's lock: metadata only
    assert "灯塔守夜人" in rows["a10000000004"]["content"] and rows[mine]["readable"]
    _, data, _ = await _tool(client, "letter_lock_update", {"letter_id": mine, "lock_type": "none"})
    assert data["lock_type"] == "none" and not data["sealed"]
    theirs = await client.call_tool("letter_lock_update", {"letter_id": "a10000000002", "lock_type": "none"})
    assert theirs.is_error and theirs.structured_content["error"]["code"] == "forbidden"

    _, data, _ = await _tool(client, "I", {"promote": "d40000000004", "content": "她睡着之后，我还想再守一会儿。"})
    promoted = data["bucket_id"]
    _, data, _ = await _tool(client, "I", {"content": "我觉得我越来越敢说'我不知道'了。", "aspect": "becoming"})
    assert data["action"] == "candidate" and data["self"]["stage"] == "candidate"
    _, data, _ = await _tool(client, "I", {"read": True})
    assert data["formal"][0]["bucket_id"] == promoted and len(data["candidates"]) == 1


@pytest.fixture(scope="module")
def seeded_stdio(tmp_path_factory):
    return _seed(tmp_path_factory.mktemp("sixteen-stdio"))


@pytest.fixture(scope="module")
def seeded_http(tmp_path_factory):
    return _seed(tmp_path_factory.mktemp("sixteen-http"))


def test_all_sixteen_over_stdio(seeded_stdio):
    async def go():
        async with _stdio_client(seeded_stdio, TOKENS["OB_TEST_MCP_TOKEN_A"]) as client:
            await scenario(client)

    anyio.run(go)


def test_all_sixteen_over_streamable_http(seeded_http):
    serve = ServeProcess(seeded_http)
    try:
        async def go():
            async with _http_client(serve.url, TOKENS["OB_TEST_MCP_TOKEN_A"]) as client:
                await scenario(client)

        anyio.run(go)
    finally:
        serve.stop()


def test_the_twenty_fifth_anchor_is_a_clear_tool_error(brain):
    server = build_server(brain, space=SPACE_A, stdio=Access("*"))
    ids = [brain.write(SPACE_A, title=f"坐标{i}", body=f"第{i}个约定。") for i in range(ANCHOR_LIMIT + 1)]

    async def go():
        async with Client(server.server) as client:
            for bid in ids[:ANCHOR_LIMIT]:
                assert not (await client.call_tool("anchor", {"bucket_id": bid})).is_error
            last = await client.call_tool("anchor", {"bucket_id": ids[-1]})
            via_trace = await client.call_tool("trace", {"bucket_id": ids[-1], "anchor": 1})
            return last, via_trace

    last, via_trace = anyio.run(go)
    assert last.is_error and last.structured_content["error"]["code"] == "anchor_cap"
    assert last.content[0].text.startswith(f"Error (anchor_cap): anchor cap reached: space '{SPACE_A}' already holds "
                                           f"{ANCHOR_LIMIT} anchors and the cap is {ANCHOR_LIMIT}; release(bucket_id)")
    assert via_trace.is_error and via_trace.structured_content["error"]["code"] == "anchor_cap"
    assert not brain.get(SPACE_A, ids[-1]).anchor


def test_parameters_that_mean_nothing_here_are_named_in_the_reply(brain):
    server = build_server(brain, space=SPACE_A, stdio=Access("*"))
    bid = brain.write(SPACE_A, title="河边", body="傍晚在河边走了很久。")
    base = {"hold": {"content": "河边的风很大。"}, "trace": {"bucket_id": bid, "importance": 6}, "pulse": {},
            "dream": {}}

    async def go():
        async with Client(server.server) as client:
            return {(name, param): await client.call_tool(name, {**base[name], param: value})
                    for name, params in NOTED.items() for param, value in params.items()}

    for (name, param), r in anyio.run(go).items():
        assert not r.is_error, (name, param, r.content[0].text)
        assert any(n.startswith(f"{param} is accepted for Ombre-Brain compatibility and not used here: ")
                   for n in r.structured_content["notes"]), (name, param, r.structured_content.get("notes"))


def test_dream_window_hours_is_the_window_it_dreams_from(brain):
    server = build_server(brain, space=SPACE_A, stdio=Access("*"))
    then = (now_utc() - timedelta(hours=5)).isoformat()
    for i, text in enumerate(("早上去爬山。", "中午吃了面。", "晚上看了电影。")):
        brain.write(SPACE_A, title=f"第{i}件事", body=text, created=then)

    async def go():
        async with Client(server.server) as client:
            return [await client.call_tool("dream", args) for args in (
                {"window_hours": 337}, {"window_hours": 0.5}, {"window_hours": 4}, {"window_hours": 6})]

    too_long, not_hours, four, six = anyio.run(go)
    for bad in (too_long, not_hours):
        assert bad.is_error and bad.structured_content["error"]["code"] == "invalid"
        assert "window_hours" in bad.content[0].text
    assert too_long.content[0].text.startswith("Error (invalid): window_hours: expected 1-336 hours")
    assert four.structured_content["reason"] == "too_little_material" and "in the last 4 h" in four.content[0].text
    assert six.structured_content["reason"] == "dreamed" and len(six.structured_content["material"]) == 3


def test_source_read_refuses_an_empty_range_and_pages_a_long_source(brain):
    server = build_server(brain, space=SPACE_A, stdio=Access("*"))
    long_source = "\n".join(f"第{i}行：那天的细节{i}，" + "很长的一句话。" * 8 for i in range(1, 41))
    source = "第一行：出门。\n\n   \n第四行：回家。"

    async def go():
        async with Client(server.server) as client:
            grown = await client.call_tool("grow", {"content": source, "items": [
                {"title": "空行", "content": "中间什么也没有。", "source_ranges": [[2, 3]]},
                {"title": "回家", "content": "晚上回家了。", "source_ranges": [[4, 4]]}]})
            ids = {b["title"]: b["bucket_id"] for b in grown.structured_content["buckets"]}
            empty = await client.call_tool("source_read", {"bucket_id": ids["空行"], "expected_title": "空行"})
            home = await client.call_tool("source_read", {"bucket_id": ids["回家"], "expected_title": "回家"})
            grown = await client.call_tool("grow", {"content": long_source, "items": [
                {"title": "那天", "content": "那天的细节很多。", "source_ranges": [[1, 40]]}]})
            day = grown.structured_content["buckets"][0]["bucket_id"]
            pages, cursor = [], 0
            while True:
                r = await client.call_tool("source_read", {"bucket_id": day, "expected_title": "那天", "cursor": cursor,
                                                           "max_tokens": 300})
                assert not r.is_error, r.content[0].text
                pages.append(r.structured_content)
                cursor = r.structured_content["next_cursor"]
                if not cursor:
                    return empty, home, pages

    empty, home, pages = anyio.run(go)
    assert empty.is_error and empty.structured_content["error"]["code"] == "empty_range"
    assert empty.content[0].text == "Error (empty_range): bucket_id: its declared lines 2-3 are empty"
    assert not home.is_error and [ln["text"] for ln in home.structured_content["lines"]] == ["第四行：回家。"]
    assert len(pages) > 2  # 40 long lines do not fit 300 tokens
    read = [ln["line"] for p in pages for ln in p["lines"]]
    assert read == list(range(1, 41))  # every line once, in order, no page skipped or repeated
