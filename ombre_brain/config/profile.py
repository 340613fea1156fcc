"""The profile's options (``gateway.profile:`` in the policy; its budget is ``gateway.budgets.profile``).

The profile is the stable section that says who the user is and how to be with them (docs/design.md §24): one
short line per stable fact or lesson, every turn, within a budget of its own. Declared here, once each, typed;
the package builds them into ``Config``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .parse import _rng

PROFILE_HINTS = ("stable_boundary", "relationship_lesson", "short_state", "process_event")
HINT_SOURCES = ("model", "model_adjusted", "rule", "default")


@dataclass(frozen=True)
class ProfileWeights:
    """How a line's score is made when the profile outgrows its budget (``profile/book.py``): each term is in
    [0, 1] before its weight."""

    similarity: float = field(default=3.0, metadata=_rng(0, 100))   # the turn's search found it (its fused score)
    importance: float = field(default=1.0, metadata=_rng(0, 100))   # importance / 10
    recency: float = field(default=1.0, metadata=_rng(0, 100))      # exp(-age / recency_days) of its last activity
    restated: float = field(default=0.5, metadata=_rng(0, 100))     # said again (joined claims), saturating
    recalled: float = field(default=0.5, metadata=_rng(0, 100))     # sessions that recalled it, saturating
    lesson: float = field(default=0.5, metadata=_rng(0, 100))       # a relationship lesson: how to be with them
    care: float = field(default=1.0, metadata=_rng(0, 100))         # a line with a `care` cue (an allergy, a fear)
    holder: float = field(default=0.0, metadata=_rng(0, 100))       # about whom the message is (my cat, 我妈)
    attribute: float = field(default=0.0, metadata=_rng(0, 100))    # and what it asks of them (a name, a job)


@dataclass(frozen=True)
class SupersedeConfig:
    """The changed-fact model (profile/supersede.py): ``id`` null leaves it to the frame rules alone."""

    id: str | None = None
    path: str | None = None  # a directory of fitted models (fit-supersede --out); None: the package's
    threshold: float | None = field(default=None, metadata=_rng(0, 1))  # None: the model card's
    rules: tuple[str, ...] = ()  # frame rules trusted beside the model (same_attribute, holder_ended, …)
    rule_floor: float = field(default=0.1, metadata=_rng(0, 1))  # a rule's pair the model reads below this: refused
    trusted_cues: tuple[str, ...] = ()  # a rule's link whose newer line says one of these stands whatever the model


@dataclass(frozen=True)
class ProfileConfig:
    """Who the user is and how to be with them, always in front of the model (docs/design.md §24)."""

    hints: tuple[str, ...] = ("stable_boundary", "relationship_lesson", "process_event")  # writer hints it holds
    sources: tuple[str, ...] = ("model", "model_adjusted")  # whose hints count (not `rule`: a cue-word guess)
    title: str = "Profile: who {user_name} is and how to be with them"
    history_mark: str = "(earlier; since changed) "  # before a superseded memory's words wherever it is recalled
    max_lines: int = field(default=24, metadata=_rng(0, 1000))
    line_chars: int = field(default=90, metadata=_rng(10, 10000))     # a longer memory shows its fact sentence
    line_chars_latin: int = field(default=140, metadata=_rng(10, 10000))  # the same for a line in Latin script
    recency_days: float = field(default=120, metadata=_rng(1, 100000))
    # an episode the profile holds (hints with process_event / short_state) is shown while it is recent: told this
    # many days ago at most (None: always a candidate)
    episode_days: float | None = field(default=60, metadata=_rng(0, 100000))
    # A line the profile shows is also recalled (moved into Recalled Memory, whole) only on strong evidence: the
    # admission's evidence score at recall_evidence, or written words covering recall_coverage of the message.
    recall_evidence: float = field(default=0.0, metadata=_rng(0, 1.01))
    recall_coverage: float = field(default=0.0, metadata=_rng(0, 1.01))
    recall_lessons: bool = False  # a relationship lesson is recalled whenever admitted: the lesson, applied now
    weights: ProfileWeights = ProfileWeights()
    supersede: SupersedeConfig = SupersedeConfig()
    # Changed facts (profile/frames.py): a newer line that states the same exclusive attribute of the same holder,
    # or says it changed something an older line says, supersedes the older one.
    holders: dict[str, tuple[str, ...]] = field(default_factory=dict)     # holder -> its words (妈妈, mom, 狗, dog)
    attributes: dict[str, tuple[str, ...]] = field(default_factory=dict)  # exclusive attribute -> its cue words
    endings: tuple[str, ...] = ("alive",)  # attributes that end a holder: stated, every older line about it goes
    episodes_end: bool = True  # an episode (process_event, short_state) that tells an ending or a departure ends the
    # profile lines it is about as a stable line would (a pet that died, told as an event)
    departures: tuple[str, ...] = ()  # attributes that take a holder out of the user's life (moved out): the user's
    # own older lines naming that holder go (an ending does the same)
    min_term_specificity: float = field(default=2.5, metadata=_rng(0, 100))  # key terms: rarer words only
    exclusive_holders: tuple[str, ...] = ()  # a holder one has one of: a newer line saying it changed replaces all
    # holders that are people: a message about one is never answered by a memory about another one of them that
    # never names it ("表哥什么时候结婚" and "表姐下个月办婚礼": the reader's reader_other_person refusal, design §25)
    people: tuple[str, ...] = ()
    care: tuple[str, ...] = ()         # cue words of lines a companion must not forget (an allergy, a fear, sobriety)
    naming: tuple[str, ...] = ()        # words before a name (叫, named): "我家狗叫可乐" binds 可乐 to the dog
    change_cues: tuple[str, ...] = ()   # words that say something changed (现在, 不再, 搬到, no longer, quit, actually)
    # A question about an old value ("我以前那家公司叫啥来着", "where did i work before this job", "前男友叫啥"): the
    # superseded lines it is about are shown, marked as history (``history_mark``), at most ``history_items``
    history_cues: tuple[str, ...] = ()
    history_items: int = field(default=2, metadata=_rng(0, 100))


__all__ = ["HINT_SOURCES", "PROFILE_HINTS", "ProfileConfig", "ProfileWeights", "SupersedeConfig"]
