"""Scale out (design §16): several gateway processes on one PostgreSQL ledger and one Chroma server.

Two real `ombre-brain serve` processes share a real PostgreSQL (pgserver) and a real `chroma run`:
a write through one is injected through the other; a purge through one is honoured by both (and
its receipt verifies with the shared key); concurrent turns of one session through both lose no
round and break no cooldown; an exchange sent to both is written once. Around that: the server
refuses to start without shared keys, schemas migrate once when processes start together, the
lexical index follows the change sequence, jobs are claimed once, and `migrate-ledger` moves an
embedded installation.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import yaml

from ombre_brain import Brain
from ombre_brain.config import load_config
from ombre_brain.errors import ConfigError
from ombre_brain.gateway.jobs import JobTable
from ombre_brain.store.ledger.postgres import PostgresLedger

from .conftest import PG_KEYS, ServeProcess, free_port, merged, sqlite_only, without_echo

SPACE = "haven:scale"
SEA = "我们一起去海边捡贝壳，你说海风很咸，我把最大的那个贝壳送给了你。"
TEXT = "我不吃香菜，以后都别给我放香菜。下次我难过的时候你先抱抱我，别急着讲道理。"


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ombre_brain.cli", *args], capture_output=True, text=True,
                          timeout=300, env=env)


class Serve(ServeProcess):
    """One `ombre-brain serve` process on loopback."""

    def __init__(self, data: Path, config: Path, name: str) -> None:
        super().__init__(data, config, data.parent / f"{name}.log")


def deployment(postgres_server, chroma_server, key: Path) -> dict:
    """The overlay of one deployment: its own PostgreSQL database and the shared `chroma run`."""
    host, port = chroma_server
    return merged(postgres_server.overlay(key), {"store": {"chroma": {"mode": "http", "host": host, "port": port}}})


def wait_for(check, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"condition not met within {timeout}s")


def injected(turn: dict, stable: bool = False, recalled_only: bool = False) -> list[str]:
    sections = [*turn["stable"], *turn["sections"]] if stable else turn["sections"]
    if recalled_only:
        sections = [s for s in sections if s["key"] in ("recalled_memory", "diffused_memory")]
    return [i["bucket_id"] for s in sections for i in s["items"] if i["bucket_id"]]


@pytest.fixture
def shared(tmp_path, postgres_server, chroma_server, standin):
    """The overlay every process of one deployment shares: one ledger, one Chroma server, one purge key."""
    return merged(deployment(postgres_server, chroma_server, tmp_path / "deployment"), {
        "identity": {"ai_name": "Haven", "user_name": "Xiaoyu"},
        "server": {"default_space": SPACE},
        "upstream": {"base_url": standin.url, "timeout_s": 10, "retries": 0},
        "ingest": {"poll_s": 0.05, "backoff_s": 0.1}})


@pytest.fixture
def two_servers(tmp_path, shared):
    config = tmp_path / "shared.yaml"
    config.write_text(yaml.safe_dump(shared, allow_unicode=True), encoding="utf-8")
    servers = [Serve(tmp_path / name, config, name) for name in ("a", "b")]  # each host its own data directory
    try:
        yield [s.wait() for s in servers], config
    finally:
        for s in servers:
            s.stop()


def test_two_servers_share_writes_purges_turns_and_exchanges(two_servers, shared, standin):
    (a, b), config = two_servers
    with httpx.Client(base_url=a.url, timeout=60) as ca, httpx.Client(base_url=b.url, timeout=60) as cb:
        # a write through A is injected through B on its next turn (vectors and the lexical index follow)
        r = ca.post("/v1/buckets", json={"space": SPACE, "id": "sea", "title": "一起去海边", "tags": ["海边"],
                                         "body": SEA})
        assert r.status_code == 201, r.text
        ca.post("/v1/buckets", json={"space": SPACE, "title": "周末做饭", "body": "周末在家做了红烧肉。"})
        turn = cb.post("/v1/inject", json={"space": SPACE, "session_id": "probe", "query": "还记得海边捡贝壳吗"}).json()
        assert "sea" in injected(turn), turn["rendered"]
        assert "贝壳" in turn["rendered"]

        # concurrent turns of one session through both processes: no lost round, no broken cooldown
        n = 12
        queries = ["还记得海边捡贝壳吗", "海边那次你还记得吗", "贝壳还在吗", "海风很咸的那天"]

        def turn_on(i: int) -> dict:
            client = (ca, cb)[i % 2]
            resp = client.post("/v1/inject", json={"space": SPACE, "session_id": "s", "query": queries[i % 4]})
            assert resp.status_code == 200, resp.text
            return resp.json()

        with ThreadPoolExecutor(max_workers=6) as pool:
            list(pool.map(turn_on, range(n)))
        ledger = PostgresLedger(load_config(shared).store.ledger.url)
        try:
            assert ledger.one("SELECT round FROM sessions WHERE space = ? AND session = 's'", (SPACE,))[0] == n
            logged = [json.loads(r[0]) for r in ledger.query(
                "SELECT turn FROM turn_log WHERE space = ? AND session = 's' ORDER BY seq", (SPACE,))]
            assert len(logged) == n
            skip = load_config().gateway.skip_recent_rounds
            shown: dict[str, list[int]] = {}
            for rnd, t in enumerate(logged, 1):  # a cooldown keeps a memory out of recall; carried, Recent Context
                for bid in set(injected(t, recalled_only=True)):  # still holds it (docs/design.md §14)
                    shown.setdefault(bid, []).append(rnd)
            assert "sea" in shown  # the cooldown was exercised
            for bid, rounds in shown.items():
                gaps = [y - x for x, y in zip(rounds, rounds[1:], strict=False)]
                assert all(g > skip for g in gaps), (bid, rounds)
            late = ledger.query("SELECT i.bucket_id FROM injections i JOIN sessions s ON s.space = i.space AND "
                                "s.session = i.session WHERE i.space = ? AND i.round > s.round", (SPACE,))
            assert late == []

            # the same exchange sent to both processes is queued once and written once
            standin.reply = "好的，记住了。"
            body = {"model": "m", "messages": [{"role": "user", "content": TEXT}]}
            with ThreadPoolExecutor(max_workers=2) as pool:
                answers = list(pool.map(lambda c: c.post("/v1/chat/completions", json=body,
                                                         headers={"X-Ombre-Space": SPACE}), (ca, cb)))
            assert [x.status_code for x in answers] == [200, 200]

            def settled() -> list[tuple]:
                """This space's jobs once every job is done, read in one snapshot: a second query could see a job
                finish that the first one read as still running."""
                rows = [tuple(r) for r in ledger.query("SELECT id, state, attempts, space FROM jobs")]
                return [r[:3] for r in rows if r[3] == SPACE] if rows and all(r[1] == "done" for r in rows) else []

            jobs = wait_for(settled)
            assert len(jobs) == 1 and jobs[0][1:] == ("done", 1)
            made = [bk for bk in cb.get("/v1/buckets", params={"space": SPACE, "limit": 100}).json()["buckets"]
                    if bk.get("source") == f"exchange:{jobs[0][0]}"]
            assert made and len({bk["id"] for bk in made}) == len(made)
        finally:
            ledger.close()

        # a purge through A is honoured by B at once, and its receipt verifies with the shared key
        r = ca.post("/v1/purge", json={"space": SPACE, "bucket_ids": ["sea"]})
        assert r.status_code == 200, r.text
        assert cb.get("/v1/buckets/sea", params={"space": SPACE}).status_code == 404
        turn = cb.post("/v1/inject", json={"space": SPACE, "session_id": "after", "query": "还记得海边捡贝壳吗"}).json()
        assert "sea" not in injected(turn, stable=True) and "贝壳" not in turn["rendered"]
        debug = cb.get("/api/recall-debug", params={"space": SPACE, "q": "贝壳"})
        assert debug.status_code == 200 and "贝壳" not in without_echo(debug)
        receipt = Path(config.parent / "receipt.json")
        receipt.write_text(json.dumps(r.json()["receipt"]), encoding="utf-8")
        check = cli("verify-receipt", "--config", str(config), "--data", str(config.parent / "b"), str(receipt))
        assert check.returncode == 0, check.stdout + check.stderr


def test_a_shared_ledger_refuses_to_start_without_shared_keys(tmp_path, postgres_server, monkeypatch):
    url = postgres_server.url_for(tmp_path / "nokeys")
    with pytest.raises(ConfigError, match="forget.keys"):
        Brain.open(tmp_path / "data", {"store": {"ledger": {"url": url}}})
    monkeypatch.delenv("OMBRE_TEST_UNSET_KEY", raising=False)
    with pytest.raises(ConfigError, match="OMBRE_TEST_UNSET_KEY"):
        Brain.open(tmp_path / "data", {"store": {"ledger": {"url": url}},
                                       "forget": {"keys": {"k": "OMBRE_TEST_UNSET_KEY"}}})
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"store": {"ledger": {"url": url}}}), encoding="utf-8")
    r = cli("serve", "--data", str(tmp_path / "data"), "--config", str(config), "--port", str(free_port()))
    assert r.returncode == 2 and "forget.keys" in r.stderr, r.stderr
    assert not (tmp_path / "data" / "forget.key").exists()  # no local key in PostgreSQL mode


def test_schemas_migrate_once_when_processes_start_together(tmp_path, postgres_server):
    url = postgres_server.url_for(tmp_path / "race")
    script = ("import sys; from ombre_brain.config import load_config;"
              "from ombre_brain.store.ledger import open_ledger;"
              "from ombre_brain.portability.migrate_ledger import install_schemas;"
              "l = open_ledger(load_config({'store': {'ledger': {'url': sys.argv[1]}}}).store, '.');"
              "install_schemas(l); print(sorted(l.tables())); l.close()")
    procs = [subprocess.Popen([sys.executable, "-c", script, url], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(4)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [o[1][-2000:] for o in outs]
    assert len({o[0] for o in outs}) == 1
    ledger = PostgresLedger(url)
    try:
        versions = dict(ledger.query("SELECT component, version FROM schema_versions"))
        assert versions["store"] >= 6 and set(versions) >= {"store", "sessions", "jobs", "facts", "forget", "dream"}
    finally:
        ledger.close()


def test_the_lexical_index_follows_writes_and_purges_of_another_process(tmp_path, postgres_server, chroma_server):
    cfg = deployment(postgres_server, chroma_server, tmp_path / "lex")
    with Brain.open(tmp_path / "a", cfg) as a, Brain.open(tmp_path / "b", cfg) as b:
        a.write(space=SPACE, id="w1", title="紫藤萝暗号", body="quixotryzzle 是我们的暗号。")
        assert b.store.lexical_search(SPACE, b.tokenize("quixotryzzle"), 10)  # B built its index now
        a.write(space=SPACE, id="w2", title="brumblefax tea", body="brumblefax in the afternoon")
        a.update(SPACE, "w1", body="暗号改成了 snorkelwump。")
        hits = b.store.lexical_search(SPACE, b.tokenize("brumblefax"), 10)
        assert {h.split("#")[0] for h in hits} == {"w2"}  # caught up: A's write is found through B
        assert b.store.lexical_search(SPACE, b.tokenize("quixotryzzle"), 10) == {}  # and the edit's old words gone
        assert b.store.lexical_search(SPACE, b.tokenize("snorkelwump"), 10)
        cleared = []
        b.store.reset_listeners.append(cleared.append)
        a.purge(SPACE, bucket_ids=["w2"])
        lex = b.store.lexical(SPACE)
        assert lex.doc_freq("brumblefax") == 0 and "brumblefax" not in lex._vocab  # rebuilt, not masked
        assert cleared == [SPACE]  # B dropped what it derived from query text too
        assert b.get(SPACE, "w2") is None
        assert a.ledger.query("SELECT bucket_ids FROM changes WHERE space = ? AND bucket_ids LIKE '%w2%'",
                              (SPACE,)) == []  # the change sequence names no purged bucket


def test_a_job_is_claimed_once_and_a_live_workers_job_is_not_recovered(tmp_path, postgres_server):
    url = postgres_server.url_for(tmp_path / "jobs")
    l1, l2 = PostgresLedger(url), PostgresLedger(url)
    try:
        t1, t2 = JobTable(l1), JobTable(l2)
        assert t1.insert("ab" * 32, SPACE, "s", {"user": "x"}) and not t2.insert("ab" * 32, SPACE, "s", {"user": "x"})
        got: list = []
        recovered: list[int] = []
        barrier = threading.Barrier(2)

        def claim(table):
            with table.ledger.pinned():
                barrier.wait()
                job = table.claim_next()
                got.append(job)
                if job is not None:
                    recovered.append(table.recover(max_attempts=3))  # our own claim is alive
                    recovered.append((t2 if table is t1 else t1).recover(max_attempts=3))  # seen from elsewhere too
                    table.release(job["id"])

        threads = [threading.Thread(target=claim, args=(t,)) for t in (t1, t2)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(60)
        assert sorted(j is None for j in got) == [False, True]
        assert recovered == [0, 0]
        assert t1.recover(max_attempts=3) == 1  # released without finishing: its worker is gone
        assert t1.get("ab" * 32)["state"] == "pending"
    finally:
        l1.close()
        l2.close()


@sqlite_only  # it migrates an embedded (SQLite) ledger, which OMBRE_TEST_LEDGER=postgres replaces
def test_migrate_ledger_moves_an_embedded_installation(tmp_path, postgres_server, chroma_server):
    data = tmp_path / "embedded"
    with Brain.open(data, {"forget": {"keys": {"shared": PG_KEYS["forget"]["keys"]["shared"]}}}) as b:
        b.write(space=SPACE, id="sea", title="一起去海边", tags=["海边"], body=SEA)
        b.write(space="haven:other", id="tea", title="green tea", body="tea in the afternoon")
        b.write(space=SPACE, id="gone", title="to forget", body="forget me")
        receipt = b.purge(SPACE, bucket_ids=["gone"])
        b.turn(SPACE, "s1", "还记得海边吗")
        b.facts.submit({"space": SPACE, "subject": "user", "source": {"producer": "chat", "event_id": "e1"},
                        "role": "structured_confirmation", "text": "I drink tea",
                        "edits": [{"op": "establish", "key": "preference.drink", "value": "tea"}]})
        before = {s: sorted(x.id for x in b.list(s, limit=100)) for s in b.spaces()}
    url = postgres_server.url_for(tmp_path / "migrated")
    host, port = chroma_server
    config = tmp_path / "target.yaml"
    config.write_text(yaml.safe_dump(merged({"store": {"chroma": {"mode": "http", "host": host, "port": port}}},
                                            PG_KEYS)), encoding="utf-8")
    r = cli("migrate-ledger", "--from", str(data), "--to", url, "--config", str(config), "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads(r.stdout)
    assert report["status"] == "migrated" and report["tables"]["buckets"] == 2 and report["tables"]["purges"] == 1
    assert "copied" in report["vectors"]
    again = cli("migrate-ledger", "--from", str(data), "--to", url, "--config", str(config))
    assert again.returncode == 0 and "already migrated" in again.stdout, again.stdout + again.stderr
    other = cli("migrate-ledger", "--from", str(tmp_path / "nothing"), "--to", url)
    assert other.returncode == 2 and "no embedded ledger" in other.stderr
    cfg = merged(yaml.safe_load(config.read_text()), {"store": {"ledger": {"url": url}}})
    with Brain.open(tmp_path / "new-host", cfg) as b:  # another host: only the ledger URL and the Chroma server
        assert {s: sorted(x.id for x in b.list(s, limit=100)) for s in b.spaces()} == before
        assert b.search(SPACE, "海边捡贝壳", k=3)[0] == "sea"
        assert b.forget.receipt(receipt["payload"]["purge_id"]) == receipt
        assert b.facts.read(SPACE)["facts"][0]["value"] == "tea"
        assert b.turn(SPACE, "s2", "turn after the move").session == "s2"
    conflicting = postgres_server.url_for(tmp_path / "busy")
    with Brain.open(tmp_path / "busy-host", merged(cfg, {"store": {"ledger": {"url": conflicting}}})) as b:
        b.write(space=SPACE, title="already here")
    refused = cli("migrate-ledger", "--from", str(data), "--to", conflicting, "--config", str(config))
    assert refused.returncode == 2 and "already holds data" in refused.stderr, refused.stderr


def test_the_ledger_speaks_sqlites_subset_on_postgresql(tmp_path, postgres_server):
    """Placeholders, quoting, rows by name and position, rollback, joined and batched transactions."""
    from ombre_brain.store.ledger.postgres import translate

    assert translate("SELECT '?', \"a?\", ? FROM t WHERE x LIKE '50%' AND y = ?") == \
        "SELECT '?', \"a?\", %s FROM t WHERE x LIKE '50%%' AND y = %s"
    ledger = PostgresLedger(postgres_server.url_for(tmp_path / "subset"))
    try:
        ddl = "CREATE TABLE IF NOT EXISTS t (k TEXT PRIMARY KEY, n INTEGER NOT NULL, f REAL, b BLOB)"
        ledger.ensure_schema("t", ddl,
                             lambda led, c: led.run_ddl(c, "CREATE INDEX IF NOT EXISTS t_n ON t(n)"))
        assert ledger.schema_version("t") == 2
        with ledger.tx() as c:
            c.execute("INSERT INTO t(k, n, f, b) VALUES (?, ?, ?, ?)", ("a", True, 0.1, b"\x00\x01"))
            c.execute("INSERT INTO t(k, n) VALUES (?, ?) ON CONFLICT DO NOTHING", ("a", 9))
            with ledger.tx() as inner:  # joins the outer transaction
                inner.execute("INSERT INTO t(k, n) VALUES ('b', 2)")
        row = ledger.one("SELECT k, n, f, b FROM t WHERE k = ?", ("a",))
        assert (row["k"], row[1], row["f"], bytes(row["b"])) == ("a", 1, 0.1, b"\x00\x01")  # REAL is 8 bytes here
        assert dict(row) == {"k": "a", "n": 1, "f": 0.1, "b": b"\x00\x01"}
        with pytest.raises(RuntimeError), ledger.tx() as c:
            c.execute("INSERT INTO t(k, n) VALUES ('c', 3)")
            raise RuntimeError("rolled back")
        with pytest.raises(ledger.IntegrityError), ledger.tx(batch=True, durable=False, serial=False) as c:
            c.execute("INSERT INTO t(k, n) VALUES ('d', 4)")
            c.execute("INSERT INTO t(k, n) VALUES ('a', 5)")
        with ledger.tx() as c:
            pass  # began nothing, ends nothing
        assert [r[0] for r in ledger.query("SELECT k FROM t ORDER BY k")] == ["a", "b"]
        with ledger.snapshot() as s:
            first = s.execute("SELECT COUNT(*) FROM t").fetchone()[0]
            other = PostgresLedger(postgres_server.url_for(tmp_path / "subset"))
            with other.tx() as c:
                c.execute("INSERT INTO t(k, n) VALUES ('e', 5)")
            other.close()
            assert s.execute("SELECT COUNT(*) FROM t").fetchone()[0] == first  # one consistent view
        assert ledger.one("SELECT COUNT(*) FROM t")[0] == first + 1
        assert ledger.dialect.indexed_by("t", "t_n") == "t"
        assert ledger.query("SELECT k FROM t WHERE k = ? LIMIT ?", ("e", None)) == [("e",)]  # None: no limit
    finally:
        ledger.close()


def test_concurrent_edits_through_two_processes_never_undo_each_other(tmp_path, postgres_server, chroma_server):
    """Each edit reads, changes one field and writes the bucket back; the bucket's lock spans processes."""
    cfg = deployment(postgres_server, chroma_server, tmp_path / "edits")
    with Brain.open(tmp_path / "a", cfg) as a, Brain.open(tmp_path / "b", cfg) as b:
        a.write(space=SPACE, id="shared", title="shared note", body="edited from two hosts", importance=1)
        errors: list[BaseException] = []

        def edit(brain, field, values):
            try:
                for v in values:
                    brain.update(SPACE, "shared", **{field: v})
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=edit, args=(a, "importance", range(2, 9))),
                   threading.Thread(target=edit, args=(b, "valence", [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        assert errors == []
        final = b.get(SPACE, "shared")
        assert (final.importance, final.valence) == (8, 0.7)


def test_bench_runs_on_a_postgresql_ledger_in_a_schema_of_its_own(tmp_path, postgres_server):
    import psycopg

    from ombre_brain.evaluate.bench import run_bench

    base = postgres_server.uri
    cfg = {"store": {"ledger": {"url": base}}, **PG_KEYS}
    res = run_bench(12, 4, config=cfg, write=False)
    assert res["buckets"] == 12 and res["turn_ms"]["p95"] > 0
    with psycopg.connect(base) as c:  # the throwaway schema is gone again
        left = c.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'ombre_bench_%'").fetchall()
    assert left == []


def test_a_turn_on_a_shared_ledger_waits_on_the_server_few_times(tmp_path, postgres_server, round_trips):
    """The turn's reads that do not depend on each other share round trips (counted, not timed)."""
    from ombre_brain.evaluate.bench import SPACE as BENCH
    from ombre_brain.evaluate.bench import synthetic_queries, synthetic_store

    items, edges = synthetic_store(120, seed=3)
    cfg = merged(postgres_server.overlay(tmp_path / "trips"), {"identity": {"ai_name": "Haven", "user_name": "Xiaoyu"}})
    with Brain.open(tmp_path / "data", cfg) as brain:
        brain.write_many(items)
        for a, b, rel, conf in edges:
            brain.link(BENCH, a, b, rel, conf)
        queries = synthetic_queries(6, seed=4)
        for i, q in enumerate(queries[:-1]):
            brain.turn(BENCH, "s", q, now=f"2026-11-30T21:0{i}:00+08:00")
        round_trips.reset()
        turn = brain.turn(BENCH, "s", queries[-1], now="2026-11-30T21:09:00+08:00")
    assert turn.to_dict()["sections"], "the turn injected nothing: it measured an empty turn"
    first = " | ".join(round_trips.trips[0])
    for what in ("pg_advisory_lock", "change_heads", "JOIN sessions", "JOIN space_state", "JOIN injections"):
        assert what in first, first  # the session's lock and state and the space's head: one round trip
    second = " | ".join(round_trips.trips[1])  # the candidates' moments, their edges and the side sections' reads
    for what in ("moments m JOIN buckets", "FROM edges", "roles IN (", "created >=", "type =", "facts_records"):
        assert what in second, second
    assert not any("ISOLATION" in s for t in round_trips.trips for s in t)  # no facts here: no facts read
    last = " | ".join(round_trips.trips[-1])
    assert "INSERT INTO turn_log" in last and "pg_advisory_unlock" in last, last  # the record rides with the unlock
    assert round_trips.count <= 4, "\n".join(" | ".join(t) for t in round_trips.trips)
