"""`eval longmemeval`: session and turn recall on LongMemEval-S questions (design §14 measurement).

Each question has its own haystack of chat sessions. Its store holds one bucket per turn
(``role: content``, created at the session's date), the question is the query, and three systems
rank the turns: the fused ranking direct recall uses (:meth:`Brain.search`), dense-only and
BM25-only, on the same store in the same run. Abstention questions (ids ending in ``_abs``) have
no answer in the haystack and are left out. Scores, in percent over the questions:

- session recall@k, "any": sessions ranked by their best turn, some gold session among the top k
  (the figure several local memory systems quote);
- session recall@k, "all": every gold session is among the top k (LongMemEval's own);
- turn recall@10: the share of the turns marked ``has_answer`` that are among the top 10 turns.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..brain import Brain
from ..errors import ValidationError
from .ranking import SYSTEMS, Memory, Rankers, memory_bucket

KS = (5, 10)
TURN_K = 10
DEPTH = 50


@dataclass(frozen=True)
class LmeQuestion:
    qid: str
    qtype: str
    question: str
    gold_sessions: tuple[str, ...]
    answer_turns: tuple[str, ...]
    memories: tuple[Memory, ...]


def _date(value: str) -> str:
    """LongMemEval dates look like '2023/05/20 (Sat) 02:42'; they carry no zone, so UTC."""
    try:
        dt = datetime.strptime(value.split(" (")[0] + " " + value.rsplit(" ", 1)[-1], "%Y/%m/%d %H:%M")
    except (ValueError, IndexError):
        return "2023-01-01T00:00:00+00:00"
    return dt.replace(tzinfo=timezone.utc).isoformat()


def load_question(path: Path) -> LmeQuestion:
    d = json.loads(path.read_text(encoding="utf-8"))
    memories, answers = [], []
    for sid, date, session in zip(d["haystack_session_ids"], d["haystack_dates"], d["haystack_sessions"],
                                  strict=True):
        for i, turn in enumerate(session):
            mid = f"{sid}.t{i}"
            memories.append(Memory(mid, f"{turn['role']}: {turn['content']}".strip(), _date(date)))
            if turn.get("has_answer"):
                answers.append(mid)
    return LmeQuestion(d["question_id"], d["question_type"], d["question"], tuple(d["answer_session_ids"]),
                       tuple(answers), tuple(memories))


def _session_of(turn_id: str) -> str:
    return turn_id.rsplit(".t", 1)[0]


def score_question(q: LmeQuestion, ranked: Sequence[str]) -> dict:
    sessions: list[str] = []
    for t in ranked:
        s = _session_of(t)
        if s not in sessions:
            sessions.append(s)
    gold = set(q.gold_sessions)
    out = {}
    for k in KS:
        top = set(sessions[:k])
        out[f"session_any@{k}"] = float(bool(top & gold))
        out[f"session_all@{k}"] = float(gold <= top)
    if q.answer_turns:
        out[f"turn@{TURN_K}"] = len(set(ranked[:TURN_K]) & set(q.answer_turns)) / len(q.answer_turns)
    return out


def eval_longmemeval(data_dir: str | Path, *, config=None, show_progress: bool = True) -> dict:
    from tqdm import tqdm

    files = sorted(p for p in Path(data_dir).glob("*.json") if not p.stem.endswith("_abs"))
    if not files:
        raise ValidationError(f"no LongMemEval *.json questions in {data_dir}", field="data")
    per: dict[str, list[dict]] = {s: [] for s in SYSTEMS}
    bar = tqdm(total=len(files), desc="longmemeval", unit="q", leave=False, file=sys.stderr,
               disable=None if show_progress else True)
    model = ""
    for path in files:
        q = load_question(path)
        with tempfile.TemporaryDirectory(prefix="ombre-lme-") as tmp, Brain.open(Path(tmp) / "d", config) as brain:
            space = "eval:lme"
            brain.write_many([memory_bucket(space, m, brain.config.store.max_title_chars) for m in q.memories],
                             dedupe=False)
            rankers = Rankers(brain, space)
            for system in SYSTEMS:
                ranked, _ = rankers.run(system, [q.question], DEPTH)
                per[system].append(score_question(q, ranked[0]))
            model = brain.store.embedder.model_id
        bar.update(1)
    bar.close()
    table = {}
    for system, rows in per.items():
        keys = sorted({k for r in rows for k in r})
        table[system] = {k: round(100 * sum(r[k] for r in rows if k in r) / max(1, sum(k in r for r in rows)), 1)
                         for k in keys}
    return {"questions": len(files), "systems": table, "model_id": model,
            "note": f"{len(files)} questions: each is worth about {round(100 / len(files), 1)} points"}


def format_longmemeval(res: dict) -> str:
    keys = [f"session_any@{k}" for k in KS] + [f"session_all@{k}" for k in KS] + [f"turn@{TURN_K}"]
    lines = [f"LongMemEval-S: {res['questions']} questions (abstention excluded), {res['model_id']}; {res['note']}",
             "", "| system | " + " | ".join(keys) + " |", "|---|" + "---|" * len(keys)]
    for system, row in res["systems"].items():
        lines.append(f"| {system} | " + " | ".join(str(row.get(k, "")) for k in keys) + " |")
    return "\n".join(lines)


__all__ = ["eval_longmemeval", "format_longmemeval", "load_question", "score_question"]
