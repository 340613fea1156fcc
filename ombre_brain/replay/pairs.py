"""Replaying turns under two policies at once, as dry runs (the policy playground, docs/design.md §22).

Each turn runs twice, under the serving policy and under a draft, through the very pipeline a live turn
takes (``turn/pipeline.run_turn``), with ``dry_run`` set: no round, cooldown, injection, dream claim or
turn log is written. What a cooldown gate reads is the session state; instead of the ledger's, each
policy gets the state it would have met (:class:`Chain`):

- a recorded turn's round and the space's previous turn are what the log recorded (they do not depend
  on the policy); what the session had been shown, and when Recent Context last fired, start from the
  recorded state at the first replayed turn of a session and then follow from what *this* policy showed
  on the turns before (after a gap in the log, the recorded state is taken up again);
- a turn of a scenario or a labelled set, which was never recorded, starts from an empty session.

So a draft that shortens ``gateway.skip_recent_rounds`` shows a memory again on the turns where the
serving policy held it back, and later turns feel the draft's own cooldowns, as a real session would.
Memories are read as they are now; a memory written after a recorded turn can appear in its replay (under
both policies alike: the difference between the two is what the page shows).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from ..recall_types import SessionState
from ..turn.context import TurnParts
from ..turn.conversation import normalize_context
from ..turn.pipeline import run_turn, shown_items
from ..turn.sections import Turn

__all__ = ["Cancelled", "Chain", "Pair", "ReplayTurn", "dry_turn", "replay_pairs"]


class Cancelled(Exception):
    """Raised inside a replay when its cancel event is set; the turns run so far are discarded."""


@dataclasses.dataclass(frozen=True)
class ReplayTurn:
    """One turn to replay: the message, the conversation before it, when, and the state it met if recorded."""

    key: str                                  # how the page names it: "turn 123", "07_cooldown… turn 2", "case 5"
    space: str
    session: str
    query: str
    now: datetime
    context: tuple[dict, ...] = ()
    recorded_state: SessionState | None = None
    recorded: dict | None = None              # the TURN that was sent, for a recorded turn
    label: Any = None                         # what a labelled set or scenario expects of this turn
    after: Callable[[], None] | None = dataclasses.field(default=None, compare=False)  # e.g. a scratch store's write


@dataclasses.dataclass
class Pair:
    """One turn's two dry runs."""

    turn: ReplayTurn
    current: Turn
    draft: Turn


class _Fixed:
    """Stands in for the session store in a replay: the pipeline reads the state given here, and no state is
    written (the pipeline records nothing on a dry run anyway; this has no ``record`` to call)."""

    def __init__(self, state: SessionState) -> None:
        self.state = state

    def load(self, space: str, session: str, now: datetime, *, dry_run: bool = False) -> SessionState:
        return dataclasses.replace(self.state, space=space, session=session, now=now, dry_run=True)


class Chain:
    """The session state one policy's replay carries from turn to turn (as ``SessionStore.record`` would write it)."""

    def __init__(self) -> None:
        self._sessions: dict[tuple[str, str], tuple[int, dict[str, tuple[int, str]], datetime | None,
                                                     dict[str, str]]] = {}
        self._last_seen: dict[str, datetime] = {}

    def state(self, t: ReplayTurn) -> SessionState:
        held = self._sessions.get((t.space, t.session))
        rec = t.recorded_state
        if rec is not None:
            if held is not None and rec.round == held[0] + 1:  # the turn after the last one replayed
                return dataclasses.replace(rec, now=t.now, injected=dict(held[1]), recent_context_fired_at=held[2],
                                           shown_in=dict(held[3]), dry_run=True)
            return dataclasses.replace(rec, now=t.now, injected=dict(rec.injected), dry_run=True)
        rnd, injected, fired, shown_in = held if held is not None else (0, {}, None, {})
        return SessionState(space=t.space, session=t.session, now=t.now, round=rnd + 1, injected=dict(injected),
                            shown_in=dict(shown_in), last_seen=self._last_seen.get(t.space),
                            recent_context_fired_at=fired, dry_run=True)

    def after(self, t: ReplayTurn, state: SessionState, turn: Turn) -> None:
        """What a real turn would have recorded: its round, each item shown (at this round), Recent Context fired."""
        injected, shown_in = dict(state.injected), dict(state.shown_in)
        at = state.now.isoformat()
        for bid, key in shown_items(turn):
            injected[bid] = (state.round, at)
            shown_in[bid] = key
        fired = state.now if any(s.key == "recent_context" for s in turn.sections) else state.recent_context_fired_at
        self._sessions[(t.space, t.session)] = (state.round, injected, fired, shown_in)
        last = self._last_seen.get(t.space)
        self._last_seen[t.space] = state.now if last is None or state.now > last else last


def dry_turn(brain: Any, parts: TurnParts, t: ReplayTurn, state: SessionState) -> Turn:
    """One dry run of a turn under ``parts`` against ``state``: the pipeline of ``Brain.turn(dry_run=True)``."""
    gw = parts.config.gateway
    heard = normalize_context(list(t.context), max_messages=gw.context_messages, max_chars=gw.context_chars)
    fixed = dataclasses.replace(parts, sessions=_Fixed(state))  # type: ignore[arg-type]
    with brain.ledger.pinned(), brain.store.turn_scope(t.space):
        return run_turn(fixed, t.space, t.session, t.query, t.now, context=heard, dry_run=True)


def replay_pairs(brain: Any, turns: Sequence[ReplayTurn], current: TurnParts, draft: TurnParts, *,
                 on_turn: Callable[[Pair], None] | None = None,
                 cancel: threading.Event | None = None) -> list[Pair]:
    """Every turn under both policies, in order, each policy carrying its own session state (:class:`Chain`).

    ``on_turn`` hears each finished pair (progress); ``cancel`` stops the replay before the next dry run
    (:class:`Cancelled`). A turn's ``after`` (a scratch store's write) runs once both runs are done.
    """
    chains = {"current": Chain(), "draft": Chain()}
    out: list[Pair] = []
    for t in turns:
        runs = {}
        for name, parts in (("current", current), ("draft", draft)):
            if cancel is not None and cancel.is_set():  # before each dry run: a cancel waits for one run at most
                raise Cancelled()
            state = chains[name].state(t)
            runs[name] = dry_turn(brain, parts, t, state)
            chains[name].after(t, state, runs[name])
        if t.after is not None:
            t.after()
        pair = Pair(t, runs["current"], runs["draft"])
        out.append(pair)
        if on_turn is not None:
            on_turn(pair)
    return out
