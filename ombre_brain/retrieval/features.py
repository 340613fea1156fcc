"""The admission features: each one an entry in :data:`FEATURES`, computed for the weighed candidates.

A :class:`Feature` names one number admission weighs (docs/design.md §13), what it reads (its
``inputs``: ``lexical``, ``dense``, ``second_opinion``, ``alignment``; the admission stage skips
gathering an input no feature of the model in use reads) and how it is computed from a
:class:`FeatureInput`: one candidate, the query's evidence, and the candidate's lexical coverage.
The registry's names are the keys of the weights in ``retrieval.admission.models`` and of the
features the debug pages show. Adding a feature is one entry: ``FEATURES.register(Feature(...))``,
or ``FEATURES.added(...)`` for a ``with`` block in a test.

A fitted model names the features it was fitted on (``features``, else its weights' keys) and is
computed over those alone: a feature registered after it was fitted is not part of it, so an
overlay of weights fitted earlier gives the same evidence as before (never a silent 0 for a
feature it has never seen; ``config check`` refuses a model that lists a feature without a weight).

Standing (z-scores, margins, gaps, dense rank) is measured among memories written in the
candidate's own script; see ``admission.Background``. Pure: no I/O; it imports no config or pipeline type, so
``config`` can check weight names against the registry.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import cached_property, lru_cache
from typing import Any

from ..buckets import main_text_of
from ..text import is_cjk_text

__all__ = ["FEATURES", "INPUTS", "Feature", "FeatureInput", "FeatureRegistry", "bucket_is_cjk", "candidate_features"]

SCRIPT_SAMPLE_CHARS = 200  # how much of a memory's text (after its title) decides its script


def bucket_is_cjk(b: Any) -> bool:
    """Whether a memory is written in CJK, judged by its title and the start of its text together: a Chinese
    memory with a Latin-only moment ("ENFP", "2024.05.20", "iPhone 15 Pro Max 到了") stays Chinese, so a store
    of one language is never split in two."""
    return _is_cjk(b.title, b.body)


@lru_cache(maxsize=4096)
def _is_cjk(title: str, body: str) -> bool:
    """Judged once per version of a memory's text, not once per turn it is a candidate in (:func:`clear_cache`)."""
    return is_cjk_text(f"{title}\n{main_text_of(body)[:SCRIPT_SAMPLE_CHARS]}")


def clear_cache() -> None:
    """Forget the memory texts judged (a purge: they quote memories)."""
    _is_cjk.cache_clear()


INPUTS = ("lexical", "dense", "second_opinion", "alignment", "reference", "dictionary")
"""What a feature may read; the admission stage gathers an input only when a feature in use reads it."""


class FeatureInput:
    """One weighed candidate with what admission knows about the query; shared pieces are worked out once."""

    def __init__(self, candidate: Any, q: Any, coverage: float) -> None:
        self.c = candidate
        self.q = q
        self.coverage = coverage
        self.bid = candidate.bucket.id

    @cached_property
    def cos(self) -> float:
        return self.q.cosines[self.bid]

    @cached_property
    def others(self) -> list[float]:
        """The other candidates' cosines among those written in this one's script, best first."""
        return self.q.same_script(self.q.cosines, self.bid)

    @cached_property
    def memory_cjk(self) -> bool:
        return self.q.cjk[self.bid] if self.bid in self.q.cjk else bucket_is_cjk(self.c.bucket)

    @cached_property
    def moment_cjk(self) -> bool:
        m = self.c.best.moment
        return is_cjk_text(m.text if not m.context_only else self.c.bucket.title)

    @cached_property
    def dense_blind(self) -> bool:
        """An English-only embedder maps CJK to [UNK]: where either side is CJK its cosines say nothing."""
        return not self.q.cjk_capable and (self.q.query_is_cjk or self.moment_cjk)

    @cached_property
    def second(self) -> tuple[float, float] | None:
        return self.q.second.get(self.bid)

    @cached_property
    def second_others(self) -> list[float]:
        return sorted((v[0] for b, v in self.q.second.items() if b != self.bid), reverse=True)

    @cached_property
    def alignment(self) -> Any:
        return self.q.aligned.get(self.bid)

    @cached_property
    def dictionary(self) -> Any:
        return self.q.dictionary.get(self.bid)


Compute = Callable[[FeatureInput], float]


