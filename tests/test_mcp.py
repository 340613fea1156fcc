"""The MCP server (design §15), driven by the official SDK's own client.

End to end, twice: over stdio (``ombre-brain mcp``, a subprocess) and over streamable HTTP (``/mcp``
of a live ``ombre-brain serve`` subprocess). Each transport runs one scenario on its own data
directory: the tools and their schemas; ``hold`` then ``breath_search`` with the reason; archive
and restore; a purge whose receipt ``verify-receipt`` accepts; a token scoped to one space that
can neither read nor write the other through any tool; bad arguments that stay tool errors; and a
memory migrated with ``import --from ombre-md`` found by ``breath_search``. The finer semantics
(breath's profile, grow's cuts, trace's edits) run in-process against the same server object.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import anyio
import httpx
import pytest
import yaml
from mcp import Client, StdioServerParameters

from ombre_brain import Brain
from ombre_brain.cli import main as cli_main
from ombre_brain.config import load_config
from ombre_brain.errors import AuthError
from ombre_brain.mcp.access import Access, stdio_access
from ombre_brain.mcp.server import build_server
from ombre_brain.mcp.split import derive_title, split_by_rules
from ombre_brain.retrieval.lexical import tokenize
from ombre_brain.timeutil import now_utc
from ombre_brain.turn.breath import breath_config

from .conftest import free_port

SPACE_A, SPACE_B = "haven:xiaoyu", "haven:other"
TOKENS = {"OB_TEST_MCP_TOKEN_A": "token-a-5b1f0c", "OB_TEST_MCP_TOKEN_B": "token-b-9e2d47"}
CONFIG = {"identity": {"ai_name": "Haven", "user_name": "Xiaoyu"},
          "server": {"default_space": SPACE_A,
                     "tokens": [{"token_env": "OB_TEST_MCP_TOKEN_A", "spaces": [SPACE_A]},
                                {"token_env": "OB_TEST_MCP_TOKEN_B", "spaces": [SPACE_B]}]}}
TOOLS = {"breath", "breath_search", "breath_advanced", "hold", "grow", "source_read", "trace", "dream", "pulse", "plan",
         "anchor", "release", "letter_write", "letter_read", "letter_lock_update", "I"}  # Ombre-Brain 2.16.9's sixteen

# One bucket in Ombre-Brain's own on-disk shape (sorted keys, naive local times, `name` with its
# timestamp, domain folder, `<name>_<id>.md`). The content is invented for this test.
OMBRE_MD = {
    "dynamic/户外/2026-04-05 16-20-11 河堤放风筝_7d2e4a9c1b30.md": """\
        ---
        activation_count: 1
        arousal: 0.45
        created: '2026-04-05T16:20:11'
        domain:
        - 户外
        id: 7d2e4a9c1b30
        importance: 6
        last_active: '2026-04-06T09:02:40'
        name: 2026-04-05 16-20-11 河堤放风筝
        source_tool: hold
        tags:
        - 风筝
        - 河堤
        title: 河堤放风筝
        type: dynamic
        valence: 0.8
        why_remembered: 她说线轴转起来的声音像小时候
        ---

        下午在河堤上放那只燕子风筝，线放到最长的时候她笑着说手心都是风。
        """,
}
MD_ID = "7d2e4a9c1b30"
OTHER_MEMORIES = [("戒咖啡", "小雨这周开始戒咖啡了，早上改喝豆浆。"),
                  ("伴娘致辞", "小雨在写婚礼上的伴娘致辞，卡在开头。"),
                  ("豆包看病", "豆包吞了一只袜子，半夜送去宠物医院。"),
                  ("加班", "为了赶上线连续加班，她说好累。")]


def _run(fn):
    return anyio.run(fn)


async def _call(client, tool: str, args: dict):
    return await client.call_tool(tool, args)


def _code(result) -> str | None:
    return (result.structured_content or {}).get("error", {}).get("code") if result.is_error else None


def _ids(result) -> set[str]:
    data = result.structured_content or {}
    return {i["bucket_id"] for i in data.get("items", [])} | {k["bucket_id"] for k in data.get("kept_out", [])}


# ---------------------------------------------------------------- the data directory both transports use


def _seed(root: Path) -> dict:
    """A data directory with one memory in space B and an Ombre-Brain markdown bucket migrated into space A."""
    data, config, md = root / "data", root / "config.yaml", root / "ombre-buckets"
    config.write_text(yaml.safe_dump(CONFIG, allow_unicode=True), encoding="utf-8")
    for rel, text in OMBRE_MD.items():
        path = md / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    with Brain.open(data, config) as brain:
        b_id = brain.write(space=SPACE_B, title="树屋秘密基地", tags=["秘密基地"],
                           body="另一个空间的记忆：树屋里的秘密基地，只有我们知道。")
        for title, body in OTHER_MEMORIES:  # a space of one memory has no discriminative terms at all
            brain.write(space=SPACE_A, title=title, body=body)
    assert cli_main(["import", "--from", "ombre-md", "--space", SPACE_A, "--data", str(data), "--config", str(config),
                     str(md)]) == 0
    return {"data": data, "config": config, "b_id": b_id, "root": root}


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **TOKENS, **extra}


class ServeProcess:
    """`ombre-brain serve` on a loopback port, as a user runs it."""

    def __init__(self, seeded: dict) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(seeded["root"] / "serve.log", "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen([sys.executable, "-m", "ombre_brain.cli", "serve", "--data", str(seeded["data"]),
                                      "--config", str(seeded["config"]), "--port", str(self.port)],
                                     stdout=self.log, stderr=subprocess.STDOUT, env=_env())
        deadline = time.time() + 120
        while time.time() < deadline:
            assert self.proc.poll() is None, (seeded["root"] / "serve.log").read_text()[-2000:]
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.2)
        raise AssertionError("serve did not answer within 120 s")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def _http_client(url: str, token: str | None, **headers: str) -> Client:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    if token:
        headers["Authorization"] = f"Bearer {token}"
    http = httpx2.AsyncClient(headers=headers, timeout=120)
    return Client(streamable_http_client(f"{url}/mcp", http_client=http))


def _stdio_client(seeded: dict, token: str) -> Client:
    args = ["-m", "ombre_brain.cli", "mcp", "--data", str(seeded["data"]), "--config", str(seeded["config"]),
            "--space", SPACE_A]
    return Client(StdioServerParameters(command=sys.executable, args=args, env=_env(OMBRE_MCP_TOKEN=token)))


# ---------------------------------------------------------------- one scenario, run over each transport


async def scenario(client, seeded: dict) -> None:
    """Everything the issue accepts, through one connection whose token allows space A only."""
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == TOOLS
    assert tools["breath"].input_schema.get("properties", {}) == {}  # no parameters: clients load it eagerly
    search = tools["breath_search"].input_schema
    assert search["required"] == ["query"] and {"max_results", "domain", "space"} <= set(search["properties"])
    hold_props = set(tools["hold"].input_schema["properties"])
    assert {"content", "title", "tags", "importance", "valence", "arousal", "pinned", "feel"} <= hold_props
    assert tools["hold"].input_schema["required"] == ["content"]
    trace_props = set(tools["trace"].input_schema["properties"])
    assert {"bucket_id", "delete", "restore", "hard_delete", "pinned", "importance", "link_to"} <= trace_props
    assert {"content", "items"} <= set(tools["grow"].input_schema["properties"])
    assert tools["breath_search"].annotations.read_only_hint and tools["trace"].annotations.destructive_hint

    # the migrated Ombre-Brain bucket is found, by words and by its id
    found = await _call(client, "breath_search", {"query": "风筝"})
    assert not found.is_error, found.content[0].text
    row = next(i for i in found.structured_content["items"] if i["bucket_id"] == MD_ID)
    assert row["layer"] == "dynamic_memory" and row["reason"].startswith("admitted_")
    assert "燕子风筝" in found.content[0].text and MD_ID in found.content[0].text

    # hold, then breath_search finds it with its reason
    held = await _call(client, "hold", {"content": "小雨说下个月想去看海豚表演，她从小就喜欢海豚。",
                                        "tags": "海豚,计划", "importance": 7, "why_remembered": "她说起时眼睛很亮",
                                        "test_data": True, "unheard_of": 1})
    assert not held.is_error, held.content[0].text
    bid = held.structured_content["bucket_id"]
    assert held.structured_content["space"] == SPACE_A and bid in held.content[0].text
    notes = " ".join(held.structured_content["notes"])
    assert "test_data is accepted for Ombre-Brain compatibility" in notes and "ignored unheard_of" in notes
    hit = await _call(client, "breath_search", {"query": "海豚表演"})
    item = next(i for i in hit.structured_content["items"] if i["bucket_id"] == bid)
    assert item["section"] == "recalled_memory"
    assert item["reason"] in ("admitted_reader_answers", "admitted_reader_seconds")  # the reader read the pair
    assert f"{bid} · dynamic_memory · recalled_memory · {item['reason']}" in hit.content[0].text
    again = await _call(client, "breath_search", {"query": "海豚表演"})  # no cooldown hides an explicit search
    assert bid in {i["bucket_id"] for i in again.structured_content["items"]}

    # delete=True archives (recoverable); restore=True brings it back
    gone = await _call(client, "trace", {"bucket_id": bid, "delete": True, "delete_reason": "测试"})
    assert gone.structured_content["action"] == "archived" and "restore=True" in gone.content[0].text
    hidden = await _call(client, "breath_search", {"query": "海豚表演"})
    assert bid not in {i["bucket_id"] for i in hidden.structured_content["items"]}
    assert {"bucket_id": bid, "layer": "archive"}.items() <= next(
        k for k in hidden.structured_content["kept_out"] if k["bucket_id"] == bid).items()
    back = await _call(client, "trace", {"bucket_id": bid, "restore": True})
    assert back.structured_content["action"] == "restored" and back.structured_content["layer"] == "dynamic_memory"
    again = await _call(client, "breath_search", {"query": "海豚表演"})
    assert bid in {i["bucket_id"] for i in again.structured_content["items"]}

    # hard_delete=True purges with a signed receipt that verify-receipt accepts; it never surfaces again
    purged = await _call(client, "trace", {"bucket_id": bid, "hard_delete": True})
    assert not purged.is_error and purged.structured_content["action"] == "purged"
    assert "purged" in purged.content[0].text and "verify-receipt" in purged.content[0].text
    receipt = seeded["root"] / f"receipt-{bid}.json"
    receipt.write_text(json.dumps(purged.structured_content["receipt"]), encoding="utf-8")
    assert cli_main(["verify-receipt", "--data", str(seeded["data"]), str(receipt)]) == 0
    by_id = await _call(client, "breath_search", {"query": bid})
    assert not by_id.is_error and "found_by" not in by_id.structured_content and bid not in _ids(by_id)
    for tool, args in (("breath_search", {"query": "海豚表演"}), ("breath_search", {"query": "海豚"}),
                       ("breath", {}), ("pulse", {})):
        r = await _call(client, tool, args)
        assert not r.is_error and bid not in r.content[0].text and bid not in json.dumps(r.structured_content)
        assert "想去看海豚表演" not in r.content[0].text
    assert _code(await _call(client, "trace", {"bucket_id": bid, "pinned": 1})) == "not_found"

    # the token allows space A only: no tool reads or writes space B, by argument or header
    b_id = seeded["b_id"]
    for tool, args in (("breath", {"space": SPACE_B}), ("breath_search", {"query": "秘密基地", "space": SPACE_B}),
                       ("hold", {"content": "写到别处", "space": SPACE_B}),
                       ("grow", {"content": "写到别处", "space": SPACE_B}),
                       ("trace", {"bucket_id": b_id, "space": SPACE_B, "pinned": 1}),
                       ("trace", {"bucket_id": b_id, "space": SPACE_B, "hard_delete": True}),
                       ("dream", {"space": SPACE_B}), ("pulse", {"space": SPACE_B}),
                       ("breath_advanced", {"catalog": True, "space": SPACE_B}),
                       ("source_read", {"bucket_id": b_id, "expected_title": "树屋秘密基地", "space": SPACE_B}),
                       ("plan", {"content": "写到别处", "space": SPACE_B}),
                       ("anchor", {"bucket_id": b_id, "space": SPACE_B}),
                       ("release", {"bucket_id": b_id, "space": SPACE_B}),
                       ("letter_write", {"author": "ai", "content": "写到别处", "space": SPACE_B}),
                       ("letter_read", {"space": SPACE_B}), ("I", {"read": True, "space": SPACE_B}),
                       ("letter_lock_update", {"letter_id": b_id, "lock_type": "none", "space": SPACE_B})):
        r = await _call(client, tool, args)
        assert _code(r) == "forbidden", (tool, r.content[0].text)
        assert r.content[0].text == f"Error (forbidden): this token is not allowed for space '{SPACE_B}'"
    assert _code(await _call(client, "trace", {"bucket_id": b_id, "pinned": 1})) == "not_found"  # A has no such id
    leak = await _call(client, "breath_search", {"query": "秘密基地"})
    assert b_id not in json.dumps(leak.structured_content) and "树屋" not in leak.content[0].text

    # bad arguments are tool errors with the HTTP API's codes; the server keeps answering
    bad = [("hold", {"content": 5}, "invalid"), ("hold", {}, "invalid"), ("hold", {"content": "  "}, "invalid"),
           ("hold", {"content": "x", "importance": 11}, "invalid"), ("hold", {"content": "x", "space": "no space"},
                                                                      "bad_space"),
           ("breath_search", {"query": ""}, "invalid"), ("breath_search", {"query": "x", "max_results": 99}, "invalid"),
           ("breath_search", {"query": "x", "date_from": "yesterday"}, "invalid"), ("breath", {"query": 3}, "invalid"),
           ("grow", {}, "invalid"), ("grow", {"items": [{"title": "no content"}]}, "invalid"),
           ("trace", {"bucket_id": "nope"}, "not_found"), ("trace", {"bucket_id": MD_ID}, "invalid"),
           ("trace", {"bucket_id": MD_ID, "delete": True, "restore": True}, "invalid"),
           ("trace", {"bucket_id": MD_ID, "pinned": 7}, "invalid"),
           ("trace", {"bucket_id": MD_ID, "hard_delete": True, "pinned": 1}, "invalid"),
           ("trace", {"bucket_id": MD_ID, "link_to": "nope"}, "not_found"), ("no_such_tool", {}, "invalid")]
    for tool, args, code in bad:
        r = await _call(client, tool, args)
        assert r.is_error and _code(r) == code, (tool, args, r.content[0].text)
    assert (await _call(client, "breath_search", {"query": "风筝"})).structured_content["items"]  # nothing half-written
    assert not (await _call(client, "pulse", {})).is_error


@pytest.fixture(scope="module")
def seeded_stdio(tmp_path_factory):
    return _seed(tmp_path_factory.mktemp("mcp-stdio"))


@pytest.fixture(scope="module")
def seeded_http(tmp_path_factory):
    return _seed(tmp_path_factory.mktemp("mcp-http"))


def test_the_tools_over_stdio(seeded_stdio):
    async def go():
        async with _stdio_client(seeded_stdio, TOKENS["OB_TEST_MCP_TOKEN_A"]) as client:
            await scenario(client, seeded_stdio)

    _run(go)


def test_stdio_refuses_to_start_without_its_token_when_tokens_are_configured():
    cfg = load_config(CONFIG)
    with pytest.raises(AuthError, match="OMBRE_MCP_TOKEN"):
        stdio_access(cfg, TOKENS)
    with pytest.raises(AuthError, match="invalid bearer token"):
        stdio_access(cfg, {**TOKENS, "OMBRE_MCP_TOKEN": "guess"})
    assert stdio_access(cfg, {**TOKENS, "OMBRE_MCP_TOKEN": TOKENS["OB_TEST_MCP_TOKEN_B"]}).scope == (SPACE_B,)
    assert stdio_access(load_config(), {}).scope == "*"  # no token configured: every space, as on the HTTP API


@pytest.fixture(scope="module")
def serve(seeded_http):
    s = ServeProcess(seeded_http)
    yield s
    s.stop()


def test_the_tools_over_streamable_http_in_serve(serve, seeded_http):
    async def go():
        async with _http_client(serve.url, TOKENS["OB_TEST_MCP_TOKEN_A"]) as client:
            await scenario(client, seeded_http)

    _run(go)


def test_http_tokens_headers_and_methods_work_as_on_the_v1_api(serve, seeded_http):
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
    r = httpx.post(f"{serve.url}/mcp", json=body, headers=headers)
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
    r = httpx.post(f"{serve.url}/mcp", json=body, headers={**headers, "Authorization": "Bearer wrong"})
    assert r.status_code == 401 and r.json() == {"error": {"code": "unauthorized", "message": "invalid bearer token"}}
    r = httpx.get(f"{serve.url}/mcp", headers={"Authorization": f"Bearer {TOKENS['OB_TEST_MCP_TOKEN_A']}"})
    assert r.status_code == 405 and r.headers["Allow"] == "POST"

    async def go():
        # X-Ombre-Space picks the space; the token still decides whether it may
        async with _http_client(serve.url, TOKENS["OB_TEST_MCP_TOKEN_A"], **{"X-Ombre-Space": SPACE_B}) as client:
            assert _code(await _call(client, "breath_search", {"query": "秘密基地"})) == "forbidden"
            assert _code(await _call(client, "hold", {"content": "写到别处"})) == "forbidden"
        async with _http_client(serve.url, TOKENS["OB_TEST_MCP_TOKEN_B"]) as client:  # its only space is the default
            r = await _call(client, "breath_search", {"query": "秘密基地"})
            assert seeded_http["b_id"] in {i["bucket_id"] for i in r.structured_content["items"]}
            assert r.structured_content["space"] == SPACE_B
            assert (await _call(client, "pulse", {})).structured_content["total"] == 1  # nothing got written to B
            assert _code(await _call(client, "breath_search", {"query": "风筝", "space": SPACE_A})) == "forbidden"

    _run(go)


# ---------------------------------------------------------------- finer semantics, in-process


@pytest.fixture
def mcp_server(brain):
    return build_server(brain, space="haven:xiaoyu", stdio=Access("*"))


def _local(server, steps):
    async def go():
        async with Client(server.server) as client:
            return await steps(client)

    return _run(go)


def test_breath_holds_core_memory_recent_memory_and_weather_without_spending_a_turn(brain, mcp_server):
    core = brain.write(space="haven:xiaoyu", title="基本约定", body="小雨对花生过敏。", pinned=True)
    recent = brain.write(space="haven:xiaoyu", title="戒咖啡", body="小雨这周开始戒咖啡了。")
    weather = brain.write(space="haven:xiaoyu", title="今天的印象", body="她今天有点累，但很黏人。", type="feel",
                          tags=["daily_impression"])

    async def steps(client):
        first = await _call(client, "breath", {})
        second = await _call(client, "breath", {"max_tokens": 500})
        return first, second

    first, second = _local(mcp_server, steps)
    rows = {i["bucket_id"]: i for i in first.structured_content["items"]}
    assert rows[core]["section"] == "core_memory" and rows[recent]["section"] == "recent_context"
    assert rows[weather]["section"] == "relationship_weather"
    assert "小雨对花生过敏" in first.content[0].text and "## Core Memory" in first.content[0].text
    assert {i["bucket_id"] for i in second.structured_content["items"]} == set(rows)  # a dry run: nothing cooled
    assert any("max_tokens is accepted for Ombre-Brain compatibility" in n for n in second.structured_content["notes"])
    assert brain.gateway.sessions.load("haven:xiaoyu", "mcp:stdio", now_utc()).round == 1  # no round recorded


def test_breath_with_a_query_searches_as_ombre_brain_does(brain, mcp_server):
    bid = brain.write(space="haven:xiaoyu", title="一起去海边", body="我们在海边捡贝壳。")
    r = _local(mcp_server, lambda c: _call(c, "breath", {"query": "海边"}))
    assert bid in {i["bucket_id"] for i in r.structured_content["items"]}
    assert r.structured_content["tool"] == "breath_search"


def test_breath_search_filters_by_domain_and_date_and_caps_results(brain, mcp_server):
    a = brain.write(space="haven:xiaoyu", title="海边日出", body="海边看日出。", tags=["domain:旅行"],
                    created="2026-03-01T08:00:00+08:00")
    b = brain.write(space="haven:xiaoyu", title="海边晚饭", body="海边吃晚饭。", tags=["domain:日常"],
                    created="2026-04-01T20:00:00+08:00")

    async def steps(client):
        return [await _call(client, "breath_search", args) for args in (
            {"query": "海边"}, {"query": "海边", "domain": "旅行"}, {"query": "海边", "date_from": "2026-03-15"},
            {"query": "海边", "max_results": 1})]

    everything, by_domain, by_date, capped = _local(mcp_server, steps)
    assert {a, b} <= {i["bucket_id"] for i in everything.structured_content["items"]}
    assert {i["bucket_id"] for i in by_domain.structured_content["items"]} & {a, b} == {a}
    assert {i["bucket_id"] for i in by_date.structured_content["items"]} & {a, b} == {b}
    assert len(capped.structured_content["items"]) == 1


def test_hold_maps_ombre_brain_arguments(brain, mcp_server):
    source = brain.write(space="haven:xiaoyu", title="散步", body="晚饭后一起散步。")

    async def steps(client):
        return [await _call(client, "hold", args) for args in (
            {"content": "我们约好：过了十二点有分歧就先睡。", "pinned": True, "domain": "恋爱", "valence": -1},
            {"content": "被需要不一定是被依赖。", "feel": True, "source_bucket": source, "valence": 0.72},
            {"content": "我们约好：过了十二点有分歧就先睡。", "pinned": True, "domain": "恋爱"},
            {"content": "x", "feel": True, "source_bucket": "missing"})]

    pinned, feel, dup, missing = _local(mcp_server, steps)
    p = brain.get("haven:xiaoyu", pinned.structured_content["bucket_id"])
    assert p.pinned and "domain:恋爱" in p.tags and p.title == "我们约好：过了十二点有分歧就先睡。"
    assert pinned.structured_content["layer"] == "core_memory"
    f = brain.get("haven:xiaoyu", feel.structured_content["bucket_id"])
    assert f.type == "feel" and f.valence == 0.72 and f"ombre_source:{source}" in f.tags
    assert dup.structured_content["bucket_id"] == p.id and dup.structured_content["created"] is False
    assert "already held" in dup.content[0].text
    assert _code(missing) == "not_found"


def test_trace_edits_reinforces_and_links_in_one_write(brain, mcp_server):
    a = brain.write(space="haven:xiaoyu", title="贝壳", body="她捡了一个粉色的贝壳。", tags=["海边", "domain:旅行"])
    b = brain.write(space="haven:xiaoyu", title="风铃", body="贝壳做成了风铃。")

    async def steps(client):
        edit = await _call(client, "trace", {"bucket_id": a, "name": "粉色贝壳", "old_str": "粉色", "new_str": "浅粉色",
                                             "tags": "贝壳", "importance": 8, "pinned": 1, "reinforce": True,
                                             "link_to": b, "relation": "same_event", "status": "resolved"})
        bad = await _call(client, "trace", {"bucket_id": a, "old_str": "不存在", "new_str": "x", "importance": 2})
        return edit, bad

    edit, bad = _local(mcp_server, steps)
    assert not edit.is_error, edit.content[0].text
    got = brain.get("haven:xiaoyu", a)
    assert got.title == "粉色贝壳" and got.body == "她捡了一个浅粉色的贝壳。" and got.importance == 8 and got.pinned
    assert set(got.tags) == {"贝壳", "domain:旅行"} and got.activation_count == 1
    assert any(e.to_id == b and e.relation == "same_event" for e in brain.edges("haven:xiaoyu", [a]))
    assert any("status applies to plans only" in n for n in edit.structured_content["notes"])
    assert _code(bad) == "invalid" and brain.get("haven:xiaoyu", a).importance == 8  # nothing written half-way


def test_grow_cuts_a_text_by_paragraphs_and_keeps_items_atomic(brain, mcp_server):
    text = ("今天早上和小雨去公园跑步，跑了五公里，她说膝盖有点疼。\n\n"
            "中午我们在河边的面馆吃了牛肉面，她多加了辣。\n\n"
            "晚上一起看了《千与千寻》，她说每次看都会哭。")

    async def steps(client):
        grown = await _call(client, "grow", {"content": text})
        items = await _call(client, "grow", {"items": ["第一件事。", {"title": "第二件", "content": "第二件事。",
                                                                     "importance": 11}]})
        return grown, items

    before = brain.store.count("haven:xiaoyu")
    grown, items = _local(mcp_server, steps)
    made = grown.structured_content["buckets"]
    assert grown.structured_content["cut_by"] == "rules" and len(made) == 3
    assert [brain.get("haven:xiaoyu", m["bucket_id"]).body for m in made] == text.split("\n\n")
    batch = grown.structured_content["batch"]
    assert all(f"grow_batch:{batch}" in brain.get("haven:xiaoyu", m["bucket_id"]).tags for m in made)
    assert _code(items) == "invalid" and "items[1]" in items.content[0].text
    assert brain.store.count("haven:xiaoyu") == before + 3  # the bad batch wrote nothing


def test_grow_asks_the_upstream_llm_when_one_is_configured(brain_path, standin):
    standin.reply = json.dumps({"memories": [
        {"title": "跑步", "content": "早上跑了五公里。", "tags": ["运动"], "importance": 4, "valence": 0.6},
        {"title": "看电影", "content": "晚上看了千与千寻。", "importance": 20}]}, ensure_ascii=False)
    with Brain.open(brain_path, {"upstream": {"base_url": standin.url}}) as brain:
        server = build_server(brain, space="haven:xiaoyu", stdio=Access("*"))
        day = "早上跑了五公里，出了一身汗。晚上一起看了千与千寻，今天过得很充实。"
        r = _local(server, lambda c: _call(c, "grow", {"content": day}))
        assert r.structured_content["cut_by"] == "llm", r.content[0].text
        got = [brain.get("haven:xiaoyu", m["bucket_id"]) for m in r.structured_content["buckets"]]
        assert [g.title for g in got] == ["跑步", "看电影"] and got[0].importance == 4 and got[1].importance == 10
        standin.reply = "not json at all"
        r = _local(server, lambda c: _call(c, "grow", {"content": day.replace("汗。", "汗。\n\n")}))
        assert r.structured_content["cut_by"] == "rules"
        assert any("could not split" in n for n in r.structured_content["notes"])


def test_dream_and_pulse_report_the_space(brain, mcp_server):
    for i, body in enumerate(["豆包吞了一只袜子。", "小雨在写伴娘致辞。", "小雨开始戒咖啡了。"]):
        brain.write(space="haven:xiaoyu", title=f"近况{i}", body=body, created="2026-11-29T20:00:00+08:00")

    async def steps(client):
        return await _call(client, "dream", {}), await _call(client, "pulse", {})

    dream, pulse = _local(mcp_server, steps)
    assert not dream.is_error and "message" in dream.structured_content
    data = pulse.structured_content
    assert data["total"] >= 3 and data["layers"] and data["jobs"] == {"pending": 0, "running": 0, "failed": 0,
                                                                       "dead": 0}
    assert data["embedder"]["model_id"] and len(data["newest"]) <= 5
    if dream.structured_content["dream_id"]:
        assert data["last_dream"]["bucket_id"] == dream.structured_content["dream_id"]


# ---------------------------------------------------------------- pure parts


def test_the_breath_profile_changes_only_budgets_and_windows():
    cfg = load_config({"mcp": {"breath": {"core_memory": 123, "recent_hours": 5, "dream": 0}}})
    b = breath_config(cfg)
    assert b.gateway.budgets.core_memory == 123 and b.gateway.head_recent_hours == 5 and not b.gateway.dream_section
    assert b.gateway.budgets.recalled_memory == 0 and cfg.gateway.budgets.core_memory == 0  # the chat turn is untouched
    assert b.layers == cfg.layers and b.retrieval == cfg.retrieval


def test_rule_splitting_follows_paragraphs_then_topics():
    tok = lambda t: tokenize(t, frozenset())  # noqa: E731
    paras = [f"第{i}段：{'工作上的会议开了三个小时，老板很啰嗦。' if i % 2 else '猫咪豆包今天又吃了很多猫粮。'}"
             for i in range(9)]
    pieces = split_by_rules("\n\n".join(paras), tokenize=tok)
    assert 2 <= len(pieces) <= 6 and "\n\n".join(p.content for p in pieces) == "\n\n".join(paras)
    one = "We went to the beach. The water was cold. She swam anyway. We had fish and chips on the pier later."
    pieces = split_by_rules(one, tokenize=tok)
    assert len(pieces) == 2 and " ".join(p.content for p in pieces) == one
    assert len(split_by_rules("短短一句", tokenize=tok)) == 1
    title = derive_title("### moment\n我们在海边捡贝壳，小雨说想每年都来一次。后来回家了。")
    assert title == "我们在海边捡贝壳，小雨说想每年都来一次。"


def test_the_latency_tool_measures_both_paths(tmp_path, capsys):
    """`python -m ombre_brain.evaluate.mcp_latency` runs end to end (the numbers themselves are not asserted)."""
    from ombre_brain.evaluate.mcp_latency import main as latency

    assert latency(["--data", str(tmp_path / "data"), "--demo", "--n", "3", "--warmup", "1"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["inject"]["n"] == out["mcp_breath_search"]["n"] == 3 and out["mcp_items"] > 0 and out["p95_ratio"] > 0
