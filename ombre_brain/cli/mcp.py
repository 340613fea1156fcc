"""`mcp`: Ombre-Brain's tools over stdio, for Claude Desktop and any MCP client (design §15).

The same tools are served over streamable HTTP at ``/mcp`` by ``ombre-brain serve``. Over stdio,
stdout carries the protocol, so nothing else may print there: logs go to stderr.
"""

from __future__ import annotations

import os

from ..buckets import validate_space
from ..mcp.access import stdio_access
from ..mcp.server import build_server
from .common import open_brain


def cmd_mcp(args) -> int:
    if args.space is not None:
        validate_space(args.space)
    with open_brain(args) as brain:
        access = stdio_access(brain.config, os.environ)  # fails here, once, when a token is needed and missing
        build_server(brain, space=args.space, stdio=access).run_stdio()
    return 0
