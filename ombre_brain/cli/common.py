"""What every handler shares: opening a Brain for ``--data``/``--config``, printing JSON, progress bars."""

from __future__ import annotations

import json
import sys

from ..brain import Brain


def open_brain(args) -> Brain:
    return Brain.open(args.data, args.config)


def print_json(obj) -> None:
    print(json.dumps(obj, ensure_ascii=False, indent=2))


def progress_bar(total: int | None, desc: str, unit: str = "row"):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, disable=None, leave=False)
