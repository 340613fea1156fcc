"""The policy playground (docs/design.md §22) without a browser: a draft replayed on recorded turns, scenarios and
labelled sets as dry runs; what it changes, turn by turn; nothing written; a bad draft named by its line; the
overlay it leaves; purges reaching the recorded turns; and only a token for the space may replay it."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

import httpx
import pytest
import yaml

from ombre_brain import Brain, ConfigError, load_config
from ombre_brain.demo.seed import seed_persona
from ombre_brain.replay.draft import overlay_of, overlay_text, parse_draft, policy_text
from ombre_brain.replay.pairs import Cancelled, replay_pairs
from ombre_brain.replay.playground import run_playground
from ombre_brain.replay.sources import recorded_source, scenario_source, set_source

from .conftest import LEDGER_MODE, SCENARIOS, LiveServer

SPACE = "haven:xiaoyu"
T0 = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(hours=1)
# a conversation where cooldowns bite: the hospital memories come up again within five rounds
QUERIES = ["外婆住院的时候", "还记得我们去海边那次吗", "外婆住院的时候", "豆包最近怎么样", "外婆住院的时候",
           "我们去海边看日出那次", "外婆住院的时候"]
CONFIG = {"identity": {"ai_name": "Haven", "user_name": "Xiaoyu"}, "server": {"default_space": SPACE}}


def record(brain: Brain, session: str = "s1", queries=QUERIES, start: datetime = T0, hear: bool = True) -> None:
    """Real turns, as a gateway sends them: each hears the conversation before it (unless ``hear`` is off)."""
    history: list[dict] = []
    for i, q in enumerate(queries):
        brain.turn(SPACE, session, q, now=start + timedelta(minutes=i), context=list(history))
        if hear:
            history += [{"role": "user", "content": q}, {"role": "assistant", "content": "嗯，我记得。"}]


def draft_text(brain: Brain, **changes) -> str:
    """The serving policy's YAML with dotted keys changed, as a designer would edit it."""
    data = yaml.safe_load(policy_text(brain.config))
    for key, value in changes.items():
        node = data
        *path, last = key.split("__")
        for p in path:
            node = node[p]
        node[last] = value
    return yaml.safe_dump(data, allow_unicode=True, sort_keys=False)


@pytest.fixture(scope="module")
def played(tmp_path_factory):
    b = Brain.open(tmp_path_factory.mktemp("played") / "data", CONFIG)
    seed_persona(b)
    record(b)
    yield b
    b.close()


def test_the_serving_policy_replays_what_was_sent(played):
    """Under the serving policy a replay shows what the turns sent: the state each met is the one recorded."""
    res = run_playground(recorded_source(played, SPACE, 50, played.config), played.config, played.config)
    assert res["source"]["turns"] == len(QUERIES) and res["source"]["skipped"] == 0
    assert res["drift"] == 0, [r["drift"] for r in res["turns"]]
    assert res["totals"]["changed"] == 0 and not any(r["changes"] for r in res["turns"])
    assert res["changed_keys"] == []


def test_a_shorter_cooldown_and_a_smaller_budget_show_turn_by_turn(played):
    text = draft_text(played, gateway__skip_recent_rounds=0, gateway__budgets__recalled_memory=120)
    draft = parse_draft(text, played.config)
    res = run_playground(recorded_source(played, SPACE, 50, draft), played.config, draft)
    assert res["changed_keys"] == ["gateway.skip_recent_rounds", "gateway.budgets.recalled_memory"]
    third = next(r for r in res["turns"] if r["at"] == (T0 + timedelta(minutes=2)).isoformat())
    back = next(c for c in third["changes"] if c["bucket_id"] == "grandma_hospital")
    assert (back["kind"], back["section_after"], back["reason_before"]) == ("enters", "recalled_memory",
                                                                            "skipped_recent_rounds")
    cooldown = next(g for g in back["gates"] if g["gate"] == "cooldown")
    assert cooldown["before"]["reason"] == "skipped_recent_rounds" and cooldown["after"]["allowed"] is True
    t = res["totals"]
    assert t["newly_injected"] >= 3 and t["changed"] >= 3
    before, after = t["section_tokens"]["recalled_memory"]
    assert after <= 120 * len(QUERIES) and before != after
    entered = Counter()  # the shorter cooldown's memories coming back: the most frequent way in, whatever admits them
    for r in t["reasons"]:
        if r["kind"] == "enters":
            entered[r["reason_before"]] += r["count"]
    assert entered.most_common(1)[0][0] == "skipped_recent_rounds", t["reasons"]
    assert third["items_after"]["recalled_memory"][0] in ("grandma_hospital", "grandma", "grandma_recovered")


