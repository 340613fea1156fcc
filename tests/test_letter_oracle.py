"""Issue 50, N8 and N17: a query cannot confirm a sealed letter's words, one guess at a time.

Recent Context used to read every memory in its window for topic evidence, letters included, and list
the ones a query's words hit as ``suppressed``: a sealed letter holding the word was listed by id, one
without it was not, and ``now`` moved the window onto any letter. So the other side's token could test
words against a sealed letter. Here twelve guesses (six of the letters' words, six absent) go through
every surface that runs a turn (``/v1/inject``, the proxy and its injection log, ``/api/recall-debug``,
the breath and diffusion debug routes, MCP ``breath``, ``breath_search`` and ``breath_advanced`` over
``/mcp``), with ``now`` at the letters' own time, and no answer names a letter. An edge to a letter does
not bring it in as related memory either. A letter's writer hints are not derived from its words (N17):
its sealed metadata carries none.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import anyio
import httpx
import pytest

from ombre_brain import Brain

from .conftest import LiveServer, StandInUpstream
from .test_mcp import _http_client

SPACE = "haven:oracle"
IN_LETTERS = ["围巾", "衣柜", "望远镜", "桂花糕", "灯塔", "邮票"]
ABSENT = ["钢琴", "火车", "雨伞", "咖啡", "风筝", "书包"]
PERSON_LETTER = "我把那条蓝色围巾藏在衣柜最上层，旁边是给你买的望远镜。"
COMPANION_LETTER = "我最喜欢吃桂花糕。等灯塔亮起来的那天，我会把那枚邮票寄给你。"


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    upstream = StandInUpstream()
    brain = Brain.open(tmp_path_factory.mktemp("oracle") / "data",
                       {"upstream": {"base_url": upstream.url, "timeout_s": 10}, "server": {"default_space": SPACE}})
    brain.write(space=SPACE, title="海边", body="我们在海边捡贝壳，看日落。")
    brain.write(space=SPACE, title="晚饭", body="今天晚饭吃了面条。")
    live = LiveServer(brain)
    r = httpx.post(f"{live.url}/v1/letters", json={"space": SPACE, "content": PERSON_LETTER, "lock_type": "permanent"},
                   timeout=30)
    assert r.status_code == 201, r.text
    person = r.json()["letter_id"]

    async def write(client):
        return await client.call_tool("letter_write", {
            "author": "Haven", "content": COMPANION_LETTER, "lock_type": "timed",
            "unlock_date": (datetime.now(timezone.utc) + timedelta(days=30)).isoformat(timespec="seconds")})

    written = anyio.run(_in_mcp, live.url, write)
    assert not written.is_error, written.content[0].text
    companion = written.structured_content["letter_id"]
    # an edge from an ordinary memory to a letter: diffusion must not reach it either
    sea = next(b.id for b in brain.list(SPACE, limit=10) if b.title == "海边")
    assert httpx.post(f"{live.url}/v1/edges", json={"space": SPACE, "from_id": sea, "to_id": person,
                                                     "relation": "relates_to"}, timeout=30).status_code == 201
    live.letters = {person: brain.store.get(SPACE, person), companion: brain.store.get(SPACE, companion)}
    live.upstream = upstream
    yield live
    live.close()
    brain.close()
    upstream.server.shutdown()


async def _in_mcp(url, steps):
    async with _http_client(url, None) as client:
        return await steps(client)


def _answers(site, word: str) -> dict[str, str]:
    """Every answer a caller gets for a query holding ``word``, as text, by surface."""
    query = f"你还记得{word}吗"
    tag = f"w{(IN_LETTERS + ABSENT).index(word)}"  # a session id for this guess (headers are ASCII)
    at = max(b.created for b in site.letters.values())  # `now` on the letters' own minute
    out: dict[str, str] = {}
    for name, body in (("inject", {"space": SPACE, "session_id": f"probe-{tag}", "query": query}),
                       ("inject now", {"space": SPACE, "session_id": f"probe-now-{tag}", "query": query, "now": at})):
        r = httpx.post(f"{site.url}/v1/inject", json=body, timeout=60)
        assert r.status_code == 200, r.text
        out[name] = r.text
    for route in ("/api/recall-debug", "/api/breath-debug", "/api/diffusion-debug"):
        for params in ({"space": SPACE, "q": query}, {"space": SPACE, "q": query, "now": at}):
            r = httpx.get(f"{site.url}{route}", params=params, timeout=60)
            assert r.status_code == 200, (route, r.text[:300])
            out[f"{route} {sorted(params)}"] = r.text
    r = httpx.post(f"{site.url}/v1/chat/completions", timeout=60, headers={"X-Ombre-Session-Id": f"proxy-{tag}"},
                   json={"model": "m", "messages": [{"role": "user", "content": query}]})
    assert r.status_code == 200, r.text
    out["proxy"] = r.text + json.dumps(site.upstream.requests[-1]["body"], ensure_ascii=False)
    r = httpx.get(f"{site.url}/api/gateway-injections", params={"space": SPACE, "session": f"proxy-{tag}"},
                  timeout=30)
    out["proxy's logged turn"] = r.text

    async def tools(client):
        got = {}
        for tool, args in (("breath", {"query": query}), ("breath_search", {"query": query}),
                           ("breath_advanced", {"query": query})):
            res = await client.call_tool(tool, args)
            assert not res.is_error, (tool, res.content[0].text)
            got[f"mcp {tool}"] = res.content[0].text + json.dumps(res.structured_content, ensure_ascii=False)
        return got

    out.update(anyio.run(_in_mcp, site.url, tools))
    return out


@pytest.mark.parametrize("word", IN_LETTERS + ABSENT)
def test_no_answer_to_a_guessed_word_names_a_letter(oracle, word):
    for surface, text in _answers(oracle, word).items():
        for letter_id in oracle.letters:
            assert letter_id not in text, (surface, word, letter_id)


def test_a_sealed_letters_metadata_carries_no_hint_read_from_its_words(oracle):
    for letter_id, stored in oracle.letters.items():
        assert (stored.memory_subject, stored.memory_layer, stored.memory_classification_source) == (None,) * 3
        seen = httpx.get(f"{oracle.url}/v1/buckets/{letter_id}", params={"space": SPACE}, timeout=30).json()
        assert seen["title"] == "sealed letter"
        assert (seen["memory_subject"], seen["memory_layer"], seen["memory_classification_source"]) == (None,) * 3
