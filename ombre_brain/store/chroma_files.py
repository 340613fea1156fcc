"""Chroma's files on disk (embedded mode): what a purge must clean that Chroma's own API cannot reach.

Where a purged vector can linger in ``chroma/`` (chromadb 1.5):

- **Segment directories no collection owns.** Dropping a collection leaves its HNSW directory
  (``<segment uuid>/``) behind, and its ``data_level0.bin`` holds every vector it had.
  :func:`compact` deletes every directory the ``segments`` table does not name.
- **Freed pages of ``chroma.sqlite3``.** The write-ahead log (``embeddings_queue``) keeps each
  vector until the index persists; deleted rows leave their bytes in free pages. :func:`compact`
  VACUUMs the file, in a child process (see ``_CHILD``).
- **Uninitialised slots of a live index** (the residue of issue 35). When Chroma creates a
  persistent HNSW index (a new collection, a rebuilt one, or one that never reached Chroma's
  1,000-write sync threshold opened again by a new process), hnswlib's ``initPersistentIndex``
  writes its whole initial capacity, 100 element slots, to ``data_level0.bin`` (and 100 floats
  to ``length.bin``) straight from ``malloc``: memory never written, holding whatever the
  process freed there before. That includes vectors of buckets purged moments earlier (the old
  collection's index, the log records of its writes), so a purge's freshly rebuilt collection
  could carry the purged vectors in its own file, 1 trial in 4 under concurrent writes. Later
  persists write only the slots of real elements. :func:`scrub_segment` zeroes every byte
  past the element count ``header.bin`` records: hnswlib never reads those bytes as data
  (it loads ``cur_element_count`` elements) and rewrites a slot when an element first fills it.

Zeroing must not race Chroma persisting the same index, so callers hold every Chroma call of
the process off meanwhile (``ChromaBackend``'s file gate); and no other process may use the
directory at all (:mod:`ombre_brain.store.dirlock`).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import struct
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger("ombre_brain")

SEGMENT_DIR_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
HNSW_PERSISTENCE_VERSION = 1  # the layout below; another version is left alone, with a warning
# header.bin: int32 version, then size_t offsetLevel0_, max_elements_, cur_element_count, size_data_per_element_
_HEADER = struct.Struct("<iQQQQ")
_CHUNK = 1 << 20


def segment_dirs(root: Path) -> list[Path]:
    """Every HNSW segment directory under a Chroma data directory."""
    try:
        return sorted(d for d in root.iterdir() if d.is_dir() and SEGMENT_DIR_RE.fullmatch(d.name))
    except FileNotFoundError:
        return []


def _tail(path: Path, start: int, *, zero: bool) -> int:
    """The bytes of ``path`` past ``start`` that are not zero (zeroed on the way with ``zero``)."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return 0
    if size <= start:
        return 0
    dirty = 0
    with open(path, "r+b" if zero else "rb") as f:
        pos = start
        while pos < size:
            f.seek(pos)
            block = f.read(min(_CHUNK, size - pos))
            if not block:
                break
            nonzero = len(block) - block.count(0)
            if nonzero and zero:
                f.seek(pos)
                f.write(bytes(len(block)))
            dirty += nonzero
            pos += len(block)
        if dirty and zero:
            f.flush()
            os.fsync(f.fileno())
    return dirty


def unused_bytes(seg: Path, *, zero: bool = False) -> int:
    """Bytes hnswlib wrote from uninitialised memory in one segment directory (zeroed with ``zero``): those
    of ``data_level0.bin`` and ``length.bin`` past the element count ``header.bin`` records.

    A directory whose header is missing, short or of another persistence version counts 0 and is not touched.
    """
    try:
        head = (seg / "header.bin").read_bytes()[: _HEADER.size]
    except FileNotFoundError:
        return 0
    if len(head) < _HEADER.size:
        return 0
    version, _offset, _max, count, per_element = _HEADER.unpack(head)
    if version != HNSW_PERSISTENCE_VERSION or not 0 < per_element < 1 << 24 or count > 1 << 40:
        log.warning("chroma segment %s: unknown HNSW layout (version %s); its unused slots are not scrubbed",
                    seg.name, version)
        return 0
    return (_tail(seg / "data_level0.bin", count * per_element, zero=zero)
            + _tail(seg / "length.bin", count * 4, zero=zero))


