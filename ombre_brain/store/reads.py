"""Reading the bucket store: buckets, lists, moments, both searches, stored vectors, exports.

Readers see committed buckets and buckets being updated (their new version is already in the
ledger), never ``pending`` or ``deleting`` ones. :class:`Reader` owns the statements that read
buckets and moments; inside a turn it answers from the turn's memo (:mod:`.scope`) and takes the
lists announced ahead (:meth:`Reader.list_ahead`). The lexical index it searches is the core's.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..buckets import Bucket, Moment, bucket_from_json, bucket_id_of
from ..memory_layers import role_values
from ..retrieval.second_opinion import decode_blob
from .interfaces import ListRead

if TYPE_CHECKING:
    from .core import StoreCore

# What readers see: committed buckets, and buckets being updated (their new version, already in the
# ledger), so a bucket never reads as missing while someone edits it.
VISIBLE = "state IN ('committed', 'updating')"


class Reader:
    """Every read of buckets and moments, and the two searches."""

    def __init__(self, core: StoreCore) -> None:
        self.core = core
        self.ledger = core.ledger
        self.scope = core.scope

    def get(self, space: str, bucket_id: str) -> Bucket | None:
        row = self.ledger.one(f"SELECT data FROM buckets WHERE space = ? AND id = ? AND {VISIBLE}",
                              (space, bucket_id))
        return bucket_from_json(row["data"]) if row else None

    def get_many(self, space: str, bucket_ids: Iterable[str]) -> dict[str, Bucket]:
        """The visible buckets among ``bucket_ids``, by id in id order (inside a turn, each read once)."""
        ids = list(dict.fromkeys(bucket_ids))
        memo = self.scope.memo(space, "buckets")
        if memo is None:
            return self._read_buckets(space, ids)
        for ahead in self.scope.memo(space, "buckets_ahead").pop("pending", ()):  # announced: take its rows
            for r in ahead.rows():
                b = bucket_from_json(r["data"])
                memo.setdefault(b.id, b)
        missing = [i for i in ids if i not in memo]
        if missing:
            got = self._read_buckets(space, missing)
            memo.update((i, got.get(i)) for i in missing)
        return {i: memo[i] for i in sorted(ids) if memo[i] is not None}

    def get_ahead(self, space: str, bucket_ids: Iterable[str]) -> None:
        """Inside a turn, send the read of these buckets ahead: the :meth:`get_many` that follows takes its rows
        (a bucket not among them is read again, one that is not visible reads as absent). Outside a turn, nothing."""
        memo = self.scope.memo(space, "buckets")
        ids = [i for i in dict.fromkeys(bucket_ids) if memo is not None and i not in memo]
        if not ids:
            return
        pending = self.scope.memo(space, "buckets_ahead").setdefault("pending", [])
        for i in range(0, len(ids), 900):
            among, chunk = self.ledger.dialect.among("id", ids[i:i + 900])
            pending.append(self.ledger.ahead(f"SELECT data FROM buckets WHERE space = ? AND {VISIBLE} AND {among}",
                                             (space, *chunk)))

    def _read_buckets(self, space: str, ids: list[str]) -> dict[str, Bucket]:
        out: dict[str, Bucket] = {}
        for i in range(0, len(ids), 900):
            among, chunk = self.ledger.dialect.among("id", ids[i:i + 900])
            for r in self.ledger.query(f"SELECT data FROM buckets WHERE space = ? AND {VISIBLE} AND {among}",
                                       (space, *chunk)):
                b = bucket_from_json(r["data"])
                out[b.id] = b
        return dict(sorted(out.items()))

    def list(self, space: str, *, type: str | None = None, limit: int | None = 50,
             since: str | None = None, role: str | None = None) -> list[Bucket]:
        """Newest first. ``role`` (see :func:`storage_roles`) reads only the buckets holding it, from an index.

        Inside a turn, a list announced with :meth:`list_ahead` takes the rows read ahead."""
        read = ListRead(type, limit, since, role)
        lists = self.scope.memo(space, "lists")
        ahead = lists.pop(read, None) if lists is not None else None  # taken: a second call reads again
        rows = ahead.rows() if ahead is not None else self.ledger.query(*self._list_query(space, read))
        return [bucket_from_json(r["data"]) for r in rows]

    def list_ahead(self, space: str, *reads: dict) -> None:
        """Inside a turn, send these :meth:`list` reads ahead (each a dict of its keywords); the list()
        calls that follow with the same keywords take their rows. Outside a turn, nothing happens."""
        lists = self.scope.memo(space, "lists")
        if lists is None:
            return
        for kw in reads:
            read = ListRead(**kw)
            if read not in lists:
                lists[read] = self.ledger.ahead(*self._list_query(space, read))

    def _list_query(self, space: str, read: ListRead) -> tuple[str, list]:
        type, limit, since, role = read.type, read.limit, read.since, read.role
        where = f"space = ? AND {VISIBLE}"
        params: list = [space]
        if type:
            where += " AND type = ?"
            params.append(type)
        dialect = self.ledger.dialect
        if role:  # roles != '' names the partial index's condition; IN makes the role an index seek
            values = role_values(role)
            where += f" AND roles != '' AND roles IN ({', '.join('?' * len(values))})"
            params += values
        if limit is None:
            limit = dialect.no_limit
        if not since:
            # without ANALYZE statistics SQLite would rather walk buckets_created over the whole space
            table = (dialect.indexed_by("buckets", "buckets_roles2") if role else
                     dialect.indexed_by("buckets", "buckets_type2") if type else "buckets")
            return f"SELECT data FROM {table} WHERE {where} ORDER BY created DESC, seq DESC LIMIT ?", [*params, limit]
        # Two index searches, not `created >= ? OR last_active >= ?`, which scans the whole space on
        # every turn (10 ms at 10k buckets, 0.1 ms this way). The branches are disjoint.
        sql = (f"SELECT data, created, seq FROM buckets WHERE {where} AND created >= ? UNION ALL "
               f"SELECT data, created, seq FROM {dialect.indexed_by('buckets', 'buckets_active')} WHERE {where} "
               "AND last_active >= ? AND created < ? ORDER BY created DESC, seq DESC LIMIT ?")
        return sql, [*params, since, *params, since, since, limit]

    def count(self, space: str) -> int:
        return self.ledger.one(f"SELECT COUNT(*) n FROM buckets WHERE space = ? AND {VISIBLE}",
                               (space,))["n"]

    def moments(self, space: str, bucket_id: str) -> list[Moment]:
        rows = self.ledger.query('SELECT id, bucket_id, ordinal, section, context_only, text, start, "end" '
                                 "FROM moments WHERE space = ? AND bucket_id = ? ORDER BY ordinal", (space, bucket_id))
        return [_moment(r) for r in rows]

    def moments_with_buckets(self, space: str, moment_ids: Iterable[str], *,
                             seconds: bool = False) -> tuple[dict[str, Moment], dict[str, Bucket]]:
        """The committed moments among ``moment_ids``, and their buckets (by id, in id order), in one read.

        The join that keeps out moments of uncommitted buckets reads those buckets anyway, so their
        records come along instead of in a second statement; inside a turn they join its memo, and
        with ``seconds`` so do the second-opinion vectors of these moments and of their buckets' other content
        moments (admission reads a memory as the whole of its content, ``Admitter._wholes``).
        """
        ids = list(dict.fromkeys(moment_ids))
        moments: dict[str, Moment] = {}
        buckets: dict[str, Bucket] = {}
        memo = self.scope.memo(space, "buckets")
        kept = self.scope.memo(space, "seconds") if seconds else None
        cut = self.scope.memo(space, "tokens") if seconds else None
        cols = 'm.id, m.bucket_id, m.ordinal, m.section, m.context_only, m.text, m.start, m."end", b.data'
        for i in range(0, len(ids), 900):
            part = ids[i:i + 900]
            asked = set(part)
            # With ``seconds``, every moment of the found buckets (one index lookup per bucket; an OR of the two
            # conditions would scan the table): the asked ones are returned, the other content moments only lend
            # their vectors to the memo.
            among, chunk = (self.ledger.dialect.among("m.id", part) if kept is None else
                            self.ledger.dialect.among("m.bucket_id", sorted({bucket_id_of(m) for m in part})))
            for r in self.ledger.query(
                    f"SELECT {cols}{', m.second, m.tokens' if kept is not None else ''} FROM moments m JOIN buckets b "
                    f"ON b.space = m.space AND b.id = m.bucket_id WHERE m.space = ? AND b.state = 'committed' "
                    f"AND {among}",
                    (space, *chunk)):
                if cut is not None and not r["context_only"]:
                    cut[r["id"]] = (r["text"], r["tokens"])
                if kept is not None and r["id"] not in asked:
                    if not r["context_only"]:
                        kept[r["id"]] = (r["text"], r["second"])
                    continue
                if kept is not None:
                    kept[r["id"]] = (r["text"], r["second"])
                moments[r["id"]] = _moment(r)
                if r["bucket_id"] not in buckets:
                    buckets[r["bucket_id"]] = bucket_from_json(r["data"])
        if memo is not None:
            memo.update(buckets)
        return moments, dict(sorted(buckets.items()))

    def sample_moments(self, space: str, n: int) -> tuple[list[str], np.ndarray] | None:
        """A fixed, evenly spread sample of up to ``n`` committed content moments: their ids and vectors.

        Admission measures a query against it (its background in the space, design §13).
        """
        if not self.core.ensure_space(space, create=False):
            return None
        rows = self.ledger.query(
            "SELECT m.id FROM moments m JOIN buckets b ON b.space = m.space AND b.id = m.bucket_id "
            "WHERE m.space = ? AND b.state = 'committed' AND m.context_only = 0 ORDER BY m.id", (space,))
        ids = [r["id"] for r in rows]
        if len(ids) > n:
            step = len(ids) / n
            ids = [ids[int(i * step)] for i in range(n)]
        got = self.core.chroma.get_vectors(space, ids)
        if not got:
            return None
        ids = [i for i in ids if i in got]
        return ids, np.stack([got[i] for i in ids])

    def moment_tokens(self, space: str, moment_ids: Sequence[str]) -> dict[str, tuple[str, list[str]]]:
        """The committed moments' texts and the lexical tokens stored with them at write time, by id.

        Admission reads a memory's words from them instead of cutting its text again (``Admitter._memory_words``);
        inside a turn those of the candidates' content moments came with them (:meth:`moments_with_buckets`)."""
        ids = list(dict.fromkeys(moment_ids))
        kept = self.scope.memo(space, "tokens") or {}
        rows = {i: kept[i] for i in ids if i in kept}
        rest = [i for i in ids if i not in kept]
        for i in range(0, len(rest), 900):
            among, chunk = self.ledger.dialect.among("m.id", rest[i:i + 900])
            rows.update((r["id"], (r["text"], r["tokens"])) for r in self.ledger.query(
                "SELECT m.id, m.text, m.tokens FROM moments m JOIN buckets b ON b.space = m.space "
                f"AND b.id = m.bucket_id WHERE m.space = ? AND b.state = 'committed' AND {among}", (space, *chunk)))
        return {i: (text, tokens.split()) for i, (text, tokens) in rows.items()}

    def vocabulary(self, limit: int) -> list[str]:
        """Up to ``limit`` of the words the committed memories' content moments were cut into at write time, in
        every space, the most frequent first (ties in word order): what a server encodes for word alignment at
        start (``Admitter.prepare``), so no turn encodes a word the store already holds."""
        counts: Counter[str] = Counter()
        for r in self.ledger.query("SELECT m.tokens FROM moments m JOIN buckets b ON b.space = m.space AND "
                                   "b.id = m.bucket_id WHERE b.state = 'committed' AND m.context_only = 0", ()):
            counts.update(r["tokens"].split())
        return [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]]

    def get_vectors(self, space: str, moment_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The embeddings Chroma holds for these moments, by id (admission's exact cosines)."""
        return self.core.chroma.get_vectors(space, moment_ids)

    def second_vectors(self, space: str, moment_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The second-opinion vectors of these moments; one a ledger lacks (written before) is encoded now.

        Inside a turn, those read with the candidates' moments come from the turn's memo."""
        enc = self.core.second
        ids = list(dict.fromkeys(moment_ids))
        if enc is None or not ids:
            return {}
        kept = self.scope.memo(space, "seconds") or {}
        rows = [(i, *kept[i]) for i in ids if i in kept]
        rest = [i for i in ids if i not in kept]
        for i in range(0, len(rest), 900):
            among, chunk = self.ledger.dialect.among("id", rest[i:i + 900])
            rows += [(r["id"], r["text"], r["second"]) for r in self.ledger.query(
                f"SELECT id, text, second FROM moments WHERE space = ? AND {among}", (space, *chunk))]
        out: dict[str, np.ndarray] = {}
        missing: dict[str, str] = {}
        for mid, text, blob in sorted(rows, key=lambda r: r[0]):
            vec = decode_blob(blob)
            if vec is not None and len(vec) == enc.dimension:
                out[mid] = vec
            else:
                missing[mid] = text
        if missing:
            for mid, vec in zip(missing, enc.passages(list(missing.values())), strict=True):
                out[mid] = vec
        return out

    def vector_search(self, space: str, vector: np.ndarray, k: int) -> dict[str, float]:
        if not self.core.ensure_space(space, create=False):
            return {}
        return self.core.chroma.query(space, vector, k)

    def lexical_search(self, space: str, tokens: Sequence[str], k: int) -> dict[str, float]:
        if not tokens:
            return {}
        return dict(self.core.lexical(space).search(list(tokens), k))

    def export_rows(self, conn, space: str) -> tuple[str | None, list[dict], list[dict]]:
        """(model id, visible buckets, edges) of a space in ``conn``'s snapshot: :func:`export_rows`."""
        return export_rows(conn, space)


def export_rows(conn, space: str) -> tuple[str | None, list[dict], list[dict]]:
    """(model id, visible buckets as §3 dicts in write order, edges) of a space, read in ``conn``'s snapshot.

    A bucket other sources also claim carries them in ``sources`` (besides its own ``source``). Ledger reads
    only, so a read-only export runs beside the process that writes the data directory."""
    known = conn.execute("SELECT model_id FROM spaces WHERE space = ?", (space,)).fetchone()
    buckets = [json.loads(r["data"]) for r in conn.execute(
        f"SELECT data FROM buckets WHERE space = ? AND {VISIBLE} ORDER BY seq", (space,))]
    edges = [dict(r) for r in conn.execute(
        "SELECT from_id, to_id, relation, confidence FROM edges WHERE space = ? ORDER BY from_id, to_id, relation",
        (space,))]
    claims: dict[str, list[str]] = {}
    for r in conn.execute("SELECT bucket_id, source FROM bucket_sources WHERE space = ? ORDER BY source", (space,)):
        claims.setdefault(r["bucket_id"], []).append(r["source"])
    for b in buckets:  # the other sources that wrote the same text (design §10), when there are any
        others = [src for src in claims.get(b["id"], ()) if src != (b.get("source") or "")]
        if others:
            b["sources"] = others
    return (known["model_id"] if known is not None else None), buckets, edges


def _moment(r) -> Moment:
    return Moment(r["id"], r["bucket_id"], r["ordinal"], r["section"], r["text"], bool(r["context_only"]),
                  r["start"], r["end"])
