"""The reader's training rows: authored memory stores with labelled messages, read through the real pipeline.

A file (``training/read/*.yaml``) holds ``stores``: each one user's memories (``m01: {text, layer, days_ago?,
superseded_by?}``) and messages (``{text, context?, answers: [ids], near?: [ids], shape, xlang?}``). Each store is a
space of its own in a temporary data directory; each memory is written in the user's words on its layer; each
message is planned, searched and weighed exactly as a turn does (``plan_query`` → candidates → the admission
stage's query evidence), and the weighed candidates' reader rows (:func:`~ombre_brain.retrieval.reading.reader_rows`)
are labelled 1 when the message lists that memory among its answers. So the reader is fitted on the very inputs it
meets when serving, candidates the search would not bring included in none.
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
from ..retrieval.features import FEATURES
from ..text import is_cjk_text
from ..turn.conversation import normalize_context

__all__ = ["Message", "Rows", "Store", "build_conversation_rows", "build_rows", "load_stores", "merge"]

NOW = datetime(2026, 11, 1, 20, 0, tzinfo=timezone.utc)  # the stores' "today": days_ago counts back from it
OLD_DAYS = 400  # a memory without days_ago was said long ago
SUBJECT = {"stable_boundary": "user", "short_state": "user", "process_event": "event",
           "relationship_lesson": "relationship"}


@dataclasses.dataclass(frozen=True)
class Message:
    text: str
    context: tuple[dict, ...]
    answers: tuple[str, ...]
    near: tuple[str, ...]
    shape: str
    xlang: bool


@dataclasses.dataclass(frozen=True)
class Store:
    id: str
    file: str
    memories: dict[str, dict]
    messages: tuple[Message, ...]


def load_stores(paths: Sequence[str | Path]) -> list[Store]:
    """Every store of the files, checked: a message's answers and near ids must be memories of its store."""
    out = []
    for path in paths:
        try:
            data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ValidationError(f"cannot read {path}: {exc}", field="data") from None
        stores = data.get("stores") if isinstance(data, dict) else None
        if not isinstance(stores, list) or not stores:
            raise ValidationError(f"{path}: expected `stores: [...]`", field="data")
        for si, s in enumerate(stores):
            where = f"{path}: stores[{si}]"
            mems, msgs = s.get("memories"), s.get("messages")
            if not isinstance(mems, dict) or not isinstance(msgs, list):
                raise ValidationError(f"{where}: expected {{id, memories: {{...}}, messages: [...]}}", field="data")
            out_msgs = []
            for mi, m in enumerate(msgs):
                ids = [*(m.get("answers") or ()), *(m.get("near") or ())]
                missing = [i for i in ids if i not in mems]
                if missing or not isinstance(m.get("text"), str):
                    raise ValidationError(f"{where}.messages[{mi}]: unknown memory ids {missing} or no text",
                                          field="data")
                out_msgs.append(Message(m["text"], tuple(m.get("context") or ()), tuple(m.get("answers") or ()),
                                        tuple(m.get("near") or ()), str(m.get("shape") or "unlabelled"),
                                        bool(m.get("xlang"))))
            out.append(Store(str(s.get("id") or f"{Path(path).stem}-{si}"), str(path), dict(mems), tuple(out_msgs)))
    return out


@dataclasses.dataclass
class Rows:
    """The training rows and, per row, its labels and where it came from."""

    x: np.ndarray            # (n, inputs) float32
    y: np.ndarray            # (n,) 1 = the memory answers the message
    store: list[str]         # the store (the cross-validation group)
    message: np.ndarray      # (n,) the message's index in ``messages``
    messages: list[dict]     # per message: store, shape, lang, xlang, answers (ids), answered_in_reach (bool)
    feature_names: tuple[str, ...]

    def save(self, path: str | Path) -> None:
        import json
        np.savez_compressed(path, x=self.x, y=self.y, message=self.message,
                            meta=np.array(json.dumps({"store": self.store, "messages": self.messages,
                                                      "features": list(self.feature_names)}, ensure_ascii=False)))

    @classmethod
    def load(cls, path: str | Path) -> Rows:
        import json
        with np.load(path) as d:
            meta = json.loads(str(d["meta"]))
            return cls(d["x"], d["y"], meta["store"], d["message"], meta["messages"], tuple(meta["features"]))


def _title(text: str) -> str:
    for sep in "，。！？,.!?;；":
        if sep in text[:40]:
            return text[: text.index(sep)].strip() or text[:40]
    return text[:40]


