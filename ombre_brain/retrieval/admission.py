"""Admission: may a candidate become a direct hit? One calibrated evidence score (design §13).

Ranking puts the right memory first; admission decides whether the companion sees it. For every
weighed candidate a small feature vector is computed from what the turn already has: lexical
coverage of what is asked, the dense cosine and its standing against the query's background and
the other candidates (among memories written in the candidate's script, :class:`Background`), both
channels' ranks, a script change, the second opinion's reading of the memory as a whole and a word
alignment. Each feature is one entry of the registry in :mod:`.features`, which says what it reads
and how it is computed.

``evidence = sigmoid(w · x + b)`` with one weight set per embedding model
(``retrieval.admission.models.<model id>``, fitted by ``ombre-brain calibrate``), over the features
that model was fitted on; a candidate is
admitted when its evidence reaches the model's ``admit`` threshold. A model without fitted weights
(any sentence-transformers model a user names) falls back to lexical-only admission: enough of
the query's terms written in the memory. Context-only moments (comments, affect anchors, favorite
reasons) are never admissible by themselves. Pure: scores and numbers in, Admission out.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from ..buckets import bucket_id_of
from ..config import AdmissionModel
from ..recall_types import Admission, Candidate
from .alignment import NONE as NO_ALIGNMENT
from .alignment import Alignment
from .asked import AskedTerms, admissible_texts, asked_terms, discriminative_terms, found, lexical_match
from .asked import clear_cache as _forget_texts
from .features import FEATURES, bucket_is_cjk, candidate_features
from .features import clear_cache as _forget_scripts

__all__ = ["FEATURES", "HARD_REFUSALS", "AskedTerms", "Background", "QueryEvidence", "admissible_texts", "admit",
           "asked_terms", "bucket_is_cjk", "candidate_features", "clear_cache", "discriminative_terms", "evidence_of",
           "found", "lexical_admits", "lexical_match", "memory_is_cjk", "query_evidence", "read_admission",
           "route_admission", "script_ranks", "threshold_for", "threshold_named"]

MIN_BACKGROUND_STD = 0.01
MIN_SCRIPT_BACKGROUND = 8  # sampled memories a script needs for a background of its own


def clear_cache() -> None:
    """Forget every per-text cache of admission: case-folded fields and scripts judged (a purge)."""
    _forget_texts()
    _forget_scripts()


# ---------------------------------------------------------------- dense evidence and the score


@dataclasses.dataclass(frozen=True)
class Background:
    """The query's cosines to a fixed sample of the space's moments: the level a cosine must stand above.

    In a space smaller than the sample, the sample holds the candidate itself; its own cosine is left
    out of its z-score, which would otherwise be deflated by about half a standard deviation.

    Where the sample mixes scripts, each script also has its own background (:meth:`within`): e5-small
    puts a question closer to memories in its own language than to equally relevant ones in the other
    (in tests/data/companion_mixed.yaml its mean cosine of an English question is 0.79 to the English
    memories and 0.75 to the Chinese ones; of a Chinese question, 0.85 and 0.77), so a Chinese memory's
    standing is measured against the Chinese memories, as in a store of one script, where the
    admission weights were fitted.
    """

    n: int
    s1: float
    s2: float
    by_moment: Mapping[str, float]
    by_script: Mapping[bool, Background] = dataclasses.field(default_factory=dict)

    @classmethod
    def of(cls, ids: Sequence[str], cosines: Sequence[float], cjk: Sequence[bool] | None = None) -> Background | None:
        if len(cosines) < 2:
            return None
        c = [float(x) for x in cosines]
        if len(ids) != len(c):
            raise ValueError(f"{len(ids)} moment ids but {len(c)} cosines")
        split = _split(tuple(ids), None if cjk is None else tuple(cjk))
        whole = cls(len(c), sum(c), sum(x * x for x in c), _Cosines(split.index, c))
        if cjk is None:
            return whole
        scripts = {}
        for script, (at, index) in split.scripts.items():
            kept = [c[i] for i in at]
            scripts[script] = (cls(len(kept), sum(kept), sum(x * x for x in kept), _Cosines(index, c))
                               if len(kept) >= 2 else None)
        return dataclasses.replace(whole, by_script=scripts)

    def within(self, cjk: bool) -> Background:
        """The background among moments of memories in this script (CJK or not); the whole one where that
        script has fewer than ``MIN_SCRIPT_BACKGROUND`` sampled memories or is the only one."""
        return self.by_script.get(cjk, self)

    @property
    def mean(self) -> float:
        return self.s1 / self.n

    def z(self, cos: float, moment_id: str | None = None) -> float:
        n, s1, s2 = self.n, self.s1, self.s2
        own = self.by_moment.get(moment_id) if moment_id is not None else None
        if own is not None and n > 2:
            n, s1, s2 = n - 1, s1 - own, s2 - own * own
        mean = s1 / n
        std = math.sqrt(max(s2 / n - mean * mean, 0.0))
        return (cos - mean) / max(std, MIN_BACKGROUND_STD)


class _Cosines(Mapping):
    """A background's cosine by moment id, read through the sample's index: the same mapping as a dict of them,
    without building one per query."""

    __slots__ = ("_index", "_values")

    def __init__(self, index: Mapping[str, int], values: Sequence[float]) -> None:
        self._index, self._values = index, values

    def __getitem__(self, moment_id: str) -> float:
        return self._values[self._index[moment_id]]

    def get(self, moment_id, default=None):
        i = self._index.get(moment_id)
        return default if i is None else self._values[i]

    def __iter__(self):
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)


@dataclasses.dataclass(frozen=True)
class _Split:
    index: dict[str, int]                                       # moment id -> its place in the sample
    scripts: dict[bool, tuple[tuple[int, ...], dict[str, int]]]  # script -> (its places, its ids' places)


@lru_cache(maxsize=16)
def _split(ids: tuple[str, ...], cjk: tuple[bool, ...] | None) -> _Split:
    """Where each sampled moment sits, and which scripts have a background of their own (MIN_SCRIPT_BACKGROUND
    sampled memories, beside another script): the same for every query against one sample, so worked out once.
    Keyed by moment ids and flags, never text."""
    index = {m: i for i, m in enumerate(ids)}
    scripts = {}
    if cjk is not None:
        if len(cjk) != len(ids):
            raise ValueError(f"{len(ids)} moment ids but {len(cjk)} script flags")
        for script in (True, False):
            at = tuple(i for i, k in enumerate(cjk) if k == script)
            memories = {bucket_id_of(ids[i]) for i in at}
            if len(memories) >= MIN_SCRIPT_BACKGROUND and len(at) < len(ids):
                scripts[script] = (at, {ids[i]: i for i in at})
    return _Split(index, scripts)


@dataclasses.dataclass(frozen=True)
class QueryEvidence:
    """What admission needs to know about the query and the whole candidate list, worked out once."""

    asked: AskedTerms
    query_is_cjk: bool
    background: Background | None              # e5 cosines of the query to the space's sample
    cosines: Mapping[str, float]               # bucket id -> best content cosine (the floor when not found)
    dense_rank: Mapping[str, int]
    lexical_rank: Mapping[str, int]
    cjk_capable: bool = True                   # False: an English-only embedder (MiniLM maps CJK to [UNK])
    second: Mapping[str, tuple[float, float]] = dataclasses.field(default_factory=dict)  # bucket -> (cos, z)
    aligned: Mapping[str, Alignment] = dataclasses.field(default_factory=dict)  # bucket -> word alignment
    cjk: Mapping[str, bool] = dataclasses.field(default_factory=dict)  # bucket -> written in CJK (memory_is_cjk)
    script_rank: Mapping[str, int] = dataclasses.field(default_factory=dict)  # bucket -> rank in its script
    said: frozenset[str] = frozenset()  # buckets whose words are in the conversation the turn hears (said_in)
    standing: Any = None          # the query's standing against the reference background (e5), or None
    use_standing: Any = None      # the same for the second opinion (USE), or None
    lookup: bool = False          # the message asks about the user's past (a lookup), not a statement
    dictionary: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # bucket -> DictEvidence
    things: tuple[str, ...] = ()  # a statement's key terms that name things (route 2c, retrieval/mention.py)

    def weighs(self, c: Candidate, max_rank: int) -> bool:
        """Is this candidate weighed for admission: among the ``max_rank`` best of those written in its script?"""
        return c.bucket.id not in self.said and self.script_rank.get(c.bucket.id, c.rank) <= max_rank

    def same_script(self, values: Mapping[str, float], bid: str) -> list[float]:
        """The other candidates' values among those written in this candidate's script, best first."""
        own = self.cjk.get(bid)
        return sorted((v for b, v in values.items() if b != bid and self.cjk.get(b) == own), reverse=True)


def memory_is_cjk(c: Candidate) -> bool:
    """Whether a candidate's memory is written in CJK (:func:`bucket_is_cjk`): standing among candidates and
    against the background is measured within one script."""
    return bucket_is_cjk(c.bucket)


def said_in(c: Candidate, heard: Sequence[str]) -> bool:
    """Is this memory's text in the conversation the turn hears (its words were said a few messages ago)?

    The prompt already holds those messages, so recalling the memory made from them says nothing new, and
    it would crowd out what the message asks about: the write decision stores a chat's statements as they
    come, and the next message is often about something else."""
    return c.bucket.id in said_of([c], heard)


def said_of(cands: Sequence[Candidate], heard: Sequence[str]) -> frozenset[str]:
    """The candidates :func:`said_in` the conversation, with each heard message's spacing folded once per turn."""
    if not heard:
        return frozenset()
    said = [" ".join(h.split()) for h in heard]
    out = set()
    for c in cands:
        text = " ".join((c.bucket.main_text or c.bucket.title).split())
        if text and any(text in h for h in said):
            out.add(c.bucket.id)
    return frozenset(out)


