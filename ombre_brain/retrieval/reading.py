"""The reader's inputs for one turn (the I/O half of :mod:`.reader`): vectors and scalars of the weighed candidates.

Everything here is already at hand in the admission stage or one read away: the message's e5 and USE vectors (the
turn encoded both), the conversation's e5 vector (its messages were encoded on earlier turns), each weighed memory's
USE vector as a whole (read with the candidates' moments) and its e5 vector as a whole (the mean of its content
moments' stored vectors: one Chroma read for the handful of them). ``fit-reader`` builds its rows with this very
function, so training and serving read the same inputs.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from datetime import datetime

import numpy as np

from ..buckets import build_moments
from ..profile.frames import FrameReader
from ..recall_types import Candidate, QueryPlan
from ..store.interfaces import Search
from .answer_types import answer_type_features
from .asked import lexical_match
from .candidates import conversation_vector
from .features import candidate_features
from .reader import PairVectors, ReaderModel, extra_scalars, frame_pair, load_reader, row
from .second_opinion import memory_vector

log = logging.getLogger("ombre_brain")
MEMORY_SIDES = 4096  # memories whose names and frame a Reading keeps


def unit(v) -> np.ndarray:
    v = np.asarray(v, dtype=np.float32)
    n = float(np.linalg.norm(v))
    return v / n if n > 0 else v


def e5_wholes(store: Search, space: str, cands: Sequence[Candidate]) -> dict[str, np.ndarray]:
    """Each memory's e5 vector as a whole: the normalised mean of its content moments' stored vectors."""
    ids = {c.bucket.id: [m.id for m in build_moments(c.bucket) if not m.context_only] for c in cands}
    got = store.get_vectors(space, [m for ms in ids.values() for m in ms])
    out = {}
    for bid, ms in ids.items():
        v = memory_vector([np.asarray(got[m], dtype=np.float32) for m in ms if m in got])
        if v is not None:
            out[bid] = v
    return out


def reader_rows(store: Search, space: str, plan: QueryPlan, weighed: Sequence[Candidate], q, *, top_fused: float,
                feature_names: Sequence[str], use_wholes: Callable[[Sequence], dict[str, np.ndarray]],
                now: datetime | None, frames, message_frames: dict | None = None,
                memory_side: Callable[[str], tuple[dict, object]] | None = None) -> dict[str, np.ndarray]:
    """The reader's input row of each weighed candidate (bucket id → row), from the admission's query evidence
    ``q``. ``use_wholes`` gives memories' USE vectors as wholes (the Admitter's, read with the candidates).
    ``message_frames``, when given, receives the message's frame as read beside each memory (its names bound);
    ``memory_side(text)`` gives a memory's names and frame (:meth:`Reading.memory_side`, cached), else read here."""
    if not weighed:
        return {}
    emb, second = store.embedder, store.second
    query = plan.query or plan.normalized
    q_e5 = unit(emb.query(query))
    conv = unit(conversation_vector(emb.query, plan)) if plan.topic else q_e5
    q_use = second.query(query) if second is not None else np.zeros(512, dtype=np.float32)
    e5s = e5_wholes(store, space, weighed)
    uses = use_wholes([c.bucket for c in weighed]) if second is not None else {}
    zero_e5, zero_use = np.zeros_like(q_e5), np.zeros(len(q_use), dtype=np.float32)
    q_tokens = store.tokens(query)
    out, asked = {}, {}
    for c in weighed:
        b = c.bucket
        text = b.main_text or b.title
        if memory_side is not None:
            names, mf = memory_side(text)
        else:  # whose the memory is about, named in its own words ("my sister Anika"), and what it states
            names = dict(frames.bindings(text))
            mf = frames.read(text, store.tokens(text), names)
        key = frozenset(names.items())  # most memories bind no name: the message reads the same beside each of them
        qf = asked.get(key)
        if qf is None:
            qf = asked[key] = frames.read(query, q_tokens, names)
        if message_frames is not None:
            message_frames[b.id] = qf
        pair = frame_pair(qf, mf)
        m_e5, m_use = e5s.get(b.id, zero_e5), uses.get(b.id, zero_use)
        _matched, _first, coverage = lexical_match(c, q.asked)
        feats = candidate_features(c, q, coverage, feature_names)
        age = (now - b.created_dt()).total_seconds() / 86400 if now is not None else 0.0
        extra = extra_scalars(cos_context=float(conv @ m_e5), layer=b.memory_layer, age_days=age,
                              memory_chars=len(b.main_text or b.title), query_chars=len(query),
                              asks=not plan.unasked, anaphoric=plan.anaphoric, has_context=bool(plan.topic),
                              fused_share=c.fused / top_fused if top_fused > 0 else 0.0, fused_rank=c.rank,
                              query_cjk=plan.query_is_cjk, memory_cjk=bool(q.cjk.get(b.id)), frames=pair,
                              answer=answer_type_features(query, text))
        out[b.id] = row(feats, feature_names, extra, PairVectors(q_e5, m_e5, np.asarray(q_use, np.float32), m_use))
    return out


