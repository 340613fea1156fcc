"""Retrieval's options (``lexical:`` and ``retrieval:`` in the config): the lexical index, fusion, admission and its
fitted models, the conversation context. Declared here, once each, typed; the package builds them into ``Config``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from .parse import _rng


@dataclass(frozen=True)
class LexicalConfig:
    stop_words: tuple[str, ...] = ()


@dataclass(frozen=True)
class FusionConfig:
    dense_weight_latin: float = field(default=0.55, metadata=_rng(0, 1))
    dense_weight_cjk: float = field(default=0.75, metadata=_rng(0, 1))
    dense_weight_minilm_cjk: float = field(default=0.0, metadata=_rng(0, 1))
    anchor_bonus: float = field(default=0.15, metadata=_rng(0, 1))
    context_share: float = field(default=0.5, metadata=_rng(0, 1))
    # when a query meets memories in another script (an English question, Chinese memories), the second
    # opinion's share of the dense channel: both models' cosines min-max normalised, then mixed
    second_opinion_share: float = field(default=0.5, metadata=_rng(0, 1))


@dataclass(frozen=True)
class AdmissionModel:
    """One embedding model's fitted admission: evidence = sigmoid(weights · features + bias), admitted at ``admit``.

    A question in one script about a memory in another (English about Chinese) has no lexical route
    and its evidence is spread lower; ``admit_cross_script`` is its own threshold, fitted beside
    ``admit`` (unset: the same as ``admit``). A Chinese question about a Chinese memory meets
    ``admit_cjk`` (unset: ``admit``): the two languages' near misses differ, and a threshold shared by both
    is held where the stricter one needs it.

    ``admit_unasked`` (unset: statements are judged as lookups) is a statement's bar: recall the user did not ask
    for is admitted on the score alone, at the higher of this and the script's threshold (docs/design.md §17).

    ``features`` names the admission features the model was fitted on (``calibrate`` writes it; unset, the
    weights' keys): evidence is computed over those alone, so a feature registered later
    (``retrieval/features.py``) leaves a model fitted before it exactly as it was.
    """

    weights: dict[str, float] = field(default_factory=dict)
    features: tuple[str, ...] = ()
    bias: float = 0.0
    admit: float = field(default=0.5, metadata=_rng(0, 1))
    admit_cross_script: float | None = field(default=None, metadata=_rng(0, 1))
    admit_cjk: float | None = field(default=None, metadata=_rng(0, 1))
    admit_unasked: float | None = field(default=None, metadata=_rng(0, 1))  # a statement's recall (unasked)
    fitted: str = ""  # the command and data that produced these numbers

    @property
    def feature_names(self) -> tuple[str, ...]:
        """What the evidence is computed over: the features fitted on (``features``, else the weights' keys)."""
        return self.features or tuple(self.weights)


@dataclass(frozen=True)
class AdmissionConfig:
    max_rank: int = field(default=4, metadata=_rng(1, 1000))  # the best this many of each script are weighed
    models: dict[str, AdmissionModel] = field(default_factory=dict)  # by embedder model id


@dataclass(frozen=True)
class ReaderConfig:
    """The reader (retrieval/reader.py, design §25): a fitted pair model that decides admission for the weighed
    candidates. ``id`` null turns it off (admission as §13); thresholds unset take the model card's."""

    id: str | None = None
    path: str | None = None  # a directory of fitted readers (fit-reader --out); None: the package's
    admit: float | None = field(default=None, metadata=_rng(0, 1))          # a lookup's bar
    admit_unasked: float | None = field(default=None, metadata=_rng(0, 1))  # recall the user did not ask for
    veto: float = field(default=0.3, metadata=_rng(0, 1))  # what a route admitted stays out below this probability
    unread_whole: bool = True  # a route admits a candidate the reader did not read only on words that say it whole


@dataclass(frozen=True)
class ContextConfig:
    """How the conversation before a message weighs in retrieval (design §14)."""

    user_messages: int = field(default=4, metadata=_rng(0, 20))  # the recent user messages that make the topic
    decay: float = field(default=0.5, metadata=_rng(0, 1))       # weight of the previous one; its predecessor decay²
    anaphora_boost: float = field(default=2.0, metadata=_rng(1, 10))  # "那天晚上", "that night": the topic weighs more
    # the vector a turn searches with: the message's own unless it points back (follow_up), or always the
    # conversation's (always: the message plus the recent user messages at their weights)
    vector: Literal["follow_up", "always"] = "follow_up"


@dataclass(frozen=True)
class RetrievalConfig:
    mode: Literal["graph", "bucket"] = "graph"
    vector_k: int = field(default=40, metadata=_rng(1, 10000))
    lexical_k: int = field(default=40, metadata=_rng(1, 10000))
    fusion: FusionConfig = FusionConfig()
    admission: AdmissionConfig = AdmissionConfig()
    reader: ReaderConfig = ReaderConfig()
    context: ContextConfig = ContextConfig()
    min_term_chars: int = field(default=2, metadata=_rng(1, 10))
    min_idf: float = field(default=0.5, metadata=_rng(0, 100))
    min_term_coverage: float = field(default=0.4, metadata=_rng(0, 1))
    max_direct: int = field(default=4, metadata=_rng(1, 100))
    max_unasked: int = field(default=2, metadata=_rng(0, 100))  # direct hits for a statement (recall unasked)
    sensitive_tags: tuple[str, ...] = ("sensitive", "private", "敏感", "隐私")  # never recalled unasked
    min_relative_score: float = field(default=0.35, metadata=_rng(0, 1))
    dictionary_expansion: bool = False  # BM25 also searches the query's terms in the other script (the dictionary)
    dictionary: bool = True  # admission reads the bilingual dictionary (route 2b, conflicts), whatever the model
    min_dictionary_coverage: float = field(default=0.6, metadata=_rng(0, 1))  # route 2b's share of the asked weight
    implicit_recall: bool = True  # a statement naming a thing a memory is about recalls it (route 2c, design §13)
    min_route_evidence: float = field(default=0.15, metadata=_rng(0, 1))  # routes 2b/2c: the fitted evidence floor