@dataclasses.dataclass(frozen=True)
class Feature:
    """One admission feature: its name (a weight key), what it reads, how it is computed, and why it helps."""

    name: str
    compute: Compute
    inputs: frozenset[str]
    doc: str = ""

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"a feature name is a snake_case identifier, got {self.name!r}")
        unknown = set(self.inputs) - set(INPUTS)
        if unknown:
            raise ValueError(f"feature {self.name}: unknown input(s) {sorted(unknown)}; known: {', '.join(INPUTS)}")


class FeatureRegistry:
    """The admission features in a fixed order; registering swaps in a new tuple (reads take no lock)."""

    def __init__(self, features: Iterable[Feature] = ()) -> None:
        self._features: tuple[Feature, ...] = ()
        self._lock = threading.Lock()
        for f in features:
            self.register(f)

    def register(self, feature: Feature) -> Feature:
        with self._lock:
            if any(f.name == feature.name for f in self._features):
                raise ValueError(f"an admission feature named {feature.name!r} is already registered")
            self._features = (*self._features, feature)
        return feature

    def unregister(self, name: str) -> None:
        with self._lock:
            self._features = tuple(f for f in self._features if f.name != name)

    @contextlib.contextmanager
    def added(self, feature: Feature) -> Iterator[Feature]:
        """A feature registered for the duration of a ``with`` block (tests, experiments)."""
        self.register(feature)
        try:
            yield feature
        finally:
            self.unregister(feature.name)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self._features)

    def __contains__(self, name: object) -> bool:
        return any(f.name == name for f in self._features)

    def __iter__(self) -> Iterator[Feature]:
        return iter(self._features)

    def __getitem__(self, name: str) -> Feature:
        for f in self._features:
            if f.name == name:
                return f
        raise KeyError(name)

    def inputs_of(self, names: Iterable[str]) -> frozenset[str]:
        """What the named features read, together."""
        wanted = set(names)
        return frozenset(i for f in self._features if f.name in wanted for i in f.inputs)


def _dense(fn: Compute) -> Compute:
    """A dense feature: 0 where the embedder cannot read the script (see :attr:`FeatureInput.dense_blind`)."""
    return lambda x: 0.0 if x.dense_blind else fn(x)


def _z(x: FeatureInput) -> float:
    bg = x.q.background
    return bg.within(x.memory_cjk).z(x.cos, x.c.best.moment.id) if bg is not None else 0.0


def _margin(x: FeatureInput) -> float:
    return x.cos - (x.others[0] if x.others else x.cos)


def _gap(x: FeatureInput) -> float:
    lower = [v for v in x.others if v <= x.cos]
    return x.cos - (lower[0] if lower else x.cos)


def _rr(rank: Mapping[str, int], bid: str) -> float:
    return 1.0 / rank[bid] if bid in rank else 0.0


def _ref_z(x: FeatureInput) -> float:
    s = x.q.standing
    return s.z(x.cos, x.memory_cjk) if s is not None else 0.0


def _use_ref_z(x: FeatureInput) -> float:
    s = x.q.use_standing
    return s.z(x.second[0], x.memory_cjk) if s is not None and x.second is not None else 0.0


def _against(value: float, others: list[float], top: tuple[float, ...]) -> tuple[float, float, float]:
    """(margin, gap, reciprocal rank) of a value among competitors: the store's other candidates and the
    reference's best memories (sorted best first)."""
    comp = sorted([*others, *top], reverse=True)
    if not comp:
        return 0.0, 0.0, 1.0
    lower = next((v for v in comp if v <= value), None)
    return value - comp[0], value - lower if lower is not None else 0.0, 1.0 / (1 + sum(v > value for v in comp))


def _ref_competition(x: FeatureInput) -> tuple[float, float, float]:
    s = x.q.standing
    return _against(x.cos, x.others, s.top.get(x.memory_cjk, ()) if s is not None else ())


def _use_ref_competition(x: FeatureInput) -> tuple[float, float, float]:
    s = x.q.use_standing
    if x.second is None:
        return 0.0, 0.0, 0.0
    return _against(x.second[0], x.second_others, s.top.get(x.memory_cjk, ()) if s is not None else ())


def _use_margin(x: FeatureInput) -> float:
    if x.second is None:
        return 0.0
    return x.second[0] - (x.second_others[0] if x.second_others else x.second[0])


def _use_gap(x: FeatureInput) -> float:
    if x.second is None:
        return 0.0
    lower = [v for v in x.second_others if v <= x.second[0]]
    return x.second[0] - (lower[0] if lower else x.second[0])


