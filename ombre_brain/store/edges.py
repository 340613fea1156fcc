"""Typed, weighted edges between buckets of one space: the paths related memory spreads along.

:class:`Graph` owns the edges table (they live in the ledger only): adding an edge, reading a
bucket's edges once per turn (the turn's memo, :mod:`.scope`), and sending those reads ahead.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from ..buckets import bucket_from_json
from ..errors import NotFoundError, ValidationError
from ..recall_types import Edge
from . import changes
from .reads import VISIBLE

if TYPE_CHECKING:
    from .core import StoreCore
    from .reads import Reader

RELATIONS = ("same_event", "context_of", "evidenced_by", "relates_to", "old_version", "conflict", "dream_ring")


class Graph:
    """Edges between buckets: added after both ends are checked, read through the turn's memo."""

    def __init__(self, core: StoreCore, reads: Reader) -> None:
        self.ledger = core.ledger
        self.scope = core.scope
        self.reads = reads

    def add_edge(self, space: str, from_id: str, to_id: str, relation: str, confidence: float) -> Edge:
        if relation not in RELATIONS:
            raise ValidationError(f"expected one of {', '.join(RELATIONS)}, got {relation!r}", field="relation")
        if isinstance(confidence, bool) or not isinstance(confidence, int | float) or not 0 <= confidence <= 1:
            raise ValidationError(f"expected a number between 0 and 1, got {confidence!r}", field="confidence")
        if from_id == to_id:
            raise ValidationError("an edge must join two different buckets", field="to_id")
        for bid, name in ((from_id, "from_id"), (to_id, "to_id")):
            if self.reads.get(space, bid) is None:
                raise NotFoundError(f"{name}: no bucket {bid!r} in space {space!r}")
        self.scope.forget(space)
        with self.ledger.tx() as c:
            c.execute("INSERT INTO edges(space, from_id, to_id, relation, confidence, created) VALUES (?,?,?,?,?,?) "
                      "ON CONFLICT(space, from_id, to_id, relation) DO UPDATE SET confidence = excluded.confidence",
                      (space, from_id, to_id, relation, float(confidence), datetime.now(timezone.utc).isoformat()))
            changes.record(c, space, "edge", [from_id, to_id])  # an old_version edge supersedes (the profile)
        return Edge(from_id, to_id, relation, float(confidence))

    def edges(self, space: str, bucket_ids: Iterable[str] | None = None, *, ends: bool = False) -> list[Edge]:
        """Every edge of the space, or those touching the given buckets, in a stable order (inside a
        turn, each bucket's edges are read once).

        ``ends`` (inside a turn): the buckets at both ends of the edges read come in the same
        statement and join the turn's memo, for the get_many that follows (diffusion's targets).
        """
        if bucket_ids is None:
            return self._read_edges(self.ledger.query("SELECT from_id, to_id, relation, confidence FROM edges WHERE "
                                                      "space = ? ORDER BY from_id, to_id, relation", (space,)))
        ids = list(dict.fromkeys(bucket_ids))
        memo = self.scope.memo(space, "edges")
        if memo is None or not ids:
            return self._read_edges(self.ledger.query(*self._edges_query(space, ids))) if ids else []
        for nodes, ahead in self.scope.memo(space, "edges_ahead").items():  # reads sent ahead, now wanted
            self._remember(memo, nodes, self._read_edges(ahead.rows()))
        self.scope.memo(space, "edges_ahead").clear()
        missing = [i for i in ids if i not in memo]
        if missing:
            rows = self.ledger.query(*self._edges_query(space, missing, ends=ends))
            self._remember(memo, missing, self._read_edges(rows))
            if ends:
                self._remember_ends(space, rows)
        found = {(e.from_id, e.to_id, e.relation): e for i in ids for e in memo[i]}
        return [found[k] for k in sorted(found)]

    def edges_ahead(self, space: str, bucket_ids: Iterable[str]) -> None:
        """Inside a turn, send the read of these buckets' edges ahead: edges() takes it when next asked
        (a shared ledger sends it with the turn's next round trip). Outside a turn, nothing happens."""
        memo = self.scope.memo(space, "edges")
        if memo is None:
            return
        waiting = self.scope.memo(space, "edges_ahead")
        known = set(memo).union(*waiting)
        ids = tuple(i for i in dict.fromkeys(bucket_ids) if i not in known)
        if ids:
            waiting[ids] = self.ledger.ahead(*self._edges_query(space, list(ids)))

    @staticmethod
    def _remember(memo: dict, nodes, edges: list[Edge]) -> None:
        """Record the edges read for ``nodes`` (every edge touching each) in the turn's memo."""
        fresh = {n for n in nodes if n not in memo}
        memo.update((n, []) for n in fresh)
        for e in edges:
            for b in {e.from_id, e.to_id} & fresh:
                memo[b].append(e)

    def _remember_ends(self, space: str, rows) -> None:
        """The visible buckets at the ends of edges read with ``ends``, into the turn's memo (None: not visible)."""
        memo = self.scope.memo(space, "buckets")
        for r in rows:
            for end, data in ((r["from_id"], r["from_data"]), (r["to_id"], r["to_data"])):
                if end not in memo:
                    memo[end] = bucket_from_json(data) if data is not None else None

    def _edges_query(self, space: str, ids: list[str], ends: bool = False) -> tuple[str, list]:
        """Every edge with an end among ``ids``, in (from, to, relation) order; with ``ends``, the
        records of the visible buckets at both ends too (``from_data``, ``to_data``; NULL if not visible)."""
        dialect = self.ledger.dialect
        from_in, p = dialect.among("from_id", ids)
        to_in, _ = dialect.among("to_id", ids)
        # Two index searches joined by UNION; `from_id IN … OR to_id IN …` scans every edge of the
        # space (3 ms a call at 20k edges, and diffusion calls it once per hop).
        cols = "SELECT from_id, to_id, relation, confidence FROM edges"
        cols_to = f"SELECT from_id, to_id, relation, confidence FROM {dialect.indexed_by('edges', 'edges_to')}"
        near = f"{cols} WHERE space = ? AND {from_in} UNION {cols_to} WHERE space = ? AND {to_in}"
        if not ends:
            return f"{near} ORDER BY from_id, to_id, relation", [space, *p, space, *p]
        return (f"SELECT e.from_id, e.to_id, e.relation, e.confidence, f.data from_data, t.data to_data "
                f"FROM ({near}) e LEFT JOIN buckets f ON f.space = ? AND f.id = e.from_id AND f.{VISIBLE} "
                f"LEFT JOIN buckets t ON t.space = ? AND t.id = e.to_id AND t.{VISIBLE} "
                "ORDER BY e.from_id, e.to_id, e.relation", [space, *p, space, *p, space, space])

    @staticmethod
    def _read_edges(rows) -> list[Edge]:
        return [Edge(r["from_id"], r["to_id"], r["relation"], r["confidence"]) for r in rows]
