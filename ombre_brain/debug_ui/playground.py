"""The policy playground's work for the page and the JSON routes (docs/design.md §22).

What the page shows first (the serving policy as YAML, what the turn log keeps for replays, the scenario
and labelled files the server offers, whether saving is on), a draft checked with its line, a replay
started as a background job, and a draft kept: downloaded as an overlay, or saved as a persona overlay
where ``server.playground.save_dir`` allows it and the token may use every space. Files are offered by
name from the configured folders only; a request never names a path.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any

from flask import current_app

from ..config import Config
from ..errors import ConfigError, ConflictError, ForbiddenError, NotFoundError, ValidationError
from ..replay.draft import DRAFT_NAME, POLICY_SECTIONS, changed_keys, overlay_text, parse_draft, policy_text
from ..replay.playground import run_playground
from ..replay.sources import labelled_kind, recorded_source, scenario_source, set_source
from ..turn.gate_table import GATES
from ..turn.words import words
from ..web import current_scope, get_brain
from .replay_jobs import ReplayJob, ReplayJobs

__all__ = ["DRAFT_FIELDS", "REPLAY_FIELDS", "SAVE_FIELDS", "check", "draft_text", "info", "jobs", "keep_overlay",
           "known_fields", "save", "start_replay", "with_words"]

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")  # with fullmatch: `$` also matches before a final "\n"
SOURCES = ("recorded", "scenarios", "set")


def jobs() -> ReplayJobs:
    """This app's replay jobs (made on first use)."""
    ext = current_app.extensions
    if "ombre_replays" not in ext:
        brain = get_brain()

        def purge_mark(space: str) -> Any:
            newest = brain.forget.receipts(space, 1)
            return newest[0]["payload"]["purge_id"] if newest else None

        ext.setdefault("ombre_replays", ReplayJobs(purge_mark))
    return ext["ombre_replays"]


def _files(folder: str | None) -> dict[str, Path]:
    if not folder:
        return {}
    root = Path(folder)
    if not root.is_dir():
        return {}
    return {p.name: p for p in sorted(root.glob("*.yaml")) if p.is_file()}


def _sets(cfg: Config) -> list[dict]:
    out = []
    for name, path in _files(cfg.server.playground.sets).items():
        try:
            out.append({"name": name, "kind": labelled_kind(path)})
        except ValidationError:
            continue  # not a labelled set: not offered
    return out


def can_save(cfg: Config) -> bool:
    return bool(cfg.server.playground.save_dir) and current_scope() == "*"


def info(space: str) -> dict:
    """What the playground starts from for a space."""
    brain = get_brain()
    cfg = brain.config
    pg = cfg.server.playground
    return {"space": space, "policy": policy_text(cfg), "version": cfg.version, "sections": list(POLICY_SECTIONS),
            "log": {**brain.gateway.sessions.logged_turns(space), "setting": "gateway.injection_log_size"},
            "max_turns": pg.max_turns, "scenarios": list(_files(pg.scenarios)), "sets": _sets(cfg),
            "save": {"enabled": bool(pg.save_dir), "allowed": can_save(cfg),
                     "how": "set server.playground.save_dir where the server starts; saving takes a token for "
                            "every space (OMBRE_TOKEN, or a server.tokens rule with spaces: \"*\")"}}


REPLAY_FIELDS = ("space", "policy", "source", "last", "scenarios", "set")
DRAFT_FIELDS = ("space", "policy")
SAVE_FIELDS = ("space", "policy", "name", "overwrite")


def known_fields(body: dict, fields: tuple[str, ...]) -> dict:
    """The body, when it names only ``fields``; else a ValidationError naming the field it does not know, and
    ``policy`` when that is the one missing (a draft sent as ``draft`` or ``yaml``)."""
    unknown = sorted(str(k) for k in body if k not in fields)
    if unknown:
        hint = " (the draft goes in policy, as YAML text)" if "policy" in fields and "policy" not in body else ""
        raise ValidationError(f"unknown field(s) {', '.join(unknown)}; expected {', '.join(fields)}{hint}",
                              code="unknown_field")
    return body


def draft_text(body: dict) -> Any:
    """The draft in a body: its ``policy`` field, required."""
    if "policy" not in body:
        raise ConfigError("nothing to check: send the draft policy as YAML text in the field policy", file=DRAFT_NAME)
    return body["policy"]


