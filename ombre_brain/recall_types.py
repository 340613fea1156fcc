"""Plain data passed between the stages of the read pipeline.

    plan_query -> candidates -> layers and gates -> diffusion -> render -> budget -> sections

Each stage takes these objects and returns new ones; the gateway injects them and the debug
routes serialise the very same objects, so nothing is ever recomputed for display.
No I/O lives here.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .buckets import Bucket, Moment
from .config import LayerPolicy
from .text import is_cjk_text


@dataclass(frozen=True)
class QueryPlan:
    """What plan_query decided about the query itself (design §5)."""

    context_mode: str = "casual"
    explicit_recent: bool = False
    explicit_old: bool = False
    just_now: bool = False
    detail_request: bool = False
    favorite_request: bool = False
    wants_body_chain: bool = False
    enforce_topic_evidence: bool = True
    allow_caution_diffusion: bool = False
    skip_reason: str | None = None
    terms: tuple[str, ...] = ()
    # Not part of the §11 plan object, but used by later stages and shown in debug.
    query: str = ""
    normalized: str = ""
    memory_lookup: bool = False
    check_in: bool = False
    anchors: tuple[str, ...] = ()          # quoted strings, names, numbers: exact-match anchors
    query_valence: float | None = None     # from cue words, for dream resonance (None when unknown)
    query_arousal: float | None = None
    anaphoric: bool = False                # "那天晚上", "that night": the message points back into the conversation
    topic: tuple[tuple[str, float], ...] = ()          # recent user messages heard with it, (text, weight)
    context_terms: tuple[tuple[str, float], ...] = ()  # their terms, (term, weight), for retrieval and admission
    carried: str | None = None             # a context mode carried over from the conversation (e.g. memory_lookup)
    cjk: bool | None = None                # the message's script, decided once by plan_query (None: a hand-made plan)
    asks: bool = False                     # the message is a question (?, 吗, what …): not something said in passing

    @property
    def unasked(self) -> bool:
        """Recall for this message would be unasked: it neither looks up the past nor asks anything."""
        return self.context_mode != "memory_lookup" and not self.asks

    @functools.cached_property
    def topic_terms(self) -> tuple[str, ...]:
        """The terms topic evidence looks for in a memory (two characters or more), lower-cased once per plan:
        Recent Context tests up to 200 memories a turn. Kept on the plan, so a purge forgets it with the plans."""
        return tuple(t.lower() for t in self.terms if len(t) >= 2)

    @property
    def query_is_cjk(self) -> bool:
        """Whether the message is written in CJK: fusion's dense weight, the second opinion's lane and admission's
        script features all read this one decision."""
        return self.cjk if self.cjk is not None else is_cjk_text(self.query or self.normalized)

    def to_dict(self) -> dict:
        """The §11 plan object: exactly these keys."""
        return {
            "context_mode": self.context_mode, "explicit_recent": self.explicit_recent,
            "explicit_old": self.explicit_old, "just_now": self.just_now,
            "detail_request": self.detail_request, "favorite_request": self.favorite_request,
            "wants_body_chain": self.wants_body_chain, "enforce_topic_evidence": self.enforce_topic_evidence,
            "allow_caution_diffusion": self.allow_caution_diffusion, "skip_reason": self.skip_reason,
            "terms": list(self.terms),
        }

    def debug_dict(self) -> dict:
        d = self.to_dict()
        d.update(query=self.query, normalized=self.normalized, memory_lookup=self.memory_lookup,
                 check_in=self.check_in, anchors=list(self.anchors), anaphoric=self.anaphoric, asks=self.asks,
                 topic=[{"text": t, "weight": round(w, 3)} for t, w in self.topic],
                 context_terms=[{"term": t, "weight": round(w, 3)} for t, w in self.context_terms],
                 carried=self.carried)
        return d


@dataclass(frozen=True)
class LayerDecision:
    """Which layer a bucket belongs to and why; `layer_debug` is this object serialised."""

    layer: str
    signals: tuple[str, ...]
    writer_hint: dict
    policy: LayerPolicy

    def to_dict(self) -> dict:
        return {"layer": self.layer, "writer_hint": dict(self.writer_hint), "signals": list(self.signals),
                "policy": self.policy.to_dict()}


@dataclass(frozen=True)
class GateResult:
    """One gate's verdict on one item: allowed (true, false, or None when it does not apply) and why.

    ``weight`` multiplies the item's rank score (the cooldown's multiplier while an item cools); it only
    reorders, it never blocks, and it is not part of the serialised verdict.
    """

    allowed: bool | None
    reason: str
    detail: dict | None = None  # e.g. the direct seed's admission evidence and features
    weight: float = field(default=1.0, compare=False)

    def to_dict(self) -> dict:
        d = {"allowed": self.allowed, "reason": self.reason}
        if self.detail:
            d.update(self.detail)
        return d


NOT_APPLICABLE = GateResult(None, "not_applicable")


@dataclass(frozen=True)
class RuntimeGate:
    """Every registered gate's verdict on one item this turn, in precedence order, plus the final decision
    (design §5). Built by the gate registry (``turn/gate_table.py``), which puts every gate in ``gates``."""

    gates: dict[str, GateResult]
    decision: str = "suppressed"  # injected | suppressed
    section: str | None = None
    reason: str = ""

    def to_dict(self) -> dict:
        d: dict[str, Any] = {name: g.to_dict() for name, g in self.gates.items()}
        d.update(decision=self.decision, section=self.section, reason=self.reason)
        return d

    def with_gate(self, name: str, result: GateResult) -> RuntimeGate:
        gates = dict(self.gates)
        gates[name] = result
        return RuntimeGate(gates, self.decision, self.section, self.reason)

    def decide(self, decision: str, section: str | None, reason: str) -> RuntimeGate:
        # the constructor, not dataclasses.replace: a turn decides about 75 items, and replace costs four times as much
        return RuntimeGate(self.gates, decision, section, reason)


@dataclass(frozen=True)
class MomentHit:
    """One moment found by search, with its per-channel scores (raw and normalised)."""

    moment: Moment
    vector_score: float | None = None      # cosine similarity (None: not in the vector top-k)
    lexical_score: float | None = None     # raw BM25 (None: not in the lexical top-k)
    vector_norm: float = 0.0
    lexical_norm: float = 0.0
    anchor_hit: bool = False
    fused: float = 0.0

    def to_dict(self) -> dict:
        return {"moment_id": self.moment.id, "section": self.moment.section,
                "context_only": self.moment.context_only, "vector_score": self.vector_score,
                "lexical_score": self.lexical_score, "vector_norm": round(self.vector_norm, 4),
                "lexical_norm": round(self.lexical_norm, 4), "anchor_hit": self.anchor_hit,
                "fused": round(self.fused, 4)}


@dataclass(frozen=True)
class Admission:
    """Whether a candidate has topic evidence for a direct hit, and which."""

    admitted: bool
    reason: str  # e.g. term_in_title, semantic_above_threshold, weak_term_coverage, context_only_match
    matched_terms: tuple[str, ...] = ()
    semantic_score: float | None = None
    coverage: float | None = None    # share of the query's term weight the bucket's evidence text covers
    evidence: float | None = None    # the calibrated probability that this is a wanted memory (design §13)
    features: dict | None = None     # what the evidence was computed from
    aligned: tuple[tuple[str, str, float], ...] = ()  # (asked term, closest memory word, cosine)
    script_rank: int | None = None   # its rank among the candidates written in its script (weighed: <= max_rank)
    dictionary: tuple[tuple[str, str, str], ...] = ()  # (asked term, memory word, "dict" | "conflict")
    threshold: float | None = None   # the very threshold the evidence was held against (with the evidence)
    threshold_name: str | None = None  # which: admit, admit_cjk, admit_cross_script, admit_unasked or a reader bar
    routed: str | None = None        # with the reader's verdict: what the routes alone said (term_in_title, …)

    def to_dict(self) -> dict:
        d = {"admitted": self.admitted, "reason": self.reason, "matched_terms": list(self.matched_terms),
             "semantic_score": self.semantic_score,
             "coverage": None if self.coverage is None else round(self.coverage, 4)}
        if self.script_rank is not None:
            d["script_rank"] = self.script_rank
        if self.evidence is not None:
            d.update(evidence=self.evidence, features=dict(self.features or {}),
                     aligned=[{"term": t, "word": w, "cosine": c} for t, w, c in self.aligned])
            if self.threshold is not None:
                d.update(threshold=self.threshold, threshold_name=self.threshold_name)
            if self.routed is not None:
                d["routed"] = self.routed
        if self.dictionary:  # shown with a refusal too: dictionary_conflict says which words met
            d["dictionary"] = [{"term": t, "word": w, "kind": k} for t, w, k in self.dictionary]
        return d

    def summary(self, message: str | None = None) -> str:
        """One line for people: 'evidence 0.43 < 0.63 cross-script — lexical 0.00, dense z 3.4, aligned beach→海边 0.62,
        beach→海边 (dict)' (the score, the threshold it was held against, its features and the dictionary's pairs);
        for the reader's verdict 'reader 0.91 ≥ 0.60: answers `我家狗叫啥`' (``message``: the turn's).

        The threshold shown is the one admission compared the evidence with (never recomputed here).
        """
        pairs = " ".join(f"{t}→{w} ({k})" for t, w, k in self.dictionary)
        if self.evidence is None:
            return f"{self.reason}: {pairs}" if pairs else self.reason
        if self.threshold_name in READER_BARS:
            return self._reader_summary(message)
        f = self.features or {}
        head = evidence_verdict(self.evidence, self.threshold, self.threshold_name)
        parts = [f"lexical {f.get('lexical', 0.0):.2f}", f"dense z {f.get('dense_z', 0.0):.1f}"]
        if f.get("cross_script") and self.threshold_name != "admit_cross_script":
            parts.append("cross-script")
        if self.aligned:
            parts.append("aligned " + " ".join(f"{t}→{w or '?'} {c:.2f}" for t, w, c in self.aligned))
        if pairs:
            parts.append(pairs)
        return f"{head} — " + ", ".join(parts)


    def _reader_summary(self, message: str | None) -> str:
        p, bar, veto = self.evidence or 0.0, self.threshold or 0.0, (self.features or {}).get("veto")
        said = f"`{message}`" if message else "the message"
        head = evidence_verdict(p, bar, self.threshold_name)
        if self.reason == "reader_other_person":
            return f"{head}: {said} asks about someone else than the person this memory is about"
        if self.reason == "reader_seconds":
            return f"{head}: admitted on its words ({self.routed}); the reader does not object (≥ veto {veto:.2f})"
        if self.reason == "reader_vetoes":
            return f"{head}: does not answer {said}; its words alone ({self.routed}) would have admitted it (< veto " \
                   f"{veto:.2f})"
        return f"{head}: {'answers' if self.admitted else 'does not answer'} {said}"


READER_BARS = ("reader", "reader_unasked")
"""The thresholds that are the reader's (design §25): its probability, not the admission model's evidence."""

THRESHOLD_LABELS = {"admit": "", "admit_cjk": " CJK", "admit_cross_script": " cross-script",
                    "admit_unasked": " unasked", "reader": "", "reader_unasked": " unasked"}
"""How :meth:`Admission.summary` names the threshold the evidence met (``admit`` needs no name)."""


def evidence_verdict(evidence: float, threshold: float | None, name: str | None) -> str:
    """'evidence 0.43 < 0.63 cross-script': the score beside the threshold it was held against, as recorded ('reader
    0.12 < 0.60' where the score is the reader's probability)."""
    head = f"{'reader' if name in READER_BARS else 'evidence'} {evidence:.2f}"
    if threshold is None:
        return head
    return f"{head} {'≥' if evidence >= threshold else '<'} {threshold:.2f}{THRESHOLD_LABELS.get(name or '', '')}"


@dataclass(frozen=True)
class Candidate:
    """A bucket that search found this turn: its best moment, scores and admission."""

    bucket: Bucket
    best: MomentHit                           # the best non-context-only hit, else the best hit
    hits: tuple[MomentHit, ...]               # every moment hit of this bucket, best first
    fused: float                              # bucket score (best hit's fused)
    rank: int = 0
    admission: Admission = Admission(False, "not_evaluated")

    @property
    def bucket_id(self) -> str:
        return self.bucket.id

    def to_dict(self) -> dict:
        return {"bucket_id": self.bucket.id, "title": self.bucket.title, "rank": self.rank,
                "fused": round(self.fused, 4), "best_moment": self.best.to_dict(),
                "vector_score": self.best.vector_score, "lexical_score": self.best.lexical_score,
                "hits": [h.to_dict() for h in self.hits], "admission": self.admission.to_dict()}


@dataclass(frozen=True)
class PathStep:
    from_id: str
    to_id: str
    relation: str
    confidence: float
    activation: float

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class DiffusionHit:
    """A related bucket reached from a direct seed along edges."""

    bucket_id: str
    seed_id: str
    activation: float
    path: tuple[PathStep, ...]
    reliable_chain: bool = False   # two or more steps, each reliable: rendered as a chain bundle

    def to_dict(self) -> dict:
        return {"bucket_id": self.bucket_id, "seed_id": self.seed_id, "activation": round(self.activation, 4),
                "path": [p.to_dict() for p in self.path], "reliable_chain": self.reliable_chain}


@dataclass(frozen=True)
class Edge:
    from_id: str
    to_id: str
    relation: str
    confidence: float

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class SessionState:
    """What the gates may know about the session (read from the ledger before the turn)."""

    space: str
    session: str
    now: datetime
    round: int = 0                                   # this turn's round number (1-based)
    injected: dict[str, tuple[int, str]] = field(default_factory=dict)  # bucket_id -> (round, iso time) last injected
    shown_in: dict[str, str] = field(default_factory=dict)  # bucket_id -> the section it was last injected in
    last_seen: datetime | None = None                # the space's previous turn, any session
    recent_context_fired_at: datetime | None = None  # this session's last automatic Recent Context
    dry_run: bool = False


@dataclass(frozen=True)
class Item:
    """One entry of a section, as the TURN object shows it (design §11)."""

    bucket_id: str | None
    moment_id: str | None
    shape: str
    text: str
    layer: str | None
    layer_debug: dict | None
    runtime_gate: dict | None
    rank_score: float = 0.0
    extra: dict = field(default_factory=dict)     # e.g. diffusion path, resonance scores

    def to_dict(self) -> dict:
        d = {"bucket_id": self.bucket_id, "moment_id": self.moment_id, "shape": self.shape, "text": self.text,
             "layer": self.layer, "layer_debug": self.layer_debug, "runtime_gate": self.runtime_gate}
        d.update(self.extra)
        return d


@dataclass(frozen=True)
class SectionOut:
    key: str
    title: str
    items: tuple[Item, ...]

    def to_dict(self) -> dict:
        return {"key": self.key, "title": self.title, "items": [i.to_dict() for i in self.items]}


@dataclass(frozen=True)
class Suppressed:
    bucket_id: str
    layer: str
    reason: str
    layer_debug: dict
    runtime_gate: dict

    def to_dict(self) -> dict:
        # Shallow, like Item.to_dict: dataclasses.asdict deep-copies both dicts, ~9 ms a turn at 30 items.
        return {"bucket_id": self.bucket_id, "layer": self.layer, "reason": self.reason,
                "layer_debug": self.layer_debug, "runtime_gate": self.runtime_gate}
