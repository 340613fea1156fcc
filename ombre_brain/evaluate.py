"""Where outside evaluation scripts import from: the evaluation helpers now live in :mod:`ombre_brain.tools.evaluate`.

Kept so scripts that do ``from ombre_brain.evaluate import Memory, Rankers, memory_bucket, load_locomo,
parse_locomo_time`` keep working.
"""

from __future__ import annotations

from .tools.evaluate import Memory, Rankers, load_locomo, memory_bucket, parse_locomo_time

__all__ = ["Memory", "Rankers", "load_locomo", "memory_bucket", "parse_locomo_time"]