def script_ranks(cands: Sequence[Candidate], cjk: Mapping[str, bool] | None = None,
                 skip: frozenset[str] = frozenset()) -> dict[str, int]:
    """Each candidate's rank, in fused order, among the candidates written in its script.

    Admission weighs the best ``retrieval.admission.max_rank`` of each script: in a store that mixes scripts, a
    Chinese question's English answer ranks below every Chinese candidate that shares its words (lexical search
    finds only those, and e5 sits closer to them), so counted among all it would never be weighed. In a store of
    one script this is the fused rank. ``cjk``: each candidate's :func:`memory_is_cjk`, when already known.
    """
    seen = {True: 0, False: 0}
    out = {}
    for c in sorted(cands, key=lambda c: c.rank):
        if c.bucket.id in skip:  # said in the conversation: never weighed, so it takes no one's place
            continue
        script = cjk[c.bucket.id] if cjk is not None else memory_is_cjk(c)
        seen[script] += 1
        out[c.bucket.id] = seen[script]
    return out


def content_cosine(c: Candidate) -> float | None:
    scores = [h.vector_score for h in c.hits if not h.moment.context_only and h.vector_score is not None]
    return max(scores) if scores else None


def query_evidence(cands: Sequence[Candidate], asked: AskedTerms, *, query_is_cjk: bool,
                   background: Background | None = None, cjk_capable: bool = True,
                   exact: Mapping[str, float] | None = None,
                   second: Mapping[str, tuple[float, float]] | None = None,
                   aligned: Mapping[str, Alignment] | None = None,
                   cjk: Mapping[str, bool] | None = None, standing: Any = None, use_standing: Any = None,
                   lookup: bool = False, heard: Sequence[str] = (),
                   dictionary: Mapping[str, Any] | None = None, things: Sequence[str] = (),
                   said: frozenset[str] | None = None) -> QueryEvidence:
    """Per query: each candidate's content cosine and its rank in each channel.

    ``exact`` gives cosines computed from stored vectors for candidates dense search did not return;
    any other such candidate gets the lowest cosine dense search returned (it ranked below them all).
    The dense rank counts only candidates written in the same script (see :class:`Background`); ``cjk`` gives
    each candidate's :func:`memory_is_cjk` when the caller has it, ``said`` their :func:`said_of` ``heard``.
    """
    said = said_of(cands, heard) if said is None else said
    found = {c.bucket.id: content_cosine(c) for c in cands}
    found.update({b: v for b, v in (exact or {}).items() if found.get(b) is None})
    floor = min((v for v in found.values() if v is not None),
                default=background.mean if background else 0.0)
    cosines = {bid: (v if v is not None else floor) for bid, v in found.items()}
    cjk = dict(cjk) if cjk is not None else {c.bucket.id: memory_is_cjk(c) for c in cands}
    dense = sorted((c.bucket.id for c in cands if content_cosine(c) is not None), key=lambda b: (-cosines[b], b))
    dense_rank = {}
    for script in (True, False):
        dense_rank.update({b: i for i, b in enumerate((b for b in dense if cjk[b] == script), 1)})
    lex_scores = {c.bucket.id: max((h.lexical_score or 0.0 for h in c.hits if not h.moment.context_only),
                                   default=0.0) for c in cands}
    lexical = sorted((b for b, s in lex_scores.items() if s > 0), key=lambda b: (-lex_scores[b], b))
    return QueryEvidence(asked, query_is_cjk, background, cosines, dense_rank,
                         {b: i for i, b in enumerate(lexical, 1)}, cjk_capable=cjk_capable, second=dict(second or {}),
                         aligned=dict(aligned or {}), cjk=cjk, script_rank=script_ranks(cands, cjk, said), said=said,
                         standing=standing, use_standing=use_standing, lookup=lookup,
                         dictionary=dict(dictionary or {}), things=tuple(things))


