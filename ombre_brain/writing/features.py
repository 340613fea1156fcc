"""An exchange as the learned write decision reads it: one feature vector, block by block.

The same code builds the vectors the model is fitted on (``ombre-brain fit-writer``, many exchanges at
once) and the vector of each exchange the writer judges (one at a time, on the ingestion worker), so the
two can never drift apart. The encoders are the ones the store already runs: the store's embedder (its
``queries``: the e5 ``query:`` role, cached) and the second opinion (USE v3), when the model reads them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .model import WriteModel
from .signals import SIGNAL_NAMES, Signals, signals

__all__ = ["Encoders", "ExchangeText", "encoder_ids", "missing_encoder", "vectors"]


@dataclass(frozen=True)
class ExchangeText:
    """What the features read of one exchange: the user's message, the reply, the companion's message before."""

    user: str
    reply: str = ""
    asked: str | None = None


@dataclass(frozen=True)
class Encoders:
    """The store's embedder and its second opinion (None where USE is off or not installed)."""

    e5: Any
    use: Any = None


def encoder_ids(enc: Encoders) -> dict[str, str]:
    """The ``model_id`` of each block's encoder (what a model card records and is checked against)."""
    out = {"e5": str(getattr(enc.e5, "model_id", "")), "signals": "signals"}
    if enc.use is not None:
        out["use"] = str(getattr(enc.use, "model_id", "use"))
    return out


def missing_encoder(model: WriteModel, enc: Encoders) -> str | None:
    """Why ``model`` cannot read with these encoders (a sentence for the log), or None when it can."""
    have = encoder_ids(enc)
    for block in model.blocks:
        want = model.encoders.get(block)
        if block not in have:
            return f"its block {block!r} needs the second opinion (USE v3), which is off or not installed"
        if want and have[block] != want:
            return f"it was fitted on {want} for {block!r}, and this store embeds with {have[block]}"
    return None


def signal_rows(texts: Sequence[ExchangeText], sig: Signals) -> list[dict[str, float]]:
    return [signals(t.user, t.reply, t.asked, sig) for t in texts]


def vectors(blocks: Sequence[str], texts: Sequence[ExchangeText], enc: Encoders, sig: Signals, *,
            rows: Sequence[Mapping[str, float]] | None = None,
            signal_names: Sequence[str] = SIGNAL_NAMES) -> np.ndarray:
    """The (n, d) feature matrix of ``texts``: the blocks in order, each exactly as the model was fitted on."""
    users = [t.user for t in texts]
    rows = rows if rows is not None else signal_rows(texts, sig)
    cols = []
    for block in blocks:
        if block == "e5":
            cols.append(np.asarray(enc.e5.queries(users), dtype=np.float64).reshape(len(users), -1))
        elif block == "use":
            cols.append(np.asarray(enc.use.passages(users), dtype=np.float64).reshape(len(users), -1))
        elif block == "signals":
            cols.append(np.array([[r.get(n, 0.0) for n in signal_names] for r in rows], dtype=np.float64)
                        .reshape(len(users), len(signal_names)))
        else:
            raise ValueError(f"unknown feature block {block!r}")
    return np.hstack(cols) if cols else np.zeros((len(users), 0))
