"""`eval conversation`: the whole loop over labelled multi-session chats (docs/design.md §17).

Every user message is a turn (:meth:`Brain.turn`, with the session's earlier messages as context, at the
session's clock); then the exchange goes through the write decision (:meth:`Brain.ingest_exchange`, at
the same clock). Each conversation is a young store of its own (a fresh space in a fresh data
directory, with the conversation's names as the identity). The format and the scores are those of
``../shared/data/conversations/README.md``:

- write recall: an exchange labelled ``write`` wrote a memory holding one of its ``keys``;
- layer accuracy: of those that wrote something, the written memories' ``memory_layer`` values are
  exactly the labelled sides' layers;
- noise kept out: an exchange labelled ``write: none`` wrote nothing;
- turn recall: one of a message's ``recall`` words is in the turn's memory sections (Core Memory,
  Recent Context, Recalled, Diffused or Favorite Memory);
- cross-language turn recall: the same, for questions in another script than their recall words;
- false recall: a ``recall: none`` message put anything in Recalled or Diffused Memory;
- stale: a question whose answer changed (``updated`` in its comment) showed one of its ``stale`` words (the
  old value) in a memory presented as current (an item the turn marks as superseded is history, not current; an
  item that holds a recall word too tells of the change);
- memory characters per turn: the characters of every memory item a turn injects (stable and dynamic sections,
  notes aside), over every turn, median and p95;
- where each hit came from (the profile, Core Memory, Recent Context, Recalled, Diffused or Favorite Memory), and
  turn recall by the layer of the memory a question wants (the labelled exchange that said its words last), so
  episodes (``process_event``, ``short_state``) are counted apart from stable facts and lessons.

The comment after each ``recall`` line names the kind of question (direct, paraphrase, followup,
implicit, nearmiss, never; ``xlang`` when asked in the other language), and the scores are given by
kind and by the question's language, with every failure and what was written or injected.
``oracle_writes`` puts the labels in place of the write decision: each labelled side is stored in the
user's own words on its layer, and noise stores nothing, so recall is measured apart from writing.
"""

from __future__ import annotations

import re
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from time import perf_counter
from typing import Any

import yaml

from ..brain import Brain
from ..config import load_config
from ..errors import ValidationError
from ..text import is_cjk_text
from ..timeutil import parse_time

__all__ = ["eval_conversation", "format_conversation", "load_conversations", "replayed"]

MEMORY_SECTIONS = ("core_memory", "profile", "recent_context", "recalled_memory", "diffused_memory", "favorite_memory")
FALSE_SECTIONS = ("recalled_memory", "diffused_memory")
KINDS = ("direct", "paraphrase", "followup", "implicit", "nearmiss", "never")
SIDE_LAYERS = {"user": ("stable_boundary", "short_state", "process_event"), "relationship": ("relationship_lesson",)}
SUBJECT = {"stable_boundary": "user", "short_state": "user", "process_event": "event",
           "relationship_lesson": "relationship"}
EPISODES = ("process_event", "short_state")
STEP = timedelta(minutes=2)  # the README's "later messages a few minutes apart"
_RECALL_LINE = re.compile(r"^\s*recall:\s*(.*?)\s*(?:#\s*(.*))?$")


@dataclass(frozen=True)
class Labelled:
    """One exchange of a conversation with its labels."""

    user: str
    assistant: str
    write: dict[str, str] | None          # side -> layer; None for `write: none`
    keys: tuple[str, ...] = ()
    recall: tuple[str, ...] | None = None  # words; () for `recall: none`; None when unlabelled
    kind: str | None = None
    xlang_label: bool = False
    updated: bool = False                  # the answer changed over time: the question asks for the current value
    stale: tuple[str, ...] = ()            # words of the old value: shown as current, the turn is stale

    @property
    def lang(self) -> str:
        return "zh" if is_cjk_text(self.user) else "en"

    @property
    def cross_script(self) -> bool:
        """The question and its recall words are in different scripts."""
        return bool(self.recall) and all(is_cjk_text(w) != is_cjk_text(self.user) for w in self.recall)


@dataclass(frozen=True)
class Session:
    at: datetime
    exchanges: tuple[Labelled, ...]


@dataclass(frozen=True)
class Conversation:
    id: str
    user_name: str
    ai_name: str
    sessions: tuple[Session, ...]


# ---------------------------------------------------------------- loading


