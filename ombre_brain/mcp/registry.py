"""The MCP tool registry: each tool is one entry, made by the ``@tool`` decorator on its implementation.

A tool's implementation takes the :class:`~.access.Call` first and its parameters after it, typed
with ``Annotated[..., Field(description=...)]``: that signature (without ``call``) is the JSON
schema clients see, over stdio and ``/mcp`` alike. ``@tool`` records it with the words clients
read, its annotations (read-only, destructive) and the Ombre-Brain parameters it accepts without
advertising them. :mod:`.server` registers every entry of :data:`TOOLS` on the SDK's server, in
order; a new tool is a decorated function in a module :mod:`.tools` imports.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Annotated, Any

from mcp_types import ToolAnnotations
from pydantic import BeforeValidator, Field

from ..errors import ValidationError
from ..fields import BOOLEAN_FORMS, parse_bool
from .format import Reply

__all__ = ["TOOLS", "Bool", "Flag", "Int", "Number", "Space", "Tags", "ToolRegistry", "ToolSpec", "tag_list",
           "tool"]


def _strict_bool(value: Any) -> bool:
    """Only the documented forms of a flag (true/false, 1/0, "true"/"false"): the SDK's own bool would take
    "yes", "on" or "y" for true, and a memory would be pinned on a guess."""
    try:
        return parse_bool(value, "")
    except ValidationError:
        raise ValueError(f"expected true or false, got {value!r:.40} (a flag is {BOOLEAN_FORMS})") from None


def _not_a_flag(value: Any) -> Any:
    """A number parameter takes a number: JSON true would pass as 1 (the SDK's int takes a bool), so
    ``window_hours: true`` would dream over one hour."""
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {str(value).lower()} (true and false are flags, not numbers)")
    return value


def _flag_number(value: Any) -> Any:
    """A -1/0/1 flag (Ombre-Brain's form) also takes true and false, as 1 and 0: what they say."""
    return int(value) if isinstance(value, bool) else value


Space = Annotated[str | None, Field(description="memory space; default: X-Ombre-Space, else the server's")]
Int = Annotated[int, BeforeValidator(_not_a_flag)]
"""An integer parameter: true and false are refused, naming it (never read as 1 and 0)."""
Number = Annotated[float, BeforeValidator(_not_a_flag)]
"""A number parameter: true and false are refused, naming it."""
Flag = Annotated[int, BeforeValidator(_flag_number),
                 Field(description="-1 no change, 0 off (or false), 1 on (or true)")]
Tags = Annotated[str | list[str], Field(description="comma-separated, or a list")]
_TAG_SPLIT = re.compile(r"[,，、;；]")


def tag_list(value: Any, field: str) -> list[str]:
    """Ombre-Brain's comma-separated tags (or a list of strings) as a list."""
    if value in (None, ""):
        return []
    if isinstance(value, str):
        return [t.strip() for t in _TAG_SPLIT.split(value) if t.strip()]
    if isinstance(value, list | tuple) and all(isinstance(t, str) for t in value):
        return [t.strip() for t in value if t.strip()]
    raise ValidationError("expected comma-separated text or a list of strings", field=field)


Bool = Annotated[bool, BeforeValidator(_strict_bool)]
"""A boolean parameter: true/false, 1/0 or "true"/"false"; anything else is a tool error naming it."""

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
DESTRUCTIVE = ToolAnnotations(destructive_hint=True, open_world_hint=False)


@dataclasses.dataclass(frozen=True)
class ToolSpec:
    """One MCP tool: its name, the words clients read, its implementation and what it accepts unadvertised."""

    name: str
    impl: Callable[..., Reply]
    description: str
    annotations: ToolAnnotations | None = None
    hidden: frozenset[str] = frozenset()

    @property
    def parameters(self) -> tuple[inspect.Parameter, ...]:
        """The schema's parameters: the implementation's, after ``call``."""
        params = list(inspect.signature(self.impl, eval_str=True).parameters.values())
        if not params or params[0].name != "call":
            raise TypeError(f"tool {self.name}: the implementation must take the Call first")
        return tuple(params[1:])

    @property
    def declared(self) -> frozenset[str]:
        return frozenset(p.name for p in self.parameters)


class ToolRegistry:
    """The tools in the order clients list them."""

    def __init__(self) -> None:
        self._tools: tuple[ToolSpec, ...] = ()
        self._lock = threading.Lock()

    def register(self, spec: ToolSpec) -> ToolSpec:
        spec.parameters  # noqa: B018  (checks the signature now, not when a client first connects)
        with self._lock:
            if any(t.name == spec.name for t in self._tools):
                raise ValueError(f"an MCP tool named {spec.name!r} is already registered")
            self._tools = (*self._tools, spec)
        return spec

    def unregister(self, name: str) -> None:
        with self._lock:
            self._tools = tuple(t for t in self._tools if t.name != name)

    @contextlib.contextmanager
    def added(self, spec: ToolSpec) -> Iterator[ToolSpec]:
        """A tool registered for the duration of a ``with`` block (tests)."""
        self.register(spec)
        try:
            yield spec
        finally:
            self.unregister(spec.name)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self._tools)

    def __iter__(self) -> Iterator[ToolSpec]:
        return iter(self._tools)

    def __getitem__(self, name: str) -> ToolSpec:
        for t in self._tools:
            if t.name == name:
                return t
        raise KeyError(name)


TOOLS = ToolRegistry()


def tool(description: str, *, read_only: bool = False, destructive: bool = False,
         hidden: Iterable[str] = ()) -> Callable[[Callable[..., Reply]], Callable[..., Reply]]:
    """Register the decorated implementation as the MCP tool of its name; the function is returned unchanged."""

    def wrap(impl: Callable[..., Reply]) -> Callable[..., Reply]:
        annotations = READ_ONLY if read_only else DESTRUCTIVE if destructive else None
        TOOLS.register(ToolSpec(impl.__name__, impl, inspect.cleandoc(description), annotations, frozenset(hidden)))
        return impl

    return wrap
