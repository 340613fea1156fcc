"""Issue 35: answers that say what happened. A space never written, a purge that matched nothing, the spaces a
token can see in ``pulse``, breath()'s own words, and help text for every option of ``purge`` and
``verify-receipt``."""

from __future__ import annotations

import json
import subprocess
import sys

import anyio
import httpx
import pytest
from mcp import Client

from ombre_brain import Brain
from ombre_brain.cli import build_parser
from ombre_brain.mcp.access import Access
from ombre_brain.mcp.server import build_server

from .conftest import ROOT, LiveServer, embedded_keys

SPACE = "haven:xiaoyu"


def cli(*args: str, cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ombre_brain.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


def test_a_space_never_written_is_reported_in_the_turn(client, brain):
    brain.write(space=SPACE, title="一起去海边", body="我们在海边捡贝壳。")
    never = client.post("/v1/inject", json={"space": "nope:x", "session_id": "s", "query": "还记得海边吗"})
    known = client.post("/v1/inject", json={"space": SPACE, "session_id": "s", "query": "还记得海边吗"})
    assert never.status_code == 200 and known.status_code == 200  # not an error: the space just holds nothing
    assert never.json()["space_known"] is False and known.json()["space_known"] is True
    assert brain.turn("nope:x", "s", "hello", dry_run=True).space_known is False
    logged = brain.gateway.injections("nope:x", "s", 5)
    assert logged and logged[0]["space_known"] is False  # the logged TURN says it too


def test_the_proxy_names_a_space_never_written_in_a_header(tmp_path, standin):
    brain = Brain.open(tmp_path / "data", {"upstream": {"base_url": standin.url, "timeout_s": 5, "retries": 0}})
    brain.write(space=SPACE, title="一起去海边", body="我们在海边捡贝壳。")
    server = LiveServer(brain)
    body = {"model": "m", "messages": [{"role": "user", "content": "还记得海边吗"}]}
    try:
        with httpx.Client(base_url=server.url, timeout=60) as c:
            never = c.post("/v1/chat/completions", json=body, headers={"X-Ombre-Space": "nope:x"})
            known = c.post("/v1/chat/completions", json=body, headers={"X-Ombre-Space": SPACE})
    finally:
        server.close()
        brain.close()
    assert never.status_code == 200 and known.status_code == 200
    assert never.headers["X-Ombre-Space-Known"] == "false" and known.headers["X-Ombre-Space-Known"] == "true"


@embedded_keys
def test_a_purge_that_matches_nothing_says_so(tmp_path, client, brain):
    bid = brain.write(space=SPACE, title="一起去海边", body="我们在海边捡贝壳。")
    nothing = client.post("/v1/purge", json={"space": "nope:x", "bucket_ids": ["abc"]}).json()
    something = client.post("/v1/purge", json={"space": SPACE, "bucket_ids": [bid]}).json()
    assert nothing["status"] == "nothing_matched" and something["status"] == "purged"
    assert not any(nothing["receipt"]["payload"]["deleted"].values())
    assert something["receipt"]["payload"]["deleted"]["buckets"] == 1
    for name, answer in (("nothing", nothing), ("something", something)):  # both verify, status and all
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(answer), encoding="utf-8")
        done = cli("verify-receipt", "--data", str(brain.path), str(path))
        assert done.returncode == 0, done.stderr
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps({**nothing, "status": "purged"}), encoding="utf-8")
    assert cli("verify-receipt", "--data", str(brain.path), str(forged)).returncode == 1


def test_the_purge_command_exits_3_when_nothing_matched_and_speaks_in_flags(tmp_path):
    data = str(tmp_path / "data")
    nothing = cli("purge", "--data", data, "--space", "nope:x", "--bucket", "abc")
    assert nothing.returncode == 3, nothing.stderr
    assert json.loads(nothing.stdout)["status"] == "nothing_matched"
    none = cli("purge", "--data", data, "--space", "nope:x")
    assert none.returncode == 2
    assert "--bucket" in none.stderr and "--source" in none.stderr and "--whole-space" in none.stderr
    assert "bucket_ids" not in none.stderr and "whole_space" not in none.stderr
    both = cli("purge", "--data", data, "--space", "nope:x", "--bucket", "abc", "--whole-space")
    assert both.returncode == 2 and "--bucket and --whole-space" in both.stderr


@pytest.mark.parametrize("command", ["purge", "verify-receipt"])
def test_every_option_of_purge_and_verify_receipt_has_help(command):
    sub = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    parser = sub.choices[command]
    for action in parser._actions:
        assert action.help, f"{command} {action.option_strings or action.dest} has no help text"
    assert "exit status" in (parser.epilog or "")
    shown = cli(command, "--help").stdout
    assert "exit status" in shown and ("3" in shown if command == "purge" else "1" in shown)


def _tools(brain, access, steps):
    server = build_server(brain, space="haven:user", stdio=access)

    async def go():
        async with Client(server.server) as client:
            return await steps(client)

    return anyio.run(go)


def test_pulse_names_every_space_the_token_can_see(brain):
    brain.write(space=SPACE, title="一起去海边", body="我们在海边捡贝壳。")
    brain.write(space="haven:other", title="豆包", body="豆包是一只小狗。")
    everything = _tools(brain, Access("*"), lambda c: c.call_tool("pulse", {}))
    data, text = everything.structured_content, everything.content[0].text
    assert data["space"] == "haven:user" and data["space_known"] is False and data["total"] == 0
    assert data["spaces"] == ["haven:other", SPACE] and "nothing was ever written to this space" in text
    assert f"{SPACE}" in text and "haven:other" in text and "space=" in text
    scoped = _tools(brain, Access([SPACE, "haven:user"]), lambda c: c.call_tool("pulse", {"space": SPACE}))
    assert scoped.structured_content["spaces"] == ["haven:user", SPACE]
    assert scoped.structured_content["written_spaces"] == [SPACE]
    assert "haven:other" not in scoped.content[0].text and "haven:user (never written)" in scoped.content[0].text


def test_breath_does_not_say_a_query_asked_for_recent_times(brain):
    brain.write(space=SPACE, title="戒咖啡", body="小雨这周开始戒咖啡了。")
    r = _tools(brain, Access("*"), lambda c: c.call_tool("breath", {"space": SPACE}))
    rows = [i for i in r.structured_content["items"] if i["reason"] == "explicit_recent"]
    assert rows and all("query" not in i["why"] and "breath()" in i["why"] for i in rows)
    assert "the query asks about recent times" not in r.content[0].text


def test_the_readme_documents_inject_fields_and_the_answers():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    inject = readme.split("**`POST /v1/inject`**", 1)[1].split("**`POST /v1/purge`**", 1)[0]
    for needle in ("`messages`", "`now`", "`query`", "`session_id`", "`space_known`", "X-Ombre-Space-Known"):
        assert needle in inject, needle
    assert "nothing_matched" in readme and "exits\nwith status 3" in readme.replace("exits with", "exits\nwith")