def _recall_kinds(text: str) -> list[tuple[str | None, bool, bool]]:
    """(kind, xlang, updated) of each `recall:` line, in file order, from the comment after it."""
    out = []
    for line in text.splitlines():
        m = _RECALL_LINE.match(line)
        if m is None or line.lstrip().startswith("#"):
            continue
        words = (m.group(2) or "").split()
        kind = next((w for w in words if w in KINDS), None)
        out.append((kind, "xlang" in words, "updated" in words))
    return out


def _write_label(raw: Any, where: str) -> dict[str, str] | None:
    if raw in (None, "none"):
        return None
    if not isinstance(raw, dict) or not raw:
        raise ValidationError(f"{where}: `write` must be `none` or {{user: <layer>, relationship: "
                              "relationship_lesson}")
    for side, layer in raw.items():
        if side not in SIDE_LAYERS or layer not in SIDE_LAYERS[side]:
            raise ValidationError(f"{where}: `write.{side}: {layer}` is not a side and its layer "
                                  f"(user: {'|'.join(SIDE_LAYERS['user'])}; relationship: relationship_lesson)")
    return {str(k): str(v) for k, v in raw.items()}


def load_conversations(path: str | Path) -> list[Conversation]:
    """The conversations of one labelled file (format: ``../shared/data/conversations/README.md``)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
        data = yaml.safe_load(text) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ValidationError(f"cannot read {path}: {exc}") from None
    convs = data.get("conversations") if isinstance(data, dict) else None
    if not isinstance(convs, list) or not convs:
        raise ValidationError(f"{path}: expected `conversations: [...]`")
    kinds = iter(_recall_kinds(text))
    out = []
    for ci, c in enumerate(convs):
        where = f"{path}: conversations[{ci}]"
        if not isinstance(c, dict) or not isinstance(c.get("sessions"), list):
            raise ValidationError(f"{where}: expected {{id, user_name, ai_name, sessions: [...]}}")
        sessions = []
        for si, s in enumerate(c["sessions"]):
            at = parse_time(s.get("at"), f"{where}.sessions[{si}].at")
            exchanges = []
            for ei, e in enumerate(s.get("exchanges") or ()):
                w = f"{where}.sessions[{si}].exchanges[{ei}]"
                if not isinstance(e, dict) or not isinstance(e.get("user"), str):
                    raise ValidationError(f"{w}: expected {{user, assistant, write, ...}}")
                recall, kind, xlang, updated = None, None, False, False
                if "recall" in e:
                    kind, xlang, updated = next(kinds, (None, False, False))
                    r = e["recall"]
                    recall = () if r in (None, "none") else tuple(str(x) for x in r)
                keys = tuple(str(k) for k in e.get("keys") or ())
                stale = e.get("stale") or ()
                if not isinstance(stale, list | tuple) or not all(isinstance(x, str | int) for x in stale):
                    raise ValidationError(f"{w}: `stale` must be a list of words (the old value)")
                exchanges.append(Labelled(e["user"], str(e.get("assistant") or ""), _write_label(e.get("write"), w),
                                          keys, recall, kind, xlang, updated or bool(stale),
                                          tuple(str(x) for x in stale)))
            sessions.append(Session(at, tuple(exchanges)))
        out.append(Conversation(str(c.get("id") or f"c{ci + 1}"), str(c.get("user_name") or "User"),
                                str(c.get("ai_name") or "Haven"), tuple(sessions)))
    return out


# ---------------------------------------------------------------- running the loop


@dataclass
class Tally:
    n: int = 0
    ok: int = 0

    def add(self, ok: bool) -> None:
        self.n += 1
        self.ok += int(ok)

    def to_dict(self) -> dict:
        return {"n": self.n, "ok": self.ok, "pct": round(100.0 * self.ok / self.n, 1) if self.n else None}


@dataclass
class Scores:
    write_recall: Tally = field(default_factory=Tally)
    layer_accuracy: Tally = field(default_factory=Tally)
    noise_kept_out: Tally = field(default_factory=Tally)
    turn_recall: Tally = field(default_factory=Tally)
    cross_language: Tally = field(default_factory=Tally)
    false_recall: Tally = field(default_factory=Tally)  # ok counts the failures: injected something
    by_kind: dict[str, Tally] = field(default_factory=dict)
    by_lang: dict[str, Tally] = field(default_factory=dict)
    false_by_kind: dict[str, Tally] = field(default_factory=dict)
    stale: Tally = field(default_factory=Tally)  # ok counts the failures: the old value shown as current
    by_layer: dict[str, Tally] = field(default_factory=dict)
    hit_source: dict[str, int] = field(default_factory=dict)
    memory_chars: list[int] = field(default_factory=list)
    failures: list[dict] = field(default_factory=list)
    turn_ms: list[float] = field(default_factory=list)
    write_ms: list[float] = field(default_factory=list)

    def to_dict(self) -> dict:
        def tallies(d: dict[str, Tally]) -> dict:
            return {k: v.to_dict() for k, v in sorted(d.items())}

        return {"write_recall": self.write_recall.to_dict(), "layer_accuracy": self.layer_accuracy.to_dict(),
                "noise_kept_out": self.noise_kept_out.to_dict(), "turn_recall": self.turn_recall.to_dict(),
                "cross_language_turn_recall": self.cross_language.to_dict(),
                "false_recall": self.false_recall.to_dict(), "turn_recall_by_kind": tallies(self.by_kind),
                "turn_recall_by_lang": tallies(self.by_lang), "false_recall_by_kind": tallies(self.false_by_kind),
                "stale": self.stale.to_dict(), "turn_recall_by_layer": tallies(self.by_layer),
                "episodes": _sum(t for k, t in self.by_layer.items() if k in EPISODES).to_dict(),
                "hit_source": dict(sorted(self.hit_source.items())),
                "memory_chars_per_turn": _quantiles(self.memory_chars),
                "turn_ms": _quantiles(self.turn_ms), "write_ms": _quantiles(self.write_ms),
                "failures": self.failures}


def _sum(tallies) -> Tally:
    out = Tally()
    for t in tallies:
        out.n += t.n
        out.ok += t.ok
    return out


def _quantiles(ms: list[float]) -> dict:
    if not ms:
        return {"n": 0}
    s = sorted(ms)
    return {"n": len(s), "p50": round(s[len(s) // 2], 2), "p95": round(s[min(len(s) - 1, int(len(s) * 0.95))], 2)}


def _texts(turn, sections: tuple[str, ...], *, current: bool = False) -> list[tuple[str, str, str | None]]:
    """(section, text, bucket id) of every memory in these sections (not the notes: the UNKNOWN line is none);
    ``current``: only those the turn presents as current (not marked as superseded history)."""
    out = []
    for sec in (*turn.stable, *turn.sections):
        if sec.key in sections:
            out += [(sec.key, it.text, it.bucket_id) for it in sec.items
                    if it.bucket_id and not (current and it.extra.get("superseded_by"))]
    return out


def memory_chars(turn) -> int:
    """The characters of memory a turn carries: every item of every section but the notes (Context Mode, UNKNOWN,
    Persona State), confirmed facts included."""
    return sum(len(it.text) for sec in (*turn.stable, *turn.sections) for it in sec.items
               if it.bucket_id or it.shape == "fact")


def wanted_layer(said: list[tuple[str, dict[str, str]]], words: tuple[str, ...]) -> str:
    """The layer of the memory a question wants: the last labelled exchange before it whose message holds one of the
    recall words (its user side, else its relationship side); ``unknown`` when none does."""
    for text, write in reversed(said):
        if any(w.lower() in text.lower() for w in words):
            return write.get("user") or write.get("relationship") or "unknown"
    return "unknown"


def _oracle(brain: Brain, space: str, label: Labelled, at: datetime, n: int) -> list[str]:
    """The labels in place of the write decision: each side stored in the user's words on its layer."""
    ids = []
    for side, layer in (label.write or {}).items():
        title = label.user.strip().split("\n")[0][:40]
        ids.append(brain.write(space, id=f"o{n}{side[0]}", title=title, body=label.user.strip(), created=at.isoformat(),
                               memory_layer=layer, memory_subject=SUBJECT[layer],
                               memory_classification_source="model", origin="user", basis="stated", dedupe=False))
    return ids


