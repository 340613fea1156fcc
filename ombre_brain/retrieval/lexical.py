"""jieba tokenisation and BM25 over the moments of one space.

Lexical evidence is what carries Chinese when the embedder is English-only, and what proves a
topic when vectors only say "similar" (design §5, §12). Tokens come from one function,
``tokenize``, for moments and queries alike, so the index and the query plan always agree on
what a term is. Scoring is bm25s with its own tokeniser bypassed: we hand it token ids and a
vocabulary, and read raw scores instead of calling ``retrieve()``, which spends ~13 ms on an
argpartition over mostly-zero scores (§12).
"""

from __future__ import annotations

import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

import bm25s
import jieba
import numpy as np

from ..text import HAN, normalize

# bm25s sets its logger to DEBUG and jieba adds a DEBUG stderr handler at import; either would
# print index-building chatter into server logs.
logging.getLogger("bm25s").setLevel(logging.WARNING)
jieba.setLogLevel(logging.WARNING)

K1 = 1.5  # bm25s defaults, "lucene" variant; the reference test pins the same numbers
B = 0.75
ANSWERS = 64  # searches whose answers an index keeps until it changes

# Han ideographs go to jieba; everything else (Latin, digits, kana, hangul) is split into words.
_HAN_SPLIT_RE = re.compile(f"([{HAN}]+)")
_WORD_RE = re.compile(r"\d+(?:\.\d+)+|[^\W_]+(?:'[^\W_]+)*")

_jieba_lock = threading.Lock()
_jieba_ready = False


def init_jieba(cache_dir: Path | None = None) -> None:
    """Load jieba's dictionary now, caching it in ``cache_dir`` instead of the shared /tmp.

    Loading takes ~0.6 s, so doing it at startup keeps it off the first turn. The cache location
    only matters before jieba first initialises; later calls are no-ops.
    """
    global _jieba_ready
    with _jieba_lock:
        if _jieba_ready:
            return
        if cache_dir is not None and not jieba.dt.initialized:
            cache_dir = Path(cache_dir)
            cache_dir.mkdir(parents=True, exist_ok=True)
            jieba.dt.tmp_dir = str(cache_dir)
            jieba.dt.cache_file = "jieba.cache"  # relative: jieba joins it onto tmp_dir
        jieba.setLogLevel(logging.WARNING)
        jieba.initialize()
        _jieba_ready = True


@lru_cache(maxsize=16)
def _normalised_stops(stop_words: frozenset[str]) -> frozenset[str]:
    return frozenset(_normalise(w).strip() for w in stop_words)


_normalise = normalize  # NFKC folds full-width letters and digits (ＡＢＣ１２) into ASCII, as users type both


@lru_cache(maxsize=65536)
def names_a_thing(term: str) -> bool:
    """Does a Chinese term name a thing (jieba tags it a noun: a person, an animal, a place, an object)? A term with
    no Chinese is taken as one (the dictionary reads English words through their headwords).
    Only such a term is what a near miss swaps (my sister for my brother): an adjective, a verb or a
    time word ("特别", "期待", "晚上") never conflicts (design §18)."""
    if not re.search(f"[{HAN}]", term):
        return True
    flag = _tag_of(term)
    return flag is not None and flag.startswith("n")


@lru_cache(maxsize=65536)
def names_a_time(term: str) -> bool:
    """Does a Chinese term name a time or an amount (jieba tags it ``t`` or ``m``: 周三, 晚上, 几年, 半年)? Two such
    words meeting in the dictionary (几年/去年, 周三/Thursday) say nothing about which memory is meant."""
    if not re.search(f"[{HAN}]", term):
        return False
    flag = _tag_of(term)
    return flag is not None and flag[:1] in ("t", "m")


def pos_tags(text: str) -> list[tuple[str, str]]:
    """(word, part-of-speech flag) for each word jieba cuts ``text`` into (``nr`` a person, ``ns`` a place, ``eng``
    Latin letters…), under the lock every jieba call here takes."""
    import jieba.posseg as posseg

    if not _jieba_ready:
        init_jieba(None)
    with _jieba_lock:
        return [(p.word, p.flag) for p in posseg.lcut(text)]