def evidence_of(features: Mapping[str, float], model: AdmissionModel) -> float:
    """sigmoid(w · x + b): the calibrated probability that this candidate is a wanted memory."""
    z = model.bias + sum(w * features.get(name, 0.0) for name, w in model.weights.items())
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))


def threshold_for(model: AdmissionModel, features: Mapping[str, float], query_is_cjk: bool = False) -> float:
    """The model's threshold for this candidate: ``admit_cross_script`` across scripts, ``admit_cjk`` for a CJK
    question about a memory in its own script (each when fitted), else ``admit``."""
    return threshold_named(model, features, query_is_cjk)[1]


def threshold_named(model: AdmissionModel, features: Mapping[str, float],
                    query_is_cjk: bool = False) -> tuple[str, float]:
    """:func:`threshold_for` with the name of the threshold it chose, for the Admission record."""
    if features.get("cross_script"):
        if model.admit_cross_script is not None:
            return "admit_cross_script", model.admit_cross_script
    elif query_is_cjk and model.admit_cjk is not None:
        return "admit_cjk", model.admit_cjk
    return "admit", model.admit


def sensitive(bucket: Any, cfg: Any) -> bool:
    """A memory tagged as sensitive (``retrieval.sensitive_tags``) is never brought up unasked."""
    tags = {t.casefold() for t in cfg.retrieval.sensitive_tags}
    return any(t.casefold() in tags for t in bucket.tags)


