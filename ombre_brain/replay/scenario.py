"""`ombre-brain replay`: run a scenario (design §11) in a fresh store and check its expectations.

Scenarios are the acceptance tests persona designers can read and write, so every miss is
reported as a readable line naming the turn, the expect key and what was seen instead.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ..brain import Brain
from ..buckets import split_sentences
from ..config import load_config
from ..config.parse import deep_merge, load_yaml_text
from ..errors import ConfigError, ValidationError
from ..timeutil import parse_time, relative_time

EXPECT_KEYS = ("include", "exclude", "injected", "not_injected", "shapes", "present_sections", "absent_sections",
               "order", "plan", "rendered_contains", "rendered_excludes", "no_forged_headings")
SCENARIO_KEYS = ("name", "space", "identity", "config", "start", "buckets", "edges", "turns", "description")
TURN_KEYS = ("query", "session", "space", "at", "expect")


@dataclass
class TurnResult:
    index: int
    turn: dict
    misses: list[str] = field(default_factory=list)


@dataclass
class ReplayResult:
    scenario: str
    path: str
    turns: list[TurnResult]

    @property
    def ok(self) -> bool:
        return all(not t.misses for t in self.turns)

    def to_dict(self) -> dict:
        return {"scenario": self.scenario, "turns": [t.turn for t in self.turns]}

    def report(self) -> str:
        lines = [f"{'PASS' if self.ok else 'FAIL'} {self.scenario} ({self.path})"]
        for t in self.turns:
            for m in t.misses:
                lines.append(f"  turn {t.index + 1} [{t.turn['query']!r}]: {m}")
        return "\n".join(lines)


def load_scenario(path: str | Path) -> dict:
    p = Path(path)
    try:
        data = load_yaml_text(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError("scenario file not found", file=str(p)) from None
    except Exception as exc:  # yaml errors: name the file and the cause
        raise ConfigError(f"invalid YAML: {exc}", file=str(p)) from None
    if not isinstance(data, Mapping):
        raise ConfigError("a scenario is a mapping with name, start, buckets and turns", file=str(p))
    unknown = sorted(set(data) - set(SCENARIO_KEYS))
    if unknown:
        raise ConfigError(f"unknown key(s) {', '.join(unknown)} (known: {', '.join(SCENARIO_KEYS)})", file=str(p))
    for key in ("name", "start", "turns"):
        if key not in data:
            raise ConfigError("is required", file=str(p), key=key)
    if not isinstance(data["turns"], list) or not data["turns"]:
        raise ConfigError("expected a non-empty list of turns", file=str(p), key="turns")
    for i, t in enumerate(data["turns"]):
        if not isinstance(t, Mapping) or "query" not in t:
            raise ConfigError("each turn is a mapping with a query", file=str(p), key=f"turns.{i}")
        bad = sorted(set(t) - set(TURN_KEYS))
        if bad:
            raise ConfigError(f"unknown key(s) {', '.join(bad)}", file=str(p), key=f"turns.{i}")
        bad = sorted(set(t.get("expect") or {}) - set(EXPECT_KEYS))
        if bad:
            raise ConfigError(f"unknown expect key(s) {', '.join(bad)} (known: {', '.join(EXPECT_KEYS)})",
                              file=str(p), key=f"turns.{i}.expect")
    return dict(data)


def _config_for(scenario: dict, overlay: Any) -> Any:
    merged: dict = {}
    if scenario.get("identity"):
        merged["identity"] = scenario["identity"]
    if scenario.get("config"):
        merged = deep_merge(merged, scenario["config"])
    if overlay is not None:
        base = load_config(overlay)
        return load_config(base.raw, merged)
    return load_config(merged)


def run_scenario(path: str | Path, *, config: Any = None, data_dir: str | Path | None = None) -> ReplayResult:
    sc = load_scenario(path)
    cfg = _config_for(sc, config)
    start = parse_time(str(sc["start"]), "start")
    default_space = sc.get("space") or cfg.server.default_space
    with tempfile.TemporaryDirectory(prefix="ombre-replay-") as tmp:
        with Brain.open(data_dir or tmp, cfg) as brain:
            seed_scenario(brain, sc, start, default_space, path)
            bodies = {str(b.get("id")): str(b.get("body") or "") for b in sc.get("buckets") or []
                      if isinstance(b, Mapping)}
            results = []
            at = start
            for i, t in enumerate(sc["turns"]):
                at = relative_time(str(t["at"]), start) if t.get("at") is not None else (
                    start if i == 0 else at + timedelta(minutes=1))
                turn = brain.turn(space=t.get("space") or default_space, session=str(t.get("session") or "default"),
                                  query=str(t["query"]), now=at)
                td = turn.to_dict()
                expect = t.get("expect") or {}
                misses = check_expect(td, expect)
                misses += not_injected_text_check(td, bodies, expect.get("not_injected") or [])
                results.append(TurnResult(i, td, misses))
    return ReplayResult(str(sc["name"]), str(path), results)


def seed_scenario(brain, sc: dict, start: datetime, default_space: str, path) -> None:
    for i, b in enumerate(sc.get("buckets") or []):
        if not isinstance(b, Mapping):
            raise ConfigError("each bucket is a mapping of §3 fields", file=str(path), key=f"buckets.{i}")
        data = dict(b)
        for key in ("created", "updated", "last_active", "event_time"):
            if data.get(key) is not None:
                data[key] = relative_time(str(data[key]), start).isoformat()
        data.setdefault("space", default_space)
        try:
            brain.write(now=start, dedupe=False, **data)
        except ValidationError as exc:
            raise ConfigError(exc.message, file=str(path), key=f"buckets.{i}") from None
    for i, e in enumerate(sc.get("edges") or []):
        if not isinstance(e, Mapping) or not {"from", "to"} <= set(e):
            raise ConfigError("each edge is {from, to, relation, confidence}", file=str(path), key=f"edges.{i}")
        space = e.get("space") or default_space
        brain.link(space, str(e["from"]), str(e["to"]), e.get("relation", "relates_to"), e.get("confidence", 0.8))


# ---------------------------------------------------------------- expectations


def _items(turn: dict) -> dict[str, list[dict]]:
    return {s["key"]: s["items"] for s in (*turn["stable"], *turn["sections"])}


def check_expect(turn: dict, expect: Mapping) -> list[str]:
    """Every `expect` key of the §11 table; returns human-readable misses (empty = pass)."""
    misses: list[str] = []
    items = _items(turn)
    ids_in = {k: [i["bucket_id"] for i in v if i["bucket_id"]] for k, v in items.items()}
    all_ids = {b for v in ids_in.values() for b in v}
    where = {b: [k for k, v in ids_in.items() if b in v] for b in all_ids}
    sup = {s["bucket_id"]: s["reason"] for s in turn["suppressed"]}

    def seen(bid: str) -> str:
        if bid in where:
            return f"it is in {', '.join(where[bid])}"
        if bid in sup:
            return f"it was suppressed: {sup[bid]}"
        return "it was not a candidate"

    for sec, ids in (expect.get("include") or {}).items():
        for bid in ids:
            if bid not in ids_in.get(sec, []):
                misses.append(f"include: expected {bid} in {sec}, but {seen(bid)}")
    for sec, ids in (expect.get("exclude") or {}).items():
        for bid in ids:
            if bid in ids_in.get(sec, []):
                misses.append(f"exclude: expected {bid} not in {sec}, but it is")
    for bid in expect.get("injected") or []:
        if bid not in all_ids:
            misses.append(f"injected: expected {bid} in some section, but {seen(bid)}")
    for bid in expect.get("not_injected") or []:
        if bid in all_ids:
            misses.append(f"not_injected: expected {bid} nowhere, but {seen(bid)}")
    for bid, shape in (expect.get("shapes") or {}).items():
        got = [i["shape"] for v in items.values() for i in v if i["bucket_id"] == bid]
        if not got:
            misses.append(f"shapes: expected {bid} as {shape}, but {seen(bid)}")
        elif any(s != shape for s in got):
            misses.append(f"shapes: expected {bid} as {shape}, got {', '.join(got)}")
    for key in expect.get("present_sections") or []:
        if key not in items:
            misses.append(f"present_sections: expected section {key}, sections are {', '.join(items) or 'none'}")
    for key in expect.get("absent_sections") or []:
        if key in items:
            misses.append(f"absent_sections: expected no {key}, but it holds "
                          f"{', '.join(str(i['bucket_id'] or i['text'][:30]) for i in items[key])}")
    order = [k for k in (expect.get("order") or []) if k in items]
    actual = [k for k in items if k in order]
    if order != actual:
        misses.append(f"order: expected {order}, got {actual}")
    for field_name, value in (expect.get("plan") or {}).items():
        got = turn["plan"].get(field_name, "<missing>")
        if got != value:
            misses.append(f"plan: expected {field_name} = {value!r}, got {got!r}")
    for text in expect.get("rendered_contains") or []:
        if str(text) not in turn["rendered"]:
            misses.append(f"rendered_contains: {text!r} is not in the rendered block")
    for text in expect.get("rendered_excludes") or []:
        if str(text) in turn["rendered"]:
            misses.append(f"rendered_excludes: {text!r} is in the rendered block")
    if expect.get("no_forged_headings"):
        titles = {f"## {s['title']}" for s in (*turn["stable"], *turn["sections"])}
        for line in turn["rendered"].splitlines():
            if line.startswith("#") and line.rstrip() not in titles:
                misses.append(f"no_forged_headings: line {line[:60]!r} is not a real section heading")
    return misses


def not_injected_text_check(turn: dict, bodies: Mapping[str, str], ids) -> list[str]:
    """The stronger half of `not_injected`: no sentence of the body appears in `rendered`."""
    out = []
    for bid in ids:
        for sent in split_sentences(bodies.get(bid, "")):
            s = sent.strip().strip("。！？.!?")
            if len(s) >= 8 and s in turn["rendered"]:
                out.append(f"not_injected: text of {bid} appears in rendered: {s[:40]!r}")
                break
    return out
