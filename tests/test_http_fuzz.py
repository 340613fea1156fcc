"""Fuzzing the HTTP API with hypothesis: no input gets a 500, and no answer reaches across spaces.

Bodies are arbitrary JSON (NaN, huge numbers, lone surrogates, wrong types), bucket-shaped
objects with wrong values, raw bytes, JSON nested thousands deep, numbers thousands of digits
long and body keys named like the write call's own arguments (``now``, ``self``, ``bucket_id``);
query strings and path ids are arbitrary text. The
token may touch fz:b and fz:c only, while fz:a holds a secret: no answer may contain it.
"""

from __future__ import annotations

import json
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ombre_brain import Brain

from .conftest import LiveServer

SECRET = "fzsecretmarker"
SCOPE = ("fz:b", "fz:c")
TOKEN = "fuzz-token"
CONFIG = {
    "server": {"tokens": [{"token_env": "FZ_TOKEN", "spaces": list(SCOPE)}]},
    "forget": {"keys": {"fz": "OMBRE_FUZZ_KEY"}, "active_kid": "fz"},
}
FIELDS = ("id", "space", "title", "body", "summary", "tags", "type", "importance", "valence", "arousal", "pinned",
          "protected", "anchor", "archived", "resolved", "digested", "created", "updated", "last_active",
          "event_time", "activation_count", "comments", "source_ref", "memory_subject", "memory_layer",
          "memory_classification_source", "origin", "basis", "confidence", "source", "core_affect", "recall_cues",
          "source_bucket_ids", "surfaced", "surface_attempts")
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                       HealthCheck.too_slow])

# Text, sometimes with a lone surrogate: json.dumps escapes it as \ud800, which a server decodes.
texts = st.text(max_size=30) | st.builds(lambda a, b: f"{a}\udc80{b}", st.text(max_size=8), st.text(max_size=8))
scalars = (st.none() | st.booleans() | st.integers(-(10**20), 10**20)
           | st.floats(allow_nan=True, allow_infinity=True) | texts
           | st.sampled_from(["", " ", "\ud800", "0", "-1", "1e999", "haven:x", "fz:a", "fz:b", "../x", "\x00",
                              "2026-13-45T99:00:00", "dream", "user", "assistant", "### moment\nx", "a" * 600]))
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=10), inner, max_size=4), max_leaves=10)
spaces = st.sampled_from(["fz:a", "fz:b", "fz:c", "", "bad space", "x" * 200]) | st.text(max_size=12)
ids = st.sampled_from(["b1", "c1", "secret1", "missing"]) | st.text(min_size=1, max_size=20)


def bucketish() -> st.SearchStrategy[dict]:
    """Mostly-plausible bucket objects, each field either sensible or arbitrary."""
    plausible = {
        "space": spaces, "title": texts | json_values, "body": texts | json_values,
        "tags": st.lists(st.text(max_size=12), max_size=5) | json_values,
        "importance": st.integers(-3, 14) | json_values, "valence": st.floats() | json_values,
        "type": st.sampled_from(["dynamic", "dream", "feel", "journal", "nope"]) | json_values,
        "comments": st.lists(st.fixed_dictionaries({"content": json_values}), max_size=2) | json_values,
        "source_ref": st.fixed_dictionaries({"path": json_values, "start_line": json_values}) | json_values,
    }
    optional = {f: plausible.get(f, json_values) for f in FIELDS}
    near_valid = st.fixed_dictionaries(  # gets past the first checks, so deeper code is reached
        {"space": st.sampled_from(SCOPE), "title": st.text(min_size=1, max_size=40) | texts},
        optional={f: plausible.get(f, json_values) for f in FIELDS if f not in ("space", "title", "id")})
    return (near_valid | st.fixed_dictionaries({}, optional=optional)
            | st.dictionaries(st.text(max_size=12), json_values, max_size=5))


def body_of(obj) -> bytes:
    """JSON as a lenient client might send it (NaN and lone surrogates included)."""
    return json.dumps(obj, allow_nan=True).encode()