def check(body: dict) -> dict:
    """A draft checked: ``{ok, changed, overlay}``, or ``{ok: false, error: {message, line, key}}``."""
    serving = get_brain().config
    try:
        draft = parse_draft(draft_text(known_fields(body, DRAFT_FIELDS)), serving)
    except ConfigError as exc:
        return {"ok": False, "error": exc.to_dict()["error"]}
    return {"ok": True, "changed": changed_keys(draft, serving), "version": draft.version}


def start_replay(space: str, body: dict) -> ReplayJob:
    """Check the draft and the source, then run the replay in the background (a ConfigError names the line)."""
    brain = get_brain()
    serving = brain.config
    draft = parse_draft(draft_text(known_fields(body, REPLAY_FIELDS)), serving)
    kind = body.get("source", "recorded")
    if kind not in SOURCES:
        raise ValidationError(f"expected one of {', '.join(SOURCES)}, got {str(kind)[:40]!r}", field="source")
    pg = serving.server.playground
    if kind == "recorded":
        last = body.get("last", 50)
        if isinstance(last, bool) or not isinstance(last, int) or not 1 <= last <= pg.max_turns:
            raise ValidationError(f"expected an integer between 1 and {pg.max_turns} (server.playground.max_turns)",
                                  field="last")
        source = recorded_source(brain, space, last, draft)
    elif kind == "scenarios":
        offered = _files(pg.scenarios)
        if not offered:
            raise NotFoundError("no scenario folder is configured (server.playground.scenarios)")
        names = body.get("scenarios") or list(offered)
        if not isinstance(names, list) or any(n not in offered for n in names):
            raise ValidationError(f"expected names among {', '.join(offered)}", field="scenarios")
        source = scenario_source([offered[n] for n in names], serving, draft)
    else:
        offered = _files(pg.sets)
        name = body.get("set")
        if name not in offered:
            raise ValidationError(f"expected one of {', '.join(offered) or 'none (server.playground.sets)'}",
                                  field="set")
        source = set_source(offered[name], serving, draft)
    return jobs().start(space, kind, source.size, lambda job: with_words(
        run_playground(source, serving, draft, progress=job.progress, cancel=job.cancel)))


def with_words(result: dict) -> dict:
    """The result plus the words of every reason code and gate it names, so the page shows words, not codes."""
    codes: set[str] = set()
    gates: set[str] = set()
    for row in result["turns"]:
        for c in row["changes"]:
            codes.update(x for x in (c["reason_before"], c["reason_after"]) if x)
            for g in c["gates"]:
                gates.add(g["gate"])
                codes.update(x for x in (g["before"]["reason"], g["after"]["reason"]) if x)
    codes.update(r for t in result["totals"]["reasons"] for r in (t["reason_before"], t["reason_after"]) if r)
    return {**result, "words": {c: words(c) for c in sorted(codes)},
            "gate_words": {g: GATES[g].doc for g in sorted(gates) if g in GATES.names}}


def keep_overlay(space: str, text: Any) -> tuple[str, str]:
    """(file name, overlay text) of a checked draft, to download."""
    draft = parse_draft(text, get_brain().config)
    return f"ombre-overlay-{re.sub(r'[^A-Za-z0-9_-]', '-', space)}.yaml", overlay_text(draft, space=space)


def save(space: str, body: dict) -> dict:
    """Write a checked draft as a persona overlay in ``server.playground.save_dir`` (off unless configured)."""
    cfg = get_brain().config
    folder = cfg.server.playground.save_dir
    if not folder:
        raise ForbiddenError("saving is off: set server.playground.save_dir where the server starts")
    if current_scope() != "*":
        raise ForbiddenError("saving a persona overlay changes the policy of every space: it takes a token for "
                             "every space (OMBRE_TOKEN, or a server.tokens rule with spaces: \"*\")")
    known_fields(body, SAVE_FIELDS)
    name = body.get("name")
    if not isinstance(name, str) or not NAME_RE.fullmatch(name) or name.startswith("."):
        raise ValidationError("expected a file name of letters, digits, '-', '_' or '.' (at most 64)", field="name")
    name = name if name.endswith(".yaml") else f"{name}.yaml"
    _, text = keep_overlay(space, draft_text(body))
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    path = root / name
    if path.exists() and body.get("overwrite") is not True:
        raise ConflictError(f"{name} exists in the save folder; send overwrite: true to replace it", code="exists")
    fd, tmp = tempfile.mkstemp(dir=root, prefix=".playground-", suffix=".yaml")
    with os.fdopen(fd, "w", encoding="utf-8") as f:  # written whole, then renamed: never a half file to serve
        f.write(text)
    os.replace(tmp, path)
    return {"saved": str(path), "serve": f"ombre-brain serve --config {path}"}
