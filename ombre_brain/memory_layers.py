"""Layer inference: what kind of memory a bucket is, decided at read time (design §4).

A layer is never stored. It is read from the bucket every turn, so a persona overlay or a
flag flipped on the bucket changes the layer at once, and `layer_debug` can show exactly
which storage signals decided it.

Storage signals decide first; the writer hint is used only when no storage signal does.
Among storage signals the precedence, highest first, is::

    source_record         type source or journal, or a tag raw_source / chat_log / diary_source
    dream                 type dream
    letter                type letter
    plan                  type plan
    self_model            type self (a formal ``I`` entry; a candidate is an ordinary memory)
    core_memory           pinned, protected, or type permanent
    archive               archived, resolved or digested
    relationship_weather  type feel with a tag relationship_weather / daily_impression / weekly_impression
    affect_context        any other feel bucket
    favorite_memory       a favorite tag (config.favorite_tags) AND a favorite_reason section
    long_term_anchor      the `anchor` flag
    -- writer hint --
    long_term_anchor      hint stable_boundary or relationship_lesson
    dynamic_memory        hint short_state or process_event, or nothing at all (default)

Why this order: a source record, a dream, a letter, a plan or a formal self entry is a different
*kind* of object, whatever flags it carries, so it can never be promoted into recall: a letter is
read through the letter tools under its lock, a plan is listed at the end of a dream until a later
memory closes it, a self entry is attached at the start of a session (the ``kinds`` wing). A
pinned or protected bucket is the user's explicit wish to keep it stable, which beats archiving.
Archive beats the feel and favorite layers because an archived memory must stay hidden until an
old lookup asks for it. Weather and affect are structural (`type: feel`), so a favorite tag does
not turn a feeling into a memory.
A favorite tag without its reason is not a favorite: it falls through to the rows below.
Pinned, protected, favorite and archived flags therefore always beat the writer hint.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from functools import cache

from .buckets import Bucket
from .config import Config, favorite_tags
from .recall_types import LayerDecision

SOURCE_TYPES = frozenset({"source", "journal"})
KIND_LAYERS = {"letter": "letter", "plan": "plan", "self": "self_model"}
"""The kinds read through their own tools (``ombre_brain/kinds``), by type, with their layers."""
SOURCE_TAGS = frozenset({"raw_source", "chat_log", "diary_source"})
WEATHER_TAGS = frozenset({"relationship_weather", "daily_impression", "weekly_impression"})
CORE_FLAGS = ("pinned", "protected")
ARCHIVE_FLAGS = ("archived", "resolved", "digested")
ANCHOR_HINTS = frozenset({"stable_boundary", "relationship_lesson"})
DYNAMIC_HINTS = frozenset({"short_state", "process_event"})


def favorite_reason(bucket: Bucket) -> str | None:
    """The text of the bucket's favorite_reason section(s), or None when it has none."""
    parts = [s.text for s in bucket.sections if s.name == "favorite_reason" and s.text.strip()]
    return "\n\n".join(parts) if parts else None


def favorite_tag_of(bucket: Bucket, cfg: Config) -> str | None:
    """The bucket's favorite tag as written (compared without regard to case), or None."""
    wanted = favorite_tags(cfg)
    for tag in bucket.tags:
        if tag.strip().lower() in wanted:
            return tag
    return None


def is_favorite(bucket: Bucket, cfg: Config) -> bool:
    """A favorite needs both a favorite tag and a reason; the tag alone is only a wish."""
    return favorite_tag_of(bucket, cfg) is not None and favorite_reason(bucket) is not None


STORAGE_ROLES = ("core", "anchor", "self", "weather", "favorite", "profile")
"""Every role :func:`storage_roles` writes, in the order it writes them (rows written before ``anchor``, ``self`` and
``profile`` existed hold the others in this same order)."""

