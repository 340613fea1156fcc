"""The reference background: how far a memory's cosine to a message stands above ordinary memories'.

A raw cosine says little (e5-small scores unrelated text around 0.8); what says a memory is about
the message is how far its cosine stands above the message's cosines to memories that are not.
Measured against the user's own store, that standing depends on the store: a store of one memory
has no background at all, and a young store's few memories are all that a message is compared to.
So admission measures it against a fixed reference instead: about 2,400 ordinary memories written
for this purpose (``background/memories_zh.txt`` and ``memories_en.txt``, every common topic of a
companion chat, none from an evaluation set), embedded once per encoder. The same message and
memory then get the same standing in a store of 1, 30 or 10,000 memories (docs/design.md §13, §17).

The vectors of the encoders we ship (e5-small, USE v3, MiniLM) ship with the package
(``background/<model>.npz``, written by ``python -m ombre_brain.evaluate.background``). For an encoder a
user configures, the texts are embedded on first use and kept in the data directory
(``reference/<model>.npz``): the stated fallback, a one-time cost of some seconds.

Standing is measured within the memory's script: e5 and USE put a message nearer memories in its
own language, so a Chinese memory is compared with the Chinese reference and an English one with the
English reference. Pure apart from :func:`load_reference`'s file reads and writes.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

log = logging.getLogger("ombre_brain")

__all__ = ["MIN_STD", "Reference", "Standing", "load_reference", "reference_texts", "shipped_path"]

MIN_STD = 0.01
TOP = 32  # the reference's best cosines kept per script: a young store's competitors
TEXT_FILES = {True: "memories_zh.txt", False: "memories_en.txt"}  # script (CJK?) -> file
_LOCK = threading.Lock()
_LOADED: dict[tuple[str, str], Reference] = {}


@dataclass(frozen=True)
class Standing:
    """A message's cosines to the reference, per script: their mean and spread, and the best ``TOP`` of them.

    The best ones are the competitors every candidate meets whatever the store holds: a memory must stand above
    the closest ordinary memories of its script to be the one asked about, in a store of one memory as in a store
    of thousands (where the store's own candidates compete too)."""

    mean: dict[bool, float]
    std: dict[bool, float]
    top: dict[bool, tuple[float, ...]]

    def z(self, cos: float, cjk: bool) -> float:
        """How many spreads a cosine stands above the message's cosines to ordinary memories in that script."""
        return (cos - self.mean[cjk]) / max(self.std[cjk], MIN_STD)


class Reference:
    """One encoder's vectors of the reference memories, with each one's script."""

    def __init__(self, model_id: str, vectors: np.ndarray, cjk: np.ndarray) -> None:
        self.model_id = model_id
        self.vectors = np.asarray(vectors, dtype=np.float32)
        self.cjk = np.asarray(cjk, dtype=bool)
        self._rows = {script: self.vectors[self.cjk == script] for script in (True, False)}

    def __len__(self) -> int:
        return len(self.vectors)

    def standing(self, qvec: np.ndarray) -> Standing:
        """One matrix-vector product per script: the message's cosines to every reference memory."""
        q = np.asarray(qvec, dtype=np.float32)
        mean, std, top = {}, {}, {}
        for script, rows in self._rows.items():
            sims = rows @ q
            mean[script] = float(sims.mean())
            std[script] = float(sims.std())
            k = min(TOP, len(sims))
            top[script] = tuple(float(x) for x in np.sort(np.partition(sims, len(sims) - k)[len(sims) - k:])[::-1])
        return Standing(mean, std, top)


def _safe(model_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", model_id)


def shipped_path(model_id: str) -> Path:
    return Path(str(resources.files(__package__) / "background" / f"{_safe(model_id)}.npz"))


def reference_texts() -> tuple[list[str], list[bool]]:
    """The reference memories and whether each is written in CJK (which file it comes from)."""
    texts, cjk = [], []
    for script, name in TEXT_FILES.items():
        lines = (resources.files(__package__) / "background" / name).read_text(encoding="utf-8").splitlines()
        kept = [line.strip() for line in lines if line.strip()]
        texts += kept
        cjk += [script] * len(kept)
    return texts, cjk


def load_reference(model_id: str, encode: Callable[[Sequence[str]], np.ndarray],
                   data_dir: Path | None) -> Reference:
    """The encoder's reference: shipped, else cached in the data directory, else embedded now and cached there."""
    key = (model_id, str(data_dir))
    with _LOCK:
        hit = _LOADED.get(key)
    if hit is not None:
        return hit
    candidates = [shipped_path(model_id)]
    cache = data_dir / "reference" / f"{_safe(model_id)}.npz" if data_dir is not None else None
    if cache is not None:
        candidates.append(cache)
    ref = None
    for path in candidates:
        if path.exists():
            with np.load(path) as z:
                ref = Reference(model_id, z["vectors"], z["cjk"])
            break
    if ref is None:
        texts, cjk = reference_texts()
        log.warning("no shipped reference background for %s: embedding its %d memories once (kept in %s)",
                    model_id, len(texts), cache or "memory only")
        ref = Reference(model_id, np.asarray(encode(texts), dtype=np.float32), np.array(cjk))
        if cache is not None:
            cache.parent.mkdir(parents=True, exist_ok=True)
            np.savez_compressed(cache, vectors=ref.vectors.astype(np.float16), cjk=ref.cjk)
    with _LOCK:
        _LOADED[key] = ref
    return ref
