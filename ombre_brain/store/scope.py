"""The turn scope: what one turn of one thread reads about its space once, not once per stage.

A turn asks many times whether its space exists and how far the lexical index must catch up;
each question is a round trip to a shared ledger. Inside :meth:`TurnScope.turn_scope` both
are answered from one statement, sent ahead with the turn's first round trip. The stages also
ask for the same buckets and edges again (candidates, their context, diffusion, chain titles):
inside the scope each bucket and each bucket's edges are read once, and asked for again they
come from the turn's memo. The side sections announce the lists they will read
(:meth:`~ombre_brain.store.reads.Reader.list_ahead`), which a shared ledger then sends in one
round trip. A write through this store in the turn's thread (a dream claimed) empties the memo
and drops the lists not yet taken, so the turn never reads its own writes stale.

:class:`TurnScope` owns the per-thread turn and its memo; the readers and writers of the store
consult it (:meth:`~TurnScope.memo`) and writers empty it (:meth:`~TurnScope.forget`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .ledger import Ledger


class TurnScope:
    """The turn this thread is running in one store, and what the turn has read so far."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self._local = threading.local()

    @contextmanager
    def turn_scope(self, space: str) -> Iterator[None]:
        """One turn of this thread: the space's change number and existence are read once, in one
        statement sent ahead (to a shared ledger it travels with the turn's first round trip, the
        session's state), and the lexical index catches up to that."""
        row = self.ledger.ahead("SELECT (SELECT seq FROM change_heads WHERE space = ?), "
                                "(SELECT 1 FROM spaces WHERE space = ?)", (space, space))
        local = self._local
        saved = getattr(local, "turn", None)
        local.turn = {"space": space, "row": row, "synced": False}
        try:
            yield
        finally:
            local.turn = saved

    def turn(self, space: str) -> dict | None:
        """This thread's turn of ``space`` (its change number and existence read), or None outside one."""
        turn = getattr(self._local, "turn", None)
        if turn is None or turn["space"] != space:
            return None
        if "head" not in turn:
            row = turn["row"].one()
            turn.update(head=int(row[0] or 0), known=row[1] is not None)
        return turn

    def memo(self, space: str, kind: str) -> dict | None:
        """This turn's memo, or None outside a turn of ``space``: ``buckets`` (id -> Bucket, or None where
        there is none to see), ``edges`` (id -> every edge touching it), ``edges_ahead`` (ids -> their
        edges' read sent ahead), ``lists`` (a :class:`~.interfaces.ListRead` -> its read sent ahead),
        ``buckets_ahead`` (bucket reads sent ahead, :meth:`~.reads.Reader.get_ahead`), ``seconds`` (moment id
        -> its text and stored second-opinion vector) and ``tokens`` (content moment id -> its text and stored lexical
        tokens)."""
        turn = getattr(self._local, "turn", None)
        if turn is None or turn["space"] != space:
            return None
        return turn.setdefault(kind, {})

    def forget(self, space: str) -> None:
        """A write in this thread: the turn reads what it touched again."""
        turn = getattr(self._local, "turn", None)
        if turn is not None and turn["space"] == space:
            turn.pop("buckets", None)
            turn.pop("edges", None)
            turn.pop("edges_ahead", None)
            turn.pop("lists", None)
            turn.pop("seconds", None)

    def change_head(self, space: str) -> int:
        """The space's change number: the turn's (read once with its first round trip), else read now."""
        turn = self.turn(space)
        if turn is not None:
            return turn["head"]
        row = self.ledger.one("SELECT seq FROM change_heads WHERE space = ?", (space,))
        return int(row[0]) if row is not None else 0

    def known_space(self, space: str) -> bool:
        turn = self.turn(space)
        if turn is not None:
            return turn["known"]
        return self.ledger.one("SELECT 1 FROM spaces WHERE space = ?", (space,)) is not None
