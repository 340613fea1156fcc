"""The writer's lock on an embedded data directory: one process at a time writes to it.

An embedded data directory holds a SQLite ledger and an embedded Chroma, and each process keeps
state about them the other cannot see: Chroma's HNSW indexes live in the opening process's memory
and are persisted from there, a purge's rebuild and compaction assume no other writer (its gates
are in-process), and the lexical index and caches are per process. Two processes on one directory
(``serve`` and a stdio ``mcp``, say) would each overwrite the other's index files. Several
processes share a store through a PostgreSQL ledger and a Chroma server instead (docs/deploy.md).

So the process that opens the directory for writing holds an exclusive ``flock`` on the directory
itself, and another on ``<data>/ombre.lock`` (what earlier versions lock). The kernel releases both when
the process ends however it ends, SIGKILL included, so a crash never leaves a lock to clear by hand. The
lock lives on the directory, not on the file's name: deleting ``ombre.lock`` while a writer runs admits
no second writer (a new file would be a new inode, free to lock; the directory is the same one). The
file only says who holds the lock: the holder writes its pid, command, host and start time into it, and
marks it released when it closes. A second writer is refused with
:class:`~ombre_brain.errors.DataDirInUseError` naming the holder. A file that names a holder but was
never marked released is what a killed or crashed writer leaves: the next writer takes the lock over,
says so (``stale`` on the lock, the start-up message of ``serve`` and ``ombre-brain doctor``), and nothing
needs doing; the file is never to be deleted by hand. Brains of one process share the lock (it is
counted), so a test or a tool may open the same directory twice in one process. Read-only commands
(``export``, ``config check``, ``verify-receipt``) take no lock.
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

_held: dict[str, list] = {}  # resolved directory -> [directory fd, file fd, count, what the file says]
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


def _read_info(path: Path) -> dict | None:
    """What the lock file says (best effort: None when it is missing, empty or being written right now)."""
    try:
        info = json.loads(path.read_text(encoding="utf-8", errors="replace") or "null")
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


def _who(info: dict) -> str:
    return f"process {info.get('pid')} ({info.get('command')}) on {info.get('host')}, since {info.get('since')}"


def _holder_text(path: Path) -> str:
    """Who holds the lock, from what the holder wrote into the lock file."""
    info = _read_info(path / LOCK_FILE)
    if info is None or info.get("released"):
        return (f"another process (its {LOCK_FILE}, which names the holder, was deleted or rewritten; the lock "
                "itself is the operating system's, held on the directory, and deleting that file releases nothing)")
    return _who(info)


def stale_note(info: dict) -> str:
    """The words for a lock taken over from a writer that never released it."""
    return (f"the last writer of this data directory, {_who(info)}, ended without releasing its lock (killed "
            f"or crashed); the operating system released it then, and this process holds it now. Nothing to "
            f"do: {LOCK_FILE} only names the holder, and is never to be deleted by hand")


def _open_dir(path: Path) -> int:
    return os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))


class DataDirLock:
    """An exclusive, process-wide hold on one data directory; :meth:`release` once per :meth:`acquire`.

    ``stale`` is what the last holder wrote when it never released the lock (it was killed or crashed),
    else None: :func:`stale_note` words it."""

    def __init__(self, key: str, stale: dict | None = None) -> None:
        self.key = key
        self.stale = stale

    @classmethod
    def acquire(cls, path: Path, purpose: str = "") -> DataDirLock:
        """Hold ``path`` for this process, or raise DataDirInUseError naming the process that holds it."""
        path = Path(path)
        key = str(path.resolve())
        with _guard:
            if key in _held:
                _held[key][2] += 1
                return cls(key)
            fds: list[int] = []
            try:
                if fcntl is not None:  # Windows opens no directory (and locks nothing, docs/deploy.md)
                    fds.append(_open_dir(path))
                    _flock(fds[0], path)  # the live lock: on the directory, which no one deletes from under us
                previous = _read_info(path / LOCK_FILE)
                fds.append(os.open(path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644))
                _flock(fds[-1], path)  # what an earlier version of this code locks
            except BaseException:
                for fd in fds:
                    os.close(fd)
                raise
            info = {"pid": os.getpid(), "host": socket.gethostname(),
                    "command": purpose or _command(),
                    "since": datetime.now(timezone.utc).isoformat(timespec="seconds")}
            _write(fds[-1], info)
            _held[key] = [fds[0] if len(fds) == 2 else None, fds[-1], 1, info]
        stale = previous if previous is not None and previous.get("pid") and not previous.get("released") else None
        return cls(key, stale)

    def release(self) -> None:
        """Give up this hold; the last one of the process marks the file released and closes both, which releases
        the lock."""
        with _guard:
            entry = _held.get(self.key)
            if entry is None:
                return
            entry[2] -= 1
            if entry[2] == 0:
                del _held[self.key]
                dfd, fd, _n, info = entry
                try:
                    _write(fd, {**info, "released": datetime.now(timezone.utc).isoformat(timespec="seconds")})
                except OSError:  # a full disk must not keep the lock: closing releases it all the same
                    pass
                os.close(fd)
                if dfd is not None:
                    os.close(dfd)
        self.key = ""


def _flock(fd: int, path: Path) -> None:
    if fcntl is None:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise DataDirInUseError(
            f"the data directory {path} is open for writing by {_holder_text(path)}; one process writes to an "
            f"embedded data directory at a time. Stop that process, use it (its HTTP API or /mcp), or run "
            f"read-only commands (export, config check, verify-receipt), which need no lock. Deleting {LOCK_FILE} "
            f"does not release the lock: the operating system holds it until that process ends. Several "
            f"processes share a store through a PostgreSQL ledger and a Chroma server (docs/deploy.md).") from None


def _write(fd: int, info: dict) -> None:
    data = json.dumps(info).encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)


def holds(path: Path) -> bool:
    """Whether this process holds ``path`` (for tests and doctor)."""
    with _guard:
        return str(Path(path).resolve()) in _held


__all__ = ["LOCK_FILE", "DataDirLock", "holds", "stale_note"]
