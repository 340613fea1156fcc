"""The learned write decision's weights: what they read, how they are stored, what they predict.

A model reads one feature vector of an exchange and gives the **user side** as four classes (``none``,
``stable_boundary``, ``short_state``, ``process_event``; probabilities that sum to one) and the **relationship side**
as yes/no (a lesson, an agreement, a promise, a logistic layer). The user side is either one-vs-rest logistic layers
(their scores normalised) or, since wd-e5s-use3-2, a small ensemble of one-hidden-layer perceptrons (ReLU, softmax) on
standardised inputs: a lived-in user's "对，钩个杯垫" and "温岚帮我说话了，但没用" are events only in combination (a
short message, a name, a hobby word), which one linear layer over a mean vector cannot weigh. The vector is the
concatenation of feature *blocks*, each named in the model's card:

- ``e5``: the store's embedder's ``query()`` vector of the user's message (the card names the embedder's
  ``model_id``: weights fitted on one embedder mean nothing on another);
- ``use``: the second opinion's (USE v3) vector of the same message;
- ``signals``: the cue features of :mod:`.signals`, in the order the card lists them.

On disk a model is ``<id>.npz`` (the arrays, no pickle) beside ``<id>.json`` (its card: blocks, encoders,
signal names, how it was fitted and its cross-validated figures). ``ombre-brain fit-writer`` writes both;
the package ships them in ``ombre_brain/writing/models/``. Pure apart from reading those two files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError

__all__ = ["BLOCKS", "MLP_ARRAYS", "USER_LABELS", "WriteModel", "load_model", "model_dir"]

USER_LABELS = ("none", "stable_boundary", "short_state", "process_event")
BLOCKS = ("e5", "use", "signals")


def model_dir() -> Path:
    """Where the package's shipped models live."""
    return Path(str(resources.files(__package__) / "models"))


@dataclass(frozen=True, eq=False)
class WriteModel:
    """Fitted weights and the card that says what they read."""

    id: str
    blocks: tuple[str, ...]                 # in vector order
    encoders: dict[str, str]                # block -> the encoder's model_id it was fitted on
    signal_names: tuple[str, ...]
    user_w: np.ndarray                      # (4, d)
    user_b: np.ndarray                      # (4,)
    rel_w: np.ndarray                       # (d,)
    rel_b: float
    card: dict[str, Any] = field(default_factory=dict)
    mlp: dict[str, np.ndarray] | None = None  # the user side as perceptrons: mean, scale (d,), w1 (k,d,h), b1 (k,h),
                                              # w2 (k,h,4), b2 (k,4); None: the logistic layers user_w, user_b

    @property
    def dimension(self) -> int:
        return int(self.rel_w.shape[0])

    def predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(n, 4) user-side probabilities (rows sum to one) and (n,) relationship-side probabilities."""
        x = np.atleast_2d(np.asarray(x, dtype=np.float64))
        if x.shape[1] != self.dimension:
            raise ValueError(f"model {self.id} reads {self.dimension} features, got {x.shape[1]}")
        if self.mlp is not None:
            user = _perceptrons(self.mlp, x)
        else:
            user = _sigmoid(x @ self.user_w.T + self.user_b)
            user = user / np.maximum(user.sum(axis=1, keepdims=True), 1e-12)
        return user, _sigmoid(x @ self.rel_w + self.rel_b)

    def save(self, directory: str | Path) -> tuple[Path, Path]:
        """Write ``<id>.npz`` and ``<id>.json`` into ``directory``."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        npz, card = d / f"{self.id}.npz", d / f"{self.id}.json"
        mlp = {f"mlp_{k}": v.astype(np.float32) for k, v in (self.mlp or {}).items()}
        np.savez(npz, user_w=self.user_w.astype(np.float32), user_b=self.user_b.astype(np.float32),
                 rel_w=self.rel_w.astype(np.float32), rel_b=np.array([self.rel_b], dtype=np.float32), **mlp)
        meta = {**self.card, "id": self.id, "blocks": list(self.blocks), "encoders": self.encoders,
                "signals": list(self.signal_names), "user_labels": list(USER_LABELS)}
        card.write_text(json.dumps(meta, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        return npz, card


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(z, -60, 60)))


MLP_ARRAYS = ("mean", "scale", "w1", "b1", "w2", "b2")


def _perceptrons(mlp: dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    """The ensemble's mean softmax over standardised ``x``."""
    z = (x - mlp["mean"]) / mlp["scale"]
    out = np.zeros((x.shape[0], mlp["b2"].shape[1]))
    for w1, b1, w2, b2 in zip(mlp["w1"], mlp["b1"], mlp["w2"], mlp["b2"], strict=True):
        logits = np.maximum(z @ w1 + b1, 0.0) @ w2 + b2
        logits -= logits.max(axis=1, keepdims=True)
        e = np.exp(logits)
        out += e / e.sum(axis=1, keepdims=True)
    return out / len(mlp["w1"])


def load_model(model_id: str, directory: str | Path | None = None) -> WriteModel:
    """The model ``model_id`` from ``directory`` (default: the package's); ConfigError if absent or malformed."""
    d = Path(directory) if directory is not None else model_dir()
    npz, card_path = d / f"{model_id}.npz", d / f"{model_id}.json"
    if not npz.is_file() or not card_path.is_file():
        shipped = sorted(p.stem for p in model_dir().glob("*.json")) if model_dir().is_dir() else []
        raise ConfigError(f"writer.model.id: no model {model_id!r} in {d} (shipped: {', '.join(shipped) or 'none'})")
    try:
        card = json.loads(card_path.read_text(encoding="utf-8"))
        with np.load(npz, allow_pickle=False) as a:
            user_w, user_b, rel_w, rel_b = (np.asarray(a[k], dtype=np.float64)
                                            for k in ("user_w", "user_b", "rel_w", "rel_b"))
            mlp = ({k: np.asarray(a[f"mlp_{k}"], dtype=np.float64) for k in MLP_ARRAYS}
                   if "mlp_w1" in a.files else None)
        blocks = tuple(card["blocks"])
        if (any(b not in BLOCKS for b in blocks) or tuple(card.get("user_labels", USER_LABELS)) != USER_LABELS
                or user_w.shape != (len(USER_LABELS), rel_w.shape[0]) or user_b.shape != (len(USER_LABELS),)):
            raise ValueError("blocks, labels or array shapes do not agree")
        if mlp is not None and (mlp["w1"].ndim != 3 or mlp["w1"].shape[1] != rel_w.shape[0]
                                or mlp["w2"].shape[2] != len(USER_LABELS) or mlp["mean"].shape != rel_w.shape):
            raise ValueError("the perceptrons' array shapes do not agree")
    except (OSError, KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"writer.model.id: model {model_id!r} in {d} is malformed ({exc})") from None
    return WriteModel(model_id, blocks, dict(card.get("encoders") or {}), tuple(card.get("signals") or ()),
                      user_w, user_b, rel_w, float(rel_b.reshape(-1)[0]), card, mlp)
