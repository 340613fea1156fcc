"""Every reason code a turn can give, with its human text, and the one gate precedence.

The gates (:mod:`ombre_brain.turn.gates`), the admission stage, the budget, the dream gate and
the debug routes all emit codes from this table and nothing else; a test walks their source and
fails on a code missing here. The debug pages show :func:`describe`'s text, not the raw code.
Pure data.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["ADMISSION_REASONS", "PRECEDENCE", "REASONS", "describe"]

PRECEDENCE = ("direct_seed", "topic_evidence", "recall_context", "related_target", "recent_context", "weather",
              "cooldown")
"""The order gates are read in: the first refusal is an item's reason, else the first allowance."""

ADMISSION_REASONS: Mapping[str, str] = {
    "not_evaluated": "admission did not look at this item (it was not a search candidate)",
    "context_only_match": "only a comment, affect anchor or favorite reason matched",
    "term_in_title": "a discriminative query term is in the title",
    "term_in_summary": "a discriminative query term is in the summary",
    "term_in_tags": "a discriminative query term is in the tags",
    "term_in_body": "a discriminative query term is in the body",
    "evidence_above_threshold": "the calibrated evidence that this is the memory asked about reaches the admit "
                                "threshold of retrieval.admission",
    "evidence_below_threshold": "the calibrated evidence that this is the memory asked about is below the admit "
                                "threshold of retrieval.admission",
    "weak_term_coverage": "some query terms matched, but too little of what the query asks about",
    "below_admission_rank": "only the retrieval.admission.max_rank best-ranked candidates of each script are weighed "
                            "for admission",
    "no_topic_evidence": "no discriminative term or reliable semantic score for this bucket",
}
ADMITTING = ("term_in_title", "term_in_summary", "term_in_tags", "term_in_body", "evidence_above_threshold")

REASONS: Mapping[str, str] = {
    "not_applicable": "the gate does not apply to this item",
    "selected": "selected for its section",
    "not_selected": "not selected",
    "dont_surface": "the user asked that this memory never surface (dont_surface); it stays stored and exportable",
    # skips (any long-term gate)
    "skip_empty": "the query is empty after normalising; no long-term recall",
    "skip_tone_only": "the query is only tone (想你, 抱抱, lol); no long-term recall",
    "skip_skip_only": "the query is filler, a greeting or a check-in; no long-term recall",
    "skip_vague": "a lookup cue with no topic left (还记得吗); no long-term recall",
    # direct seed
    "layer_never_direct": "the layer policy says direct_seed: never (weather, affect, source records)",
    "dream_resonance_only": "a dream surfaces by resonance in its own section, never as a direct hit",
    "core_memory_stable_only": "core memory lives only in the stable Core Memory section",
    "archive_needs_explicit_old": "archived, resolved or digested memory needs an explicit old lookup",
    "favorite_tag_only": "only the favorite tag matched; a favorite needs its own content to be a hit",
    "below_max_direct": "admitted, but retrieval.max_direct better direct hits were already taken",
    "below_relative_score": "admitted, but its score is below retrieval.min_relative_score of the turn's best hit",
    # admission (topic evidence; the direct seed gate says admitted_<reason>)
    **ADMISSION_REASONS,
    **{f"admitted_{k}": f"a direct hit: {ADMISSION_REASONS[k]}" for k in ADMITTING},
    "weather_colour_only": "relationship weather colours the reply and is never topic proof",
    # recall context
    "beside_reliable_parent": "a context-only moment shown beside a reliable direct hit on its parent",
    "context_only_needs_parent": "a context-only moment or feeling without a reliable direct hit on its parent",
    "favorite_card_reason": "a favorite reason shown inside its own favorite card",
    # related target
    "source_record_never_injected": "source records (raw chat logs, diaries) are never injected",
    "layer_never_diffused": "the layer policy says diffusion: never",
    "dream_chain_only": "a dream is reachable only along a reliable chain",
    "favorite_not_diffused": "a favorite appears as its own card, or as a direct hit; never as related memory",
    "related_summary": "related memory along an edge, shown as a summary only",
    # recent context
    "explicit_recent": "the query asks about recent times (最近, lately)",
    "reentry_after_idle": "the space's previous turn was at least recent_reentry_idle_hours ago",
    "recent_with_topic_evidence": "a recent dynamic memory that carries topic evidence itself",
    "recent_context_cooling": "automatic Recent Context fired in this session within its cooldown hours",
    "recent_dynamic_only": "automatic Recent Context carries dynamic memory only",
    "not_recent": "created and last active before the head_recent_hours window",
    "no_trigger": "no explicit recent query, no re-entry and no topic evidence (a first turn is not re-entry)",
    # weather
    "weather_every_turn": "weather_interval_rounds is 0: weather shows on every turn",
    "weather_interval": "this round is a weather round (every weather_interval_rounds rounds)",
    "weather_interval_wait": "not a weather round yet",
    "weather_too_old": "the weather is older than weather_max_age_hours",
    # cooldown
    "fresh": "not injected in this session before",
    "skipped_recent_rounds": "injected within the last skip_recent_rounds rounds of this session",
    "cooldown_multiplier": "injected within cooldown_hours: allowed, ranked lower by cooldown_multiplier",
    "cooled_down": "injected before, but the cooldown has passed (or cooldown_hours is 0)",
    "surfaced_once": "a dream surfaces once per session",
    # favorite card
    "favorite_request": "the user asked for a favorite memory",
    "favorite_interval": "this round is a favorite round (every favorite_interval_rounds rounds)",
    "favorite_not_requested": "no favorite request and no favorite round",
    # dreams
    "dream_resonance": "the turn resonated with the dream above dream.surface_threshold; it surfaces once",
    "dream_below_threshold": "the dream's resonance with this turn is below dream.surface_threshold",
    "dream_too_young": "the dream is younger than dream.min_age_hours",
    "dream_claimed_elsewhere": "another turn surfaced this dream first",
    "dream_one_per_turn": "another dream resonated more this turn; at most one surfaces per turn",
    "dream_over_budget": "the dream is longer than the Dream section's budget, so it is never cut or claimed",
    "dream_dropped": "the dream missed dream.max_attempts times and will not surface",
    "dream_cooldown": "the dream was already injected in this session",
    # budget
    "budget_section": "trimmed: its section's token budget (gateway.budgets.<section>) was full",
    "budget_total": "trimmed: the total token budget (gateway.budgets.total) was full",
    "budget_cut_to_moment": "shortened to its matched moment to fit the token budget",
    # debug views
    "not_a_candidate": "the pipeline never saw this bucket this turn: no search hit and no side section took it",
    "no_query": "no query was given, so no turn ran; only the static layer is shown",
}


def describe(code: str | None) -> str:
    """The human text of a reason code (the code itself when, unexpectedly, it has none)."""
    if not code:
        return ""
    return REASONS.get(code, code)
