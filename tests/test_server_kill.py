"""SIGKILL the real server (`ombre-brain serve`) under mixed load; `doctor` finds it consistent; nothing acked is lost.

The server runs as its own process on loopback. Four client threads write, edit, delete, purge,
read and run turns until the server is killed mid-stream. Then `ombre-brain doctor` (a real
CLI run, which reconciles on open) must find nothing to repair, and after a restart every
acknowledged write (201) is there with its acknowledged fields and every acknowledged delete
or purge is gone.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
import yaml

from .conftest import ServeProcess, free_port, merged

SPACE = "haven:kill"
KEY_ENV = "OMBRE_TEST_PURGE_KEY"


class Server(ServeProcess):
    def __init__(self, data: Path, config: Path, env: dict) -> None:
        super().__init__(data, config, data.parent / f"server-{free_port()}.log", env=env)
        self.wait()


class Load(threading.Thread):
    """One client: acknowledged outcomes are certain, the request cut by the kill is not."""

    def __init__(self, n: int, url: str, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.n, self.url, self.stop = n, url, stop
        self.rng = random.Random(n)
        self.present: dict[str, int] = {}   # acknowledged writes/edits: id -> importance
        self.gone: set[str] = set()         # acknowledged deletes and purges
        self.uncertain: set[str] = set()    # ids whose last request never got an answer
        self.acked = 0
        self.errors: list[str] = []

    def run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=60) as c:
            i = 0
            while not self.stop.is_set():
                i += 1
                try:
                    self.step(c, i)
                except httpx.TransportError:  # the server died under this request (its id stays uncertain)
                    return

    def step(self, c: httpx.Client, i: int) -> None:
        r = self.rng.random()
        ids = sorted(self.present)
        if r < 0.5 or len(ids) < 3:
            importance = self.rng.randint(1, 10)
            resp = c.post("/v1/buckets", json={"space": SPACE, "title": f"k{self.n} 第{i}条 memory",
                                                "importance": importance})
            self.check(resp, 201)
            self.present[resp.json()["id"]] = importance
        elif r < 0.65:
            bid = self.rng.choice(ids)
            importance = self.rng.randint(1, 10)
            self.uncertain.add(bid)
            self.check(c.patch(f"/v1/buckets/{bid}", params={"space": SPACE}, json={"importance": importance}), 200)
            self.uncertain.discard(bid)
            self.present[bid] = importance
        elif r < 0.75:
            bid = self.rng.choice(ids)
            self.uncertain.add(bid)
            if self.rng.random() < 0.5:
                self.check(c.delete(f"/v1/buckets/{bid}", params={"space": SPACE}), 200)
            else:
                self.check(c.post("/v1/purge", json={"space": SPACE, "bucket_ids": [bid]}), 200)
            self.uncertain.discard(bid)
            del self.present[bid]
            self.gone.add(bid)
        elif r < 0.85:
            self.check(c.post("/v1/inject", json={"space": SPACE, "session_id": f"s{self.n}",
                                                  "query": "还记得第3条吗"}), 200)
        else:
            bid = self.rng.choice(ids)
            resp = c.get(f"/v1/buckets/{bid}", params={"space": SPACE})
            self.check(resp, 200)
            if resp.json()["importance"] != self.present[bid]:
                self.errors.append(f"read {bid}: importance {resp.json()['importance']} != {self.present[bid]}")
        self.acked += 1

    def check(self, resp: httpx.Response, status: int) -> None:
        if resp.status_code != status:
            self.errors.append(f"{resp.request.method} {resp.request.url.path}: {resp.status_code} {resp.text[:200]}")
            raise httpx.TransportError("unexpected answer")  # stop this client; the test reports the error


@pytest.fixture
def setup(tmp_path, ledger_overlay):
    data = tmp_path / "data"
    config = tmp_path / "server.yaml"
    config.write_text(yaml.safe_dump(merged(ledger_overlay, {"forget": {"keys": {"k1": KEY_ENV}, "active_kid": "k1"}})),
                      encoding="utf-8")
    env = {**os.environ, KEY_ENV: "server-kill-secret", "PYTHONUNBUFFERED": "1"}
    return data, config, env


def test_sigkill_under_load_then_doctor_and_restart(setup):
    data, config, env = setup
    server = Server(data, config, env)
    stop = threading.Event()
    try:
        loads = [Load(n, server.url, stop) for n in range(4)]
        for t in loads:
            t.start()
        deadline = time.time() + 60
        while sum(t.acked for t in loads) < 60 and time.time() < deadline:
            time.sleep(0.1)
        time.sleep(random.Random(5).uniform(0.0, 1.0))
        server.kill()
        stop.set()
        for t in loads:
            t.join(60)
    finally:
        server.stop()
    assert [e for t in loads for e in t.errors] == []
    assert sum(t.acked for t in loads) >= 60

    doc = subprocess.run([sys.executable, "-m", "ombre_brain.cli", "doctor", "--data", str(data), "--config",
                          str(config)], capture_output=True, text=True, timeout=300, env=env)
    assert doc.returncode == 0, doc.stdout + doc.stderr
    assert "consistent: 1 spaces checked, nothing to repair" in doc.stdout, doc.stdout
    assert "Traceback" not in doc.stdout + doc.stderr

    present = {k: v for t in loads for k, v in t.present.items()}
    gone = set().union(*(t.gone for t in loads))
    uncertain = set().union(*(t.uncertain for t in loads))
    again = Server(data, config, env)
    try:
        with httpx.Client(base_url=again.url, timeout=60) as c:
            for bid, importance in present.items():
                r = c.get(f"/v1/buckets/{bid}", params={"space": SPACE})
                if bid in uncertain:
                    assert r.status_code in (200, 404)
                    continue
                assert r.status_code == 200, f"acknowledged write {bid} lost"
                assert r.json()["importance"] == importance, bid
            for bid in gone:
                assert c.get(f"/v1/buckets/{bid}", params={"space": SPACE}).status_code == 404, bid
            listed = {b["id"] for b in c.get("/v1/buckets", params={"space": SPACE, "limit": 1000}).json()["buckets"]}
            assert set(present) - uncertain <= listed
            assert not (gone - uncertain) & listed
            assert c.post("/v1/inject", json={"space": SPACE, "session_id": "s0", "query": "第3条"}).status_code == 200
    finally:
        again.stop()
