"""The gate registry: every runtime gate is one entry here, and everything else is built from the entries.

A :class:`GateSpec` names a gate, the stages whose items it judges, the reason codes it emits with
their words, and its function. The registry's order is the precedence the gates are read in (an
item's reason is its first refusal in that order, else its first allowance), the keys of every
``runtime_gate`` (docs/design.md §5), the reason table the debug pages describe codes from, and
the gates each stage of the turn runs. Adding a gate is adding one entry: ``GATES.register(spec)``
(``GATES.added(spec)`` for a test, which takes it out again).

A stage runs :meth:`GateRegistry.evaluate` on one item and reads the verdict with
:meth:`GateRegistry.passes`: the stage's own gate must allow the item and no gate may refuse it; a
gate's ``weight`` (the cooldown's rank multiplier) multiplies the item's score. Pure: no I/O.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ..recall_types import NOT_APPLICABLE, GateResult, RuntimeGate

__all__ = ["STAGES", "GateInput", "GateRegistry", "GateSpec"]

STAGES = ("direct", "related", "recent", "carried", "weather", "favorite", "dream", "core")
"""Where an item meets the gates: a direct candidate, a related target, Recent Context, a memory carried from the
session's last rounds (turn/carry.py), the weather, the favorite card, a latent dream, Core Memory."""


@dataclasses.dataclass(frozen=True)
class GateInput:
    """What a gate may look at for one item this turn; the stage fills what it knows.

    ``candidate`` is the search candidate (direct stage only); ``path_ok`` says a related target was
    reached along a reliable chain; ``has_topic_evidence`` that a recent memory carries the query's
    topic; ``parent_direct`` whether a context-only moment's parent is a reliable direct hit (None:
    decide it from the candidate); ``moment`` the context-only moment in question.
    """

    stage: str
    plan: Any
    state: Any
    cfg: Any
    bucket: Any
    layer: Any
    candidate: Any = None
    path_ok: bool = False
    has_topic_evidence: bool = False
    parent_direct: bool | None = None
    moment: Any = None
    in_favorite_card: bool = False
    carried: bool = False
    in_profile: bool = False  # the profile shows this memory's line this turn (turn/profile.py)
    asked_again: bool = False  # a lookup admitted it, and only a cooldown keeps it out of Recalled Memory
    open_thread: bool = False  # an episode past the recent window still open (it points ahead): turn/side.py


@dataclasses.dataclass(frozen=True)
class GateSpec:
    """One gate: its name (a ``runtime_gate`` key), the stages it judges, its reason codes and words, its function.

    ``fn(GateInput)`` returns a :class:`GateResult`, or None when the gate has nothing to say about the
    item (shown as ``not_applicable``). ``primary`` names the stages whose admission this gate decides:
    there the item needs its allowance, elsewhere only the absence of its refusal.
    """

    name: str
    stages: frozenset[str]
    fn: Callable[[GateInput], GateResult | None]
    reasons: Mapping[str, str]
    doc: str = ""
    primary: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"a gate name is a snake_case identifier, got {self.name!r}")
        unknown = set(self.stages) - set(STAGES)
        if unknown:
            raise ValueError(f"gate {self.name}: unknown stage(s) {sorted(unknown)}; known: {', '.join(STAGES)}")
        if not set(self.primary) <= set(self.stages):
            raise ValueError(f"gate {self.name}: primary stages must be among its stages")


