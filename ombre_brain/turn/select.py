"""Layers and gates for the turn's direct candidates (design §5): who may be a direct hit.

Each candidate's layer is inferred once, every gate registered for the direct stage gives its
verdict (:mod:`.gate_table`), and the verdicts are combined by their precedence; the caps on how
many direct hits a turn shows (``gates.direct_cap``) come last. Nothing here decides anything
itself: the gates do.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..recall_types import READER_BARS, Candidate, Suppressed
from . import gates as G
from .context import Decided, Traced, TurnContext, suppressed
from .gate_registry import GateInput
from .gate_table import GATES, block_reason


def direct_stage(ctx: TurnContext, cands: Sequence[Candidate]) -> tuple[list[Decided], list[Suppressed]]:
    """Candidates through the direct seed, topic evidence, recall context and cooldown gates, then the caps."""
    cfg, plan, state = ctx.cfg, ctx.plan, ctx.state
    passed: list[Decided] = []
    out: list[Suppressed] = []
    for c in cands:
        d = ctx.layer(c.bucket)
        shown = c.bucket.id in ctx.profile_ids and not G.recalls_beside_profile(c, cfg)
        gate = GATES.evaluate(GateInput("direct", plan, state, cfg, c.bucket, d, candidate=c, in_profile=shown))
        if shown and c.admission.admitted and not plan.unasked:
            ctx.profile_answers.append(c.bucket.id)  # a lookup the profile answers: never UNKNOWN beside it
        if GATES.passes(gate, "direct"):
            passed.append(Decided(c.bucket, d, gate, _score(c) * GATES.weight(gate), candidate=c))
            continue
        if not plan.unasked and block_reason(gate) == "skipped_recent_rounds":
            ctx.asked_moments[c.bucket.id] = c.best.moment  # carried or asked again, Recent Context shows what matched
            if c.admission.admitted:
                ctx.asked_again.append(c.bucket.id)  # Recent Context shows it compact (turn/side.py)
        if G.worth_listing(c):
            out.append(suppressed(None, bucket=c.bucket, layer=d, gate=gate))
        else:
            g = gate.decide("suppressed", None, block_reason(gate))
            ctx.trace[c.bucket.id] = Traced(d, g)
    passed.sort(key=lambda x: (-x.score, x.bucket.id))
    keep: list[Decided] = []
    top = (passed[0].score or 1.0) if passed else 1.0
    for x in passed:
        read = x.candidate is not None and x.candidate.admission.threshold_name in READER_BARS
        cut = G.direct_cap(len(keep), x.score, top, cfg, lookup=not plan.unasked, calibrated=read)
        if cut is None:
            keep.append(x)
        else:
            out.append(suppressed(x, reason=cut.reason))
    return keep, out


def _score(c: Candidate) -> float:
    """What orders the direct hits: the fused search score, also where the reader judged the pair. Ordered by the
    reader's probability instead, LoCoMo's wanted turns fell behind `retrieval.max_direct` (through turns, one
    conversation: 76.9% against 61.5% of category 2); its probability admits, the search orders (design §25)."""
    return c.fused


__all__ = ["Decided", "direct_stage", "suppressed"]
