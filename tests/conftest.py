"""Shared fixtures: offline guard, brains on real stores, a real Chroma server, a real PostgreSQL, a real HTTP server.

Everything here is real: Chroma (embedded or `chroma run` on loopback), SQLite or PostgreSQL (the
`pgserver` wheel's server on a Unix socket), jieba, the embedding model (loaded once per session
by the process-wide cache) and Flask under waitress.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

import pytest

from .standin import StandInUpstream  # noqa: F401  (the tests import it from here)

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["ANONYMIZED_TELEMETRY"] = "False"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
# the dictionary's word table (retrieval/word_table.py) is built once for the run, never in the user's own cache
if "OMBRE_BRAIN_CACHE" not in os.environ:
    os.environ["OMBRE_BRAIN_CACHE"] = tempfile.mkdtemp(prefix="ombre-test-cache-")
    atexit.register(shutil.rmtree, os.environ["OMBRE_BRAIN_CACHE"], True)

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "tests" / "scenarios"  # the acceptance scenarios: this repository's own contract
# The shared folder the project started from, beside a working copy (not in a plain clone): the public data sets
# the evaluations read. Tests that read it skip, naming it, when it is absent; `.ci/run` sets OMBRE_REQUIRE_SHARED=1,
# which makes them fail instead, so this project's CI never passes by skipping them.
SHARED = Path(os.environ.get("OMBRE_SHARED", ROOT.parent / "shared"))
LOCOMO = SHARED / "data" / "locomo"
ZH_RECALL = SHARED / "data" / "zh_recall" / "companion_zh.yaml"
REQUIRE_SHARED = os.environ.get("OMBRE_REQUIRE_SHARED") == "1"


def needs_shared(path: Path) -> Path:
    """``path`` under the shared folder, or a skip naming it (a failure when OMBRE_REQUIRE_SHARED=1)."""
    if path.exists():
        return path
    why = (f"needs {path}: the shared data folder ({SHARED}) is not beside this clone; set OMBRE_SHARED to "
           "where it is")
    if REQUIRE_SHARED:
        pytest.fail(f"{why} (OMBRE_REQUIRE_SHARED=1, as .ci/run sets it, makes this a failure)")
    pytest.skip(why)
LEDGER_MODE = os.environ.get("OMBRE_TEST_LEDGER", "sqlite")  # sqlite | postgres: the ledger every Brain opens
PG_KEY_ENV = "OMBRE_TEST_SHARED_PURGE_KEY"
os.environ.setdefault(PG_KEY_ENV, "a-purge-key-every-test-process-shares")
PG_KEYS = {"forget": {"keys": {"shared": PG_KEY_ENV}, "active_kid": "shared"}}


# Keys under which an answer echoes the probing query: the query itself, its plan and terms, the asked "term" of
# admission's aligned pairs ({term, word, cosine}: the memory "word" is still checked) and the display line quoting
# those pairs (the same facts stay checked under "admission"). What is left must not show what a probe looks for.
ECHO_KEYS = frozenset({"query", "q", "normalized", "terms", "plan", "term", "admission_summary"})


def strip_echo(obj):
    """A JSON answer minus the echo of our own probing query."""
    if isinstance(obj, dict):
        return {k: strip_echo(v) for k, v in obj.items() if k not in ECHO_KEYS}
    if isinstance(obj, list):
        return [strip_echo(v) for v in obj]
    return obj


def without_echo(response) -> str:
    """A response's JSON minus the echo of the probing query, as text."""
    return json.dumps(strip_echo(response.json()), ensure_ascii=False)


sqlite_only = pytest.mark.skipif(LEDGER_MODE == "postgres", reason="reads the SQLite ledger file itself")
embedded_keys = pytest.mark.skipif(LEDGER_MODE == "postgres", reason="the local key and purge-time key checks are the "
                                   "embedded default's; a shared ledger refuses to start without its keys")

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _is_local(address) -> bool:
    if isinstance(address, str | bytes):  # AF_UNIX paths
        return True
    host = address[0] if isinstance(address, tuple) else address
    if isinstance(host, bytes):
        host = host.decode()
    return host in ("localhost", "::1", "0.0.0.0") or str(host).startswith("127.")


class NetworkAttempt(AssertionError):
    pass


def _guard_connect(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6) and not _is_local(address):
        raise NetworkAttempt(f"test tried to reach the network: {address!r}")
    return _real_connect(self, address)


def _guard_connect_ex(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6) and not _is_local(address):
        raise NetworkAttempt(f"test tried to reach the network: {address!r}")
    return _real_connect_ex(self, address)


