"""What every stage of a turn shares: the parts Brain built, the turn's context, and the records stages pass on.

:class:`TurnParts` is built once by Brain; :class:`TurnContext` holds one turn's inputs (and memoises
each bucket's layer); :class:`Decided` is one bucket's trip through the gates and :class:`Side` what
the side sections picked. They live in this leaf module so that the stages (``select``, ``related``,
``side``, ``items``) and ``pipeline`` import them from one place and never each other in a circle.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..buckets import Bucket
from ..config import Config
from ..memory_layers import LayerMemo, infer_layer
from ..recall_types import (
    Candidate,
    DiffusionHit,
    Item,
    LayerDecision,
    QueryPlan,
    RuntimeGate,
    SessionState,
    Suppressed,
)
from .gate_table import block_reason

if TYPE_CHECKING:  # the stages only call methods on these; importing them here would tie the wings together
    from ..dream.engine import DreamEngine
    from ..facts import FactsStore
    from ..gateway.sessions import SessionStore
    from ..profile.cache import ProfileCache
    from ..recall_policy import RecallPolicy
    from ..retrieval.candidates import Retriever
    from ..retrieval.evidence import Admitter
    from ..store.interfaces import ListRead, TurnReads

__all__ = ["Decided", "Side", "Traced", "TurnContext", "TurnParts", "suppressed"]


@dataclass(frozen=True)
class TurnParts:
    """Everything a turn reads or writes besides its input, built once by Brain."""

    config: Config
    store: TurnReads
    policy: RecallPolicy
    retriever: Retriever
    admitter: Admitter
    sessions: SessionStore
    dreams: DreamEngine | None = None
    facts: FactsStore | None = None
    layers: LayerMemo | None = None  # layers kept across turns (Brain's; a purge empties it)
    profile: ProfileCache | None = None  # each space's profile book (profile/cache.py; a purge empties it)


class TurnContext:
    """One turn's inputs plus a memo, so each bucket's layer is inferred exactly once."""

    def __init__(self, parts: TurnParts, space: str, plan: QueryPlan, state: SessionState) -> None:
        self.parts = parts
        self.cfg = parts.config
        self.store = parts.store
        self.space = space
        self.plan = plan
        self.state = state
        self._layers: dict[str, LayerDecision] = {}
        self.trace: dict[str, Traced] = {}  # bucket_id -> {layer_debug, runtime_gate} for candidates left out quietly
        self.diffusion: dict[str, Any] = {}  # seeds, edges and every diffusion hit before gating (debug)
        self.ahead: dict[str, Any] = {}  # reads sent ahead for a later stage (announce_side_reads)
        self.carried: list[str] = []  # memories recalled in the session's last rounds (turn/carry.py)
        self.lists: dict[str, ListRead] = {}  # each side section's list read, as announced (announce_side_reads)
        self.profile_ids: frozenset[str] = frozenset()  # the lines the profile shows this turn (turn/profile.py)
        self.profile_answers: list[str] = []  # admitted candidates of a lookup that the profile shows: it answers
        self.profile_related: list[str] = []  # profile lines diffusion reached from this turn's direct hits
        self.asked_again: list[str] = []  # admitted lookups a cooldown keeps out of Recalled Memory (turn/select.py)
        self.asked_moments: dict[str, Any] = {}  # a lookup's candidates a cooldown kept out, and the moment each
        # matched: shown in Recent Context (asked again, or carried), it is that part, not the memory's opening
        self.superseded: Mapping[str, tuple[str, str]] = {}  # old id -> (newer id, rule): history, not current

    def layer(self, bucket: Bucket) -> LayerDecision:
        d = self._layers.get(bucket.id)
        if d is None:
            memo = self.parts.layers
            d = memo.layer(bucket, self.cfg) if memo is not None else infer_layer(bucket, self.cfg)
            self._layers[bucket.id] = d
        return d


class Traced(Mapping):
    """``{layer_debug, runtime_gate, **extra}`` of an item left out quietly, serialised when first read.

    A turn leaves most of its candidates out without naming them (about 45 a turn at 10k); only a debug page asking
    why (``Turn.explain``) reads their record, and building the two dicts for each cost a turn 0.5 ms. The record is
    made from the very decision objects the turn used, once, whenever it is read."""

    __slots__ = ("_layer", "_gate", "_extra", "_made")

    def __init__(self, layer: LayerDecision, gate: RuntimeGate, extra: Mapping[str, Any] | None = None) -> None:
        self._layer, self._gate, self._extra = layer, gate, extra
        self._made: dict[str, Any] | None = None

    def _record(self) -> dict[str, Any]:
        if self._made is None:
            self._made = {"layer_debug": self._layer.to_dict(), "runtime_gate": self._gate.to_dict(),
                          **(self._extra or {})}
        return self._made

    def __getitem__(self, key: str) -> Any:
        return self._record()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._record())

    def __len__(self) -> int:
        return len(self._record())


@dataclasses.dataclass
class Decided:
    """One bucket's trip through the gates this turn (mutable only while the turn is built)."""

    bucket: Bucket
    layer: LayerDecision
    gate: RuntimeGate
    score: float = 0.0
    candidate: Candidate | None = None
    diffusion: DiffusionHit | None = None


def suppressed(d: Decided | None, *, bucket: Bucket | None = None, layer: LayerDecision | None = None,
               gate: RuntimeGate | None = None, reason: str | None = None) -> Suppressed:
    """A Suppressed record from a refused item: its block reason unless one is given."""
    bucket = bucket or d.bucket
    layer = layer or d.layer
    gate = gate or d.gate
    g = gate.decide("suppressed", None, reason or block_reason(gate))
    return Suppressed(bucket.id, layer.layer, g.reason, layer.to_dict(), g.to_dict())


@dataclasses.dataclass
class Side:
    """What the side sections picked this turn (Decided items are rendered later; dreams and stable items now)."""

    recent: list[Decided] = dataclasses.field(default_factory=list)
    recent_fired: bool = False
    weather: list[Decided] = dataclasses.field(default_factory=list)
    favorites: list[Decided] = dataclasses.field(default_factory=list)
    dream: list[Item] = dataclasses.field(default_factory=list)
    core: list[Item] = dataclasses.field(default_factory=list)
    facts: list[Item] = dataclasses.field(default_factory=list)
