"""Purge, receipts, suppression and provenance, on real stores and the real HTTP server.

After a purge the distinctive words of the purged buckets are searched for everywhere a
reader could find them: the HTTP API, the debug routes, Brain.get, both search indexes,
every Chroma collection, every ledger table and the ledger's bytes on disk, and an export.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import importlib.util
import json
import sqlite3

import httpx
import pytest

from ombre_brain import Brain, ConfigError, ProvenanceError, SourceSuppressedError, ValidationError
from ombre_brain.cli import main as cli_main
from ombre_brain.forget.receipts import canonical, verify

from .conftest import LiveServer, embedded_keys, without_echo

KEYS = {"forget": {"keys": {"k1": "OMBRE_TEST_K1"}, "active_kid": "k1"}}
SECRET = "first-secret-key"
A, B = "forget:a", "forget:b"
# Distinctive words of the material to purge: English, and Chinese that jieba keeps whole.
WORDS = ("zorbluxian", "quaffleberry", "glimmerwick", "蓝鲸灯塔")
WORDS_B = ("plinthorax", "marrowquist", "dunkelspire", "紫藤书院")  # the same story in space B


@pytest.fixture
def keyed(monkeypatch):
    monkeypatch.setenv("OMBRE_TEST_K1", SECRET)


@pytest.fixture
def fbrain(brain_path, keyed):
    b = Brain.open(brain_path, KEYS)
    yield b
    b.close()


@pytest.fixture
def fserver(fbrain):
    s = LiveServer(fbrain)
    yield s
    s.close()


@pytest.fixture
def fclient(fserver):
    with httpx.Client(base_url=fserver.url, timeout=30) as c:
        yield c


def seed(brain, space: str = A, words: tuple[str, ...] = WORDS) -> dict:
    """Two buckets to purge (with an edge, a dream, a session trace) and two to keep."""
    w1, w2, w3, zh = words
    ids = {
        "gone": brain.write(space=space, title=f"{w1} lighthouse night", source="chat:7",
                            body=f"### moment\nWe ate {w2} pie by the {zh}.\n\n### comment\n{w3}"),
        "gone2": brain.write(space=space, title=f"second {w1} note", body=f"more {w2} talk"),
        "keep": brain.write(space=space, title="ordinary walk", body="We walked to the bakery and bought bread."),
        "keep2": brain.write(space=space, title="tea", body="Green tea in the afternoon."),
    }
    brain.link(space, ids["gone"], ids["keep"], "relates_to", 0.7)
    brain.link(space, ids["keep"], ids["keep2"], "same_event", 0.9)
    ids["dream_only"] = brain.write(space=space, title=f"dream of {w3}", type="dream",
                                    body=f"A {w1} sea.", source_bucket_ids=[ids["gone"], ids["gone2"]])
    ids["dream_mixed"] = brain.write(space=space, title="dream of bread", type="dream",
                                     body="A bakery at dawn.", source_bucket_ids=[ids["gone"], ids["keep"]])
    turn = brain.turn(space, session="s1", query=f"do you remember the {w2} pie?").to_dict()
    assert w2 in turn["rendered"], turn["rendered"]  # the session now holds the text to purge
    brain.turn(space, session="s2", query="do you remember the green tea?")
    return ids


def ledger_dump(brain) -> str:
    if brain.ledger.path is None:  # PostgreSQL: every table of the ledger's schema, read through it
        return "\n".join(repr([tuple(r) for r in brain.ledger.query(f'SELECT * FROM "{t}"')])
                         for t in brain.ledger.tables())
    conn = sqlite3.connect(brain.ledger.path)
    try:
        out = []
        for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
            out.append(repr(conn.execute(f'SELECT * FROM "{table}"').fetchall()))
        return "\n".join(out)
    finally:
        conn.close()


def chroma_dump(brain) -> str:
    client = brain.store.chroma.client
    out = []
    for col in client.list_collections():
        col = client.get_collection(col.name if hasattr(col, "name") else col, embedding_function=None)
        got = col.get(include=["documents", "metadatas"])
        out.append(repr((got["ids"], got["documents"], got["metadatas"])))
    return "\n".join(out)


def get_routes(server, prefix: str) -> list[str]:
    return sorted({r.rule for r in server.app.url_map.iter_rules()
                   if r.rule.startswith(prefix) and "GET" in r.methods and "<" not in r.rule})


def assert_forgotten(brain, server, client, space, gone_ids, words=WORDS):
    """Nothing a reader can reach still holds any purged word or id."""
    for bid in gone_ids:
        assert brain.get(space, bid) is None
        assert client.get(f"/v1/buckets/{bid}", params={"space": space}).status_code == 404
    # The stores first: the probes below are turns, and turns log their own (probing) query.
    seen = {"chroma": chroma_dump(brain), "ledger": ledger_dump(brain)}
    if brain.ledger.path is not None:  # PostgreSQL keeps dead tuples until VACUUM (docs/deploy.md)
        raw = b"".join(p.read_bytes() for p in brain.ledger.path.parent.glob("ledger.db*"))
        for w in words:
            assert w.encode() not in raw, f"{w} still in the ledger file's bytes"
    seen["GET /v1/buckets"] = client.get("/v1/buckets", params={"space": space, "limit": 1000}).text
    for route in get_routes(server, "/debug/") + get_routes(server, "/v1/facts"):  # pages list what is stored
        r = client.get(route, params={"space": space})
        assert r.status_code < 500, (route, r.text)
        seen[f"GET {route}"] = r.text
    if any(r.rule == "/debug/buckets/<bucket_id>" for r in server.app.url_map.iter_rules()):
        for bid in gone_ids:
            r = client.get(f"/debug/buckets/{bid}", params={"space": space})
            assert r.status_code == 404, (bid, r.status_code)
            seen[f"GET /debug/buckets/{bid}"] = r.text
    for route in get_routes(server, "/api/"):
        for w in words:
            r = client.get(route, params={"space": space, "q": w})
            assert r.status_code < 500, (route, r.text)
            seen[f"GET {route}?q={w}"] = without_echo(r)
    if "/v1/inject" in {r.rule for r in server.app.url_map.iter_rules()}:
        for w in words:
            r = client.post("/v1/inject", json={"space": space, "session_id": "probe", "query": f"还记得{w}吗"})
            assert r.status_code == 200, r.text
            seen[f"POST /v1/inject {w}"] = without_echo(r)
    lex = brain.store.lexical(space)
    for w in words:
        toks = brain.tokenize(w)
        assert toks, w
        assert brain.store.lexical_search(space, toks, 100) == {}
        assert all(lex.doc_freq(t) == 0 for t in toks)
        assert not any(t in lex._vocab for t in toks)  # not even dead vocabulary is held
        vec = brain.embedder.query(w)
        hits = brain.store.vector_search(space, vec, 50)
        assert not any(h.split("#")[0] in gone_ids for h in hits)
    if importlib.util.find_spec("ombre_brain.portability.jsonl") is not None:
        seen["export"] = export_text(brain, space)
    for where, text in seen.items():
        for w in words:
            assert w not in text, f"{w!r} found in {where}: {text[max(0, text.find(w) - 300):text.find(w) + 60]}"


def export_text(brain, space) -> str:
    from ombre_brain.errors import NotFoundError
    from ombre_brain.portability.jsonl import export_rows

    try:
        return json.dumps(export_rows(brain, space), ensure_ascii=False)
    except NotFoundError:  # a purged whole space has nothing left to export
        return ""


def independent_check(receipt: dict, secret: str) -> bool:
    raw = json.dumps(receipt["payload"], sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    mac = base64.urlsafe_b64encode(hmac.new(secret.encode(), raw, hashlib.sha256).digest()).rstrip(b"=")
    return hmac.compare_digest(mac.decode(), receipt["signature"])


# ---------------------------------------------------------------- purge by bucket ids


def test_purge_buckets_over_http_leaves_no_trace(fbrain, fserver, fclient):
    ids = seed(fbrain)
    seed(fbrain, B, WORDS_B)  # the same story in another space stays
    before_b = fbrain.store.count(B)
    r = fclient.post("/v1/purge", json={"space": A, "bucket_ids": [ids["gone"], ids["gone2"]]})
    assert r.status_code == 200, r.text
    ans = r.json()
    assert ans["status"] == "purged" and ans["purge_id"] == ans["receipt"]["payload"]["purge_id"]
    p = ans["receipt"]["payload"]
    assert p["typ"] == "purge-receipt+v1" and p["kid"] == "k1" and p["space"] == A
    assert p["target"] == {"bucket_ids": sorted([ids["gone"], ids["gone2"]])}
    # both dreams made from them go too: the one fed by a surviving bucket as well may quote the purged words
    assert p["deleted"]["buckets"] == 4 and p["deleted"]["dreams"] == 2
    assert p["deleted"]["edges"] == 1 and p["deleted"]["moments"] >= 6 and p["deleted"]["sessions"] >= 2
    assert independent_check(ans["receipt"], SECRET)

    assert_forgotten(fbrain, fserver, fclient, A, [ids["gone"], ids["gone2"], ids["dream_only"], ids["dream_mixed"]])
    kept = {b["id"] for b in fclient.get("/v1/buckets", params={"space": A}).json()["buckets"]}
    assert kept == {ids["keep"], ids["keep2"]}
    assert [(e.from_id, e.to_id) for e in fbrain.edges(A)] == [(ids["keep"], ids["keep2"])]
    assert fbrain.gateway.sessions.sessions(A)  # the unrelated session s2 keeps its history
    assert fbrain.store.count(B) == before_b
    assert fbrain.store.lexical_search(B, fbrain.tokenize("marrowquist"), 10)


def test_receipt_verifies_independently_and_fails_on_one_changed_byte(fbrain):
    ids = seed(fbrain)
    receipt = fbrain.purge(A, bucket_ids=[ids["gone"]])
    assert independent_check(receipt, SECRET)
    assert verify(receipt, {"k1": SECRET.encode()}) == "k1"
    raw = bytearray(canonical(receipt["payload"]))
    i = raw.index(A.encode())
    raw[i] ^= 0x20  # 'f' -> 'F'
    forged = {"payload": json.loads(raw.decode()), "signature": receipt["signature"]}
    assert not independent_check(forged, SECRET)
    with pytest.raises(ValidationError):
        verify(forged, {"k1": SECRET.encode()})


def test_repeating_a_purge_returns_the_original_receipt(fbrain, fserver, fclient):
    ids = seed(fbrain)
    first = fclient.post("/v1/purge", json={"space": A, "bucket_ids": [ids["gone"]]}).json()
    again = fclient.post("/v1/purge", json={"space": A, "bucket_ids": [ids["gone"]]}).json()
    assert again == first
    assert fbrain.purge(A, bucket_ids=[ids["gone"], ids["gone"]]) == first["receipt"]  # same target, normalised
    whole = fbrain.purge(B, whole_space=True)
    assert fbrain.purge(B, whole_space=True) == whole
    rows = fbrain.ledger.query("SELECT COUNT(*) n FROM purges")
    assert rows[0]["n"] == 2


def test_new_material_under_a_purged_target_is_a_new_purge(fbrain):
    bid = fbrain.write(space=A, id="reused", title="first glimmerwick")
    first = fbrain.purge(A, bucket_ids=[bid])
    fbrain.write(space=A, id="reused", title="second glimmerwick")
    second = fbrain.purge(A, bucket_ids=[bid])
    assert second["payload"]["purge_id"] != first["payload"]["purge_id"]
    assert second["payload"]["deleted"]["buckets"] == 1 and fbrain.get(A, bid) is None


def test_activity_after_a_whole_space_purge_is_purged_again_with_a_new_receipt(fbrain):
    fbrain.write(space=A, title="glimmerwick")
    first = fbrain.purge(A, whole_space=True)
    fbrain.turn(A, session="s9", query="do you remember the glimmerwick?")  # a session trace, no bucket
    second = fbrain.purge(A, whole_space=True)
    assert second["payload"]["purge_id"] != first["payload"]["purge_id"]
    assert second["payload"]["deleted"]["sessions"] >= 1 and second["payload"]["deleted"]["buckets"] == 0
    assert fbrain.purge(A, whole_space=True) == second
    assert "glimmerwick" not in ledger_dump(fbrain)


def test_purge_of_unknown_ids_is_an_honest_empty_receipt(fbrain):
    r = fbrain.purge(A, bucket_ids=["never-was"])
    assert r["payload"]["deleted"]["buckets"] == 0 and independent_check(r, SECRET)


# ---------------------------------------------------------------- whole space, source


def test_whole_space_purge_leaves_other_spaces_untouched(fbrain, fserver, fclient):
    seed(fbrain, A)
    ids_b = seed(fbrain, B, WORDS_B)
    snapshot = {b["id"]: b for b in fclient.get("/v1/buckets", params={"space": B, "limit": 100}).json()["buckets"]}
    chroma_b = fbrain.store.chroma.count(B)
    r = fclient.post("/v1/purge", json={"space": A, "whole_space": True})
    assert r.status_code == 200, r.text
    d = r.json()["receipt"]["payload"]["deleted"]
    assert d["buckets"] == 6 and d["edges"] == 2 and d["dreams"] == 2
    assert A not in fbrain.spaces() and fclient.get("/v1/buckets", params={"space": A}).json()["buckets"] == []
    assert_forgotten(fbrain, fserver, fclient, A, [])
    after = {b["id"]: b for b in fclient.get("/v1/buckets", params={"space": B, "limit": 100}).json()["buckets"]}
    assert after == snapshot
    assert fbrain.store.chroma.count(B) == chroma_b and len(fbrain.edges(B)) == 2
    assert fbrain.gateway.sessions.sessions(B) and fbrain.get(B, ids_b["gone"]) is not None
    for w in WORDS_B:
        assert fbrain.store.lexical_search(B, fbrain.tokenize(w), 10)


def test_purge_by_source_suppresses_reingestion_in_that_space_only(fbrain, fserver, fclient):
    a1 = fbrain.write(space=A, title="zorbluxian one", source="chat:99")
    a2 = fbrain.write(space=A, title="quaffleberry two", source="chat:99")
    other = fbrain.write(space=A, title="unrelated", source="chat:100")
    b1 = fbrain.write(space=B, title="plinthorax one", source="chat:99")
    r = fclient.post("/v1/purge", json={"space": A, "source": "chat:99"})
    assert r.status_code == 200, r.text
    assert r.json()["receipt"]["payload"]["target"] == {"source": "chat:99"}
    assert r.json()["receipt"]["payload"]["deleted"]["buckets"] == 2
    assert fbrain.get(A, a1) is None and fbrain.get(A, a2) is None and fbrain.get(A, other) is not None
    for w in ("zorbluxian", "quaffleberry"):
        assert w not in ledger_dump(fbrain) and w not in chroma_dump(fbrain)
    again = fclient.post("/v1/buckets", json={"space": A, "title": "zorbluxian one", "source": "chat:99"})
    assert again.status_code == 409 and again.json()["error"]["code"] == "source_suppressed"
    with pytest.raises(SourceSuppressedError):
        fbrain.update(A, other, source="chat:99")
    assert fbrain.get(B, b1) is not None
    assert fclient.post("/v1/buckets", json={"space": B, "title": "new", "source": "chat:99"}).status_code == 201
    assert fbrain.forget.is_suppressed(A, fbrain.forget.source_digest(A, "chat:99"))
    assert not fbrain.forget.is_suppressed(B, fbrain.forget.source_digest(B, "chat:99"))


def test_purging_buckets_suppresses_their_sources(fbrain):
    bid = fbrain.write(space=A, title="glimmerwick", source="diary:3")
    fbrain.purge(A, bucket_ids=[bid])
    with pytest.raises(SourceSuppressedError, match="diary:3"):
        fbrain.write(space=A, title="glimmerwick again", source="diary:3")


def test_queued_exchanges_lose_the_text_of_purged_memories(fbrain):
    from ombre_brain.gateway.jobs import JobTable

    jobs = JobTable(fbrain.ledger)
    jobs.insert("ab12" * 16, A, "s1", {"user": "I told you about the glimmerwick", "assistant": "ok"})
    jobs.insert("cd34" * 16, A, "s1", {"user": "plain tea talk", "assistant": "ok"})
    bid = fbrain.write(space=A, title="glimmerwick", source="exchange:" + "ab12" * 16)
    fbrain.purge(A, bucket_ids=[bid])
    assert "glimmerwick" not in ledger_dump(fbrain) and "plain tea talk" in ledger_dump(fbrain)
    assert not jobs.insert("ab12" * 16, A, "s1", {"user": "I told you about the glimmerwick", "assistant": "ok"})
    fbrain.purge(A, whole_space=True)
    assert "plain tea talk" not in ledger_dump(fbrain)


def test_capabilities_hear_about_purges(fbrain):
    calls = []

    class Hook:
        def on_purge(self, space, bucket_ids, digests, whole_space):
            calls.append((space, bucket_ids, len(digests), whole_space))
            return 2

    fbrain.forget.participants += (Hook(),)
    bid = fbrain.write(space=A, title="x", source="s:1")
    r = fbrain.purge(A, bucket_ids=[bid])
    assert calls == [(A, [bid], 1, False)] and r["payload"]["deleted"]["other"] == 2


def test_facts_lose_support_from_purged_buckets(fbrain):
    try:
        facts = fbrain.facts
    except ImportError:
        pytest.skip("the facts store has not landed yet")
    if not hasattr(facts, "remove_bucket_support"):
        pytest.skip("the facts store does not expose remove_bucket_support yet")
    bid = fbrain.write(space=A, title="diet note", body="I am vegetarian, zorbluxian style")
    res = facts.submit({"space": A, "source": {"producer": "test", "event_id": "e1", "revision": 1,
                                               "fragment": f"bucket:{bid}"},
                        "subject": "user", "role": "structured_confirmation", "text": "zorbluxian vegetarian",
                        "edits": [{"op": "establish", "key": "diet", "value": "zorbluxian vegetarian"}]})
    assert res["accepted"] if isinstance(res, dict) else res.accepted
    r = fbrain.purge(A, bucket_ids=[bid])
    assert r["payload"]["deleted"]["facts"] >= 1
    assert "zorbluxian" not in ledger_dump(fbrain)


# ---------------------------------------------------------------- keys and configuration


@embedded_keys
def test_missing_secret_refuses_to_purge_and_names_the_variable(brain_path, monkeypatch):
    monkeypatch.delenv("OMBRE_TEST_K1", raising=False)
    with Brain.open(brain_path, KEYS) as b:
        bid = b.write(space=A, title="keep me")
        with pytest.raises(ConfigError, match="OMBRE_TEST_K1"):
            b.purge(A, bucket_ids=[bid])
        assert b.get(A, bid) is not None  # nothing was deleted without a receipt
        s = LiveServer(b)
        try:
            r = httpx.post(f"{s.url}/v1/purge", json={"space": A, "bucket_ids": [bid]})
            assert r.status_code == 503 and "OMBRE_TEST_K1" in r.json()["error"]["message"]
        finally:
            s.close()
    monkeypatch.setenv("OMBRE_TEST_K1", "")
    with Brain.open(brain_path, KEYS) as b, pytest.raises(ConfigError, match="empty"):
        b.purge(A, bucket_ids=[bid])
    with Brain.open(brain_path, {"forget": {"keys": {"k1": "OMBRE_TEST_K1", "k2": "OMBRE_TEST_K2"}}}) as b, \
            pytest.raises(ConfigError, match="forget.active_kid"):
        b.purge(A, bucket_ids=[bid])


@embedded_keys
def test_forgetting_works_with_the_default_config(tmp_path, capsys):
    """No keys configured: a local key is made with the data directory (owner-only) and named in receipts."""
    data = tmp_path / "d"
    with Brain.open(data) as b:
        bid = b.write(space=A, title="the glimmerwick lantern")
        r = b.purge(A, bucket_ids=[bid])
    key = data / "forget.key"
    assert key.exists() and (key.stat().st_mode & 0o777) == 0o600
    assert r["payload"]["kid"].startswith("local-") and r["payload"]["kid"] in key.read_text()
    receipt = tmp_path / "r.json"
    receipt.write_text(json.dumps(r))
    assert cli_main(["verify-receipt", "--data", str(data), str(receipt)]) == 0
    with Brain.open(data) as b:  # the same key on reopening: old receipts stay verifiable
        assert b.purge(A, bucket_ids=[bid]) == r
    other = tmp_path / "other"
    Brain.open(other).close()
    assert cli_main(["verify-receipt", "--data", str(other), str(receipt)]) == 1  # another directory's key


@pytest.mark.parametrize("body, code", [
    ({"space": A}, "bad_target"),
    ({"space": A, "bucket_ids": ["x"], "whole_space": True}, "bad_target"),
    ({"space": A, "whole_space": False}, "bad_target"),
    ({"space": A, "whole_space": "yes"}, "invalid"),
    ({"space": A, "bucket_ids": []}, "invalid"),
    ({"space": A, "bucket_ids": "x"}, "invalid"),
    ({"space": A, "bucket_ids": ["../etc"]}, "invalid"),
    ({"space": A, "source": 5}, "invalid"),
    ({"space": A, "source": "x", "extra": 1}, "unknown_field"),
    ({"bucket_ids": ["x"]}, "invalid"),
    ({"space": "no spaces allowed", "bucket_ids": ["x"]}, "bad_space"),
])
def test_bad_purge_requests_are_400_with_a_code(fclient, body, code):
    r = fclient.post("/v1/purge", json=body)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["code"] == code


def write_receipt(tmp_path, name, obj) -> str:
    p = tmp_path / name
    p.write_text(json.dumps(obj, ensure_ascii=False), encoding="utf-8")
    return str(p)


def test_cli_purge_and_verify_receipt_across_key_rotation(tmp_path, keyed, monkeypatch, capsys):
    data = tmp_path / "cli-data"
    with Brain.open(data, KEYS) as b:
        bid = b.write(space=A, title="zorbluxian")
        b.write(space=A, title="other", source="chat:5")
    cfg1 = tmp_path / "k1.yaml"
    cfg1.write_text("forget:\n  keys: {k1: OMBRE_TEST_K1}\n  active_kid: k1\n", encoding="utf-8")
    assert cli_main(["purge", "--data", str(data), "--config", str(cfg1), "--space", A, "--bucket", bid]) == 0
    old = json.loads(capsys.readouterr().out)
    assert old["status"] == "purged" and old["receipt"]["payload"]["kid"] == "k1"

    monkeypatch.setenv("OMBRE_TEST_K2", "second-secret")
    cfg2 = tmp_path / "k2.yaml"
    cfg2.write_text("forget:\n  keys: {k1: OMBRE_TEST_K1, k2: OMBRE_TEST_K2}\n  active_kid: k2\n", encoding="utf-8")
    assert cli_main(["purge", "--data", str(data), "--config", str(cfg2), "--space", A, "--source", "chat:5"]) == 0
    new = json.loads(capsys.readouterr().out)
    assert new["receipt"]["payload"]["kid"] == "k2"

    f_old = write_receipt(tmp_path, "old.json", old)                 # the whole answer
    f_new = write_receipt(tmp_path, "new.json", new["receipt"])      # or just the receipt
    assert cli_main(["verify-receipt", "--config", str(cfg2), f_old]) == 0
    assert "verified with key k1" in capsys.readouterr().out
    assert cli_main(["verify-receipt", "--config", str(cfg2), f_new]) == 0
    assert "verified with key k2" in capsys.readouterr().out

    forged = json.loads(json.dumps(new["receipt"]))
    forged["payload"]["deleted"]["buckets"] += 1
    assert cli_main(["verify-receipt", "--config", str(cfg2), write_receipt(tmp_path, "f.json", forged)]) == 1
    assert "invalid" in capsys.readouterr().err
    assert cli_main(["verify-receipt", "--config", str(cfg1), f_new]) == 1   # k2 unknown to this config
    monkeypatch.delenv("OMBRE_TEST_K2")
    assert cli_main(["verify-receipt", "--config", str(cfg2), f_new]) == 2   # known kid, secret missing
    assert "OMBRE_TEST_K2" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    assert cli_main(["verify-receipt", "--config", str(cfg2), str(bad)]) == 1
    assert cli_main(["purge", "--data", str(data), "--config", str(cfg1), "--space", A]) == 2


# ---------------------------------------------------------------- crash safety


def test_an_interrupted_purge_is_invisible_at_once_and_finished_on_reopen(brain_path, keyed, monkeypatch):
    with Brain.open(brain_path, KEYS) as b:
        ids = seed(b)
        store_delete = type(b.store).delete

        def crash(self, space, bucket_ids):
            raise RuntimeError("power cut")

        monkeypatch.setattr(type(b.store), "delete", crash)
        with pytest.raises(RuntimeError):
            b.purge(A, bucket_ids=[ids["gone"], ids["gone2"]])
        assert b.get(A, ids["gone"]) is None  # readers stopped seeing it with the intent
        assert b.ledger.one("SELECT state FROM purges")["state"] == "intent"
        monkeypatch.setattr(type(b.store), "delete", store_delete)
    with Brain.open(brain_path, KEYS) as b:
        row = b.ledger.one("SELECT purge_id, state, plan FROM purges")
        assert row["state"] == "done" and row["plan"] is None
        receipt = b.forget.receipt(row["purge_id"])
        assert receipt["payload"]["deleted"]["buckets"] == 4 and independent_check(receipt, SECRET)
        assert b.purge(A, bucket_ids=[ids["gone"], ids["gone2"]]) == receipt
        assert b.store.lexical_search(A, b.tokenize("quaffleberry"), 10) == {}
        assert "quaffleberry" not in chroma_dump(b) and "quaffleberry" not in ledger_dump(b)


@embedded_keys
def test_an_interrupted_purge_waits_for_its_key_but_deletes_anyway(brain_path, keyed, monkeypatch):
    with Brain.open(brain_path, KEYS) as b:
        bid = b.write(space=A, title="glimmerwick")
        monkeypatch.setattr(type(b.store), "delete", lambda self, s, i: (_ for _ in ()).throw(RuntimeError("cut")))
        with pytest.raises(RuntimeError):
            b.purge(A, bucket_ids=[bid])
        monkeypatch.undo()
    monkeypatch.delenv("OMBRE_TEST_K1", raising=False)
    with Brain.open(brain_path, KEYS) as b:
        assert "glimmerwick" not in ledger_dump(b) and "glimmerwick" not in chroma_dump(b)
        assert b.ledger.one("SELECT state FROM purges")["state"] == "intent"
    monkeypatch.setenv("OMBRE_TEST_K1", SECRET)
    with Brain.open(brain_path, KEYS) as b:
        assert b.ledger.one("SELECT state FROM purges")["state"] == "done"
        assert b.purge(A, bucket_ids=[bid])["payload"]["deleted"]["buckets"] == 1


# ---------------------------------------------------------------- provenance


def test_lower_origin_cannot_overwrite_higher_text_or_flags(fbrain, fserver, fclient):
    bid = fbrain.write(space=A, title="I am vegetarian", body="user said so", origin="user")
    with pytest.raises(ProvenanceError, match="title"):
        fbrain.update(A, bid, origin="assistant", title="The user eats meat")
    with pytest.raises(ProvenanceError, match="pinned"):
        fbrain.update(A, bid, origin="derived", pinned=True)
    r = fclient.patch(f"/v1/buckets/{bid}", params={"space": A}, json={"origin": "assistant", "body": "changed"})
    assert r.status_code == 409 and r.json()["error"]["code"] == "provenance_refused"
    assert "body" in r.json()["error"]["message"]
    for bad in (["user"], "root", ""):
        r = fclient.patch(f"/v1/buckets/{bid}", params={"space": A}, json={"origin": bad, "title": "x"})
        assert r.status_code == 400 and "origin" in r.json()["error"]["message"]
    kept = fbrain.get(A, bid)
    assert (kept.title, kept.body, kept.pinned, kept.origin) == ("I am vegetarian", "user said so", False, "user")
    # a lower origin may still add what is not the higher one's text or flags, and keeps the origin
    updated = fbrain.update(A, bid, origin="assistant", tags=["diet"], title="I am vegetarian")
    assert updated.tags == ("diet",) and updated.origin == "user"


def test_higher_or_equal_origin_may_overwrite(fbrain):
    bid = fbrain.write(space=A, title="guess: likes tea", origin="derived")
    b = fbrain.update(A, bid, origin="assistant", title="likes green tea")
    assert (b.title, b.origin) == ("likes green tea", "assistant")
    with pytest.raises(ProvenanceError):
        fbrain.update(A, bid, origin="derived", body="overwritten by a guess")
    b = fbrain.update(A, bid, origin="user", title="I like oolong", body="said by the user")
    assert (b.title, b.origin) == ("I like oolong", "user")
    with pytest.raises(ProvenanceError):
        fbrain.update(A, bid, origin="assistant", archived=True)
    assert fbrain.update(A, bid, origin="user", archived=True).archived
