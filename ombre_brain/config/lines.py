"""Where a dotted config key is written in a YAML text: its line, so a mistake can be pointed at.

``config check`` and the policy playground name a bad key by its dotted path (``gateway.budgets.total``);
a person editing a 400-line file wants the line too. The YAML is composed (not loaded) so every key keeps
its position; a key the text does not hold is pointed at through its deepest parent that it does hold.
Pure: text in, line numbers out.
"""

from __future__ import annotations

import yaml

from .parse import _Loader  # the loader config files are read with (YAML 1.2 booleans)

__all__ = ["key_lines", "line_of"]


def key_lines(text: str) -> dict[str, int]:
    """Every dotted key path of a YAML text (list items by index) with the 1-based line its key is on.

    Returns {} when the text does not compose (a syntax error is reported by the loader, with its own line).
    """
    try:
        root = yaml.compose(text, Loader=_Loader)  # noqa: S506 - a SafeLoader
    except yaml.YAMLError:
        return {}
    out: dict[str, int] = {}
    seen: set[int] = set()  # an alias is the very node it names: walked once, so nine levels of nine stay small

    def walk(node, prefix: str) -> None:
        if id(node) in seen:
            return
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                name = f"{prefix}.{key.value}" if prefix else str(key.value)
                out.setdefault(name, key.start_mark.line + 1)
                walk(value, name)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                name = f"{prefix}.{i}" if prefix else str(i)
                out.setdefault(name, item.start_mark.line + 1)
                walk(item, name)

    if root is not None:
        walk(root, "")
    return out


def line_of(text: str, key: str | None, lines: dict[str, int] | None = None) -> int | None:
    """The line of ``key`` in ``text``, else of its deepest parent written there; None when no part of it is."""
    if not key:
        return None
    lines = key_lines(text) if lines is None else lines
    parts = key.split(".")
    for depth in range(len(parts), 0, -1):
        found = lines.get(".".join(parts[:depth]))
        if found is not None:
            return found
    return None
