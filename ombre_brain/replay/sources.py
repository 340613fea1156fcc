"""What a playground replay runs on (docs/design.md §22): recorded turns, scenarios, or a labelled set.

- **recorded**: the space's last N logged turns, each with the conversation it heard and the session
  state it met (``gateway/sessions.replay_log``), against the space's memories as they are now;
- **scenarios** (docs/design.md §11): each file in a scratch store of its own, seeded as ``replay`` seeds
  it, its ``expect`` checked under both policies (a scenario's own ``config`` applies over both);
- **labelled sets**: an ``eval inject`` file (its memories in a scratch store, every question the first
  turn of its own session) or an ``eval conversation`` file (each conversation a scratch store whose
  writes are its labels, as ``eval conversation --oracle-writes``, so only the read policy differs);
  scored as those commands score, under both policies.

A scratch store is a temporary data directory with embedded Chroma and its own ledger, whatever the
server's store is; it is deleted when its batch is done. Nothing here touches a space's own data but
reading its turn log.
"""

from __future__ import annotations

import dataclasses
import re
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from ..config import Config, load_config
from ..config.parse import deep_merge
from ..errors import ValidationError
from ..evaluate.conversation import STEP, Scores, _oracle, _score_turn, load_conversations
from ..evaluate.inject import MEMORY_SECTIONS, NOW, Outcome, built_store, load_inject_yaml, score
from ..gateway.sessions import state_from_json
from ..timeutil import parse_time, relative_time
from .draft import draft_parts, overlay_of
from .pairs import Pair, ReplayTurn
from .scenario import check_expect, load_scenario, not_injected_text_check, seed_scenario

__all__ = ["Batch", "Source", "labelled_kind", "recorded_source", "scenario_source", "set_source"]

SCRATCH = {"store": {"chroma": {"mode": "embedded"}, "ledger": {"url": None}}}


@dataclasses.dataclass
class Batch:
    """Turns that share one store: ``open()`` yields (brain, turns, serving parts, draft parts)."""

    name: str
    size: int
    open: Callable[[], Any]


@dataclasses.dataclass
class Source:
    """What to replay: its batches, how each turn's outcome reads, and the set's score under each policy."""

    kind: str
    name: str
    batches: list[Batch]
    skipped: int = 0                                   # recorded turns logged before replay records were kept
    outcome: Callable[[Pair], dict | None] = lambda pair: None
    metric: Callable[[list[Pair]], dict | None] = lambda pairs: None

    @property
    def size(self) -> int:
        return sum(b.size for b in self.batches)


def _scratch(cfg: Config, *overlays: Any) -> Config:
    return load_config(cfg, *overlays, SCRATCH)


# ---------------------------------------------------------------- recorded turns


def recorded_source(brain: Any, space: str, last: int, draft: Config) -> Source:
    """The space's last ``last`` logged turns (only this space's: the log is read by space)."""
    rows = brain.gateway.sessions.replay_log(space, last)
    turns = []
    for r in rows:
        rec = r["replay"]
        if not rec or rec.get("v") != 1:
            continue
        now = parse_time(r["turn"].get("at") or r["at"], "at")
        state = state_from_json(rec.get("state") or {}, space=space, session=r["session"], now=now)
        turns.append(ReplayTurn(f"turn {r['seq']}", space, r["session"], str(r["turn"].get("query") or ""), now,
                                tuple(rec.get("context") or ()), state, r["turn"]))

    @contextmanager
    def open_():
        yield brain, turns, brain.parts, draft_parts(brain.parts, draft, brain.tokenize)

    return Source("recorded", f"last {last} recorded turns of {space}", [Batch(space, len(turns), open_)],
                  skipped=len(rows) - len(turns))


# ---------------------------------------------------------------- scenarios


