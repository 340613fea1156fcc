"""Issue 35: input is refused naming the field, never cut to fit or guessed at; the documented forms are accepted.

Over HTTP a mistake is a 400 ``{"error": {"code", "message"}}`` whose message starts with the field; over
MCP it is a tool error with the same object. The forms each field accepts are listed in the README
("Fields and the forms they accept"), and every form an Ombre-Brain client sends is among them.
"""

from __future__ import annotations

import anyio
import pytest
from mcp import Client

from ombre_brain.fields import parse_bool
from ombre_brain.mcp.access import Access
from ombre_brain.mcp.server import build_server

from .conftest import ROOT

SPACE = "haven:xiaoyu"


def post(client, **fields):
    return client.post("/v1/buckets", json={"space": SPACE, "title": "一起去海边", **fields})


def refused(r, field: str) -> None:
    assert r.status_code == 400, r.text
    assert r.json()["error"]["message"].startswith(f"{field}:"), r.json()


@pytest.mark.parametrize("fields, field", [
    ({"tags": {}}, "tags"),
    ({"tags": {"a": 1}}, "tags"),
    ({"tags": "海边"}, "tags"),
    ({"comments": {}}, "comments"),
    ({"comments": [{"content": "x" * 2001}]}, "comments[0].content"),
    ({"comments": [{"content": "ok", "author": "a" * 101}]}, "comments[0].author"),
    ({"comments": [{"content": "ok", "author": 7}]}, "comments[0].author"),
    ({"summary": "x" * 2001}, "summary"),
    ({"pinned": "yes"}, "pinned"),
    ({"pinned": 2}, "pinned"),
    ({"pinned": "1"}, "pinned"),
    ({"pinned": None}, "pinned"),
    ({"archived": "on"}, "archived"),
])
def test_http_refuses_instead_of_cutting_or_guessing(client, fields, field):
    refused(post(client, **fields), field)
    assert client.get("/v1/buckets", params={"space": SPACE}).json()["buckets"] == []  # nothing was written


def test_a_comment_or_summary_at_its_limit_is_kept_whole(client):
    r = post(client, summary="s" * 2000, comments=[{"author": "a" * 100, "content": "c" * 2000}])
    assert r.status_code == 201, r.text
    got = client.get(f"/v1/buckets/{r.json()['id']}", params={"space": SPACE}).json()
    assert got["summary"] == "s" * 2000 and got["comments"][0]["content"] == "c" * 2000


@pytest.mark.parametrize("sent, stored", [(True, True), (False, False), (1, True), (0, False), ("true", True),
                                          ("false", False), ("TRUE", True), ("False", False)])
def test_the_documented_boolean_forms_are_accepted(client, sent, stored):
    r = post(client, body=f"{sent!r}", pinned=sent)
    assert r.status_code == 201, r.text
    assert client.get(f"/v1/buckets/{r.json()['id']}", params={"space": SPACE}).json()["pinned"] is stored


def test_parse_bool_is_the_one_reading_of_a_flag():
    assert [parse_bool(v, "f") for v in (True, 1, "true", "True", False, 0, "false")] == [True] * 4 + [False] * 3
    for bad in ("yes", "no", "on", "1", "", None, 2, -1, 1.0, [], {}):
        with pytest.raises(Exception, match=r'^f: expected true or false') as info:
            parse_bool(bad, "f")
        assert getattr(info.value, "field", None) == "f"


# ---------------------------------------------------------------- MCP


def _tools(brain, steps):
    server = build_server(brain, space=SPACE, stdio=Access("*"))

    async def go():
        async with Client(server.server) as client:
            return await steps(client)

    return anyio.run(go)


def _error(result) -> str:
    assert result.is_error, result.content[0].text
    return result.structured_content["error"]["message"]


def test_mcp_flags_take_the_documented_forms_and_refuse_the_rest(brain):
    async def steps(client):
        return [await client.call_tool("hold", {"content": f"第{i}件事：{value!r}", "pinned": value})
                for i, value in enumerate(("yes", "y", 2, "true", 1, False))]

    yes, y, two, text_true, one, false = _tools(brain, steps)
    for bad in (yes, y, two):
        assert "pinned" in _error(bad) and "expected true or false" in _error(bad)
    held = [brain.get(SPACE, r.structured_content["bucket_id"]) for r in (text_true, one, false)]
    assert [b.pinned for b in held] == [True, True, False]
    assert len(brain.list(SPACE)) == 3  # the refused calls wrote nothing


