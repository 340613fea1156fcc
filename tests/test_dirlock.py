"""Issue 35: one process writes to an embedded data directory; its OS lock goes when the process does.

A second writer (another process) is refused naming the holder; read-only commands (``export``,
``config check``, ``verify-receipt``) run beside it; a SIGKILLed holder leaves nothing to clear; Brains
of one process share the lock (the suite's fixtures open one directory twice). A shared deployment
(PostgreSQL and a Chroma server) takes no lock: several processes are what it is for.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from ombre_brain import Brain, DataDirInUseError
from ombre_brain.store.dirlock import LOCK_FILE, holds

from .conftest import LEDGER_MODE, ROOT, embedded_keys

SPACE = "haven:xiaoyu"
HOLDER = textwrap.dedent("""
    import sys, time
    from ombre_brain import Brain
    brain = Brain.open(sys.argv[1], {})
    brain.write(space="haven:xiaoyu", title="一起去海边", body="我们在海边捡贝壳。")
    print("ready", flush=True)
    time.sleep(600)
""")

pytestmark = pytest.mark.skipif(LEDGER_MODE == "postgres", reason="the suite's PostgreSQL mode patches Brain in "
                                "this process only; the lock of an embedded directory is tested in the SQLite pass")


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ombre_brain.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)


@pytest.fixture
def holder(tmp_path):
    """Another process holding ``tmp_path/data`` open for writing (it wrote one memory)."""
    data = tmp_path / "data"
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(data)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT)
    line = proc.stdout.readline()
    if line.strip() != "ready":
        proc.kill()
        pytest.fail(f"the holder did not start: {line}{proc.stderr.read()[-2000:]}")
    yield data, proc
    if proc.poll() is None:
        proc.kill()
    proc.wait(30)


def test_a_second_writer_is_refused_naming_the_holder(holder):
    data, proc = holder
    with pytest.raises(DataDirInUseError) as info:
        Brain.open(data, {})
    assert f"process {proc.pid}" in info.value.message and info.value.code == "data_dir_in_use"
    assert not holds(data)
    done = cli("purge", "--data", str(data), "--space", SPACE, "--whole-space")
    assert done.returncode == 2 and f"process {proc.pid}" in done.stderr and "data_dir_in_use" not in done.stdout
    info = json.loads((data / LOCK_FILE).read_text())
    assert info["pid"] == proc.pid and "whole-space" not in info["command"]  # never a purge's arguments


@embedded_keys
def test_read_only_commands_run_beside_the_writer(holder, tmp_path):
    data, _proc = holder
    out = tmp_path / "export.jsonl"
    done = cli("export", "--data", str(data), "--space", SPACE, str(out))
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert rows[0]["counts"]["buckets"] == 1 and rows[1]["title"] == "一起去海边"
    assert cli("config", "check").returncode == 0
    receipt = tmp_path / "receipt.json"
    receipt.write_text(json.dumps({"payload": {"typ": "purge-receipt+v1", "kid": "nobody"}, "signature": "x"}),
                       encoding="utf-8")
    checked = cli("verify-receipt", "--data", str(data), str(receipt))
    assert checked.returncode == 1 and "not configured" in checked.stderr  # it ran: the key is just not there


def test_sigkill_releases_the_lock(holder):
    data, proc = holder
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    with Brain.open(data, {}) as brain:  # no stale lock to clear by hand
        assert holds(data) and [b.title for b in brain.list(SPACE)] == ["一起去海边"]
    assert not holds(data)


def test_brains_of_one_process_share_the_lock(tmp_path):
    first = Brain.open(tmp_path / "data", {})
    try:
        second = Brain.open(tmp_path / "data", {})
        second.write(space=SPACE, title="风铃", body="贝壳做成了风铃。")
        second.close()
        assert holds(tmp_path / "data") and len(first.list(SPACE)) == 1  # the first still holds it
        other = subprocess.run([sys.executable, "-c", "import sys\nfrom ombre_brain import Brain\n"
                                "Brain.open(sys.argv[1], {})", str(tmp_path / "data")],
                               capture_output=True, text=True, cwd=ROOT, timeout=300)
        assert other.returncode == 1 and "DataDirInUseError" in other.stderr
        assert f"process {os.getpid()}" in other.stderr
    finally:
        first.close()
    assert not holds(tmp_path / "data")


# ---------------------------------------------------------------- issue 50, N13: the file is not the lock


def test_deleting_the_lock_file_admits_no_second_writer(holder):
    """The lock lives on the directory: a deleted ombre.lock, or one rewritten by hand, lets no second writer in."""
    data, proc = holder
    (data / LOCK_FILE).unlink()
    done = cli("doctor", "--data", str(data))
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "open for writing" in done.stderr and "releases nothing" in done.stderr
    (data / LOCK_FILE).write_text("{}", encoding="utf-8")  # a file made again, unlocked, naming nobody
    with pytest.raises(DataDirInUseError):
        Brain.open(data, {})
    assert proc.poll() is None  # the writer never noticed


def test_a_killed_writers_lock_is_named_and_taken_over_with_nothing_to_do(holder):
    data, proc = holder
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    left = json.loads((data / LOCK_FILE).read_text())
    assert left["pid"] == proc.pid and "released" not in left  # what a killed writer leaves: it invites a delete
    done = cli("doctor", "--data", str(data))
    assert done.returncode == 0, done.stderr
    lock = next(line for line in done.stdout.splitlines() if line.startswith("lock:"))
    assert lock.startswith("lock: taken over:") and f"process {proc.pid}" in lock, lock
    assert "ended without releasing" in lock and "Nothing to do" in lock and "never to be deleted" in lock
    assert json.loads((data / LOCK_FILE).read_text())["released"]  # doctor closed cleanly: released, named
    again = cli("doctor", "--data", str(data))
    lock = next(line for line in again.stdout.splitlines() if line.startswith("lock:"))
    assert "no earlier writer left it unreleased" in lock and "taken over" not in lock, lock


def test_serve_says_when_it_took_over_a_killed_writers_lock(holder, tmp_path):
    from .conftest import ServeProcess

    data, proc = holder
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    config = tmp_path / "serve.yaml"
    config.write_text("{}\n", encoding="utf-8")
    served = ServeProcess(data, config, tmp_path / "serve.log")  # its note comes first: no need to wait for it all
    try:
        deadline, log = time.time() + 120, ""
        while time.time() < deadline and "Note:" not in log and served.proc.poll() is None:
            time.sleep(0.2)
            log = (tmp_path / "serve.log").read_text(errors="replace")
        assert f"process {proc.pid}" in log and "ended without releasing its lock" in log, log[-2000:]
        assert "Nothing to do" in log
    finally:
        served.stop()