class GateRegistry:
    """The gates in precedence order. Reads are lock-free snapshots; registering swaps in a new tuple."""

    def __init__(self, general_reasons: Mapping[str, str]) -> None:
        self._specs: tuple[GateSpec, ...] = ()
        self._general = dict(general_reasons)
        self._lock = threading.Lock()
        self.reasons: Mapping[str, str] = _ReasonView(self)

    # -- the entries

    def register(self, spec: GateSpec, *, before: str | None = None) -> GateSpec:
        """Add a gate (last in precedence, or just before the gate named ``before``)."""
        with self._lock:
            specs = list(self._specs)
            if any(s.name == spec.name for s in specs):
                raise ValueError(f"a gate named {spec.name!r} is already registered")
            clash = sorted(set(spec.reasons) & (set(self._general) | {r for s in specs for r in s.reasons}))
            if clash:
                raise ValueError(f"gate {spec.name}: reason code(s) {clash} already have a text")
            at = len(specs) if before is None else [s.name for s in specs].index(before)
            specs.insert(at, spec)
            self._specs = tuple(specs)
        return spec

    def unregister(self, name: str) -> None:
        with self._lock:
            self._specs = tuple(s for s in self._specs if s.name != name)

    @contextlib.contextmanager
    def added(self, spec: GateSpec, *, before: str | None = None) -> Iterator[GateSpec]:
        """A gate registered for the duration of a ``with`` block (tests, experiments)."""
        self.register(spec, before=before)
        try:
            yield spec
        finally:
            self.unregister(spec.name)

    @property
    def names(self) -> tuple[str, ...]:
        """The ``runtime_gate`` keys, in precedence order."""
        return tuple(s.name for s in self._specs)

    def __iter__(self) -> Iterator[GateSpec]:
        return iter(self._specs)

    def __getitem__(self, name: str) -> GateSpec:
        for s in self._specs:
            if s.name == name:
                return s
        raise KeyError(name)

    def describe(self, code: str | None) -> str:
        """The words of a reason code (the code itself when, unexpectedly, it has none)."""
        if not code:
            return ""
        return self.reasons.get(code, code)

    # -- running them

    def build(self, *, decision: str = "suppressed", section: str | None = None, reason: str = "",
              **results: GateResult | None) -> RuntimeGate:
        """A RuntimeGate holding the given results; every other registered gate says not_applicable."""
        specs = self._specs
        unknown = sorted(set(results) - {s.name for s in specs})
        if unknown:
            raise ValueError(f"unknown gate name(s) {', '.join(unknown)}; known: {', '.join(s.name for s in specs)}")
        gates: dict[str, GateResult] = {}
        for s in specs:
            r = results.get(s.name)
            if r is not None and not isinstance(r, GateResult):
                raise TypeError(f"gate {s.name} expects a GateResult, got {type(r).__name__}")
            gates[s.name] = r if r is not None else NOT_APPLICABLE
        return RuntimeGate(gates=gates, decision=decision, section=section, reason=reason)

    def evaluate(self, inp: GateInput, **given: GateResult | None) -> RuntimeGate:
        """Every gate of ``inp.stage`` on one item, in precedence order; ``given`` results stand as they are."""
        gates: dict[str, GateResult] = {}
        for s in self._specs:
            if s.name in given:
                r = given[s.name]
            elif inp.stage in s.stages:
                r = s.fn(inp)
            else:
                r = None
            gates[s.name] = r if r is not None else NOT_APPLICABLE
        return RuntimeGate(gates=gates)

    def passes(self, gate: RuntimeGate, stage: str) -> bool:
        """Does the item pass its stage: each gate primary for the stage allows it, and no gate refuses it?"""
        for s in self._specs:
            g = gate.gates.get(s.name)
            if g is None:
                continue
            if g.allowed is False or (stage in s.primary and g.allowed is not True):
                return False
        return True

    @staticmethod
    def weight(gate: RuntimeGate) -> float:
        """The product of the gates' rank multipliers (the cooldown's, while an item cools)."""
        return math.prod(g.weight for g in gate.gates.values())


class _ReasonView(Mapping):
    """Every reason code with its words: the general table plus each registered gate's own codes, read live."""

    def __init__(self, registry: GateRegistry) -> None:
        self._r = registry

    def _tables(self):
        yield self._r._general
        for s in self._r._specs:
            yield s.reasons

    def __getitem__(self, code: str) -> str:
        for t in self._tables():
            if code in t:
                return t[code]
        raise KeyError(code)

    def __iter__(self):
        seen = set()
        for t in self._tables():
            for code in t:
                if code not in seen:
                    seen.add(code)
                    yield code

    def __len__(self) -> int:
        return sum(1 for _ in self)