def _tag_of(term: str) -> str | None:
    """jieba's part-of-speech tag of a one-word term: from its dictionary's tag table when it lists the word (one
    lookup; the dictionary bridge asks this of every headword an English word names), else by cutting it (a word the
    table lacks is tagged by the HMM); None when it cuts into more than one word."""
    import jieba.posseg as posseg

    flag = posseg.dt.word_tag_tab.get(term)
    if flag is not None:
        return flag
    with _jieba_lock:
        pairs = posseg.lcut(term)
    return pairs[0].flag if len(pairs) == 1 else None


def everyday_words(words, min_count: int = 100) -> list[str]:
    """Those of ``words`` jieba's dictionary counts at least ``min_count`` times: the everyday Chinese words memories
    and messages are cut into (:mod:`.word_table` encodes them once)."""
    if not _jieba_ready:
        init_jieba(None)
    return [w for w in words if (jieba.get_FREQ(w) or 0) >= min_count]


def tokenize(text: str, stop_words: frozenset[str] = frozenset()) -> list[str]:
    """Terms of a text, in order and with repeats (BM25 needs term frequency).

    Text is NFKC-normalised and lowercased. Runs of Han characters are cut by jieba in search
    mode, which adds the shorter words inside a long one (重庆火锅 -> 重庆, 火锅, 重庆火锅), so a
    query for either part finds the whole. Other text splits into words of letters, digits and
    inner apostrophes (don't); decimal numbers stay whole. Stop words, punctuation and
    whitespace are dropped. The result depends only on the text and the stop words.
    """
    if not text:
        return []
    if not _jieba_ready:
        init_jieba(None)
    stops = _normalised_stops(frozenset(stop_words)) if stop_words else frozenset()
    out: list[str] = []
    for i, piece in enumerate(_HAN_SPLIT_RE.split(_normalise(text))):
        if not piece:
            continue
        words = jieba.cut_for_search(piece) if i % 2 else _WORD_RE.findall(piece)
        for w in words:
            w = w.strip()
            if w and w not in stops and any(ch.isalnum() for ch in w):
                out.append(w)
    return out


def lucene_idf(df: int, n_docs: int) -> float:
    """BM25 idf as bm25s computes it for method "lucene": never negative, even for common terms."""
    return float(np.log(1.0 + (n_docs - df + 0.5) / (df + 0.5)))


