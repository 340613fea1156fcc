"""``make e2e-openwebui``: the real Open WebUI in front of ``ombre-brain serve``, driven in headless Chromium.

Open WebUI (``--version``, installed once into its own virtualenv under ``--cache``) runs offline on loopback
with its OpenAI connection pointed at the proxy; the proxy's upstream is the stand-in (``tests/standin.py``),
which logs every request it is sent and answers from the memory it was given. Two setups are driven, each with
a fresh Open WebUI: **plain** (only the base URL, as a new user starts: sessions derived, tasks recognised by
their templates) and **headers** (the README's ``OPENAI_API_CONFIGS`` headers: ``owui:{{USER_ID}}``,
``{{CHAT_ID}}``, ``{{TASK}}``). In each, chat 1 tells six things and chat 2 asks about them in a new chat.

It prints every request the upstream saw and a table of checks, and exits 1 when a check fails: Open WebUI lists
the upstream's models; no task request got memory and none was written; chat requests stream; the cat and the
allergy come back in chat 2; each chat is its own session with one round per message.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from ..standin import StandInUpstream
from .checks import Request, check_phase, print_report
from .stack import FRAMING, chromium, ensure_openwebui, start_ombre, start_openwebui

CHAT_1 = ["我养了一只猫叫豆包，三岁了", "我对花生过敏，吃了会起疹子", "我每周跑步3-5次",
          "I usually drink 1-3 cups of coffee a day", "我下周要去成都出差", "My sister Lena is a nurse in Boston"]
CHAT_2 = ["豆包几岁了？", "我对什么过敏来着？", "What should I cook for dinner tonight?",
          "tell me something nice about cats", "我下周去哪出差？", "How many cups of coffee do I drink a day?"]
HEADERS = {"X-Ombre-Space": "owui:{{USER_ID}}", "X-Ombre-Session-Id": "{{CHAT_ID}}", "X-Ombre-Task": "{{TASK}}"}
TASK_JSON = {"title": '{"title": "Cat and peanuts"}', "tags": '{"tags": ["General"]}',
             "follow_ups": '{"follow_ups": ["Tell me more", "What else?", "Thanks"]}'}
MARK_RE = re.compile(r"\[#(\d+)\]")


class Upstream:
    """The stand-in, scripted: chat replies quote the memory they were given and end with a marker ``[#n]``."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.log: list[Request] = []
        self.phase = ""
        self.standin = StandInUpstream(on_request=self._seen)
        self.standin.responder = self._answer
        self.standin.chunk_delay = 0.03

    def _seen(self, record: dict) -> None:
        with self.lock:
            self.log.append(Request.of(record["body"], self.phase, len(self.log) + 1))

    def _answer(self, body: dict) -> str:
        with self.lock:
            req = next(r for r in reversed(self.log) if r.body is body)
        if not req.stream:
            req.reply = TASK_JSON.get(req.owui_task or "", "{}")
            return req.reply
        quoted = req.memory_quotes()
        said = ("I remember: " + " / ".join(quoted[:2])) if quoted else (
            "I don't remember that." if "UNKNOWN" in req.memory else "好的，我听着呢。")
        req.reply = f"{said} [#{req.n}]"
        return req.reply

    def since(self, n: int) -> list[Request]:
        with self.lock:
            return list(self.log[n:])


def _quiet(upstream: Upstream, settle: float = 2.5, limit: float = 30) -> None:
    """Wait until the upstream has seen nothing new for ``settle`` seconds: the frontend's background tasks
    after a reply (follow-ups, title, tags) are done."""
    deadline, count, since = time.time() + limit, len(upstream.log), time.time()
    while time.time() < deadline:
        time.sleep(0.3)
        if len(upstream.log) != count:
            count, since = len(upstream.log), time.time()
        elif time.time() - since >= settle:
            return


def _drain(ombre_url: str, space: str, limit: float = 120) -> None:
    """Wait until the ingestion worker is done: the space's memories stop changing for five seconds."""
    deadline, last, since = time.time() + limit, None, time.time()
    while time.time() < deadline:
        r = httpx.get(f"{ombre_url}/v1/buckets", params={"space": space, "limit": 500}, timeout=10)
        now = sorted(b["id"] for b in r.json().get("buckets", [])) if r.status_code == 200 else None
        if now != last:
            last, since = now, time.time()
        elif time.time() - since >= 5:
            return
        time.sleep(0.5)


def _chat(page, url: str, messages: list[str], upstream: Upstream, label: str) -> str:
    page.goto(url + "/", wait_until="load")
    box = page.locator("#chat-input")
    box.wait_for(timeout=60000)
    for text in messages:
        before = len(upstream.log)
        box.click()
        page.keyboard.type(text)
        page.keyboard.press("Enter")
        deadline = time.time() + 60
        mark = None
        while time.time() < deadline and mark is None:
            mark = next((r.n for r in upstream.since(before) if r.stream and r.last_user_plain == _typed(text)), None)
            time.sleep(0.2)
        if mark is None:
            raise SystemExit(f"{label}: the upstream never saw the message {text!r}")
        page.get_by_text(f"[#{mark}]").first.wait_for(timeout=60000)
        _quiet(upstream)
    return page.url.rsplit("/c/", 1)[-1] if "/c/" in page.url else ""


def _typed(text: str) -> str:
    return text.replace("'", "\u2019")  # Open WebUI's input box turns ' into ’


def _dismiss(page) -> None:
    ok = page.get_by_text("Okay, Let's Go!")
    try:
        ok.click(timeout=15000)
    except Exception:  # noqa: BLE001  (no changelog dialog this time)
        pass


def _owui_json(page, path: str):
    return page.evaluate("async (p) => { const r = await fetch(p, {headers: {Authorization: 'Bearer ' + "
                         "localStorage.token}}); return await r.json(); }", path)


def run_phase(name: str, exe: Path, run: Path, ombre_url: str, upstream: Upstream, browser, shots: Path | None,
              default_space: str) -> dict:
    configs = {"0": {"enable": True, "headers": HEADERS}} if name == "headers" else None
    upstream.phase = name
    owui, url = start_openwebui(exe, run, name, ombre_url, configs)
    try:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(url + "/", wait_until="load")
        _dismiss(page)
        models = [m["id"] for m in _owui_json(page, "/api/models").get("data", [])]
        user_id = _owui_json(page, "/api/v1/auths/").get("id", "")
        space = f"owui:{user_id}" if name == "headers" else default_space
        if shots:  # the model picker, opened from the button that shows the chosen model
            try:
                page.get_by_role("button").filter(has_text=models[0]).first.click(timeout=10000)
                time.sleep(1)
            except Exception:  # noqa: BLE001  (a layout without that button: the page as it is)
                pass
            page.screenshot(path=str(shots / f"openwebui-{name}-models.png"))
            page.keyboard.press("Escape")
        chat1 = _chat(page, url, CHAT_1, upstream, f"{name} chat 1")
        _drain(ombre_url, space)
        chat2 = _chat(page, url, CHAT_2, upstream, f"{name} chat 2")
        if shots:  # the chat scrolls inside the page: its top (the cat, the allergy), then its end
            page.mouse.move(640, 400)
            page.mouse.wheel(0, -30000)
            time.sleep(1.5)
            page.screenshot(path=str(shots / f"openwebui-{name}-chat2-top.png"))
            page.mouse.wheel(0, 30000)
            time.sleep(1.5)
            page.screenshot(path=str(shots / f"openwebui-{name}-chat2.png"))
        _drain(ombre_url, space)
        buckets = httpx.get(f"{ombre_url}/v1/buckets", params={"space": space, "limit": 500}, timeout=10).json()
        sessions = httpx.get(f"{ombre_url}/api/gateway-injections", params={"space": space, "limit": 100},
                             timeout=10).json()
        page.close()
    finally:
        owui.stop()
    return {"name": name, "models": models, "space": space, "chat_ids": [chat1, chat2],
            "buckets": buckets.get("buckets", []), "sessions": sessions.get("sessions", []),
            "turns": sessions.get("turns", []), "requests": [r for r in upstream.log if r.phase == name]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.e2e.openwebui", description=__doc__.splitlines()[0])
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "ombre-brain" / "e2e-openwebui")
    ap.add_argument("--version", default="0.12.4", help="the open-webui release to install (default 0.12.4)")
    ap.add_argument("--phases", default="plain,headers", help="plain, headers or both (default)")
    ap.add_argument("--screenshots", type=Path, help="a folder for screenshots (docs/screenshots for the docs)")
    ap.add_argument("--record", type=Path, help="write every request the upstream saw to this JSON file")
    ap.add_argument("--keep", action="store_true", help="keep the run's folder (logs, data directories)")
    args = ap.parse_args(argv)
    exe = ensure_openwebui(args.cache, args.version)
    exe_chromium = chromium()
    from playwright.sync_api import sync_playwright

    run = Path(tempfile.mkdtemp(prefix="ombre-e2e-openwebui-"))
    print(f"run folder: {run}", flush=True)
    if args.screenshots:
        args.screenshots.mkdir(parents=True, exist_ok=True)
    upstream = Upstream()
    default_space = "owui:default"
    ombre, ombre_url = start_ombre(run, upstream.standin.url, default_space)
    results = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=exe_chromium, headless=True, args=["--no-sandbox"])
            try:
                for name in [x.strip() for x in args.phases.split(",") if x.strip()]:
                    t0 = time.time()
                    results.append(run_phase(name, exe, run, ombre_url, upstream, browser, args.screenshots,
                                             default_space) | {"seconds": time.time() - t0})
            finally:
                browser.close()
    finally:
        ombre.stop()
        upstream.standin.close()
    if args.record:
        args.record.write_text(json.dumps([r.body | {"_phase": r.phase} for r in upstream.log], ensure_ascii=False,
                                          indent=1), encoding="utf-8")
    checks = [check_phase(r, CHAT_1, CHAT_2, upstream.standin.models) for r in results]
    ok = print_report(results, checks, args.version)
    if not args.keep and ok:
        import shutil

        shutil.rmtree(run, ignore_errors=True)
    else:
        print(f"logs and data kept in {run}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

__all__ = ["FRAMING", "main"]
