"""The dictionary's English senses, encoded once by the second opinion and kept in the data directory (design §23).

Admission compares words by their English senses (:mod:`.dict_evidence`): "grandma" against 外婆's "grandmother",
sister against 哥哥's "brother". Encoded when first met, those senses were most of the words a turn encoded (471 of
684 new words over 200 turns of ``bench`` at 10k memories), and a turn that met many of them paid 10-30 ms for it.
The CC-CEDICT bridge names about 33,000 English head words, and about 23,000 of its Chinese headwords are everyday
words in jieba's dictionary (counted 100 times or more), which memories and messages are cut into: most of the
Chinese words alignment met new (123 of 179 in the same turns). Encoded in batches they take some seconds once, and
are kept as float16 rows in ``words-<model>-<digest>.npz`` in the user's cache directory (``$OMBRE_BRAIN_CACHE``,
else ``$XDG_CACHE_HOME/ombre-brain``, else ``~/.cache/ombre-brain``): the digest is of the model and the word list,
so another dictionary or encoder builds its own, and every data directory of the user shares one. The server and
``bench`` load it before the first turn (:meth:`Admitter.prepare`); then a turn encodes only the words memories and
messages say.

The table holds no memory text, so a purge leaves it. Pure apart from :func:`load_word_table`'s file reads and
writes.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import zipfile
from collections.abc import Sequence
from pathlib import Path
from time import perf_counter

import numpy as np

from .lexical import everyday_words

log = logging.getLogger("ombre_brain")

__all__ = ["cache_dir", "load_word_table", "table_path", "table_words"]

EVERYDAY = 100  # jieba's count of a Chinese headword at which it is in the table


def table_words(bridge) -> list[str]:
    """The words the table holds: the bridge's English senses and its everyday Chinese headwords."""
    return sorted(bridge.senses_in_english() | set(everyday_words(bridge.zh_words, EVERYDAY)))


def cache_dir() -> Path:
    """Where derived tables that hold no user data are kept, shared by every data directory of the user."""
    if os.environ.get("OMBRE_BRAIN_CACHE"):
        return Path(os.environ["OMBRE_BRAIN_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ombre-brain"


def table_path(directory: Path, model_id: str, words: Sequence[str]) -> Path:
    digest = hashlib.sha256("\n".join([model_id, *words]).encode()).hexdigest()[:16]
    return directory / f"words-{re.sub(r'[^A-Za-z0-9_.-]+', '_', model_id)}-{digest}.npz"


def load_word_table(encoder, words: Sequence[str], directory: Path | None = None) -> int:
    """Give ``encoder`` (a :class:`~.second_opinion.SecondOpinion`) a fixed table of ``words``: read from
    ``directory`` (:func:`cache_dir`), else encoded now and kept there (in memory only where it cannot be written).
    Returns how many words the encoder's vocabulary knows."""
    words = sorted(set(words))
    path = table_path(directory or cache_dir(), encoder.model_id, words)
    known = vectors = None
    if path.exists():
        try:
            with np.load(path) as z:
                known, vectors = [str(w) for w in z["known"]], z["vectors"]
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:  # torn: encode again, write anew
            log.warning("word table %s unreadable (%s): encoding its words again", path, e)
            known = vectors = None
    if known is None or vectors is None or len(known) != len(vectors):
        t0 = perf_counter()
        known, vectors = encoder.encode_words(words)
        log.info("word table: %d words encoded in %.1f s (kept in %s)", len(words),
                 perf_counter() - t0, path)
        try:  # written whole under a name of this process's own, then renamed: a reader never sees half of it
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp.npz")
            np.savez(tmp, known=np.array(known), vectors=vectors)
            tmp.replace(path)
        except OSError as e:
            log.warning("word table not kept (%s): it lives in memory until the process ends", e)
    encoder.use_table(words, known, vectors)
    return len(known)
