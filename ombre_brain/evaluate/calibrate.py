"""`calibrate`: fit the admission evidence score on labelled sets and choose its threshold (design §13).

Every candidate that admission would judge (the turn's own search, context-only matches left out)
becomes one example: its feature vector (:mod:`ombre_brain.retrieval.admission`) and its label (is
it a wanted memory of the question?). Negatives and casual messages contribute only label-0
examples; messages the planner skips never reach admission and are left out. A logistic regression
(L2, on standardised features, folded back to raw-feature weights) gives ``evidence``; the threshold
is the one that injects the most wanted memories while the score adds at most ``MAX_FALSE_RECALL``
to the absent-topic questions that inject something (and no casual message), over what lexical
evidence injects at any threshold.

With about a hundred labelled questions, in-sample figures flatter: the command also reports k-fold
cross-validated figures, folds grouped by memory (a question's wanted memory and every question
about it fall in one fold), and the expected calibration error of the score over 10 bins.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import yaml

from ..config import AdmissionModel
from ..errors import ValidationError
from ..retrieval.features import FEATURES
from .calibrate_examples import Example, Question, conversation_examples, examples_of
from .inject import expected_calibration_error, load_inject_yaml, load_locomo_inject

MAX_FALSE_RECALL = 1 / 15
STORE_FREE = ("lexical", "cosine", "ref_z", "cross_script", "use_cos", "use_ref_z", "aligned", "aligned_min", "lookup")
"""The features that read one candidate alone: a score over these gives a question and a memory the same decision in
a store of 1 or 10,000 memories (docs/design.md §13, §17)."""
L2 = 1.0
MAX_DIRECT = 4


# ---------------------------------------------------------------- the fit


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = L2, iters: int = 50,
                 weights: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """Weights and bias on the raw features: Newton steps on standardised features with an L2 penalty.

    ``weights`` weighs the examples (each labelled set the same in total, so the biggest does not decide).
    A feature that never varies (a second opinion that is off) gets weight 0.
    """
    sw = np.ones(len(x)) if weights is None else np.asarray(weights, dtype=np.float64)
    mu, sd = x.mean(axis=0), x.std(axis=0)
    dead = sd < 1e-9
    sd[dead] = 1.0
    z = np.hstack([(x - mu) / sd, np.ones((len(x), 1))])
    z[:, :-1][:, dead] = 0.0
    w = np.zeros(z.shape[1])
    reg = np.full(z.shape[1], l2)
    reg[-1] = 0.0
    for _ in range(iters):
        p = 1 / (1 + np.exp(-np.clip(z @ w, -60, 60)))
        grad = z.T @ (sw * (p - y)) + reg * w
        hess = (z * (sw * p * (1 - p))[:, None]).T @ z + np.diag(reg) + 1e-9 * np.eye(len(w))
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    raw = w[:-1] / sd
    return raw, float(w[-1] - (w[:-1] * mu / sd).sum())


def predict(x: np.ndarray, weights: np.ndarray, bias: float) -> np.ndarray:
    return 1 / (1 + np.exp(-np.clip(x @ weights + bias, -60, 60)))


# ---------------------------------------------------------------- what a turn would inject


Thresholds = tuple[float, ...]
"""(admit, admit_cross_script, admit_cjk[, admit_unasked]): a question and memory in the same script, across
scripts, a CJK question in its own script (a pair (same, cross) is read as (same, cross, same)), and a statement's
recall, unasked (with it, a statement is admitted by the score alone, at the higher of its threshold and this)."""


class Injections:
    """What a turn would inject for each question at given thresholds, vectorised over the examples.

    A candidate is admitted by lexical evidence, or when weighed and its score reaches the threshold
    of its script pair; a turn keeps the MAX_DIRECT best admitted by fused score. A question with
    wanted memories is a hit when one of those is wanted; any other question when anything is kept.
    """

    def __init__(self, ex: Sequence[Example], questions: Sequence[Question]) -> None:
        order = sorted(range(len(ex)), key=lambda i: (ex[i].query, -ex[i].fused))
        self.order = np.array(order, dtype=np.int64)
        self.query = np.array([ex[i].query for i in order], dtype=np.int64)
        self.label = np.array([ex[i].label for i in order], dtype=bool)
        self.lexical = np.array([ex[i].lexical_ok for i in order], dtype=bool)
        self.weighed = np.array([ex[i].weighed for i in order], dtype=bool)
        self.cross = np.array([ex[i].cross for i in order], dtype=bool)
        self.lookup = np.array([ex[i].lookup for i in order], dtype=bool)
        self.cjk = np.array([questions[ex[i].query].lang == "zh" for i in order], dtype=bool)  # a CJK question
        self.n = len(questions)
        self.wanted = np.array([q.wanted for q in questions], dtype=bool)
        starts = np.r_[0, np.flatnonzero(np.diff(self.query)) + 1] if len(order) else np.zeros(0, np.int64)
        self.group_start = np.repeat(starts, np.diff(np.r_[starts, len(order)]))

    def hits(self, p: np.ndarray, t: Thresholds) -> np.ndarray:
        ps = p[self.order]
        same_cjk = t[2] if len(t) > 2 else t[0]
        bar = np.where(self.cross, t[1], np.where(self.cjk, same_cjk, t[0]))
        ok = self.lexical | (self.weighed & (ps >= bar))
        if len(t) > 3:  # a statement's recall is unasked: the score alone, at the higher bar
            ok = np.where(self.lookup, ok, self.weighed & (ps >= np.maximum(bar, t[3])))
        seen = np.cumsum(ok)
        before = seen[self.group_start] - ok[self.group_start]  # admitted before this question's first example
        kept = ok & (seen - before <= MAX_DIRECT)
        wanted_kept = np.zeros(self.n, dtype=bool)
        any_kept = np.zeros(self.n, dtype=bool)
        wanted_kept[self.query[kept & self.label]] = True
        any_kept[self.query[kept]] = True
        return np.where(self.wanted, wanted_kept, any_kept)


def outcomes(ex: Sequence[Example], p: np.ndarray, questions: Sequence[Question], t: Thresholds) -> dict:
    """Per kind and language at threshold t: inject recall for questions with wanted memories, false recall else."""
    hit = Injections(ex, questions).hits(p, t)
    rows: dict[str, dict[str, list[int]]] = {}
    for qi, question in enumerate(questions):
        rows.setdefault(question.kind, {}).setdefault(question.lang, []).append(int(hit[qi]))
    return {k: {lang: {"n": len(v), "pct": round(100 * sum(v) / len(v), 1)} for lang, v in sorted(langs.items())}
            for k, langs in sorted(rows.items())}


SCORED_KINDS = ("positive", "crosslingual")  # what the threshold maximises (per set, then averaged)
UNASKED_KINDS = ("implicit", "positive")  # the statements among these set admit_unasked (MADial's are statements)
GRID = [i / 100 for i in range(2, 100)]


def choose_threshold(ex: Sequence[Example], p: np.ndarray, questions: Sequence[Question]) -> Thresholds:
    """The thresholds with the most wanted injections among those that keep what the score adds within bounds.

    The thresholds decide only what the score admits; lexical evidence admits whatever they are. So the
    guard is on what the score adds over lexical admission alone: at most MAX_FALSE_RECALL more of the
    absent-topic questions may inject something, counted apart for each population a threshold guards
    (questions about memories in another script; in their own script, Chinese and English apart), and not
    one more casual message. (A set whose near misses are written in its memories injects them through
    lexical evidence at any threshold; a guard on the total would shut the score off altogether.) Recall
    is averaged over each set's positive and cross-lingual questions, so no one set decides; LoCoMo's
    adversarial questions are reported, not used.
    Every (same script, cross script) pair on the grid is tried, one same-script threshold for both
    languages (a question about memories in both scripts meets both thresholds, so one at a time gets
    stuck); from the best pair, the Chinese same-script threshold, the other same-script one and the
    cross-script one are then moved one at a time where that adds recall (a population with nothing to gain
    keeps the pair's value), so the result is never worse than the pair. Ties go to the higher, more
    cautious thresholds.
    """
    inj = Injections(ex, questions)
    scored: dict[tuple[str, str], list[int]] = {}
    for qi, q in enumerate(questions):
        if q.kind in SCORED_KINDS:
            scored.setdefault((q.source, q.kind), []).append(qi)
    groups = [np.array(v) for v in scored.values()]
    across: dict[int, bool] = {}  # a question is about memories in another script when its best candidate is
    for e in sorted(ex, key=lambda e: -e.fused):
        across.setdefault(e.query, e.cross)

    def negative(cross: bool, zh: bool | None) -> np.ndarray:
        return np.array([qi for qi, q in enumerate(questions) if q.kind == "negative"
                         and across.get(qi, False) == cross and (zh is None or (q.lang == "zh") == zh)],
                        dtype=np.int64)

    negatives = [negative(False, True), negative(False, False), negative(True, None)]
    casual = np.array([qi for qi, q in enumerate(questions) if q.kind == "casual"], dtype=np.int64)
    lexical = inj.hits(p, (2.0, 2.0, 2.0))  # what lexical evidence injects on its own

    def value(t: Thresholds) -> float | None:
        hit = inj.hits(p, t)
        if any(len(n) and hit[n].mean() - lexical[n].mean() > MAX_FALSE_RECALL for n in negatives):
            return None
        if len(casual) and hit[casual].sum() > lexical[casual].sum():
            return None
        return float(np.mean([hit[g].mean() for g in groups])) if groups else 0.0

    def better(r: float, t: Thresholds, best: tuple[float, Thresholds]) -> bool:
        return (r, sum(t)) > (best[0], sum(best[1]))

    crosses = GRID if inj.cross[inj.weighed].any() else [None]
    best: tuple[float, Thresholds] = (-1.0, (0.99, 0.99, 0.99))
    for same in GRID:
        for cross in crosses:
            t = (same, same if cross is None else cross, same)
            r = value(t)
            if r is not None and better(r, t, best):
                best = (r, t)
    if best[0] < 0:
        return best[1]
    best = _coordinate_moves(best, crosses, GRID, value, better)
    if not any(q.kind == "implicit" for q in questions):  # no recall unasked to set a bar for
        return best[1]
    return (*best[1], _unasked(inj, questions, best[1], p, casual))


def _unasked(inj: Injections, questions: Sequence[Question], t: Thresholds, p: np.ndarray,
             casual: np.ndarray) -> float:
    """The statement threshold: the most recall unasked (statements with wanted memories, each set weighing the
    same), never below the lookup thresholds, and never one casual message injecting anything."""
    statements = set(inj.query[~inj.lookup].tolist())
    groups: dict[str, list[int]] = {}
    for qi, q in enumerate(questions):
        if q.wanted and q.kind in UNASKED_KINDS and qi in statements:
            groups.setdefault(q.source, []).append(qi)
    floor = max(t[0], t[2] if len(t) > 2 else t[0])
    best, best_v = -1.0, 0.99
    for v in [g for g in GRID if g >= floor]:
        hit = inj.hits(p, (*t, v))
        if len(casual) and hit[casual].any():
            continue
        r = float(np.mean([hit[np.array(g)].mean() for g in groups.values()])) if groups else 0.0
        if r > best:
            best, best_v = r, v
    return best_v


def _coordinate_moves(best, crosses, grid, value, better):
    for _ in range(3):  # coordinate moves from the best pair: Chinese same-script, other same-script, cross
        before = best
        for axis in ((2, 0, 1) if crosses[0] is not None else (2, 0)):
            moved = best
            for v in grid:
                t = tuple(v if i == axis else x for i, x in enumerate(best[1]))
                if crosses[0] is None and axis == 0:
                    t = (v, v, t[2])
                r = value(t)
                if r is not None and r > best[0] and better(r, t, moved):  # only for more recall
                    moved = (r, t)
            best = moved
        if best == before:
            break
    return best


def _folds(groups: Sequence[str], k: int, seed: int = 13) -> list[set[str]]:
    uniq = sorted(set(groups))
    random.Random(seed).shuffle(uniq)
    return [set(uniq[i::k]) for i in range(k)]


def calibrate(paths: Sequence[str | Path], *, locomo: str | Path | None = None, config=None, folds: int = 5,
              show_progress: bool = True, conversations: Sequence[str | Path] = (),
              features: Sequence[str] | None = None) -> dict:
    """Fit the evidence score on inject sets (``paths``, ``locomo``) and labelled ``conversations`` (young stores),
    over ``features`` (default: every registered one; :data:`STORE_FREE` are those that read one candidate
    alone), and choose its thresholds."""
    sets = [load_inject_yaml(p) for p in paths] + (load_locomo_inject(locomo) if locomo else [])
    if not sets and not conversations:
        raise ValidationError("give at least one --data FILE or --conversations FILE")
    if folds < 2:
        raise ValidationError("expected at least 2", field="folds")
    names = tuple(features) if features else FEATURES.names
    unknown = [n for n in names if n not in FEATURES]
    if unknown:
        raise ValidationError(f"unknown feature(s) {', '.join(unknown)} (known: {', '.join(FEATURES.names)})",
                              field="features")
    ex: list[Example] = []
    questions: list[Question] = []
    model_id = ""
    for s in sets:
        got, qs, model_id = examples_of(s, len(questions), config=config, show_progress=show_progress)
        ex += got
        questions += qs
    for path in conversations:
        got, qs, model_id = conversation_examples(path, len(questions), config=config, show_progress=show_progress)
        ex += got
        questions += qs
    if not ex or not any(e.label for e in ex) or all(e.label for e in ex):
        raise ValidationError("the sets gave no mix of wanted and unwanted candidates to fit on")
    cols = [FEATURES.names.index(n) for n in names]
    x = np.array([e.x for e in ex], dtype=np.float64)[:, cols]
    y = np.array([e.label for e in ex], dtype=np.float64)
    per_set: dict[str, int] = {}
    for e in ex:
        if e.weighed:
            per_set[e.source] = per_set.get(e.source, 0) + 1
    # the score is fitted on the candidates it is asked about (the weighed ones), each set weighing the same
    sw = np.array([len(ex) / (len(per_set) * per_set[e.source]) if e.weighed else 0.0 for e in ex])
    w, b = fit_logistic(x, y, weights=sw)
    p = predict(x, w, b)
    cv_p = np.zeros(len(ex))
    for fold in _folds([e.group for e in ex], folds):
        train = np.array([e.group not in fold for e in ex])
        if train.all() or not train.any() or len(set(y[train])) < 2:
            cv_p[~train] = p[~train]
            continue
        fw, fb = fit_logistic(x[train], y[train], weights=sw[train])
        cv_p[~train] = predict(x[~train], fw, fb)
    t = choose_threshold(ex, cv_p, questions)  # placed on out-of-fold scores: in-sample ones flatter
    overlay = f" --config {config}" if isinstance(config, (str, Path)) else ""
    fitted = (f"ombre-brain calibrate{overlay} {' '.join('--data ' + str(pp) for pp in paths)}"
              f"{''.join(' --conversations ' + str(pp) for pp in conversations)}"
              f"{' --locomo ' + str(locomo) if locomo else ''}"
              f"{' --features ' + ','.join(names) if features else ''} ({len(questions)} questions, "
              f"{sum(e.weighed for e in ex)} candidates)")
    model = AdmissionModel(weights={n: round(float(v), 4) for n, v in zip(names, w, strict=True)},
                           features=names, bias=round(b, 4), admit=t[0], admit_cross_script=t[1], admit_cjk=t[2],
                           admit_unasked=t[3] if len(t) > 3 else None, fitted=fitted)
    m = np.array([e.weighed for e in ex])  # AUC and ECE over the candidates the score decides about
    yi = y[m].astype(int).tolist()
    return {
        "model_id": model_id, "model": {"features": list(model.features), "weights": model.weights,
                                        "bias": model.bias, "admit": model.admit,
                                        "admit_cross_script": model.admit_cross_script,
                                        "admit_cjk": model.admit_cjk, "admit_unasked": model.admit_unasked,
                                        "fitted": model.fitted},
        "questions": len(questions), "candidates": int(m.sum()), "threshold": list(t),
        "in_sample": {"by_kind": outcomes(ex, p, questions, t),
                      "ece": expected_calibration_error(list(zip(p[m].tolist(), yi, strict=True))),
                      "auc": auc(p[m], y[m])},
        "cross_validated": {"folds": folds, "by_kind": outcomes(ex, cv_p, questions, t),
                            "ece": expected_calibration_error(list(zip(cv_p[m].tolist(), yi, strict=True))),
                            "auc": auc(cv_p[m], y[m])},
    }


def auc(p: np.ndarray, y: np.ndarray) -> float | None:
    """The area under the ROC curve (the chance a wanted candidate scores above an unwanted one)."""
    pos, neg = p[y == 1], p[y == 0]
    if not len(pos) or not len(neg):
        return None
    order = np.argsort(np.concatenate([pos, neg]), kind="mergesort")
    ranks = np.empty(len(order))
    ranks[order] = np.arange(1, len(order) + 1)
    return round(float((ranks[:len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg))), 4)


def write_overlay(res: dict, path: str | Path) -> None:
    """A config overlay holding the fitted admission for this embedder (merge it with --config)."""
    m = res["model"]
    doc = {"retrieval": {"admission": {"models": {res["model_id"]: {
        "features": m["features"], "weights": m["weights"], "bias": m["bias"], "admit": m["admit"],
        "admit_cross_script": m["admit_cross_script"], "admit_cjk": m["admit_cjk"],
        "admit_unasked": m.get("admit_unasked"), "fitted": m["fitted"]}}}}}
    Path(path).write_text("# written by `ombre-brain calibrate`\n" + yaml.safe_dump(doc, allow_unicode=True,
                                                                                        sort_keys=False),
                          encoding="utf-8")


def format_calibration(res: dict) -> str:
    m = res["model"]
    lines = [f"calibrated admission for {res['model_id']}: {res['questions']} questions, {res['candidates']} "
             f"candidates", "weights: " + ", ".join(f"{k} {v:+.3f}" for k, v in m["weights"].items())
             + f"; bias {m['bias']:+.3f}; admit at evidence >= {m['admit']} "
             f"({m['admit_cjk']} for a Chinese question in its own script, {m['admit_cross_script']} across "
             f"scripts, {m.get('admit_unasked')} for recall unasked)", "",
             "| kind | lang | n | in-sample | cross-validated |", "|---|---|---|---|---|"]
    ins, cv = res["in_sample"]["by_kind"], res["cross_validated"]["by_kind"]
    for kind, langs in ins.items():
        for lang, r in langs.items():
            label = "false recall" if kind in ("negative", "casual", "locomo_5") else "inject recall"
            lines.append(f"| {kind} ({label}) | {lang} | {r['n']} | {r['pct']}% | {cv[kind][lang]['pct']}% |")
    lines += ["", f"AUC {res['in_sample']['auc']} in sample, {res['cross_validated']['auc']} cross-validated "
              f"({res['cross_validated']['folds']} folds grouped by memory); ECE {res['in_sample']['ece']} / "
              f"{res['cross_validated']['ece']}"]
    return "\n".join(lines)


__all__ = ["auc", "calibrate", "choose_threshold", "fit_logistic", "format_calibration", "outcomes", "predict",
           "write_overlay"]
