"""Reading config YAML: the loader, deep merge, and typing raw values into the option dataclasses.

Generic over dataclasses, so :mod:`ombre_brain.config` declares each option once and this module
turns YAML into those frozen objects, naming the dotted key of anything wrong. Pure apart from
reading the files it is given.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import re
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml

from ..errors import ConfigError


def _rng(lo: float | None = None, hi: float | None = None) -> dict:
    """A field's range, as ``field(metadata=_rng(0, 1))``: :func:`_build` refuses a value outside it, naming the key."""
    return {"min": lo, "max": hi}


def deep_merge(base: Any, over: Any) -> Any:
    """Mappings merge key by key; anything else (lists included) is replaced."""
    if isinstance(base, Mapping) and isinstance(over, Mapping):
        out = dict(base)
        for k, v in over.items():
            out[k] = deep_merge(base[k], v) if k in base else copy.deepcopy(v)
        return out
    return copy.deepcopy(over)


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """YAML 1.2 booleans: only true/false, so cue words like `no`, `on` and `yes` stay words.

    Parsed by libyaml where PyYAML has it (about 8× faster: an import reads a front matter per
    memory), else by the pure-Python parser; both give the same data and the same error marks.
    """


_Loader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:bool"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


MAX_NUMBER_CHARS = 40
"""A number literal longer than this is refused with its line: no option needs one, and Python will not even
convert an integer of 4,300 digits (a ValueError, not a YAML error, so it used to escape as a 500)."""


def _bounded_number(construct):
    def build(loader, node):
        if len(str(node.value)) > MAX_NUMBER_CHARS:
            raise yaml.constructor.ConstructorError(
                None, None, f"a number of {len(str(node.value))} characters; at most {MAX_NUMBER_CHARS} are accepted",
                node.start_mark)
        return construct(loader, node)
    return build


_Loader.add_constructor("tag:yaml.org,2002:int", _bounded_number(yaml.constructor.SafeConstructor.construct_yaml_int))
_Loader.add_constructor("tag:yaml.org,2002:float",
                        _bounded_number(yaml.constructor.SafeConstructor.construct_yaml_float))


def load_yaml_text(text: str) -> Any:
    return yaml.load(text, Loader=_Loader)  # noqa: S506 - _Loader is a SafeLoader


MAX_YAML_DEPTH = 32
"""Config nests five levels at most; deeper YAML is refused with its line before anything recursive walks it."""


def yaml_shape_error(text: str, name: str, *, aliases: bool = True) -> ConfigError | None:
    """What makes a YAML text that parses unsafe to walk, as a ConfigError naming its line; None when nothing does.

    Read from the parser's events, which never expand or construct anything, so this is linear in the text:

    - nesting deeper than :data:`MAX_YAML_DEPTH` (the merge and the type check recurse, and Python's stack
      is a thousand frames);
    - with ``aliases=False``, any alias (``*name``). An alias repeats a node without copying it, so nine
      levels of nine aliases ("billion laughs") are 300 bytes that load in microseconds and expand to 387
      million values in whatever walks them. A policy draft from the network may not use one; a config file
      the operator wrote may.
    """
    depth = 0
    for event in yaml.parse(text, Loader=_Loader):  # noqa: S506 - events only, nothing is constructed
        if isinstance(event, yaml.MappingStartEvent | yaml.SequenceStartEvent):
            depth += 1
            if depth > MAX_YAML_DEPTH:
                err = ConfigError(f"nests deeper than {MAX_YAML_DEPTH} levels; no option is nested that deep",
                                  file=name, line=event.start_mark.line + 1)
                return err
        elif isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
            depth -= 1
        elif isinstance(event, yaml.AliasEvent) and not aliases:
            return ConfigError(f"uses the YAML alias *{event.anchor}; a draft may not use aliases (write the value "
                               "out where it is needed)", file=name, line=event.start_mark.line + 1)
    return None


def _read_yaml(path: Path) -> dict:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError("file not found", file=str(path)) from None
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", file=str(path)) from None
    return parse_yaml_mapping(text, str(path))


