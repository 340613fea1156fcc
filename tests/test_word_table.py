"""The dictionary's English senses encoded once (retrieval/word_table.py, design §23): a table read instead of
encoding, the same vectors the encoder gives, kept across processes, rebuilt when torn, left by a purge."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from ombre_brain.retrieval.second_opinion import get_second_opinion
from ombre_brain.retrieval.word_table import load_word_table, table_path

WORDS = ["grandmother", "brother", "beach", "guitar", "\ufffe\ufffe"]


@pytest.fixture
def enc(monkeypatch):
    enc = get_second_opinion()
    if enc is None:
        pytest.skip("the second opinion's wheel is not installed")
    monkeypatch.setattr(enc, "_table", enc._table)  # whatever table the process had comes back after the test
    return enc


def test_a_table_gives_the_vectors_the_encoder_gives_and_encodes_nothing_after(enc, tmp_path, monkeypatch):
    enc.clear_cache()
    encoded = enc.words(WORDS)  # encoded one call, the way a turn meets them
    enc.clear_cache()
    known = load_word_table(enc, WORDS, tmp_path)
    assert known == sum(v is not None for v in encoded.values())
    assert table_path(tmp_path, enc.model_id, sorted(WORDS)).exists()
    monkeypatch.setattr(enc, "_encode", lambda texts: pytest.fail(f"encoded {texts} with the table loaded"))
    assert enc.cached(WORDS) is not None
    got = enc.words(WORDS)
    for w in WORDS:
        if encoded[w] is None:
            assert got[w] is None
        else:
            assert float(got[w] @ encoded[w]) > 0.999
    enc.clear_cache()  # a purge: the table quotes no memory
    assert enc.cached(WORDS) is not None
    load_word_table(enc, WORDS, tmp_path)  # another process: read from the file, nothing encoded


def test_a_torn_table_is_encoded_again(enc, tmp_path, caplog):
    load_word_table(enc, WORDS, tmp_path)
    path = table_path(tmp_path, enc.model_id, sorted(WORDS))
    path.write_bytes(path.read_bytes()[:100])
    with caplog.at_level(logging.WARNING, logger="ombre_brain"):
        assert load_word_table(enc, WORDS, tmp_path) >= 4
    assert "unreadable" in caplog.text
    with np.load(path) as z:
        assert len(z["known"]) == len(z["vectors"]) >= 4


def test_a_table_that_cannot_be_written_lives_in_memory(enc, tmp_path, caplog):
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    with caplog.at_level(logging.WARNING, logger="ombre_brain"):
        assert load_word_table(enc, WORDS, blocked) >= 4
    assert "not kept" in caplog.text and enc.cached(WORDS) is not None


def test_the_table_holds_english_senses_and_everyday_chinese_words():
    from ombre_brain.retrieval.dictionary import Bridge
    from ombre_brain.retrieval.word_table import table_words

    bridge = Bridge.build([{"simplified": "外婆", "definitions": ["maternal grandmother"]},
                           {"simplified": "沙滩", "definitions": ["beach"]},
                           {"simplified": "饕餮纹", "definitions": ["taotie pattern"]}])
    words = table_words(bridge)
    assert {"grandmother", "beach", "外婆", "沙滩"} <= set(words)
    assert "饕餮纹" not in words  # a rare word is encoded when a memory says it
    assert words == sorted(words)
