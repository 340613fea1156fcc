"""One turn of the read pipeline, as one straight line of plain data (design §2):

    plan_query -> candidates -> admission -> profile -> layers and gates -> diffusion -> render -> budget -> sections

Each stage is one call below; each takes plain data and returns plain data. Every decision is
made once, by the gates, into LayerDecision / RuntimeGate objects; the TURN the gateway injects
and the debug routes both serialise those very objects. A dry run (the debug routes) takes the
same path and only skips the session bookkeeping at the end.

The stages get what they need from :class:`~.context.TurnParts`, which Brain builds once: the config,
the store, the planner, the retriever, the sessions, and the optional dream engine and facts store.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from time import perf_counter

from .carry import CARRIED_TOPIC, carried_ids, points_back, with_carried_topic
from .context import TurnContext, TurnParts
from .conversation import Message
from .items import render_items
from .profile import SECTION as PROFILE
from .profile import profile_stage
from .related import related_stage
from .sections import Turn, assemble
from .select import direct_stage
from .side import announce_side_reads, side_stage


class _Laps:
    """Stage timings in milliseconds, for `timings_ms` and the bench."""

    def __init__(self) -> None:
        self.ms: dict[str, float] = {}
        self._t = perf_counter()

    def __call__(self, name: str) -> None:
        t = perf_counter()
        self.ms[name] = round((t - self._t) * 1000, 3)
        self._t = t


def run_turn(parts: TurnParts, space: str, session: str, query: str, now: datetime, *,
             context: Sequence[Message] = (), dry_run: bool = False) -> Turn:
    lap = _Laps()
    plan = parts.policy.plan_query(query, context)
    state = parts.sessions.load(space, session, now, dry_run=dry_run)
    carried = carried_ids(state, parts.config.gateway.carry_rounds)
    dictionary = parts.config.retrieval.dictionary
    if carried and points_back(plan, dictionary=dictionary):  # a message pointing back is about what was just recalled
        got = parts.store.get_many(space, carried[:CARRIED_TOPIC])
        plan = with_carried_topic(plan, [got[b] for b in carried[:CARRIED_TOPIC] if b in got], parts.store.tokens,
                                  dictionary=dictionary)
    ctx = TurnContext(parts, space, plan, state)
    ctx.carried = carried
    announce_side_reads(ctx)  # they ride with the candidates' read to a shared ledger
    lap("plan")
    retrieval = (parts.retriever.search(space, plan, second_ahead=True)
                 if not plan.skip_reason and parts.store.known_space(space) else None)
    lap("candidates")
    retrieval = parts.admitter.admit(space, plan, retrieval, now) if retrieval is not None else None
    lap("admission")
    candidates = retrieval.candidates if retrieval is not None else ()
    profile = profile_stage(ctx, candidates)
    if profile is not None:
        ctx.profile_ids, ctx.superseded = profile.shown, profile.book.superseded
    lap("profile")
    direct, suppressed = direct_stage(ctx, candidates)
    lap("gates")
    related = related_stage(ctx, direct, suppressed)
    lap("diffusion")
    side = side_stage(ctx, direct, related, suppressed)
    if profile is not None:  # a line shown whole elsewhere is not said twice; one the turn is about says so
        elsewhere = {**{d.bucket.id: "recent_context" for d in side.recent},
                     **{d.bucket.id: "diffused_memory" for d in related},
                     **{d.bucket.id: "recalled_memory" for d in direct}}
        profile = profile.after_gates(elsewhere, ctx.profile_answers, ctx.profile_related)
    lap("side_sections")
    items, unknown = render_items(ctx, direct, related, side, suppressed)
    lap("render")
    turn = assemble(parts.config, plan=plan, state=state, query=query, core=side.core, facts=side.facts, items=items,
                    suppressed=suppressed, unknown=unknown, timings=lap.ms,
                    profile=profile.items if profile is not None else (),
                    profile_budget=profile.selection.budget if profile is not None else None)
    turn.space_known = parts.store.known_space(space)  # a space never written answers, and says so
    lap("budget")
    turn.debug.update(retrieval=retrieval, direct=direct, related=related, trace=ctx.trace, diffusion=ctx.diffusion,
                      profile=profile)
    if not dry_run:
        _record(ctx, turn, side, context)
    lap.ms["record"] = round((perf_counter() - lap._t) * 1000, 3)
    return turn


def shown_items(turn: Turn) -> list[tuple[str, str]]:
    """(bucket id, section) of each memory a turn showed, as the session records it: not the profile's lines (stable
    context: no cooldown, no recall count). A replay's session state follows the same rule (``replay/pairs.Chain``)."""
    return [(it.bucket_id, sec.key) for sec in (*turn.stable, *turn.sections) for it in sec.items
            if it.bucket_id and sec.key != PROFILE]


def _record(ctx: TurnContext, turn: Turn, side, context: Sequence[Message]) -> None:
    """Session bookkeeping of a real turn: the round, what was shown, the turn log (with what a replay of the turn
    needs: the conversation heard and the session state met), dreams shown or released."""
    injected = shown_items(turn)
    mentioned = turn.item_ids() + [s.bucket_id for s in turn.suppressed]  # the log quotes them all: a purge finds it
    recent_shown = any(s.key == "recent_context" for s in turn.sections)
    ctx.parts.sessions.record(ctx.state, injected, recent_fired=side.recent_fired and recent_shown,
                              turn=turn.to_dict(timings=True), mentioned=mentioned, context=context)
    dreams = ctx.parts.dreams
    if side.dream and dreams is not None:  # a claimed dream the budget trimmed away is released, not lost
        shown = set(turn.item_ids("dream"))
        dreams.after_surfaced(ctx.space, [i.bucket_id for i in side.dream if i.bucket_id in shown], ctx.state.now,
                              trimmed=[i.bucket_id for i in side.dream if i.bucket_id not in shown])


__all__ = ["TurnContext", "TurnParts", "run_turn", "shown_items"]