def scenario_source(paths: list[Path], serving: Config, draft: Config) -> Source:
    """Scenario files, each replayed in its own scratch store; each turn's ``expect`` checked under both.

    The serving policy runs with each scenario's own ``config`` over it, as ``replay`` runs it; the draft's changes
    (what it sets differently from the serving policy) go over that, so a key a scenario pins is still tried.
    """
    from ..brain import Brain

    changes = overlay_of(draft, serving)
    batches = []
    for path in paths:
        sc = load_scenario(path)

        @contextmanager
        def open_(sc=sc, path=path):
            overlay = deep_merge({"identity": sc["identity"]} if sc.get("identity") else {}, sc.get("config") or {})
            start = parse_time(str(sc["start"]), "start")
            with tempfile.TemporaryDirectory(prefix="ombre-playground-") as tmp, \
                    Brain.open(Path(tmp) / "data", _scratch(serving, overlay)) as brain:
                space = sc.get("space") or brain.config.server.default_space
                seed_scenario(brain, sc, start, space, path)
                bodies = {str(b.get("id")): str(b.get("body") or "") for b in sc.get("buckets") or []
                          if isinstance(b, dict)}
                turns, at = [], start
                for i, t in enumerate(sc["turns"]):
                    at = relative_time(str(t["at"]), start) if t.get("at") is not None else (
                        start if i == 0 else at + timedelta(minutes=1))  # as `replay` times them
                    turns.append(ReplayTurn(f"{sc['name']} · turn {i + 1}", t.get("space") or space,
                                            str(t.get("session") or "default"), str(t["query"]), at,
                                            label={"expect": t.get("expect") or {}, "bodies": bodies,
                                                   "scenario": str(sc["name"])}))
                yield brain, turns, brain.parts, draft_parts(brain.parts, load_config(brain.config, changes),
                                                              brain.tokenize)

        batches.append(Batch(str(sc["name"]), len(sc["turns"]), open_))

    def outcome(pair: Pair) -> dict:
        lab = pair.turn.label
        return {"misses_before": _misses(pair.current, lab), "misses_after": _misses(pair.draft, lab)}

    def metric(pairs: list[Pair]) -> dict:
        by: dict[str, list[bool]] = {}
        for p in pairs:
            o = outcome(p)
            by.setdefault(p.turn.label["scenario"], []).append((not o["misses_before"], not o["misses_after"]))
        return {"name": "scenarios passing",
                "before": sum(all(b for b, _ in v) for v in by.values()),
                "after": sum(all(a for _, a in v) for v in by.values()), "of": len(by),
                "turns_before": sum(b for v in by.values() for b, _ in v),
                "turns_after": sum(a for v in by.values() for _, a in v), "turns": sum(len(v) for v in by.values())}

    return Source("scenarios", f"{len(paths)} scenarios", batches, outcome=outcome, metric=metric)


def _misses(turn, label: dict) -> list[str]:
    td = turn.to_dict()
    expect = label["expect"]
    return check_expect(td, expect) + not_injected_text_check(td, label["bodies"], expect.get("not_injected") or [])


# ---------------------------------------------------------------- labelled sets


