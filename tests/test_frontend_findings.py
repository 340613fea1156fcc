"""Issue 53's findings 4–7, each through the real proxy (a stand-in upstream on loopback, the real write path).

4. Number ranges are not dates: "我每周跑步3-5次" and "1-3 cups a day" get no ``event_time``.
5. The companion's previous message is never a hit-proving part of the user's memory: only its question is kept,
   as a context-only section, and a fresh session's "What should I cook for dinner tonight?" does not recall the
   memory through it (the profile still shows the trip as what happened lately: every turn, not as a hit).
6. Statements and requests are not planned as memory lookups (no "memory lookup" mode, no UNKNOWN line).
7. Recent Context keeps the detail: "我养了一只猫叫豆包，三岁了", never "我养了一只猫叫豆包：我养了一只猫叫豆包".
"""

from __future__ import annotations

import re

import httpx
import pytest

from ombre_brain import Brain
from ombre_brain.buckets import build_moments

from .conftest import LiveServer, StandInUpstream

SPACE = "haven:findings"
CONFIG = {"identity": {"ai_name": "Haven", "user_name": "Xiaoyu"}, "server": {"default_space": SPACE}}
FRAMING = "The following are memories:"


@pytest.fixture
def proxy(tmp_path, monkeypatch):
    standin = StandInUpstream()
    monkeypatch.setenv("STANDIN_API_KEY", "upstream-secret")
    brain = Brain.open(tmp_path / "data", CONFIG | {"upstream": {"base_url": standin.url,
                                                                   "api_key_env": "STANDIN_API_KEY", "timeout_s": 10}})
    server = LiveServer(brain)
    with httpx.Client(base_url=server.url, timeout=60) as client:
        yield brain, client, standin
    server.close()
    brain.close()
    standin.close()


def say(brain, client, standin, session: str, *messages: tuple[str, str], reply: str = "嗯嗯。") -> str:
    """One proxied turn (the last message is the user's), its exchange written; the memory the upstream was given."""
    standin.reply = reply
    body = {"model": "m", "messages": [{"role": r, "content": t} for r, t in messages]}
    r = client.post("/v1/chat/completions", json=body, headers={"X-Ombre-Session-Id": session})
    assert r.status_code == 200, r.text
    brain.gateway.ingest.run_due()
    sent = standin.chat_requests()[-1]["body"]["messages"]
    return next((m["content"] for m in sent if m["role"] == "system" and m["content"].startswith(FRAMING)), "")


def stored(brain, words: str):
    found = [b for b in brain.store.list(SPACE, limit=200) if words in b.body]
    assert found, f"nothing stored holds {words!r}"
    return found[0]


def mode_of(memory: str) -> str:
    m = re.search(r"^Mode: ([a-z ]+)\.", memory, re.M)
    return m.group(1) if m else ""


def test_finding_4_number_ranges_are_not_dates(proxy):
    brain, client, standin = proxy
    say(brain, client, standin, "s1", ("user", "我每周跑步3-5次"))
    say(brain, client, standin, "s1", ("user", "我每周跑步3-5次"), ("assistant", "嗯嗯。"),
        ("user", "I usually drink 1-3 cups of coffee a day"))
    say(brain, client, standin, "s2", ("user", "3月5日我要去上海面试"))
    assert stored(brain, "3-5次").event_time is None  # was 2026-03-05
    assert stored(brain, "1-3 cups").event_time is None  # was 2026-01-03
    assert stored(brain, "上海面试").event_time.startswith(("2026-03-05", "2027-03-05"))  # a date is still a date


def test_finding_5_the_companions_message_never_proves_a_hit(proxy):
    brain, client, standin = proxy
    say(brain, client, standin, "first", ("user", "今天终于下班了"),
        ("assistant", "Long day, you made it! What are you cooking for dinner tonight?"),
        ("user", "我下周要去成都出差"))
    trip = stored(brain, "成都")
    assert trip.main_text == "我下周要去成都出差"  # the user's words alone
    assert "Long day" not in trip.body  # the companion's talk is not the user's memory; at most its question
    assert all(m.context_only for m in build_moments(trip) if m.section == "context")
    memory = say(brain, client, standin, "fresh", ("user", "What should I cook for dinner tonight?"))
    # the trip is what happened lately, a profile line (design §24); no section recalls it for this message
    sections = dict(re.findall(r"^## (.+?)\n(.*?)(?=^## |\Z)", memory, re.M | re.S))
    assert "我下周要去成都出差" in sections["Profile: who Xiaoyu is and how to be with them"]
    assert not any("成都" in text for head, text in sections.items() if not head.startswith("Profile"))
    assert "cooking for dinner" not in memory


def test_finding_6_statements_and_requests_are_not_lookups(proxy):
    brain, client, standin = proxy
    say(brain, client, standin, "cat", ("user", "我养了一只猫叫豆包，三岁了"))
    lookup = say(brain, client, standin, "chat", ("user", "你还记得我的猫叫什么吗"))
    assert mode_of(lookup) == "memory lookup"
    statement = say(brain, client, standin, "chat", ("user", "你还记得我的猫叫什么吗"), ("assistant", "当然，叫豆包。"),
                    ("user", "我下周要去成都出差"))
    assert mode_of(statement) == "casual" and "UNKNOWN" not in statement
    for request in ("What should I cook for dinner tonight?", "tell me something nice about cats"):
        memory = say(brain, client, standin, f"fresh-{request[:4]}", ("user", request))
        assert mode_of(memory) == "task" and "UNKNOWN" not in memory, (request, memory)


def test_finding_7_recent_context_keeps_the_detail(proxy):
    brain, client, standin = proxy
    say(brain, client, standin, "first", ("user", "我养了一只猫叫豆包，三岁了"))
    cat = stored(brain, "豆包")
    assert cat.title == "我养了一只猫叫豆包"  # the writer titles a memory with its first clause
    memory = say(brain, client, standin, "later", ("user", "最近我们都聊了些什么"))
    # a stable fact stands in the profile now (design §24); whichever section shows it keeps the whole line
    assert "> 我养了一只猫叫豆包，三岁了" in memory
    assert "豆包：我养了一只猫叫豆包" not in memory


def test_finding_5_a_store_written_before_stops_proving_hits_with_context(tmp_path):
    """Moments of a ``context`` section stored before it became context-only are turned so when the store opens."""
    body = "我下周要去成都出差\n\n### context\nLong day! What are you cooking for dinner tonight?"
    from ombre_brain.store.schema import STEPS, _context_never_proves

    with Brain.open(tmp_path / "old", CONFIG) as brain:
        brain.write(space=SPACE, id="trip", title="我下周要去成都出差", body=body)
        with brain.store.ledger.tx() as c:  # as a store from before wrote it, before the step that turns them
            c.execute("UPDATE moments SET context_only = 0 WHERE section = 'context'")
            c.execute("UPDATE schema_versions SET version = ? WHERE component = 'store'",
                      (STEPS.index(_context_never_proves),))
    with Brain.open(tmp_path / "old", CONFIG) as brain:
        rows = brain.store.ledger.query("SELECT section, context_only FROM moments WHERE bucket_id = 'trip'")
        assert {(r["section"], r["context_only"]) for r in rows} == {("title", 0), ("original", 0), ("context", 1)}
        assert "成都" not in brain.turn(SPACE, "s", "What are you cooking for dinner tonight?").rendered
