"""Word alignment (retrieval/alignment.py) and term weights (retrieval/terms.py): pure, on hand-made vectors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ombre_brain.retrieval.alignment import KEY_SHARE, NONE, align, memory_words
from ombre_brain.retrieval.terms import MIN_WEIGHT, normalize_term, specificity, term_weight


def unit(*xs: float) -> np.ndarray:
    v = np.asarray(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


# Three directions: a word and its translation share one; a related word sits between.
DOG, CAT, FOOD = unit(1, 0, 0), unit(0, 1, 0), unit(0, 0, 1)
VECTORS = {"dog": DOG, "狗": unit(0.95, 0.1, 0), "cat": CAT, "猫": unit(0.1, 0.95, 0), "food": FOOD,
           "吃": unit(0, 0.2, 0.9), "鹦鹉": None, "搁": None}


def test_a_written_term_scores_one_and_a_translation_its_cosine():
    got = align([["dog"]], ("dog", "吃"), VECTORS)
    assert got.aligned == 1.0 and got.pairs == (("dog", "dog", 1.0),)
    got = align([["dog"]], ("狗", "吃"), VECTORS)
    assert got.aligned == pytest.approx(float(DOG @ VECTORS["狗"]), abs=1e-4)
    assert got.pairs[0][:2] == ("dog", "狗")


def test_the_weakest_key_term_is_what_a_near_miss_lacks():
    """'my cat's food' against a memory about a dog's food: food is said, the cat is not."""
    answer = align([["cat"], ["food"]], ("猫", "吃"), VECTORS)
    near_miss = align([["cat"], ["food"]], ("狗", "吃"), VECTORS)
    assert near_miss.aligned_min < 0.3 < 0.9 < answer.aligned_min
    assert near_miss.aligned < answer.aligned


def test_words_the_encoder_does_not_know_match_only_where_written():
    """Unknown words all embed alike (鹦鹉 and 搁 score 0.95 under USE): their cosine means nothing."""
    assert align([["鹦鹉"]], ("搁", "狗"), VECTORS).aligned == 0.0
    assert align([["鹦鹉"]], ("鹦鹉", "狗"), VECTORS).aligned == 1.0
    assert align([["dog"]], ("搁",), VECTORS).aligned == 0.0


def test_a_shorter_cut_counts_for_its_share_of_the_word():
    """朋友 inside 男朋友 or 最好的朋友 does not say what a girlfriend is."""
    got = align([["女朋友", "朋友"]], ("朋友",), {})
    assert got.aligned == pytest.approx(specificity("朋友") / specificity("女朋友"), abs=1e-4)
    assert got.aligned < 0.6
    assert align([["女朋友", "朋友"]], ("女朋友",), {}).aligned == 1.0


def test_key_terms_weigh_at_least_a_share_of_the_heaviest():
    """An everyday word nothing aligns with ("name") does not make a specific one's match weak."""
    heavy, light = "hamster", "name"
    assert specificity(light) < KEY_SHARE * specificity(heavy)
    got = align([[heavy], [light]], (heavy,), {heavy: CAT, light: FOOD})
    assert got.aligned_min == 1.0 and got.aligned < 1.0


def test_stop_words_and_clitics_drop_out():
    assert align([["what's"]], ("dog",), VECTORS, stop=frozenset({"what"})) is NONE
    assert align([["dog's"]], ("dog",), VECTORS).aligned == 1.0


def test_nothing_asked_or_no_words_aligns_to_nothing():
    assert align([], ("dog",), VECTORS) is NONE
    assert align([["dog"]], (), VECTORS).aligned == 0.0


@given(st.lists(st.sampled_from(sorted(VECTORS)), min_size=1, max_size=4),
       st.lists(st.sampled_from(sorted(VECTORS)), max_size=5))
def test_features_stay_between_zero_and_one_and_min_never_exceeds_mean_of_keys(asked, words):
    got = align([[a] for a in asked], tuple(sorted(set(words))), VECTORS)
    assert 0.0 <= got.aligned_min <= 1.0 and 0.0 <= got.aligned <= 1.0
    assert got.aligned_min <= max(s for _, _, s in got.pairs) + 1e-4  # pairs are rounded for display


def test_memory_words_are_normalised_distinct_and_without_stop_words():
    words = memory_words(["Rowan's dog", "the dog"], lambda t: t.split(), frozenset({"the"}))
    assert words == ("dog", "rowan")


# ---------------------------------------------------------------- terms


def test_normalize_term_cuts_english_clitics_only():
    assert normalize_term("Cat's") == "cat" and normalize_term("dogs'") == "dog"
    assert normalize_term("what’s") == "what" and normalize_term("don't") == "don't"
    assert normalize_term("海边") == "海边" and normalize_term("'s") == "'s"


def test_specificity_puts_everyday_words_low_in_both_languages():
    pairs = [("名字", "鹦鹉"), ("喜欢", "过敏"), ("name", "hamster"), ("work", "dentist"), ("good", "parrot")]
    for common, rare in pairs:
        assert specificity(common) < specificity(rare), (common, rare)
    assert specificity("the") == MIN_WEIGHT
    assert abs(specificity("名字") - specificity("name")) < 1.0  # one scale across scripts


def test_coverage_weighs_chinese_by_specificity_and_other_words_alike():
    assert term_weight("鹦鹉") == specificity("鹦鹉") > term_weight("名字") == specificity("名字")
    assert term_weight("hamster") == term_weight("name") == 1.0
