"""Post-exchange memory writing: the write decision, the durable job queue, crashes and replays."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from ombre_brain import Brain
from ombre_brain.cli import main as cli_main
from ombre_brain.config import load_config
from ombre_brain.errors import ValidationError
from ombre_brain.writing.exchange import exchange_id
from ombre_brain.writing.extractor import parse_extraction
from ombre_brain.writing.rules import rule_drafts

from .conftest import LEDGER_MODE, LiveServer, StandInUpstream, free_port, merged, open_test_ledger

SPACE = "haven:xiaoyu"
# A stable boundary and a relationship lesson in one message: two buckets, never one summary.
TEXT = "我不吃香菜，以后都别给我放香菜。下次我难过的时候你先抱抱我，别急着讲道理。"
EXTRACTION = {
    "user": {"layer": "stable_boundary", "title": "不吃香菜", "body": "小雨不吃香菜，做饭和推荐菜时都不要放。",
             "tags": ["香菜", "饮食"], "importance": 7, "valence": 0.3, "arousal": 0.4},
    "relationship": {"title": "难过时先抱抱", "body": "小雨难过时，先抱抱她，不要急着讲道理。", "from": "assistant"},
}


def wait_for(check, timeout: float = 20.0, every: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(every)
    raise AssertionError(f"condition not met within {timeout}s")


def open_brain(path: Path, standin, **config) -> Brain:
    up = {"base_url": standin.url, "model": "extract-model", "timeout_s": 10, "retries": 0}
    ingest = {"poll_s": 0.05, "backoff_s": 0.05, "max_attempts": 3}
    return Brain.open(path, {"identity": {"ai_name": "Haven", "user_name": "Xiaoyu"},
                             "upstream": up | config.pop("upstream", {}),
                             "ingest": ingest | config.pop("ingest", {}), **config})


def all_jobs(brain, space: str = SPACE) -> list[dict]:
    every = brain.gateway.ingest.table.list(states=("pending", "running", "done", "failed", "dead"))
    return [j for j in every if j["space"] == space]


def exchange_buckets(brain, job_id: str, space: str = SPACE) -> list:
    return [b for b in brain.list(space, limit=1000) if b.source == f"exchange:{job_id}"]


@pytest.fixture(scope="module")
def llm_standin():
    s = StandInUpstream()
    yield s
    s.close()


@pytest.fixture
def standin(llm_standin):
    """This module shares one stand-in upstream, reset before each test."""
    llm_standin.reset()
    return llm_standin


@pytest.fixture(scope="module")
def llm_brain(tmp_path_factory, llm_standin):
    """A Brain with the LLM extractor and no worker thread: tests run jobs themselves, each in its own space."""
    brain = open_brain(tmp_path_factory.mktemp("ingest") / "data", llm_standin,
                       ingest={"extractor": "llm", "max_attempts": 3, "backoff_s": 0.2})
    yield brain
    brain.close()


# ---------------------------------------------------------------- the write decision (pure)


def test_rules_split_a_boundary_and_a_lesson_into_two_buckets():
    cfg = load_config().writer
    user, rel = rule_drafts(TEXT, cfg)
    assert (user.side, user.fields["memory_layer"], user.fields["memory_subject"]) == ("u", "stable_boundary", "user")
    assert user.fields["body"] == "我不吃香菜，以后都别给我放香菜。"
    assert (rel.side, rel.fields["memory_layer"], rel.fields["memory_subject"]) == \
        ("r", "relationship_lesson", "relationship")
    assert rel.fields["body"] == "下次我难过的时候你先抱抱我，别急着讲道理。"
    for d in (user, rel):
        assert d.fields["memory_classification_source"] == "rule"
        assert d.fields["origin"] == "user" and d.fields["basis"] == "stated"


@pytest.mark.parametrize("text, layers", [
    ("哈哈好的", []),
    ("嗯嗯", []),
    ("今天头好疼，什么都不想做", ["short_state"]),
    ("昨天我们一起去看了海，第一次看到那么蓝的海。", ["process_event"]),
    ("I'm allergic to peanuts. Next time please don't order satay for me.",
     ["stable_boundary", "relationship_lesson"]),
    ("下次你别在我开会的时候发语音", ["relationship_lesson"]),
])
def test_rule_write_decision(text, layers):
    assert [d.fields["memory_layer"] for d in rule_drafts(text, load_config().writer)] == layers


def test_extractor_answer_parsing():
    fenced = "```json\n" + json.dumps(EXTRACTION, ensure_ascii=False) + "\n```"
    user, rel = parse_extraction(fenced)
    assert user.fields | {} == user.fields and user.fields["memory_layer"] == "stable_boundary"
    assert (user.fields["valence"], user.fields["arousal"], user.fields["importance"]) == (0.3, 0.4, 7)
    assert rel.fields["origin"] == "assistant" and rel.fields["memory_subject"] == "relationship"
    assert {d.fields["memory_classification_source"] for d in (user, rel)} == {"model"}
    assert parse_extraction('{"user": null, "relationship": null}') == []
    with pytest.raises(ValidationError, match="no JSON object"):
        parse_extraction("I think you should remember the coriander thing")
    with pytest.raises(ValidationError, match="not valid JSON"):
        parse_extraction("{user: coriander}")


def test_exchange_id_is_canonical():
    a = exchange_id(SPACE, "s1", ["你好", TEXT], "好的")
    assert a == exchange_id(SPACE, "s1", ["你好", TEXT], "好的") and len(a) == 64
    assert len({a, exchange_id(SPACE, "s2", ["你好", TEXT], "好的"), exchange_id(SPACE, "s1", [TEXT], "好的"),
                exchange_id(SPACE, "s1", ["你好", TEXT], "好")}) == 4


# ---------------------------------------------------------------- the queue


def test_same_exchange_sent_three_times_becomes_memory_once(tmp_path, standin):
    brain = open_brain(tmp_path / "data", standin, ingest={"extractor": "rule"})  # the cue-word writer's layers
    brain.gateway.start_worker()
    server = LiveServer(brain)
    try:
        body = {"model": "m", "messages": [{"role": "system", "content": "You are Haven."},
                                           {"role": "user", "content": TEXT}]}
        headers = {"X-Ombre-Space": SPACE, "X-Ombre-Session-Id": "s1"}
        with httpx.Client(base_url=server.url, timeout=30) as client:
            def send(payload=body):
                return client.post("/v1/chat/completions", json=payload, headers=headers).status_code

            assert send() == 200
            (job,) = wait_for(lambda: [j for j in all_jobs(brain) if j["state"] == "done"])
            assert send() == 200 and send() == 200
            # chat noise in the same conversation is a job too, and writes nothing
            assert send({"model": "m", "messages": [{"role": "user", "content": "哈哈好的"}]}) == 200
            noise = wait_for(lambda: [j for j in all_jobs(brain) if j["state"] == "done" and j["id"] != job["id"]])
        time.sleep(0.3)  # give a wrongly queued replay time to run
        assert sorted(j["id"] for j in all_jobs(brain)) == sorted([job["id"], noise[0]["id"]])
        assert noise[0]["result"] == {"bucket_ids": [], "noise": True, "extractor": "rule"}
        kept = exchange_buckets(brain, job["id"])
        assert sorted(b.id for b in kept) == sorted(job["result"]["bucket_ids"]) == \
            [f"x{job['id'][:12]}r", f"x{job['id'][:12]}u"]
        assert len(brain.list(SPACE, limit=1000)) == 2
        by_side = {b.id[-1]: b for b in kept}
        assert (by_side["u"].memory_layer, by_side["u"].memory_subject) == ("stable_boundary", "user")
        assert (by_side["r"].memory_layer, by_side["r"].memory_subject) == ("relationship_lesson", "relationship")
        assert {b.memory_classification_source for b in kept} == {"rule"} and {b.origin for b in kept} == {"user"}
        # the exchange became memory the next turn can use
        turn = brain.turn(SPACE, "s2", "我不吃什么来着？还记得吗").to_dict()
        assert by_side["u"].id in [i["bucket_id"] for s in turn["sections"] for i in s["items"]]
        assert brain.gateway.enqueue_exchange(SPACE, "s1", [{"role": "assistant", "content": "hi"}], "x") is None
    finally:
        server.close()
        brain.close()


def test_llm_extractor_writes_model_classified_buckets(llm_brain, standin):
    space = "haven:llm"
    standin.extraction = EXTRACTION
    job_id = llm_brain.gateway.enqueue_exchange(space, "s1", [{"role": "user", "content": TEXT}], "好，我记住了。")
    assert llm_brain.gateway.ingest.run_due() == 1
    (call,) = standin.extractor_requests()
    assert call["body"]["model"] == "extract-model"
    assert json.loads(call["body"]["messages"][1]["content"]) == {"user": TEXT, "assistant": "好，我记住了。"}
    kept = {b.id[-1]: b for b in exchange_buckets(llm_brain, job_id, space)}
    assert kept["u"].memory_classification_source == kept["r"].memory_classification_source == "model"
    assert (kept["u"].origin, kept["r"].origin) == ("user", "assistant")
    assert (kept["u"].valence, kept["u"].arousal, kept["u"].basis) == (0.3, 0.4, "inferred")


def test_an_exchange_repeating_a_stored_memory_joins_its_sources(llm_brain, standin):
    """The extractor's guesses never overwrite, and never fail on, what is stored (design §10)."""
    space = "haven:repeat"
    standin.extraction = EXTRACTION
    user = EXTRACTION["user"]
    mine = llm_brain.write(space, title=user["title"], body=user["body"], tags=user["tags"], importance=10,
                           pinned=True)
    job_id = llm_brain.gateway.enqueue_exchange(space, "s1", [{"role": "user", "content": TEXT}], "好，我记住了。")
    assert llm_brain.gateway.ingest.run_due() == 1
    job = llm_brain.gateway.ingest.table.get(job_id)
    assert job["state"] == "done", job
    assert mine in job["result"]["bucket_ids"]
    kept = llm_brain.get(space, mine)
    assert kept.importance == 10 and kept.pinned
    assert llm_brain.sources(space, mine) == ["", f"exchange:{job_id}"]


