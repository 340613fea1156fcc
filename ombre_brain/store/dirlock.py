"""The writer's lock on an embedded data directory: one process at a time writes to it.

An embedded data directory holds a SQLite ledger and an embedded Chroma, and each process keeps
state about them the other cannot see: Chroma's HNSW indexes live in the opening process's memory
and are persisted from there, a purge's rebuild and compaction assume no other writer (its gates
are in-process), and the lexical index and caches are per process. Two processes on one directory
(``serve`` and a stdio ``mcp``, say) would each overwrite the other's index files. Several
processes share a store through a PostgreSQL ledger and a Chroma server instead (docs/deploy.md).

So the process that opens the directory for writing holds an exclusive ``flock`` on
``<data>/ombre.lock``. The kernel releases it when the process ends however it ends, SIGKILL
included, so a crash never leaves a stale lock to clear by hand; the file itself stays. A second
writer is refused with :class:`~ombre_brain.errors.DataDirInUseError` naming the holder (pid,
command, host, since when), which the holder wrote into the file. Brains of one process share the
lock (it is counted), so a test or a tool may open the same directory twice in one process.
Read-only commands (``export``, ``config check``, ``verify-receipt``) take no lock.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
import threading
from datetime import datetime, timezone
from pathlib import Path

from ..errors import DataDirInUseError

try:
    import fcntl
except ImportError:  # Windows: no flock; the directory is not locked there (docs/deploy.md)
    fcntl = None

LOCK_FILE = "ombre.lock"

_held: dict[str, list] = {}  # resolved directory -> [fd, count]
_guard = threading.Lock()


def _command() -> str:
    """This process's program and command word ("ombre-brain serve"): never its other arguments, which may
    name what a purge forgets (a source identity)."""
    argv = sys.argv or [""]
    prog = Path(argv[0]).name or "python"
    if prog == "__main__.py":
        here = Path(argv[0]).parent
        prog = f"python -m {here.parent.name}.{here.name}"
    word = argv[1] if len(argv) > 1 and re.fullmatch(r"[a-z][a-z-]{0,30}", argv[1]) else ""
    return f"{prog} {word}".strip()


def _holder_text(fd: int) -> str:
    """Who holds the lock, from what the holder wrote (best effort: it may be writing it right now)."""
    try:
        raw = os.pread(fd, 4096, 0).decode("utf-8", "replace")
        info = json.loads(raw)
        return (f"process {info.get('pid')} ({info.get('command')}) on {info.get('host')}, "
                f"since {info.get('since')}")
    except (OSError, ValueError, AttributeError):
        return "another process"


class DataDirLock:
    """An exclusive, process-wide hold on one data directory; :meth:`release` once per :meth:`acquire`."""

    def __init__(self, key: str) -> None:
        self.key = key

    @classmethod
    def acquire(cls, path: Path, purpose: str = "") -> DataDirLock:
        """Hold ``path`` for this process, or raise DataDirInUseError naming the process that holds it."""
        path = Path(path)
        key = str(path.resolve())
        with _guard:
            if key in _held:
                _held[key][1] += 1
                return cls(key)
            fd = os.open(path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                if fcntl is not None:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _holder_text(fd)
                os.close(fd)
                raise DataDirInUseError(
                    f"the data directory {path} is open for writing by {holder}; one process writes to an "
                    f"embedded data directory at a time. Stop that process, use it (its HTTP API or /mcp), or "
                    f"run read-only commands (export, config check, verify-receipt), which need no lock. "
                    f"Several processes share a store through a PostgreSQL ledger and a Chroma server "
                    f"(docs/deploy.md).") from None
            except BaseException:
                os.close(fd)
                raise
            info = {"pid": os.getpid(), "host": socket.gethostname(),
                    "command": purpose or _command(),
                    "since": datetime.now(timezone.utc).isoformat(timespec="seconds")}
            data = json.dumps(info).encode()
            os.ftruncate(fd, 0)
            os.pwrite(fd, data, 0)
            _held[key] = [fd, 1]
        return cls(key)

    def release(self) -> None:
        """Give up this hold; the last one of the process closes the file, which releases the lock."""
        with _guard:
            entry = _held.get(self.key)
            if entry is None:
                return
            entry[1] -= 1
            if entry[1] == 0:
                del _held[self.key]
                os.close(entry[0])
        self.key = ""


def holds(path: Path) -> bool:
    """Whether this process holds ``path`` (for tests and doctor)."""
    with _guard:
        return str(Path(path).resolve()) in _held


__all__ = ["LOCK_FILE", "DataDirLock", "holds"]
