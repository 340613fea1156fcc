"""The runtime gates: per item, per turn, each verdict with a stable reason code (design §5).

Every gate is a pure function of the turn's plan, the item, its layer decision, the session
state and the config. It returns a :class:`GateResult` (``allowed`` true, false, or None when
the gate does not apply) whose ``reason`` is one of the codes of the reason table. Each gate is
registered once, with its reason codes and the stages it judges, in :mod:`.gate_table`; the
gateway and the debug pages read these same objects, so what a page shows is what decided.

A plan's ``skip_reason`` blocks long-term recall only (direct seeds, recall context through the
parent, related targets). Recent Context, weather, favorites and cooldown ignore it.

A bucket flagged ``dont_surface`` (the user asked that it never come up) is refused by every
section's gate with the reason ``dont_surface``, through :func:`surface_block`; it stays stored,
exportable and visible in the debug pages.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import TypeVar

from ..buckets import CONTEXT_ONLY_SECTIONS, Bucket, Moment
from ..config import Config, DreamConfig, favorite_tags
from ..memory_layers import EPISODE_ROLE_HINTS
from ..recall_types import (
    NOT_APPLICABLE,
    Candidate,
    GateResult,
    LayerDecision,
    QueryPlan,
    SessionState,
)
from ..timeutil import parse_iso
from .carry import on_topic, says_a_term

T = TypeVar("T")
_NO_COOLDOWN = frozenset({"rare", "interval", "none", "follows_parent"})


def surface_block(bucket: Bucket) -> GateResult | None:
    """Refuse a memory the user asked never to surface (``dont_surface``), in every section; else None."""
    return GateResult(False, "dont_surface") if bucket.dont_surface else None


def _skip(plan: QueryPlan) -> GateResult | None:
    return GateResult(False, f"skip_{plan.skip_reason}") if plan.skip_reason else None


def _as_aware(dt: datetime) -> datetime:
    return dt if dt.tzinfo is not None else dt.replace(tzinfo=timezone.utc)


def _hours_between(earlier: datetime, later: datetime) -> float:
    return (_as_aware(later) - _as_aware(earlier)).total_seconds() / 3600


_parse = parse_iso


def _age_hours(bucket: Bucket, now: datetime) -> float | None:
    """Hours since the bucket was last created or active, whichever is later; None when unknown."""
    times = [t for t in (_parse(bucket.created), _parse(bucket.last_active)) if t is not None]
    if not times:
        return None
    return min(_hours_between(t, now) for t in times)


# ---------------------------------------------------------------- long-term recall


def direct_seed_gate(plan: QueryPlan, cand: Candidate, decision: LayerDecision, state: SessionState,
                     cfg: Config) -> GateResult:
    """May this candidate be a direct recall? Only admitted, topic-evidenced content may."""
    skipped = _skip(plan) or surface_block(cand.bucket)
    if skipped:
        return skipped
    mode = decision.policy.direct_seed
    if mode == "never":
        return GateResult(False, "layer_never_direct")
    if mode == "resonance":
        return GateResult(False, "dream_resonance_only")
    if mode == "explicit_or_interval":  # never a direct hit; one that answers an explicit lookup goes to Core Memory
        answers = cand.admission.admitted and (plan.memory_lookup or plan.context_mode == "memory_lookup")
        return GateResult(False, "core_memory_answers_lookup" if answers else "core_memory_stable_only")
    if mode == "explicit_old" and not plan.explicit_old:
        return GateResult(False, "archive_needs_explicit_old")
    adm = cand.admission
    detail = None
    if adm.evidence is not None:  # the number the verdict used, and the threshold it was held against
        detail = {"evidence": adm.evidence, "features": dict(adm.features or {})}
        if adm.threshold is not None:
            detail.update(threshold=adm.threshold, threshold_name=adm.threshold_name)
    if not adm.admitted:
        passed_on = ("context_only_match", "said_in_conversation", "sensitive_unasked", "dictionary_conflict")
        reason = adm.reason if adm.reason in passed_on else "no_topic_evidence"
        return GateResult(False, reason, detail)
    if decision.layer == "favorite_memory":
        fav = favorite_tags(cfg)
        if cand.best.moment.section == "favorite_reason":
            return GateResult(False, "context_only_match", detail)
        if adm.matched_terms and all(any(t.lower() in f for f in fav) for t in adm.matched_terms):
            return GateResult(False, "favorite_tag_only", detail)
    return GateResult(True, f"admitted_{adm.reason}", detail)


def recalls_beside_profile(cand: Candidate, cfg: Config) -> bool:
    """A stable memory the profile shows is also a direct hit (moved into Recalled Memory, whole) only on strong
    evidence that this message is about it: admitted, and on the evidence score at ``gateway.profile.recall_evidence``
    or on written words covering ``gateway.profile.recall_coverage`` of the message. Below that the profile's line
    says it, and a near miss ("我表哥…" beside 表姐) stays out of Recalled Memory (design §24). A relationship lesson
    is recalled whenever admitted, with ``gateway.profile.recall_lessons``: how to be with them, applied to this
    message ("你是不是觉得我今天有点冷淡" beside "she said my replies felt cold"). An episode the profile shows is
    recalled whenever admitted: the gates never keep one out for its line (``gate_table._shown_whole_elsewhere``)."""
    adm = cand.admission
    if not adm.admitted:
        return False
    pc = cfg.gateway.profile
    if pc.recall_lessons and cand.bucket.memory_layer == "relationship_lesson":
        return True
    if cand.bucket.memory_layer in EPISODE_ROLE_HINTS:
        return True
    if adm.evidence is not None and adm.evidence >= pc.recall_evidence:
        return True
    return adm.coverage is not None and adm.coverage >= pc.recall_coverage


def topic_evidence_gate(plan: QueryPlan, cand: Candidate, decision: LayerDecision, state: SessionState,
                        cfg: Config) -> GateResult:
    """Retrieval's admission verdict, as a gate; weather never counts as topic proof."""
    if decision.layer == "relationship_weather":
        return GateResult(False, "weather_colour_only")
    if cand.admission.reason == "not_evaluated":
        return NOT_APPLICABLE
    return GateResult(cand.admission.admitted, cand.admission.reason)