def labelled_kind(path: Path) -> str:
    """``inject`` (memories and questions) or ``conversation`` (labelled chats), read from the file's keys."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ValidationError(f"cannot read {path.name}: {exc}") from None
    if isinstance(data, dict) and "conversations" in data:
        return "conversation"
    if isinstance(data, dict) and ("memories" in data or "memories_from" in data):
        return "inject"
    raise ValidationError(f"{path.name} is neither an eval inject set (memories, queries) nor an eval "
                          "conversation file (conversations)")


def set_source(path: Path, serving: Config, draft: Config) -> Source:
    return _conversation_source(path, serving, draft) if labelled_kind(path) == "conversation" else \
        _inject_source(path, serving, draft)


def _inject_source(path: Path, serving: Config, draft: Config) -> Source:
    s = load_inject_yaml(path)
    now = parse_time(NOW, "now")
    changes = overlay_of(draft, serving)

    @contextmanager
    def open_() -> Iterator:
        with built_store(s, _scratch(serving)) as (brain, space):
            turns = [ReplayTurn(f"case {i + 1} ({c.kind})", space, f"case-{i}", c.text, now, tuple(c.context),
                                label=c) for i, c in enumerate(s.cases)]
            yield brain, turns, brain.parts, draft_parts(brain.parts, load_config(brain.config, changes),
                                                          brain.tokenize)

    def injected(turn) -> list[str]:
        return [bid for key in MEMORY_SECTIONS for bid in turn.item_ids(key)]

    def outcome(pair: Pair) -> dict:
        c = pair.turn.label
        return {"wanted": list(c.wanted), "hit_before": bool(set(injected(pair.current)) & set(c.wanted)),
                "hit_after": bool(set(injected(pair.draft)) & set(c.wanted))}

    def metric(pairs: list[Pair]) -> dict:
        def outcomes(which: str) -> list[Outcome]:
            out = []
            for p in pairs:
                turn = getattr(p, which)
                unknown = any(it.extra.get("note") == "unknown" for sec in turn.sections for it in sec.items)
                out.append(Outcome(p.turn.label, injected(turn), unknown, 0.0))
            return out

        return {"name": "eval inject", "before": _no_ms(score(outcomes("current"))),
                "after": _no_ms(score(outcomes("draft")))}

    return Source("inject", s.name, [Batch(s.name, len(s.cases), open_)], outcome=outcome, metric=metric)


def _no_ms(res: dict) -> dict:
    return {k: v for k, v in res.items() if k not in ("turn_ms", "ece", "scored_candidates")}


def _conversation_source(path: Path, serving: Config, draft: Config) -> Source:
    convs = load_conversations(path)
    changes = overlay_of(draft, serving)  # over each conversation's names, as over a scenario's config
    batches = []
    for conv in convs:
        overlay = {"identity": {"ai_name": conv.ai_name, "user_name": conv.user_name}}

        @contextmanager
        def open_(conv=conv, overlay=overlay):
            from ..brain import Brain

            space = "eval:" + re.sub(r"[^A-Za-z0-9_.:\-]", "_", conv.id)[:100]
            with tempfile.TemporaryDirectory(prefix="ombre-playground-") as tmp, \
                    Brain.open(Path(tmp) / "data", _scratch(serving, overlay)) as brain:
                turns, n = [], 0
                for si, session in enumerate(conv.sessions):
                    history: list[dict] = []
                    for ei, ex in enumerate(session.exchanges):
                        at = session.at + STEP * ei
                        write = partial(_oracle, brain, space, ex, at, n)  # the labels as the write, after both runs
                        where = {"conversation": conv.id, "session": si + 1, "exchange": ei + 1, "user": ex.user}
                        turns.append(ReplayTurn(f"{conv.id} s{si + 1} #{ei + 1}", space, f"{conv.id}-s{si + 1}",
                                                ex.user, at, tuple(history), label=(ex, where), after=write))
                        history = [*history, {"role": "user", "content": ex.user},
                                   {"role": "assistant", "content": ex.assistant}]
                        n += 1
                yield brain, turns, brain.parts, draft_parts(brain.parts, load_config(brain.config, changes),
                                                              brain.tokenize)

        batches.append(Batch(conv.id, sum(len(s.exchanges) for s in conv.sessions), open_))

    def outcome(pair: Pair) -> dict | None:
        ex, where = pair.turn.label
        if ex.recall is None:
            return None
        before, after = Scores(), Scores()
        _score_turn(pair.current, ex, where, before)
        _score_turn(pair.draft, ex, where, after)
        return {"recall": list(ex.recall), "failed_before": bool(before.failures),
                "failed_after": bool(after.failures)}

    def metric(pairs: list[Pair]) -> dict:
        before, after = Scores(), Scores()
        for p in pairs:
            ex, where = p.turn.label
            if ex.recall is not None:
                _score_turn(p.current, ex, where, before)
                _score_turn(p.draft, ex, where, after)

        def view(s: Scores) -> dict:
            d = s.to_dict()
            return {k: d[k] for k in ("turn_recall", "cross_language_turn_recall", "false_recall",
                                      "turn_recall_by_kind", "false_recall_by_kind")}

        return {"name": "eval conversation (labels as the writes)", "before": view(before), "after": view(after)}

    return Source("conversation", path.stem, batches, outcome=outcome, metric=metric)
