"""Work around a turn: `jobs` (post-exchange memory writing) and `dream run`."""

from __future__ import annotations

import json
import sys

from ..config import load_config
from ..gateway.jobs import JobTable, _iso
from ..store.ledger import open_ledger
from ..timeutil import parse_time
from .common import open_brain, print_json


def cmd_dream_run(args) -> int:
    """`ombre-brain dream run --space S [--now T]`: print the run's report; a dreamless run is not an error."""
    now = parse_time(args.now, "now") if args.now else None
    with open_brain(args) as brain:
        run = brain.dream_engine.run(args.space, now=now)
    print_json(run.to_dict())
    if run.dream_id is None:
        print(f"ombre-brain: no dream: {run.message}", file=sys.stderr)
    return 0


def cmd_jobs(args) -> int:
    """`ombre-brain jobs [--retry ID|dead|failed] [--json]`: list pending, failed and dead jobs."""
    cfg = load_config(*(f for f in (args.config,) if f))
    ledger = open_ledger(cfg.store, args.data, must_exist=True)
    try:
        table = JobTable(ledger)
        retried = [jid for target in (args.retry or []) for jid in table.retry(target)]
        counts, rows = table.counts(), table.list()
    finally:
        ledger.close()
    if args.json:
        print(json.dumps({"counts": counts, "retried": retried, "jobs": [
            {k: r[k] for k in ("id", "space", "session", "state", "attempts", "last_error", "created", "updated")}
            | {"next_at": _iso(r["next_at"])} for r in rows]}, ensure_ascii=False, indent=2))
        return 0
    if retried:
        print(f"reset {len(retried)} job(s) to pending: {', '.join(j[:16] for j in retried)}")
    print("  ".join(f"{s}: {n}" for s, n in counts.items()))
    for r in rows:
        when = f"next {_iso(r['next_at'])}" if r["state"] in ("pending", "failed") else f"updated {r['updated']}"
        err = f"  {r['last_error']}" if r["last_error"] else ""
        print(f"{r['id'][:16]}  {r['state']:<7}  attempts {r['attempts']}  {r['space']}/{r['session']}  {when}{err}")
    return 0