@pytest.fixture(scope="module")
def fz(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OMBRE_FUZZ_KEY", "fuzz-signing-key")
        brain = Brain.open(tmp_path_factory.mktemp("fuzz") / "data", CONFIG)
        brain.write(space="fz:a", id="secret1", title=f"{SECRET} title", body=f"the {SECRET} body", source="src:1")
        brain.write(space="fz:b", id="b1", title="an ordinary memory", body="tea by the window")
        brain.write(space="fz:c", id="c1", title="another memory", body="a walk in the rain")
        server = LiveServer(brain, env_tokens={"FZ_TOKEN": TOKEN})
        with httpx.Client(base_url=server.url, timeout=60, headers={"Authorization": f"Bearer {TOKEN}"}) as c:
            yield brain, c
        server.close()
        brain.close()


def check(r: httpx.Response, brain) -> None:
    where = f"{r.request.method} {r.request.url}"
    assert r.status_code < 500, f"{where} -> {r.status_code}: {r.text[:300]}"
    assert SECRET not in r.text, f"{where} leaked another space's memory"
    if r.headers.get("content-type", "").startswith("text/html"):
        return
    data = r.json()
    if r.status_code >= 400:
        assert isinstance(data["error"]["code"], str) and isinstance(data["error"]["message"], str), data
    assert brain.get("fz:a", "secret1") is not None, f"{where} removed a memory of a space it may not touch"


def raw(client: httpx.Client, method: str, url: str, body: bytes | None = None, **kw) -> httpx.Response:
    headers = {"Content-Type": "application/json"} if body is not None else {}
    return client.request(method, url, content=body, headers=headers, **kw)


@FUZZ
@given(body=bucketish())
def test_create_bucket(fz, body):
    brain, client = fz
    check(raw(client, "POST", "/v1/buckets", body_of(body)), brain)


@FUZZ
@given(bid=ids, space=st.sampled_from(SCOPE) | spaces, body=bucketish() | json_values,
       origin=st.none() | st.sampled_from(["user", "assistant", "derived", "root"]))
def test_patch_bucket(fz, bid, space, body, origin):
    brain, client = fz
    if isinstance(body, dict) and origin is not None:
        body = body | {"origin": origin}
    check(raw(client, "PATCH", f"/v1/buckets/{quote(bid, safe='')}", body_of(body), params={"space": space}), brain)


@FUZZ
@given(bid=ids, space=spaces, method=st.sampled_from(["GET", "DELETE"]),
       params=st.dictionaries(st.sampled_from(["space", "type", "limit", "token"]), st.text(max_size=15),
                              max_size=3))
def test_get_list_delete(fz, bid, space, method, params):
    brain, client = fz
    check(raw(client, "GET", "/v1/buckets", params=params), brain)
    check(raw(client, method, f"/v1/buckets/{quote(bid, safe='')}", params={"space": space}), brain)


@FUZZ
@given(body=st.fixed_dictionaries({}, optional={"space": spaces, "from_id": ids | json_values,
                                                "to_id": ids | json_values,
                                                "relation": st.sampled_from(["relates_to", "same_event", "x"])
                                                | json_values, "confidence": json_values}) | json_values)
def test_edges(fz, body):
    brain, client = fz
    check(raw(client, "POST", "/v1/edges", body_of(body)), brain)


@FUZZ
@given(body=st.fixed_dictionaries({}, optional={"space": spaces, "bucket_ids": st.lists(ids, max_size=3)
                                                | json_values, "source": st.sampled_from(["src:1", "src:2"])
                                                | json_values, "whole_space": json_values}) | json_values)
def test_purge(fz, body):
    brain, client = fz
    if isinstance(body, dict) and body.get("whole_space") is True and body.get("space") in SCOPE:
        body["space"] = "fz:c"  # keep fz:b's memory around for the other fuzzers
    r = raw(client, "POST", "/v1/purge", body_of(body))
    check(r, brain)
    if r.status_code == 200:
        assert r.json()["receipt"]["payload"]["space"] in SCOPE


@FUZZ
@given(body=st.fixed_dictionaries({"space": st.sampled_from(SCOPE), "session_id": st.text(min_size=1, max_size=10),
                                   "query": texts}, optional={"now": json_values})
       | st.fixed_dictionaries({}, optional={"space": spaces, "session_id": json_values | st.text(max_size=10),
                                             "query": st.text(max_size=60) | json_values,
                                             "now": json_values}) | json_values)
def test_inject(fz, body):
    brain, client = fz
    check(raw(client, "POST", "/v1/inject", body_of(body)), brain)


@FUZZ
@given(route=st.sampled_from(["/v1/facts", "/v1/facts/history", "/v1/facts/changes", "/api/moments",
                              "/api/recall-debug", "/api/breath-debug", "/api/diffusion-debug",
                              "/api/gateway-injections"]),
       params=st.dictionaries(st.sampled_from(["space", "q", "session", "subject", "as_of", "context", "limit",
                                               "max_facts", "max_bytes", "record_id", "cursor", "now"]),
                              st.text(max_size=20) | spaces, max_size=4))
def test_read_routes(fz, route, params):
    brain, client = fz
    check(raw(client, "GET", route, params=params), brain)


@FUZZ
@given(route=st.sampled_from(["/v1/buckets", "/v1/edges", "/v1/purge", "/v1/inject", "/v1/facts/evidence"]),
       payload=st.binary(max_size=200) | st.sampled_from([b"", b"[]", b"null", b"\xff\xfe", b'{"space": "fz:b"']))
def test_raw_bodies(fz, route, payload):
    brain, client = fz
    check(raw(client, "POST", route, payload), brain)


# Issue 19: inputs that once reached a 500 from any JSON route.
JSON_ROUTES = ["/v1/buckets", "/v1/edges", "/v1/purge", "/v1/inject", "/v1/facts/evidence", "/v1/chat/completions"]


@st.composite
def nested(draw) -> bytes:
    """JSON nested past any sane depth, bare or inside a plausible body, lists or objects."""
    depth = draw(st.integers(65, 20_000))
    if draw(st.booleans()):
        core = "[" * depth + "]" * depth
    else:
        core = '{"a": ' * depth + draw(st.sampled_from(["1", '"x"', "null", "[]"])) + "}" * depth
    wrap = draw(st.sampled_from(["%s", '{"space": "fz:b", "title": "t", "tags": %s}', '{"space": "fz:b", "q": %s}']))
    return (wrap % core).encode()


@st.composite
def huge_numbers(draw) -> bytes:
    digits = draw(st.integers(41, 6000))
    number = draw(st.sampled_from(["-", ""])) + "9" * digits + draw(st.sampled_from(["", ".5", "e5"]))
    field = draw(st.sampled_from(["importance", "valence", "confidence", "x", "max_bytes"]))
    return f'{{"space": "fz:b", "title": "t", "{field}": {number}}}'.encode()


@FUZZ
@given(route=st.sampled_from(JSON_ROUTES), payload=nested() | huge_numbers())
def test_nested_json_and_huge_numbers_are_400_on_every_json_route(fz, route, payload):
    brain, client = fz
    r = raw(client, "POST", route, payload)
    check(r, brain)
    assert r.status_code == 400 and r.json()["error"]["code"] == "bad_json", r.text[:200]


@FUZZ
@given(key=st.sampled_from(["now", "self", "bucket_id", "dedupe", "kwargs", "fields", "changes", "origin "]),
       value=json_values, patch=st.booleans(), base=bucketish())
def test_reserved_keys_in_a_bucket_body_are_named_in_a_400(fz, key, value, patch, base):
    brain, client = fz
    body = (base if isinstance(base, dict) else {}) | {"space": "fz:b", "title": "reserved", key: value}
    if patch:
        r = raw(client, "PATCH", "/v1/buckets/b1", body_of(body), params={"space": "fz:b"})
    else:
        r = raw(client, "POST", "/v1/buckets", body_of(body))
    check(r, brain)
    err = r.json()["error"]
    assert r.status_code == 400, r.text[:200]
    assert err["code"] == "bad_json" or (err["code"] == "unknown_field" and key in err["message"]), err


def test_requests_without_a_token_are_401_everywhere(fz):
    brain, client = fz
    for method, url in [("GET", "/v1/buckets?space=fz:b"), ("POST", "/v1/purge"), ("POST", "/v1/buckets"),
                        ("PATCH", "/v1/buckets/b1?space=fz:b"), ("POST", "/v1/inject")]:
        r = httpx.request(method, str(client.base_url) + url, json={"space": "fz:b"})
        assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
    r = client.post("/v1/purge", json={"space": "fz:a", "whole_space": True})
    assert r.status_code == 403 and brain.get("fz:a", "secret1") is not None
