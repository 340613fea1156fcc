"""Debug JSON routes against a real server and the demo persona: every item explains itself.

The routes run the real pipeline as a dry run, so a candidate's reason in /api/recall-debug
must be the reason the real TURN gives, and the dry run must leave no session trace.
"""

from __future__ import annotations

import httpx
import pytest

from ombre_brain.retrieval.features import FEATURES
from ombre_brain.turn.gate_table import GATES

from .conftest import LiveServer

GATE_NAMES = GATES.names

SPACE = "haven:xiaoyu"
QUERY = "外婆住院的时候"
NOW = "2026-12-01T21:00:00+08:00"
RUNTIME_KEYS = {*GATE_NAMES, "decision", "section", "reason"}
LAYER_KEYS = {"layer", "writer_hint", "signals", "policy"}
READER_KEYS = {"reader", "veto"}  # where the reader read the pair: its probability and the veto it was held against


@pytest.fixture(scope="module")
def demo(demo_brain):
    return demo_brain


@pytest.fixture(scope="module")
def api(demo):
    s = LiveServer(demo)
    with httpx.Client(base_url=s.url, timeout=60) as c:
        yield c
    s.close()


@pytest.fixture(scope="module")
def locked(demo):
    s = LiveServer(demo, env_tokens={"OMBRE_TOKEN": "debug-secret"})
    yield s
    s.close()


def assert_explained(item: dict, where: str) -> None:
    """The §5 shape: layer_debug with its keys; runtime_gate with exactly the seven gates plus the decision."""
    ld, rg = item.get("layer_debug"), item.get("runtime_gate")
    assert isinstance(ld, dict) and LAYER_KEYS <= set(ld), f"{where}: layer_debug {ld!r}"
    assert isinstance(rg, dict) and set(rg) == RUNTIME_KEYS, f"{where}: runtime_gate keys {sorted(rg or {})}"
    for name in GATE_NAMES:
        g = rg[name]
        # the admission score when weighed, with the threshold it was held against
        extra = {"evidence", "features", "threshold", "threshold_name"} if name == "direct_seed" else set()
        assert {"allowed", "reason"} <= set(g) <= {"allowed", "reason"} | extra, (where, name, g)
        assert g["allowed"] in (True, False, None) and g["reason"], (where, name, g)
        if "evidence" in g:
            assert 0 <= g["evidence"] <= 1 and g["features"], (where, g)
            assert set(g["features"]) <= set(FEATURES.names) | READER_KEYS, (where, g)
    assert rg["decision"] in ("injected", "suppressed") and rg["reason"], (where, rg)


def get(api, path, **params):
    r = api.get(path, params=params)
    assert r.status_code == 200, r.text
    return r.json()


def test_recall_debug_shows_plan_scores_verdicts_and_returned_moments(api):
    d = get(api, "/api/recall-debug", space=SPACE, q=QUERY, now=NOW)
    assert d["plan"]["terms"] and d["plan"]["context_mode"]
    assert d["retrieval"]["candidates"] == len(d["candidates"]) > 5
    by_id = {c["bucket_id"]: c for c in d["candidates"]}
    for c in d["candidates"]:
        assert_explained(c, f"candidate {c['bucket_id']}")
        assert {"vector_score", "lexical_score", "fused", "rank", "admission", "best_moment", "hits"} <= set(c)
        assert set(c["admission"]) >= {"admitted", "reason"}
        assert c["reason"] == c["runtime_gate"]["reason"] and c["decision"] == c["runtime_gate"]["decision"]
    hospital = by_id["grandma_hospital"]
    assert hospital["decision"] == "injected" and hospital["section"] == "recalled_memory"
    assert hospital["admission"]["admitted"] and hospital["lexical_score"] > 0 and hospital["fused"] > 0
    assert hospital["returned_moment"] and hospital["returned_moment"].startswith("grandma_hospital")
    feel = by_id["feel_hospital"]  # a feeling matches the words but may never be a direct hit
    assert feel["decision"] == "suppressed" and feel["reason"] == "layer_never_direct"
    assert feel["runtime_gate"]["direct_seed"] == {"allowed": False, "reason": "layer_never_direct"}
    assert {r["bucket_id"] for r in d["returned"]} >= {"grandma_hospital", "grandma_recovered"}
    for r in d["returned"]:
        assert_explained(r, f"returned {r['bucket_id']}")
    for s in d["suppressed"]:
        assert_explained(s, f"suppressed {s['bucket_id']}")
    assert "外婆" in d["rendered"] and d["timings_ms"]["candidates"] >= 0


