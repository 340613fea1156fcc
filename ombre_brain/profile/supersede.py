"""Changed facts, learned: which newer line makes an older one no longer current (design §24).

The frame rules (:mod:`.frames`) are explainable but brittle: a shared word or a shared attribute cue is weak
evidence, and most changes are said without a cue ("在青岛上班了", "Leo's four now"). This model reads a pair
(older line, newer line of the same family) as the gradient-boosted trees ``fit-supersede`` fitted on authored
stores of users whose facts changed over two years (``training/supersede/``, ``training/read/``): the two memories'
e5 and USE cosines, each one's standing among the other's neighbours (is the newer the closest newer line to the
older, and the older the closest older line to the newer), their frames (holder, attributes, a stated change, shared
key terms), what the rules say, their word overlap, and the time between them. Pairs are those of a space's current
profile members, each older line against its closest newer lines; the older is superseded by the newer it scores
highest with, at the model's threshold. Pure: frames, vectors and times in, a mapping out.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from importlib import resources
from pathlib import Path

import numpy as np

from ..errors import ConfigError
from ..retrieval.trees import Forest
from .frames import OTHER, SELF, Frame, shares_term

RULES = ("same_attribute", "said_to_change", "holder_ended", "holder_replaced")
BASE = ("cos_e5", "cos_use", "same_holder", "same_other_holder", "same_attr_same_holder", "shared_attr",
        "new_changed", "old_changed", "shared_term", "shared_term_changed", "ended", "dice", "new_stable", "gap",
        "rank_new0", "rank_old0", "mutual", "rank_new", "rank_old")
NEIGHBOURS = 12  # newer lines weighed against each older line (its closest, by USE)
MIN_COS = 0.2    # and never one further than this


@dataclass(frozen=True)
class Member:
    """One current profile member as the model reads it."""

    id: str
    at: str          # created, ISO (the order)
    text: str        # the user's words
    frame: Frame
    family: str      # "fact" or "lesson": the two never supersede each other
    stable: bool     # its hint is stable_boundary


def feature_names(attributes: Sequence[str]) -> list[str]:
    return [*BASE, *(f"rule_{r}" for r in RULES), *(f"attr_{a}" for a in sorted(attributes))]


def _days(iso: str) -> float:
    try:
        return datetime.fromisoformat(iso).timestamp() / 86400.0
    except (TypeError, ValueError):
        return 0.0


_GRAM = re.compile(r"[\u4e00-\u9fff]")
_WORD = re.compile(r"[a-z]{3,}")


def _grams(text: str) -> frozenset[str]:
    t = text.lower()
    cj = _GRAM.findall(t)
    return frozenset({a + b for a, b in zip(cj, cj[1:], strict=False)} | set(_WORD.findall(t)))


def dice(a: frozenset[str], b: frozenset[str]) -> float:
    return 2 * len(a & b) / (len(a) + len(b)) if a and b else 0.0


def pair_rows(members: Sequence[Member], e5: np.ndarray, use: np.ndarray, rules: Mapping[str, tuple[str, str]],
              attributes: Sequence[str], endings: Sequence[str]) -> tuple[list[tuple[int, int]], np.ndarray]:
    """The (older, newer) pairs worth weighing and their feature rows. ``e5`` and ``use`` are the members' unit
    vectors (rows in ``members`` order); ``rules`` what :func:`~.frames.supersessions` said."""
    n = len(members)
    if n < 2:
        return [], np.zeros((0, len(feature_names(attributes))), dtype=np.float32)
    days = np.array([_days(m.at) for m in members])
    cu = use @ use.T
    ce = e5 @ e5.T
    grams = [_grams(m.text) for m in members]
    ends = frozenset(endings)
    attrs = sorted(attributes)
    when = [(days[k], members[k].id) for k in range(n)]
    # each member's newer and older lines of its family, closest (by USE) first: ranks are read, not sorted per pair
    newer_of = [sorted((j for j in range(n) if j != i and when[j] > when[i] and members[j].family == members[i].family),
                       key=lambda j, i=i: -cu[i, j]) for i in range(n)]
    older_rank = [{k: r for r, k in enumerate(sorted(
        (k for k in range(n) if k != j and when[k] < when[j] and members[k].family == members[j].family),
        key=lambda k, j=j: -cu[j, k]))} for j in range(n)]
    pairs, rows = [], []
    for i, old in enumerate(members):
        for rank_new, j in enumerate(newer_of[i][:NEIGHBOURS]):
            if cu[i, j] < MIN_COS and rank_new > 0:
                break
            new = members[j]
            rank_old = older_rank[j].get(i, 99)
            fo, fn = old.frame, new.frame
            same = fo.holder == fn.holder and fo.holder != OTHER
            shared = fo.attributes & fn.attributes
            term = shares_term(fo.terms, fn.terms)
            rule = rules.get(old.id)
            x = [float(ce[i, j]), float(cu[i, j]), same, same and fo.holder != SELF, bool(shared) and same,
                 bool(shared), fn.changed, fo.changed, term, term and fn.changed,
                 same and fn.holder != SELF and bool(fn.attributes & ends), dice(grams[i], grams[j]), new.stable,
                 math.log1p(max(0.0, days[j] - days[i])) / 7.0, rank_new == 0, rank_old == 0,
                 rank_new == 0 and rank_old == 0, min(rank_new, 5), min(rank_old, 5)]
            x += [rule is not None and rule[0] == new.id and rule[1] == r for r in RULES]
            x += [a in shared for a in attrs]
            pairs.append((i, j))
            rows.append(x)
    width = len(feature_names(attributes))  # no pair at all: one line alone, or lines of different families
    return pairs, np.array(rows, dtype=np.float32).reshape(len(rows), width)


class SupersedeModel:
    """Fitted trees, the names of their inputs and the threshold they were chosen at."""

    def __init__(self, arrays: Mapping[str, np.ndarray], card: Mapping) -> None:
        self.card = dict(card)
        self.id = str(card["id"])
        self.forest = Forest(arrays)
        self.features: tuple[str, ...] = tuple(card["features"])
        self.threshold = float(card.get("threshold", 0.5))

    def predict(self, x: np.ndarray) -> np.ndarray:
        if len(x) == 0:
            return np.zeros(0)
        return 1.0 / (1.0 + np.exp(-np.clip(self.forest.logit(x), -60, 60)))

    def save(self, directory: str | Path) -> Path:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(directory / f"{self.id}.npz", **self.forest.arrays())
        (directory / f"{self.id}.json").write_text(json.dumps(self.card, ensure_ascii=False, indent=1) + "\n",
                                                   encoding="utf-8")
        return directory / f"{self.id}.npz"


def decide(members: Sequence[Member], pairs: Sequence[tuple[int, int]], p: np.ndarray,
           threshold: float) -> dict[str, tuple[str, str, float]]:
    """``{older id: (newer id, "learned", p)}``: each older line superseded by the newer it scores highest with."""
    best: dict[int, tuple[float, int]] = {}
    for (i, j), v in zip(pairs, p, strict=True):
        if v >= threshold and v > best.get(i, (-1.0, -1))[0]:
            best[i] = (float(v), j)
    return {members[i].id: (members[j].id, "learned", round(v, 4)) for i, (v, j) in best.items()}


def model_dir() -> Path:
    return Path(str(resources.files(__package__) / "models"))


@lru_cache(maxsize=8)
def load_supersede(model_id: str, path: str | None = None) -> SupersedeModel:
    directory = Path(path) if path else model_dir()
    npz, card = directory / f"{model_id}.npz", directory / f"{model_id}.json"
    if not npz.exists() or not card.exists():
        raise ConfigError(f"no changed-fact model {model_id!r} in {directory} (fit one with `ombre-brain "
                          "fit-supersede`)", key="gateway.profile.supersede.id")
    with np.load(npz) as arrays:
        return SupersedeModel(dict(arrays), json.loads(card.read_text(encoding="utf-8")))


__all__ = ["Member", "SupersedeModel", "decide", "dice", "feature_names", "load_supersede", "model_dir",
           "pair_rows"]
