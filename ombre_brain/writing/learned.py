"""The learned write decision at work (``ingest.extractor: model``): one exchange in, a verdict and drafts out.

It loads the model named by ``writer.model.id`` once, checks that this store's encoders are the ones the
model was fitted on, builds the exchange's feature vector (:mod:`.features`), asks the model, applies the
rules above it (:mod:`.decision`) and composes the drafts (:mod:`.compose`). A model that cannot run here
(no such model, or fitted on another embedder, or reading USE where it is off) is reported once in the log,
and the rule writer decides instead (docs/design.md §7.4): memory keeps being written, by simpler means.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from ..asking import asks_to_recall
from ..config import Config
from ..errors import ConfigError
from ..text import clauses, units
from ..timeutil import parse_iso
from .compose import compose, split_sides
from .decision import Verdict, clause_look, decide
from .drafts import Draft
from .exchange import Exchange
from .features import Encoders, ExchangeText, missing_encoder, vectors
from .model import USER_LABELS, WriteModel, load_model
from .signals import compiled, dont_keep, introduces_name, question_of, signals

log = logging.getLogger("ombre_brain")

__all__ = ["LearnedDecision", "asked_before"]


def asked_before(ex: Exchange) -> str | None:
    """The companion's message just before the user's, if the exchange carries it."""
    if ex.context and ex.context[-1].role == "assistant":
        return ex.context[-1].content
    return None


class LearnedDecision:
    """The model, loaded on first use, and the decision it drives; ``ready()`` is False when it cannot run here."""

    def __init__(self, config: Config, encoders: Callable[[], Encoders]) -> None:
        self.config = config
        self.cfg = config.writer.model
        self.sig = compiled(config.writer.signals)
        self._encoders = encoders
        self._lock = threading.Lock()
        self._model: WriteModel | None = None
        self._enc: Encoders | None = None
        self._unusable: str | None = None

    def ready(self) -> bool:
        """Load the model and its encoders once; False (logged once, with the reason) when it cannot run here."""
        with self._lock:
            if self._model is None and self._unusable is None:
                try:
                    model = load_model(self.cfg.id, self.cfg.path)
                    enc = self._encoders()
                    why = missing_encoder(model, enc)
                except ConfigError as exc:
                    model, enc, why = None, None, exc.message
                if why is not None:
                    self._unusable = why
                    log.warning("writer: the learned write decision %r cannot run here (%s); the rule writer "
                                "decides instead", self.cfg.id, why)
                else:
                    self._model, self._enc = model, enc
            return self._model is not None

    def judge(self, ex: Exchange) -> tuple[Verdict, dict[str, float]]:
        """The verdict on one exchange and the cue signals it read (``ready()`` must be True)."""
        assert self._model is not None and self._enc is not None
        asked = asked_before(ex)
        row = signals(ex.user, ex.reply, asked, self.sig)
        x = vectors(self._model.blocks, [ExchangeText(ex.user, ex.reply, asked)], self._enc, self.sig, rows=[row],
                    signal_names=self._model.signal_names)
        p_user, p_rel = self._model.predict(x)
        asks, _only = dont_keep(ex.user, self.sig)
        return decide(p_user[0], float(p_rel[0]), row, self.cfg, dont_keep=asks,
                      introduces=introduces_name(ex.user),
                      recalls=asks_to_recall(ex.user)), row

    def is_lesson(self, sentences: Sequence[str]) -> list[bool]:
        """Sentence by sentence: which of them the relationship side would keep on their own."""
        assert self._model is not None and self._enc is not None
        texts = [ExchangeText(s) for s in sentences]
        x = vectors(self._model.blocks, texts, self._enc, self.sig, signal_names=self._model.signal_names)
        _, p_rel = self._model.predict(x)
        return [bool(p >= self.cfg.relationship_threshold) for p in p_rel]

    def drafts(self, ex: Exchange) -> tuple[list[Draft], Verdict]:
        """The verdict and its drafts. A message whose lesson outweighs the rest ("我不吃香菜。以后你推荐菜
        别给我推带香菜的") gets a second look: its sentences that are not the lesson are judged alone for the
        user side."""
        verdict, row = self.judge(ex)
        if verdict.relationship and verdict.user_layer is None and verdict.reason == "model":
            parts = split_sides(ex.user, self.is_lesson)
            if parts is not None:
                rest, _ = self.judge(dataclasses.replace(ex, user=parts[0]))
                if rest.user_layer is not None:
                    verdict = dataclasses.replace(verdict, user_layer=rest.user_layer, p_keep=rest.p_keep)
        verdict = self.second_look(ex, verdict, row)
        at = parse_iso(ex.at) or datetime.now().astimezone()
        return compose(ex, verdict, row, at, asked=question_of(asked_before(ex), self.sig),
                       is_lesson=self.is_lesson, weigh=self.weigh), verdict

    def second_look(self, ex: Exchange, verdict: Verdict, row: dict[str, float]) -> Verdict:
        """A long message the model kept nothing of, read clause by clause (decision.clause_look); never one that
        asks the companion to recall ("我爸教了多少年书来着，他今天又说了一遍": what follows the question is its colour,
        not a fact to keep; measured on the lived-in development set, where such clauses were a third of the noise
        written)."""
        parts = clauses(ex.user)
        if verdict.user_layer is not None or len(parts) < 2 or units(ex.user) < self.cfg.clause_units \
                or row.get("cue:recall_request") or row.get("question"):
            return verdict
        x = vectors(self._model.blocks, [ExchangeText(t) for t in parts], self._enc, self.sig,
                    signal_names=self._model.signal_names)
        p_user, _ = self._model.predict(x)
        return clause_look(verdict, p_user, self.cfg)

    def weigh(self, texts: Sequence[str], layer: str) -> list[float]:
        """How strongly each text, alone, says something of ``layer``: the model's probability of that layer (of a
        lesson, for the relationship side). Chooses the clause a title and a profile line say (compose.stating)."""
        assert self._model is not None and self._enc is not None
        x = vectors(self._model.blocks, [ExchangeText(t) for t in texts], self._enc, self.sig,
                    signal_names=self._model.signal_names)
        p_user, p_rel = self._model.predict(x)
        if layer == "relationship_lesson":
            return [float(v) for v in p_rel]
        k = USER_LABELS.index(layer)
        return [float(row[k]) for row in p_user]

    def describe(self) -> dict[str, Any]:
        """The model in use, for the job result and `config check`."""
        return {"model": self.cfg.id, "threshold": self.cfg.threshold,
                "relationship_threshold": self.cfg.relationship_threshold, "unusable": self._unusable}