def _ledger_rows(brain: Brain) -> dict:
    """Every row of every table of the SQLite ledger (the whole durable state but the vectors)."""
    con = sqlite3.connect(f"file:{brain.path / 'ledger.db'}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return {t: sorted(map(repr, con.execute(f"SELECT * FROM {t}").fetchall())) for t in tables}
    finally:
        con.close()


def _vectors(brain: Brain) -> dict:
    col = brain.store.chroma.collection(SPACE)
    got = col.get(include=["embeddings", "metadatas", "documents"])
    return {i: (json.dumps(m, sort_keys=True), repr(d), [round(float(x), 6) for x in e]) for i, m, d, e in
            zip(got["ids"], got["metadatas"], got["documents"], got["embeddings"], strict=True)}


@pytest.mark.skipif(LEDGER_MODE != "sqlite", reason="reads the SQLite ledger file directly")
def test_a_replay_writes_nothing(played):
    """The ledger, the Chroma collection and the turn log are the same after replays, in-process and over HTTP."""
    before = (_ledger_rows(played), _vectors(played), played.gateway.sessions.replay_log(SPACE, 500))
    text = draft_text(played, gateway__skip_recent_rounds=0, gateway__budgets__total=600,
                      dream__surface_threshold=0.1, gateway__favorite_interval_rounds=1)
    draft = parse_draft(text, played.config)
    run_playground(recorded_source(played, SPACE, 50, draft), played.config, draft)
    server = LiveServer(played)
    try:
        r = httpx.post(f"{server.url}/api/playground/replay", json={"space": SPACE, "policy": text, "last": 50},
                       timeout=30)
        assert r.status_code == 202, r.text
        job = _wait(server.url, r.json()["id"], SPACE)
        assert job["state"] == "done" and job["result"]["totals"]["changed"] > 0
    finally:
        server.close()
    after = (_ledger_rows(played), _vectors(played), played.gateway.sessions.replay_log(SPACE, 500))
    assert after[0] == before[0]
    assert after[1] == before[1]
    assert after[2] == before[2]


def _wait(url: str, job_id: str, space: str, headers=None, timeout: float = 300) -> dict:
    deadline = time.time() + timeout
    while time.time() < deadline:
        r = httpx.get(f"{url}/api/playground/replay/{job_id}", params={"space": space}, headers=headers, timeout=30)
        assert r.status_code == 200, r.text
        if r.json()["state"] != "running":
            return r.json()
        time.sleep(0.2)
    raise AssertionError("the replay did not finish")


@pytest.mark.parametrize("edit,line,key,problem", [
    (lambda t: t.replace("skip_recent_rounds: 5", "skip_recent_rounds: -1"), "skip_recent_rounds: -1",
     "gateway.skip_recent_rounds", "expected a value between 0 and"),
    (lambda t: t.replace("skip_recent_rounds: 5", "skip_recent_roundz: 5"), "skip_recent_roundz",
     "gateway.skip_recent_roundz", "unknown key"),
    (lambda t: t.replace("cooldown_hours: 6", "cooldown_hours: soon"), "cooldown_hours: soon",
     "gateway.cooldown_hours", "expected a number"),
    (lambda t: t.replace("  skip_recent_rounds: 5", "  skip_recent_rounds: [5"), "skip_recent_rounds: [5",
     None, "invalid YAML"),
    (lambda t: t + "store:\n  chroma: {mode: http}\n", "store:", "store", "set where the server starts"),
])
def test_a_bad_draft_names_its_line_and_the_serving_policy_keeps_running(played, edit, line, key, problem):
    text = edit(policy_text(played.config))
    with pytest.raises(ConfigError) as exc:
        parse_draft(text, played.config)
    lines = text.splitlines()
    want = next(i for i, ln in enumerate(lines, 1) if line in ln)
    if key is None:  # a syntax error is found where the parser gives up: at or after the broken line
        assert exc.value.line is not None and exc.value.line >= want
    else:
        assert exc.value.line == want and exc.value.key == key
        assert exc.value.message.startswith(f"draft: line {want}: key '{key}': ")
    assert problem in exc.value.message
    assert played.config.gateway.skip_recent_rounds == 5  # the serving policy is untouched
    assert played.turn(SPACE, "still", "外婆住院的时候", dry_run=True).item_ids("recalled_memory")


def test_the_overlay_holds_only_the_keys_that_differ_from_the_defaults(played, tmp_path):
    draft = parse_draft(draft_text(played, gateway__skip_recent_rounds=2, gateway__budgets__total=900), played.config)
    assert overlay_of(draft) == {"identity": {"user_name": "Xiaoyu"},  # the serving overlay's own change stays
                                 "gateway": {"skip_recent_rounds": 2, "budgets": {"total": 900}}}
    f = tmp_path / "persona.yaml"
    f.write_text(overlay_text(draft, space=SPACE), encoding="utf-8")
    loaded = load_config(f)
    assert (loaded.gateway.skip_recent_rounds, loaded.gateway.budgets.total) == (2, 900)
    assert loaded.gateway.budgets.recalled_memory == 900 and loaded.identity.user_name == "Xiaoyu"
    assert overlay_of(played.config, played.config) == {}


def test_a_purge_takes_a_memory_out_of_the_recorded_turns(tmp_path):
    """Turns that mention a purged memory go; turns that only met its cooldown forget it; a replay never sees it.

    Carrying is off here: a carried memory is weighed (and logged) on the turns after its recall, which then mention
    it and go with it; this test needs a turn that only met the cooldown."""
    with Brain.open(tmp_path / "data", {**CONFIG, "gateway": {"carry_rounds": 0}}) as b:
        seed_persona(b)
        # the later turns do not hear the first (a heard message quoting purged words would take its turn along)
        record(b, queries=["外婆住院的时候", "豆包最近怎么样", "还记得我们去海边那次吗"], hear=False)
        record(b, "s2", queries=["外婆住院的时候", "豆包最近怎么样"])
        log = b.gateway.sessions.replay_log(SPACE, 50)
        assert "grandma_hospital" in log[0]["turn"]["rendered"] or any(
            it["bucket_id"] == "grandma_hospital" for s in log[0]["turn"]["sections"] for it in s["items"])
        assert "grandma_hospital" in log[1]["replay"]["state"]["injected"]  # the next turn met its cooldown
        met = log[1]["seq"]
        b.purge(SPACE, bucket_ids=["grandma_hospital"])
        log = b.gateway.sessions.replay_log(SPACE, 50)
        assert {r["session"] for r in log} == {"s1"}, "s2's second turn heard the purged words: it went too"
        assert met in {r["seq"] for r in log}, "a turn that only met its cooldown stays, without it"
        assert "grandma_hospital" not in repr(log)
        assert all("grandma_hospital" not in r["replay"]["state"]["injected"] for r in log)
        src = recorded_source(b, SPACE, 50, b.config)
        with src.batches[0].open() as (_brain, turns, _cur, _draft):
            assert all("grandma_hospital" not in t.recorded_state.injected for t in turns)
        res = run_playground(src, b.config, parse_draft(draft_text(b, gateway__skip_recent_rounds=0), b.config))
        assert "grandma_hospital" not in repr(res)


def test_a_long_replay_can_be_cancelled_between_turns(played):
    from ombre_brain.debug_ui.replay_jobs import ReplayJobs

    src = recorded_source(played, SPACE, 50, played.config)
    cancel = threading.Event()
    seen = []

    def heard(pair):
        seen.append(pair)
        cancel.set()

    with src.batches[0].open() as (brain, turns, current, draft), pytest.raises(Cancelled):
        replay_pairs(brain, turns, current, draft, on_turn=heard, cancel=cancel)
    assert len(seen) == 1

    jobs = ReplayJobs(lambda space: None)

    def work(job):
        for i in range(1000):
            if job.cancel.wait(0.01):
                raise Cancelled()
            job.progress(i + 1, 1000)
        return {}

    job = jobs.start("haven:a", "recorded", 1000, work)
    time.sleep(0.1)
    assert jobs.get(job.id, "haven:a").done > 0
    jobs.cancel(job.id, "haven:a")
    for _ in range(100):
        if job.state != "running":
            break
        time.sleep(0.05)
    assert job.state == "cancelled" and job.result is None and job.done < 1000


def test_scenarios_and_labelled_sets_are_scored_under_both_policies(played, tmp_path):
    cooldown = SCENARIOS / "07_cooldown_skips_recent_rounds.yaml"
    draft = parse_draft(draft_text(played, gateway__skip_recent_rounds=0), played.config)
    res = run_playground(scenario_source([cooldown], played.config, draft), played.config, draft)
    m = res["metric"]
    assert (m["before"], m["after"], m["of"]) == (1, 0, 1)  # the scenario holds the default cooldown
    assert any(r["outcome"]["misses_after"] and not r["outcome"]["misses_before"] for r in res["turns"])

    inject = tmp_path / "mine.yaml"
    inject.write_text(yaml.safe_dump({
        "memories": {"m1": "我们在青岛的海边捡了一下午贝壳", "m2": "外婆住院那天我一直陪着她"},
        "queries": [{"q": "还记得在青岛捡贝壳吗", "want": ["m1"]}, {"q": "外婆住院的时候", "want": ["m2"]}],
        "negatives": ["我的猫叫什么名字"]}, allow_unicode=True), encoding="utf-8")
    strict = parse_draft(draft_text(played, layers__dynamic_memory__direct_seed="never",
                                    layers__long_term_anchor__direct_seed="never"), played.config)
    res = run_playground(set_source(inject, played.config, strict), played.config, strict)
    before, after = res["metric"]["before"]["kinds"], res["metric"]["after"]["kinds"]
    assert before["positive"]["zh"]["inject_recall"] == 100.0
    assert after["positive"]["zh"]["inject_recall"] == 0.0  # no layer may be a direct hit any more

    conv = tmp_path / "chat.yaml"
    conv.write_text(yaml.safe_dump({"conversations": [{"id": "c1", "user_name": "小满", "ai_name": "拾光", "sessions": [
        {"at": "2026-05-10T22:00:00+08:00", "exchanges": [
            {"user": "我不吃香菜，闻到就想吐", "assistant": "记住了", "write": {"user": "stable_boundary"},
             "keys": ["香菜"]}]},
        {"at": "2026-05-12T22:00:00+08:00", "exchanges": [
            {"user": "还记得我不吃什么吗", "assistant": "香菜！", "write": "none", "recall": ["香菜"]}]}]}]},
        allow_unicode=True), encoding="utf-8")
    silent = parse_draft(draft_text(played, layers__dynamic_memory__direct_seed="never",
                                    layers__long_term_anchor__direct_seed="never", gateway__budgets__profile=0),
                         played.config)  # and no profile: a stable fact stands there on every turn (design §24)
    res = run_playground(set_source(conv, played.config, silent), played.config, silent)
    assert res["metric"]["before"]["turn_recall"]["ok"] == 1 and res["metric"]["after"]["turn_recall"]["ok"] == 0


# ---------------------------------------------------------------- over HTTP: tokens, spaces, saving

A, B = "haven:a", "haven:b"
TOKENS = {"OMBRE_TOKEN": "star-secret", "TOKEN_A": "a-secret", "TOKEN_B": "b-secret"}


@pytest.fixture(scope="module")
def locked(tmp_path_factory):
    root = tmp_path_factory.mktemp("locked")
    cfg = {"server": {"tokens": [{"token_env": "TOKEN_A", "spaces": [A]}, {"token_env": "TOKEN_B", "spaces": [B]}],
                      "playground": {"save_dir": str(root / "personas")}}}
    b = Brain.open(root / "data", cfg)
    for space, title in ((A, "一起去青岛看海"), (B, "B 空间的秘密: 我们的猫叫团子")):
        b.write(space=space, title=title, body=title)
        for i in range(3):
            b.turn(space, f"{space}-chat", title, now=T0 + timedelta(minutes=i))
    s = LiveServer(b, env_tokens=TOKENS)
    s.root = root
    yield s
    s.close()
    b.close()


def _auth(name: str) -> dict:
    return {"Authorization": f"Bearer {TOKENS[name]}"}


def test_only_a_token_for_the_space_may_replay_it(locked):
    url = locked.url
    policy = policy_text(locked.brain.config)
    r = httpx.post(f"{url}/api/playground/replay", json={"space": B, "policy": policy}, headers=_auth("TOKEN_A"))
    assert r.status_code == 403
    assert httpx.post(f"{url}/api/playground/replay", json={"space": A, "policy": policy}).status_code == 401
    assert httpx.get(f"{url}/api/playground", params={"space": B}, headers=_auth("TOKEN_A")).status_code == 403
    r = httpx.post(f"{url}/api/playground/replay", json={"space": A, "policy": policy}, headers=_auth("TOKEN_A"))
    assert r.status_code == 202, r.text
    job = _wait(url, r.json()["id"], A, headers=_auth("TOKEN_A"))
    assert job["state"] == "done" and job["result"]["source"]["turns"] == 3
    assert {t["session"] for t in job["result"]["turns"]} == {f"{A}-chat"}  # none of B's turns
    assert "团子" not in repr(job)
    r = httpx.post(f"{url}/api/playground/replay", json={"space": B, "policy": policy}, headers=_auth("OMBRE_TOKEN"))
    job_b = r.json()["id"]
    # A's token cannot read B's replay, under B's name (403) or its own (404)
    assert httpx.get(f"{url}/api/playground/replay/{job_b}", params={"space": B},
                     headers=_auth("TOKEN_A")).status_code == 403
    assert httpx.get(f"{url}/api/playground/replay/{job_b}", params={"space": A},
                     headers=_auth("TOKEN_A")).status_code == 404
    assert httpx.delete(f"{url}/api/playground/replay/{job_b}", params={"space": A},
                        headers=_auth("TOKEN_A")).status_code == 404
    assert _wait(url, job_b, B, headers=_auth("TOKEN_B"))["state"] == "done"


def test_a_bad_draft_over_http_answers_with_its_line(locked):
    url = locked.url
    text = policy_text(locked.brain.config).replace("skip_recent_rounds: 5", "skip_recent_rounds: -1")
    want = next(i for i, ln in enumerate(text.splitlines(), 1) if "skip_recent_rounds: -1" in ln)
    r = httpx.post(f"{url}/api/playground/check", json={"space": A, "policy": text}, headers=_auth("TOKEN_A"))
    assert r.status_code == 200 and r.json()["ok"] is False
    err = r.json()["error"]
    assert (err["line"], err["key"], err["code"]) == (want, "gateway.skip_recent_rounds", "bad_config")
    r = httpx.post(f"{url}/api/playground/replay", json={"space": A, "policy": text}, headers=_auth("TOKEN_A"))
    assert r.status_code == 400 and r.json()["error"]["line"] == want


def test_saving_takes_the_configured_folder_and_a_token_for_every_space(locked):
    url = locked.url
    text = policy_text(locked.brain.config).replace("skip_recent_rounds: 5", "skip_recent_rounds: 3")
    body = {"space": A, "policy": text, "name": "quieter"}
    assert httpx.post(f"{url}/api/playground/save", json=body, headers=_auth("TOKEN_A")).status_code == 403
    r = httpx.post(f"{url}/api/playground/save", content=yaml.safe_dump(body), headers={
        **_auth("OMBRE_TOKEN"), "Content-Type": "text/plain"})
    assert r.status_code == 400  # only JSON: a form from another site cannot write files
    r = httpx.post(f"{url}/api/playground/save", json=body, headers=_auth("OMBRE_TOKEN"))
    assert r.status_code == 201, r.text
    saved = Path(r.json()["saved"])
    assert saved.parent == locked.root / "personas" and saved.name == "quieter.yaml"
    assert load_config(saved).gateway.skip_recent_rounds == 3
    assert httpx.post(f"{url}/api/playground/save", json=body, headers=_auth("OMBRE_TOKEN")).status_code == 409
    bad = {**body, "name": "../escape"}
    assert httpx.post(f"{url}/api/playground/save", json=bad, headers=_auth("OMBRE_TOKEN")).status_code == 400
    info = httpx.get(f"{url}/api/playground", params={"space": A}, headers=_auth("TOKEN_A")).json()
    assert info["save"] == {**info["save"], "enabled": True, "allowed": False}


def test_saving_is_off_by_default(played):
    server = LiveServer(played)
    try:
        body = {"space": SPACE, "policy": policy_text(played.config), "name": "x"}
        r = httpx.post(f"{server.url}/api/playground/save", json=body)
        assert r.status_code == 403 and "server.playground.save_dir" in r.json()["error"]["message"]
        info = httpx.get(f"{server.url}/api/playground", params={"space": SPACE}).json()
        assert info["save"]["enabled"] is False and "save_dir" in info["save"]["how"]
        assert info["log"] == {"turns": len(QUERIES), "replayable": len(QUERIES), "sessions": 1, "per_session": 50,
                               "setting": "gateway.injection_log_size"}
    finally:
        server.close()


def test_a_purge_since_a_replay_ran_withholds_its_result():
    """A finished replay may quote a memory purged since: its result is withheld, and only its own space sees it."""
    from ombre_brain.debug_ui.replay_jobs import ReplayJobs
    from ombre_brain.errors import NotFoundError

    purges = {"haven:a": None}
    jobs = ReplayJobs(lambda space: purges.get(space))
    job = jobs.start("haven:a", "recorded", 1, lambda job: {"turns": [{"query": "外婆住院的时候"}]})
    for _ in range(100):
        if job.state != "running":
            break
        time.sleep(0.02)
    assert jobs.get(job.id, "haven:a").result == {"turns": [{"query": "外婆住院的时候"}]}
    with pytest.raises(NotFoundError):
        jobs.get(job.id, "haven:b")
    purges["haven:a"] = "purge-1"
    got = jobs.get(job.id, "haven:a")
    assert got.state == "stale" and got.result is None and "purge" in got.error["message"]


@pytest.mark.parametrize("method,path,body,status,code", [
    ("post", "/api/playground/replay", {"space": SPACE}, 400, "bad_config"),
    ("post", "/api/playground/replay", {"space": SPACE, "policy": 12}, 400, "bad_config"),
    ("post", "/api/playground/replay", {"space": SPACE, "policy": "- a\n- b\n"}, 400, "bad_config"),
    ("post", "/api/playground/replay", {"space": SPACE, "policy": "gateway: 5\n"}, 400, "bad_config"),
    ("post", "/api/playground/replay", {"space": SPACE, "policy": "a: &a [x, x]\nb: [*a, *a]\n"}, 400, "bad_config"),
    ("post", "/api/playground/replay", {"space": SPACE, "policy": "gateway: {}\n" + "#" * 300_000}, 400, "bad_config"),
    ("post", "/api/playground/replay", {"space": SPACE, "policy": "{}", "source": "nope"}, 400, None),
    ("post", "/api/playground/replay", {"space": SPACE, "policy": "{}", "last": "ten"}, 400, None),
    ("post", "/api/playground/replay", {"space": SPACE, "policy": "{}", "last": 0}, 400, None),
    ("post", "/api/playground/replay", {"space": SPACE, "policy": "{}", "last": True}, 400, None),
    ("post", "/api/playground/replay", {"space": SPACE, "policy": "{}", "last": 10**12}, 400, None),
    ("post", "/api/playground/replay", {"space": SPACE, "policy": "{}", "source": "scenarios"}, 404, None),
    ("post", "/api/playground/replay", {"space": SPACE, "policy": "{}", "source": "set", "set": "../x.yaml"}, 400,
     None),
    ("post", "/api/playground/replay", ["not", "an", "object"], 400, None),
    ("post", "/api/playground/replay", {"space": "not a space!", "policy": "{}"}, 400, None),
    ("get", "/api/playground/replay/no-such-job", None, 404, None),
    ("delete", "/api/playground/replay/no-such-job", None, 404, None),
    ("post", "/api/playground/check", {"space": SPACE}, 200, None),
    ("post", "/api/playground/overlay", {"space": SPACE, "policy": "gateway: {skip_recent_rounds: x}\n"}, 400,
     "bad_config"),
    ("post", "/api/playground/save", {"space": SPACE, "policy": "{}", "name": "x"}, 403, None),
])
def test_bad_playground_input_gets_a_clear_error_never_a_500(played, method, path, body, status, code):
    from ombre_brain.server.app import create_app

    client = create_app(played).test_client()
    kwargs = {"query_string": {"space": SPACE}} if method in ("get", "delete") else {"json": body}
    r = getattr(client, method)(path, **kwargs)
    assert r.status_code == status, r.get_data(as_text=True)
    err = r.get_json().get("error")
    if status != 200:
        assert err["message"] and err["code"], err
    else:
        assert r.get_json()["ok"] is False and err["message"]
    if code:
        assert err["code"] == code, err


def test_the_pages_download_route_takes_json_and_names_a_bad_draft(played):
    """The page downloads through a JSON request; a plain form post (what another site can make a browser send)
    is refused, and a bad draft is named by its line."""
    from ombre_brain.server.app import create_app

    client = create_app(played).test_client()
    r = client.post(f"/debug/playground/overlay?space={SPACE}", data={"policy": "gateway:\n  cooldown_hours: 2\n"})
    assert r.status_code == 400 and "application/json" in r.get_data(as_text=True)
    r = client.post(f"/debug/playground/overlay?space={SPACE}", json={"policy": "gateway:\n  cooldown_hours: soon\n"})
    assert r.status_code == 400 and "line 2" in r.get_data(as_text=True)
    r = client.post(f"/debug/playground/overlay?space={SPACE}", json={"policy": "gateway:\n  cooldown_hours: 2\n"})
    assert r.status_code == 200 and "cooldown_hours: 2" in r.get_data(as_text=True)
    assert r.headers["Content-Disposition"].startswith("attachment;")


def test_one_replay_per_space_and_a_few_per_process():
    from ombre_brain.debug_ui.replay_jobs import MAX_RUNNING, ReplayJobs
    from ombre_brain.errors import ConflictError

    release = threading.Event()
    jobs = ReplayJobs(lambda space: None)
    first = jobs.start("haven:a", "recorded", 1, lambda job: release.wait(30) and {})
    with pytest.raises(ConflictError) as exc:
        jobs.start("haven:a", "recorded", 1, lambda job: {})
    assert exc.value.code == "replay_running"
    others = [jobs.start(f"haven:{i}", "recorded", 1, lambda job: release.wait(30) and {})
              for i in range(MAX_RUNNING - 1)]
    with pytest.raises(ConflictError) as exc:
        jobs.start("haven:z", "recorded", 1, lambda job: {})
    assert exc.value.code == "replay_busy"
    release.set()
    for job in (first, *others):
        for _ in range(100):
            if job.state != "running":
                break
            time.sleep(0.02)
        assert job.state == "done"
    assert jobs.start("haven:a", "recorded", 1, lambda job: {}).space == "haven:a"  # free again
