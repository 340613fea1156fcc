"""Words for every code a person meets on the debug pages: reasons, layer policy values, layers, context modes.

The reason codes' words live with the gates that give them (``gate_table.REASONS``, read live, so a
registered gate's codes are there too); the layer policy's values (``layers.<layer>.direct_seed`` …), the
layers themselves, context modes and render shapes are described here. :func:`words` reads both, so a
page shows one table's text beside every code, and a test checks that no value the config accepts is
left without words. Each text says what the value does today (docs/design.md §4, §5), not what it was
meant to do. Pure data.
"""

from __future__ import annotations

from collections.abc import Mapping

from .gate_table import GATES

__all__ = ["LAYER_WORDS", "MODE_WORDS", "POLICY_WORDS", "SHAPE_WORDS", "SPREAD_WORDS", "words"]

POLICY_WORDS: Mapping[str, Mapping[str, str]] = {
    "direct_seed": {
        "content": "may be a direct hit when admission finds topic evidence for it",
        "explicit_or_interval": "never a direct hit: shown only as a line of the stable Core Memory section",
        "never": "never a direct hit",
        "resonance": "never a direct hit: surfaces in its own section when the turn resonates with it",
        "explicit_old": "a direct hit only when the message asks about the past (an explicit old lookup)",
    },
    "render": {
        "direct": "the memory's own words: verbatim when short, else a window around the matched moment",
        "stable_rule": "one line, title and summary, in Core Memory",
        "weather": "the weather text with its temperature",
        "auxiliary": "never rendered alone; rides beside its parent memory",
        "favorite_card": "a card: title, the moment and why it stays with the companion",
        "dream_original": "the dream's own words",
        "none": "never rendered",
        "summary": "a summary line, never the full text",
    },
    "cooldown": {
        "normal": "cooled per session: skipped for skip_recent_rounds rounds, then ranked lower until "
                  "cooldown_hours pass",
        "skip_recent_rounds": "cooled per session: skipped for skip_recent_rounds rounds, then ranked lower until "
                              "cooldown_hours pass",
        "separate": "cooled like dynamic memory, except when the user asks for a favorite",
        "rare": "not cooled (it shows only where its section allows)",
        "interval": "not cooled: its own interval (weather_interval_rounds) paces it",
        "none": "not cooled (never shown anyway)",
        "follows_parent": "not cooled: it follows the memory it rides beside",
        "surfaces_once": "shown at most once per session",
        "sinks": "cooled like dynamic memory once an old lookup brings it up",
    },
    "diffusion": {
        "source": "spreads to its neighbours and may be reached as related memory",
        "never": "neither spreads nor is reached as related memory",
        "chain_only": "reached as related memory only along a reliable chain",
        "careful_source": "may spread to its neighbours; never shown as related memory itself",
        "rare": "reached as related memory only on an explicit old lookup",
        "source_if_direct": "spreads when it is a direct hit; never shown as related memory (it has its card)",
    },
    "section": {},  # section keys are their own words: Recalled Memory, Diffused Memory, …
}
"""Each layer policy field's values (``layers.<layer>.<field>`` in the config), with what the gates do with them."""

LAYER_WORDS: Mapping[str, str] = {
    "core_memory": "pinned, protected or permanent: the stable Core Memory section",
    "long_term_anchor": "an anchor, a boundary or a relationship lesson: recalled on evidence",
    "dynamic_memory": "an event or a passing state: recalled on evidence, cooled after it shows",
    "relationship_weather": "the relationship's mood: colours the reply, never topic proof",
    "affect_context": "a feeling: rides beside the memory it belongs to",
    "favorite_memory": "the companion's favorite, with its reason: a card on request or interval",
    "dream": "a dream: surfaces by resonance, once",
    "source_record": "a raw record (chat log, diary): never injected",
    "archive": "archived, resolved or digested: only on an old lookup",
    "letter": "a letter: read only through the letter tools and routes, under its side's lock; never injected",
    "plan": "a promise or to-do: listed by dream() while active, closed by a memory that says it happened; never "
            "injected",
    "self_model": "a formal self-model entry (I): attached at the start of a session by breath(); never recalled",
}

MODE_WORDS: Mapping[str, str] = {
    "conflict_repair": "the message is in a conflict: acknowledge first",
    "reflective_repair": "the message repairs or reflects on a conflict",
    "memory_lookup": "the message asks about the past",
    "intimate": "the message is close and warm",
    "playful": "the message is playful",
    "task": "the message asks for practical help",
    "casual": "small talk",
}

SHAPE_WORDS: Mapping[str, str] = {
    "bucket_original": "the whole memory, verbatim",
    "bucket_window": "the matched moment with some text around it",
    "bucket_capsule": "title, the moment verbatim and the nearest clauses",
    "summary": "a summary line",
    "chain_bundle": "the path from a direct hit to this memory",
    "recent_compact": "title and first clause",
    "asked_window": "asked for again: the matched moment with some text around it",
    "weather": "the weather text",
    "favorite_card": "the favorite card",
    "dream_original": "the dream's words",
    "stable_rule": "one Core Memory line",
    "fact": "a confirmed fact",
    "note": "a note line (mode, persona, UNKNOWN)",
}

SPREAD_WORDS: Mapping[str, str] = {
    "seed": "a direct hit that spreads activation to its neighbours",
    "layer_diffusion_never": "its layer says diffusion: never, so it does not spread",
    "retrieval_mode_bucket": "retrieval.mode is bucket: related memory is off",
}
"""Whether a direct hit seeds diffusion (the Diffusion page's spread column)."""

_KINDS: Mapping[str, Mapping[str, str]] = {"layer": LAYER_WORDS, "mode": MODE_WORDS, "shape": SHAPE_WORDS,
                                           "spread": SPREAD_WORDS, **POLICY_WORDS}


def words(code: str | None, kind: str | None = None) -> str:
    """The words for a code: a layer policy value (``kind`` its field), a layer, a mode or a shape when ``kind``
    says so, else a reason code (the gates' table, read live); "" for None or a code nobody described."""
    if not code:
        return ""
    if kind is not None:
        table = _KINDS.get(kind, {})
        if code in table:
            return table[code]
    if code in GATES.reasons:
        return GATES.describe(code)
    return ""
