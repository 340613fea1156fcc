"""`fit-reader`: fit the reader on authored memory stores, report it cross-validated, write its weights.

The rows come from :mod:`.reader_data`: the authored stores in ``training/read/stores_*.yaml`` read through the real
pipeline, and the labelled conversations in ``training/read/conversations_*.yaml`` replayed as real chats. A tenth
of the stores (every tenth by id) is held apart and never fitted on: the command reports its figures beside the
5-fold cross-validated ones (folds grouped by store, so no store is on both sides). The model is scikit-learn's
multilayer perceptron (one hidden ReLU layer, on standardised inputs); its logit is calibrated by Platt scaling on
the cross-validated logits. Reported: AUC and expected calibration error over the pairs; per message, how many that
have an answer get one admitted (turn recall) and how many that have none get anything admitted (false recall), by
whether the message asks or tells, by shape and by language, across thresholds; the thresholds chosen (a lookup's
bar: false recall at most ``LOOKUP_FALSE``; a statement's: ``UNASKED_FALSE``). The weights go to
``<out>/<id>.npz`` with the card ``<id>.json``.

scikit-learn is needed only here (``pip install scikit-learn``); serving reads the arrays with numpy.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from ..config import load_config
from ..errors import ValidationError
from ..retrieval.reader import EXTRA, ReaderModel, input_names, model_dir
from .calibrate import auc, fit_logistic
from .inject import expected_calibration_error
from .reader_data import Rows, build_conversation_rows, build_rows, load_stores, merge

__all__ = ["fit_reader", "format_reader_fit"]

HIDDEN = 64
ALPHA = 1e-1
COMPONENTS = 48  # principal components of the vector block the network reads (all of it overfits 2,500 answers)
LOOKUP_FALSE = 0.08   # a lookup's bar: at most this share of lookups with no answer get one admitted
UNASKED_FALSE = 0.03  # a statement's bar: recall the user did not ask for is held stricter
SWEEP = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


def _mlp(seed: int = 7):
    try:
        from sklearn.neural_network import MLPClassifier
    except ImportError:  # pragma: no cover - a dev dependency
        raise ValidationError("fit-reader needs scikit-learn: pip install scikit-learn", field="data") from None
    return MLPClassifier(hidden_layer_sizes=(HIDDEN,), alpha=ALPHA, max_iter=300, early_stopping=True,
                         validation_fraction=0.1, n_iter_no_change=15, random_state=seed)


@dataclasses.dataclass
class _Fit:
    head: int
    pca_mean: np.ndarray
    pca: np.ndarray
    mean: np.ndarray
    scale: np.ndarray
    mlp: object

    def project(self, x: np.ndarray) -> np.ndarray:
        return np.hstack([x[:, :self.head], (x[:, self.head:] - self.pca_mean) @ self.pca.T])

    def logit(self, x: np.ndarray) -> np.ndarray:
        z = (self.project(x) - self.mean) / self.scale
        w1, w2 = self.mlp.coefs_
        b1, b2 = self.mlp.intercepts_
        return (np.maximum(z @ w1 + b1, 0.0) @ w2 + b2).reshape(-1)


def _fit(x: np.ndarray, y: np.ndarray, head: int, seed: int = 7) -> _Fit:
    from sklearn.decomposition import PCA

    pca = PCA(COMPONENTS, random_state=seed).fit(x[:, head:])
    part = _Fit(head, pca.mean_.astype(np.float32), pca.components_.astype(np.float32), np.zeros(0), np.zeros(0), None)
    z = part.project(x)
    mean, scale = z.mean(axis=0), z.std(axis=0)
    scale[scale < 1e-6] = 1.0
    mlp = _mlp(seed)
    mlp.fit((z - mean) / scale, y.astype(int))
    return dataclasses.replace(part, mean=mean.astype(np.float32), scale=scale.astype(np.float32), mlp=mlp)


def _folds(stores: Sequence[str], k: int) -> dict[str, int]:
    ids = sorted(set(stores))
    return {s: i % k for i, s in enumerate(ids)}


def _platt(logits: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    w, b = fit_logistic(logits.reshape(-1, 1).astype(np.float64), y.astype(np.float64), l2=1e-3)
    return float(w[0]), float(b)


def _calibrated(logits: np.ndarray, platt: tuple[float, float]) -> np.ndarray:
    a, b = platt
    return 1.0 / (1.0 + np.exp(-np.clip(a * logits + b, -60, 60)))


def message_trade(rows: Rows, p: np.ndarray, mask: np.ndarray, threshold: float) -> dict:
    """Per message (of those whose rows ``mask`` keeps): recall and false recall at one threshold."""
    best: dict[int, float] = {}
    hit: dict[int, bool] = {}
    for i in np.nonzero(mask)[0]:
        m = int(rows.message[i])
        best[m] = max(best.get(m, 0.0), float(p[i]))
        if rows.y[i] > 0 and p[i] >= threshold:
            hit[m] = True
    out: dict = {}
    for key, pick in (("lookups", True), ("statements", False)):
        pos = [m for m in best if rows.messages[m]["answers"] and rows.messages[m]["asks"] == pick]
        neg = [m for m in best if not rows.messages[m]["answers"] and rows.messages[m]["asks"] == pick]
        out[key] = {"recall": _share(sum(hit.get(m, False) for m in pos), len(pos)),
                    "false": _share(sum(best[m] >= threshold for m in neg), len(neg))}
    return out


def _share(k: int, n: int) -> dict:
    return {"n": n, "ok": int(k), "pct": round(100.0 * k / n, 1) if n else None}


def _by(rows: Rows, p: np.ndarray, mask: np.ndarray, bars: tuple[float, float], field: str) -> dict:
    """Per value of a message field: turn recall over its messages with answers, false recall over those without."""
    best: dict[int, float] = {}
    hit: dict[int, bool] = {}
    for i in np.nonzero(mask)[0]:
        m = int(rows.message[i])
        bar = bars[0] if rows.messages[m]["asks"] else bars[1]
        best[m] = max(best.get(m, -1.0), float(p[i]) - bar)
        if rows.y[i] > 0 and p[i] >= bar:
            hit[m] = True
    out: dict[str, dict[str, list[int]]] = {}
    for m in best:
        info = rows.messages[m]
        key = f"{info[field]}{' xlang' if field == 'shape' and info['xlang'] else ''}"
        kind, ok = ("recalled", hit.get(m, False)) if info["answers"] else ("false", best[m] >= 0)
        t = out.setdefault(key, {}).setdefault(kind, [0, 0])
        t[0] += 1
        t[1] += int(ok)
    return {k: {kind: _share(ok, n) for kind, (n, ok) in v.items()} for k, v in sorted(out.items())}


def _is_conversations(path: str | Path) -> bool:
    """A file in the ``eval conversation`` format (``conversations:``) rather than authored stores (``stores:``)."""
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("conversations:"):
                return True
            if line.startswith("stores:"):
                return False
    return False


def _choose(rows: Rows, p: np.ndarray, mask: np.ndarray) -> tuple[float, float]:
    grid = [round(t, 2) for t in np.arange(0.2, 0.96, 0.01)]
    look = next((t for t in grid if message_trade(rows, p, mask, t)["lookups"]["false"]["pct"] is None
                 or message_trade(rows, p, mask, t)["lookups"]["false"]["pct"] <= 100 * LOOKUP_FALSE), 0.95)
    unasked = next((t for t in grid if t >= look and (message_trade(rows, p, mask, t)["statements"]["false"]["pct"]
                                                      or 0.0) <= 100 * UNASKED_FALSE), 0.95)
    return look, unasked


def fit_reader(paths: Sequence[str | Path], *, config=None, folds: int = 5, out: str | Path | None = None,
               model_id: str = "rd-e5s-use3-1", rows_file: str | Path | None = None, progress: bool = True) -> dict:
    cfg = load_config(config)
    if rows_file is not None and Path(rows_file).exists():
        rows = Rows.load(rows_file)
    else:
        stores = [p for p in paths if not _is_conversations(p)]
        convs = [p for p in paths if _is_conversations(p)]
        parts = [build_rows(load_stores(stores), config=config, progress=progress)] if stores else []
        if convs:
            parts.append(build_conversation_rows(convs, config=config, progress=progress))
        rows = merge(*parts)
        if rows_file is not None:
            rows.save(rows_file)
    stores = sorted(set(rows.store))
    apart = {s for i, s in enumerate(stores) if i % 10 == 0}
    held = np.array([s in apart for s in rows.store])
    train = ~held
    head = len(rows.feature_names) + len(EXTRA)
    fold = _folds([s for s, h in zip(rows.store, held, strict=True) if not h], folds)
    logits = np.zeros(len(rows.y))
    for k in range(folds):
        test = np.array([not h and fold[s] == k for s, h in zip(rows.store, held, strict=True)])
        f = _fit(rows.x[train & ~test], rows.y[train & ~test], head)
        logits[test] = f.logit(rows.x[test])
    platt = _platt(logits[train], rows.y[train])
    p = _calibrated(logits, platt)
    bars = _choose(rows, p, train)
    final = _fit(rows.x[train], rows.y[train], head)
    p_held = _calibrated(final.logit(rows.x), platt)
    res = {
        "model": model_id, "rows": int(len(rows.y)), "positives": int(rows.y.sum()), "stores": len(stores),
        "held_apart_stores": len(apart), "messages": len(rows.messages),
        "in_reach": _share(sum(m["in_reach"] for m in rows.messages if m["answers"]),
                           sum(1 for m in rows.messages if m["answers"])),
        "cv": {"auc": auc(p[train], rows.y[train]),
               "ece": expected_calibration_error(list(zip(p[train].tolist(), rows.y[train].astype(int).tolist(),
                                                                   strict=True))),
               "sweep": {str(t): message_trade(rows, p, train, t) for t in SWEEP},
               "at_bars": message_trade(rows, p, train, bars[0]),
               "by_shape": _by(rows, p, train, bars, "shape"), "by_lang": _by(rows, p, train, bars, "lang")},
        "held_apart": {"auc": auc(p_held[held], rows.y[held]),
                       "ece": expected_calibration_error(list(zip(p_held[held].tolist(),
                                                                  rows.y[held].astype(int).tolist(), strict=True))),
                       "at_bars": message_trade(rows, p_held, held, bars[0]),
                       "by_shape": _by(rows, p_held, held, bars, "shape")},
        "thresholds": {"admit": bars[0], "admit_unasked": bars[1]},
    }
    if out is not None:
        w1, w2 = final.mlp.coefs_
        b1, b2 = final.mlp.intercepts_
        emb, second = _encoders(cfg)
        card = {"id": model_id, "kind": "reader", "features": list(rows.feature_names), "extra": list(EXTRA),
                "inputs": len(input_names(rows.feature_names, 384, 512)), "head": head, "components": COMPONENTS,
                "hidden": HIDDEN, "alpha": ALPHA,
                "platt": list(platt), "thresholds": res["thresholds"], "encoders": {"e5": emb, "use": second},
                "fitted": {"at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                           "data": [str(x) for x in paths], "rows": res["rows"], "stores": res["stores"],
                           "held_apart": sorted(apart), "cv_auc": res["cv"]["auc"], "cv_ece": res["cv"]["ece"],
                           "held_apart_auc": res["held_apart"]["auc"]}}
        model = ReaderModel({"pca_mean": final.pca_mean, "pca": final.pca, "mean": final.mean, "scale": final.scale,
                             "w1": w1, "b1": b1, "w2": w2, "b2": b2}, card)
        res["written"] = str(model.save(out))
    return res


def _encoders(cfg) -> tuple[str, str | None]:
    from ..retrieval.embedding import get_embedder
    from ..retrieval.second_opinion import get_second_opinion

    second = get_second_opinion(cfg.embedding.second_opinion == "auto")
    return get_embedder(cfg.embedding).model_id, second.model_id if second is not None else None


def default_out() -> Path:
    return model_dir()


def format_reader_fit(res: dict) -> str:
    def pct(t: dict) -> str:
        return f"{t['pct']}% ({t['ok']}/{t['n']})" if t.get("n") else "—"

    cv, ha = res["cv"], res["held_apart"]
    lines = [f"fit-reader {res['model']}: {res['rows']} pairs ({res['positives']} answers) from {res['messages']} "
             f"messages in {res['stores']} stores ({res['held_apart_stores']} held apart)",
             f"answer among the weighed candidates: {pct(res['in_reach'])}", "",
             f"5-fold CV: AUC {cv['auc']}, ECE {cv['ece']}; held apart: AUC {ha['auc']}, ECE {ha['ece']}", "",
             "| threshold | lookups recalled | lookups false | statements recalled | statements false |",
             "|---|---|---|---|---|"]
    for t, s in cv["sweep"].items():
        lines.append(f"| {t} | {pct(s['lookups']['recall'])} | {pct(s['lookups']['false'])} | "
                     f"{pct(s['statements']['recall'])} | {pct(s['statements']['false'])} |")
    th = res["thresholds"]
    lines += ["", f"bars: admit {th['admit']}, admit_unasked {th['admit_unasked']}",
              "", "| shape | recalled (CV) | false (CV) | recalled (held apart) | false (held apart) |",
              "|---|---|---|---|---|"]
    for k, v in cv["by_shape"].items():
        h = ha["by_shape"].get(k, {})
        lines.append(f"| {k} | {pct(v.get('recalled', {}))} | {pct(v.get('false', {}))} | "
                     f"{pct(h.get('recalled', {}))} | {pct(h.get('false', {}))} |")
    lines += ["", "| language (CV) | recalled | false |", "|---|---|---|"]
    lines += [f"| {k} | {pct(v.get('recalled', {}))} | {pct(v.get('false', {}))} |" for k, v in cv["by_lang"].items()]
    if res.get("written"):
        lines += ["", f"wrote {res['written']}"]
    return "\n".join(lines)
