"""The reader's parts apart from a turn (design §25): trees as arrays, answer types, its verdict beside the routes',
the changed-fact decision, and the writer's name cue."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from ombre_brain.config import load_config
from ombre_brain.profile.supersede import Member, decide, feature_names, pair_rows
from ombre_brain.recall_types import Admission
from ombre_brain.retrieval.admission import read_admission, unread_admission
from ombre_brain.retrieval.answer_types import answer_type_features, asked_types, held_types
from ombre_brain.retrieval.trees import Forest, export
from ombre_brain.writing.signals import names_someone


def test_exported_trees_score_as_scikit_learn_does_missing_values_included():
    from sklearn.ensemble import HistGradientBoostingClassifier

    rng = np.random.default_rng(7)
    x = rng.normal(size=(400, 5))
    y = (x[:, 0] + 0.5 * x[:, 1] * x[:, 2] > 0).astype(int)
    x[rng.random(x.shape) < 0.1] = np.nan
    est = HistGradientBoostingClassifier(max_iter=40, random_state=0).fit(x, y)
    forest = Forest(export(est))
    assert np.allclose(forest.logit(x), est.decision_function(x), atol=1e-9)
    again = Forest(forest.arrays())  # what ships as .npz reads back the same
    assert np.allclose(again.logit(x[:7]), est.decision_function(x[:7]), atol=1e-9)


@pytest.mark.parametrize(("question", "asked"), [
    ("小林的生日是哪天", {"date"}), ("What city does Mia work in?", set()), ("Where does Mia study?", {"place"}),
    ("我妹妹在哪上学", {"place"}), ("What does Ethan do for work?", {"job"}), ("how old is Mothball", {"number"}),
    ("为什么她没来", {"reason"}), ("我跟小林吵架那事你还记得吗", set()),
])
def test_what_a_question_asks_for(question, asked):
    assert asked_types(question) == frozenset(asked)


@pytest.mark.parametrize(("memory", "held"), [
    ("下个月十五号考教资", {"date"}), ("My sister Mia just started nursing school in Glasgow", {"place", "name"}),
    ("今天被主管Linda骂惨了", {"date", "name"}), ("because the boiler broke", {"reason"}),
])
def test_what_a_memory_could_answer_with(memory, held):
    assert held <= held_types(memory)


def test_the_answer_type_features_say_when_the_asked_type_is_missing():
    ask_any, all_held, missing, *flags = answer_type_features("小林的生日是哪天", "同事小林是做前端的，人挺好")
    assert (ask_any, all_held, missing) == (1.0, 0.0, 1.0) and flags[0] == 1.0  # a date asked, none held
    ask_any, all_held, missing, *_ = answer_type_features("我考试是哪天来着", "下个月十五号考教资")
    assert (ask_any, all_held, missing) == (1.0, 1.0, 0.0)


ROUTED = Admission(True, "term_in_title", ("婚礼",), 0.8, 0.5)   # half of what the message asks is written in it
WHOLE = Admission(True, "term_in_title", ("海边",), 0.8, 1.0)    # all of it ("海边" and 海边日出)
REFUSED = Admission(False, "weak_term_coverage", (), 0.5, 0.2)
CANDIDATE = SimpleNamespace()


@pytest.mark.parametrize(("p", "routed", "lookup", "reason", "admitted"), [
    (0.91, REFUSED, True, "reader_answers", True),          # at the lookup's bar
    (0.65, REFUSED, False, "reader_below_threshold", False),  # a statement is held to the stricter bar
    (0.45, ROUTED, True, "reader_seconds", True),            # the words admit it and the reader does not object
    (0.12, ROUTED, True, "reader_vetoes", False),            # the words admit it; the reader says it is a near miss
    (0.45, REFUSED, True, "reader_below_threshold", False),
    (0.12, WHOLE, True, "reader_seconds", True),             # every asked word in its title: no veto
])
def test_the_readers_verdict_beside_the_routes(p, routed, lookup, reason, admitted):
    q = SimpleNamespace(lookup=lookup)
    got = read_admission(CANDIDATE, q, p, (0.6, 0.7, 0.3), routed)
    assert (got.reason, got.admitted, got.evidence, got.routed) == (reason, admitted, p, routed.reason)
    assert got.threshold == (0.6 if lookup else 0.7)


def test_the_readers_line_on_the_debug_page_says_what_it_read():
    q = SimpleNamespace(lookup=True)
    answers = read_admission(CANDIDATE, q, 0.91, (0.6, 0.7, 0.3), REFUSED)
    assert answers.summary("我家狗叫啥") == "reader 0.91 ≥ 0.60: answers `我家狗叫啥`"
    vetoed = read_admission(CANDIDATE, q, 0.12, (0.6, 0.7, 0.3), ROUTED)
    assert vetoed.summary("表哥什么时候结婚").startswith("reader 0.12 < 0.60: does not answer `表哥什么时候结婚`; its "
                                                   "words alone (term_in_title) would have admitted it")
    assert answers.to_dict()["routed"] == "weak_term_coverage"
    other = read_admission(CANDIDATE, q, 0.91, (0.6, 0.7, 0.3), ROUTED, other_person=True)
    assert (other.admitted, other.reason) == (False, "reader_other_person")  # whatever the reader says
    assert other.summary("表哥什么时候结婚") == "reader 0.91 ≥ 0.60: `表哥什么时候结婚` asks about someone else than " \
                                          "the person this memory is about"


def _member(i: str) -> Member:
    return Member(id=i, at="2026-01-01T00:00:00+00:00", text=i, frame=None, family="fact", stable=True)


def test_each_older_line_is_superseded_by_the_newer_line_it_scores_highest_with():
    members = [_member("old_home"), _member("new_home"), _member("newest_home"), _member("pet")]
    pairs = [(0, 1), (0, 2), (3, 2)]
    got = decide(members, pairs, np.array([0.7, 0.9, 0.4]), threshold=0.65)
    assert got == {"old_home": ("newest_home", "learned", 0.9)}  # the pet line stays: 0.4 is below the bar


@pytest.mark.parametrize(("text", "names"), [
    ("跟蔚蔚吵架了，她说我的猫砂带得满屋都是", True), ("救命，今天被主管Linda骂惨了", True),
    ("Had a fight with Priya", True),
    ("潮州卤鹅我能一个人吃半只", False), ("行，吃药去了，明天还得早起", False), ("I love it. Netflix is great", False),
    ("See you on Monday", False),
])
def test_the_writer_sees_when_a_message_names_someone(text, names):
    assert names_someone(text) is names


def test_lines_of_different_families_make_no_pair_and_an_empty_table():
    """A young store's profile: an allergy and a lesson, nothing to weigh against each other (no crash)."""
    members = [_member("allergy"), Member(id="lesson", at="2026-02-01T00:00:00+00:00", text="lesson", frame=None,
                                          family="lesson", stable=True)]
    pairs, x = pair_rows(members, np.eye(2, 4, dtype=np.float32), np.eye(2, 4, dtype=np.float32), {}, ("job",),
                         ("alive",))
    assert pairs == [] and x.shape == (0, len(feature_names(("job",))))


@pytest.mark.parametrize(("routed", "pinned", "whole_only", "reason", "admitted"), [
    (ROUTED, False, True, "reader_unread", False),     # "千帆" in a title, past the reader: refused
    (WHOLE, False, True, "term_in_title", True),       # every asked word in its title: the words say it whole
    (ROUTED, True, True, "term_in_title", True),       # the user's pinned Core Memory: its routes decide
    (ROUTED, False, False, "term_in_title", True),     # retrieval.reader.unread_whole off: as before the reader
    (REFUSED, False, True, "weak_term_coverage", False),
])
def test_a_candidate_the_reader_did_not_read_is_admitted_only_on_words_that_say_it_whole(routed, pinned, whole_only,
                                                                                         reason, admitted):
    cfg = load_config({"retrieval": {"reader": {"unread_whole": whole_only}}})
    got = unread_admission(SimpleNamespace(bucket=SimpleNamespace(pinned=pinned)), routed, cfg)
    assert (got.reason, got.admitted) == (reason, admitted)
    assert got.routed == (routed.reason if reason == "reader_unread" else routed.routed)