def _is_context_only(cand: Candidate, decision: LayerDecision, moment: Moment | None) -> bool:
    if decision.layer == "affect_context":
        return True
    if moment is not None:
        return moment.context_only or moment.section in CONTEXT_ONLY_SECTIONS
    return any(h.moment.context_only for h in cand.hits)


def recall_context_gate(plan: QueryPlan, cand: Candidate, decision: LayerDecision, state: SessionState,
                        cfg: Config, *, parent_direct: bool | None = None, moment: Moment | None = None,
                        in_favorite_card: bool = False) -> GateResult:
    """May a context-only moment (comment, affect anchor, favorite reason, feeling) be shown?

    ``parent_direct`` says whether the parent bucket is a reliable direct hit this turn; left
    out, the parent is ``cand.bucket`` itself and its direct seed gate decides. ``moment`` is
    the context moment in question (default: any context-only hit of ``cand``).
    """
    if not _is_context_only(cand, decision, moment):
        return NOT_APPLICABLE
    if in_favorite_card and (moment is None or moment.section == "favorite_reason"):
        return GateResult(True, "favorite_card_reason")
    if parent_direct is None:
        parent_direct = direct_seed_gate(plan, cand, decision, state, cfg).allowed is True
    if parent_direct:
        return GateResult(True, "beside_reliable_parent")
    return GateResult(False, "context_only_needs_parent")


