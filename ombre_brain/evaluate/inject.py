"""`eval inject`: what a turn actually injects, end to end, on labelled questions (design §13).

A ranking metric says where the right memory sits; this says whether the companion sees it. Each
memory becomes a bucket as `eval recall` builds it, created long before the evaluation's fixed
``now`` (outside the recent-context window); every question runs through :meth:`Brain.turn` in a
fresh session. Per kind of question and language it reports:

- inject recall: a wanted memory is an item of Recalled Memory or Diffused Memory;
- wrong: the turn injected a memory that is not wanted (for a question that has wanted ones);
- unknown: the honest UNKNOWN line answered;
- false recall: anything in Recalled or Diffused Memory for a negative (absent-topic) or casual message;
- turn p50/p95 in milliseconds, and the expected calibration error of the admission evidence over
  every scored candidate (label: the candidate is a wanted memory).

Kinds: ``positive`` (`queries`), ``crosslingual``, ``negative``, ``casual``; LoCoMo questions by
category (``locomo_1`` … ``locomo_5``; 5 is adversarial: what it injects is reported, not scored).
"""

from __future__ import annotations

import re
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from time import perf_counter

import yaml

from ..brain import Brain
from ..errors import ValidationError
from ..text import is_cjk_text
from ..turn.conversation import context_messages
from .ranking import Memory, load_locomo, memory_bucket, memory_from

NOW = "2026-06-01T12:00:00+00:00"
MEMORY_SECTIONS = ("recalled_memory", "diffused_memory")
KINDS = ("positive", "crosslingual", "negative", "casual")
ECE_BINS = 10


@dataclass(frozen=True)
class Case:
    """One labelled message: its kind, the wanted memory ids (empty for negatives and casual), its context."""

    text: str
    kind: str
    wanted: tuple[str, ...] = ()
    context: tuple[dict, ...] = ()
    primary: str | None = None

    @property
    def lang(self) -> str:
        return "zh" if is_cjk_text(self.text) else "en"


@dataclass(frozen=True)
class InjectSet:
    name: str
    memories: tuple[Memory, ...]
    cases: tuple[Case, ...]
    links: tuple[tuple[str, str], ...] = ()


# ---------------------------------------------------------------- loading


def _want(q: dict, known: set[str], where: str) -> tuple[str, ...]:
    want = tuple(str(w) for w in (q.get("want") or ()))
    missing = [w for w in want if w not in known]
    if not want or missing:
        raise ValidationError(f"{where}: `want` must name memories of the set (unknown: {missing or 'none given'})")
    return want


