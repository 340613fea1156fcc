"""Retrieval evaluation: LoCoMo turn-level recall@k and a memories-and-queries YAML, beside baselines.

Every system ranks the buckets of one fresh store, built from the same embeddings, so the
numbers differ only by how the evidence is weighed:

- ``ombre``: :meth:`Brain.batchsearch`, the fused ranking direct recall uses (before gates
  and budgets);
- ``dense``: one Chroma query over the moment embeddings, each bucket scored by its best moment;
- ``bm25``: the store's lexical index over jieba tokens, each bucket scored by its best moment.

LoCoMo turns are stored one bucket per turn (speaker and text, plus the caption of a shared
image), created at the session's time, with the turn's ``dia_id`` as id; consecutive turns of a
session are linked by a ``context_of`` edge, the conversation's own order, which the fused
ranking may use (``retrieval.fusion.context_share``). Query embeddings are computed once, in a
batch, before any system runs, so ``ms_per_query`` compares the retrieval work alone; the shared
embedding cost is reported beside it.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from time import perf_counter

from ..buckets import bucket_id_of
from ..turn.conversation import context_messages

SYSTEMS = ("ombre", "dense", "bm25")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
DEFAULT_KS = (5, 10, 25, 50)
RECALL_KS = (1, 3, 5)
MRR_DEPTH = 10
POOL_FACTOR = 4  # moments fetched per wanted bucket, as Retriever.rank does

_SESSION_RE = re.compile(r"session_(\d+)")
_EVIDENCE_RE = re.compile(r"D:?(\d+):(\d+)")
RECALL_CREATED = "2026-01-01T00:00:00+00:00"


# ---------------------------------------------------------------- data


@dataclass(frozen=True)
class Memory:
    """One memory to store: its id, text and creation time; ``title`` (with ``body`` and ``tags``) when the set
    writes it as a bucket is written, with sections (``text`` is then title and body together)."""

    id: str
    text: str
    created: str
    title: str | None = None
    body: str = ""
    tags: tuple[str, ...] = ()


def memory_from(key, value, where: str) -> Memory:
    """A memory of a YAML set: a text, or a mapping ``{title, body, tags}`` written as a bucket is."""
    from ..errors import ValidationError

    if not isinstance(value, dict):
        return Memory(str(key), str(value).strip(), RECALL_CREATED)
    title, body, tags = value.get("title"), value.get("body") or "", value.get("tags") or []
    if not isinstance(title, str) or not title.strip():
        raise ValidationError(f"{where}: memory {key} needs a text `title` (or write the memory as one text)")
    if not isinstance(body, str) or not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise ValidationError(f"{where}: memory {key}: `body` must be a text and `tags` a list of texts")
    title, body = title.strip(), body.strip()
    return Memory(str(key), f"{title}\n{body}".strip(), RECALL_CREATED, title, body, tuple(t.strip() for t in tags))


@dataclass(frozen=True)
class Question:
    """One query with the memory ids that answer it; ``category`` is LoCoMo's (0 when none).

    ``context`` is the conversation before it ({role, content}, oldest first; MADial's dialogues).
    """

    text: str
    wanted: tuple[str, ...]
    category: int = 0
    context: tuple[dict, ...] = ()


@dataclass(frozen=True)
class Dataset:
    name: str
    memories: tuple[Memory, ...]
    questions: tuple[Question, ...]
    dropped_evidence: int = 0  # evidence ids that name no turn of the conversation
    links: tuple[tuple[str, str], ...] = ()  # (earlier, later) memories of one conversation, in order


def parse_locomo_time(value: str) -> datetime:
    """LoCoMo session times such as "1:56 pm on 8 May, 2023"; they carry no zone, so UTC."""
    dt = datetime.strptime(value.strip().replace("  ", " "), "%I:%M %p on %d %B, %Y")
    return dt.replace(tzinfo=timezone.utc)


def evidence_ids(raw: Iterable[str]) -> list[str]:
    """Evidence dia_ids, cleaned of the data's typos ("D8:6; D9:17" is two ids, "D:11:26" is D11:26)."""
    out: list[str] = []
    for item in raw:
        for m in _EVIDENCE_RE.finditer(str(item)):
            eid = f"D{int(m.group(1))}:{int(m.group(2))}"
            if eid not in out:
                out.append(eid)
    return out


def turn_text(turn: dict) -> str:
    """What a turn says: speaker and text, plus the caption of a shared image (as LoCoMo's own RAG setup does)."""
    text = f"{turn['speaker']}: {str(turn.get('text') or '').strip()}"
    caption = str(turn.get("blip_caption") or "").strip()
    return f"{text} [shared an image: {caption}]" if caption else text


def load_locomo(path: str | Path) -> Dataset:
    """One LoCoMo conversation: a memory per dialog turn, a question per QA item with evidence."""
    path = Path(path)
    data = json.loads(path.read_text(encoding="utf-8"))
    conv = data.get("conversation", data)
    memories: list[Memory] = []
    links: list[tuple[str, str]] = []
    for key in sorted((k for k in conv if _SESSION_RE.fullmatch(k)), key=lambda k: int(k.split("_")[1])):
        when = conv.get(f"{key}_date_time")
        created = parse_locomo_time(when).isoformat() if when else RECALL_CREATED
        session = [Memory(str(turn["dia_id"]), turn_text(turn), created) for turn in conv[key] or ()]
        links += [(a.id, b.id) for a, b in zip(session, session[1:], strict=False)]
        memories += session
    known = {m.id for m in memories}
    questions: list[Question] = []
    dropped = 0
    for qa in data.get("qa", ()):
        ids = evidence_ids(qa.get("evidence") or ())
        good = tuple(i for i in ids if i in known)
        dropped += len(ids) - len(good)
        if good:
            questions.append(Question(str(qa["question"]), good, int(qa.get("category") or 0)))
    return Dataset(path.stem, tuple(memories), tuple(questions), dropped, tuple(links))


def load_recall_yaml(path: str | Path) -> Dataset:
    """The memories-and-queries format: ``memories: {id: text}``, ``queries: [{q, want: [ids]}]``."""
    import yaml

    from ..errors import ValidationError

    path = Path(path)
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    mems = data.get("memories")
    if not isinstance(mems, dict) or not isinstance(data.get("queries"), list):
        raise ValidationError(f"{path}: expected `memories: {{id: text}}` and `queries: [{{q, want}}]`")
    memories = tuple(memory_from(k, v, str(path)) for k, v in mems.items())
    known = {m.id for m in memories}
    questions = []
    for i, q in enumerate(data["queries"]):
        want = tuple(str(w) for w in (q.get("want") or ()) if str(w) in known)
        if not isinstance(q, dict) or not q.get("q") or not want:
            raise ValidationError(f"{path}: query {i} needs a text `q` and `want` ids among the memories")
        questions.append(Question(str(q["q"]), want, context=context_messages(q.get("context"))))
    return Dataset(path.stem, memories, tuple(questions))


def memory_bucket(space: str, m: Memory, max_title: int) -> dict:
    """A bucket holding the memory verbatim: the text as its title, or a cut title and the whole text as body
    (a memory written as a bucket keeps its own title, body and tags)."""
    if m.title is not None:
        return {"space": space, "id": m.id, "title": m.title, "body": m.body, "tags": list(m.tags),
                "created": m.created}
    if len(m.text) <= max_title:
        title, body = m.text, ""
    else:
        cut = m.text[:max_title - 1]
        title, body = (cut.rsplit(" ", 1)[0] if " " in cut[max_title // 2:] else cut) + "…", m.text
    return {"space": space, "id": m.id, "title": title, "body": body, "created": m.created}


# ---------------------------------------------------------------- scores


def recall_at_k(ranked: Sequence[str], wanted: Sequence[str], k: int) -> float:
    """The share of the wanted ids found among the first k ranked ids."""
    if not wanted:
        return 0.0
    top = set(ranked[:k])
    return sum(1 for w in set(wanted) if w in top) / len(set(wanted))


def hit_at_k(ranked: Sequence[str], wanted: Sequence[str], k: int) -> float:
    """1 when any wanted id is among the first k ranked ids, else 0."""
    return 1.0 if set(ranked[:k]) & set(wanted) else 0.0


def reciprocal_rank(ranked: Sequence[str], wanted: Sequence[str], depth: int = MRR_DEPTH) -> float:
    """1 / the rank of the first wanted id within ``depth``, else 0."""
    for i, bid in enumerate(ranked[:depth], 1):
        if bid in wanted:
            return 1.0 / i
    return 0.0


def _pct(values: Sequence[float]) -> float:
    return round(100.0 * sum(values) / len(values), 2) if values else 0.0


# ---------------------------------------------------------------- systems


def _best_per_bucket(scores: dict[str, float], depth: int) -> list[str]:
    """Bucket ids by their best moment's score, best first (ties by moment id), at most ``depth``."""
    out: list[str] = []
    for mid, _ in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0])):
        bid = bucket_id_of(mid)
        if bid not in out:
            out.append(bid)
            if len(out) >= depth:
                break
    return out