def scrub_segment(seg: Path) -> int:
    """Zero what hnswlib wrote from uninitialised memory in one segment directory; returns the bytes changed."""
    return unused_bytes(seg, zero=True)


@dataclass
class Scrubber:
    """Scrubs segment directories, skipping those unchanged since it last left them clean."""

    root: Path
    _clean: dict[str, tuple[int, int, int]] = field(default_factory=dict)

    @staticmethod
    def _stamp(seg: Path) -> tuple[int, int, int] | None:
        try:
            d, h = (seg / "data_level0.bin").stat(), (seg / "header.bin").stat()
        except FileNotFoundError:
            return None
        return d.st_mtime_ns, d.st_size, h.st_mtime_ns

    def run(self, *, force: bool = False) -> int:
        """Scrub every segment directory changed since the last run (all of them with ``force``); bytes changed."""
        changed = 0
        seen = set()
        for seg in segment_dirs(self.root):
            seen.add(seg.name)
            stamp = self._stamp(seg)
            if stamp is None or (not force and self._clean.get(seg.name) == stamp):
                continue
            changed += scrub_segment(seg)
            stamp = self._stamp(seg)
            if stamp is not None:
                self._clean[seg.name] = stamp
        for gone in set(self._clean) - seen:
            del self._clean[gone]
        return changed


# Runs in a child process. Chroma's Rust core links its own SQLite; a second SQLite library in
# this process would share our POSIX file locks (fcntl locks never conflict within one process),
# so its VACUUM could rewrite pages under Chroma's open transactions ("database disk image is
# malformed"), and closing its file would drop Chroma's locks. Across processes the locks hold.
_CHILD = r"""
import json, sqlite3, sys, time
db = sys.argv[1]
out = {"owned": None, "vacuumed": False, "error": None}
for attempt in range(4):
    try:
        conn = sqlite3.connect(db, timeout=30, isolation_level=None)
        try:
            out["owned"] = [r[0] for r in conn.execute("SELECT id FROM segments")]
            conn.execute("VACUUM")
            out["vacuumed"] = True
            break
        finally:
            conn.close()
    except sqlite3.Error as exc:
        out["error"] = str(exc)
        time.sleep(0.5 * (attempt + 1))
print(json.dumps(out))
"""


def _sqlite_child(db: Path) -> tuple[set[str] | None, bool]:
    """The segment ids Chroma's file owns, and whether VACUUM ran; both done in a child process."""
    try:
        done = subprocess.run([sys.executable, "-c", _CHILD, str(db)], capture_output=True, text=True,
                              timeout=600, check=True)
        out = json.loads(done.stdout)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        log.warning("chroma compaction did not run (%s); freed pages of %s keep their bytes for now", exc, db)
        return None, False
    if not out["vacuumed"]:
        log.warning("chroma VACUUM did not run (%s); freed pages of %s keep their bytes until the next compaction",
                    out["error"], db)
    return (set(out["owned"]) if out["owned"] is not None else None), bool(out["vacuumed"])


def compact(root: Path, scrubber: Scrubber) -> dict:
    """Remove segment directories no collection owns, VACUUM ``chroma.sqlite3``, scrub every live index's
    unused slots. The caller holds every Chroma call of this process off meanwhile."""
    removed = 0
    owned, vacuumed = _sqlite_child(root / "chroma.sqlite3")
    if owned is not None:
        for d in segment_dirs(root):
            if d.name not in owned:
                shutil.rmtree(d, ignore_errors=True)
                removed += 1
    scrubbed = scrubber.run(force=True)
    return {"orphan_dirs": removed, "vacuumed": vacuumed, "scrubbed_bytes": scrubbed}


__all__ = ["SEGMENT_DIR_RE", "Scrubber", "compact", "scrub_segment", "segment_dirs", "unused_bytes"]
