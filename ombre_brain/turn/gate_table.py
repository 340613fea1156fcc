"""The built-in gates, one entry each, in the order they are read (docs/design.md §5).

Each entry names the gate, the stages it judges, the reason codes only it gives (with their words)
and its function in :mod:`.gates`. ``REASONS`` (every code's words), ``describe``, the keys of each
``runtime_gate`` and the gates each stage runs are all read from :data:`GATES`; a new gate is one
more entry (``GATES.register``), and a test can add one for a ``with`` block (``GATES.added``).
"""

from __future__ import annotations

from ..memory_layers import EPISODE_ROLE_HINTS
from ..recall_types import GateResult, RuntimeGate
from . import gates as G
from .gate_registry import GateInput, GateRegistry, GateSpec
from .reasons import ADMISSION_REASONS, ADMITTING, GENERAL_REASONS

__all__ = ["GATES", "REASONS", "allowed_reason", "block_reason", "build_runtime_gate", "describe"]

GATES = GateRegistry(GENERAL_REASONS)


def _cooldown(x: GateInput) -> GateResult:
    r = G.cooldown_gate(x.plan, x.bucket.id, x.layer, x.state, x.cfg)
    if x.stage == "favorite" and r.allowed is False and x.plan.favorite_request:
        return GateResult(True, "favorite_asked_for")  # asked for, it is answered: a cooldown only stops resurfacing
    return r


GATES.register(GateSpec(
    "direct_seed", frozenset({"direct"}), primary=frozenset({"direct"}),
    fn=lambda x: G.direct_seed_gate(x.plan, x.candidate, x.layer, x.state, x.cfg),
    doc="May this candidate be a direct recall? Only admitted, topic-evidenced content may.",
    reasons={
        "layer_never_direct": "the layer policy says direct_seed: never (weather, affect, source records)",
        "dream_resonance_only": "a dream surfaces by resonance in its own section, never as a direct hit",
        "favorite_tag_only": "only the favorite tag matched; a favorite needs its own content to be a hit",
        **{f"admitted_{k}": f"a direct hit: {ADMISSION_REASONS[k]}" for k in ADMITTING},
    }))

GATES.register(GateSpec(
    "topic_evidence", frozenset({"direct"}),
    fn=lambda x: G.topic_evidence_gate(x.plan, x.candidate, x.layer, x.state, x.cfg),
    doc="Admission's verdict on the candidate, as a gate; weather is never topic proof.",
    reasons={"weather_colour_only": "relationship weather colours the reply and is never topic proof"}))

GATES.register(GateSpec(
    "recall_context", frozenset({"direct"}),
    fn=lambda x: G.recall_context_gate(x.plan, x.candidate, x.layer, x.state, x.cfg, parent_direct=x.parent_direct,
                                       moment=x.moment, in_favorite_card=x.in_favorite_card),
    doc="May a context-only moment (comment, affect anchor, favorite reason, feeling) be shown?",
    reasons={
        "beside_reliable_parent": "a context-only moment shown beside a reliable direct hit on its parent",
        "context_only_needs_parent": "a context-only moment or feeling without a reliable direct hit on its parent",
        "favorite_card_reason": "a favorite reason shown inside its own favorite card",
    }))

GATES.register(GateSpec(
    "related_target", frozenset({"related"}), primary=frozenset({"related"}),
    fn=lambda x: G.related_target_gate(x.plan, x.bucket, x.layer, x.state, x.cfg, path_ok=x.path_ok),
    doc="May a bucket reached along edges appear as related (summary-only) memory?",
    reasons={
        "layer_never_diffused": "the layer policy says diffusion: never",
        "dream_chain_only": "a dream is reachable only along a reliable chain",
        "favorite_not_diffused": "a favorite appears as its own card, or as a direct hit; never as related memory",
        "related_summary": "related memory along an edge, shown as a summary only",
    }))

GATES.register(GateSpec(
    "recent_context", frozenset({"recent", "carried"}), primary=frozenset({"recent", "carried"}),
    fn=lambda x: G.recent_context_gate(x.plan, x.bucket, x.layer, x.state, x.cfg,
                                       has_topic_evidence=x.has_topic_evidence, carried=x.carried,
                                       asked_again=x.asked_again, open_thread=x.open_thread),
    doc="May this bucket appear in Recent Context? Dynamic memory only, unless asked explicitly; a memory recalled "
        "in the session's last rounds is carried while the conversation stays on it.",
    reasons={
        "carried_on_topic": "recalled in this session's last gateway.carry_rounds rounds, and the conversation is "
                            "still on it (the message points back or says one of its words): carried in compact form",
        "carried_off_topic": "recalled in this session's last rounds, but the conversation has moved on",
        "asked_again": "the message asks for it again while a cooldown keeps it out of Recalled Memory: shown compact "
                       "here, since a cooldown stops repeats, never an answer",
        "explicit_recent": "the query asks about recent times (最近, lately)",
        "reentry_after_idle": "the space's previous turn was at least recent_reentry_idle_hours ago",
        "open_thread": "on re-entry: one of the space's newest open_thread_items episodes of the last "
                       "open_thread_days that point ahead (cues.open_thread: an appointment, a trip, results to come); "
                       "the user may come back to it",
        "recent_with_topic_evidence": "a recent dynamic memory that carries topic evidence itself",
        "recent_context_cooling": "automatic Recent Context fired in this session within its cooldown hours",
        "recent_dynamic_only": "automatic Recent Context carries dynamic memory only",
        "not_recent": "created and last active before the head_recent_hours window",
        "no_trigger": "no explicit recent query, no re-entry and no topic evidence (a first turn is not re-entry)",
    }))

