"""The store checking itself: are the ledger, Chroma and the lexical index in agreement? (doctor, reindex)

The ledger is the record of truth. Opening a store already rolls half-finished writes forward
and finishes half-done deletes (``reconcile``); these methods compare the three stores space by
space and repair what they find: re-add moments Chroma lost or holds with stale text, delete what
Chroma holds that the ledger does not know, rebuild missing moment rows, drop dangling edges and
orphan collections, rebuild the lexical index. :class:`Consistency` owns these checks and repairs
(and ``reindex``, which re-embeds a space after a model change).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..buckets import bucket_from_json, bucket_id_of, build_moments, moment_text_hash
from ..kinds.fields import UNINDEXED_TYPES
from . import changes

if TYPE_CHECKING:
    from .core import StoreCore
    from .reads import Reader
    from .writes import Writer

ISSUES = ("unfinished", "missing_in_chroma", "orphans_in_chroma", "stale_in_chroma", "buckets_without_moments",
          "orphan_moment_rows", "dangling_edges", "missing_in_lexical", "extra_in_lexical")
DOC_CHUNK = 500


class Consistency:
    """Checks and repairs of one store; the ledger is the truth the other two are brought back to."""

    def __init__(self, core: StoreCore, reads: Reader, writer: Writer) -> None:
        self.core = core
        self.ledger = core.ledger
        self.chroma = core.chroma
        self.reads = reads
        self.writer = writer

    def reindex(self, space: str) -> dict:
        """Re-embed every bucket of a space with the configured model (after a model change)."""
        rows = self.ledger.query("SELECT data FROM buckets WHERE space = ? AND state = 'committed'", (space,))
        self.chroma.drop_space(space)
        with self.ledger.tx() as c:
            c.execute("UPDATE spaces SET model_id = ?, dimension = ? WHERE space = ?",
                      (self.core.embedder.model_id, self.core.embedder.dimension, space))
        self.core.recheck_space(space)
        n = 0
        buckets = [bucket_from_json(r["data"]) for r in rows]
        for i in range(0, len(buckets), 64):
            n += self.writer.reembed(buckets[i:i + 64])
        self.chroma.compact_files()  # the dropped collection's files held every old vector
        return {"space": space, "buckets": len(rows), "moments": n, "model_id": self.core.embedder.model_id}

    def check_space(self, space: str) -> dict:
        """Compare the ledger, Chroma and the lexical index for one space; read-only."""
        rows = self.ledger.query("SELECT id, state, type FROM buckets WHERE space = ?", (space,))
        states = {r["id"]: r["state"] for r in rows}
        unindexed = {r["id"] for r in rows if r["type"] in UNINDEXED_TYPES}  # letters, plans, self entries: no moments
        committed = {b for b, s in states.items() if s == "committed"}
        rows = self.ledger.query("SELECT id, bucket_id, text FROM moments WHERE space = ?", (space,))
        ledger_text = {r["id"]: r["text"] for r in rows if r["bucket_id"] in committed}
        with_moments = {r["bucket_id"] for r in rows}
        chroma_ids = set(self.chroma.all_ids(space))
        missing = sorted(set(ledger_text) - chroma_ids)
        without = committed - with_moments - unindexed
        # Chroma ids of unfinished buckets are the reconcile's; those of buckets whose moment rows are being
        # rebuilt are theirs again afterwards: neither is an orphan.
        orphans = sorted(i for i in chroma_ids - set(ledger_text)
                         if states.get(bucket_id_of(i), "committed") == "committed" and bucket_id_of(i) not in without)
        present = sorted(set(ledger_text) & chroma_ids)
        stale = []
        for i in range(0, len(present), DOC_CHUNK):
            chunk = present[i:i + DOC_CHUNK]
            hashes = self.chroma.get_text_hashes(space, chunk)
            stale += [m for m in chunk if hashes.get(m) != moment_text_hash(ledger_text[m])]
        lex = self.core.lexical(space)
        edges = self.ledger.query("SELECT from_id, to_id, relation FROM edges WHERE space = ?", (space,))
        return {
            "buckets": len(committed),
            "moments": len(ledger_text),
            "chroma_moments": len(chroma_ids),
            "unfinished": sorted(b for b, s in states.items() if s != "committed"),
            "missing_in_chroma": missing,
            "orphans_in_chroma": orphans,
            "stale_in_chroma": sorted(stale),
            "buckets_without_moments": sorted(without),
            "orphan_moment_rows": sorted(r["id"] for r in rows if r["bucket_id"] not in states),
            "dangling_edges": [(e["from_id"], e["to_id"], e["relation"]) for e in edges
                               if e["from_id"] not in states or e["to_id"] not in states],
            "missing_in_lexical": sorted(m for m in ledger_text if m not in lex),
            "extra_in_lexical": sorted(set(lex.ids()) - set(ledger_text)),
        }

    def orphan_collections(self) -> list[str]:
        """Chroma collections of this store whose space the ledger does not know."""
        try:
            in_chroma = set(self.chroma.list_spaces())
        except Exception:  # listing is best effort: a server without the call is not an inconsistency
            return []
        return sorted(in_chroma - set(self.core.spaces()))

    def repair_space(self, space: str, found: dict) -> list[str]:
        """Fix what :meth:`check_space` found; returns one line per kind of repair."""
        done: list[str] = []
        if found["orphan_moment_rows"]:
            ids = found["orphan_moment_rows"]
            with self.ledger.tx() as c:
                for i in range(0, len(ids), 900):
                    chunk = ids[i:i + 900]
                    c.execute(f"DELETE FROM moments WHERE space = ? AND id IN ({','.join('?' * len(chunk))})",
                              (space, *chunk))
            done.append(f"deleted {len(ids)} ledger moment rows whose bucket is gone")
        if found["buckets_without_moments"]:
            rebuilt = self.reads.get_many(space, found["buckets_without_moments"])
            with self.ledger.tx() as c:
                for b in rebuilt.values():
                    ms = build_moments(b)
                    c.execute("DELETE FROM moments WHERE space = ? AND bucket_id = ?", (space, b.id))
                    self.writer.insert_moments(c, b, ms, list(zip([self.core.tokens(m.text) for m in ms],
                                                                  self.core.seconds([m.text for m in ms]),
                                                                  strict=True)))
                changes.record(c, space, "update", list(rebuilt))
            self.writer.reembed(list(rebuilt.values()))
            done.append(f"rebuilt the moments of {len(rebuilt)} buckets that had none")
        redo = {bucket_id_of(m) for m in found["missing_in_chroma"] + found["stale_in_chroma"]}
        if redo:
            buckets = list(self.reads.get_many(space, redo).values())
            for i in range(0, len(buckets), 64):
                self.writer.reembed(buckets[i:i + 64])
            if found["missing_in_chroma"]:
                done.append(f"re-added {len(found['missing_in_chroma'])} moments to Chroma")
            if found["stale_in_chroma"]:
                done.append(f"re-embedded {len(found['stale_in_chroma'])} moments whose Chroma text was stale")
        if found["orphans_in_chroma"]:
            ids = found["orphans_in_chroma"]
            for i in range(0, len(ids), 2000):
                self.chroma.delete(space, ids[i:i + 2000])
            done.append(f"deleted {len(ids)} orphan moments from Chroma")
        if found["dangling_edges"]:
            with self.ledger.tx() as c:
                c.executemany("DELETE FROM edges WHERE space = ? AND from_id = ? AND to_id = ? AND relation = ?",
                              [(space, *e) for e in found["dangling_edges"]])
            done.append(f"deleted {len(found['dangling_edges'])} edges to buckets that are gone")
        if found["missing_in_lexical"] or found["extra_in_lexical"] or done:
            self.core.drop_lexical(space)
            if found["missing_in_lexical"] or found["extra_in_lexical"]:
                done.append(f"rebuilt the lexical index ({len(found['missing_in_lexical'])} moments missing, "
                            f"{len(found['extra_in_lexical'])} extra)")
        return done


def issue_count(entry: dict) -> int:
    return sum(len(entry[k]) for k in ISSUES)