def load_inject_yaml(path: str | Path) -> InjectSet:
    """The memories-and-queries format with `crosslingual`, `negatives` and `casual` lists beside `queries`.

    Memories come from `memories` or from the file named by `memories_from` (relative to this one).
    A query may carry `context` (a list of `user: …` / `assistant: …` strings) and `primary`.
    """
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ValidationError(f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise ValidationError(f"{path}: expected a mapping")
    mems = data.get("memories")
    queries = list(data.get("queries") or [])
    if data.get("memories_from"):
        base = yaml.safe_load((path.parent / str(data["memories_from"])).read_text(encoding="utf-8")) or {}
        mems = mems or base.get("memories")
        queries = queries or list(base.get("queries") or [])
    if not isinstance(mems, dict) or not mems:
        raise ValidationError(f"{path}: expected `memories: {{id: text}}` or `memories_from: FILE`")
    memories = tuple(memory_from(k, v, str(path)) for k, v in mems.items())
    known = {m.id for m in memories}
    cases: list[Case] = []
    for kind, key in (("positive", "queries"), ("crosslingual", "crosslingual")):
        for i, q in enumerate(queries if key == "queries" else data.get(key) or ()):
            if not isinstance(q, dict) or not q.get("q"):
                raise ValidationError(f"{path}: {key}[{i}] needs a text `q` and `want` ids")
            primary = str(q["primary"]) if q.get("primary") is not None else None
            cases.append(Case(str(q["q"]), kind, _want(q, known, f"{path}: {key}[{i}]"),
                              context_messages(q.get("context")), primary))
    for kind, key in (("negative", "negatives"), ("casual", "casual")):
        for i, q in enumerate(data.get(key) or ()):
            text = q.get("q") if isinstance(q, dict) else q
            if not isinstance(text, str) or not text.strip():
                raise ValidationError(f"{path}: {key}[{i}] must be a message (a string)")
            ctx = context_messages(q.get("context")) if isinstance(q, dict) else ()
            cases.append(Case(text, kind, (), ctx))
    return InjectSet(path.stem, memories, tuple(cases))


def load_locomo_inject(data_dir: str | Path) -> list[InjectSet]:
    files = sorted(Path(data_dir).glob("*.json"))
    if not files:
        raise ValidationError(f"no *.json conversations in {data_dir}", field="locomo")
    out = []
    for f in files:
        ds = load_locomo(f)
        cases = tuple(Case(q.text, f"locomo_{q.category}", q.wanted) for q in ds.questions)
        out.append(InjectSet(f"locomo-{ds.name}", ds.memories, cases, ds.links))
    return out


# ---------------------------------------------------------------- running


@dataclass
class Outcome:
    case: Case
    injected: list[str]
    unknown: bool
    ms: float
    scored: list[tuple[float, int]] = field(default_factory=list)  # (evidence, label) per candidate


def _bar(total: int, desc: str, show: bool):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="q", leave=False, file=sys.stderr, disable=None if show else True)


@contextmanager
def built_store(s: InjectSet, config=None) -> Iterator[tuple[Brain, str]]:
    """A fresh temporary store holding the set's memories, as `eval recall` builds them."""
    space = "eval:" + re.sub(r"[^A-Za-z0-9_.:\-]", "_", s.name)[:100]
    with tempfile.TemporaryDirectory(prefix="ombre-inject-") as tmp, Brain.open(Path(tmp) / "data", config) as brain:
        items = [memory_bucket(space, m, brain.config.store.max_title_chars) for m in s.memories]
        brain.write_many(items, dedupe=False)
        for a, b in s.links:
            brain.link(space, a, b, "context_of", 1.0)
        brain.turn(space, "warmup", "warm up", NOW, dry_run=True)  # first-call costs are not a turn's
        yield brain, space


def run_set(s: InjectSet, *, config=None, show_progress: bool = True) -> tuple[list[Outcome], str]:
    """Build a fresh store for the set and run every case as the first turn of its own session."""
    with built_store(s, config) as (brain, space):
        out: list[Outcome] = []
        bar = _bar(len(s.cases), f"{s.name}: turns", show_progress)
        for i, c in enumerate(s.cases):
            t0 = perf_counter()
            turn = brain.turn(space, f"eval-{i}", c.text, NOW, context=list(c.context))
            ms = (perf_counter() - t0) * 1000
            injected = [bid for key in MEMORY_SECTIONS for bid in turn.item_ids(key)]
            unknown = any(it.extra.get("note") == "unknown" for sec in turn.sections for it in sec.items)
            r = turn.debug.get("retrieval")
            scored = [(cand.admission.evidence, int(cand.bucket.id in c.wanted)) for cand in
                      (r.candidates if r is not None else ()) if cand.admission.evidence is not None]
            out.append(Outcome(c, injected, unknown, ms, scored))
            bar.update(1)
        bar.close()
        return out, brain.admitter.model_key()  # the admission model these numbers are for


# ---------------------------------------------------------------- scoring


def _pct(n: int, d: int) -> float | None:
    return round(100.0 * n / d, 1) if d else None


def _percentile(values: Sequence[float], p: float) -> float:
    if not values:
        return 0.0
    v = sorted(values)
    return round(v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))], 2)