def test_mcp_trace_flags_refuse_a_guess(brain):
    bid = brain.write(space=SPACE, title="海边", body="我们在海边捡贝壳。")
    r = _tools(brain, lambda c: c.call_tool("trace", {"bucket_id": bid, "hard_delete": "yes"}))
    assert "hard_delete" in _error(r)
    assert brain.get(SPACE, bid) is not None


def test_grow_files_at_most_its_cap_of_items(brain):
    cap = brain.config.mcp.grow.max_given_items

    async def steps(client):
        many = await client.call_tool("grow", {"items": [f"第{i}件事。" for i in range(cap + 1)]})
        thousand = await client.call_tool("grow", {"items": [f"第{i}件事。" for i in range(1000)]})
        enough = await client.call_tool("grow", {"items": [f"第{i}件事。" for i in range(cap)]})
        return many, thousand, enough

    many, thousand, enough = _tools(brain, steps)
    for r in (many, thousand):
        message = _error(r)
        assert message.startswith("items:") and f"at most {cap}" in message and "2-6" in message
    assert not enough.is_error and len(enough.structured_content["buckets"]) == cap
    assert len(brain.list(SPACE, limit=100)) == cap


def test_a_long_hold_says_its_affect_was_read_from_the_start(brain):
    text = "今天很开心，我们一起去了海边。" + "然后我们走了很久很久。" * 300

    async def steps(client):
        guessed = await client.call_tool("hold", {"content": text})
        given = await client.call_tool("hold", {"content": text + "!", "valence": 0.2, "arousal": 0.4})
        short = await client.call_tool("hold", {"content": "今天很开心。"})
        return guessed, given, short

    guessed, given, short = _tools(brain, steps)
    assert any("first 2,000 of" in n and "valence" in n for n in guessed.structured_content["notes"])
    assert not any("first 2,000" in n for n in given.structured_content["notes"] + short.structured_content["notes"])


def test_the_readme_lists_the_forms_each_field_accepts():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("### Fields and the forms they accept", 1)[1].split("\n## ", 1)[0]
    for needle in ('`true`/`false`, `1`/`0`, `"true"`/`"false"`', "`tags`", "`comments`", "`summary`",
                   "max_given_items", "2–6", "refused"):
        assert needle in section, needle


# ---------------------------------------------------------------- issue 50: booleans are not numbers


@pytest.mark.parametrize("tool,args,field", [
    ("dream", {"window_hours": True}, "window_hours"),
    ("hold", {"content": "海边的傍晚", "importance": True}, "importance"),
    ("hold", {"content": "海边的傍晚", "valence": False}, "valence"),
    ("breath_search", {"query": "海边", "max_results": True}, "max_results"),
    ("letter_read", {"limit": True}, "limit"),
    ("plan", {"content": "周日给妈妈打电话", "weight": True}, "weight"),
])
def test_mcp_number_parameters_refuse_true_and_false(brain, tool, args, field):
    before = len(brain.list(SPACE, limit=100)) if brain.store.known_space(SPACE) else 0
    r = _tools(brain, lambda c: c.call_tool(tool, args))
    message = _error(r)
    assert field in message and "true and false are flags, not numbers" in message, message
    after = len(brain.list(SPACE, limit=100)) if brain.store.known_space(SPACE) else 0
    assert after == before  # nothing was written on a guess


def test_mcp_flags_of_minus_one_zero_one_take_true_and_false(brain):
    bid = brain.write(space=SPACE, title="海边", body="我们在海边捡贝壳。")

    async def steps(client):
        return (await client.call_tool("trace", {"bucket_id": bid, "pinned": True}),
                await client.call_tool("trace", {"bucket_id": bid, "dont_surface": True}))

    pinned, quiet = _tools(brain, steps)
    assert not pinned.is_error and not quiet.is_error, (pinned.content[0].text, quiet.content[0].text)
    got = brain.get(SPACE, bid)
    assert got.pinned and "ombre:dont_surface" in got.tags  # trace archives it quietly (mcp/trace.py)