def test_dry_run_matches_the_real_turn_and_writes_nothing(api, demo):
    session = "compare-dry-and-real"
    before = demo.gateway.sessions.sessions(SPACE)
    debug = get(api, "/api/recall-debug", space=SPACE, q=QUERY, session=session, now=NOW)
    get(api, "/api/breath-debug", space=SPACE, q=QUERY, session=session, now=NOW)
    get(api, "/api/diffusion-debug", space=SPACE, q=QUERY, session=session, now=NOW)
    get(api, "/api/moments", space=SPACE, q=QUERY, session=session, now=NOW)
    assert demo.gateway.sessions.sessions(SPACE) == before
    assert get(api, "/api/gateway-injections", space=SPACE, session=session)["turns"] == []

    r = api.post("/v1/inject", json={"space": SPACE, "session_id": session, "query": QUERY, "now": NOW})
    assert r.status_code == 200, r.text
    turn = r.json()
    first_reason: dict[str, str] = {}
    for s in turn["suppressed"]:
        first_reason.setdefault(s["bucket_id"], s["reason"])
    injected = {it["bucket_id"]: sec["key"] for sec in turn["stable"] + turn["sections"] for it in sec["items"]
                if it["bucket_id"]}
    suppressed = [c for c in debug["candidates"] if c["decision"] == "suppressed" and c["bucket_id"] in first_reason]
    assert len(suppressed) >= 3
    for c in suppressed:
        assert c["reason"] == first_reason[c["bucket_id"]], c["bucket_id"]
        assert c["runtime_gate"] == next(s["runtime_gate"] for s in turn["suppressed"]
                                         if s["bucket_id"] == c["bucket_id"])
    for c in debug["candidates"]:
        if c["decision"] == "injected":
            assert injected[c["bucket_id"]] == c["section"]
    assert debug["rendered"] == turn["rendered"]
    logged = get(api, "/api/gateway-injections", space=SPACE, session=session)["turns"]
    assert len(logged) == 1 and logged[0]["query"] == QUERY


def test_diffusion_debug_paths_and_refusals(api):
    d = get(api, "/api/diffusion-debug", space=SPACE, q=QUERY, now=NOW)
    seeds = {s["bucket_id"]: s for s in d["seeds"]}
    assert seeds["grandma_hospital"]["strength"] == 1.0 and seeds["grandma_hospital"]["spreads"]
    for s in d["seeds"]:
        assert_explained(s, f"seed {s['bucket_id']}")
    hits = {h["bucket_id"]: h for h in d["hits"]}
    for h in d["hits"]:
        assert_explained(h, f"hit {h['bucket_id']}")
        assert h["path"] and h["path"][0]["from_id"] == h["seed_id"] and h["path"][-1]["to_id"] == h["bucket_id"]
        for step in h["path"]:
            assert {"relation", "confidence", "activation"} <= set(step)
        assert h["activation"] == pytest.approx(h["path"][-1]["activation"], abs=1e-3)
    after = hits["grandma_recovered"]  # the stay in hospital's newer version, one edge away
    assert after["taken"] and after["decision"] == "injected" and after["section"] == "diffused_memory"
    assert after["runtime_gate"]["related_target"]["allowed"] is True
    assert after["path"][0]["relation"] == "old_version" and after["seed_id"] == "grandma_hospital"
    feel = hits["feel_hospital"]
    assert not feel["taken"] and feel["reason"] == "layer_never_diffused"
    assert feel["runtime_gate"]["related_target"] == {"allowed": False, "reason": "layer_never_diffused"}
    kinds = {n["id"]: n["kind"] for n in d["graph"]["nodes"]}
    assert kinds["grandma_recovered"] == "taken" and kinds["feel_hospital"] == "refused"
    assert kinds["grandma_hospital"] == "seed"
    assert any(e["on_path"] for e in d["graph"]["edges"])


def test_breath_debug_lists_every_bucket_with_would_surface(api, demo):
    d = get(api, "/api/breath-debug", space=SPACE, q=QUERY, now=NOW)
    assert d["count"] == d["listed"] == len(d["buckets"]) == demo.store.count(SPACE)
    rows = {b["bucket_id"]: b for b in d["buckets"]}
    for b in d["buckets"]:
        assert_explained(b, f"breath {b['bucket_id']}")
        assert b["would_surface"] == (b["decision"] == "injected")
    assert rows["grandma_hospital"]["would_surface"] and rows["grandma_hospital"]["scores"]["rank"] == 1
    assert rows["grandma_recovered"]["would_surface"] and rows["grandma_recovered"]["activation"] > 0
    surfacing = {b for b, row in rows.items() if row["would_surface"]}
    recall = get(api, "/api/recall-debug", space=SPACE, q=QUERY, now=NOW)
    assert surfacing == {r["bucket_id"] for r in recall["returned"]}
    unseen = [b for b in d["buckets"] if b["reason"] == "not_a_candidate"]
    assert unseen, "some demo bucket is neither a candidate nor in a side section"
    for b in unseen:
        assert b["scores"] is None and not b["would_surface"]
        assert all(b["runtime_gate"][g] == {"allowed": None, "reason": "not_applicable"} for g in GATE_NAMES)


