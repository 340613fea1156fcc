"""Claims on a memory (design §10): which sources wrote it, and when a repeated write may join them.

The same text (title, body, tags and type) written again is one bucket: each writer's ``source``
becomes a claim on it (the ``bucket_sources`` table; ``''`` is a write without a source), and a
purge by source deletes only what no claim holds any more. A repeat that gives other values for
fields it names would lose them, so it is refused instead. Pure: the store runs the SQL.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..buckets import Bucket
from ..errors import DuplicateError

# What makes two writes the same memory (``Bucket.content_hash``): a write of only these never conflicts.
CONTENT_FIELDS = ("title", "body", "tags", "type")
# Fields a repeated write may differ in: where it lives and who sent it, and the write event itself
# (its id and times; the caller gets the stored id back, so a different one is not silently lost).
CLAIM_FREE_FIELDS = frozenset({"space", "source", "id", "created", "last_active"})


def differing_fields(stored: Bucket, new: Bucket, given: Iterable[str]) -> list[str]:
    """Of the fields a writer ``given`` explicitly, those where ``new`` differs from the ``stored`` duplicate.

    Fields the writer left out are not compared: their defaults say nothing the writer meant.
    """
    old, fresh = stored.to_dict(), new.to_dict()
    return sorted(k for k in set(given) - CLAIM_FREE_FIELDS if k in fresh and old.get(k) != fresh[k])


def check_claim(new: Bucket, stored: Bucket, given: Iterable[str], where: str = "") -> None:
    """Refuse a duplicate write that would drop a field it gives (:class:`DuplicateError`, 409)."""
    differ = differing_fields(stored, new, given)
    if differ:
        raise DuplicateError(
            f"{where}the same memory is already stored as {stored.id!r} with other values for "
            f"{', '.join(differ)}; change them there (PATCH /v1/buckets/{stored.id}) or write without them",
            existing_id=stored.id, fields=differ)


__all__ = ["CLAIM_FREE_FIELDS", "CONTENT_FIELDS", "check_claim", "differing_fields"]
