"""The HTTP write path against a real server on loopback: buckets, edges, errors, tokens."""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest

from .conftest import LiveServer

SPACE = "haven:xiaoyu"


def test_bucket_lifecycle(client):
    r = client.post("/v1/buckets", json={"space": SPACE, "title": "一起去海边", "body": "我们在海边捡贝壳。",
                                         "tags": ["海边"], "importance": 7})
    assert r.status_code == 201
    bid = r.json()["id"]
    got = client.get(f"/v1/buckets/{bid}", params={"space": SPACE}).json()
    assert got["title"] == "一起去海边" and got["space"] == SPACE and got["tags"] == ["海边"]
    assert got["memory_classification_source"] == "rule"
    dup = client.post("/v1/buckets", json={"space": SPACE, "title": "一起去海边", "body": "我们在海边捡贝壳。",
                                           "tags": ["海边"], "importance": 7})
    assert dup.json()["id"] == bid, "an exact duplicate returns the existing id"
    p = client.patch(f"/v1/buckets/{bid}", params={"space": SPACE}, json={"importance": 9})
    assert p.status_code == 200 and p.json()["importance"] == 9
    other = client.post("/v1/buckets", json={"space": SPACE, "title": "贝壳风铃",
                                             "body": "贝壳做成了风铃。"}).json()["id"]
    e = client.post("/v1/edges", json={"space": SPACE, "from_id": bid, "to_id": other, "relation": "same_event",
                                       "confidence": 0.9})
    assert e.status_code == 201 and e.json()["relation"] == "same_event"
    listed = client.get("/v1/buckets", params={"space": SPACE, "limit": 10}).json()["buckets"]
    assert {b["id"] for b in listed} == {bid, other}
    assert client.delete(f"/v1/buckets/{bid}", params={"space": SPACE}).status_code == 200
    assert client.get(f"/v1/buckets/{bid}", params={"space": SPACE}).status_code == 404
    assert client.delete(f"/v1/buckets/{bid}", params={"space": SPACE}).status_code == 404


@pytest.mark.parametrize("method, path, kwargs, status, code, needle", [
    ("post", "/v1/buckets", {"content": b"{not json", "headers": {"Content-Type": "application/json"}}, 400,
     "bad_json", "malformed JSON"),
    ("post", "/v1/buckets", {"json": [1, 2]}, 400, "bad_json", "expected a JSON object"),
    ("post", "/v1/buckets", {"json": {"title": "x"}}, 400, "invalid", "space: is required"),
    ("post", "/v1/buckets", {"json": {"space": SPACE, "title": "x", "importance": "high"}}, 400, "invalid",
     "importance"),
    ("post", "/v1/buckets", {"json": {"space": "bad space", "title": "x"}}, 400, "bad_space", "space"),
    ("post", "/v1/edges", {"json": {"space": SPACE, "from_id": "a", "to_id": "b", "relation": "likes"}}, 400,
     "invalid", "relation"),
    ("post", "/v1/edges", {"json": {"space": SPACE, "from_id": "a", "to_id": "b", "relation": "relates_to"}}, 404,
     "not_found", "no bucket"),
    ("get", "/v1/buckets", {"params": {"space": SPACE, "limit": "ten"}}, 400, "invalid", "limit"),
    ("get", "/v1/buckets", {"params": {"space": SPACE, "type": "diary"}}, 400, "invalid", "type"),
    ("get", "/v1/nowhere", {}, 404, "not_found", ""),
])
def test_bad_requests_get_clear_json_errors(client, method, path, kwargs, status, code, needle):
    r = getattr(client, method)(path, **kwargs)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["code"] == code and needle in err["message"], err


def test_huge_body_is_413_json(brain, tmp_path):
    from ombre_brain import Brain

    small = Brain.open(tmp_path / "small", {"server": {"max_body_bytes": 2048}})
    s = LiveServer(small)
    try:
        r = httpx.post(f"{s.url}/v1/buckets", json={"space": SPACE, "title": "x", "body": "y" * 5000})
        assert r.status_code == 413 and r.json()["error"]["code"] == "body_too_large"
    finally:
        s.close()
        small.close()


def test_tokens_scope_spaces(brain):
    cfg_tokens = {"OMBRE_TOKEN": "master", "AMY_TOKEN": "amy-secret"}
    from ombre_brain import Brain

    scoped = Brain.open(brain.path.parent / "scoped", {"server": {"tokens": [{"token_env": "AMY_TOKEN",
                                                                               "spaces": ["haven:amy"]}]}})
    s = LiveServer(scoped, env_tokens=cfg_tokens)
    try:
        body = {"space": "haven:amy", "title": "蛋挞", "body": "Amy 学做蛋挞。"}
        assert httpx.post(f"{s.url}/v1/buckets", json=body).status_code == 401
        assert httpx.post(f"{s.url}/v1/buckets", json=body,
                          headers={"Authorization": "Bearer wrong"}).status_code == 401
        ok = httpx.post(f"{s.url}/v1/buckets", json=body, headers={"Authorization": "Bearer amy-secret"})
        assert ok.status_code == 201
        other = httpx.post(f"{s.url}/v1/buckets", json={**body, "space": "haven:xiaoyu"},
                           headers={"Authorization": "Bearer amy-secret"})
        assert other.status_code == 403 and other.json()["error"]["code"] == "forbidden"
        assert httpx.get(f"{s.url}/v1/buckets", params={"space": "haven:xiaoyu"},
                         headers={"Authorization": "Bearer master"}).status_code == 200
    finally:
        s.close()
        scoped.close()


def test_serve_refuses_public_bind_without_token(tmp_path):
    env = {k: v for k, v in __import__("os").environ.items() if k != "OMBRE_TOKEN"}
    r = subprocess.run([sys.executable, "-m", "ombre_brain.cli", "serve", "--data", str(tmp_path / "d"), "--host",
                        "0.0.0.0", "--port", "0"], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 2 and "without a token" in r.stderr and "Traceback" not in r.stderr
