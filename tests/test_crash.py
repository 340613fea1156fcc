"""SIGKILL a process in the middle of a burst of writes, updates and deletes; reopen; nothing is half there.

A child process opens the store, proves two things, then starts a burst and is killed at a random
moment. First, before anything repairs the store, the raw state obeys the write protocol: a
committed bucket has exactly its moments in Chroma, and Chroma holds nothing of a bucket the
ledger does not know (so recovery always has what it needs). Then, after ``Brain.open`` has
reconciled, ``doctor`` finds Chroma, the lexical index and the ledger in agreement, every
acknowledged write is there with its acknowledged content, and every acknowledged delete is gone.
A second test makes the child kill itself at each step of the write protocol in turn (after the
ledger record, before the commit, mid-update, mid-delete) and checks that reopening finishes it.
Both run on embedded Chroma; the random one also against a real `chroma run`.
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

from .conftest import merged

SPACE = "haven:crash"
CHILD = r"""
import json, random, sys
from pathlib import Path

path, cfg, seed, burst = Path(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
from ombre_brain import Brain
from ombre_brain.config import load_config
from ombre_brain.store.doctor import doctor
from ombre_brain.store.chroma import ChromaBackend
from ombre_brain.store.ledger import open_ledger

SPACE = "haven:crash"
config = load_config(cfg)
raw = {"committed_mismatch": [], "unknown_in_chroma": []}
if (path / "ledger.db").exists() or (config.store.ledger.url and path.exists()):
    ledger = open_ledger(config.store, path)
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
fault = sys.argv[5] if len(sys.argv) > 5 else ""
if fault:  # die at one exact step of the write protocol instead of at a random moment
    import os, signal
    store = brain.store

    def die(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)

    def after(fn):
        def run(*args, **kwargs):
            fn(*args, **kwargs)
            die()
        return run

    while len(live) < 2:  # something to update and delete
        bid = f"seed{len(live)}"
        brain.write(space=SPACE, id=bid, title=f"seed bucket {bid}", body="种子")
        live.append(bid)
        print(f"ack write {bid} seed bucket {bid}", flush=True)
    victim = live[0]
    print(f"VICTIM {victim}", flush=True)
    if fault == "write_after_ledger":      # the pending row is recorded, Chroma has nothing yet
        store.writer._chroma_put = die
        brain.write(space=SPACE, id="f-write1", title="fault write one", body="写到一半")
    elif fault == "write_before_commit":   # Chroma has the moments, the ledger still says pending
        store.writer._commit = die
        brain.write(space=SPACE, id="f-write2", title="fault write two", body="差一步提交")
    elif fault == "update_mid_way":        # new rows pending, stale moments already gone from Chroma
        store.writer._chroma_put = die
        brain.update(SPACE, victim, title="fault update", body="")
    elif fault == "delete_mid_way":        # Chroma emptied, the ledger still says deleting
        store.chroma.delete = after(store.chroma.delete)
        brain.delete(SPACE, victim)
    print("FAULT DID NOT FIRE", flush=True)
    sys.exit(3)
for n in range(burst):
    op = rng.random()
    if op < 0.65 or len(live) < 3:
        bid = f"s{seed}-{n}"
        title = f"第{seed}轮 写入 {n}" if n % 2 else f"burst {seed} write {n}"
        body = "" if n % 3 else f"一段正文 {n}，讲海边和贝壳。"
        print(f"op write {bid} {title}", flush=True)
        brain.write(space=SPACE, id=bid, title=title, body=body)
        live.append(bid)
        print(f"ack write {bid} {title}", flush=True)
    elif op < 0.82:
        bid = rng.choice(live)
        title = f"updated {seed}-{n}"
        print(f"op update {bid} {title}", flush=True)
        brain.update(SPACE, bid, title=title)
        print(f"ack update {bid} {title}", flush=True)
    else:
        bid = live.pop(rng.randrange(len(live)))
        print(f"op delete {bid}", flush=True)
        brain.delete(SPACE, bid)
        print(f"ack delete {bid}", flush=True)
brain.close()
print("DONE", flush=True)
"""


class Child:
    """The child process with its stdout read on a thread, so the parent can kill it at any moment."""

    def __init__(self, path, cfg: dict, seed: int, burst: int, fault: str = "") -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        argv = [sys.executable, "-c", CHILD, str(path), json.dumps(cfg), str(seed), str(burst), fault]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
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


def verify(check: dict, expected: dict[str, set]) -> None:
    """expected: id -> the titles it may have now (None: it may be absent)."""
    assert check["raw"]["committed_mismatch"] == [], check["raw"]
    assert check["raw"]["unknown_in_chroma"] == [], check["raw"]
    assert check["consistent"], check["report"]
    got = check["buckets"]
    for bid, allowed in expected.items():
        assert got.get(bid) in allowed, f"{bid}: acknowledged state {allowed} but found {got.get(bid)!r}"
        expected[bid] = {got.get(bid)}  # what an operation cut short turned out to be is settled from now on


def _record(child: Child, expected: dict[str, set]) -> None:
    """Acknowledged operations are certain; the one in flight at the kill may or may not have happened."""
    pending = None
    for line in child.lines:
        kind, _, rest = line.partition(" ")
        if kind not in ("op", "ack"):
            continue
        op, bid, *title = rest.split(" ", 2)
        new = None if op == "delete" else title[0]
        if kind == "op":
            pending = (bid, new)
        else:
            expected[bid] = {new}
            pending = None
    if pending is not None:
        bid, new = pending
        expected[bid] = expected.get(bid, {None}) | {new}


def _final_check(path, cfg: dict, expected: dict[str, set]) -> dict:
    child = Child(path, cfg, seed=99, burst=0)
    assert child.ready.wait(120), "child never got ready"
    check = child.check()
    verify(check, expected)
    child.proc.wait(60)
    assert child.proc.returncode == 0
    child.thread.join(10)
    child.proc.stderr.close()
    return check


@pytest.mark.parametrize("iterations", [2])
def test_sigkill_at_random_moments_leaves_no_half_bucket(tmp_path, store_mode, ledger_overlay, iterations):
    path = tmp_path / "data"
    rng = random.Random(11 if store_mode else 7)
    store_mode = merged(store_mode, ledger_overlay)
    expected: dict[str, set] = {}
    for it in range(iterations):
        child = Child(path, store_mode, seed=it, burst=400)
        assert child.ready.wait(120), "child never got ready"
        try:
            verify(child.check(), expected)
            deadline = time.time() + 20  # let the burst get going (slow on a busy machine), then a random moment
            while not child.acks() and child.proc.poll() is None and time.time() < deadline:
                time.sleep(0.05)
            time.sleep(rng.uniform(0.0, 1.5))
            assert child.proc.poll() is None, "the burst ended before the kill"
        finally:
            child.kill()
        _record(child, expected)
    _final_check(path, store_mode, expected)
    assert any(v != {None} for v in expected.values())


def test_sigkill_at_each_step_of_the_write_protocol(tmp_path, ledger_overlay):
    """Each child checks what the previous one left, then dies at its own step; the last child only checks."""
    path = tmp_path / "data"
    expected: dict[str, set] = {}
    steps = {  # fault -> (id the ledger holds unfinished, or the victim; what reconcile must make of it)
        "write_after_ledger": ("f-write1", "fault write one"),
        "write_before_commit": ("f-write2", "fault write two"),
        "update_mid_way": (None, "fault update"),
        "delete_mid_way": (None, None),
        "": (None, None),
    }
    unfinished: list[str] = []
    for n, (fault, (bid, title)) in enumerate(steps.items(), 1):
        child = Child(path, ledger_overlay, seed=100 + n, burst=0, fault=fault)
        assert child.ready.wait(120), "child never got ready"
        check = child.check()
        assert check["raw"].get("unfinished", []) == unfinished, (fault, check["raw"])
        assert sum(check["report"]["reconciled"].values()) == 0  # Brain.open reconciled before doctor ran
        verify(check, expected)
        child.proc.wait(120)
        child.thread.join(10)
        child.proc.stderr.close()
        if not fault:
            assert child.proc.returncode == 0
            break
        assert child.proc.returncode == -signal.SIGKILL, (fault, child.lines[-3:])
        _record(child, expected)
        victim = next(line.split()[1] for line in child.lines if line.startswith("VICTIM "))
        expected[bid or victim] = {title}  # a recorded write is always finished; a recorded delete always done
        unfinished = [bid or victim]
