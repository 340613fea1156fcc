"""Where the server listens from and what it lets callers do (``server:`` in the config): bearer tokens, the
default space, the body limit and the policy playground. Declared here, once each, typed; the package builds
them into ``Config``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from .parse import _rng


@dataclass(frozen=True)
class TokenRule:
    token_env: str
    spaces: tuple[str, ...] | Literal["*"] = "*"
    side: Literal["companion", "person"] | None = None  # letters: the one side this token may act for (design §19)


@dataclass(frozen=True)
class PlaygroundConfig:
    """The policy playground (``/debug/playground``, docs/design.md §22): what it may read and where it may write.

    ``save_dir`` null keeps saving off: a draft is only downloaded. Set, a token for every space (``*``) may save a
    draft there as a persona overlay. ``scenarios`` and ``sets`` name folders of scenario files and labelled sets
    (``eval inject`` / ``eval conversation``) a replay may run; null offers none.
    """

    save_dir: str | None = None
    scenarios: str | None = None
    sets: str | None = None
    max_turns: int = field(default=500, metadata=_rng(1, 100000))  # recorded turns one replay may run


@dataclass(frozen=True)
class ServerConfig:
    tokens: tuple[TokenRule, ...] = ()
    default_space: str = "haven:user"
    max_body_bytes: int = field(default=1048576, metadata=_rng(1024, 1 << 30))
    playground: PlaygroundConfig = PlaygroundConfig()
