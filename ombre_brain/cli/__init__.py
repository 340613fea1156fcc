"""The `ombre-brain` command: a thin skin over the library.

Command names match Brain methods and flags match keyword arguments. The parser is in
:mod:`.parser`; the handlers, grouped by wing, parse nothing and decide nothing: each opens
what it needs, calls the library and prints. Library errors become one-line CLI errors here
and nowhere else, with exit status 2 (1 is reserved for a failed check such as a replay miss).
"""

from __future__ import annotations

import logging
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from ..demo.seed import seed_persona  # noqa: E402
from ..errors import OmbreError  # noqa: E402
from .parser import build_parser  # noqa: E402

__all__ = ["build_parser", "main", "seed_persona"]


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s")
    try:
        return int(args.func(args) or 0)
    except OmbreError as exc:
        print(f"ombre-brain: error: {exc.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