def plausible(ev: float | None, q: QueryEvidence, cfg: Any) -> bool:
    """Routes 2b and 2c read words, not meaning: the evidence must reach ``retrieval.min_route_evidence`` (no model, no
    floor; "我大学学的什么专业" meets 大学 = university in a memory of giving up meat there at 0.09). A follow-up
    with no words of its own ("how is she now?") carries no topic in its vector: no floor."""
    return ev is None or q.asked.message_groups == 0 or ev >= cfg.retrieval.min_route_evidence


def dictionary_admits(dict_ev: Any, weighed: bool, unasked: bool, cfg: Any, plausible_ev: bool = True) -> bool:
    """Route 2b of :func:`admit`: what is asked is said in the memory in other words or the other language, through
    the dictionary (beach → 海边, 海边 → 沙滩), covering at least ``retrieval.min_dictionary_coverage`` of the
    asked weight with at least one pair through the dictionary, no key term in conflict, for a weighed candidate
    of a message that asks, whose evidence is :func:`plausible` (design §18)."""
    return (dict_ev is not None and weighed and not unasked and dict_ev.conflict <= 0 and plausible_ev
            and any(k == "dict" for *_, k in dict_ev.pairs)
            and dict_ev.matched >= cfg.retrieval.min_dictionary_coverage)


def mentioned(q: QueryEvidence, candidate: Candidate, conflict: bool, weighed: bool) -> str | None:
    """Route 2c of :func:`admit`, implicit recall: one of a statement's key things (``q.things``, empty for a lookup
    or with ``retrieval.implicit_recall`` off) written in the title or tags of a weighed candidate with no
    dictionary conflict (docs/design.md §13)."""
    if not q.things or q.lookup or conflict or not weighed:
        return None
    b = candidate.bucket
    about = (b.title + "\n" + "\n".join(b.tags)).casefold()
    return next((t for t in q.things if found(t.casefold(), about)), None)


