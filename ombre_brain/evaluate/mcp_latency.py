"""Turn latency through MCP over HTTP against ``/v1/inject``, on one live ``ombre-brain serve``.

    python -m ombre_brain.evaluate.mcp_latency [--data DIR] [--space S] [--query Q] [--n 200] [--mode legacy]

Both paths are timed from the client over loopback, against the same server process and store:
``POST /v1/inject`` (one turn, recorded, in a fresh session each time so every turn sees the same
candidates) and the MCP tool ``breath_search`` (one dry-run turn, including the SDK client's own
request building and result parsing). Requests alternate, so drift hits both alike, after a
warm-up of each. Prints p50, p95 and mean per path and the ratio of the p95s.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEFAULT_QUERY = "还记得我们去海边那次吗"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]


def _summary(ms: list[float]) -> dict:
    return {"n": len(ms), "p50_ms": round(_pct(ms, 50), 2), "p95_ms": round(_pct(ms, 95), 2),
            "mean_ms": round(statistics.fmean(ms), 2)}


async def _measure(url: str, space: str, query: str, n: int, warmup: int, mode: str) -> dict:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    inject, tool = [], []
    async with httpx2.AsyncClient(timeout=120) as http:
        async with Client(streamable_http_client(f"{url}/mcp", http_client=http), mode=mode) as client:
            for i in range(warmup + n):
                t = time.perf_counter()
                r = await http.post(f"{url}/v1/inject", json={"space": space, "session_id": f"bench-inject-{i}",
                                                              "query": query})
                a = (time.perf_counter() - t) * 1000
                r.raise_for_status()
                t = time.perf_counter()
                res = await client.call_tool("breath_search", {"query": query, "space": space})
                b = (time.perf_counter() - t) * 1000
                if res.is_error:
                    raise SystemExit(f"breath_search failed: {res.content[0].text}")
                if i >= warmup:
                    inject.append(a)
                    tool.append(b)
            items = len(res.structured_content["items"])
            protocol = client.protocol_version
    out = {"inject": _summary(inject), "mcp_breath_search": _summary(tool), "mcp_items": items,
           "mcp_protocol": protocol}
    out["p95_ratio"] = round(out["mcp_breath_search"]["p95_ms"] / out["inject"]["p95_ms"], 3)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ombre_brain.evaluate.mcp_latency", description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=None, help="data directory (default: a temporary one seeded with the demo)")
    ap.add_argument("--config", default=None)
    ap.add_argument("--space", default="haven:xiaoyu")
    ap.add_argument("--query", default=DEFAULT_QUERY)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--mode", default="auto", help="MCP client mode: auto (2026-07-28 when offered) or legacy "
                    "(the initialize handshake, as older clients do)")
    ap.add_argument("--demo", action="store_true",
                    help="seed the demo persona into --data first (if its space is empty)")
    args = ap.parse_args(argv)
    import anyio

    from ..brain import Brain
    from ..demo.seed import seed_persona

    data = Path(args.data or tempfile.mkdtemp(prefix="ombre-mcp-latency-"))
    if args.demo or args.data is None:
        with Brain.open(data, args.config) as brain:
            seed_persona(brain)
    port = _free_port()
    cmd = [sys.executable, "-m", "ombre_brain.cli", "serve", "--data", str(data), "--port", str(port)]
    if args.config:
        cmd += ["--config", args.config]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    raise SystemExit("ombre-brain serve did not start") from None
                time.sleep(0.2)
        result = anyio.run(_measure, url, args.space, args.query, args.n, args.warmup, args.mode)
    finally:
        proc.terminate()
        proc.wait(30)
    result.update(space=args.space, query=args.query, data=str(data))
    print(json.dumps(result, ensure_ascii=False, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
