"""The turn scope: what one turn of one thread reads about its space once, not once per stage.

A turn asks many times whether its space exists and how far the lexical index must catch up;
each question is a round trip to a shared ledger. Inside :meth:`TurnScopeMixin.turn_scope` both
are answered from one statement read at the start of the turn. Mixed into
:class:`~ombre_brain.store.bucket_store.BucketStore`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class TurnScopeMixin:
    @contextmanager
    def turn_scope(self, space: str) -> Iterator[None]:
        """One turn of this thread: the space's change number and existence are read once, in one
        statement (each a round trip to a shared ledger), and the lexical index catches up to that."""
        row = self.ledger.one("SELECT (SELECT seq FROM change_heads WHERE space = ?), "
                              "(SELECT 1 FROM spaces WHERE space = ?)", (space, space))
        scope = self._scope
        saved = getattr(scope, "turn", None)
        scope.turn = {"space": space, "head": int(row[0] or 0), "known": row[1] is not None, "synced": False}
        try:
            yield
        finally:
            scope.turn = saved

    def _turn(self, space: str) -> dict | None:
        turn = getattr(self._scope, "turn", None)
        return turn if turn is not None and turn["space"] == space else None

    def known_space(self, space: str) -> bool:
        turn = self._turn(space)
        if turn is not None:
            return turn["known"]
        return self.ledger.one("SELECT 1 FROM spaces WHERE space = ?", (space,)) is not None