def expected_calibration_error(scored: Sequence[tuple[float, int]], bins: int = ECE_BINS) -> float | None:
    """Σ_bins (n_b / N) · |mean label − mean score| over equal-width score bins; None with no scores."""
    if not scored:
        return None
    total = 0.0
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        inside = [(p, y) for p, y in scored if lo <= p < hi or (b == bins - 1 and p == 1.0)]
        if inside:
            total += len(inside) / len(scored) * abs(sum(y for _, y in inside) / len(inside)
                                                     - sum(p for p, _ in inside) / len(inside))
    return round(total, 4)


def score(outcomes: Sequence[Outcome]) -> dict:
    """Per kind and language: the figures of the module docstring."""
    groups: dict[str, dict[str, list[Outcome]]] = {}
    for o in outcomes:
        groups.setdefault(o.case.kind, {}).setdefault(o.case.lang, []).append(o)
    kinds: dict[str, dict] = {}
    for kind, by_lang in sorted(groups.items()):
        kinds[kind] = {}
        for lang, os_ in sorted(by_lang.items()):
            n = len(os_)
            row: dict = {"n": n, "unknown": sum(o.unknown for o in os_)}
            if os_[0].case.wanted and kind != "locomo_5":
                row["inject_recall"] = _pct(sum(bool(set(o.injected) & set(o.case.wanted)) for o in os_), n)
                row["wrong"] = sum(bool(set(o.injected) - set(o.case.wanted)) for o in os_)
                prim = [o for o in os_ if o.case.primary]
                if prim:
                    row["primary_recall"] = _pct(sum(o.case.primary in o.injected for o in prim), len(prim))
            else:
                row["false_recall"] = sum(bool(o.injected) for o in os_)
                row["false_recall_pct"] = _pct(row["false_recall"], n)
            kinds[kind][lang] = row
    ms = [o.ms for o in outcomes]
    scored = [s for o in outcomes for s in o.scored]
    return {"kinds": kinds, "turn_ms": {"p50": _percentile(ms, 50), "p95": _percentile(ms, 95)},
            "ece": expected_calibration_error(scored), "scored_candidates": len(scored), "questions": len(outcomes)}


def eval_inject(paths: Sequence[str | Path] = (), *, locomo: str | Path | None = None, config=None,
                show_progress: bool = True) -> dict:
    sets = [load_inject_yaml(p) for p in paths]
    if locomo is not None:
        sets += load_locomo_inject(locomo)
    if not sets:
        raise ValidationError("give --data FILE (an inject set) and/or --locomo DIR")
    outcomes: list[Outcome] = []
    model = ""
    for s in sets:
        got, model = run_set(s, config=config, show_progress=show_progress)
        outcomes += got
    res = score(outcomes)
    res.update(sets=[s.name for s in sets], model_id=model, now=NOW)
    return res


def format_inject(res: dict) -> str:
    lines = [f"eval inject: {', '.join(res['sets'])} ({res['questions']} questions, {res['model_id']})", "",
             "| kind | lang | n | inject recall | primary | wrong | unknown | false recall |",
             "|---|---|---|---|---|---|---|---|"]
    for kind, by_lang in res["kinds"].items():
        for lang, r in by_lang.items():
            fr = f"{r['false_recall']} ({r['false_recall_pct']}%)" if "false_recall" in r else ""
            ir = "" if r.get("inject_recall") is None else f"{r['inject_recall']}%"
            pr = "" if r.get("primary_recall") is None else f"{r['primary_recall']}%"
            lines.append(f"| {kind} | {lang} | {r['n']} | {ir} | {pr} | {r.get('wrong', '')} | {r['unknown']} | {fr} |")
    ece = "n/a" if res["ece"] is None else res["ece"]
    lines += ["", f"turn p50 {res['turn_ms']['p50']} ms, p95 {res['turn_ms']['p95']} ms; "
              f"evidence ECE (10 bins) {ece} over {res['scored_candidates']} candidates"]
    return "\n".join(lines)


__all__ = ["Case", "InjectSet", "built_store", "context_messages", "eval_inject", "expected_calibration_error",
           "format_inject", "load_inject_yaml", "load_locomo_inject", "score"]
