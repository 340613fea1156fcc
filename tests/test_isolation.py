"""Space isolation, property-based, over the real HTTP server with space-scoped tokens.

Random writes land in several spaces; random reads (list, get, inject, the proxy, debug
routes, facts), cross-space mutations and purges follow with random tokens. Every memory
carries a marker naming its space (``mka17`` lives in ``iso:a``), so a leak is visible in any
answer: nothing from another space may ever appear, and every out-of-scope request is 403.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict

import httpx
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ombre_brain import Brain

from .conftest import LiveServer, StandInUpstream, strip_echo

SPACES = ("iso:a", "iso:b", "iso:c")
LETTER = {s: s[-1] for s in SPACES}
TOKENS = {  # bearer secret -> the spaces it may touch
    "tok-a": ("iso:a",),
    "tok-ab": ("iso:a", "iso:b"),
    "tok-c": ("iso:c",),
    "tok-all": "*",
}
ENV = {"ISO_T_A": "tok-a", "ISO_T_AB": "tok-ab", "ISO_T_C": "tok-c", "ISO_T_ALL": "tok-all"}
CONFIG = {
    "server": {"default_space": "iso:c", "tokens": [
        {"token_env": "ISO_T_A", "spaces": ["iso:a"]},
        {"token_env": "ISO_T_AB", "spaces": ["iso:a", "iso:b"]},
        {"token_env": "ISO_T_C", "spaces": ["iso:c"]},
        {"token_env": "ISO_T_ALL", "spaces": "*"},
    ]},
    "forget": {"keys": {"iso": "OMBRE_ISO_KEY"}, "active_kid": "iso"},
}
MARK = re.compile(r"mk([abc])\d+")


def allowed(token: str, space: str) -> bool:
    scope = TOKENS[token]
    return scope == "*" or space in scope


def auth(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


def assert_only(space: str, text: str, where: str) -> None:
    foreign = sorted({m.group(0) for m in MARK.finditer(text) if m.group(1) != LETTER[space]})
    assert not foreign, f"{where} for {space} shows memories of another space: {foreign}"


def assert_denied(r: httpx.Response, where: str) -> None:
    assert r.status_code == 403, f"{where}: expected 403, got {r.status_code} {r.text[:200]}"
    if not r.headers.get("content-type", "").startswith("text/html"):  # debug pages answer in HTML
        assert r.json()["error"]["code"] == "forbidden"


class World:
    """What the test wrote, so it knows which space each id and marker belongs to."""

    def __init__(self) -> None:
        self.ids: dict[str, list[str]] = defaultdict(list)
        self.markers: list[str] = []

    def marker(self, space: str) -> str:
        m = f"mk{LETTER[space]}{len(self.markers) + 1}"
        self.markers.append(m)
        return m


@pytest.fixture(scope="module")
def iso(tmp_path_factory):
    upstream = StandInUpstream()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OMBRE_ISO_KEY", "isolation-secret")
        mp.setenv("ISO_UPSTREAM_KEY", "upstream-secret")
        config = CONFIG | {"upstream": {"base_url": upstream.url, "api_key_env": "ISO_UPSTREAM_KEY",
                                        "timeout_s": 30, "retries": 0}}
        brain = Brain.open(tmp_path_factory.mktemp("iso") / "data", config)
        world = World()
        for space in SPACES:
            for i in range(3):
                m = world.marker(space)
                world.ids[space].append(brain.write(space=space, title=f"{m} seaside memory {i}",
                                                    body=f"We talked about {m} by the sea. 我们在海边说起{m}。"))
        server = LiveServer(brain, env_tokens=ENV)
        with httpx.Client(base_url=server.url, timeout=60) as client:
            yield brain, server, client, world, upstream
        server.close()
        brain.close()
    upstream.close()


tokens = st.sampled_from(sorted(TOKENS))
spaces = st.sampled_from(SPACES)
OPS = ("write", "list", "get", "mutate", "inject", "proxy", "purge", "debug", "facts")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(data=st.data())
def test_no_space_ever_sees_another(iso, data):
    brain, server, client, world, upstream = iso
    for _ in range(data.draw(st.integers(2, 5), label="steps")):
        op = data.draw(st.sampled_from(OPS), label="op")
        token, space = data.draw(tokens, label="token"), data.draw(spaces, label="space")
        ok = allowed(token, space)
        other = data.draw(st.sampled_from([s for s in SPACES if s != space]), label="other")
        # Draw positions, not members: the world grows between examples, and draws must not depend on it.
        pick = data.draw(st.integers(0, 1 << 16), label="foreign id")
        foreign_id = world.ids[other][pick % len(world.ids[other])]
        picks = data.draw(st.lists(st.integers(0, 1 << 16), min_size=1, max_size=3), label="probe markers")
        probe = " ".join(world.markers[i % len(world.markers)] for i in picks)
        where = f"{op} token={token} space={space}"
        event(f"{op} {'in scope' if ok else 'out of scope'}")

        if op == "write":
            m = world.marker(space)
            r = client.post("/v1/buckets", headers=auth(token),
                            json={"space": space, "title": f"{m} note", "body": f"about {m}; not {other}"})
            if not ok:
                assert_denied(r, where)
                continue
            assert r.status_code == 201, r.text
            world.ids[space].append(r.json()["id"])

        elif op == "list":
            r = client.get("/v1/buckets", headers=auth(token), params={"space": space, "limit": 1000})
            if not ok:
                assert_denied(r, where)
                continue
            got = r.json()["buckets"]
            assert {b["space"] for b in got} <= {space}
            assert_only(space, r.text, where)

        elif op == "get":
            r = client.get(f"/v1/buckets/{foreign_id}", headers=auth(token), params={"space": space})
            if not ok:
                assert_denied(r, where)
                continue
            assert r.status_code == 404, f"{where}: a bucket of {other} answered {r.status_code}"
            assert_only(space, r.text, where)

        elif op == "mutate":
            kind = data.draw(st.sampled_from(["patch", "delete", "edge"]), label="mutation")
            if kind == "patch":
                r = client.patch(f"/v1/buckets/{foreign_id}", headers=auth(token), params={"space": space},
                                 json={"title": "overwritten"})
            elif kind == "delete":
                r = client.delete(f"/v1/buckets/{foreign_id}", headers=auth(token), params={"space": space})
            else:
                own = world.ids[space][0]
                r = client.post("/v1/edges", headers=auth(token), json={
                    "space": space, "from_id": own, "to_id": foreign_id, "relation": "relates_to"})
            if not ok:
                assert_denied(r, where)
            else:
                assert r.status_code == 404, f"{where} {kind}: {r.status_code} {r.text[:200]}"
            kept = brain.get(other, foreign_id)
            assert kept is not None and kept.title != "overwritten"

        elif op == "inject":
            r = client.post("/v1/inject", headers=auth(token), json={
                "space": space, "session_id": f"s-{token}", "query": f"还记得 {probe} 吗"})
            if not ok:
                assert_denied(r, where)
                continue
            assert r.status_code == 200, r.text
            assert_only(space, json.dumps(strip_echo(r.json()), ensure_ascii=False), where)

        elif op == "proxy":
            header = data.draw(st.sampled_from([None, space]), label="X-Ombre-Space")
            scope = TOKENS[token]
            if header is not None:
                expect = header if allowed(token, header) else None
            elif scope != "*" and len(scope) == 1:
                expect = scope[0]
            else:
                expect = CONFIG["server"]["default_space"] if allowed(token, "iso:c") else None
            headers = auth(token) | {"X-Ombre-Session-Id": f"p-{token}"}
            if header is not None:
                headers["X-Ombre-Space"] = header
            before = len(upstream.requests)
            content = f"X-Ombre-Space: {other}\nspace={other}\n还记得 {probe} 吗"
            r = client.post("/v1/chat/completions", headers=headers, json={
                "model": "m", "messages": [{"role": "user", "content": content}]})
            if expect is None:
                assert_denied(r, where)
                assert len(upstream.requests) == before  # nothing was forwarded
                continue
            assert r.status_code == 200, r.text
            assert r.headers["X-Ombre-Space"] == expect, "the space came from somewhere other than token/header"
            sent = upstream.requests[-1]["body"]["messages"]
            injected = "\n".join(m["content"] for m in sent if m.get("role") == "system")
            assert_only(expect, injected, f"{where} proxy system message")

        elif op == "purge":
            r = client.post("/v1/purge", headers=auth(token), json={"space": space, "bucket_ids": [foreign_id]})
            if not ok:
                assert_denied(r, where)
            else:
                assert r.status_code == 200, r.text
                assert r.json()["receipt"]["payload"]["deleted"]["buckets"] == 0
            assert brain.get(other, foreign_id) is not None, "a purge in one space removed another's memory"

        elif op == "debug":
            route = data.draw(st.sampled_from(["/api/moments", "/api/recall-debug", "/api/breath-debug",
                                               "/api/diffusion-debug", "/api/gateway-injections",
                                               "/debug/buckets"]), label="route")
            page = route.startswith("/debug/")  # pages echo q in links and forms; they list without it
            params = {"space": space} if page else {"space": space, "q": probe}
            r = client.get(route, headers=auth(token), params=params)
            if r.status_code == 404 and "not_found" in r.text and route not in {x.rule for x in
                                                                             server.app.url_map.iter_rules()}:
                continue
            if not ok:
                assert_denied(r, where + " " + route)
                continue
            assert r.status_code == 200, (route, r.status_code, r.text[:300])
            text = r.text if page else json.dumps(strip_echo(r.json()), ensure_ascii=False)
            assert_only(space, text, f"{where} {route}")

        else:  # facts
            r = client.get("/v1/facts", headers=auth(token), params={"space": space})
            if not ok:
                assert_denied(r, where)
            else:
                assert r.status_code == 200, r.text

        # The stores themselves: lexical and vector search in a space never return another's moments.
        for m in probe.split():
            owner = next(s for s in SPACES if LETTER[s] == m[2])
            hits = brain.store.lexical_search(space, brain.tokenize(m), 50)
            if owner != space:
                assert hits == {}, f"lexical search in {space} found {m}"
        own = set(brain.store.chroma.all_ids(space))
        assert all(mid.split("#")[0] not in world.ids[other] for mid in own)


def test_missing_or_unknown_tokens_are_401(iso):
    _brain, _server, client, _world, _upstream = iso
    for headers in ({}, auth("nope"), {"Authorization": "Basic tok-all"}):
        r = client.get("/v1/buckets", headers=headers, params={"space": "iso:a"})
        assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
    r = client.post("/v1/purge", headers=auth("nope"), json={"space": "iso:a", "whole_space": True})
    assert r.status_code == 401


def test_vector_search_is_confined_to_its_collection(iso):
    brain, _server, _client, world, _upstream = iso
    for space in SPACES:
        vec = brain.embedder.query("seaside memory by the sea 海边")
        hits = brain.store.vector_search(space, vec, 100)
        assert hits and {h.split("#")[0] for h in hits} <= set(world.ids[space])
    names = {brain.store.chroma.collection(s).name for s in SPACES}
    assert len(names) == len(SPACES)  # one collection per space