def replayed(conv: Conversation) -> Iterator[tuple[int, str, int, Labelled, datetime, list[dict]]]:
    """Each exchange of a conversation in order, as a replay meets it: its session's index and id, its index in the
    session, the time it is said at (``STEP`` apart) and the session's messages before it."""
    for si, session in enumerate(conv.sessions):
        sid = f"{conv.id}-s{si + 1}"
        history: list[dict] = []
        for ei, ex in enumerate(session.exchanges):
            yield si, sid, ei, ex, session.at + STEP * ei, list(history)
            history += [{"role": "user", "content": ex.user}, {"role": "assistant", "content": ex.assistant}]


def _one(brain: Brain, conv: Conversation, scores: Scores, *, oracle: bool) -> None:
    space = f"eval:{conv.id}"
    said: list[tuple[str, dict[str, str]]] = []  # the labelled exchanges so far, for the layer a question wants
    for n, (si, sid, ei, ex, at, history) in enumerate(replayed(conv)):
        where = {"conversation": conv.id, "session": si + 1, "exchange": ei + 1, "user": ex.user}
        t0 = perf_counter()
        turn = brain.turn(space, sid, ex.user, at, context=list(history))
        scores.turn_ms.append((perf_counter() - t0) * 1000)
        scores.memory_chars.append(memory_chars(turn))
        if ex.recall is not None:
            _score_turn(turn, ex, where, scores, wanted_layer(said, ex.recall) if ex.recall else None)
        if ex.write:
            said.append((ex.user, ex.write))
        messages = [*history, {"role": "user", "content": ex.user}]
        t0 = perf_counter()
        if oracle:
            ids = _oracle(brain, space, ex, at, n)
        else:
            ids = brain.ingest_exchange(space, sid, messages, ex.assistant, now=at)
        scores.write_ms.append((perf_counter() - t0) * 1000)
        _score_write(brain, space, ex, ids, where, scores)