class Rankers:
    """The three systems over one space of one brain, each returning bucket ids best first."""

    def __init__(self, brain, space: str) -> None:
        self.brain = brain
        self.space = space

    def ombre(self, query: str, depth: int, context: Sequence[dict] = ()) -> list[str]:
        return self.brain.search(self.space, query, depth, context=list(context) or None)

    def ombre_last(self, query: str, depth: int, context: Sequence[dict] = ()) -> list[str]:
        """The fused ranking on the last message alone, whatever came before it."""
        return self.brain.search(self.space, query, depth)

    def dense(self, query: str, depth: int, context: Sequence[dict] = ()) -> list[str]:
        vec = self.brain.store.embedder.query(query)
        return _best_per_bucket(self.brain.store.vector_search(self.space, vec, depth * POOL_FACTOR), depth)

    def bm25(self, query: str, depth: int, context: Sequence[dict] = ()) -> list[str]:
        hits = self.brain.store.lexical_search(self.space, self.brain.tokenize(query), depth * POOL_FACTOR)
        return _best_per_bucket(hits, depth)

    def run(self, system: str, queries: Sequence[str], depth: int, tick: Callable[[], None] | None = None,
            contexts: Sequence[Sequence[dict]] | None = None) -> tuple[list[list[str]], float]:
        """Rank every query with one system; returns the rankings and the seconds spent."""
        rank = getattr(self, system)
        out = []
        contexts = contexts or [()] * len(queries)
        t0 = perf_counter()
        for q, ctx in zip(queries, contexts, strict=True):
            out.append(list(rank(q, depth, ctx)))
            if tick is not None:
                tick()
        return out, perf_counter() - t0