def related_target_gate(plan: QueryPlan, target: Bucket, decision: LayerDecision, state: SessionState,
                        cfg: Config, *, path_ok: bool) -> GateResult:
    """May a bucket reached along edges appear as related (summary-only) memory?

    ``path_ok`` says the bucket was reached along a reliable chain; only chain-only layers
    (dreams) need it.
    """
    skipped = _skip(plan) or surface_block(target)
    if skipped:
        return skipped
    policy = decision.policy
    if decision.layer == "source_record":
        return GateResult(False, "source_record_never_injected")
    if policy.diffusion == "never":
        return GateResult(False, "layer_never_diffused")
    if decision.layer == "core_memory":
        return GateResult(False, "core_memory_stable_only")
    if decision.layer == "archive" and not plan.explicit_old:
        return GateResult(False, "archive_needs_explicit_old")
    if policy.diffusion == "chain_only" and not path_ok:
        return GateResult(False, "dream_chain_only")
    if policy.diffusion == "source_if_direct":
        return GateResult(False, "favorite_not_diffused")
    return GateResult(True, "related_summary")


# ---------------------------------------------------------------- recent context


def recent_trigger(plan: QueryPlan, state: SessionState, cfg: Config) -> GateResult:
    """Does automatic Recent Context fire this turn (before per-item topic evidence)?"""
    gw = cfg.gateway
    if plan.explicit_recent:
        return GateResult(True, "explicit_recent")
    fired = state.recent_context_fired_at
    if fired is not None and _hours_between(fired, state.now) < gw.recent_context_cooldown_hours:
        return GateResult(False, "recent_context_cooling")
    if state.last_seen is not None and _hours_between(state.last_seen, state.now) >= gw.recent_reentry_idle_hours:
        return GateResult(True, "reentry_after_idle")
    return GateResult(False, "no_trigger")


def recent_context_gate(plan: QueryPlan, bucket: Bucket, decision: LayerDecision, state: SessionState,
                        cfg: Config, *, has_topic_evidence: bool, carried: bool = False,
                        asked_again: bool = False, open_thread: bool = False) -> GateResult:
    """May this bucket appear in Recent Context? Dynamic memory only, unless asked explicitly; a memory the session
    recalled in its last rounds (``carried``) while the conversation is still on it (turn/carry.py); a memory a
    lookup asks for again while a cooldown keeps it out of Recalled Memory (``asked_again``: a cooldown stops
    repeats, never an answer); on re-entry, an episode older than the recent window that is still open
    (``open_thread``: it points ahead, and is among the space's newest such episodes, turn/side.py): the user comes back
    with how it went ("results are in", "ok so it went fine, he's home")."""
    blocked = surface_block(bucket)
    if blocked:
        return blocked
    if carried:
        if on_topic(plan, bucket, dictionary=cfg.retrieval.dictionary):
            return GateResult(True, "carried_on_topic")
        return GateResult(True, "asked_again") if asked_again else GateResult(False, "carried_off_topic")
    layer = decision.layer
    if layer == "source_record":
        return GateResult(False, "source_record_never_injected")
    if layer != "dynamic_memory" and not (layer == "long_term_anchor" and plan.explicit_recent):
        return GateResult(False, "recent_dynamic_only")
    age = _age_hours(bucket, state.now)
    if age is not None and age > cfg.gateway.head_recent_hours and open_thread \
            and age <= cfg.gateway.open_thread_days * 24:
        trigger = recent_trigger(plan, state, cfg)
        return GateResult(True, "open_thread") if trigger.reason == "reentry_after_idle" else trigger
    if age is None or age > cfg.gateway.head_recent_hours:
        return GateResult(False, "not_recent")
    trigger = recent_trigger(plan, state, cfg)
    if trigger.allowed or trigger.reason == "recent_context_cooling":
        return trigger
    if has_topic_evidence and layer == "dynamic_memory":
        return GateResult(True, "recent_with_topic_evidence")
    return trigger


# ---------------------------------------------------------------- weather, cooldown, favorite