@pytest.fixture(autouse=True, scope="session")
def no_network():
    """Fail any test that tries to open a connection to a non-loopback address."""
    socket.socket.connect = _guard_connect
    socket.socket.connect_ex = _guard_connect_ex
    yield
    socket.socket.connect = _real_connect
    socket.socket.connect_ex = _real_connect_ex


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServeProcess:
    """One real `ombre-brain serve` child on a loopback port, its output in ``log_path``.

    ``wait()`` returns once ``/healthz`` answers (or fails with the end of the log); ``kill()`` is a
    SIGKILL (a crash); ``stop()`` asks politely first.
    """

    def __init__(self, data: Path, config: Path, log_path: Path, env: dict | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        with open(log_path, "wb") as log:  # the child keeps its own copy of the descriptor
            self.proc = subprocess.Popen([sys.executable, "-m", "ombre_brain.cli", "serve", "--data", str(data),
                                          "--config", str(config), "--port", str(self.port)],
                                         stdout=log, stderr=subprocess.STDOUT, env=env)

    def wait(self, timeout: float = 120):
        import httpx

        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited: {self.log_path.read_text(errors='replace')[-3000:]}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                time.sleep(0.2)
        raise AssertionError(f"server did not answer /healthz within {timeout:.0f} s")

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory):
    """A real `chroma run` on loopback for the session; yields (host, port)."""
    exe = shutil.which("chroma", path=str(Path(sys.executable).parent)) or shutil.which("chroma")
    if exe is None:
        pytest.fail("the `chroma` command (from the chromadb package) is not installed")
    port = free_port()
    path = tmp_path_factory.mktemp("chroma-server")
    log = open(path / "server.log", "wb")  # noqa: SIM115 - closed at teardown
    proc = subprocess.Popen([exe, "run", "--path", str(path / "db"), "--host", "127.0.0.1", "--port", str(port)],
                            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
        except OSError:
            if proc.poll() is not None:
                pytest.fail(f"chroma run exited: {(path / 'server.log').read_text()[-2000:]}")
            time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("chroma run did not answer within 30 s")
    yield ("127.0.0.1", port)
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


@pytest.fixture(autouse=True, scope="session")
def suite_chroma_mode(request):
    """With OMBRE_TEST_CHROMA=http, every Brain a test opens in-process uses the real Chroma server.

    So the whole suite (recall, gateway, purge, ...) runs in server mode too: CI runs it once
    per mode. Tests parametrised with ``store_mode`` cover both modes in every run regardless.
    """
    if os.environ.get("OMBRE_TEST_CHROMA", "embedded") != "http":
        yield
        return
    host, port = request.getfixturevalue("chroma_server")
    from ombre_brain import brain as brain_module
    from ombre_brain.config import load_config

    original = brain_module._as_config

    def server_mode(config):
        cfg = original(config)
        if cfg.store.chroma.mode != "embedded":
            return cfg
        return load_config(cfg, {"store": {"chroma": {"mode": "http", "host": host, "port": port}}})

    brain_module._as_config = server_mode
    yield
    brain_module._as_config = original


class PostgresServer:
    """One real PostgreSQL (pgserver) for the session; each data directory gets its own schema in it."""

    def __init__(self) -> None:
        # Outside pytest's own tmp tree: as root, pgserver runs the server as a `pgserver` user and opens
        # the parents of its directory to it, which pytest's private tmp root would take back.
        self.root = Path(tempfile.mkdtemp(prefix="ombre-pg-"))
        # pgserver keeps a lock file in the runtime dir for the life of the process (and touches it again at
        # exit), so the runtime dir outlives this server's own directory
        run = Path(tempfile.gettempdir()) / f"ombre-pg-run-{os.getuid()}"
        os.environ.setdefault("XDG_RUNTIME_DIR", str(_private_dir(run)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs' RuntimeDirWarning, pgserver's own notes
            import pgserver

            self.server = pgserver.get_server(self.root / "data", cleanup_mode="stop")
        self.uri = self.server.get_uri()

    def url_for(self, key: str | Path) -> str:
        """The URL of a fresh schema named after ``key`` (a data directory): the same key, the same ledger."""
        import psycopg

        schema = "t_" + hashlib.sha256(str(key).encode()).hexdigest()[:20]
        with psycopg.connect(self.uri, autocommit=True) as c:
            c.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
        return f"{self.uri}&options=-csearch_path%3D{schema}"

    def overlay(self, key: str | Path) -> dict:
        """The config overlay that puts a data directory's ledger here (with the shared purge key)."""
        return {"store": {"ledger": {"url": self.url_for(key)}}, **PG_KEYS}

    def close(self) -> None:
        self.server.cleanup()  # stops it: this process made it, so this process holds its only handle
        atexit.unregister(self.server._cleanup)
        shutil.rmtree(self.root, ignore_errors=True)


def _private_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o700)
    return path


_PG: PostgresServer | None = None


@pytest.fixture(scope="session")
def postgres_server() -> PostgresServer:
    """A real PostgreSQL for the session (skipped, with the reason, only if pgserver cannot start here)."""
    global _PG
    if _PG is None:
        try:
            import psycopg  # noqa: F401
            import psycopg_pool  # noqa: F401
        except ImportError as exc:
            pytest.skip(f"the PostgreSQL driver is not installed ({exc}); pip install -e '.[dev]'")
        try:
            _PG = PostgresServer()
        except ImportError as exc:
            pytest.skip(f"the pgserver wheel is not installed ({exc})")
        except Exception as exc:  # noqa: BLE001 - any failure to start is a reason to skip, said plainly
            pytest.skip(f"pgserver cannot start a PostgreSQL on this machine: {type(exc).__name__}: {exc}")
    yield _PG
    _PG.close()
    _PG = None

def open_ledger(kind: str, request, path: Path):
    """A SQLite ledger in ``path``, or (``kind`` "postgres") a real PostgreSQL one in a schema named after it:
    for the tests that run one behaviour on both backends."""
    from ombre_brain.store.ledger import SqliteLedger
    from ombre_brain.store.ledger.postgres import PostgresLedger

    if kind == "sqlite":
        return SqliteLedger(path / "ledger.db")
    return PostgresLedger(request.getfixturevalue("postgres_server").url_for(path))



class RoundTrips:
    """Counts the times a psycopg client waits for its PostgreSQL server, and what each wait carried.

    A round trip is a statement sent outside a pipeline, a pipeline's sync or exit, a flush that
    fetches results inside one, or a nested pipeline's entry that must sync first. Statements sent
    inside a pipeline are listed with the round trip that carries them (``trips``).
    """

    SENDS = ("_execute_gen", "_executemany_gen_pipeline", "_executemany_gen_no_pipeline", "_exec_command",
             "_deallocate")

    def __init__(self, monkeypatch) -> None:
        import psycopg

        self.count = 0
        self.trips: list[list[str]] = []
        self._carried: list[str] = []
        real = psycopg.Connection.wait

        def wait(conn, gen, *args, **kwargs):
            self._see(conn, getattr(getattr(gen, "gi_code", None), "co_name", ""), gen)
            return real(conn, gen, *args, **kwargs)

        monkeypatch.setattr(psycopg.Connection, "wait", wait)

    def _see(self, conn, name: str, gen) -> None:
        from psycopg.pq import TransactionStatus

        pipe = conn._pipeline
        if name in self.SENDS:
            query = gen.gi_frame.f_locals.get("query") if name != "_deallocate" else "DEALLOCATE"
            self._carried.append(" ".join(str(query.decode() if isinstance(query, bytes) else query).split()))
            if pipe is None or (name == "_executemany_gen_pipeline" and gen.gi_frame.f_locals.get("returning")):
                self._trip()
        elif pipe is None or name in ("_sync_gen", "_exit_gen"):
            self._trip()
        elif name == "_fetch_gen" and pipe.result_queue:
            self._trip()
        elif name == "_enter_gen" and pipe.level > 0 and (
                pipe.command_queue or conn.pgconn.transaction_status == TransactionStatus.ACTIVE):
            self._trip()

    def _trip(self) -> None:
        self.count += 1
        self.trips.append(self._carried)
        self._carried = []

    def reset(self) -> None:
        self.count, self.trips, self._carried = 0, [], []


@pytest.fixture
def round_trips(monkeypatch) -> RoundTrips:
    """Counts psycopg's waits on the server from here on (see :class:`RoundTrips`)."""
    return RoundTrips(monkeypatch)


def merged(*overlays: dict) -> dict:
    """Config overlays deep-merged (a test's own overlay with the suite's ledger and Chroma modes)."""
    out: dict = {}
    for over in overlays:
        for k, v in over.items():
            out[k] = merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def open_test_ledger(path: Path):
    """The ledger a Brain on data directory ``path`` would open in this suite's mode."""
    from ombre_brain.store.ledger import SqliteLedger
    from ombre_brain.store.ledger.postgres import PostgresLedger

    if LEDGER_MODE == "postgres":
        return PostgresLedger(_PG.url_for(Path(path).resolve()))
    return SqliteLedger(Path(path) / "ledger.db")


@pytest.fixture
def ledger_overlay(tmp_path, request) -> dict:
    """For tests that start their own processes: the overlay putting their ledger in this suite's mode."""
    if LEDGER_MODE != "postgres":
        return {}
    return request.getfixturevalue("postgres_server").overlay((tmp_path / "data").resolve())


@pytest.fixture(autouse=True, scope="session")
def suite_ledger_mode(request):
    """With OMBRE_TEST_LEDGER=postgres, every Brain a test opens in-process keeps its ledger in PostgreSQL.

    Each data directory gets its own schema (reopening the same directory finds the same ledger),
    and the shared purge key a PostgreSQL ledger requires. CI runs the store, recall, gateway,
    facts and forgetting tests once more this way (Makefile, PG_MODE_TESTS).
    """
    if LEDGER_MODE != "postgres":
        yield
        return
    pg = request.getfixturevalue("postgres_server")
    from ombre_brain import brain as brain_module
    from ombre_brain.config import load_config

    original = brain_module.Brain.__init__

    def init(self, path, config=None):
        cfg = brain_module._as_config(config)
        if cfg.store.ledger.url is None:
            over = {"store": {"ledger": {"url": pg.url_for(Path(path).resolve())}}}
            cfg = load_config(cfg, over if cfg.forget.keys else {**over, **PG_KEYS})
        original(self, path, cfg)

    def open_ledger(store, data_dir, **kw):  # commands that open the ledger without a Brain (`jobs`, `export`)
        if store.ledger.url is None:
            store = load_config({"store": {"ledger": {"url": pg.url_for(Path(data_dir).resolve())}}}).store
        return original_open(store, data_dir, **kw)

    from ombre_brain.cli import background
    from ombre_brain.portability import read_only as reader

    original_open = background.open_ledger
    brain_module.Brain.__init__ = init
    background.open_ledger = reader.open_ledger = open_ledger
    yield
    brain_module.Brain.__init__ = original
    background.open_ledger = reader.open_ledger = original_open


@pytest.fixture(params=["embedded", "http"])
def store_mode(request):
    """Parametrise a test over embedded Chroma and a real Chroma server."""
    if request.param == "http":
        host, port = request.getfixturevalue("chroma_server")
        return {"store": {"chroma": {"mode": "http", "host": host, "port": port}}}
    return {}


@pytest.fixture
def brain_path(tmp_path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def brain(brain_path):
    from ombre_brain import Brain

    b = Brain.open(brain_path, {"identity": {"ai_name": "Haven", "user_name": "Xiaoyu"}})
    yield b
    b.close()


@pytest.fixture
def mode_brain(brain_path, store_mode):
    from ombre_brain import Brain

    b = Brain.open(brain_path, store_mode)
    yield b
    b.close()


@pytest.fixture(scope="session")
def demo_brain(tmp_path_factory):
    """The demo persona (ombre_brain/demo/persona.yaml) seeded once per session, since seeding is slow.

    Shared: tests may add sessions or other spaces, but must not change or purge its buckets.
    """
    from ombre_brain import Brain
    from ombre_brain.demo.seed import seed_persona

    b = Brain.open(tmp_path_factory.mktemp("demo-persona"), {"identity": {"ai_name": "Haven", "user_name": "Xiaoyu"},
                                                            "server": {"default_space": "haven:xiaoyu"}})
    seed_persona(b)
    yield b
    b.close()


class LiveServer:
    """The real app under waitress on a loopback port, in a thread."""

    def __init__(self, brain, env_tokens=None) -> None:
        from waitress import create_server

        from ombre_brain.server.app import create_app

        self.brain = brain
        self.app = create_app(brain, env_tokens=env_tokens)
        self.server = create_server(self.app, host="127.0.0.1", port=0, threads=8, asyncore_use_poll=True)
        self.port = self.server.effective_port
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()

    def close(self) -> None:
        """Close the sockets from inside the server's own loop thread, so select() never sees a closed fd."""
        from waitress import wasyncore

        try:
            self.server.trigger.pull_trigger(lambda: wasyncore.close_all(self.server._map))
        except OSError:  # the wake-up pipe is already gone (a stray close elsewhere): close from here
            wasyncore.close_all(self.server._map, ignore_all=True)
        self.thread.join(5)
        self.server.task_dispatcher.shutdown(timeout=1)


@pytest.fixture
def server(brain):
    s = LiveServer(brain)
    yield s
    s.close()


@pytest.fixture
def client(server):
    import httpx

    with httpx.Client(base_url=server.url, timeout=30) as c:
        yield c


@pytest.fixture
def standin():
    """A fresh stand-in upstream LLM for one test."""
    s = StandInUpstream()
    yield s
    s.close()
