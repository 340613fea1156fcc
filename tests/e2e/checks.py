"""What an end-to-end run saw, request by request, and the checks it must pass.

A request is classified here on its own terms, not by Ombre Brain's adapters: an Open WebUI background task is a
request whose only user message opens with ``### Task:``; a chat turn is a streamed request. Memory is what the
proxy inserted: the system message that opens with the framing line.
"""

from __future__ import annotations

import dataclasses
import re

from ombre_brain.text import message_text

from .stack import FRAMING

_TASK_WORDS = (("title", "title"), ("tags", "tags"), ("follow_ups", "messages this user might"),
               ("follow_ups", "follow-up"), ("queries", "search queries"), ("autocomplete", "autocompletion"),
               ("image_prompt", "image generation"))


@dataclasses.dataclass
class Request:
    n: int
    phase: str
    body: dict
    stream: bool
    last_user_plain: str
    memory: str
    owui_task: str | None
    reply: str = ""

    @classmethod
    def of(cls, body: dict, phase: str, n: int) -> Request:
        msgs = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        users = [message_text(m.get("content")) for m in msgs if m.get("role") == "user"]
        last = users[-1] if users else ""
        memory = next((message_text(m.get("content")) for m in msgs if m.get("role") == "system"
                       and message_text(m.get("content")).startswith(FRAMING)), "")
        task = None
        if len(users) == 1 and last.lstrip().startswith("### Task:"):
            head = last.lstrip()[len("### Task:"):].strip().split("\n", 1)[0].lower()
            task = next((name for name, word in _TASK_WORDS if word in head), "other")
        return cls(n, phase, body, body.get("stream") is True, last, memory, task)

    @property
    def sections(self) -> list[str]:
        return re.findall(r"^## (.+)$", self.memory, re.M)

    def memory_quotes(self) -> list[str]:
        """The quoted memory lines (what the companion was given to remember), Context Mode aside."""
        return [line[2:].strip() for line in self.memory.splitlines() if line.startswith("> ") and line[2:].strip()]

    @property
    def mode(self) -> str:
        m = re.search(r"^Mode: ([a-z _]+)\.", self.memory, re.M)
        return m.group(1) if m else "-"


def _inside_typed(text: str, typed: list[str]) -> bool:
    flat = " ".join(text.split())
    return any(flat and flat in " ".join(t.split()) for t in typed)


def check_phase(result: dict, chat1: list[str], chat2: list[str], upstream_models: list[str]) -> list[tuple]:
    """(check, value, passed) rows for one setup."""
    reqs: list[Request] = result["requests"]
    tasks = [r for r in reqs if r.owui_task]
    chats = [r for r in reqs if not r.owui_task]
    typed = [*chat1, *chat2]
    rows = []
    rows.append(("Open WebUI lists the upstream's models", ", ".join(result["models"]) or "none",
                 set(upstream_models) <= set(result["models"])))
    counts = {}
    for r in tasks:
        counts[r.owui_task] = counts.get(r.owui_task, 0) + 1
    rows.append(("task requests (title, tags, follow-ups …)", ", ".join(f"{k} {v}" for k, v in sorted(counts.items())),
                 len(tasks) >= 4))
    rows.append(("memory sections injected into task requests", sum(len(r.sections) for r in tasks),
                 all(not r.memory for r in tasks)))
    streamed = [r for r in chats if r.stream]
    rows.append(("chat requests, streamed", f"{len(streamed)} of {len(chats)}",
                 len(chats) == len(typed) and len(streamed) == len(chats)))
    written = [b for b in result["buckets"]]
    foreign = [b for b in written if not _inside_typed(_main(b), typed)]
    rows.append(("memories written", len(written), len(written) >= 4))
    rows.append(("memories written from task requests", len(foreign), not foreign and not any(
        "### Task" in (b.get("body") or "") or "chat_history" in (b.get("body") or "") for b in written)))
    by_text = {r.last_user_plain: r for r in chats}

    def recalled(question: str, word: str) -> tuple[str, bool]:
        r = by_text.get(question.replace("'", "\u2019"))
        got = bool(r and word in "\n".join(r.memory_quotes()))
        return (f"{word!r} {'in' if got else 'NOT in'} its memory; reply: {r.reply[:60] if r else '-'}", got)

    for question, word in ((chat2[0], "豆包"), (chat2[1], "花生")):
        value, got = recalled(question, word)
        rows.append((f"chat 2: {question}", value, got))
    for question, word in ((chat2[4], "成都"), (chat2[5], "coffee")):
        value, got = recalled(question, word)
        rows.append((f"chat 2: {question} (not required)", value, None))
    dinner = by_text.get(chat2[2])
    rows.append((f"chat 2: {chat2[2]}", f"mode {dinner.mode if dinner else '-'}; "
                 f"{'UNKNOWN' if dinner and 'UNKNOWN' in dinner.memory else 'no UNKNOWN'}; "
                 f"{'Chengdu recalled' if dinner and '成都' in dinner.memory else 'no Chengdu'}",
                 bool(dinner) and dinner.mode != "memory lookup" and "UNKNOWN" not in dinner.memory
                 and "成都" not in dinner.memory))
    sessions = sorted(result["sessions"], key=lambda s: s["session"])
    rounds = sorted(s["round"] for s in sessions)
    rows.append(("sessions (one per chat) and their rounds",
                 "; ".join(f"{s['session']}: {s['round']}" for s in sessions),
                 rounds == sorted([len(chat1), len(chat2)])))
    if result["name"] == "headers":
        rows.append(("sessions are Open WebUI's chat ids", ", ".join(result["chat_ids"]),
                     {s["session"] for s in sessions} == set(result["chat_ids"])))
    ranges = [b for b in written if re.search(r"\d-\d", _main(b))]
    rows.append(("number ranges kept out of event_time", "; ".join(f"{_main(b)[:24]} -> {b.get('event_time')}"
                                                                     for b in ranges) or "none written",
                 all(not b.get("event_time") for b in ranges)))
    return rows


def _main(bucket: dict) -> str:
    body = bucket.get("body") or ""
    return body.split("\n### ", 1)[0].strip()


def print_report(results: list[dict], checks: list[list[tuple]], version: str) -> bool:
    print(f"\n## Open WebUI {version} in front of ombre-brain serve: every request the upstream saw\n")
    print("| # | setup | request | stream | memory injected | mode | upstream's reply |")
    print("|---|---|---|---|---|---|---|")
    for res in results:
        for r in res["requests"]:
            what = f"task: {r.owui_task}" if r.owui_task else r.last_user_plain[:40]
            injected = ", ".join(r.sections) if r.memory else "none"
            print(f"| {r.n} | {res['name']} | {what} | {'yes' if r.stream else 'no'} | {injected} | "
                  f"{r.mode if r.memory else '-'} | {r.reply[:50].replace('|', '/')} |")
    ok = True
    for res, rows in zip(results, checks, strict=True):
        print(f"\n## checks: {res['name']} (space {res['space']}, {res['seconds']:.0f} s)\n")
        print("| check | value | result |")
        print("|---|---|---|")
        for name, value, passed in rows:
            verdict = "info" if passed is None else "PASS" if passed else "FAIL"
            ok = ok and passed is not False
            print(f"| {name} | {str(value).replace('|', '/')} | {verdict} |")
    print(f"\n{'all checks passed' if ok else 'SOME CHECKS FAILED'}")
    return ok