def read_admission(candidate: Candidate, q: QueryEvidence, p: float, bars: tuple[float, float, float],
                   routed: Admission, *, other_person: bool = False) -> Admission:
    """The reader's verdict on a weighed candidate: ``reader_other_person`` first, whatever ``p`` (the message asks
    about one person, the memory is about another it never names: 表哥 and 表姐); ``reader_answers`` at the lookup's
    bar (a statement's stricter one); ``reader_seconds`` when a route admitted it and the reader does not object
    (``p`` at least the veto, or the route's words say the whole message: :func:`said_whole`); ``reader_vetoes``
    when a route admitted it and the reader does; else ``reader_below_threshold``."""
    name, bar = ("reader", bars[0]) if q.lookup else ("reader_unasked", bars[1])
    if other_person:
        reason, ok = "reader_other_person", False
    elif p >= bar:
        reason, ok = "reader_answers", True
    elif routed.admitted:
        reason, ok = ("reader_seconds", True) if p >= bars[2] or said_whole(routed) else ("reader_vetoes", False)
    else:
        reason, ok = "reader_below_threshold", False
    features = {**(routed.features or {}), "reader": p, "veto": bars[2]}
    return dataclasses.replace(routed, admitted=ok, reason=reason, evidence=p, features=features,
                               threshold=bar, threshold_name=name, routed=routed.reason)


WHOLE_ROUTES = ("term_in_title", "term_in_summary", "term_in_tags")


def said_whole(routed: Admission) -> bool:
    """Every word the message asks is written in the memory's title, summary or tags (a search for "海边" and the
    memory titled 海边日出): the reader, trained on messages, does not veto what the words say whole."""
    return routed.reason in WHOLE_ROUTES and (routed.coverage or 0.0) >= 1.0


def lexical_admits(first: str | None, coverage: float, cfg: Any) -> bool:
    """Route 2 of :func:`admit`: a discriminative term is written in the memory and the written terms cover at
    least ``retrieval.min_term_coverage`` of what the query asks (calibrate counts injections with it too)."""
    return first is not None and coverage >= cfg.retrieval.min_term_coverage


HARD_REFUSALS = ("context_only_match", "said_in_conversation", "sensitive_unasked")
"""Refusals no score overrides, the reader's included."""


def admit(candidate: Candidate, q: QueryEvidence, *, cfg: Any, model: AdmissionModel | None,
          reader: float | None = None, reader_bars: tuple[float, float, float] | None = None,
          other_person: bool = False) -> Admission:
    """Whether a candidate has evidence enough for a direct hit: the routes below (:func:`route_admission`), and,
    for a weighed candidate the reader read (design §25), the reader's verdict: admitted at its bar (a lookup's, or a
    statement's stricter one), or by a route the reader does not object to (``retrieval.reader.veto``)."""
    routed = route_admission(candidate, q, cfg=cfg, model=model)
    if reader_bars is None or routed.reason in HARD_REFUSALS:
        return routed
    if reader is None:
        return unread_admission(candidate, routed, cfg)
    return read_admission(candidate, q, reader, reader_bars, routed, other_person=other_person)


def unread_admission(candidate: Candidate, routed: Admission, cfg: Any) -> Admission:
    """A candidate the reader did not read (below the weighed ranks) while the reader is on: a route admits it only
    when its words say the whole message (:func:`said_whole`), or it is the user's pinned Core Memory (its routes
    decide, design §25); else ``reader_unread``. In a lived-in store a name or a common word in a title ("千帆",
    "大老板") admitted every memory that wrote it, past the reader, against "千帆那个比赛叫啥名字来着"."""
    if not routed.admitted or candidate.bucket.pinned or said_whole(routed) or not cfg.retrieval.reader.unread_whole:
        return routed
    return dataclasses.replace(routed, admitted=False, reason="reader_unread", routed=routed.reason)


