"""How long a long write takes: the figures of issue 35 (docs/benchmarks.md, "Long writes").

``python -m ombre_brain.evaluate.long_writes [--repeat 3] [--unbounded]`` writes, in a fresh data
directory each time:

- a 20,000-character Chinese body of short sentences, one without any sentence end, and a mixed
  Chinese and English one, through :meth:`Brain.write`;
- a 15,000-character text through MCP ``grow`` (cut by rules into 2-6 memories);
- the 20,000-character body again while another space runs a short turn, whose time is reported
  beside it (the fairness guarantee of docs/fairness.md).

``--unbounded`` lifts ``embedding.max_tokens_per_memory`` to what the code did before issue 35
(every moment embedded whole), for the before/after comparison. The model is loaded before any
clock starts. Prints one JSON line per case, then the medians.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ZH = "我们一起去海边看日出我家小狗叫豆包晚上想吃重庆火锅今天天气很好她把围巾借给了我"
EN = "we walked along the pier and talked about the summer plans for a long time while the wind picked up "
UNBOUNDED = 100_000_000


def zh(n: int, seed: int, sentence: tuple[int, int] | None = (12, 40)) -> str:
    rng = random.Random(seed)
    if sentence is None:
        return "".join(rng.choice(ZH) for _ in range(n))
    out: list[str] = []
    while sum(map(len, out)) < n:
        out.append("".join(rng.choice(ZH) for _ in range(rng.randint(*sentence))) + "。")
    return "".join(out)[:n]


def mixed(n: int, seed: int) -> str:
    rng = random.Random(seed)
    out: list[str] = []
    while sum(map(len, out)) < n:
        out.append(zh(rng.randint(40, 160), rng.randint(0, 10**6)) if rng.random() < 0.5 else EN * rng.randint(1, 2))
        out.append("\n\n")
    return "".join(out)[:n]


def diary(n: int, seed: int) -> str:
    """A long day in paragraphs (what grow is for)."""
    rng = random.Random(seed)
    out: list[str] = []
    while sum(map(len, out)) < n:
        out.append(zh(rng.randint(200, 900), rng.randint(0, 10**6)) + "\n\n")
    return "".join(out)[:n].strip()


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def run_once(config: dict, seed: int) -> dict:
    from ..brain import Brain
    from ..mcp.access import Access, Call
    from ..mcp.write import grow

    out: dict = {}
    with tempfile.TemporaryDirectory(prefix="ombre-long-") as tmp, Brain.open(Path(tmp) / "data", config) as brain:
        brain.write(space="haven:b", title="scarf", body="She lent me her blue scarf by the river.")
        brain.turn("haven:b", "warm", "her blue scarf", dry_run=True)  # models loaded, caches warm
        for name, body in (("write_20000_zh_sentences", zh(20000, seed)),
                           ("write_20000_zh_no_sentence_end", zh(20000, seed + 1, None)),
                           ("write_20000_mixed", mixed(20000, seed + 2))):
            out[name] = _timed(lambda b=body, n=name: brain.write(space="haven:a", title=n, body=b))
        call = Call(brain, Access("*"), "haven:a")
        text = diary(15000, seed + 3)
        out["grow_15000"] = _timed(lambda: grow(call, content=text, space="haven:a"))
        body = zh(20000, seed + 4)
        took: dict[str, float] = {}
        writer = threading.Thread(target=lambda: took.update(
            write_20000_under_turns=_timed(lambda: brain.write(space="haven:a", title="again", body=body))))
        writer.start()
        time.sleep(0.3)
        took["short_turn_meanwhile"] = _timed(lambda: brain.turn("haven:b", "short", "that blue scarf by the river"))
        writer.join()
        out.update(took)
    return {k: round(v, 2) for k, v in out.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ombre_brain.evaluate.long_writes", description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="runs, each in a fresh data directory (default 3)")
    ap.add_argument("--unbounded", action="store_true",
                    help="embed every moment whole, as before issue 35 (embedding.max_tokens_per_memory lifted)")
    ap.add_argument("--seed", type=int, default=11)
    args = ap.parse_args(argv)
    config = {"embedding": {"max_tokens_per_memory": UNBOUNDED}} if args.unbounded else {}
    runs = []
    for i in range(args.repeat):
        runs.append(run_once(config, args.seed + 10 * i))
        print(json.dumps({"run": i, **runs[-1]}), flush=True)
    medians = {k: round(statistics.median(r[k] for r in runs), 2) for k in runs[0]}
    print(json.dumps({"median": medians, "unbounded": args.unbounded}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