def weather_gate(plan: QueryPlan, bucket: Bucket, decision: LayerDecision, state: SessionState,
                 cfg: Config) -> GateResult:
    """May this relationship weather colour the turn? Interval and age gated; skips do not stop it.

    weather_max_age_hours 0 means no age limit. With an interval N, weather shows on rounds
    1, N+1, 2N+1, … of the session.
    """
    if decision.layer != "relationship_weather":
        return NOT_APPLICABLE
    blocked = surface_block(bucket)
    if blocked:
        return blocked
    gw = cfg.gateway
    age = _age_hours(bucket, state.now)
    if gw.weather_max_age_hours > 0 and (age is None or age > gw.weather_max_age_hours):
        return GateResult(False, "weather_too_old")
    n = gw.weather_interval_rounds
    if n == 0:
        return GateResult(True, "weather_every_turn")
    if state.round <= 1 or (state.round - 1) % n == 0:
        return GateResult(True, "weather_interval")
    return GateResult(False, "weather_interval_wait")


def cooldown_gate(plan: QueryPlan, bucket_id: str, decision: LayerDecision, state: SessionState,
                  cfg: Config) -> GateResult:
    """Per space and session: skip recent rounds, then a rank multiplier (the result's ``weight``) until
    cooldown_hours pass.

    Layers whose cooldown policy is rare (core), interval (weather), none (sources) or
    follows_parent (affect) are not cooled here; surfaces_once (dreams) blocks any repeat.
    """
    policy = decision.policy.cooldown
    if policy in _NO_COOLDOWN:
        return NOT_APPLICABLE
    last = state.injected.get(bucket_id)
    if last is None:
        return GateResult(True, "fresh")
    if policy == "surfaces_once":
        return GateResult(False, "surfaced_once")
    last_round, last_time = last
    gw = cfg.gateway
    if gw.skip_recent_rounds > 0 and state.round - last_round <= gw.skip_recent_rounds:
        return GateResult(False, "skipped_recent_rounds")
    when = _parse(last_time)
    if gw.cooldown_hours > 0 and when is not None and _hours_between(when, state.now) < gw.cooldown_hours:
        return GateResult(True, "cooldown_multiplier", weight=gw.cooldown_multiplier)
    return GateResult(True, "cooled_down")


def favorite_gate(plan: QueryPlan, state: SessionState, cfg: Config) -> GateResult:
    """Does the favorite card show this turn? On request, or on rounds N, 2N, … when N > 0."""
    if plan.favorite_request:
        return GateResult(True, "favorite_request")
    n = cfg.gateway.favorite_interval_rounds
    if n > 0 and state.round > 0 and state.round % n == 0:
        return GateResult(True, "favorite_interval")
    return GateResult(False, "favorite_not_requested")


# ---------------------------------------------------------------- after the gates: caps, listing, dreams

LISTED_RANK = 8
"""A refused search candidate is listed in the TURN's ``suppressed`` when it ranked at most this high (or
had topic evidence); the long tail stays in the debug trace, so the TURN lists only plausible misses."""

RIDE_ALONG_SECTIONS = ("context", "affect_anchor", "comment")
"""Context-only sections shown beside a reliable direct hit on their bucket (the recall context gate)."""


QUIET_RECENT_REASONS = frozenset({"not_recent", "no_trigger", "not_applicable", "carried_off_topic"})
"""Recent Context refusals too ordinary to list in the TURN (most of the space is neither recent nor asked for)."""


def recent_worth_listing(reason: str, plan: QueryPlan, *, evidence: bool) -> bool:
    """Is a memory of Recent Context's window that the section refused worth naming in the TURN's suppressed list?

    Only when the turn is about it (it carries a query term) or the user asked for what is recent, and the reason is
    not a quiet one: otherwise every turn would name the whole window again (at 100k, 150 memories refused because the
    section is cooling and 50 that are not dynamic memory, a quarter of a megabyte of turn log a turn). Like a search
    candidate ranked too low to list (``LISTED_RANK``), such a refusal says nothing about this turn (design §5.2).
    """
    return reason not in QUIET_RECENT_REASONS and (evidence or plan.explicit_recent)


