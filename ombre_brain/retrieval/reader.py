"""The reader: whether a memory answers the message, read as a pair (design §25).

A bi-encoder's cosine says a memory is *about the same thing* as the message; it cannot tell that it *answers* it
(表姐 against 表哥, last year's trip against this year's, the cat's name against its birthday). The reader sees the
message and one memory together: the two e5 vectors and the two USE vectors with their interactions (``q ⊙ m`` and
``|q − m|``), every admission feature (lexical coverage, standing, word alignment, the dictionary's matches and
conflicts, the conversation's say), the memory's layer and age, and whether the message asks or tells. A small
multilayer perceptron reads them and a Platt scaling turns its score into a calibrated probability. It runs on the
weighed candidates only (the best few of each script), so a turn pays for a handful of rows.

The weights ship as package data (``retrieval/models/<id>.npz``, arrays only, beside ``<id>.json``: its card, the
names of its inputs, the encoders it was fitted with, the data and its cross-validated figures). ``fit-reader``
(``evaluate/fit_reader.py``) fits one on the authored stores in ``training/read/``. Pure: numpy arrays in and out.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

import numpy as np

from ..errors import ConfigError
from .answer_types import TYPES
from .features import FEATURES

LAYERS = ("stable_boundary", "relationship_lesson", "process_event", "short_state")
EXTRA = ("cos_context", "layer_stable_boundary", "layer_relationship_lesson", "layer_process_event",
         "layer_short_state", "layer_other", "age_days_log", "memory_chars_log", "query_chars_log", "asks",
         "anaphoric", "has_context", "fused_share", "fused_rank", "query_cjk", "memory_cjk",
         "holder_same", "holder_conflict", "asks_other_memory_self", "asks_self_memory_other", "attribute_shared",
         "attribute_missing", "memory_changed",
         "asks_type", "types_held", "type_missing", *(f"asks_{t}" for t in TYPES))
"""Scalars the reader reads beside the admission features (:func:`extra_scalars`); then seven that compare the two
texts' frames (profile/frames.py: whose each is about, and what it states), and the answer types (answer_types.py:
what kind of answer the message asks for, and whether the memory holds one)."""


@dataclass(frozen=True)
class PairVectors:
    """The four vectors of one (message, memory) pair: e5 and USE, each side unit length (zeros where absent)."""

    q_e5: np.ndarray
    m_e5: np.ndarray
    q_use: np.ndarray
    m_use: np.ndarray


def vector_block(v: PairVectors) -> np.ndarray:
    """``[q⊙m, |q−m|]`` for e5, then for USE: what a pair says that its two cosines do not."""
    return np.concatenate([v.q_e5 * v.m_e5, np.abs(v.q_e5 - v.m_e5), v.q_use * v.m_use, np.abs(v.q_use - v.m_use)])


def extra_scalars(*, cos_context: float, layer: str | None, age_days: float, memory_chars: int, query_chars: int,
                  asks: bool, anaphoric: bool, has_context: bool, fused_share: float, fused_rank: int,
                  query_cjk: bool, memory_cjk: bool, frames: Sequence[float], answer: Sequence[float]) -> list[float]:
    """The scalars of :data:`EXTRA`, in order (``frames``: :func:`frame_pair`; ``answer``:
    :func:`~.answer_types.answer_type_features`)."""
    return [cos_context, *(float(layer == name) for name in LAYERS), float(layer not in LAYERS),
            math.log1p(max(0.0, age_days)) / 7.0, math.log1p(memory_chars) / 7.0, math.log1p(query_chars) / 7.0,
            float(asks), float(anaphoric), float(has_context), fused_share, min(fused_rank, 20) / 20.0,
            float(query_cjk), float(memory_cjk), *frames, *answer]


def frame_pair(q, m) -> list[float]:
    """How the message's frame meets the memory's: the same holder (my sister, my sister), two different ones (my
    brother, my sister: the near miss), one the user's and one someone else's, an attribute both state, one the
    message asks that the memory does not, and whether the memory says something changed."""
    people = lambda f: f.holder not in ("self", "other")  # noqa: E731
    return [float(people(q) and q.holder == m.holder), float(people(q) and people(m) and q.holder != m.holder),
            float(people(q) and m.holder == "self"), float(q.holder == "self" and people(m)),
            float(bool(q.attributes & m.attributes)), float(bool(q.attributes - m.attributes)), float(m.changed)]


def input_names(feature_names: Sequence[str], e5_dim: int, use_dim: int) -> list[str]:
    """Every input's name, in the order :func:`row` lays them out."""
    blocks = [f"{k}_{i}" for k, n in (("e5_prod", e5_dim), ("e5_diff", e5_dim), ("use_prod", use_dim),
                                       ("use_diff", use_dim)) for i in range(n)]
    return [*feature_names, *EXTRA, *blocks]