PROFILE_ROLE_HINTS = ("stable_boundary", "relationship_lesson")
"""Writer hints that give a bucket the ``profile`` role: who the user is, how to be with them (docs/design.md §24)."""
PROFILE_ROLE_SOURCES = ("model", "model_adjusted")
"""Whose hint: a writer's (the write decision, a caller that said what it wrote), never the rule's cue-word guess."""
EPISODE_ROLE_HINTS = ("process_event", "short_state")
"""Writer hints that give a bucket the ``profile`` role too: what happened. A ``process_event`` is a profile line while
recent (``gateway.profile.hints``, ``episode_days``); every episode that is not a line is read for the endings it tells
(a pet that died, a flatmate who moved out, told as an event: profile/cache.py); and Recent Context looks through them
for open threads (turn/side.py)."""


def storage_roles(bucket: Bucket) -> str:
    """The side sections a bucket may stand in (and whether it is an anchor), as ``",core,favorite,"`` (``""`` for
    none), for the store's index.

    Core memory, relationship weather and favorites are read every turn from the whole space,
    not from search hits. The store keeps this column so that read is an index lookup of a few
    rows instead of decoding the newest thousand buckets (and missing an older pinned one).
    It is a superset that needs no config: the layer itself is still decided by
    :func:`infer_layer` at read time, so a persona's favorite tags still apply.
    """
    held = {
        "core": bucket.pinned or bucket.protected or bucket.type == "permanent",
        "anchor": bucket.anchor,  # anchors are counted against their cap of 24 per space (kinds/anchors.py)
        "self": bool(bucket.kind_fields and "self" in bucket.kind_fields),  # listed by the I tool (kinds/selfmodel.py)
        "weather": bucket.type == "feel" and bool(bucket.tag_set & WEATHER_TAGS),
        "favorite": favorite_reason(bucket) is not None,
        "profile": (bucket.memory_layer in (*PROFILE_ROLE_HINTS, *EPISODE_ROLE_HINTS)  # the profile's members and
                    and bucket.memory_classification_source in PROFILE_ROLE_SOURCES),  # the episodes it reads endings
    }                                                                                 # from: a writer's hint, no guess
    roles = [r for r in STORAGE_ROLES if held[r]]
    return f",{','.join(roles)}," if roles else ""


@cache
def role_values(role: str) -> tuple[str, ...]:
    """Every value of the roles column that holds ``role``: the store reads a role as an equality on its index
    (a few index seeks) instead of a substring test of every bucket with any role (0.7 ms a list at 100k)."""
    if role not in STORAGE_ROLES:
        raise ValueError(f"unknown storage role {role!r}; known: {', '.join(STORAGE_ROLES)}")
    others = [r for r in STORAGE_ROLES if r != role]
    out = []
    for mask in range(1 << len(others)):
        held = {role} | {r for i, r in enumerate(others) if mask >> i & 1}
        out.append(f",{','.join(r for r in STORAGE_ROLES if r in held)},")
    return tuple(out)


def _storage_signals(bucket: Bucket, cfg: Config) -> list[str]:
    """Every storage signal on the bucket, in a fixed order, for layer_debug."""
    tags = bucket.tag_set
    signals: list[str] = []
    if bucket.type != "dynamic":
        signals.append(f"type:{bucket.type}")
    signals += [f"tag:{t}" for t in sorted(tags & SOURCE_TAGS)]
    signals += [f"flag:{f}" for f in (*CORE_FLAGS, *ARCHIVE_FLAGS) if getattr(bucket, f)]
    signals += [f"tag:{t}" for t in sorted(tags & WEATHER_TAGS)]
    fav = favorite_tag_of(bucket, cfg)
    if fav is not None:
        signals.append(f"tag:{fav.lower()}")
        has_reason = favorite_reason(bucket) is not None
        signals.append("section:favorite_reason" if has_reason else "favorite_reason:missing")
    if bucket.anchor:
        signals.append("flag:anchor")
    if bucket.memory_layer:
        signals.append(f"hint:{bucket.memory_layer}")
    return signals


