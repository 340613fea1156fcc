"""The breath profile: how MCP ``breath()`` reads a space when there is no query (design §15).

An empty query in a chat turn recalls nothing, and Core Memory is off in chat turns by default
(``gateway.budgets.core_memory`` 0). ``breath()`` asks a different question, "what should I hold
in mind now", so it runs the very same read pipeline with two changes, both taken from the
``mcp.breath`` config block and nothing else:

- the section budgets (Core Memory, Recent Context, weather, favorite, dream, facts) and the
  recent window come from ``mcp.breath``; recalled and diffused memory are off (no query);
- the plan of the empty query says "recent, please" (``explicit_recent``), so Recent Context
  shows the newest dynamic memories, and a latent dream needs only ``mcp.breath.dream_threshold``
  resonance, since an empty query resonates with almost nothing.

Every gate still decides and every reason code is still the gates' own; the breath turn is a
dry run, so it records no round, cooldown or dream claim. ``breath_search`` is a chat turn's
pipeline too, with one change (:class:`LookupPlanner`): its plan is an explicit lookup.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..config import Config
from ..recall_types import QueryPlan
from .context import TurnParts

if TYPE_CHECKING:
    from ..recall_policy import RecallPolicy

__all__ = ["BreathPlanner", "LookupPlanner", "breath_config", "breath_parts", "lookup_parts"]


def breath_config(cfg: Config) -> Config:
    """The turn config of a breath: the chat config with ``mcp.breath``'s budgets and windows."""
    b = cfg.mcp.breath
    gw = cfg.gateway
    budgets = dataclasses.replace(
        gw.budgets, total=b.total, core_memory=b.core_memory, profile=b.profile, recent_context=b.recent_context,
        relationship_weather=b.relationship_weather, favorite_memory=b.favorite_memory, dream=b.dream,
        facts=b.facts, recalled_memory=0, diffused_memory=0, context_mode=0)
    gateway = dataclasses.replace(
        gw, budgets=budgets, head_recent_hours=b.recent_hours, recent_context_max_items=b.recent_max_items,
        weather_interval_rounds=0, dream_section=b.dream > 0)
    dream = dataclasses.replace(cfg.dream, surface_threshold=b.dream_threshold,
                                attempt_threshold=min(cfg.dream.attempt_threshold, b.dream_threshold))
    return dataclasses.replace(cfg, gateway=gateway, dream=dream)


class BreathPlanner:
    """The space's planner, whose plans ask for recent memories (and the favorite card when it has a budget)."""

    def __init__(self, policy: RecallPolicy, *, favorite: bool) -> None:
        self._policy = policy
        self._favorite = favorite

    def plan_query(self, query: str, context: Sequence[dict] | None = None) -> QueryPlan:
        plan = self._policy.plan_query(query, context)
        return dataclasses.replace(plan, explicit_recent=True, favorite_request=self._favorite or plan.favorite_request)


def breath_parts(parts: TurnParts) -> TurnParts:
    """The turn parts of a breath: the same store, sessions and engines, the breath config and planner."""
    cfg = breath_config(parts.config)
    planner = BreathPlanner(parts.policy, favorite=cfg.mcp.breath.favorite_memory > 0)
    return dataclasses.replace(parts, config=cfg, policy=planner)  # type: ignore[arg-type]


class LookupPlanner:
    """The space's planner for an explicit search (MCP ``breath_search``): a plan that reads anything is a lookup.

    A search is asked for by name, cue words or not ("过敏" alone plans as casual chat), so a pinned memory that
    answers it reaches Core Memory as it would for "我对什么过敏来着" (turn/gates.py, turn/side.py).
    """

    def __init__(self, policy: RecallPolicy) -> None:
        self._policy = policy

    def plan_query(self, query: str, context: Sequence[dict] | None = None) -> QueryPlan:
        plan = self._policy.plan_query(query, context)
        return plan if plan.skip_reason else dataclasses.replace(plan, memory_lookup=True)


def lookup_parts(parts: TurnParts) -> TurnParts:
    """The turn parts of an explicit search: the chat turn's, with :class:`LookupPlanner`."""
    return dataclasses.replace(parts, policy=LookupPlanner(parts.policy))  # type: ignore[arg-type]
