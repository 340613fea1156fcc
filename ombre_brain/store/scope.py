"""The turn scope: what one turn of one thread reads about its space once, not once per stage.

A turn asks many times whether its space exists and how far the lexical index must catch up;
each question is a round trip to a shared ledger. Inside :meth:`TurnScopeMixin.turn_scope` both
are answered from one statement, sent ahead with the turn's first round trip. The stages also
ask for the same buckets and edges again (candidates, their context, diffusion, chain titles):
inside the scope each bucket and each bucket's edges are read once, and asked for again they
come from the turn's memo. The side sections announce the lists they will read
(:meth:`TurnScopeMixin.list_ahead`), which a shared ledger then sends in one round trip. A write
through this store in the turn's thread (a dream claimed) empties the memo and drops the lists
not yet taken, so the turn never reads its own writes stale. Mixed into
:class:`~ombre_brain.store.bucket_store.BucketStore`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class TurnScopeMixin:
    @contextmanager
    def turn_scope(self, space: str) -> Iterator[None]:
        """One turn of this thread: the space's change number and existence are read once, in one
        statement sent ahead (to a shared ledger it travels with the turn's first round trip, the
        session's state), and the lexical index catches up to that."""
        row = self.ledger.ahead("SELECT (SELECT seq FROM change_heads WHERE space = ?), "
                                "(SELECT 1 FROM spaces WHERE space = ?)", (space, space))
        scope = self._scope
        saved = getattr(scope, "turn", None)
        scope.turn = {"space": space, "row": row, "synced": False}
        try:
            yield
        finally:
            scope.turn = saved

    def _turn(self, space: str) -> dict | None:
        turn = getattr(self._scope, "turn", None)
        if turn is None or turn["space"] != space:
            return None
        if "head" not in turn:
            row = turn["row"].one()
            turn.update(head=int(row[0] or 0), known=row[1] is not None)
        return turn

    def _memo(self, space: str, kind: str) -> dict | None:
        """This turn's memo, or None outside a turn of ``space``: ``buckets`` (id -> Bucket, or None where
        there is none to see), ``edges`` (id -> every edge touching it), ``edges_ahead`` (ids -> their
        edges' read sent ahead), ``lists`` (list() keywords -> its read sent ahead) and ``seconds``
        (moment id -> its text and stored second-opinion vector)."""
        turn = getattr(self._scope, "turn", None)
        if turn is None or turn["space"] != space:
            return None
        return turn.setdefault(kind, {})

    def _forget_memo(self, space: str) -> None:
        """A write in this thread: the turn reads what it touched again."""
        turn = getattr(self._scope, "turn", None)
        if turn is not None and turn["space"] == space:
            turn.pop("buckets", None)
            turn.pop("edges", None)
            turn.pop("edges_ahead", None)
            turn.pop("lists", None)
            turn.pop("seconds", None)

    def list_ahead(self, space: str, *reads: dict) -> None:
        """Inside a turn, send these :meth:`list` reads ahead (each a dict of its keywords); the list()
        calls that follow with the same keywords take their rows. Outside a turn, nothing happens."""
        lists = self._memo(space, "lists")
        if lists is None:
            return
        for kw in reads:
            key = _list_key(**kw)
            if key not in lists:
                lists[key] = self.ledger.ahead(*self._list_query(space, *key))

    def _listed_ahead(self, space: str, key: tuple):
        """The read sent ahead for a list() with these keywords (taken: a second call reads again), or None."""
        lists = self._memo(space, "lists")
        return lists.pop(key, None) if lists is not None else None

    def known_space(self, space: str) -> bool:
        turn = self._turn(space)
        if turn is not None:
            return turn["known"]
        return self.ledger.one("SELECT 1 FROM spaces WHERE space = ?", (space,)) is not None


def _list_key(type: str | None = None, limit: int | None = 50, since: str | None = None,
              role: str | None = None) -> tuple:
    """list()'s keywords, with its defaults, in the order _list_query takes them."""
    return (type, limit, since, role)
