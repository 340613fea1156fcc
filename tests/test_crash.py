"""SIGKILL a process in the middle of a burst of writes, updates and deletes; reopen; nothing is half there.

A child process opens the store, proves two things, then starts a burst and is killed at a random
moment. First, before anything repairs the store, the raw state obeys the write protocol: a
committed bucket has exactly its moments in Chroma, and Chroma holds nothing of a bucket the
ledger does not know (so recovery always has what it needs). Then, after ``Brain.open`` has
reconciled, ``doctor`` finds Chroma, the lexical index and the ledger in agreement, every
acknowledged write is there with its acknowledged content, and every acknowledged delete is gone.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

import pytest

SPACE = "haven:crash"
CHILD = r"""
import json, random, sys, time
TIMING = True
from pathlib import Path

path, cfg, seed, burst = Path(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
from ombre_brain import Brain
from ombre_brain.config import load_config
from ombre_brain.maintenance import doctor
from ombre_brain.store.chroma import ChromaBackend
from ombre_brain.store.ledger import Ledger

SPACE = "haven:crash"
config = load_config(cfg)
raw = {"committed_mismatch": [], "unknown_in_chroma": []}
if (path / "ledger.db").exists():
    ledger = Ledger(path / "ledger.db")
    ns = ""
    if config.store.chroma.mode == "http":
        ns = ledger.one("SELECT value FROM store_meta WHERE key = 'store_id'")["value"]
    chroma = ChromaBackend(config.store.chroma, path / "chroma", namespace=ns)
    states = {r["id"]: r["state"] for r in ledger.query("SELECT id, state FROM buckets WHERE space = ?", (SPACE,))}
    moments = {}
    for r in ledger.query("SELECT id, bucket_id FROM moments WHERE space = ?", (SPACE,)):
        moments.setdefault(r["bucket_id"], set()).add(r["id"])
    in_chroma = {}
    for i in chroma.all_ids(SPACE):
        in_chroma.setdefault(i.rsplit("#", 1)[0], set()).add(i)
    raw["committed_mismatch"] = sorted(b for b, s in states.items()
                                       if s == "committed" and in_chroma.get(b, set()) != moments.get(b, set()))
    raw["unknown_in_chroma"] = sorted(set(in_chroma) - set(states))
    raw["unfinished"] = sorted(b for b, s in states.items() if s != "committed")
    ledger.close()

brain = Brain.open(path, cfg)
report = doctor(brain, repair=False)
buckets = {b.id: b.title for b in brain.list(SPACE, limit=100000)}
print("CHECK " + json.dumps({"raw": raw, "consistent": report["consistent"], "report": report,
                             "buckets": buckets}, ensure_ascii=False, default=str), flush=True)
brain.embedder.passages(["warm up"])  # load the model and jieba now, so the kill lands among writes
brain.tokenize("预热一下")
print("READY", flush=True)
rng = random.Random(seed)
live = sorted(buckets)
for n in range(burst):
    op = rng.random()
    if op < 0.65 or len(live) < 3:
        bid = f"s{seed}-{n}"
        title = f"第{seed}轮 写入 {n}" if n % 2 else f"burst {seed} write {n}"
        body = "" if n % 3 else f"一段正文 {n}，讲海边和贝壳。"
        brain.write(space=SPACE, id=bid, title=title, body=body)
        live.append(bid)
        print(f"ack write {bid} {title}", flush=True)
        print(f"t {time.time()}", flush=True) if TIMING else None
    elif op < 0.82:
        bid = rng.choice(live)
        title = f"updated {seed}-{n}"
        brain.update(SPACE, bid, title=title)
        print(f"ack update {bid} {title}", flush=True)
    else:
        bid = live.pop(rng.randrange(len(live)))
        brain.delete(SPACE, bid)
        print(f"ack delete {bid}", flush=True)
brain.close()
print("DONE", flush=True)
"""


class Child:
    """The child process with its stdout read on a thread, so the parent can kill it at any moment."""

    def __init__(self, path, cfg: dict, seed: int, burst: int) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen([sys.executable, "-c", CHILD, str(path), json.dumps(cfg), str(seed), str(burst)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.lines: list[str] = []
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            if line.startswith("READY"):
                self.ready.set()
        self.ready.set()

    def check(self) -> dict:
        for line in self.lines:
            if line.startswith("CHECK "):
                return json.loads(line[6:])
        raise AssertionError(f"child gave no check; stderr: {self.proc.stderr.read()[-3000:]}")

    def acks(self) -> list[list[str]]:
        return [line.split(" ", 3)[1:] for line in self.lines if line.startswith("ack ")]

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)
        self.thread.join(10)
        self.proc.stderr.close()


def verify(check: dict, expected: dict[str, str | None]) -> None:
    """expected: id -> acknowledged title, or None for an acknowledged delete."""
    assert check["raw"]["committed_mismatch"] == [], check["raw"]
    assert check["raw"]["unknown_in_chroma"] == [], check["raw"]
    assert check["consistent"], check["report"]
    got = check["buckets"]
    for bid, title in expected.items():
        if title is None:
            assert bid not in got, f"acknowledged delete of {bid} was undone"
        else:
            assert got.get(bid) == title, f"acknowledged write {bid} ({title!r}) lost: {got.get(bid)!r}"


@pytest.mark.parametrize("iterations", [4])
def test_sigkill_during_write_burst_leaves_no_half_bucket(tmp_path, store_mode, iterations):
    path = tmp_path / "data"
    rng = random.Random(11 if store_mode else 7)
    expected: dict[str, str | None] = {}
    cut_short = 0
    for it in range(iterations + 1):
        last = it == iterations
        child = Child(path, store_mode, seed=it, burst=0 if last else 400)
        assert child.ready.wait(120), "child never got ready"
        try:
            verify(child.check(), expected)
            if last:
                child.proc.wait(60)
                assert child.proc.returncode == 0
                break
            time.sleep(rng.uniform(0.3, 2.0))
        finally:
            if child.proc.poll() is None:
                child.kill()
                cut_short += 1
            elif not last:
                child.thread.join(10)
                child.proc.stderr.close()
        for op, bid, *rest in child.acks():
            if op in ("write", "update"):
                expected[bid] = rest[0]
            else:
                expected[bid] = None
    assert cut_short == iterations, "every burst should have been killed mid-way"
    assert sum(v is not None for v in expected.values()) > 0