GATES.register(GateSpec(
    "anchor", frozenset({"recent"}),
    fn=lambda x: GateResult(False, "anchor_only_when_asked") if x.bucket.anchor else None,
    doc="An anchor (the anchor flag, at most 24 per space) is found by search and never surfaces unasked.",
    reasons={"anchor_only_when_asked": "an anchor is a coordinate: search finds it, it never surfaces unasked "
                                       "(Recent Context, breath)"}))

GATES.register(GateSpec(
    "weather", frozenset({"weather"}), primary=frozenset({"weather"}),
    fn=lambda x: G.weather_gate(x.plan, x.bucket, x.layer, x.state, x.cfg),
    doc="May this relationship weather colour the turn? Interval and age gated; skips do not stop it.",
    reasons={
        "weather_every_turn": "weather_interval_rounds is 0: weather shows on every turn",
        "weather_interval": "this round is a weather round (every weather_interval_rounds rounds)",
        "weather_interval_wait": "not a weather round yet",
        "weather_too_old": "the weather is older than weather_max_age_hours",
    }))

GATES.register(GateSpec(
    "cooldown", frozenset({"direct", "related", "recent", "favorite", "dream"}), fn=_cooldown,
    doc="Per space and session: skip recent rounds, then a rank multiplier until cooldown_hours pass.",
    reasons={
        "fresh": "not injected in this session before",
        "skipped_recent_rounds": "injected within the last skip_recent_rounds rounds of this session",
        "cooldown_multiplier": "injected within cooldown_hours: allowed, ranked lower by cooldown_multiplier",
        "cooled_down": "injected before, but the cooldown has passed (or cooldown_hours is 0)",
        "surfaced_once": "a dream surfaces once per session",
        "favorite_asked_for": "the user asked for a favorite memory: shown even within skip_recent_rounds",
    }))


def _shown_whole_elsewhere(x: GateInput) -> bool:
    """An episode the profile shows (a `process_event` while recent) is not kept out of another section that takes
    it: a direct hit the reader admitted ("那后来呢"), the newer version diffusion reached, an open thread on
    re-entry, a story asked again. The profile's line says it happened; the section shows it whole, and the profile
    then leaves it out (``in_<section>``). A stable fact or a lesson is said by its line alone."""
    return getattr(x.bucket, "memory_layer", None) in EPISODE_ROLE_HINTS


GATES.register(GateSpec(
    "profile", frozenset({"direct", "related", "recent", "carried"}),
    fn=lambda x: GateResult(False, "shown_in_profile") if x.in_profile and not _shown_whole_elsewhere(x) else None,
    doc="The profile (who the user is, how to be with them, what happened lately) shows a stable fact, a lesson or a "
        "recent event on every turn, within its own budget; a fact or lesson it shows is not repeated in another "
        "section (an event shown whole there leaves the profile). On a profile line: why it is in or out.",
    reasons={
        "profile_fits": "a stable fact or lesson: the whole current profile fits gateway.budgets.profile",
        "profile_line": "a stable fact or lesson chosen for the profile this turn by its score (the turn's search, "
                        "importance, recency, restatements, recalls)",
        "profile_budget_cut": "a current profile line left out this turn: the profile's budget or max_lines was full "
                              "of higher-scoring lines",
        "profile_superseded": "a newer memory states the same attribute, or says this one changed: kept as history, "
                              "not shown as current",
        "profile_earlier": "a superseded line shown as history (gateway.profile.history_mark): the message asks for "
                           "an old value of what it is about (gateway.profile.history_cues: 以前, 前男友, used to)",
        "profile_episode_past": "an episode the profile holds (gateway.profile.hints) told more than "
                                "gateway.profile.episode_days ago: what happened lately is shown, not all of it",
        "profile_same_line": "another profile entry has this very line (one message kept as a fact and as a lesson): "
                             "said once, by that one",
        "shown_in_profile": "the profile shows this memory's line this turn: not repeated here (below "
                            "gateway.profile.recall_evidence / recall_coverage)",
        "in_recalled_memory": "a profile line the message is about: shown whole in Recalled Memory this turn, not "
                              "repeated in the profile",
        "in_recent_context": "an episode the profile shows, in Recent Context whole this turn (new, an open thread on "
                             "re-entry, a story asked again inside a cooldown): not repeated in the profile",
        "in_diffused_memory": "an episode the profile shows, reached whole by diffusion from this turn's direct hits "
                              "(the newer version of what it recalls): not repeated in the profile",
    }))

REASONS = GATES.reasons
"""Every reason code with its words: the general table and each registered gate's, read live."""

describe = GATES.describe
build_runtime_gate = GATES.build


def block_reason(gate: RuntimeGate) -> str:
    """An item's reason for being left out: its first refusal in precedence (the order of ``gate.gates``)."""
    for g in gate.gates.values():
        if g.allowed is False:
            return g.reason
    return gate.reason or "not_selected"


def allowed_reason(gate: RuntimeGate) -> str:
    """An item's reason for being shown: its first allowance in precedence, else its first verdict."""
    for g in gate.gates.values():
        if g.allowed:
            return g.reason
    for g in gate.gates.values():
        if g.reason != "not_applicable":
            return g.reason
    return "selected"
