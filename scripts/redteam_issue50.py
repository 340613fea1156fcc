"""Issue 50's red-team shapes against a live ``ombre-brain serve``, with the numbers they are judged by.

Starts one ``serve`` on loopback (a fresh data directory, three token-scoped spaces and a letter token pair),
then:

1. **billion laughs**: a nine-level YAML alias bomb as a playground draft, on every draft route;
2. **the letter oracle**: twelve guessed words (six in two sealed letters, six absent) through ``/v1/inject``
   (with and without ``now`` on the letters' minute), the proxy and its turn log, the recall, breath and
   diffusion debug routes, and MCP ``breath``/``breath_search``/``breath_advanced``; every letter id found in
   any answer is counted;
3. **hostile replays**: a 30,000-cue draft sent by two scoped tokens (refused), then the largest draft the cap
   admits replayed over 200 recorded turns by both at once, while a third space runs ``/v1/inject`` turns;
   its latency is compared with the same turns before, and a cancel's time to take effect is measured.

The server's peak RSS is sampled from /proc every 0.1 s throughout. Prints one JSON object. Run it with the
project's virtualenv: ``.venv/bin/python scripts/redteam_issue50.py``. Loopback only; it stops by itself.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import anyio
import httpx
import yaml

A, B, C = "red:a", "red:b", "red:c"
TOKENS = {"RT_A": "rt-token-a", "RT_B": "rt-token-b", "RT_C": "rt-token-c", "RT_PERSON": "rt-person",
          "RT_COMPANION": "rt-companion"}
IN_LETTERS = ["围巾", "衣柜", "望远镜", "桂花糕", "灯塔", "邮票"]
ABSENT = ["钢琴", "火车", "雨伞", "咖啡", "风筝", "书包"]
RECORDED = 500  # server.playground.max_turns: the longest replay a token may ask for


def auth(name: str) -> dict:
    return {"Authorization": f"Bearer {TOKENS[name]}"}


class Upstream:
    """A loopback stand-in for the upstream LLM, so the proxy path runs."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = json.dumps({"id": "x", "object": "chat.completion", "model": "m", "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": "嗯。"}, "finish_reason": "stop"}]})
                data = body.encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