def _bar(total: int, desc: str, show: bool):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="q", leave=False, file=sys.stderr, disable=None if show else True)


def run_dataset(ds: Dataset, depth: int, *, config=None, show_progress: bool = True) -> dict:
    """Load one dataset into a fresh store and rank its questions with every system.

    Returns ``{"rankings": {system: [[ids]…]}, "seconds": {system: s}, "embed_seconds": s, "model_id": …}``.
    """
    from ..brain import Brain

    space = "eval:" + re.sub(r"[^A-Za-z0-9_.:\-]", "_", ds.name)[:100]
    with tempfile.TemporaryDirectory(prefix="ombre-eval-") as tmp, Brain.open(Path(tmp) / "data", config) as brain:
        max_title = brain.config.store.max_title_chars
        items = [memory_bucket(space, m, max_title) for m in ds.memories]
        bar = _bar(len(items), f"{ds.name}: storing", show_progress)
        bar.unit = "turn"
        brain.write_many(items, dedupe=False, progress=bar.update)
        for a, b in ds.links:  # the conversation's own order: each turn is the context of the next
            brain.link(space, a, b, "context_of", 1.0)
        bar.close()
        texts = [q.text for q in ds.questions]
        t0 = perf_counter()
        brain.store.embedder.queries(texts)  # cached: every system below reuses these vectors
        embed_s = perf_counter() - t0
        rankers = Rankers(brain, space)
        contexts = [q.context for q in ds.questions]
        systems = (*SYSTEMS, "ombre_last") if any(contexts) else SYSTEMS
        for system in systems:  # first calls load the query planner and word lists: not a per-query cost
            rankers.run(system, texts[:1], depth)
        rankings, seconds = {}, {}
        bar = _bar(len(texts) * len(systems), f"{ds.name}: ranking", show_progress)
        for system in systems:
            rankings[system], seconds[system] = rankers.run(system, texts, depth, tick=bar.update, contexts=contexts)
        bar.close()
        return {"rankings": rankings, "seconds": seconds, "embed_seconds": embed_s,
                "model_id": brain.store.embedder.model_id}


# ---------------------------------------------------------------- the two evaluations


def score_locomo(questions: Sequence[Question], rankings: Sequence[Sequence[str]], ks: Sequence[int]) -> dict:
    """recall@k overall and per category, in percent, for one system."""
    per_cat: dict[int, dict[int, list[float]]] = {}
    overall: dict[int, list[float]] = {k: [] for k in ks}
    for q, ranked in zip(questions, rankings, strict=True):
        cat = per_cat.setdefault(q.category, {k: [] for k in ks})
        for k in ks:
            r = recall_at_k(ranked, q.wanted, k)
            overall[k].append(r)
            cat[k].append(r)
    return {
        "overall": {f"recall@{k}": _pct(overall[k]) for k in ks},
        "by_category": {str(c): {f"recall@{k}": _pct(v[k]) for k in ks} | {"questions": len(v[ks[0]])}
                        for c, v in sorted(per_cat.items())},
    }


