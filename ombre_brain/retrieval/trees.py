"""Gradient-boosted trees as plain arrays: fitted with scikit-learn, read with numpy (design §24).

The profile's changed-fact model (design §24) is scikit-learn's histogram gradient boosting. A fitted estimator
pickled is tied to one scikit-learn version and runs code when loaded; the trees are only numbers. :func:`export`
lays every tree's nodes out as flat arrays (feature, threshold, where a missing value goes, children, leaf values),
:class:`Forest` walks them for a batch of rows at once, and both ship as ``.npz`` package data beside a JSON card.
Numerical features only (no categorical splits are fitted).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

__all__ = ["Forest", "export"]


def export(estimator) -> dict[str, np.ndarray]:
    """A fitted binary ``HistGradientBoostingClassifier`` as arrays: per node its tree, feature, threshold, missing
    direction, children (global indexes, -1 at a leaf) and value; the root of each tree; the baseline logit."""
    feature, threshold, left_missing, left, right, value, roots = [], [], [], [], [], [], []
    for (pred,) in estimator._predictors:
        nodes = pred.nodes
        if np.any(nodes["is_categorical"]):
            raise ValueError("categorical splits cannot be exported")
        base = len(feature)
        roots.append(base)
        leaf = nodes["is_leaf"].astype(bool)
        feature.extend(np.where(leaf, -1, nodes["feature_idx"]).tolist())
        threshold.extend(nodes["num_threshold"].tolist())
        left_missing.extend(nodes["missing_go_to_left"].astype(bool).tolist())
        left.extend(np.where(leaf, -1, nodes["left"].astype(np.int64) + base).tolist())
        right.extend(np.where(leaf, -1, nodes["right"].astype(np.int64) + base).tolist())
        value.extend(nodes["value"].tolist())
    return {"feature": np.array(feature, dtype=np.int32), "threshold": np.array(threshold, dtype=np.float64),
            "left_missing": np.array(left_missing, dtype=bool), "left": np.array(left, dtype=np.int32),
            "right": np.array(right, dtype=np.int32), "value": np.array(value, dtype=np.float64),
            "roots": np.array(roots, dtype=np.int32),
            "baseline": np.array([float(np.ravel(estimator._baseline_prediction)[0])])}


class Forest:
    """The exported trees: ``logit(x)`` sums every tree's leaf for each row, plus the baseline."""

    def __init__(self, arrays: Mapping[str, np.ndarray]) -> None:
        self.feature = np.asarray(arrays["feature"], dtype=np.int32)
        self.threshold = np.asarray(arrays["threshold"], dtype=np.float64)
        self.left_missing = np.asarray(arrays["left_missing"], dtype=bool)
        self.left = np.asarray(arrays["left"], dtype=np.int32)
        self.right = np.asarray(arrays["right"], dtype=np.int32)
        self.value = np.asarray(arrays["value"], dtype=np.float64)
        self.roots = np.asarray(arrays["roots"], dtype=np.int32)
        self.baseline = float(np.asarray(arrays["baseline"]).reshape(-1)[0])
        self.inputs = int(self.feature.max()) + 1 if len(self.feature) else 0

    def arrays(self) -> dict[str, np.ndarray]:
        return {"feature": self.feature, "threshold": self.threshold, "left_missing": self.left_missing,
                "left": self.left, "right": self.right, "value": self.value, "roots": self.roots,
                "baseline": np.array([self.baseline])}

    def logit(self, x: np.ndarray) -> np.ndarray:
        """The raw score of each row (scikit-learn's ``decision_function``), every tree walked for all rows at once."""
        x = np.atleast_2d(np.asarray(x, dtype=np.float64))
        n = x.shape[0]
        node = np.repeat(self.roots[None, :], n, axis=0)  # (rows, trees)
        rows = np.arange(n)[:, None]
        while True:
            feat = self.feature[node]
            inner = feat >= 0
            if not inner.any():
                break
            val = x[rows, np.where(inner, feat, 0)]
            go_left = np.where(np.isnan(val), self.left_missing[node], val <= self.threshold[node])
            nxt = np.where(go_left, self.left[node], self.right[node])
            node = np.where(inner, nxt, node)
        return self.value[node].sum(axis=1) + self.baseline