class Reading:
    """The reader at work in one store's admission stage: its model (or None, with the reason logged once), its
    bars, and each weighed candidate's probability for a turn."""

    def __init__(self, store: Search, config, use_wholes: Callable[[str, Sequence], dict[str, np.ndarray]]) -> None:
        self.store = store
        self.cfg = config
        self.use_wholes = use_wholes
        self._warned: set[str] = set()
        self.frames = FrameReader(config.gateway.profile)
        self._sides: OrderedDict[str, tuple[dict, object]] = OrderedDict()  # memory text -> (its names, its frame)
        self._lock = threading.Lock()

    def memory_side(self, text: str) -> tuple[dict, object]:
        """A memory's names and frame, read once per text (a weighed memory comes back turn after turn; reading it
        costs jieba and the cue patterns, about 0.3 ms): bounded, emptied by a purge (:meth:`clear_cache`)."""
        with self._lock:
            hit = self._sides.get(text)
            if hit is not None:
                self._sides.move_to_end(text)
                return hit
        names = dict(self.frames.bindings(text))
        hit = (names, self.frames.read(text, self.store.tokens(text), names))
        with self._lock:
            self._sides[text] = hit
            while len(self._sides) > MEMORY_SIDES:
                self._sides.popitem(last=False)
        return hit

    def clear_cache(self) -> None:
        """A purge: nothing read of a memory's words stays."""
        with self._lock:
            self._sides.clear()

    def model(self) -> ReaderModel | None:
        rc = self.cfg.retrieval.reader
        if rc.id is None:
            return None
        m = load_reader(rc.id, rc.path)
        want = {"e5": self.store.embedder.model_id, "use": self.store.second.model_id if self.store.second else None}
        if any(m.encoders.get(k) != v for k, v in want.items()):
            if rc.id not in self._warned:
                self._warned.add(rc.id)
                log.warning("reader %s was fitted on %s, the store reads with %s: admission without it", rc.id,
                            m.encoders, want)
            return None
        return m

    def bars(self, m: ReaderModel) -> tuple[float, float, float]:
        """(a lookup's bar, a statement's bar, the veto below which the reader refuses what a route admitted): the
        config's, else the model card's."""
        rc = self.cfg.retrieval.reader
        admit = rc.admit if rc.admit is not None else m.thresholds.get("admit", 0.5)
        unasked = rc.admit_unasked if rc.admit_unasked is not None else m.thresholds.get("admit_unasked", admit)
        return admit, max(admit, unasked), min(rc.veto, admit)

    def rows(self, space: str, plan: QueryPlan, found, q, weighed: Sequence[Candidate], feature_names: Sequence[str],
             now: datetime | None, message_frames: dict | None = None) -> dict[str, np.ndarray]:
        """The weighed candidates' input rows as :func:`reader_rows` reads them for this store (``fit-reader`` too)."""
        top = max((c.fused for c in found.candidates), default=0.0)
        return reader_rows(self.store, space, plan, weighed, q, top_fused=top, feature_names=feature_names,
                           use_wholes=lambda buckets: self.use_wholes(space, buckets), now=now, frames=self.frames,
                           message_frames=message_frames, memory_side=self.memory_side)

    def read(self, m: ReaderModel, space: str, plan: QueryPlan, found, q, weighed: Sequence[Candidate],
             now: datetime | None) -> tuple[dict[str, float], frozenset[str]]:
        """Each weighed candidate's calibrated probability that it answers the message, and the weighed memories
        about another person than the one the message asks about (``reader_other_person``), read from the same
        frames."""
        asked: dict = {}
        rows = self.rows(space, plan, found, q, weighed, m.feature_names, now, message_frames=asked)
        if not rows:
            return {}, frozenset()
        ids = list(rows)
        p = m.predict(np.stack([rows[i] for i in ids]))
        others = frozenset(c.bucket.id for c in weighed if c.bucket.id in asked
                           and self.frames.other_person(asked[c.bucket.id], c.bucket.main_text or c.bucket.title))
        return {bid: round(float(v), 6) for bid, v in zip(ids, p, strict=True)}, others


__all__ = ["Reading", "e5_wholes", "reader_rows", "unit"]