def eval_locomo(data_dir: str | Path, ks: Sequence[int] = DEFAULT_KS, *, config=None,
                show_progress: bool = True, rankings_to: str | Path | None = None) -> dict:
    """Turn-level recall@k on every LoCoMo conversation in ``data_dir`` (see the module docstring).

    ``rankings_to``: also write every question's ranking by each system there (JSON), so two runs can be compared
    question by question: Chroma's HNSW graph, built with parallel inserts, differs from run to run, and so does
    the dense channel's top 50 for a few dozen questions of 1,345 (docs/benchmarks.md)."""
    from ..errors import ValidationError

    files = sorted(Path(data_dir).glob("*.json"))
    if not files:
        raise ValidationError(f"no *.json conversations in {data_dir}", field="data")
    ks = sorted(set(int(k) for k in ks))
    questions: list[Question] = []
    rankings: dict[str, list[list[str]]] = {s: [] for s in SYSTEMS}
    seconds = dict.fromkeys(SYSTEMS, 0.0)
    embed_s, dropped, model_id = 0.0, 0, ""
    named: list[str] = []  # each question's conversation file
    for f in files:
        ds = load_locomo(f)
        dropped += ds.dropped_evidence
        if not ds.questions:
            continue
        got = run_dataset(ds, max(ks), config=config, show_progress=show_progress)
        questions += ds.questions
        named += [f.name] * len(ds.questions)
        for s in SYSTEMS:
            rankings[s] += got["rankings"][s]
            seconds[s] += got["seconds"][s]
        embed_s += got["embed_seconds"]
        model_id = got["model_id"]
    n = max(1, len(questions))
    systems = {}
    for s in SYSTEMS:
        systems[s] = score_locomo(questions, rankings[s], ks) | {"ms_per_query": round(1000 * seconds[s] / n, 2)}
    if rankings_to is not None:
        rows = [{"conversation": name, "question": q.text, "category": q.category, "wanted": list(q.wanted),
                 **{s: rankings[s][i][:max(ks)] for s in SYSTEMS}}
                for i, (name, q) in enumerate(zip(named, questions, strict=True))]
        Path(rankings_to).write_text(json.dumps(rows, ensure_ascii=False, indent=0), encoding="utf-8")
    return {"conversations": len(files), "questions": len(questions), "systems": systems,
            "embedder": model_id, "embed_ms_per_query": round(1000 * embed_s / n, 2),
            "dropped_evidence": dropped}


def eval_recall(path: str | Path, *, config=None, show_progress: bool = True) -> dict:
    """hit@1/3/5 and MRR@10 on a memories-and-queries YAML, in percent (MRR as a fraction)."""
    ds = load_recall_yaml(path)
    got = run_dataset(ds, MRR_DEPTH, config=config, show_progress=show_progress)
    n = len(ds.questions)
    systems = {}
    for s in got["rankings"]:
        ranks = got["rankings"][s]
        row = {f"hit@{k}": _pct([hit_at_k(r, q.wanted, k) for q, r in zip(ds.questions, ranks, strict=True)])
               for k in RECALL_KS}
        row["mrr"] = round(sum(reciprocal_rank(r, q.wanted) for q, r in zip(ds.questions, ranks, strict=True)) / n, 4)
        row["ms_per_query"] = round(1000 * got["seconds"][s] / n, 2)
        systems[s] = row
    return {"queries": n, "systems": systems, "embedder": got["model_id"],
            "embed_ms_per_query": round(1000 * got["embed_seconds"] / n, 2)}


# ---------------------------------------------------------------- CLI


def _table(header: Sequence[str], rows: Iterable[Sequence]) -> str:
    rows = [[str(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True)))

    return "\n".join([line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def format_locomo(res: dict) -> str:
    systems = res["systems"]
    keys = list(systems["ombre"]["overall"])
    out = [f"LoCoMo: {res['conversations']} conversations, {res['questions']} questions "
           f"(embedder {res['embedder']}, query embedding {res['embed_ms_per_query']} ms, shared)", ""]
    out.append(_table(["system", *keys, "ms/query"],
                      [[s, *systems[s]["overall"].values(), systems[s]["ms_per_query"]] for s in SYSTEMS]))
    out += ["", "by category (" + keys[1 if len(keys) > 1 else 0] + "):"]
    k = keys[1 if len(keys) > 1 else 0]
    cats = list(systems["ombre"]["by_category"])
    out.append(_table(["category", "questions", *SYSTEMS],
                      [[f"{c} {CATEGORIES.get(int(c), '')}", systems["ombre"]["by_category"][c]["questions"],
                        *(systems[s]["by_category"][c][k] for s in SYSTEMS)] for c in cats]))
    return "\n".join(out)


def format_recall(res: dict) -> str:
    systems = res["systems"]
    keys = [k for k in systems["ombre"] if k != "ms_per_query"]
    head = f"{res['queries']} queries (embedder {res['embedder']})"
    return head + "\n\n" + _table(["system", *keys, "ms/query"],
                                  [[s, *(systems[s][k] for k in keys), systems[s]["ms_per_query"]] for s in systems])


__all__ = ["eval_locomo", "eval_recall", "hit_at_k", "load_locomo", "load_recall_yaml", "recall_at_k",
           "reciprocal_rank", "score_locomo"]
