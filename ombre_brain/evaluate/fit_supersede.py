"""`fit-supersede`: fit the profile's changed-fact model on authored stores, report both errors, write its trees.

A store is one fictional user's memories over about two years, each with its age, and which older memories each
newer one makes no longer current (``training/supersede/*.yaml``: ``supersedes: [ids]``, ``restates: [ids]``; the
reader's stores in ``training/read/`` give ``superseded_by: id``). Each store is written into a space of its own and
read by the very code that serves the profile (:meth:`~ombre_brain.profile.cache.ProfileCache.inputs`): members,
frames, stored vectors, the rules' verdicts; every (older, newer) pair it weighs becomes a row, labelled 1 when the
store says the newer supersedes the older (a restatement is neither and is left out). The model is scikit-learn's
histogram gradient boosting, exported as arrays (:mod:`~ombre_brain.retrieval.trees`). Reported, 5-fold
cross-validated by store: the AUC, and at each threshold the two errors the profile can make — an old value left
current (the labelled supersessions not found) and a true fact hidden (memories superseded that nothing
supersedes) — with the threshold chosen where hidden facts stay at most ``MAX_HIDDEN`` of the members.
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import yaml

from ..brain import Brain
from ..config import load_config
from ..errors import ValidationError
from ..profile.supersede import SupersedeModel, decide, feature_names, model_dir, pair_rows
from ..retrieval.trees import export
from .calibrate import auc

__all__ = ["fit_supersede", "format_supersede_fit", "load_change_stores"]

NOW = datetime(2026, 11, 1, 20, 0, tzinfo=timezone.utc)
OLD_DAYS = 400
MAX_HIDDEN = 0.015
SWEEP = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
SUBJECT = {"stable_boundary": "user", "short_state": "user", "process_event": "event",
           "relationship_lesson": "relationship"}


@dataclasses.dataclass(frozen=True)
class ChangeStore:
    id: str
    memories: dict[str, dict]
    supersedes: frozenset[tuple[str, str]]  # (older, newer)
    restates: frozenset[tuple[str, str]]


def load_change_stores(paths: Sequence[str | Path]) -> list[ChangeStore]:
    out = []
    for path in paths:
        try:
            data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ValidationError(f"cannot read {path}: {exc}", field="data") from None
        for si, s in enumerate(data.get("stores") or ()):
            mems = s.get("memories")
            if not isinstance(mems, dict):
                raise ValidationError(f"{path}: stores[{si}]: expected memories", field="data")
            sup, res = set(), set()
            for k, m in mems.items():
                for old in m.get("supersedes") or ():
                    sup.add((old, k))
                for old in m.get("restates") or ():
                    res.add((old, k))
                if m.get("superseded_by"):
                    sup.add((k, m["superseded_by"]))
            bad = [p for p in sup | res if p[0] not in mems or p[1] not in mems]
            if bad:
                raise ValidationError(f"{path}: stores[{si}]: unknown memory ids in {bad[:3]}", field="data")
            out.append(ChangeStore(str(s.get("id") or f"{Path(path).stem}-{si}"), dict(mems), frozenset(sup),
                                   frozenset(res)))
    return out


def build_pairs(stores: Sequence[ChangeStore], *, config=None, progress: bool = True):
    """Each store through the profile's own reading: rows, labels, store of each row, and per store its members."""
    cfg = load_config(config)
    pc = cfg.gateway.profile
    xs, ys, groups, per_store = [], [], [], {}
    with tempfile.TemporaryDirectory(prefix="ombre-supersede-") as d, Brain.open(d, cfg) as brain:
        brain.profile.collect_vectors = True
        for k, st in enumerate(stores):
            if progress:
                print(f"[{k + 1}/{len(stores)}] {st.id}", file=sys.stderr, flush=True)
            space = f"sup:{st.id}"
            for key, m in st.memories.items():
                when = NOW - timedelta(days=float(m.get("days_ago", OLD_DAYS)))
                brain.write(space, id=f"{st.id}-{key}", title=m["text"][:24], body=m["text"],
                            created=when.isoformat(), memory_layer=m.get("layer"),
                            memory_subject=SUBJECT.get(m.get("layer")), memory_classification_source="model",
                            dedupe=False)
            members, e5, use, rules = brain.profile.inputs(space, cfg)
            pairs, x = pair_rows(members, e5, use, rules, tuple(pc.attributes), pc.endings)
            key = {m.id: m.id[len(st.id) + 1:] for m in members}
            keep = [n for n, (i, j) in enumerate(pairs) if (key[members[i].id], key[members[j].id]) not in st.restates]
            labels = [float((key[members[pairs[n][0]].id], key[members[pairs[n][1]].id]) in st.supersedes)
                      for n in keep]
            xs.append(x[keep])
            ys += labels
            groups += [st.id] * len(keep)
            olds = {key[m.id] for m in members}
            per_store[st.id] = {"members": members, "pairs": [pairs[n] for n in keep],
                                "wanted": {p for p in st.supersedes if p[0] in olds and p[1] in olds}}
    return np.vstack(xs).astype(np.float32), np.array(ys), groups, per_store


