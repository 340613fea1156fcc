"""`ombre-brain bench --check FILE`: a bench run held against a recorded one, by ratios to the floor.

Absolute times say more about the machine than about the code (the floor itself moved by half
between runs on one machine), so the guard compares what the bench reports beside its floor: the
turn's p95 over the floor's p95 (``overhead_p95``) and writes per second over the floor's
(``write_ratio``). A ratio worse than the recorded one by more than ``tolerance`` (a fraction of the
recorded ratio) fails the check. A run recorded before the floor was sampled between the turns (no
``floor_after_ms`` in it) is held against this run's ratio to the floor sampled the old way, after the
turns, so like is compared with like. It is for anyone changing the read or the write path, by hand:
never in CI, where no test may depend on timing (design §23).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..errors import ValidationError

__all__ = ["Check", "check_run", "check_shape", "format_checks", "read_recorded"]

DEFAULT_TOLERANCE = 0.15
# what must match for two runs to be comparable, and the ratios compared: (key, higher is worse)
SAME = ("buckets", "embedder", "context", "queries")
RATIOS = (("overhead_p95", True), ("write_ratio", False))


@dataclass(frozen=True)
class Check:
    """One ratio of this run against the recorded run."""

    name: str
    recorded: float
    now: float
    limit: float          # the worst value within tolerance
    ok: bool


def read_recorded(path: str | Path) -> dict:
    """A recorded ``bench --json`` result, or a ValidationError naming the file and what is wrong with it."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValidationError(f"--check {path}: cannot read a recorded bench result ({exc})") from exc
    if not isinstance(data, dict) or "buckets" not in data or not any(k in data for k, _ in RATIOS):
        raise ValidationError(f"--check {path}: not the --json output of a bench run (no buckets and no "
                              f"{' or '.join(k for k, _ in RATIOS)})")
    return data


def check_shape(run: dict, recorded: dict, tolerance: float = DEFAULT_TOLERANCE, *,
                source: str = "the recorded run") -> None:
    """Can this run be held against the recorded one? Checked before the run too: a wrong file fails at once, not
    after an hour of benching."""
    if not 0 <= tolerance < 1:
        raise ValidationError(f"--tolerance must be a fraction in [0, 1), got {tolerance}")
    for key in SAME:
        if key in run and key in recorded and run[key] != recorded[key]:
            raise ValidationError(f"--check: this run's {key} is {run[key]!r}, {source}'s is {recorded[key]!r}; "
                                  "compare runs of the same shape")


def check_run(run: dict, recorded: dict, tolerance: float = DEFAULT_TOLERANCE, *, source: str = "the recorded run"
              ) -> list[Check]:
    """Each ratio both runs measured, held against the recorded one. Runs of different shapes (store size, embedder,
    context, queries) are not comparable: a ValidationError says which key differs."""
    check_shape(run, recorded, tolerance, source=source)
    out = []
    for key, higher_is_worse in RATIOS:
        was, now = recorded.get(key), run.get(key)
        if key == "overhead_p95" and "turn_ms" in recorded and "floor_after_ms" not in recorded:
            key, now = "overhead_p95_floor_after", run.get("overhead_p95_floor_after", now)  # the old method's floor
        if not isinstance(was, int | float) or not isinstance(now, int | float) or isinstance(was, bool):
            continue
        limit = was * (1 + tolerance) if higher_is_worse else was * (1 - tolerance)
        ok = now <= limit if higher_is_worse else now >= limit
        out.append(Check(key, float(was), float(now), round(limit, 3), ok))
    if not out:
        raise ValidationError(f"--check: {source} and this run share no ratio to compare "
                              f"({', '.join(k for k, _ in RATIOS)}); record one with the same --write/--turns")
    return out


def format_checks(checks: list[Check], tolerance: float) -> str:
    lines = [f"check against the recorded run (tolerance {tolerance:.0%} of each ratio):"]
    for c in checks:
        verdict = "ok" if c.ok else "WORSE"
        bound = "at most" if c.name.startswith("overhead_p95") else "at least"
        lines.append(f"  {c.name:<24} recorded {c.recorded:.3f}  now {c.now:.3f}  ({bound} {c.limit:.3f})  {verdict}")
    return "\n".join(lines)