def _score_turn(turn, ex: Labelled, where: dict, scores: Scores, layer: str | None = None) -> None:
    kind = ex.kind or "unlabelled"
    if ex.stale:  # an item holding the new value too tells of the change ("it was Boise, now Santa Fe"): not stale
        old = next(((sec, text) for w in ex.stale for sec, text, _ in _texts(turn, MEMORY_SECTIONS, current=True)
                    if w.lower() in text.lower() and not any(r.lower() in text.lower() for r in ex.recall or ())),
                   None)
        scores.stale.add(old is not None)
        if old is not None:
            scores.failures.append({**where, "check": f"stale ({kind})", "stale": list(ex.stale),
                                    "shown": f"{old[0]}: {old[1][:80]}"})
    if ex.recall:
        shown = _texts(turn, MEMORY_SECTIONS)
        hit = next(((sec, w) for w in ex.recall for sec, text, _ in shown if w.lower() in text.lower()), None)
        scores.turn_recall.add(hit is not None)
        scores.by_layer.setdefault(layer or "unknown", Tally()).add(hit is not None)
        if hit is not None:
            scores.hit_source[hit[0]] = scores.hit_source.get(hit[0], 0) + 1
        scores.by_kind.setdefault(kind + (" xlang" if ex.xlang_label else ""), Tally()).add(hit is not None)
        scores.by_lang.setdefault(ex.lang, Tally()).add(hit is not None)
        if ex.cross_script:
            scores.cross_language.add(hit is not None)
        if hit is None:
            scores.failures.append({**where, "check": f"turn recall ({kind})", "wanted": list(ex.recall),
                                    "injected": [f"{sec}: {text[:80]}" for sec, text, _ in shown],
                                    "plan": turn.plan.to_dict()["skip_reason"] or turn.plan.context_mode,
                                    "kept_out": [f"{s.bucket_id}: {s.reason}" for s in turn.suppressed[:4]]})
    else:
        shown = _texts(turn, FALSE_SECTIONS)
        scores.false_recall.add(bool(shown))
        scores.false_by_kind.setdefault(kind, Tally()).add(bool(shown))
        if shown:
            scores.failures.append({**where, "check": f"false recall ({kind})",
                                    "injected": [f"{sec}: {text[:80]}" for sec, text, _ in shown]})


def _score_write(brain: Brain, space: str, ex: Labelled, ids: list[str], where: dict, scores: Scores) -> None:
    buckets = [b for b in (brain.get(space, i) for i in ids) if b is not None]
    written = [f"{b.memory_layer}: {b.title}" for b in buckets]
    if ex.write is None:
        scores.noise_kept_out.add(not buckets)
        if buckets:
            scores.failures.append({**where, "check": "noise written", "written": written})
        return
    held = any(k in f"{b.title}\n{b.body}" for b in buckets for k in ex.keys)
    scores.write_recall.add(held)
    if not held:
        scores.failures.append({**where, "check": "write recall", "keys": list(ex.keys), "written": written})
    if buckets:
        layers_ok = {b.memory_layer for b in buckets} == set(ex.write.values())
        scores.layer_accuracy.add(layers_ok)
        if not layers_ok:
            scores.failures.append({**where, "check": "layer", "wanted": sorted(ex.write.values()), "written": written})


