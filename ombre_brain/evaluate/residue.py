"""What a purge leaves on disk, found by value: the red team's reproduction of issue 35, and its search.

A vector is not found by comparing exact bytes: Chroma normalises what it stores, the ledger keeps
the second opinion as float16, and hnswlib may leave a copy at any byte offset (a slot of another
layout, a freed buffer). :func:`vector_hits` reads every file as float32 (or float16) at each byte
alignment and looks for runs of a vector's values within a tolerance; any run of 64 consecutive
components or more is found, so a partial copy counts too.

:func:`run_trial` is one red-team trial: 8 threads write and run turns in a space while one of its
memories is purged; afterwards nothing of that memory may be on disk (its Chroma vectors, its
second-opinion vectors, its words). ``python -m ombre_brain.evaluate.residue --trials 30`` runs them,
each in a fresh data directory that is also searched once closed (``--chroma HOST:PORT`` puts the
vectors on a Chroma server; the data directory then holds only the ledger). docs/forgetting.md
quotes the numbers.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

WINDOW = 32  # a copy is found when it holds any aligned run of this many components (so 2 x WINDOW - 1 or more)


def _windows(vectors: list[np.ndarray]) -> list[np.ndarray]:
    return [v[i:i + WINDOW] for v in vectors for i in range(0, len(v) - WINDOW + 1, WINDOW)]


def vector_hits(root: Path, vectors, *, dtype=np.float32, tol: float = 1e-5) -> list[tuple[str, int]]:
    """(file, byte offset) of every run of a vector's values in any file under ``root``, within ``tol``.

    Each vector is cut into runs of :data:`WINDOW` components; a run is anchored on its largest
    component, whose value is looked up in one sorted pass over the file, and confirmed whole.
    """
    runs = np.array(_windows([np.asarray(v, dtype=np.float32) for v in vectors]), dtype=np.float64)
    if not len(runs):
        return []
    pivots = np.argmax(np.abs(runs), axis=1)
    keys = runs[np.arange(len(runs)), pivots]
    order = np.argsort(keys)
    runs, pivots, keys = runs[order], pivots[order], keys[order]
    width = np.dtype(dtype).itemsize
    span = np.arange(WINDOW)
    hits: set[tuple[str, int]] = set()
    for path in sorted(p for p in Path(root).rglob("*") if p.is_file()):
        data = path.read_bytes()
        for shift in range(width):
            n = (len(data) - shift) // width
            if n < WINDOW:
                continue
            with np.errstate(invalid="ignore", over="ignore"):  # arbitrary bytes read as floats: NaN, inf
                raw = np.frombuffer(data, dtype=dtype, count=n, offset=shift).astype(np.float64)
            raw = np.nan_to_num(raw, nan=1e30, posinf=1e30, neginf=-1e30)
            at = np.searchsorted(keys, raw)
            for k in (np.clip(at - 1, 0, len(keys) - 1), np.clip(at, 0, len(keys) - 1)):
                pos = np.flatnonzero(np.abs(raw - keys[k]) < tol)
                run = k[pos]
                start = pos - pivots[run]
                ok = (start >= 0) & (start + WINDOW <= n)
                start, run = start[ok], run[ok]
                for i in range(0, len(start), 4096):  # confirm whole runs, a block of candidates at a time
                    s, r = start[i:i + 4096], run[i:i + 4096]
                    whole = np.all(np.abs(raw[s[:, None] + span] - runs[r]) < tol, axis=1)
                    hits.update((str(path.relative_to(root)), shift + width * int(x)) for x in s[whole])
    return sorted(hits)


def text_hits(root: Path, words) -> list[tuple[str, str]]:
    """(file, word) for each word found in a file under ``root``, as UTF-8 or UTF-16."""
    out = []
    for path in sorted(p for p in Path(root).rglob("*") if p.is_file()):
        data = path.read_bytes()
        out += [(str(path.relative_to(root)), w) for w in words
                if w.encode("utf-8") in data or w.encode("utf-16-le") in data]
    return out


@dataclass
class Forgotten:
    """What one purged memory looked like on disk: its vectors (Chroma's, the second opinion's) and words."""

    vectors: list[np.ndarray] = field(default_factory=list)
    seconds: list[np.ndarray] = field(default_factory=list)
    words: list[str] = field(default_factory=list)

    def found(self, root: Path) -> dict:
        """Every trace of it under ``root``: {"vectors", "seconds", "words"}, each a list of (file, where)."""
        return {"vectors": vector_hits(root, self.vectors),
                "seconds": vector_hits(root, self.seconds, dtype=np.float16, tol=1e-4),
                "words": text_hits(root, self.words)}


def secret_memory(brain, space: str, tag: str) -> tuple[str, Forgotten]:
    """Write a two-moment memory with words found nowhere else; return its id and what to look for."""
    zh, latin = f"紫藤萝暗号{tag}", f"quixotryzzle{tag}"
    bid = brain.write(space=space, title=f"秘密 {zh}", body=f"我们约好的{zh}是 {latin}。")
    ids = [m.id for m in brain.store.moments(space, bid)]
    seconds = list(brain.store.second_vectors(space, ids).values())
    return bid, Forgotten(list(brain.store.get_vectors(space, ids).values()), seconds, [zh, latin])


def run_trial(brain, space: str, tag: str, *, threads: int = 8, seed: int = 12, load_s: float = 0.3) -> Forgotten:
    """Purge one memory while ``threads`` threads write to the space and run turns in it; return what to look for."""
    brain.write_many([{"space": space, "title": f"ordinary day {i}", "body": f"We walked to the bakery, day {i}."}
                      for i in range(seed)])
    bid, forgotten = secret_memory(brain, space, tag)
    stop, errors = threading.Event(), []

    def work(k: int) -> None:
        n = 0
        while not stop.is_set():
            try:
                if n % 2:
                    brain.turn(space, f"s{k}", f"do you remember the park {n}?")
                else:
                    brain.write(space=space, title=f"note {k}-{n}", body=f"thread {k} wrote note {n} about the park")
            except Exception as exc:  # noqa: BLE001 - reported, not hidden: the trial fails on any error
                errors.append(f"{type(exc).__name__}: {exc}")
            n += 1

    workers = [threading.Thread(target=work, args=(k,), daemon=True) for k in range(threads)]
    for w in workers:
        w.start()
    time.sleep(load_s)
    try:
        receipt = brain.purge(space, bucket_ids=[bid])
    finally:
        stop.set()
        for w in workers:
            w.join()
    if errors or receipt["payload"]["deleted"]["buckets"] != 1:
        raise AssertionError(f"trial {tag}: {errors[:3] or receipt['payload']['deleted']}")
    return forgotten


def _trial_in_fresh_dir(k: int, config: dict, args) -> dict:
    from ombre_brain import Brain

    root = Path(tempfile.mkdtemp(prefix="ombre-residue-"))
    try:
        brain = Brain.open(root / "data", config)
        try:
            forgotten = run_trial(brain, "haven:residue", str(k), threads=args.threads, seed=args.seed,
                                  load_s=args.load)
            while_open = forgotten.found(root / "data")
        finally:
            brain.close()
        closed = forgotten.found(root / "data")
        return {"trial": k, "open": while_open, "closed": closed,
                "clean": not any(while_open.values()) and not any(closed.values())}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ombre_brain.evaluate.residue",
                                 description="Purge a memory while threads write and run turns; search every file "
                                             "of the data directory for its vectors and words, by value.")
    ap.add_argument("--trials", type=int, default=30, help="how many trials, each in a fresh data directory")
    ap.add_argument("--threads", type=int, default=8, help="threads writing and running turns during the purge")
    ap.add_argument("--seed", type=int, default=150, help="memories written before the secret one")
    ap.add_argument("--load", type=float, default=1.0, help="seconds of load before the purge starts")
    ap.add_argument("--chroma", metavar="HOST:PORT", help="keep vectors on this Chroma server (`chroma run`)")
    args = ap.parse_args(argv)
    config: dict = {}
    if args.chroma:
        host, port = args.chroma.rsplit(":", 1)
        config = {"store": {"chroma": {"mode": "http", "host": host, "port": int(port)}}}
    dirty = 0
    for k in range(args.trials):
        started = time.perf_counter()
        out = _trial_in_fresh_dir(k, config, args)
        dirty += not out["clean"]
        found = {when: {kind: sorted({f for f, _ in v}) for kind, v in out[when].items() if v}
                 for when in ("open", "closed")}
        print(json.dumps({"trial": k, "clean": out["clean"], "found": found,
                          "seconds": round(time.perf_counter() - started, 1)}), flush=True)
    print(f"{dirty} of {args.trials} trials left a trace of the purged memory", flush=True)
    return 1 if dirty else 0


if __name__ == "__main__":
    sys.exit(main())