def _model(seed: int = 7):
    from sklearn.ensemble import HistGradientBoostingClassifier

    return HistGradientBoostingClassifier(max_iter=300, learning_rate=0.05, max_leaf_nodes=15, min_samples_leaf=10,
                                          l2_regularization=1.0, random_state=seed)


def _errors(per_store: dict, p_by_store: dict, threshold: float) -> dict:
    found = missed = hidden = members = 0
    for sid, st in per_store.items():
        got = decide(st["members"], st["pairs"], p_by_store[sid], threshold)
        prefix = len(sid) + 1
        pairs = {(o[prefix:], n[prefix:]) for o, (n, _r, _p) in got.items()}
        olds_wanted = {o for o, _ in st["wanted"]}
        found += sum(1 for o, _ in st["wanted"] if any(o == a for a, _ in pairs))
        missed += sum(1 for o, _ in st["wanted"] if not any(o == a for a, _ in pairs))
        hidden += sum(1 for a, _ in pairs if a not in olds_wanted)
        members += len(st["members"])
    total = found + missed
    return {"stale_fixed": {"n": total, "ok": found, "pct": round(100 * found / total, 1) if total else None},
            "true_hidden": {"n": members, "ok": hidden, "pct": round(100 * hidden / members, 2) if members else None}}


def fit_supersede(paths: Sequence[str | Path], *, config=None, folds: int = 5, out: str | Path | None = None,
                  model_id: str = "sp-e5s-use3-1", progress: bool = True) -> dict:
    cfg = load_config(config)
    x, y, groups, per_store = build_pairs(load_change_stores(paths), config=config, progress=progress)
    ids = sorted(set(groups))
    fold = {s: i % folds for i, s in enumerate(ids)}
    f = np.array([fold[g] for g in groups])
    p = np.zeros(len(y))
    for k in range(folds):
        m = _model().fit(x[f != k], y[f != k].astype(int))
        p[f == k] = m.predict_proba(x[f == k])[:, 1]
    p_by_store: dict[str, list] = {}
    for g, v in zip(groups, p, strict=True):
        p_by_store.setdefault(g, []).append(v)
    p_by_store = {k: np.array(v) for k, v in p_by_store.items()}
    sweep = {str(t): _errors(per_store, p_by_store, t) for t in SWEEP}
    grid = [round(t, 2) for t in np.arange(0.2, 0.95, 0.01)]
    threshold = next((t for t in grid if _errors(per_store, p_by_store, t)["true_hidden"]["pct"] <= 100 * MAX_HIDDEN),
                     0.95)
    res = {"model": model_id, "stores": len(ids), "pairs": int(len(y)), "positives": int(y.sum()),
           "cv_auc": auc(p, y), "sweep": sweep, "threshold": threshold,
           "at_threshold": _errors(per_store, p_by_store, threshold)}
    if out is not None:
        final = _model().fit(x, y.astype(int))
        names = feature_names(tuple(cfg.gateway.profile.attributes))
        card = {"id": model_id, "kind": "supersede", "features": names, "threshold": threshold,
                "fitted": {"at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                           "data": [str(q) for q in paths], "stores": len(ids), "pairs": res["pairs"],
                           "positives": res["positives"], "cv_auc": res["cv_auc"], "at_threshold": res["at_threshold"]}}
        res["written"] = str(SupersedeModel(export(final), card).save(out))
    return res


def default_out() -> Path:
    return model_dir()


def format_supersede_fit(res: dict) -> str:
    def pct(t: dict) -> str:
        return f"{t['pct']}% ({t['ok']}/{t['n']})" if t.get("n") else "—"

    lines = [f"fit-supersede {res['model']}: {res['pairs']} pairs ({res['positives']} supersessions) in "
             f"{res['stores']} stores; 5-fold CV AUC {res['cv_auc']}", "",
             "| threshold | old values no longer shown as current | true facts hidden (of members) |", "|---|---|---|"]
    for t, r in res["sweep"].items():
        lines.append(f"| {t} | {pct(r['stale_fixed'])} | {pct(r['true_hidden'])} |")
    r = res["at_threshold"]
    lines += ["", f"threshold {res['threshold']}: {pct(r['stale_fixed'])} fixed, {pct(r['true_hidden'])} hidden"]
    if res.get("written"):
        lines += ["", f"wrote {res['written']}"]
    return "\n".join(lines)
