"""The demo persona: ``ombre_brain/demo/persona.yaml`` seeded into a Brain (``make demo``, the tests, the bench).

A scenario file like any other (docs/design.md §11), written into an empty space only, so running the
demo again never duplicates it.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from ..config.parse import load_yaml_text
from ..replay.scenario import seed_scenario

if TYPE_CHECKING:
    from ..brain import Brain

__all__ = ["DEMO_PERSONA", "seed_persona"]

DEMO_PERSONA = Path(__file__).resolve().parent / "persona.yaml"


def seed_persona(brain: Brain, path: Path = DEMO_PERSONA) -> tuple[str, int]:
    """Write the demo persona (idempotent: only an empty space is seeded); returns its space and bucket count."""
    data = load_yaml_text(path.read_text(encoding="utf-8"))
    space = data.get("space", "haven:xiaoyu")
    if brain.store.count(space) == 0:
        seed_scenario(brain, data, datetime.now(timezone.utc), space, path)
    return space, brain.store.count(space)