def worth_listing(cand: Candidate) -> bool:
    """Is a refused candidate plausible enough to name in the TURN's suppressed list (admitted, or ranked high)?"""
    return cand.admission.admitted or cand.rank <= LISTED_RANK


def direct_cap(kept: int, score: float, top: float, cfg: Config, *, lookup: bool = True,
               calibrated: bool = False) -> GateResult | None:
    """After the gates: None when a passing direct hit keeps its place, else why it is cut.

    At most ``retrieval.max_direct`` hits (``retrieval.max_unasked`` for a statement: recall the user did not
    ask for), each at least ``retrieval.min_relative_score`` of the turn's best score (``kept`` is how many
    better hits were already kept), unless its score is the reader's ``calibrated`` probability: that has its own
    bars (design §25), and a search for "海边" keeps both 海边日出 and 海边晚饭 (measured: the same figures of eval
    conversation with the relative cut off).
    """
    if kept >= (cfg.retrieval.max_direct if lookup else cfg.retrieval.max_unasked):
        return GateResult(False, "below_max_direct")
    if not calibrated and score < top * cfg.retrieval.min_relative_score:
        return GateResult(False, "below_relative_score")
    return None


def recent_topic_evidence(plan: QueryPlan, bucket: Bucket) -> bool:
    """Does a recent memory carry the query's topic itself (a term of two or more characters in its text)?"""
    return not plan.skip_reason and says_a_term(plan, bucket)


def ride_along(bucket: Bucket) -> list:
    """The context-only sections that accompany a reliable direct hit on this bucket."""
    return [s for s in bucket.sections if s.name in RIDE_ALONG_SECTIONS]


def dream_gate(score: float, *, young: bool, cooled: bool, cfg: DreamConfig) -> GateResult:
    """May a latent dream surface this turn on its resonance ``score``? (A winner still has to be claimed.)"""
    if young:
        return GateResult(False, "dream_too_young")
    if cooled:
        return GateResult(False, "dream_cooldown")
    if score >= cfg.surface_threshold:
        return GateResult(True, "dream_resonance")
    return GateResult(False, "dream_below_threshold")


def dream_near_miss(score: float, gate: GateResult, cfg: DreamConfig) -> bool:
    """A ready dream that came close (between ``attempt_threshold`` and ``surface_threshold``): one attempt spent."""
    return gate.reason == "dream_below_threshold" and cfg.attempt_threshold <= score < cfg.surface_threshold


def surface_one_dream(ranked: Sequence[T], *, fits: Callable[[T], bool], claim: Callable[[T], bool]
                      ) -> tuple[T | None, dict[int, GateResult]]:
    """Pick at most one dream among those whose gate allowed them, best first.

    ``fits`` says a dream fits its section's budget whole (a dream is never cut); ``claim`` tries
    to win it (one turn in the whole space does). Returns the winner and, by position in
    ``ranked``, why each other one stays latent.
    """
    winner: T | None = None
    why: dict[int, GateResult] = {}
    for i, d in enumerate(ranked):
        if winner is not None:
            why[i] = GateResult(False, "dream_one_per_turn")
        elif not fits(d):
            why[i] = GateResult(False, "dream_over_budget")
        elif claim(d):
            winner = d
        else:
            why[i] = GateResult(False, "dream_claimed_elsewhere")
    return winner, why


__all__ = [
    "LISTED_RANK", "QUIET_RECENT_REASONS", "RIDE_ALONG_SECTIONS", "cooldown_gate", "direct_cap", "direct_seed_gate",
    "dream_gate", "dream_near_miss", "favorite_gate", "recall_context_gate", "recent_context_gate",
    "recent_topic_evidence", "recent_trigger", "recent_worth_listing", "related_target_gate", "ride_along",
    "surface_block", "surface_one_dream", "topic_evidence_gate", "weather_gate", "worth_listing",
]