class LexicalIndex:
    """BM25 over the moments of ONE space, built from (moment_id, tokens) rows.

    bm25s cannot add to a built index, and rebuilding costs ~15 ms per 1,000 moments, so a
    write must not force one: moments added or replaced since the last build live in a small
    *delta* scored directly with the same BM25 formula and the snapshot's statistics, removed
    ones are masked out, and the snapshot is rebuilt only when the delta outgrows
    ``delta_limit`` (default: 256 or 5% of the space). Document frequencies are kept
    incrementally, so ``doc_freq`` and ``idf`` are always current. A search reads an immutable
    snapshot and runs without the lock.
    """

    def __init__(self, rows: Iterable[tuple[str, Sequence[str]]] = (), *, delta_limit: int | None = None) -> None:
        self._lock = threading.RLock()
        self._vocab: dict[str, int] = {}
        self._docs: dict[str, tuple[int, ...]] = {}
        self._df: dict[int, int] = {}
        self._snapshot: _Snapshot | None = None
        self._delta: dict[str, tuple[int, ...]] = {}   # added or replaced since the snapshot
        self._masked: set[str] = set()                  # snapshot docs removed or replaced since
        self._delta_limit = delta_limit
        self._rebuild = True
        # the last searches' answers, until the index changes: a conversation's earlier messages are searched again
        # turn after turn at their lower weights (two searches in three, in the bench's conversations)
        self._answers: OrderedDict[tuple, tuple[tuple[str, float], ...]] = OrderedDict()
        self._generation = 0
        self.add(rows)
        self._rebuild = True

    # ------------------------------------------------------------ writes

    def add(self, rows: Iterable[tuple[str, Sequence[str]]]) -> None:
        """Add or replace moments by id."""
        with self._lock:
            vocab = self._vocab
            for moment_id, tokens in rows:
                old = self._docs.get(moment_id)
                if old is not None:
                    self._count(old, -1)
                doc = tuple(vocab.setdefault(t, len(vocab)) for t in tokens)
                self._docs[moment_id] = doc
                self._count(doc, +1)
                self._delta[moment_id] = doc
                if self._snapshot is not None and moment_id in self._snapshot.pos:
                    self._masked.add(moment_id)
            self._changed()

    def remove(self, moment_ids: Iterable[str]) -> None:
        """Forget moments; unknown ids are ignored, so a purge can be replayed."""
        with self._lock:
            for moment_id in moment_ids:
                old = self._docs.pop(moment_id, None)
                if old is not None:
                    self._count(old, -1)
                    self._delta.pop(moment_id, None)
                    if self._snapshot is not None and moment_id in self._snapshot.pos:
                        self._masked.add(moment_id)
            self._changed()

    def _changed(self) -> None:
        """After every add and remove: kept answers go, and a delta past its limit asks for a rebuild."""
        self._generation += 1  # every change to the moments: a kept answer may no longer be the search's
        self._answers.clear()
        limit = self._delta_limit if self._delta_limit is not None else max(256, len(self._docs) // 20)
        if self._snapshot is None or len(self._delta) + len(self._masked) > limit:
            self._rebuild = True

    def _count(self, doc: tuple[int, ...], delta: int) -> None:
        df = self._df
        for t in set(doc):
            n = df.get(t, 0) + delta
            if n > 0:
                df[t] = n
            else:
                del df[t]

    # ------------------------------------------------------------ reads

    def __len__(self) -> int:
        return len(self._docs)

    def __contains__(self, moment_id: object) -> bool:
        return moment_id in self._docs

    def ids(self) -> list[str]:
        """The moment ids the index holds (doctor compares them with the ledger)."""
        with self._lock:
            return list(self._docs)

    def doc_freq(self, term: str) -> int:
        """How many moments contain the term."""
        with self._lock:
            tid = self._vocab.get(term)
            return 0 if tid is None else self._df.get(tid, 0)

    def idf(self, term: str) -> float:
        """The term's BM25 idf in this space; 0.0 for a term no moment contains (it cannot score)."""
        with self._lock:
            df, n = self.doc_freq(term), len(self._docs)
        return lucene_idf(df, n) if df else 0.0

    def search(self, query_tokens: Sequence[str], k: int) -> list[tuple[str, float]]:
        """The k best moments as (moment_id, bm25 score), best first, only scores above zero.

        A repeated query term counts once. Ties are broken by moment id, so results are stable. The answer is kept
        until the index next changes (``ANSWERS`` of them): the same terms and k give the very same list.
        """
        if k <= 0 or not query_tokens:
            return []
        key = (tuple(dict.fromkeys(query_tokens)), k)
        with self._lock:
            kept = self._answers.get(key)
            if kept is not None:
                self._answers.move_to_end(key)
                return list(kept)
            generation = self._generation
        found = self._search(key[0], k)
        with self._lock:
            if generation == self._generation:
                self._answers[key] = tuple(found)
                while len(self._answers) > ANSWERS:
                    self._answers.popitem(last=False)
        return found

    def _search(self, query_tokens: tuple[str, ...], k: int) -> list[tuple[str, float]]:
        with self._lock:
            snap = self._current()
            delta = dict(self._delta)
            masked = set(self._masked)
            vocab = self._vocab
            qterms = [vocab[t] for t in query_tokens if t in vocab]
        scored: list[tuple[float, str]] = []
        if snap is not None:
            term_ids = [snap.vocab[t] for t in query_tokens if t in snap.vocab]
            if term_ids:
                scores = snap.retriever.get_scores(term_ids)
                if masked:
                    scores = scores.copy()
                    scores[[snap.pos[m] for m in masked if m in snap.pos]] = 0.0
                hits = np.flatnonzero(scores > 0)
                if hits.size > k:
                    kth = np.partition(scores[hits], hits.size - k)[hits.size - k]
                    hits = hits[scores[hits] >= kth]
                scored += [(float(scores[i]), snap.ids[i]) for i in hits]
        if delta and qterms:
            scored += self._score_delta(delta, qterms, snap)
        scored.sort(key=lambda x: (-x[0], x[1]))
        return [(m, sc) for sc, m in scored[:k]]

    def _score_delta(self, delta: dict[str, tuple[int, ...]], qterms: list[int],
                     snap: _Snapshot | None) -> list[tuple[float, str]]:
        """BM25 for moments added since the snapshot, with the snapshot's N and average length."""
        n = snap.n_docs if snap is not None else max(len(self._docs), 1)
        avgdl = snap.avgdl if snap is not None else 1.0
        with self._lock:
            idf = {t: lucene_idf(self._df.get(t, 0), max(n, 1)) for t in qterms if self._df.get(t, 0)}
        out = []
        wanted = set(idf)
        for moment_id, doc in delta.items():
            if not wanted.intersection(doc):
                continue
            dl = len(doc)
            score = 0.0
            for t in wanted:
                tf = doc.count(t)
                if tf:
                    score += idf[t] * tf * (K1 + 1) / (tf + K1 * (1 - B + B * dl / avgdl))
            if score > 0:
                out.append((score, moment_id))
        return out

    # ------------------------------------------------------------ build

    def _current(self) -> _Snapshot | None:
        with self._lock:
            if self._rebuild:
                self._snapshot = self._build()
                self._delta.clear()
                self._masked.clear()
                self._rebuild = False
            return self._snapshot

    def _build(self) -> _Snapshot | None:
        if len(self._vocab) > 2 * len(self._df) + 1024:
            self._compact()
        if not self._df:
            return None
        ids = sorted(self._docs)
        retriever = bm25s.BM25(k1=K1, b=B, method="lucene", csc_backend="auto")
        # Token ids plus vocabulary: bm25s's own tokeniser never runs. The vocabulary may hold
        # terms no live moment uses; their columns are simply empty.
        retriever.index(([list(self._docs[i]) for i in ids], dict(self._vocab)),
                        create_empty_token=False, show_progress=False)
        total = sum(len(self._docs[i]) for i in ids)
        return _Snapshot(retriever, tuple(ids), retriever.vocab_dict, {m: i for i, m in enumerate(ids)}, len(ids),
                         total / max(len(ids), 1))

    def _compact(self) -> None:
        """Renumber terms after many removals, so dead terms stop costing memory and build time."""
        old_names = {tid: term for term, tid in self._vocab.items()}
        remap = {tid: n for n, tid in enumerate(sorted(self._df))}
        self._vocab = {old_names[tid]: n for tid, n in remap.items()}
        self._docs = {m: tuple(remap[t] for t in doc) for m, doc in self._docs.items()}
        self._df = {remap[tid]: c for tid, c in self._df.items()}


class _Snapshot(NamedTuple):
    """An index as of one rebuild; never mutated, so searches share it without a lock."""

    retriever: bm25s.BM25
    ids: tuple[str, ...]  # a tuple: out of the garbage collector's rounds once seen, as a list never is
    vocab: dict[str, int]
    pos: dict[str, int]
    n_docs: int
    avgdl: float


__all__ = ["LexicalIndex", "init_jieba", "lucene_idf", "pos_tags", "tokenize"]


_GENERAL_IDF: tuple[dict[str, float], float] | None = None
_GENERAL_LOCK = threading.Lock()


def general_idf(term: str) -> float:
    """How specific a word is in the language at large (jieba's bundled IDF table).

    A space's own IDF says little in a small store, where every word is rare; the general
    table knows that 名字 or 样子 are everyday words and 鹦鹉 or 年糕 are not. Words it
    does not list get its median, i.e. they count as fairly specific.
    """
    global _GENERAL_IDF
    if _GENERAL_IDF is None:
        with _GENERAL_LOCK:
            if _GENERAL_IDF is None:
                import jieba.analyse

                t = jieba.analyse.TFIDF()
                _GENERAL_IDF = (t.idf_freq, t.median_idf)
    table, median = _GENERAL_IDF
    return table.get(term, median)