def route_admission(candidate: Candidate, q: QueryEvidence, *, cfg: Any, model: AdmissionModel | None) -> Admission:
    """Whether a candidate has evidence enough for a direct hit (design §13; the direct seed gate reads it).

    1. only context-only moments matched -> ``context_only_match``, never admitted;
    2b. through the dictionary (:func:`dictionary_admits`) -> ``dictionary_match``;
    2c. a statement names a thing the memory is about (:func:`mentioned`) -> ``mentioned_in_title``;
    2. lexical evidence: a discriminative query term in the title, summary, tags or main body,
       covering at least ``retrieval.min_term_coverage`` of the query's term weight
       (:func:`lexical_admits`) ->
       ``term_in_<field>`` (what is asked about is written in the memory; a new user's few
       memories are recalled on it from the first day);
    Route 2 needs no dictionary conflict: the words written in the memory are not evidence when a key term meets a
    different thing of its kind there (my brother's job against a memory of my sister's; design §18).

    A statement (the message does not ask about the user's past) under a model with ``admit_unasked`` is recall
    unasked: never a memory tagged sensitive (``sensitive_unasked``), never on route 2 alone, and on the score
    only at the higher of its threshold and ``admit_unasked`` (docs/design.md §17).

    3. with a fitted model, for the ``max_rank`` best candidates of each script (:func:`script_ranks`):
       ``evidence_above_threshold`` when
       the evidence reaches the model's ``admit`` (``admit_cjk`` for a CJK question in its own script,
       ``admit_cross_script`` when query and memory
       are in different scripts), else ``evidence_below_threshold``; lower ranks
       are ``below_admission_rank``. The threshold is fitted with route 2 in place (``calibrate``);
    4. without a model: some terms but too little coverage -> ``weak_term_coverage``; otherwise
       ``no_topic_evidence``.
    """
    content = [h for h in candidate.hits if not h.moment.context_only]
    semantic = content_cosine(candidate)
    if not content:
        return Admission(False, "context_only_match", semantic_score=semantic)
    if candidate.bucket.id in q.said:
        return Admission(False, "said_in_conversation", semantic_score=semantic)
    if not q.lookup and sensitive(candidate.bucket, cfg):  # never brought up unasked, whatever the model
        return Admission(False, "sensitive_unasked", semantic_score=semantic)
    unasked = model is not None and model.admit_unasked is not None and not q.lookup
    matched, first, coverage = lexical_match(candidate, q.asked)
    dict_ev = q.dictionary.get(candidate.bucket.id)
    conflict = dict_ev is not None and dict_ev.conflict > 0  # a key term meets a different thing of its kind
    lexical_ok = lexical_admits(first, coverage, cfg) and not unasked and not conflict
    if conflict and (model is None or "dict_conflict" not in model.feature_names):
        # a model fitted without the dictionary cannot weigh a conflict: a key term that meets a different thing of
        # its kind (my sister against a memory of my brother) is the near miss, whatever else the memory says
        return Admission(False, "dictionary_conflict", matched, semantic, coverage,
                         dictionary=dict_ev.pairs if dict_ev is not None else ())
    weighed = model is not None and q.weighs(candidate, cfg.retrieval.admission.max_rank)
    rank = q.script_rank.get(candidate.bucket.id) if model is not None else None
    feats = candidate_features(candidate, q, coverage, model.feature_names) if weighed else None
    ev = round(evidence_of(feats, model), 6) if weighed else None
    aligned = q.aligned.get(candidate.bucket.id, NO_ALIGNMENT).pairs if weighed else ()
    pairs = dict_ev.pairs if weighed and dict_ev is not None else ()
    name, threshold = None, None
    if weighed:  # the threshold this evidence is held against, recorded so no page has to work it out again
        cross = feats if "cross_script" in feats else candidate_features(candidate, q, coverage, ("cross_script",))
        name, threshold = threshold_named(model, cross, q.query_is_cjk)
        if unasked and model.admit_unasked > threshold:
            name, threshold = "admit_unasked", model.admit_unasked
    rec = dict(evidence=ev, features=feats, aligned=aligned, script_rank=rank, threshold=threshold,
               threshold_name=name)
    if lexical_ok:  # what the query asks about is written in the memory: that alone is evidence
        return Admission(True, f"term_in_{first}", matched, semantic, coverage, dictionary=pairs, **rec)
    if dictionary_admits(dict_ev, weighed or model is None, unasked, cfg, plausible(ev, q, cfg)):  # in other words
        return Admission(True, "dictionary_match", matched, semantic, coverage, dictionary=dict_ev.pairs, **rec)
    thing = mentioned(q, candidate, conflict, weighed or model is None)
    if thing and plausible(ev, q, cfg):  # a statement names a thing this memory is about
        return Admission(True, "mentioned_in_title", matched, semantic, coverage, dictionary=pairs, **rec)
    if model is not None and not weighed:
        return Admission(False, "below_admission_rank", matched, semantic, coverage, script_rank=rank)
    if weighed:
        ok = ev >= threshold
        return Admission(ok, "evidence_above_threshold" if ok else "evidence_below_threshold", matched, semantic,
                         coverage, dictionary=pairs, **rec)
    if first is not None:
        return Admission(False, "weak_term_coverage", matched, semantic, coverage)
    return Admission(False, "no_topic_evidence", semantic_score=semantic)
