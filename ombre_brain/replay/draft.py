"""A draft of the persona policy (the policy playground, docs/design.md §22): YAML in, a checked Config out.

A persona designer edits the policy that serves a space as YAML, and a replay runs the space's turns
under it beside the serving policy. The draft is checked exactly as ``config check`` checks a file
(the same errors), with the line of the key at fault; it never replaces the serving policy, which keeps
running. Only the persona's policy is editable here (:data:`POLICY_SECTIONS`): where the store lives,
tokens, keys and the upstream model are set where the server starts, and a draft that names them is
refused with its line. A draft leaves as an overlay: only the keys that differ from the defaults, to be
passed with ``--config``.

:func:`draft_parts` turns a checked draft into the turn parts a dry run needs: the store, sessions and
engines the Brain built, with a planner, retriever and admitter for the draft's config (as
``turn/breath.breath_parts`` does for MCP ``breath()``), so nothing is rebuilt or re-embedded.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import Any

import yaml

from ..config import Config, load_config
from ..config.lines import key_lines, line_of
from ..config.parse import parse_yaml_mapping
from ..errors import ConfigError
from ..recall_policy import RecallPolicy
from ..retrieval.candidates import Retriever
from ..retrieval.evidence import Admitter
from ..turn.context import TurnParts

__all__ = ["DRAFT_NAME", "MAX_DRAFT_BYTES", "POLICY_SECTIONS", "changed_keys", "draft_parts", "overlay_of",
           "overlay_text", "parse_draft", "policy_text"]

POLICY_SECTIONS = ("identity", "retrieval", "diffusion", "render", "gateway", "layers", "cues", "dream", "facts")
"""What a persona's policy is: how a turn reads memory. The rest of the config (embedding, store, lexical,
writer, forget, server, upstream, ingest, mcp) is where and how the server runs, or how memories are written."""
SERVER_SECTIONS = tuple(f.name for f in dataclasses.fields(Config)
                        if f.name not in (*POLICY_SECTIONS, "raw", "version"))
MAX_DRAFT_BYTES = 256 * 1024
DRAFT_NAME = "draft"  # how an error names the text it was found in
_SAME = object()
_MISSING = object()


def policy_text(cfg: Config) -> str:
    """The policy sections of a config as YAML: what the playground's editor starts from."""
    data = {k: cfg.raw[k] for k in POLICY_SECTIONS if k in cfg.raw}
    head = (f"# The persona policy serving this space (config version {cfg.version}).\n"
            "# Edit, then replay; a key left out keeps the serving value. Where the server runs (store, tokens,\n"
            "# upstream, embedding) is set where it starts, not here.\n")
    return head + yaml.safe_dump(data, allow_unicode=True, sort_keys=False, width=110)


def parse_draft(text: Any, serving: Config) -> Config:
    """The draft merged over the serving policy and checked; a ConfigError naming the line and key otherwise.

    The errors are ``config check``'s (unknown key, wrong type, out of range, the cross-field rules), named
    ``draft: line N: key 'k': …``; a YAML syntax error names its line too.
    """
    if not isinstance(text, str):
        raise ConfigError(f"expected the draft policy as YAML text in the field policy, got {type(text).__name__}",
                          file=DRAFT_NAME)
    if len(text.encode("utf-8")) > MAX_DRAFT_BYTES:
        raise ConfigError(f"is larger than {MAX_DRAFT_BYTES // 1024} KiB", file=DRAFT_NAME)
    data = parse_yaml_mapping(text, DRAFT_NAME, aliases=False)  # checked before anything walks its keys
    lines = key_lines(text)
    for key in data:
        if key in SERVER_SECTIONS:
            raise ConfigError(f"is set where the server starts, not in a persona's policy (a draft may change "
                              f"{', '.join(POLICY_SECTIONS)})", file=DRAFT_NAME, key=str(key), line=lines.get(str(key)))
        if key not in POLICY_SECTIONS:
            raise ConfigError(f"unknown key (known keys here: {', '.join(sorted(POLICY_SECTIONS))})",
                              file=DRAFT_NAME, key=str(key), line=lines.get(str(key)))
    try:
        return load_config(serving, data)
    except ConfigError as exc:
        raise ConfigError(exc.problem, file=DRAFT_NAME, key=exc.key, line=line_of(text, exc.key, lines)) from None


def _diff(a: Any, b: Any) -> Any:
    """What of ``a`` differs from ``b``: mappings key by key, anything else (lists included) whole."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        out = {k: d for k, v in a.items() if (d := _diff(v, b.get(k, _MISSING))) is not _SAME}
        return out if out else _SAME
    same = (a == b and type(a) is type(b)) or _numbers_equal(a, b)
    return _SAME if same else copy.deepcopy(a)


def _numbers_equal(a: Any, b: Any) -> bool:
    numeric = (int, float)
    return (isinstance(a, numeric) and isinstance(b, numeric) and not isinstance(a, bool)
            and not isinstance(b, bool) and float(a) == float(b))


def overlay_of(cfg: Config, base: Config | None = None) -> dict:
    """The policy keys of ``cfg`` that differ from ``base`` (the defaults when None): an overlay for ``--config``."""
    ref = (base or load_config()).raw
    out = {}
    for section in POLICY_SECTIONS:
        d = _diff(cfg.raw.get(section), ref.get(section))
        if d is not _SAME:
            out[section] = d
    return out


def changed_keys(cfg: Config, base: Config) -> list[str]:
    """The dotted policy keys whose value differs between two configs (what a draft changes)."""
    out: list[str] = []

    def walk(d: Any, prefix: str) -> None:
        if isinstance(d, Mapping) and d:
            for k, v in d.items():
                walk(v, f"{prefix}.{k}")
        else:
            out.append(prefix)

    for section, d in overlay_of(cfg, base).items():
        walk(d, section)
    return out


def overlay_text(cfg: Config, *, space: str, now: datetime | None = None) -> str:
    """The draft as an overlay file: a header saying where it came from, then the keys that differ from the defaults."""
    when = (now or datetime.now(timezone.utc)).isoformat(timespec="seconds")
    data = overlay_of(cfg)
    head = (f"# Ombre Brain persona overlay, from the policy playground (space {space}, {when}).\n"
            "# Only the keys that differ from the defaults. Serve it with: ombre-brain serve --config THIS_FILE\n")
    return head + (yaml.safe_dump(data, allow_unicode=True, sort_keys=False, width=110) if data else "{}\n")


def draft_parts(parts: TurnParts, cfg: Config, tokenize: Callable[[str], list[str]]) -> TurnParts:
    """The turn parts of a draft: the same store, sessions, dreams and facts; a planner, retriever and admitter
    that read the draft's config. The serving admitter (and its background samples) is kept when the draft leaves
    admission's config as it is."""
    serving = parts.config
    policy = RecallPolicy(cfg, tokenizer=lambda t, s=None: tokenize(t)).prepare()  # compiled once, before turn 1
    retriever = Retriever(parts.store, cfg, policy)
    same = cfg.raw.get("retrieval") == serving.raw.get("retrieval") and cfg.raw.get("lexical") == serving.raw.get(
        "lexical")
    admitter = parts.admitter if same else Admitter(parts.store, cfg)  # type: ignore[arg-type]
    return dataclasses.replace(parts, config=cfg, policy=policy, retriever=retriever, admitter=admitter)
