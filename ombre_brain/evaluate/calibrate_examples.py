"""The examples `calibrate` fits admission on: every candidate a turn would weigh, labelled wanted or not.

From ``eval inject`` sets (a whole store written in advance; :func:`examples_of`) and from labelled
conversations (young stores, grown one exchange at a time; :func:`conversation_examples`). Each example is
a candidate's feature vector (:mod:`ombre_brain.retrieval.features`), whether it is a wanted memory of its
question, and what a turn needs to replay the decision: its fused score, whether lexical evidence admits it
on its own, whether it is weighed, whether the question and memory are in different scripts, and whether the
question is a lookup (a statement's recall is unasked, held to ``admit_unasked``).

Conversations are replayed as `eval conversation --oracle-writes` replays them (each labelled side stored in
the user's words, real turns at the session's clock); at each message with a ``recall`` label the candidates
are taken as a turn plans and searches them. A lookup with recall words is a ``positive`` question, a
statement with recall words an ``implicit`` one, ``recall: none`` a ``negative``.
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..brain import Brain
from ..config import load_config
from ..retrieval.admission import candidate_features, lexical_admits, lexical_match
from ..retrieval.features import FEATURES
from ..text import is_cjk_text
from ..turn.conversation import normalize_context
from .conversation import Conversation, _oracle, load_conversations, replayed
from .inject import InjectSet, built_store

__all__ = ["Example", "Question", "conversation_examples", "examples_of"]


@dataclass(frozen=True)
class Example:
    x: tuple[float, ...]
    label: int
    query: int       # index of the question in the pooled list
    group: str       # the fold group: the wanted memory (or the question, for negatives)
    fused: float     # its fused ranking score (a turn keeps the best MAX_DIRECT admitted)
    source: str      # the labelled set it came from (each set weighs the same in the fit)
    lexical_ok: bool = False  # admitted by lexical evidence whatever the score (retrieval/admission.py, route 2)
    weighed: bool = True      # within retrieval.admission.max_rank: the score is fitted on these
    cross: bool = False       # query and memory in different scripts: judged by admit_cross_script
    lookup: bool = True       # the question is a lookup; a statement's recall is unasked (admit_unasked)


@dataclass(frozen=True)
class Question:
    kind: str
    lang: str
    wanted: bool     # has wanted memories (a positive kind)
    source: str = ""


def examples_of(s: InjectSet, offset: int, *, config=None, show_progress: bool = True
                ) -> tuple[list[Example], list[Question], str]:
    from tqdm import tqdm

    out: list[Example] = []
    questions: list[Question] = []
    source = "locomo" if s.name.startswith("locomo-") else s.name  # LoCoMo's conversations weigh as one set
    with built_store(s, config) as (brain, space):
        model_id = brain.admitter.model_key()
        max_rank = brain.config.retrieval.admission.max_rank
        bar = tqdm(total=len(s.cases), desc=f"{s.name}: features", unit="q", leave=False, file=sys.stderr,
                   disable=None if show_progress else True)
        for i, c in enumerate(s.cases):
            qi = offset + i
            questions.append(Question(c.kind, "zh" if is_cjk_text(c.text) else "en", bool(c.wanted), source))
            bar.update(1)
            gw = brain.config.gateway
            heard = normalize_context(list(c.context), max_messages=gw.context_messages, max_chars=gw.context_chars)
            plan = brain.policy.plan_query(c.text, heard)  # as a turn plans it, with the conversation before it
            if plan.skip_reason:
                continue
            found = brain.retriever.search(space, plan)
            q = brain.admitter.query_evidence(space, plan, found)
            lookup = not plan.unasked
            group = f"{s.name}:{sorted(c.wanted)[0]}" if c.wanted else f"{s.name}:q{i}"
            for cand in found.candidates:
                if all(h.moment.context_only for h in cand.hits):
                    continue  # never admissible
                _, first, coverage = lexical_match(cand, q.asked)
                lexical_ok = lexical_admits(first, coverage, brain.config)
                weighed = q.weighs(cand, max_rank)
                if not weighed and not lexical_ok:
                    continue  # never weighed for admission in a turn
                f = candidate_features(cand, q, coverage)
                out.append(Example(tuple(f[n] for n in FEATURES.names), int(cand.bucket.id in c.wanted), qi,
                                   group, cand.fused, source, lexical_ok, weighed,
                                   bool(f["cross_script"]), lookup))
        bar.close()
    return out, questions, model_id


def conversation_examples(path: str | Path, offset: int, *, config=None, show_progress: bool = True
                          ) -> tuple[list[Example], list[Question], str]:
    """Examples and questions from every conversation of a labelled file (see the module docstring)."""
    out: list[Example] = []
    questions: list[Question] = []
    model_id = ""
    source = Path(path).stem
    for conv in load_conversations(path):
        if show_progress:
            print(f"{source}: {conv.id}", file=sys.stderr, flush=True)
        overlay = {"identity": {"ai_name": conv.ai_name, "user_name": conv.user_name}}
        with tempfile.TemporaryDirectory(prefix="ombre-calib-") as d, Brain.open(d, load_config(config, overlay)) as b:
            model_id = b.admitter.model_key()
            _replay(b, conv, source, offset, out, questions)
    return out, questions, model_id


def _replay(brain: Brain, conv: Conversation, source: str, offset: int, out: list[Example],
            questions: list[Question]) -> None:
    space = f"calib:{conv.id}"
    gw = brain.config.gateway
    max_rank = brain.config.retrieval.admission.max_rank
    for n, (_si, sid, _ei, ex, at, history) in enumerate(replayed(conv)):
        if ex.recall is not None:
            heard = normalize_context(history, max_messages=gw.context_messages, max_chars=gw.context_chars)
            plan = brain.policy.plan_query(ex.user, heard)
            lookup = not plan.unasked
            kind = "negative" if not ex.recall else ("positive" if lookup else "implicit")
            qi = offset + len(questions)
            questions.append(Question(kind, ex.lang, bool(ex.recall), source))
            if not plan.skip_reason and brain.store.known_space(space):
                found = brain.retriever.search(space, plan)
                q = brain.admitter.query_evidence(space, plan, found)
                for cand in found.candidates:
                    if all(h.moment.context_only for h in cand.hits) or cand.bucket.id in q.said:
                        continue  # never admissible
                    _, first, coverage = lexical_match(cand, q.asked)
                    lexical_ok = lexical_admits(first, coverage, brain.config)
                    weighed = q.weighs(cand, max_rank)
                    if not weighed and not lexical_ok:
                        continue
                    text = f"{cand.bucket.title}\n{cand.bucket.body}".lower()
                    wanted = any(w.lower() in text for w in ex.recall)
                    f = candidate_features(cand, q, coverage)
                    group = f"{source}:{conv.id}"  # a conversation's questions share one fold
                    out.append(Example(tuple(f[name] for name in FEATURES.names), int(wanted), qi, group,
                                       cand.fused, source, lexical_ok, weighed, bool(f["cross_script"]),
                                       lookup))
        brain.turn(space, sid, ex.user, at, context=list(history))
        _oracle(brain, space, ex, at, n)