def test_failures_back_off_then_dead_letter_and_jobs_can_retry(llm_brain, standin, capsys):
    space, data = "haven:failing", str(llm_brain.path)
    standin.extract_status = 500
    q = llm_brain.gateway.ingest
    job_id = llm_brain.gateway.enqueue_exchange(space, "s1", [{"role": "user", "content": TEXT}], "好")
    assert q.process(job_id) == "failed"
    first = q.table.get(job_id)
    assert first["attempts"] == 1 and "500" in first["last_error"]
    assert q.run_due() == 0  # backing off: not due yet
    assert first["next_at"] - time.time() > 0.1
    wait_for(lambda: q.run_due() == 1)
    second = q.table.get(job_id)
    assert second["state"] == "failed" and second["next_at"] - time.time() > 0.25  # 0.2 * 2
    wait_for(lambda: q.run_due() == 1)
    assert q.table.get(job_id)["state"] == "dead"
    assert len(standin.extractor_requests()) == 3 and llm_brain.list(space) == []

    assert cli_main(["jobs", "--data", data, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["counts"]["dead"] >= 1 and job_id in [j["id"] for j in listed["jobs"] if j["state"] == "dead"]
    assert cli_main(["jobs", "--data", data]) == 0
    text = capsys.readouterr().out
    assert "dead: " in text and job_id[:16] in text and "500" in text
    assert cli_main(["jobs", "--data", data, "--retry", "nothex!"]) == 2
    assert cli_main(["jobs", "--data", data, "--retry", "abcdef0123"]) == 2
    capsys.readouterr()

    standin.extract_status = 200
    standin.extraction = EXTRACTION
    assert cli_main(["jobs", "--data", data, "--retry", job_id[:10]]) == 0
    assert "reset 1 job(s)" in capsys.readouterr().out
    assert q.table.get(job_id)["state"] == "pending" and q.table.get(job_id)["attempts"] == 0
    assert q.run_due() == 1
    assert q.table.get(job_id)["state"] == "done" and len(exchange_buckets(llm_brain, job_id, space)) == 2


def test_crash_after_writing_never_duplicates(llm_brain, standin):
    """A retry whose extractor words things differently still finds the buckets the crashed attempt wrote."""
    space = "haven:crash"
    standin.extraction = EXTRACTION
    q = llm_brain.gateway.ingest
    job_id = llm_brain.gateway.enqueue_exchange(space, "s1", [{"role": "user", "content": TEXT}], "好")
    job = q.table.claim(job_id)
    q._execute(job)  # wrote both buckets, then "crashed" before marking the job done
    assert q.table.get(job_id)["state"] == "running"
    standin.extraction = {"user": dict(EXTRACTION["user"], body="不吃香菜（换了个说法）"),
                          "relationship": dict(EXTRACTION["relationship"], body="难过时先拥抱（换了个说法）")}
    assert q.table.recover(max_attempts=3) == 1
    assert q.run_due() == 1
    job = q.table.get(job_id)
    assert job["state"] == "done" and job["attempts"] == 2
    kept = exchange_buckets(llm_brain, job_id, space)
    assert len(kept) == 2 and len(llm_brain.list(space, limit=100)) == 2
    assert "换了个说法" not in "".join(b.body for b in kept)


def test_interrupted_job_out_of_attempts_is_dead_lettered(llm_brain):
    q = llm_brain.gateway.ingest
    job_id = llm_brain.gateway.enqueue_exchange("haven:interrupted", "s1", [{"role": "user", "content": TEXT}], "好")
    q.table.claim(job_id)
    assert q.table.recover(max_attempts=1) == 1
    job = q.table.get(job_id)
    assert job["state"] == "dead" and "interrupted" in job["last_error"]


# ---------------------------------------------------------------- kill the server mid-job


def _job_rows(data: Path) -> list[tuple]:
    if LEDGER_MODE == "postgres":
        ledger = open_test_ledger(data)
        try:
            return [tuple(r) for r in ledger.query("SELECT id, state, attempts FROM jobs")]
        finally:
            ledger.close()
    with sqlite3.connect(data / "ledger.db", timeout=10) as conn:
        try:
            return conn.execute("SELECT id, state, attempts FROM jobs").fetchall()
        except sqlite3.OperationalError:  # the table does not exist yet
            return []


def _serve(data: Path, overlay: Path, port: int, log: Path) -> subprocess.Popen:
    out = open(log, "ab")  # noqa: SIM115 - the child owns it
    proc = subprocess.Popen([sys.executable, "-m", "ombre_brain.cli", "serve", "--data", str(data), "--config",
                             str(overlay), "--port", str(port)], stdout=out, stderr=subprocess.STDOUT)
    out.close()

    def up():
        if proc.poll() is not None:
            raise AssertionError(f"server exited: {log.read_text()[-2000:]}")
        try:
            return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    wait_for(up, timeout=90, every=0.2)
    return proc


def test_killed_mid_job_then_restarted_finishes_without_duplicates(tmp_path, standin, ledger_overlay):
    standin.extraction = EXTRACTION
    standin.extract_delays = [60]  # the first extractor call hangs, so the job is mid-flight when we kill
    data, log = tmp_path / "data", tmp_path / "server.log"
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(yaml.safe_dump(merged({
        "server": {"default_space": SPACE},
        "upstream": {"base_url": standin.url, "model": "extract-model", "timeout_s": 30, "retries": 0},
        "ingest": {"extractor": "llm", "poll_s": 0.05, "backoff_s": 0.1, "max_attempts": 3}}, ledger_overlay)),
        encoding="utf-8")
    port = free_port()
    proc = _serve(data, overlay, port, log)
    try:
        t0 = time.monotonic()
        r = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", timeout=30,
                       json={"model": "m", "messages": [{"role": "user", "content": TEXT}]})
        assert r.status_code == 200 and time.monotonic() - t0 < 5  # the reply never waits for writing
        wait_for(lambda: standin.extractor_requests())
        ((job_id, state, attempts),) = _job_rows(data)
        assert (state, attempts) == ("running", 1)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        assert _job_rows(data) == [(job_id, "running", 1)]

        proc = _serve(data, overlay, port, log)
        wait_for(lambda: _job_rows(data)[0][1] in ("done", "dead"), timeout=30)
        assert _job_rows(data) == [(job_id, "done", 2)]
        assert len(standin.extractor_requests()) == 2
        listed = httpx.get(f"http://127.0.0.1:{port}/v1/buckets", params={"space": SPACE}).json()["buckets"]
        assert sorted(b["id"] for b in listed) == [f"x{job_id[:12]}r", f"x{job_id[:12]}u"]
        assert {b["source"] for b in listed} == {f"exchange:{job_id}"}
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_unattributed_relationship_fragment_is_derived():
    from ombre_brain.writing.extractor import parse_extraction

    text = json.dumps({"relationship": {"title": "约定", "body": "以后周五一起打游戏。"}}, ensure_ascii=False)
    drafts = parse_extraction(text)
    assert [d.fields["origin"] for d in drafts] == ["derived"]
    text = json.dumps({"relationship": {"title": "约定", "body": "以后周五一起打游戏。", "from": "user"}},
                      ensure_ascii=False)
    assert [d.fields["origin"] for d in parse_extraction(text)] == ["user"]
