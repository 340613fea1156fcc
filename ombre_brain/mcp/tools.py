"""The MCP tools Ombre Brain serves, in the order ``tools/list`` gives them: Ombre-Brain 2.16.9's sixteen.

Importing a module registers the tools its ``@tool`` functions define (:mod:`.registry`), in the
order of the lines below; a new tool module is one more line.
"""

# ruff: noqa: I001, F401  (the order of these imports is the order clients list the tools)
from __future__ import annotations

from . import recall  # breath, breath_search
from . import advanced  # breath_advanced
from . import write  # hold, grow
from . import source  # source_read
from . import trace  # trace
from . import status  # dream, pulse
from . import plans  # plan
from . import anchors  # anchor, release
from . import letters  # letter_write, letter_read, letter_lock_update
from . import selfmodel  # I

__all__: list[str] = []