def eval_conversation(paths: list[str | Path] | str | Path, *, config: Any = None, oracle_writes: bool = False,
                      progress: bool = True) -> dict:
    """Run every conversation of the files through the loop; the scores, per kind and language, and each failure."""
    paths = [paths] if isinstance(paths, str | Path) else list(paths)
    scores = Scores()
    convs = [c for p in paths for c in load_conversations(p)]
    t0 = perf_counter()
    for i, conv in enumerate(convs):
        if progress:
            print(f"[{i + 1}/{len(convs)}] {conv.id}", file=sys.stderr, flush=True)
        overlay = {"identity": {"ai_name": conv.ai_name, "user_name": conv.user_name}}
        with tempfile.TemporaryDirectory(prefix="ombre-conv-") as d, Brain.open(d, load_config(config, overlay)) as b:
            _one(b, conv, scores, oracle=oracle_writes)
    out = scores.to_dict()
    out.update(files=[str(p) for p in paths], conversations=len(convs), oracle_writes=oracle_writes,
               seconds=round(perf_counter() - t0, 1))
    return out


def _chars(q: dict) -> str:
    return f"median {q['p50']}, p95 {q['p95']}" if q.get("n") else "—"


def format_conversation(res: dict) -> str:
    def pct(t: dict) -> str:
        return f"{t['pct']}% ({t['ok']}/{t['n']})" if t["n"] else "—"

    mode = "labels in place of the write decision (--oracle-writes)" if res["oracle_writes"] else "the write decision"
    lines = [f"eval conversation: {res['conversations']} conversations, {mode}, {res['seconds']} s", "",
             "| score | value |", "|---|---|",
             f"| write recall | {pct(res['write_recall'])} |", f"| layer accuracy | {pct(res['layer_accuracy'])} |",
             f"| noise kept out | {pct(res['noise_kept_out'])} |", f"| turn recall | {pct(res['turn_recall'])} |",
             f"| cross-language turn recall | {pct(res['cross_language_turn_recall'])} |",
             f"| false recall (lower is better) | {pct(res['false_recall'])} |",
             f"| stale, of the updated questions (lower is better) | {pct(res['stale'])} |",
             f"| episodes (process_event, short_state) recalled | {pct(res['episodes'])} |",
             f"| memory characters per turn | {_chars(res['memory_chars_per_turn'])} |", "",
             "| turn recall by kind | value |", "|---|---|"]
    lines += [f"| {k} | {pct(v)} |" for k, v in res["turn_recall_by_kind"].items()]
    lines += [f"| false recall: {k} | {pct(v)} |" for k, v in res["false_recall_by_kind"].items()]
    lines += ["", "| turn recall by language | value |", "|---|---|"]
    lines += [f"| {k} | {pct(v)} |" for k, v in res["turn_recall_by_lang"].items()]
    lines += ["", "| turn recall by the wanted memory's layer | value |", "|---|---|"]
    lines += [f"| {k} | {pct(v)} |" for k, v in res["turn_recall_by_layer"].items()]
    hits = sum(res["hit_source"].values())
    lines += ["", "hits by section: " + (", ".join(f"{k} {v}" for k, v in res["hit_source"].items()) if hits else "—")]
    tm, wm = res["turn_ms"], res["write_ms"]
    if tm.get("n"):
        lines += ["", f"turn p50 {tm['p50']} ms, p95 {tm['p95']} ms; write p50 {wm['p50']} ms, p95 {wm['p95']} ms"]
    if res["failures"]:
        lines += ["", f"failures ({len(res['failures'])}):"]
        for f in res["failures"]:
            head = f"- {f['conversation']} s{f['session']} #{f['exchange']} {f['check']}: {f['user'][:60]!r}"
            detail = {k: v for k, v in f.items() if k not in ("conversation", "session", "exchange", "check", "user")}
            lines.append(head + " " + "; ".join(f"{k}={v}" for k, v in detail.items()))
    return "\n".join(lines)