def row(features: Mapping[str, float], feature_names: Sequence[str], extra: Sequence[float],
        vectors: PairVectors) -> np.ndarray:
    """One pair's input row: the admission features (by name), the extra scalars, the vector block."""
    head = np.array([features.get(n, 0.0) for n in feature_names] + list(extra), dtype=np.float32)
    return np.concatenate([head, vector_block(vectors).astype(np.float32)])


class ReaderModel:
    """A fitted reader: the vector block projected on its principal components (fitted with it), the scalars beside
    them standardised, one hidden layer (ReLU), a logit, and its Platt scaling."""

    def __init__(self, arrays: Mapping[str, np.ndarray], card: Mapping) -> None:
        self.card = dict(card)
        self.id = str(card["id"])
        self.head = int(card["head"])  # the scalars (admission features and EXTRA) before the vector block
        self.pca_mean = np.asarray(arrays["pca_mean"], dtype=np.float32)
        self.pca = np.asarray(arrays["pca"], dtype=np.float32)  # (components, vector block)
        self.mean = np.asarray(arrays["mean"], dtype=np.float32)
        self.scale = np.asarray(arrays["scale"], dtype=np.float32)
        self.w1 = np.asarray(arrays["w1"], dtype=np.float32)
        self.b1 = np.asarray(arrays["b1"], dtype=np.float32)
        self.w2 = np.asarray(arrays["w2"], dtype=np.float32).reshape(-1)
        self.b2 = float(np.asarray(arrays["b2"]).reshape(-1)[0])
        self.platt = tuple(float(x) for x in card.get("platt", (1.0, 0.0)))
        self.feature_names: tuple[str, ...] = tuple(card["features"])
        self.encoders: dict = dict(card.get("encoders", {}))
        self.thresholds: dict[str, float] = {k: float(v) for k, v in card.get("thresholds", {}).items()}
        dims = (self.mean.shape[0], self.w1.shape[0], self.head + self.pca.shape[0])
        if len(set(dims)) != 1:
            raise ConfigError(f"reader model {self.id}: inconsistent input sizes {dims}")

    def project(self, x: np.ndarray) -> np.ndarray:
        """Rows as the network reads them: the scalars, then the vector block's principal components."""
        x = np.atleast_2d(x).astype(np.float32)
        return np.hstack([x[:, :self.head], (x[:, self.head:] - self.pca_mean) @ self.pca.T])

    def score(self, x: np.ndarray) -> np.ndarray:
        """The raw logit of each row (before Platt scaling)."""
        z = (self.project(x) - self.mean) / self.scale
        h = np.maximum(z @ self.w1 + self.b1, 0.0)
        return h @ self.w2 + self.b2

    def predict(self, x: np.ndarray) -> np.ndarray:
        """The calibrated probability that each row's memory answers (or should be brought up for) its message."""
        a, b = self.platt
        return 1.0 / (1.0 + np.exp(-np.clip(a * self.score(x) + b, -60, 60)))

    def save(self, directory: str | Path) -> Path:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(directory / f"{self.id}.npz", pca_mean=self.pca_mean, pca=self.pca, mean=self.mean,
                            scale=self.scale, w1=self.w1, b1=self.b1, w2=self.w2, b2=np.array([self.b2]))
        (directory / f"{self.id}.json").write_text(json.dumps(self.card, ensure_ascii=False, indent=1) + "\n",
                                                   encoding="utf-8")
        return directory / f"{self.id}.npz"


def model_dir() -> Path:
    """Where the package's fitted readers live."""
    return Path(str(resources.files(__package__) / "models"))


@lru_cache(maxsize=8)
def load_reader(model_id: str, path: str | None = None) -> ReaderModel:
    """A fitted reader by id, from ``path`` (a directory) or the package; a missing one is a ConfigError naming it."""
    directory = Path(path) if path else model_dir()
    npz, card = directory / f"{model_id}.npz", directory / f"{model_id}.json"
    if not npz.exists() or not card.exists():
        raise ConfigError(f"no reader model {model_id!r} in {directory} (fit one with `ombre-brain fit-reader`)",
                          key="retrieval.reader.id")
    with np.load(npz) as arrays:
        return ReaderModel(dict(arrays), json.loads(card.read_text(encoding="utf-8")))


def reader_feature_names() -> tuple[str, ...]:
    """The admission features a new reader is fitted on: every registered one."""
    return FEATURES.names


__all__ = ["EXTRA", "LAYERS", "PairVectors", "ReaderModel", "extra_scalars", "input_names", "load_reader",
           "model_dir", "reader_feature_names", "row", "vector_block"]