def test_moments_per_bucket_and_bulk(api, demo):
    d = get(api, "/api/moments", space=SPACE, bucket_id="first_snow")
    assert d["reason"] == "no_query" and d["layer"] == "favorite_memory"
    moments = d["moments"]
    assert [m["ordinal"] for m in moments] == sorted(m["ordinal"] for m in moments)
    assert any(m["context_only"] for m in moments) and any(not m["context_only"] for m in moments)
    for m in moments:
        assert_explained(m, m["moment_id"])
        assert len(m["text_hash"]) == 16 and m["section"]
    assert all(e["from_id"] == "first_snow" or e["to_id"] == "first_snow" for e in d["edges"])

    q = get(api, "/api/moments", space=SPACE, bucket_id="grandma_hospital", q=QUERY, now=NOW)
    assert q["decision"] == "injected" and q["query"] == QUERY
    assert sum(m["returned"] for m in q["moments"]) == 1 and any(m["hit"] for m in q["moments"])
    assert q["edges"] and {"relation", "confidence"} <= set(q["edges"][0])

    bulk = get(api, "/api/moments", space=SPACE)
    assert bulk["totals"]["buckets"] == demo.store.count(SPACE) == len(bulk["buckets"])
    assert bulk["totals"]["moments"] == sum(b["moments"] for b in bulk["buckets"]) > len(bulk["buckets"])
    assert bulk["totals"]["context_only"] > 0 and bulk["totals"]["edges"] > 0
    for b in bulk["buckets"]:
        assert_explained(b, f"bulk {b['bucket_id']}")
    with_q = get(api, "/api/moments", space=SPACE, q=QUERY, now=NOW)
    assert {b["bucket_id"]: b["decision"] for b in with_q["buckets"]}["grandma_hospital"] == "injected"


def test_gateway_injections_are_the_recorded_turns_with_timings(api):
    for q in ("还记得我们去海边那次吗", QUERY):
        assert api.post("/v1/inject", json={"space": SPACE, "session_id": "log", "query": q}).status_code == 200
    d = get(api, "/api/gateway-injections", space=SPACE, session="log", limit=5)
    assert [t["query"] for t in d["turns"]] == [QUERY, "还记得我们去海边那次吗"]
    assert "log" in {s["session"] for s in d["sessions"]}
    for t in d["turns"]:
        assert {"plan", "candidates", "gates", "diffusion", "render", "budget"} <= set(t["timings_ms"])
        items = [it for sec in t["stable"] + t["sections"] for it in sec["items"] if it["bucket_id"]]
        assert items
        for it in items + t["suppressed"]:
            assert_explained(it, f"logged {it['bucket_id']}")
    assert len(get(api, "/api/gateway-injections", space=SPACE, session="log", limit=1)["turns"]) == 1


@pytest.mark.parametrize("path,params,status,needle", [
    ("/api/recall-debug", {"space": SPACE}, 400, "q: is required"),
    ("/api/recall-debug", {"q": QUERY}, 400, "space"),
    ("/api/breath-debug", {"space": SPACE, "q": QUERY, "limit": "many"}, 400, "limit"),
    ("/api/moments", {"space": SPACE, "bucket_id": "no_such_bucket"}, 404, "no_such_bucket"),
    ("/api/diffusion-debug", {"space": "Not A Space!", "q": QUERY}, 400, "space"),
    ("/api/recall-debug", {"space": SPACE, "q": QUERY, "now": "yesterday"}, 400, "now"),
])
def test_bad_requests_are_clear_json(api, path, params, status, needle):
    r = api.get(path, params=params)
    assert r.status_code == status, r.text
    assert needle in r.json()["error"]["message"]


ROUTES = [("/api/recall-debug", {"q": QUERY}), ("/api/moments", {}), ("/api/moments", {"bucket_id": "grandma"}),
          ("/api/diffusion-debug", {"q": QUERY}), ("/api/breath-debug", {"q": QUERY}),
          ("/api/gateway-injections", {})]


@pytest.mark.parametrize("path,params", ROUTES)
def test_debug_routes_need_the_token(locked, path, params):
    url = locked.url + path
    params = {"space": SPACE, **params}
    missing = httpx.get(url, params=params, timeout=60)
    assert missing.status_code == 401 and missing.json()["error"]["code"] == "unauthorized"
    assert httpx.get(url, params=params, headers={"Authorization": "Bearer nope"}, timeout=60).status_code == 401
    assert httpx.get(url, params={k: v for k, v in params.items() if k != "space"}, timeout=60).status_code == 401
    ok = httpx.get(url, params=params, headers={"Authorization": "Bearer debug-secret"}, timeout=60)
    assert ok.status_code == 200, ok.text
