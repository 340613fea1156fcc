"""The reason codes no single gate owns, with their words: skips, admission, caps, the favorite card,
dreams, the budget and the debug views.

Each gate's own codes live in its entry of :mod:`.gate_table`, and ``gate_table.REASONS`` reads this
table and every gate's together: the gates, the admission stage, the budget, the dream gate and the
debug routes emit codes from it and nothing else (a test walks their source and fails on a code
missing there). The debug pages show ``gate_table.describe``'s words, not the raw code. Pure data.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["ADMISSION_REASONS", "ADMITTING", "GENERAL_REASONS"]

ADMISSION_REASONS: Mapping[str, str] = {
    "not_evaluated": "admission did not look at this item (it was not a search candidate)",
    "context_only_match": "only a comment, affect anchor or favorite reason matched",
    "term_in_title": "a discriminative query term is in the title",
    "term_in_summary": "a discriminative query term is in the summary",
    "term_in_tags": "a discriminative query term is in the tags",
    "term_in_body": "a discriminative query term is in the body",
    "dictionary_match": "what is asked is said in the memory in other words or the other language, through the "
                        "bilingual dictionary (beach→海边), with no key term in conflict",
    "mentioned_in_title": "a statement names a thing this memory's title or tags are about (implicit recall, "
                          "retrieval.implicit_recall)",
    "evidence_above_threshold": "the calibrated evidence that this is the memory asked about reaches the admit "
                                "threshold of retrieval.admission",
    "evidence_below_threshold": "the calibrated evidence that this is the memory asked about is below the admit "
                                "threshold of retrieval.admission",
    "weak_term_coverage": "some query terms matched, but too little of what the query asks about",
    "below_admission_rank": "only the retrieval.admission.max_rank best-ranked candidates of each script are weighed "
                            "for admission",
    "no_topic_evidence": "no discriminative term or reliable semantic score for this bucket",
    "said_in_conversation": "its words are in the conversation the turn hears: the prompt already holds them",
    "dictionary_conflict": "a key term of the message meets a word the dictionary says is a different thing of the "
                           "same kind (sister against 哥哥): a near miss",
    "sensitive_unasked": "tagged sensitive (retrieval.sensitive_tags): recalled only when the user asks about it",
    "reader_answers": "the reader (retrieval.reader) reads the message and this memory as a pair: it answers the "
                      "message (a lookup) or should be brought up for it (a statement, at the stricter bar)",
    "reader_unread": "the reader was on but did not read this memory (below the weighed ranks), and the words a route "
                     "found in it do not say the whole message: not admitted past the reader",
    "reader_below_threshold": "the reader reads the message and this memory as a pair: it does not answer the "
                              "message (below retrieval.reader's bar)",
    "reader_seconds": "admitted by its words (or the dictionary) and the reader, reading the pair, does not object "
                      "(at least retrieval.reader.veto)",
    "reader_vetoes": "its words (or the dictionary) would admit it, but the reader, reading the pair, says it does "
                     "not answer the message (below retrieval.reader.veto): a near miss",
    "reader_other_person": "the message asks about one person (表哥, my brother) and this memory is about another "
                           "one it never names (表姐, my sister): it cannot answer, whatever the reader says "
                           "(gateway.profile.people)",
}
ADMITTING = ("term_in_title", "term_in_summary", "term_in_tags", "term_in_body", "dictionary_match",
             "mentioned_in_title", "evidence_above_threshold", "reader_answers", "reader_seconds")

GENERAL_REASONS: Mapping[str, str] = {
    "not_applicable": "the gate does not apply to this item",
    "selected": "selected for its section",
    "not_selected": "not selected",
    "dont_surface": "the user asked that this memory never surface (dont_surface); it stays stored and exportable",
    # skips (any long-term gate)
    "skip_empty": "the query is empty after normalising; no long-term recall",
    "skip_tone_only": "the query is only tone (想你, 抱抱, lol); no long-term recall",
    "skip_skip_only": "the query is filler, a greeting or a check-in; no long-term recall",
    "skip_vague": "a lookup cue with no topic left (还记得吗); no long-term recall",
    # shared by the direct seed, related target and core gates
    "core_memory_stable_only": "core memory lives only in the stable Core Memory section",
    "core_memory_answers_lookup": "pinned core memory that answers an explicit lookup: shown in Core Memory (within "
                                  "gateway.budgets.core_memory_lookup), never as a direct hit",
    "archive_needs_explicit_old": "archived, resolved or digested memory needs an explicit old lookup",
    # the caps on direct hits, after the gates
    "below_max_direct": "admitted, but retrieval.max_direct (max_unasked for a statement) better direct hits were "
                        "already taken",
    "below_relative_score": "admitted, but its score is below retrieval.min_relative_score of the turn's best hit",
    # admission (the topic evidence gate shows it; the direct seed gate says admitted_<reason>)
    **ADMISSION_REASONS,
    # shared by the related target and recent context gates
    "source_record_never_injected": "source records (raw chat logs, diaries) are never injected",
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
