"""The shared text helpers: named CJK ranges, folding, and digests that must never change."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ombre_brain.buckets import Moment
from ombre_brain.facts.model import source_digest as fact_source_digest
from ombre_brain.forget.purge import source_digest
from ombre_brain.text import (
    CJK_RE,
    digest,
    fold,
    fold_elongations,
    has_cjk,
    has_wide,
    is_cjk_text,
    normalize,
)
from ombre_brain.timeutil import coerce_time, parse_iso, parse_time, relative_time


def test_stored_digests_stay_byte_identical():
    """Suppression digests and Chroma's text hashes are stored: a changed digest would un-forget a source."""
    assert source_digest("haven:xiaoyu", "exchange:abc123") == (
        "bb6e657e5b3d4138212b668d65c84bdb6b913043877ec30486c381e548fe8e51")
    assert source_digest("haven:小雨", "diary/2026-11-30.md#L3") == (
        "e39eebaea17e4382d21fbedb254d8f8b9c3325a96fe3082fe834934a5607699a")
    assert fact_source_digest("haven:xiaoyu", "app", "evt-1", 2, "frag") == (
        "9f4b12740e57f0e846e7604f4c2e0d18f71659f5a1e72a7721a40f42b508e706")
    assert fact_source_digest("haven:小雨", "日记", 'e"1', None, None) == (
        "94562f674cdff9a90ca0358f9c442159c5cbc07f59616d828207ea8cfcd71397")
    assert Moment("", "", 0, "", "我们在海边捡贝壳", False).text_hash == "536e39ad33e52bff"
    assert digest(["haven:xiaoyu", "exchange:abc123"]) == source_digest("haven:xiaoyu", "exchange:abc123")


def test_the_named_ranges_keep_their_meanings():
    assert has_cjk("海") and has_cjk("かな") and has_cjk("한글") and has_cjk("𠀀")  # ext B ideograph
    assert not has_cjk("，") and has_wide("，") and has_wide("ＡＢ")  # punctuation: wide, not a script
    assert is_cjk_text("我们去海边 ok") and not is_cjk_text("we went to the sea 海")
    assert is_cjk_text("海边 a b") and not is_cjk_text("海边 a b c")  # as many words as CJK characters: CJK


@given(st.text(alphabet=st.sampled_from("ab Z1,.-_\n海边ok日の한𠀀é"), max_size=40))
def test_a_texts_script_is_cjk_characters_against_latin_words(text):
    """The counting by runs and the early answer agree with the definition: CJK characters against the words of
    letters holding none of them."""
    cjk = len(CJK_RE.findall(text))
    words = [w for w in re.findall(r"[^\W\d_]+", text) if not CJK_RE.search(w)]
    assert is_cjk_text(text) == (cjk > 0 and cjk >= len(words))


def test_folding():
    assert normalize("ＡＢＣ１２ Don’t") == "abc12 don't"
    assert fold("  Good \n  Night ") == "good night"
    assert fold_elongations("goooood night") == "god night" and fold_elongations("hahaha") == "ha"


def test_one_time_parser():
    assert parse_time("2026-11-30T20:00:00Z", "now").utcoffset().total_seconds() == 0
    with pytest.raises(Exception, match="no UTC offset"):
        parse_time("2026-11-30T20:00:00", "now")
    assert parse_iso("garbage") is None and parse_iso("") is None
    from datetime import date, timezone
    assert coerce_time(date(2026, 1, 2), timezone.utc).isoformat() == "2026-01-02T00:00:00+00:00"
    start = parse_time("2026-11-30T20:00:00+08:00", "t")
    assert relative_time("-72h", start).isoformat() == "2026-11-27T20:00:00+08:00"
