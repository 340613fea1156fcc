"""Layers and gates for the turn's direct candidates (DESIGN §5): who may be a direct hit.

Each candidate's layer is inferred once, every gate gives its verdict, and the verdicts are
combined by the precedence of :mod:`ombre_brain.turn.reasons`; the caps on how many direct hits
a turn shows (``gates.direct_cap``) come last. Nothing here decides anything itself: the gates do.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..buckets import Bucket
from ..recall_types import Candidate, DiffusionHit, LayerDecision, RuntimeGate, Suppressed
from . import gates as G

if TYPE_CHECKING:
    from .pipeline import TurnContext


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
    g = gate.decide("suppressed", None, reason or G.block_reason(gate))
    return Suppressed(bucket.id, layer.layer, g.reason, layer.to_dict(), g.to_dict())


def direct_stage(ctx: TurnContext, cands: Sequence[Candidate]) -> tuple[list[Decided], list[Suppressed]]:
    """Candidates through the direct seed, topic evidence, recall context and cooldown gates, then the caps."""
    cfg, plan, state = ctx.cfg, ctx.plan, ctx.state
    passed: list[Decided] = []
    out: list[Suppressed] = []
    for c in cands:
        d = ctx.layer(c.bucket)
        te = G.topic_evidence_gate(plan, c, d, state, cfg)
        ds = G.direct_seed_gate(plan, c, d, state, cfg)
        cd, mult = G.cooldown_gate(plan, c.bucket.id, d, state, cfg)
        rc = G.recall_context_gate(plan, c, d, state, cfg)
        gate = G.build_runtime_gate(direct_seed=ds, topic_evidence=te, cooldown=cd, recall_context=rc)
        if ds.allowed and cd.allowed is not False:
            passed.append(Decided(c.bucket, d, gate, c.fused * mult, candidate=c))
        elif G.worth_listing(c, te):
            out.append(suppressed(None, bucket=c.bucket, layer=d, gate=gate))
        else:
            g = gate.decide("suppressed", None, G.block_reason(gate))
            ctx.trace[c.bucket.id] = {"layer_debug": d.to_dict(), "runtime_gate": g.to_dict()}
    passed.sort(key=lambda x: (-x.score, x.bucket.id))
    keep: list[Decided] = []
    top = (passed[0].score or 1.0) if passed else 1.0
    for x in passed:
        cut = G.direct_cap(len(keep), x.score, top, cfg)
        if cut is None:
            keep.append(x)
        else:
            out.append(suppressed(x, reason=cut.reason))
    return keep, out


__all__ = ["Decided", "direct_stage", "suppressed"]