class RSS:
    """Peak resident set size of one process, sampled from /proc."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak, self.stop = pid, 0, threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    def now(self) -> int:
        try:
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    def _run(self) -> None:
        while not self.stop.is_set():
            self.peak = max(self.peak, self.now())
            time.sleep(0.1)


def bomb(levels: int = 9) -> str:
    names = ["tone_only", "skip_only", "explicit_recent", "just_now", "explicit_old", "conflict", "repair",
             "memory_lookup", "favorite_request"]
    lines = ["cues:", f"  {names[0]}: &a0 [{', '.join(['lol'] * 9)}]"]
    lines += [f"  {names[i]}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def many_cues(n: int) -> str:
    words, i = [], 0
    while len(words) < n:
        j, w = i, ""
        for _ in range(5):
            w += "abcdefghijklmnopqrstuvwxyz"[j % 26]
            j //= 26
        words.append(w)
        i += 1
    return f"cues:\n  memory_lookup: [{', '.join(words)}]\n"


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return round(s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))], 4)


def main() -> int:
    root = Path(tempfile.mkdtemp(prefix="ombre-redteam-"))
    upstream = Upstream()
    cfg = {"identity": {"ai_name": "Haven", "user_name": "Xiaoyu"},
           "upstream": {"base_url": upstream.url, "timeout_s": 10},
           "server": {"default_space": A, "tokens": [
               {"token_env": "RT_A", "spaces": [A]}, {"token_env": "RT_B", "spaces": [B]},
               {"token_env": "RT_C", "spaces": [C]},
               {"token_env": "RT_PERSON", "spaces": [A], "side": "person"},
               {"token_env": "RT_COMPANION", "spaces": [A], "side": "companion"}]}}
    (root / "config.yaml").write_text(yaml.safe_dump(cfg, allow_unicode=True), encoding="utf-8")
    port = _free_port()
    env = {**os.environ, **TOKENS, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    log = open(root / "serve.log", "wb")  # noqa: SIM115 - closed at the end
    proc = subprocess.Popen([sys.executable, "-m", "ombre_brain.cli", "serve", "--data", str(root / "data"),
                             "--config", str(root / "config.yaml"), "--port", str(port)],
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    out: dict = {"data": str(root)}
    rss = RSS(proc.pid)
    try:
        _wait(url, proc)
        out["rss_after_start_mb"] = round(rss.now() / 2**20)
        with httpx.Client(base_url=url, timeout=120) as c:
            _seed(c)
            out["billion_laughs"] = _laughs(c, rss)
            out["letter_oracle"] = _oracle(c, url)
            out["hostile_replays"] = _replays(c)
        out["rss_peak_mb"] = round(rss.peak / 2**20)
    finally:
        rss.stop.set()
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        upstream.server.shutdown()
    out["ok"] = (out.get("rss_peak_mb", 10**9) < 1536 and out["letter_oracle"]["letter_ids_in_answers"] == 0
                 and out["hostile_replays"]["victim_inject_p95_s_during"] < 0.2)
    print(json.dumps(out, ensure_ascii=False, indent=2))
    return 0 if out["ok"] else 1


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(url: str, proc) -> None:
    deadline = time.time() + 180
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit("serve exited during start-up")
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise SystemExit("serve did not answer within 180 s")


def _seed(c: httpx.Client) -> None:
    base = datetime(2026, 5, 1, 20, 0, tzinfo=timezone.utc)
    for space, token in ((A, "RT_A"), (B, "RT_B"), (C, "RT_C")):
        for i in range(12):
            r = c.post("/v1/buckets", headers=auth(token), json={
                "space": space, "title": f"海边的第{i}个傍晚", "body": f"我们在海边捡贝壳，第{i}次，看了日落。"})
            r.raise_for_status()
    for space, token in ((A, "RT_A"), (B, "RT_B")):
        for i in range(RECORDED):
            c.post("/v1/inject", headers=auth(token), json={
                "space": space, "session_id": f"chat{i % 4}", "query": f"你还记得海边的第{i % 12}个傍晚吗",
                "now": (base + timedelta(minutes=i)).isoformat()}).raise_for_status()


def _laughs(c: httpx.Client, rss: RSS) -> dict:
    text = bomb(9)
    before = rss.now()
    answers = {}
    t0 = time.perf_counter()
    for path in ("/api/playground/check", "/api/playground/overlay", "/api/playground/replay",
                 f"/debug/playground/overlay?space={A}"):
        r = c.post(path, headers=auth("RT_A"), json={"space": A, "policy": text})
        err = (r.json().get("error") or {}) if r.headers.get("content-type", "").startswith("application/json") else {}
        answers[path] = {"status": r.status_code, "line": err.get("line"), "problem": err.get("problem")}
    form = c.post("/debug/playground/overlay", params={"space": A}, headers={
        "Content-Type": "application/x-www-form-urlencoded", **auth("RT_A")}, content=b"policy=gateway%3A+%7B%7D")
    return {"bytes": len(text.encode()), "answers": answers, "seconds": round(time.perf_counter() - t0, 3),
            "rss_before_mb": round(before / 2**20), "rss_after_mb": round(rss.now() / 2**20),
            "form_post_status": form.status_code}


def _oracle(c: httpx.Client, url: str) -> dict:
    unlock = (datetime.now(timezone.utc) + timedelta(days=30)).isoformat(timespec="seconds")
    person = c.post("/v1/letters", headers=auth("RT_PERSON"), json={
        "space": A, "content": "我把那条蓝色围巾藏在衣柜最上层，旁边是给你买的望远镜。", "lock_type": "permanent"})
    person.raise_for_status()

    async def companion_letter():
        async with _mcp(url, "RT_COMPANION") as client:
            return await client.call_tool("letter_write", {
                "author": "Haven", "content": "我最喜欢吃桂花糕。等灯塔亮起来的那天，我会把那枚邮票寄给你。",
                "lock_type": "timed", "unlock_date": unlock})

    written = anyio.run(companion_letter)
    ids = {person.json()["letter_id"], written.structured_content["letter_id"]}
    at = person.json()["created"]
    found: dict[str, list[str]] = {}
    answers = 0
    for n, word in enumerate(IN_LETTERS + ABSENT):
        q = f"你还记得{word}吗"
        texts = {
            "inject": c.post("/v1/inject", headers=auth("RT_PERSON"),
                             json={"space": A, "session_id": f"probe{n}", "query": q}).text,
            "inject now": c.post("/v1/inject", headers=auth("RT_PERSON"),
                                 json={"space": A, "session_id": f"probe-now{n}", "query": q, "now": at}).text,
            "proxy": c.post("/v1/chat/completions", headers={**auth("RT_PERSON"), "X-Ombre-Space": A,
                                                              "X-Ombre-Session-Id": f"proxy{n}"},
                            json={"model": "m", "messages": [{"role": "user", "content": q}]}).text,
        }
        texts["proxy log"] = c.get("/api/gateway-injections", headers=auth("RT_PERSON"),
                                   params={"space": A, "session": f"proxy{n}"}).text
        for route in ("/api/recall-debug", "/api/breath-debug", "/api/diffusion-debug"):
            for extra in ({}, {"now": at}):
                texts[f"{route} {sorted(extra)}"] = c.get(route, headers=auth("RT_PERSON"),
                                                          params={"space": A, "q": q, **extra}).text

        async def tools(q=q):
            got = {}
            async with _mcp(url, "RT_COMPANION") as client:
                for tool in ("breath", "breath_search", "breath_advanced"):
                    res = await client.call_tool(tool, {"query": q})
                    got[f"mcp {tool}"] = res.content[0].text + json.dumps(res.structured_content, ensure_ascii=False)
            return got

        texts.update(anyio.run(tools))
        answers += len(texts)
        hits = [surface for surface, text in texts.items() if any(i in text for i in ids)]
        if hits:
            found[word] = hits
    return {"words": len(IN_LETTERS + ABSENT), "answers_read": answers,
            "letter_ids_in_answers": sum(len(v) for v in found.values()), "where": found}


def _mcp(url: str, token: str):
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers=auth(token), timeout=120)
    return Client(streamable_http_client(f"{url}/mcp", http_client=http))


def _replays(c: httpx.Client) -> dict:
    def inject_times(tag: str, stop: threading.Event | None = None, n: int = 60) -> list[float]:
        """The victim space's turns, one after another: ``n`` of them, or until ``stop`` (at least ``n``)."""
        times: list[float] = []
        with httpx.Client(base_url=str(c.base_url), timeout=120) as own:
            i = 0
            while len(times) < n or (stop is not None and not stop.is_set()):
                t0 = time.perf_counter()
                own.post("/v1/inject", headers=auth("RT_C"), json={
                    "space": C, "session_id": f"{tag}{i}", "query": f"你还记得海边的第{i % 12}个傍晚吗 {i}"})
                times.append(time.perf_counter() - t0)
                i += 1
        return times

    baseline = inject_times("base")
    huge = many_cues(30_000)
    refused = {t: c.post("/api/playground/replay", headers=auth(t), json={"space": s, "policy": huge, "last": 500})
               for t, s in (("RT_A", A), ("RT_B", B))}
    refused_out = {t: {"status": r.status_code, "key": r.json()["error"].get("key"),
                       "line": r.json()["error"].get("line"), "bytes": len(huge.encode())}
                   for t, r in refused.items()}
    capped = many_cues(1_600)  # with the defaults' 306 other cues: just under the cap of 2,000
    stop = threading.Event()
    during: list[float] = []
    victim = threading.Thread(target=lambda: during.extend(inject_times("during", stop)))
    jobs = {}
    t_start = time.perf_counter()
    for t, s in (("RT_A", A), ("RT_B", B)):
        r = c.post("/api/playground/replay", headers=auth(t), json={"space": s, "policy": capped, "last": RECORDED})
        r.raise_for_status()
        jobs[t] = (s, r.json()["id"])
    victim.start()
    states = {}

    def poll(token: str, every: float) -> dict:
        space, job_id = jobs[token]
        while True:
            job = c.get(f"/api/playground/replay/{job_id}", headers=auth(token), params={"space": space}).json()
            if job["state"] != "running":
                return job
            time.sleep(every)

    time.sleep(2.0)  # both replays under way, the victim's turns beside them; then B cancels
    s_b, id_b = jobs["RT_B"]
    c.delete(f"/api/playground/replay/{id_b}", headers=auth("RT_B"), params={"space": s_b})
    t_cancel = time.perf_counter()
    job = poll("RT_B", 0.01)
    cancel_s = time.perf_counter() - t_cancel
    states["RT_B"] = {"state": job["state"], "done": job["done"], "total": job["total"]}
    job = poll("RT_A", 0.2)
    states["RT_A"] = {"state": job["state"], "done": job["done"], "total": job["total"], "seconds": job["seconds"]}
    stop.set()
    victim.join()
    return {
        "refused_30000_cues": refused_out,
        "replay_states": states, "replays_wall_s": round(time.perf_counter() - t_start, 2),
        "cancel_took_s": round(cancel_s, 3),
        "victim_inject_p50_s_before": pct(baseline, 50), "victim_inject_p95_s_before": pct(baseline, 95),
        "victim_inject_p50_s_during": pct(during, 50), "victim_inject_p95_s_during": pct(during, 95),
        "victim_turns_during": len(during), "victim_mean_s_during": round(statistics.mean(during), 4),
    }


if __name__ == "__main__":
    sys.exit(main())
