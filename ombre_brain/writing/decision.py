"""The learned write decision's verdict on one exchange: the model's probabilities, and the rules above them.

The model gives P(none | stable_boundary | short_state | process_event) for the user side and P(lesson) for
the relationship side. The verdict keeps each side apart, both when both hold (docs/design.md §7.4):

1. A message asking not to be kept (a ``writer.signals.dont_keep`` cue: "别记这个", "don't remember that")
   is never stored. If it says only that, it means the exchange before it: the writer forgets what that
   exchange wrote (``forget_previous``).
2. The user side is kept when P(worth keeping) = 1 - P(none) reaches ``writer.model.threshold``, on the
   likeliest of its three layers, unless every sentence of the message is a question: a question to the
   companion says what the user wants to know, not who they are.
3. The relationship side is kept when P(lesson) reaches ``writer.model.relationship_threshold``; a
   question may carry one ("以后这种节日你别主动提，好吗").
4. A message that opens by asking the companion to give back something the user told it ("元宝是哪天生日来着，医生
   问我", "what's Delia's husband called again": :func:`ombre_brain.asking.asks_to_recall`) keeps nothing on its user
   side either (``recall``): it says what the user wants back, and its other clauses are the reason they ask.
5. A message that gives someone or something a name ("a chocolate lab named Moose", "名字叫豆豆") keeps its user
   side as a stable boundary when the model would keep nothing (``introduces``, :func:`~.signals.introduces_name`,
   not a model input): the model learned names from pets
   and people it knew the words for, and "lab" is none of them.

Pure: numbers and flags in, a :class:`Verdict` out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..config import WriterModelConfig
from .model import USER_LABELS

__all__ = ["Verdict", "clause_look", "decide"]


@dataclass(frozen=True)
class Verdict:
    """What to keep from one exchange, and why (the ``reason`` goes into the job result)."""

    user_layer: str | None          # stable_boundary | short_state | process_event | None
    relationship: bool
    forget_previous: bool = False   # the message only asks to forget what came before it
    reason: str = "model"           # model | clause | dont_keep | dont_keep_previous | question | recall | introduces
    p_keep: float = 0.0             # P(the user side is worth keeping)
    p_relationship: float = 0.0

    @property
    def noise(self) -> bool:
        return self.user_layer is None and not self.relationship

    def to_dict(self) -> dict:
        return {"user_layer": self.user_layer, "relationship": self.relationship, "reason": self.reason,
                "p_keep": round(self.p_keep, 3), "p_relationship": round(self.p_relationship, 3)}


def decide(p_user: Sequence[float], p_relationship: float, signals: Mapping[str, float],
           cfg: WriterModelConfig, *, dont_keep: bool = False, introduces: bool = False,
           recalls: bool = False) -> Verdict:
    """The verdict from the model's probabilities (``p_user`` in :data:`USER_LABELS` order) and the cue signals."""
    p_keep = 1.0 - float(p_user[0])
    p_rel = float(p_relationship)
    if dont_keep:
        only = bool(signals.get("dont_keep_only"))
        return Verdict(None, False, only, "dont_keep_previous" if only else "dont_keep", p_keep, p_rel)
    relationship = p_rel >= cfg.relationship_threshold
    if signals.get("all_questions"):
        return Verdict(None, relationship, False, "question", p_keep, p_rel)
    if recalls:
        return Verdict(None, relationship, False, "recall", p_keep, p_rel)
    layer = None
    if p_keep >= cfg.threshold:
        layer = USER_LABELS[1 + max(range(3), key=lambda i: float(p_user[1 + i]))]
    elif introduces:  # "also got a chocolate lab named Moose": a name given is a fact of their life
        return Verdict("stable_boundary", relationship, False, "introduces", p_keep, p_rel)
    return Verdict(layer, relationship, False, "model", p_keep, p_rel)


def clause_look(verdict: Verdict, p_clauses: Sequence[Sequence[float]], cfg: WriterModelConfig) -> Verdict:
    """A second look at a long message whose whole the model kept nothing of: a rambling message often holds one fact
    among its complaints ("救命，今天被主管骂惨了，一个标题改了八遍…"), and its mean vector drowns it. Each clause
    alone (``p_clauses``: the model's user-side probabilities per clause) may keep the user side, at the stricter
    ``writer.model.clause_threshold``, on that clause's likeliest layer. Questions and don't-keep requests are never
    looked at again."""
    if verdict.reason != "model" or verdict.user_layer is not None or len(p_clauses) == 0:
        return verdict
    best = max(range(len(p_clauses)), key=lambda i: 1.0 - float(p_clauses[i][0]))
    p = p_clauses[best]
    keep = 1.0 - float(p[0])
    if keep < cfg.clause_threshold:
        return verdict
    layer = USER_LABELS[1 + max(range(3), key=lambda i: float(p[1 + i]))]
    return Verdict(layer, verdict.relationship, False, "clause", keep, verdict.p_relationship)