"""Anchors: the few memories marked as coordinates, with Ombre-Brain's hard cap of 24 per space (design §19).

An anchor is the ``anchor`` flag on an existing memory, set by ``anchor(bucket_id)`` and cleared
by ``release(bucket_id)`` (or ``trace(anchor=…)``, which passes the same cap). It is a choice
the companion makes about one memory, and it is scarce on purpose: the 25th is refused until one
is released. What the flag does to reading is the layer's work: an anchored memory is read as
``long_term_anchor`` unless a stronger storage signal decides first (pinned, archived, a
favorite), and that layer is recalled on topic evidence, as a search finds it, but never in
automatic Recent Context or ``breath()``: anchors do not surface unasked. The long-term anchor
layer is larger than the anchors: every stable boundary and relationship lesson the writer
recognised sits there too, without a flag and without counting against the cap.

The store keeps an ``anchor`` role on flagged buckets (``memory_layers.storage_roles``), so the
count is an index read, not a scan of the space.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from ..buckets import Bucket, validate_space
from ..errors import ConflictError, NotFoundError, ValidationError
from ..store.interfaces import TurnReads
from .fields import KIND_TYPES

__all__ = ["ANCHOR_LIMIT", "AnchorCapError", "Anchors"]

ANCHOR_LIMIT = 24
"""Ombre-Brain's hard cap (``BucketManager.ANCHOR_LIMIT``): scarcity makes an anchor mean something."""


class AnchorCapError(ConflictError):
    """Raised when a 25th memory of a space would become an anchor."""

    code = "anchor_cap"


class Anchors:
    """Setting and releasing the anchor flag under the cap, and counting a space's anchors."""

    def __init__(self, *, store: TurnReads, update: Callable[..., Bucket], lock: Callable) -> None:
        self.store = store
        self._update = update
        self._lock = lock  # the store's bucket lock: two anchor() calls never both take the last place

    def anchored(self, space: str) -> list[Bucket]:
        """The space's anchors, newest first."""
        validate_space(space)
        if not self.store.known_space(space):
            return []
        return [b for b in self.store.list(space, role="anchor", limit=None) if b.anchor]

    def require_room(self, space: str, bucket_id: str) -> int:
        """The count of anchors now; AnchorCapError when the space already holds the cap (and this is not one)."""
        anchored = self.anchored(space)
        if len(anchored) >= ANCHOR_LIMIT and bucket_id not in {b.id for b in anchored}:
            raise AnchorCapError(
                f"anchor cap reached: space {space!r} already holds {len(anchored)} anchors and the cap is "
                f"{ANCHOR_LIMIT}; release(bucket_id) one of them first (newest: "
                f"{', '.join(b.id for b in anchored[:3])}…)")
        return len(anchored)

    def anchor(self, space: str, bucket_id: str, now: datetime | None = None) -> tuple[Bucket, bool, int]:
        """Mark an existing memory as an anchor: (the memory, whether it changed, the space's count after)."""
        with self._lock(space, ["anchors:cap"]):
            bucket = self._memory(space, bucket_id)
            if bucket.anchor:
                return bucket, False, len(self.anchored(space))
            n = self.require_room(space, bucket_id)
            return self._update(space, bucket_id, anchor=True, now=now), True, n + 1

    def release(self, space: str, bucket_id: str, now: datetime | None = None) -> tuple[Bucket, bool, int]:
        """Clear the anchor flag (idempotent): (the memory, whether it changed, the space's count after)."""
        with self._lock(space, ["anchors:cap"]):
            bucket = self._memory(space, bucket_id)
            if not bucket.anchor:
                return bucket, False, len(self.anchored(space))
            updated = self._update(space, bucket_id, anchor=False, now=now)
            return updated, True, len(self.anchored(space))

    def _memory(self, space: str, bucket_id: str) -> Bucket:
        validate_space(space)
        bucket = self.store.get(space, bucket_id) if self.store.known_space(space) else None
        if bucket is None:
            raise NotFoundError(f"no bucket {bucket_id!r} in space {space!r}; hold it first, then anchor it")
        if bucket.type in KIND_TYPES:
            raise ValidationError(f"{bucket_id!r} is a {bucket.type}: only a memory can be an anchor",
                                  field="bucket_id")
        return bucket
