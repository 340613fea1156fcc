"""The write path's options (``writer:`` in the policy): the rule writer's cue words, the learned decision's model and
thresholds, and the cue lists it reads. Declared here, once each, typed; the package builds them into ``Config``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .parse import _rng


@dataclass(frozen=True)
class WriterSignals:
    """Cue lists the learned write decision reads (``writing/signals.py``): each list is one feature of the model,
    and ``dont_keep`` is also a rule (the exchange is never stored; alone, it forgets the one before)."""

    question_words: tuple[str, ...] = ()
    question_endings: tuple[str, ...] = ()
    recall_request: tuple[str, ...] = ()
    greeting: tuple[str, ...] = ()
    thanks: tuple[str, ...] = ()
    laughter: tuple[str, ...] = ()
    dont_keep: tuple[str, ...] = ()
    refers_back: tuple[str, ...] = ()
    hypothetical: tuple[str, ...] = ()
    joke: tuple[str, ...] = ()
    task: tuple[str, ...] = ()
    companion_self: tuple[str, ...] = ()
    first_person: tuple[str, ...] = ()
    second_person: tuple[str, ...] = ()
    we: tuple[str, ...] = ()
    people: tuple[str, ...] = ()
    pets: tuple[str, ...] = ()
    identity: tuple[str, ...] = ()
    preference: tuple[str, ...] = ()
    habit: tuple[str, ...] = ()
    lesson: tuple[str, ...] = ()
    state: tuple[str, ...] = ()
    event: tuple[str, ...] = ()
    time_now: tuple[str, ...] = ()
    time_past: tuple[str, ...] = ()
    time_future: tuple[str, ...] = ()


@dataclass(frozen=True)
class WriterModelConfig:
    """The learned write decision (``ingest.extractor: model``; docs/design.md §7.4)."""

    id: str = "wd-e5s-use3-2"  # weights shipped as ombre_brain/writing/models/<id>.npz and .json
    path: str | None = None    # a directory of fitted models (fit-writer --out); None: the package's
    threshold: float = field(default=0.5, metadata=_rng(0, 1))               # user side: P(worth keeping)
    relationship_threshold: float = field(default=0.5, metadata=_rng(0, 1))  # relationship side: P(a lesson)
    # a long message the model finds nothing in is read clause by clause: kept when one clause alone reaches this
    clause_threshold: float = field(default=0.6, metadata=_rng(0, 1.01))   # 1.01: off
    clause_units: int = field(default=12, metadata=_rng(0, 100000))        # "long": at least this many units
    join_similarity: float = field(default=0.75, metadata=_rng(0, 1.01))     # a repeat joins the stored memory
    update_similarity: float = field(default=0.5, metadata=_rng(0, 1.01))    # an update links to it (old_version)


@dataclass(frozen=True)
class WriterConfig:
    stable_boundary: tuple[str, ...] = ()
    short_state: tuple[str, ...] = ()
    relationship_lesson: tuple[str, ...] = ()
    process_event: tuple[str, ...] = ()
    relationship_subject: tuple[str, ...] = ()
    min_chars: int = field(default=6, metadata=_rng(0, 10000))
    model: WriterModelConfig = WriterModelConfig()
    signals: WriterSignals = WriterSignals()


__all__ = ["WriterConfig", "WriterModelConfig", "WriterSignals"]