def parse_yaml_mapping(text: str, name: str, *, aliases: bool = True) -> dict:
    """A config text as a mapping, or a ConfigError naming ``name`` and the line of a syntax error.

    ``aliases=False`` refuses YAML aliases (:func:`yaml_shape_error`): a text from the network."""
    try:
        shape = yaml_shape_error(text, name, aliases=aliases)
        if shape is not None:
            raise shape
        data = load_yaml_text(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        err = ConfigError(f"invalid YAML{where}: {problem}", file=name)
        err.line = mark.line + 1 if mark else None
        raise err from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"expected a mapping at the top level, got {type(data).__name__}", file=name)
    return data


def _origin_of(key: str, layers: list[tuple[str, dict]]) -> str:
    """The last file that set a dotted key (or its deepest present parent), so errors name their source."""
    parts = key.split(".")

    def has(data: Any, path: list[str]) -> bool:
        node = data
        for p in path:
            if isinstance(node, Mapping) and p in node:
                node = node[p]
            elif isinstance(node, list | tuple) and p.isdigit() and int(p) < len(node):
                node = node[int(p)]
            else:
                return False
        return True

    for depth in range(len(parts), 0, -1):
        found = [name for name, data in layers if has(data, parts[:depth])]
        if found:
            return found[-1]
    return layers[0][0] if layers else "<config>"


class _Invalid(Exception):
    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key
        self.message = message


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if tp is str:
        return "a string"
    if tp is bool:
        return "true or false"
    if tp is int:
        return "an integer"
    if tp is float:
        return "a number"
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if origin in (tuple, list):
        return "a list"
    if origin is dict:
        return "a mapping"
    if dataclasses.is_dataclass(tp):
        return "a mapping"
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) if a is not type(None) else "null" for a in typing.get_args(tp))
    return str(tp)


def _convert(tp: Any, value: Any, key: str, meta: Mapping | None = None) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return _convert(a, value, key, meta)
            except _Invalid as exc:
                errors.append(exc)
        raise _Invalid(key, f"expected {_type_name(tp)}, got {_show(value)}")
    if origin is Literal:
        if value not in args:
            raise _Invalid(key, f"expected {_type_name(tp)}, got {_show(value)}")
        return value
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, Mapping):
            raise _Invalid(key, f"expected a mapping, got {_show(value)}")
        return _build(tp, value, key)
    if origin is dict:
        if not isinstance(value, Mapping):
            raise _Invalid(key, f"expected a mapping, got {_show(value)}")
        kt, vt = args
        return {str(k): _convert(vt, v, f"{key}.{k}") for k, v in value.items()}
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise _Invalid(key, f"expected a list, got {_show(value)}")
        item_t = args[0]
        return tuple(_convert(item_t, v, f"{key}.{i}") for i, v in enumerate(value))
    if tp is bool:
        if not isinstance(value, bool):
            raise _Invalid(key, f"expected true or false, got {_show(value)}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _Invalid(key, f"expected an integer, got {_show(value)}")
        _check_range(value, key, meta)
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _Invalid(key, f"expected a number, got {_show(value)}")
        if not math.isfinite(value):
            raise _Invalid(key, f"expected a finite number, got {value}")
        _check_range(float(value), key, meta)
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise _Invalid(key, f"expected a string, got {_show(value)}")
        return value
    raise _Invalid(key, f"unsupported type {tp}")


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}" if not isinstance(value, dict | list) else text


def _check_range(value: float, key: str, meta: Mapping | None) -> None:
    if not meta:
        return
    lo, hi = meta.get("min"), meta.get("max")
    if lo is not None and value < lo or hi is not None and value > hi:
        raise _Invalid(key, f"expected a value between {lo} and {hi}, got {value}")


def _build(cls: type, data: Mapping, prefix: str) -> Any:
    hints = typing.get_type_hints(cls)
    names = {f.name: f for f in dataclasses.fields(cls) if f.name not in ("raw", "version")}
    for k in data:
        if k not in names:
            known = ", ".join(sorted(names))
            raise _Invalid(_join(prefix, str(k)), f"unknown key (known keys here: {known})")
    kwargs = {}
    for name, f in names.items():
        if name in data:
            kwargs[name] = _convert(hints[name], data[name], _join(prefix, name), f.metadata)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise _Invalid(_join(prefix, name), "is required")
    return cls(**kwargs)


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key
