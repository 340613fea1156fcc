"""A shared/exclusive gate for one process's threads: many users at once, or one exclusive holder.

Chroma's backend holds it around every call so a rebuild or a compaction of its files runs alone
(:mod:`.chroma`); the SQLite ledger holds it around every statement so the purge's WAL truncation
runs when no thread of this process is reading or writing (:mod:`.ledger.sqlite`). Shared use is
reentrant per thread, so a user may nest calls; an exclusive holder waits for the users in flight
and keeps new ones out until it is done.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class SharedGate:
    """Any number of users at once, or one exclusive holder (a rebuild, a VACUUM); reentrant for users."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._users = 0
        self._closed = False
        self._mine = threading.local()

    @contextmanager
    def shared(self) -> Iterator[None]:
        depth = getattr(self._mine, "depth", 0)
        if depth == 0:
            with self._cond:
                while self._closed:
                    self._cond.wait()
                self._users += 1
        self._mine.depth = depth + 1
        try:
            yield
        finally:
            self._mine.depth = depth
            if depth == 0:
                with self._cond:
                    self._users -= 1
                    if not self._users:
                        self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            while self._closed:
                self._cond.wait()
            self._closed = True
            while self._users:
                self._cond.wait()
        try:
            yield
        finally:
            with self._cond:
                self._closed = False
                self._cond.notify_all()


__all__ = ["SharedGate"]
