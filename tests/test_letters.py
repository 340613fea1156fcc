"""Letters under a side's lock, through both sides' channels, and the words of a sealed one nowhere else (§19).

The companion's channel is MCP (here ``/mcp`` of a live server, driven by the official SDK client);
the person's is ``/v1/letters``. Tokens scope spaces, and a token bound to one side
(``server.tokens[].side``) is refused by the other side's channel, which is how a side is told
apart. A timed letter shows only its metadata to the other side before its time and its words
after; a permanent one never. A sealed letter's words reach no turn, dream, search, debug page or
route, and no other token's space: the test looks for them everywhere a user can look.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone

import anyio
import httpx
import pytest
from mcp import Client

from ombre_brain import Brain
from ombre_brain.config import load_config
from ombre_brain.errors import ForbiddenError
from ombre_brain.mcp.access import stdio_access
from ombre_brain.mcp.server import build_server
from ombre_brain.portability.jsonl import export_space, import_jsonl

from .conftest import LiveServer, strip_echo
from .test_mcp import _http_client

SPACE, OTHER = "haven:xiaoyu", "haven:other"
ENV = {"OB_T_COMPANION": "tok-companion-51", "OB_T_PERSON": "tok-person-93", "OB_T_OTHER": "tok-other-27"}
CONFIG = {"identity": {"ai_name": "Haven", "user_name": "Xiaoyu"},
          "server": {"default_space": SPACE, "tokens": [
              {"token_env": "OB_T_COMPANION", "spaces": [SPACE], "side": "companion"},
              {"token_env": "OB_T_PERSON", "spaces": [SPACE], "side": "person"},
              {"token_env": "OB_T_OTHER", "spaces": [OTHER]}]}}
COMPANION, PERSON, OTHER_TOKEN = ENV["OB_T_COMPANION"], ENV["OB_T_PERSON"], ENV["OB_T_OTHER"]


@pytest.fixture
def site(tmp_path):
    brain = Brain.open(tmp_path / "data", CONFIG)
    live = LiveServer(brain, env_tokens=ENV)
    yield live
    live.close()
    brain.close()


def _at(seconds: float) -> str:
    return (datetime.now(timezone.utc) + timedelta(seconds=seconds)).isoformat(timespec="seconds")


def _person(site, method: str, path: str, **kw) -> httpx.Response:
    return httpx.request(method, f"{site.url}{path}", headers={"Authorization": f"Bearer {PERSON}"}, timeout=30, **kw)


def _mcp(site, token: str, steps):
    async def go():
        async with _http_client(site.url, token) as client:
            return await steps(client)

    return anyio.run(go)


def _letters(result) -> dict:
    return {row["letter_id"]: row for row in result.structured_content["letters"]}


def test_each_side_reads_the_other_sides_timed_letter_only_after_its_time(site):
    wait = 5
    mine = _person(site, "POST", "/v1/letters", json={"space": SPACE, "content": "阿澈：银河尽头的邮局今天开门了。",
                                                        "title": "给你的信", "lock_type": "timed",
                                                        "unlock_date": _at(wait)})
    assert mine.status_code == 201, mine.text
    person_id = mine.json()["letter_id"]
    assert mine.json()["locked_by"] == "person" and mine.json()["content"].endswith("开门了。")

    async def before(client):
        written = await client.call_tool("letter_write", {"author": "ai", "content": "小雨：风铃草开在窗台上。",
                                                          "lock_type": "timed", "unlock_date": _at(wait)})
        return written, await client.call_tool("letter_read", {}), await client.call_tool("letter_read",
                                                                                          {"query": "邮局"})

    written, listing, search = _mcp(site, COMPANION, before)
    assert not written.is_error, written.content[0].text
    companion_id = written.structured_content["letter_id"]
    assert written.structured_content["locked_by"] == "companion"
    theirs = _letters(listing)[person_id]
    assert theirs["sealed"] and not theirs["readable"] and "content" not in theirs and "title" not in theirs
    assert "银河" not in listing.content[0].text and "给你的信" not in listing.content[0].text
    assert "metadata only" in listing.content[0].text
    assert _letters(search) == {}  # a sealed letter's words never rank for the other side
    assert "风铃草" in _letters(listing)[companion_id]["content"]  # the companion reads its own
    seen = _person(site, "GET", f"/v1/letters?space={SPACE}").json()["letters"]
    row = next(r for r in seen if r["letter_id"] == companion_id)
    assert not row["readable"] and "风铃草" not in json.dumps(seen, ensure_ascii=False)
    assert "银河" in _person(site, "GET", f"/v1/letters/{person_id}?space={SPACE}").json()["content"]

    time.sleep(wait + 1)
    after = _mcp(site, COMPANION, lambda c: c.call_tool("letter_read", {"query": "邮局"}))
    assert _letters(after)[person_id]["content"] == "阿澈：银河尽头的邮局今天开门了。"
    assert _letters(after)[person_id]["opened"]
    now_open = _person(site, "GET", f"/v1/letters/{companion_id}?space={SPACE}").json()
    assert now_open["readable"] and now_open["content"] == "小雨：风铃草开在窗台上。"


def test_a_permanent_letter_never_opens_and_only_its_side_unlocks_it(site):
    sealed = _person(site, "POST", "/v1/letters", json={"space": SPACE, "content": "永远只属于我的一句话。",
                                                          "lock_type": "permanent"}).json()["letter_id"]

    async def companion(client):
        read = await client.call_tool("letter_read", {})
        relock = await client.call_tool("letter_lock_update", {"letter_id": sealed, "lock_type": "none"})
        own = await client.call_tool("letter_write", {"author": "Haven", "content": "给小雨的秘密。",
                                                      "lock_type": "permanent"})
        return read, relock, own

    read, relock, own = _mcp(site, COMPANION, companion)
    assert not _letters(read)[sealed]["readable"] and "永远只属于" not in read.content[0].text
    assert relock.is_error and relock.structured_content["error"]["code"] == "forbidden"
    assert "belongs to the person" in relock.content[0].text
    own_id = own.structured_content["letter_id"]
    r = _person(site, "PATCH", f"/v1/letters/{own_id}?space={SPACE}", json={"lock_type": "none"})
    assert r.status_code == 403 and "belongs to the companion" in r.json()["error"]["message"]
    r = _person(site, "PATCH", f"/v1/letters/{sealed}?space={SPACE}", json={"lock_type": "none"})
    assert r.status_code == 200 and r.json()["lock_type"] == "none"
    again = _mcp(site, COMPANION, lambda c: c.call_tool("letter_read", {}))
    assert _letters(again)[sealed]["content"] == "永远只属于我的一句话。"


def test_a_side_is_told_apart_by_its_channel_and_its_token(site, tmp_path):
    """MCP acts for the companion, /v1/letters for the person; a token bound to a side is refused by the other."""
    r = httpx.get(f"{site.url}/v1/letters?space={SPACE}", headers={"Authorization": f"Bearer {COMPANION}"})
    assert r.status_code == 403 and r.json()["error"]["message"] == (
        "this token acts for the companion; the person's letters need the person's token")
    r = httpx.post(f"{site.url}/v1/buckets", headers={"Authorization": f"Bearer {PERSON}"},
                   json={"space": SPACE, "type": "letter", "title": "t", "body": "不经过信的路由"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "letter_route"

    async def as_person(client):
        return [await client.call_tool(t, a) for t, a in (("letter_read", {}), ("letter_write", {
            "author": "user", "content": "冒充"}), ("breath_search", {"query": "信"}))]

    read, write, search = _mcp(site, PERSON, as_person)
    assert read.is_error and read.structured_content["error"]["code"] == "forbidden"
    assert "this token acts for the person" in read.content[0].text and write.is_error
    assert not search.is_error  # only the letter tools are the companion's side; memory tools are not
    cfg = load_config(CONFIG)
    assert stdio_access(cfg, {**ENV, "OMBRE_MCP_TOKEN": PERSON}).bound_side == "person"
    with Brain.open(tmp_path / "stdio", CONFIG) as brain:  # the same over stdio: the token in the environment
        server = build_server(brain, space=SPACE, stdio=stdio_access(cfg, {**ENV, "OMBRE_MCP_TOKEN": PERSON}))

        async def go():
            async with Client(server.server) as client:
                return await client.call_tool("letter_read", {})

        assert anyio.run(go).structured_content["error"]["code"] == "forbidden"
        with pytest.raises(ForbiddenError):
            stdio_access(cfg, {**ENV, "OMBRE_MCP_TOKEN": PERSON}).side()


def test_a_sealed_letters_words_reach_nothing_else(site, tmp_path):
    """Words only a sealed letter holds: looked for in every turn, dream, search, page and route, and another space."""
    brain = site.brain
    secret, hidden = "萤火虫", "蓝色邮筒旁边的长椅"  # the first is searched for; the second is never typed anywhere
    person = _person(site, "POST", "/v1/letters", json={
        "space": SPACE, "content": f"阿澈：{secret}飞过{hidden}，我在那里等你。", "lock_type": "permanent"}).json()
    letter = person["letter_id"]
    mine = brain.letters.write(SPACE, "companion", content="小雨：我把琥珀色的钥匙藏在了书架第三层。",
                               lock_type="timed", unlock_date=_at(3600))
    words = (hidden, "琥珀色的钥匙", "书架第三层")
    for title, body in (("散步", "晚饭后我们去河边散步，看到了萤火虫。"), ("长椅", "公园的长椅刚刷了漆。"),
                        ("邮筒", "楼下新装了一个邮筒。"), ("加班", "她这周一直在加班。")):
        brain.write(SPACE, title=title, body=body)
    brain.plans.add(SPACE, "周末去看萤火虫")
    texts: list[str] = []
    for q in (secret, "长椅", "信", "钥匙", "还记得我们的信吗"):
        real = brain.turn(SPACE, "leak", q)
        texts += [real.rendered, json.dumps(real.to_dict(), ensure_ascii=False)]
    texts.append(json.dumps(brain.breath(SPACE, "leak").to_dict(), ensure_ascii=False))
    run = brain.dream_engine.run(SPACE)
    assert letter not in {m.bucket.id for m in run.material} and mine.id not in {m.bucket.id for m in run.material}
    if run.dream_id:
        texts.append(brain.store.get(SPACE, run.dream_id).body)
    headers = {"Authorization": f"Bearer {PERSON}"}
    for path in ("/v1/buckets?space={s}", "/v1/buckets/{id}?space={s}", "/api/recall-debug?space={s}&q={q}",
                 "/api/moments?space={s}", "/api/moments?space={s}&bucket_id={id}",
                 "/api/breath-debug?space={s}&q={q}",
                 "/api/diffusion-debug?space={s}&q={q}", "/api/gateway-injections?space={s}&session=leak",
                 "/debug/?space={s}&q={q}&token={t}", "/debug/breath?space={s}&q={q}&token={t}",
                 "/debug/buckets?space={s}&token={t}", "/debug/buckets/{id}?space={s}&token={t}",
                 "/debug/injections?space={s}&token={t}", "/debug/playground?space={s}&token={t}",
                 "/api/playground?space={s}"):
        for bid in (letter, mine.id):
            r = httpx.get(site.url + path.format(s=SPACE, id=bid, q=secret, t=PERSON), headers=headers, timeout=60)
            assert r.status_code == 200, (path, r.text[:300])
            texts.append(r.text if "/debug/" in path else json.dumps(strip_echo(r.json()), ensure_ascii=False))
    r = httpx.post(f"{site.url}/v1/inject", headers=headers, json={"space": SPACE, "session_id": "leak2",
                                                                   "query": secret})
    texts.append(json.dumps(strip_echo(r.json()), ensure_ascii=False))
    # the policy playground replays the recorded turns above under a draft that shows more (design §22)
    policy = httpx.get(f"{site.url}/api/playground?space={SPACE}", headers=headers).json()["policy"]
    draft = policy.replace("skip_recent_rounds: 5", "skip_recent_rounds: 0")
    assert draft != policy
    r = httpx.post(f"{site.url}/api/playground/replay", headers=headers,
                   json={"space": SPACE, "policy": draft, "last": 50}, timeout=30)
    assert r.status_code == 202, r.text
    for _ in range(600):
        job = httpx.get(f"{site.url}/api/playground/replay/{r.json()['id']}", params={"space": SPACE},
                        headers=headers, timeout=30).json()
        if job["state"] != "running":
            break
        time.sleep(0.2)
    assert job["state"] == "done" and job["result"]["source"]["turns"] >= 5, job
    assert letter not in json.dumps(job) and mine.id not in json.dumps(job)  # no letter in either policy's turns
    texts.append(json.dumps(job, ensure_ascii=False))

    async def companion(client):
        out = []
        for tool, args in (("breath", {}), ("breath_search", {"query": secret}), ("breath_search", {"query": letter}),
                           ("breath_search", {"query": f'"{secret}"'}), ("breath_advanced", {"catalog": True}),
                           ("breath_advanced", {"importance_min": 1}), ("pulse", {}), ("dream", {}),
                           ("letter_read", {}), ("letter_read", {"query": secret}),
                           ("plan", {"content": "周末去看萤火虫"}),
                           ("trace", {"bucket_id": letter, "pinned": 1}), ("I", {"read": True})):
            r = await client.call_tool(tool, args)
            out += [r.content[0].text, json.dumps(r.structured_content, ensure_ascii=False)]
        return out

    for w in words:
        assert not [t for t in texts if w in t], w
    own = _mcp(site, COMPANION, companion)  # the companion reads its own sealed letter, never the person's
    assert not [t for t in own if hidden in t] and any("琥珀色的钥匙" in t for t in own)
    assert brain.letters.get(SPACE, "person", letter).to_dict()["content"].endswith("等你。")  # it is all still there

    # another token's space: an export of this space imported there leaves the sealed letters behind
    dump = tmp_path / "space.jsonl"
    export_space(brain, SPACE, dump)
    report = import_jsonl(brain, dump, space=OTHER)
    assert sorted(p.reason.split("'")[1] for p in report.refused) == sorted([letter, mine.id])
    assert all("is sealed: it is not copied into another space" in p.reason for p in report.refused)
    assert brain.letters.letters(OTHER) == [] and report.created == brain.store.count(OTHER) > 0
    r = httpx.get(f"{site.url}/v1/buckets?space={OTHER}", headers={"Authorization": f"Bearer {OTHER_TOKEN}"})
    assert r.status_code == 200 and not any(w in r.text for w in words)
    r = httpx.get(f"{site.url}/v1/letters?space={OTHER}", headers={"Authorization": f"Bearer {OTHER_TOKEN}"})
    assert r.status_code == 200 and r.json()["letters"] == []