def build_rows(stores: Sequence[Store], *, config=None, progress: bool = True) -> Rows:
    """Each store written into a space of its own, each message weighed as a turn would: the reader's rows."""
    cfg = load_config(config)
    names = FEATURES.names
    xs, ys, groups, msg_ix, messages = [], [], [], [], []
    gw = cfg.gateway
    with tempfile.TemporaryDirectory(prefix="ombre-reader-") as d, Brain.open(d, cfg) as brain:
        for k, st in enumerate(stores):
            if progress:
                print(f"[{k + 1}/{len(stores)}] {st.id}", file=sys.stderr, flush=True)
            space = f"read:{st.id}"
            ids = {}
            for key, m in st.memories.items():
                layer = m.get("layer")
                when = NOW - timedelta(days=float(m.get("days_ago", OLD_DAYS)))
                ids[key] = brain.write(space, id=f"{st.id}-{key}", title=_title(m["text"]), body=m["text"],
                                       created=when.isoformat(), memory_layer=layer,
                                       memory_subject=SUBJECT.get(layer), memory_classification_source="model",
                                       origin="user", basis="stated", dedupe=False)
            for msg in st.messages:
                heard = normalize_context(list(msg.context), max_messages=gw.context_messages,
                                          max_chars=gw.context_chars)
                plan = brain.policy.plan_query(msg.text, heard)
                want = {ids[a] for a in msg.answers}
                info = {"store": st.id, "shape": msg.shape, "lang": "zh" if is_cjk_text(msg.text) else "en",
                        "xlang": msg.xlang, "answers": sorted(want), "asks": not plan.unasked, "weighed": 0,
                        "in_reach": False, "text": msg.text}
                if not plan.skip_reason:
                    with brain.store.turn_scope(space):
                        found = brain.retriever.search(space, plan)
                        q = brain.admitter.query_evidence(space, plan, found)
                        weighed = [c for c in found.candidates
                                   if q.weighs(c, cfg.retrieval.admission.max_rank)]
                        rows = brain.admitter.reading.rows(space, plan, found, q, weighed, names, NOW)
                    for bid, r in rows.items():
                        xs.append(r)
                        ys.append(1.0 if bid in want else 0.0)
                        groups.append(st.id)
                        msg_ix.append(len(messages))
                    info.update(weighed=len(rows), in_reach=bool(want & set(rows)))
                messages.append(info)
    return Rows(np.stack(xs).astype(np.float32), np.array(ys, dtype=np.float32), groups, np.array(msg_ix), messages,
                names)


def build_conversation_rows(paths: Sequence[str | Path], *, config=None, progress: bool = True) -> Rows:
    """Labelled conversations (the ``eval conversation`` format) replayed as real turns, the labels written in place of
    the write decision: at each message with a ``recall`` label, the weighed candidates' rows, labelled 1 when the
    memory holds a recall word (``recall: none``: every one 0). The store, the session's cooldowns, the conversation
    heard and the candidates are exactly a chat's."""
    from .conversation import _oracle, load_conversations, replayed

    cfg = load_config(config)
    names = FEATURES.names
    xs, ys, groups, msg_ix, messages = [], [], [], [], []
    convs = [c for p in paths for c in load_conversations(p)]
    with tempfile.TemporaryDirectory(prefix="ombre-reader-") as d, Brain.open(d, cfg) as brain:
        for k, conv in enumerate(convs):
            if progress:
                print(f"[{k + 1}/{len(convs)}] {conv.id}", file=sys.stderr, flush=True)
            space = f"conv:{conv.id}"
            for n, (_si, sid, _ei, ex, at, history) in enumerate(replayed(conv)):
                turn = brain.turn(space, sid, ex.user, at, context=list(history))
                found = turn.debug.get("retrieval")
                if ex.recall is not None:
                    words = [w.lower() for w in ex.recall]
                    info = {"store": conv.id, "shape": ex.kind or "unlabelled", "lang": ex.lang,
                            "xlang": ex.xlang_label, "answers": [], "asks": not turn.plan.unasked, "weighed": 0,
                            "in_reach": False, "text": ex.user}
                    if found is not None and found.candidates:
                        with brain.store.turn_scope(space):
                            q = brain.admitter.query_evidence(space, turn.plan, found)
                            weighed = [c for c in found.candidates if q.weighs(c, cfg.retrieval.admission.max_rank)]
                            rows = brain.admitter.reading.rows(space, turn.plan, found, q, weighed, names, at)
                        hits = {c.bucket.id for c in found.candidates
                                if any(w in f"{c.bucket.title}\n{c.bucket.body}".lower() for w in words)}
                        for bid, r in rows.items():
                            xs.append(r)
                            ys.append(1.0 if bid in hits else 0.0)
                            groups.append(conv.id)
                            msg_ix.append(len(messages))
                        info.update(answers=sorted(hits) if words else [], weighed=len(rows),
                                    in_reach=bool(hits & set(rows)))
                        if words and not hits:  # the answer is not even a candidate: no row can teach it
                            info["answers"] = ["(not found)"]
                    elif words:
                        info["answers"] = ["(not found)"]
                    messages.append(info)
                _oracle(brain, space, ex, at, n)
    return Rows(np.stack(xs).astype(np.float32), np.array(ys, dtype=np.float32), groups, np.array(msg_ix), messages,
                names)


def merge(*parts: Rows) -> Rows:
    """Rows of several builds as one (message indexes shifted)."""
    xs, ys, store, msg, messages = [], [], [], [], []
    for r in parts:
        xs.append(r.x)
        ys.append(r.y)
        store += r.store
        msg.append(r.message + len(messages))
        messages += r.messages
    return Rows(np.vstack(xs), np.concatenate(ys), store, np.concatenate(msg), messages, parts[0].feature_names)