FEATURES = FeatureRegistry([
    Feature("lexical", lambda x: x.coverage, frozenset({"lexical"}),
            "IDF-weighted coverage of the asked term groups by the memory's admissible text"),
    Feature("cosine", _dense(lambda x: x.cos), frozenset({"dense"}), "the best content moment's cosine to the query"),
    Feature("dense_z", _dense(_z), frozenset({"dense"}),
            "how far that cosine stands above the query's background among memories in the candidate's script"),
    Feature("margin", _dense(_margin), frozenset({"dense"}),
            "its distance below (or, for the best, above) the best other candidate's cosine"),
    Feature("gap", _dense(_gap), frozenset({"dense"}), "its distance above the next lower candidate's cosine"),
    Feature("dense_rr", _dense(lambda x: _rr(x.q.dense_rank, x.bid)), frozenset({"dense"}),
            "reciprocal rank under dense search, among memories in its script"),
    Feature("lexical_rr", lambda x: _rr(x.q.lexical_rank, x.bid), frozenset({"lexical"}),
            "reciprocal rank under lexical search"),
    Feature("cross_script", lambda x: 1.0 if x.moment_cjk != x.q.query_is_cjk else 0.0, frozenset(),
            "the query and the best moment are in different scripts (no lexical evidence can exist)"),
    Feature("use_cos", lambda x: x.second[0] if x.second else 0.0, frozenset({"second_opinion"}),
            "the second opinion's cosine to the memory as a whole"),
    Feature("use_z", lambda x: x.second[1] if x.second else 0.0, frozenset({"second_opinion"}),
            "its z-score against the sampled memories written in the candidate's script"),
    Feature("use_margin", _use_margin, frozenset({"second_opinion"}),
            "the second opinion's margin to the best other weighed candidate"),
    Feature("use_gap", _use_gap, frozenset({"second_opinion"}),
            "the second opinion's gap above the next lower weighed candidate"),
    Feature("aligned", lambda x: x.alignment.aligned if x.alignment else 0.0, frozenset({"alignment"}),
            "how much of what is asked the memory says in any words or language (word alignment)"),
    Feature("aligned_min", lambda x: x.alignment.aligned_min if x.alignment else 0.0, frozenset({"alignment"}),
            "the weakest aligned key term"),
    Feature("ref_z", _dense(_ref_z), frozenset({"dense", "reference"}),
            "how far the cosine stands above the message's cosines to a fixed reference of ordinary memories in the "
            "memory's script: the same in a store of 1 or 10,000 memories (retrieval/background.py)"),
    Feature("use_ref_z", _use_ref_z, frozenset({"second_opinion", "reference"}),
            "the second opinion's cosine against the same reference"),
    Feature("dict_match", lambda x: x.dictionary.matched if x.dictionary else 0.0, frozenset({"dictionary"}),
            "the share of what is asked the memory holds, written or through the bilingual dictionary (beach→海边, "
            "海边→沙滩): retrieval/dict_evidence.py"),
    Feature("dict_conflict", lambda x: x.dictionary.conflict if x.dictionary else 0.0, frozenset({"dictionary"}),
            "a key term the memory does not hold meets a word the dictionary says is a different thing of the same "
            "kind (sister against 哥哥): the cosine of that pair, 0 when none"),
    Feature("ref_margin", _dense(lambda x: _ref_competition(x)[0]), frozenset({"dense", "reference"}),
            "the cosine's distance below (or above) the best competitor: the store's other candidates in the memory's "
            "script and the reference's closest memories, so a young store's candidate meets competitors too"),
    Feature("ref_gap", _dense(lambda x: _ref_competition(x)[1]), frozenset({"dense", "reference"}),
            "its distance above the next lower competitor (store and reference)"),
    Feature("ref_rr", _dense(lambda x: _ref_competition(x)[2]), frozenset({"dense", "reference"}),
            "its reciprocal rank among those competitors"),
    Feature("use_ref_margin", lambda x: _use_ref_competition(x)[0], frozenset({"second_opinion", "reference"}),
            "the second opinion's margin against the same kind of competitors"),
    Feature("use_ref_gap", lambda x: _use_ref_competition(x)[1], frozenset({"second_opinion", "reference"}),
            "the second opinion's gap against them"),
    Feature("lookup", lambda x: 1.0 if x.q.lookup else 0.0, frozenset(),
            "the message asks about the user's past (a lookup) rather than telling something (a statement)"),
])


def candidate_features(c: Any, q: Any, coverage: float, names: Iterable[str] | None = None) -> dict[str, float]:
    """The candidate's admission features, for ``names`` (default: every registered one), rounded to 6 places."""
    x = FeatureInput(c, q, coverage)
    wanted = FEATURES.names if names is None else tuple(names)
    return {n: round(float(FEATURES[n].compute(x)), 6) for n in wanted}