def _decide(bucket: Bucket, cfg: Config) -> tuple[str, list[str]]:
    """The layer and the signals that decided it, by the precedence in the module docstring."""
    tags = bucket.tag_set
    if bucket.type in SOURCE_TYPES or tags & SOURCE_TAGS:
        deciding = [f"type:{bucket.type}"] if bucket.type in SOURCE_TYPES else []
        return "source_record", deciding + [f"tag:{t}" for t in sorted(tags & SOURCE_TAGS)]
    if bucket.type == "dream":
        return "dream", ["type:dream"]
    if bucket.type in KIND_LAYERS:
        return KIND_LAYERS[bucket.type], [f"type:{bucket.type}"]
    if bucket.pinned or bucket.protected or bucket.type == "permanent":
        deciding = [f"flag:{f}" for f in CORE_FLAGS if getattr(bucket, f)]
        return "core_memory", deciding + (["type:permanent"] if bucket.type == "permanent" else [])
    if any(getattr(bucket, f) for f in ARCHIVE_FLAGS):
        return "archive", [f"flag:{f}" for f in ARCHIVE_FLAGS if getattr(bucket, f)]
    if bucket.type == "feel":
        weather = sorted(tags & WEATHER_TAGS)
        if weather:
            return "relationship_weather", ["type:feel"] + [f"tag:{t}" for t in weather]
        return "affect_context", ["type:feel"]
    if is_favorite(bucket, cfg):
        return "favorite_memory", [f"tag:{favorite_tag_of(bucket, cfg).lower()}", "section:favorite_reason"]
    if bucket.anchor:
        return "long_term_anchor", ["flag:anchor"]
    if bucket.memory_layer in ANCHOR_HINTS:
        return "long_term_anchor", [f"hint:{bucket.memory_layer}"]
    if bucket.memory_layer in DYNAMIC_HINTS:
        return "dynamic_memory", [f"hint:{bucket.memory_layer}"]
    return "dynamic_memory", ["default"]


def infer_layer(bucket: Bucket, config: Config) -> LayerDecision:
    """Decide the bucket's layer; `signals` lists the deciding signals first, then every other one seen."""
    layer, deciding = _decide(bucket, config)
    seen = _storage_signals(bucket, config)
    signals = tuple(dict.fromkeys(deciding + seen))
    writer_hint = {
        "subject": bucket.memory_subject,
        "layer": bucket.memory_layer,
        "classification_source": bucket.memory_classification_source,
    }
    return LayerDecision(layer=layer, signals=signals, writer_hint=writer_hint, policy=config.layers[layer])


class LayerMemo:
    """Each decoded bucket's layer, kept across turns (design §23): Recent Context, the role lists and the candidates
    layer the same memories turn after turn, and a stored bucket is decoded once per text
    (:func:`~.buckets.bucket_from_json`), so the same object comes back while its text is unchanged.

    Keyed by the bucket object itself (held here, so its identity cannot be reused) and by the config it was decided
    under: a bucket read anew, or a turn under another config (the playground's), is decided again. A decision quotes
    its memory's tags and writer hints, so a purge empties the memo (:meth:`clear_cache`)."""

    def __init__(self, size: int = 8192) -> None:
        self._size = size
        self._memo: OrderedDict[int, tuple[Bucket, Config, LayerDecision]] = OrderedDict()
        self._lock = threading.Lock()

    def layer(self, bucket: Bucket, config: Config) -> LayerDecision:
        with self._lock:
            hit = self._memo.get(id(bucket))
            if hit is not None and hit[0] is bucket and hit[1] is config:
                self._memo.move_to_end(id(bucket))
                return hit[2]
        d = infer_layer(bucket, config)
        with self._lock:
            self._memo[id(bucket)] = (bucket, config, d)
            self._memo.move_to_end(id(bucket))
            while len(self._memo) > self._size:
                self._memo.popitem(last=False)
        return d

    def clear_cache(self) -> None:
        with self._lock:
            self._memo.clear()


__all__ = ["LayerMemo", "favorite_reason", "favorite_tag_of", "infer_layer", "is_favorite"]
