"""What keeps a turn near its floor (docs/design.md §23), tested for what it must not change: the dictionary's
words read in one batch are the words a reading reads; a decoded bucket is reused and forgotten on a purge;
preparing loads every table before a turn; `bench --check` holds a run against a recorded one."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys

import pytest

from ombre_brain import cli
from ombre_brain.buckets import _decoded, _evidence_text, _sections_of, bucket_from_json, main_text_of
from ombre_brain.errors import ValidationError
from ombre_brain.evaluate.bench_check import check_run, read_recorded
from ombre_brain.retrieval.dict_evidence import dict_evidence
from ombre_brain.retrieval.dictionary import Bridge
from ombre_brain.retrieval.features import _is_cjk

ENTRIES = [
    {"simplified": "海边", "definitions": ["coast", "seaside", "seashore", "beach"]},
    {"simplified": "沙滩", "definitions": ["beach", "sandbank"]},
    {"simplified": "哥哥", "definitions": ["older brother"]},
    {"simplified": "姐姐", "definitions": ["older sister"]},
    {"simplified": "外婆", "definitions": ["maternal grandmother"]},
    {"simplified": "奶奶", "definitions": ["paternal grandmother", "granny"]},
    {"simplified": "小狗", "definitions": ["puppy"]},
    {"simplified": "吉他", "definitions": ["guitar"]},
]
COSINES = {frozenset(p): c for p, c in [(("sister", "brother"), 0.75), (("grandma", "grandmother"), 0.91),
                                        (("dog", "puppy"), 0.83), (("song", "guitar"), 0.6)]}


def _reads(groups, words, bridge, conflicts=True):
    """The words a real reading asks cosines of, and those a dry run (every cosine unknown) names."""
    read: set[str] = set()

    def cos(a, b):
        read.update((a, b))
        return COSINES.get(frozenset((a, b)), 0.3)

    named: set[str] = set()
    dict_evidence(groups, words, bridge, held=lambda t: False, cos=lambda a, b: named.update((a, b)),
                  conflicts=conflicts)
    real = dict_evidence(groups, words, bridge, held=lambda t: False, cos=cos, conflicts=conflicts)
    return read, named, real


@pytest.mark.parametrize("terms,words", [
    (["sister", "beach"], ["哥哥", "海边", "日出"]),
    (["grandma"], ["外婆", "奶奶", "吉他"]),
    (["dog", "song"], ["小狗", "吉他", "姐姐"]),
    (["海边"], ["沙滩", "beach"]),
])
def test_the_dry_run_names_every_word_a_reading_reads(terms, words):
    bridge = Bridge.build(ENTRIES)
    for groups in itertools.permutations([((t,), 5.0 - i) for i, t in enumerate(terms)]):
        for conflicts in (True, False):
            read, named, _ = _reads(list(groups), words, bridge, conflicts)
            assert read <= named, (groups, read - named)


def test_a_memo_of_pairs_reads_as_the_pairs_do():
    """The dictionary's answer per pair of words, kept across memories and turns, gives each memory the reading it
    gets without one."""
    bridge = Bridge.build(ENTRIES)
    memories = [["哥哥", "海边", "日出"], ["外婆", "奶奶", "吉他"], ["小狗", "吉他", "姐姐"], ["沙滩", "beach"],
                ["哥哥", "沙滩"], ["姐姐", "小狗", "海边"]]
    asked = [[(("sister",), 3.0), (("beach",), 2.0)], [(("grandma",), 3.0)], [(("dog",), 2.0), (("song",), 2.0)],
             [(("海边",), 3.0)], [(("brother",), 2.0), (("puppy",), 1.0)]]

    def cos(a, b):
        return COSINES.get(frozenset((a, b)), 0.3)

    memo: dict = {}
    for _ in range(2):  # the second round reads every pair from the memo
        for groups in asked:
            for words in memories:
                for conflicts in (True, False):
                    alone = dict_evidence(groups, words, bridge, held=lambda t: False, cos=cos, conflicts=conflicts)
                    kept = dict_evidence(groups, words, bridge, held=lambda t: False, cos=cos, conflicts=conflicts,
                                         memo=memo)
                    assert kept == alone, (groups, words, conflicts)
    assert any(v for k, v in memo.items() if k[0] == "same") and any(v for k, v in memo.items() if k[0] == "kind")


def test_a_purge_empties_the_dictionarys_pairs(brain):
    bid = brain.write("u", title="和外婆去海边", body="周末和外婆去海边捡贝壳，看了日出。")
    brain.turn("u", "s", "did my grandma go to the beach?", dry_run=True)
    assert brain.admitter._pairs.get(("same", "grandma", "外婆")) is True
    brain.purge("u", bucket_ids=[bid])
    assert brain.admitter._pairs == {}  # the pairs quote memory words


def _admissions(turn) -> dict[str, tuple]:
    return {c.bucket.id: (c.admission.admitted, c.admission.reason, c.admission.dictionary,
                          round(c.admission.evidence or 0.0, 4)) for c in turn.debug["retrieval"].candidates}


def test_words_read_in_one_batch_give_the_same_admission(brain):
    """Through real turns: reading the dictionary's words in one batch changes which call encodes a word, never
    what admission decides (each word encoded alone, as before, gives the same reasons, pairs and evidence)."""
    for title, body in [("和外婆去海边", "周末和外婆去海边捡贝壳，看了日出。"),
                        ("哥哥的新工作", "哥哥在上海找到了新工作。"),
                        ("小狗豆豆", "我家小狗豆豆三岁了，最喜欢接飞盘。"),
                        ("学吉他", "最近在学吉他，手指很疼。")]:
        brain.write("u", title=title, body=body)
    enc = brain.store.second
    questions = ["did my sister go to the beach with grandma?", "how old is my dog?", "what song can I play?"]
    batched = {q: _admissions(brain.turn("u", "s", q, dry_run=True)) for q in questions}
    calls: list[int] = []
    real_words = enc.words

    def one_by_one(words):
        calls.append(len(words))
        out = {}
        for w in words:
            out.update(real_words([w]))
        return out

    brain.store.clear_cache()
    brain.admitter.clear_cache()  # and the dictionary's pairs, so each pair reads its words again
    enc.words = one_by_one
    try:
        alone = {q: _admissions(brain.turn("u", "s", q, dry_run=True)) for q in questions}
    finally:
        enc.words = real_words
    assert calls and alone == batched


def test_words_already_encoded_are_read_in_one_pass_with_the_same_admission(brain):
    """A turn whose words the second opinion has all encoded reads the dictionary once, without the dry run, and
    decides as the batched reading does (forced here by a cache that never answers)."""
    for title, body in [("和外婆去海边", "周末和外婆去海边捡贝壳，看了日出。"),
                        ("哥哥的新工作", "哥哥在上海找到了新工作。")]:
        brain.write("u", title=title, body=body)
    enc = brain.store.second
    questions = ["did my sister go to the beach with grandma?", "what did my brother find?"]
    first = {q: _admissions(brain.turn("u", "s", q, dry_run=True)) for q in questions}
    answered: list[bool] = []
    real_cached = enc.cached

    def spy(words):
        got = real_cached(words)
        answered.append(got is not None)
        return got

    enc.cached = spy
    brain.admitter._pairs.clear()  # else every pair is answered from the dictionary's memo, reading no word
    try:
        again = {q: _admissions(brain.turn("u", "s", q, dry_run=True)) for q in questions}
    finally:
        enc.cached = real_cached
    assert answered and all(answered) and again == first
    brain.store.clear_cache()
    brain.admitter.clear_cache()
    enc.cached = lambda words: None  # every reading takes the dry run and the batch
    try:
        batched = {q: _admissions(brain.turn("u", "s", q, dry_run=True)) for q in questions}
    finally:
        enc.cached = real_cached
    assert batched == first


def _layer_debugs(obj) -> list:
    if isinstance(obj, dict):
        own = [obj["layer_debug"]] if "layer_debug" in obj else []
        return own + [x for v in obj.values() for x in _layer_debugs(v)]
    if isinstance(obj, list):
        return [x for v in obj for x in _layer_debugs(v)]
    return []


def test_a_layer_is_decided_once_per_decoded_bucket_and_a_purge_forgets_it(brain, monkeypatch):
    """Later turns read the layers the first decided (the same decoded buckets, the same config); a purge empties
    the memo, and a turn under another config (a breath) decides its own."""
    import ombre_brain.memory_layers as ml

    for title, body in [("芒果过敏", "我对芒果过敏，吃了会起疹子。"), ("周末爬山", "周末和室友去爬山，看了日出。")]:
        brain.write("u", title=title, body=body)
    calls: list[str] = []
    real = ml.infer_layer
    monkeypatch.setattr(ml, "infer_layer", lambda b, cfg: calls.append(b.id) or real(b, cfg))
    first = brain.turn("u", "s", "我对什么过敏？", dry_run=True)
    assert calls
    calls.clear()
    again = brain.turn("u", "s", "我对什么过敏？", dry_run=True)
    assert calls == [] and _layer_debugs(again.to_dict()) == _layer_debugs(first.to_dict()) != []
    brain.purge("u", bucket_ids=[first.debug["retrieval"].candidates[0].bucket.id])
    assert brain.layers._memo == {}


def test_sections_and_evidence_text_read_once_per_text_are_what_parsing_gives():
    from ombre_brain.buckets import Bucket, parse_sections

    body = "周末去海边。\n\n### comment\n后来又提起过。\n\n看了日出。"
    b = Bucket(id="b1", space="u", title="海边", body=body, summary="一次旅行", tags=["trip"])
    assert b.sections == parse_sections(body) and b.sections is not b.sections  # a list of its own each time
    assert b.evidence_text == "海边\n一次旅行\ntrip\n周末去海边。"  # the comment runs to the end: context only


def test_a_decoded_bucket_is_reused_and_a_purge_forgets_it(brain):
    bid = brain.write("u", title="芒果过敏", body="我对芒果过敏，吃了会起疹子。")
    text = brain.store.ledger.one("SELECT data FROM buckets WHERE space = ? AND id = ?", ("u", bid))["data"]
    assert bucket_from_json(text) is bucket_from_json(text)  # one decoding per stored text
    brain.turn("u", "s", "我对什么过敏？")
    assert _decoded.cache_info().currsize > 0 and _is_cjk.cache_info().currsize > 0
    brain.purge("u", bucket_ids=[bid])
    assert _decoded.cache_info().currsize == 0  # the cache quotes memories: a purge empties it
    assert main_text_of.cache_info().currsize == 0
    assert _sections_of.cache_info().currsize == 0 and _evidence_text.cache_info().currsize == 0
    assert _is_cjk.cache_info().currsize == 0


def test_the_lexical_index_leaves_the_collectors_rounds(brain):
    """What the lexical index keeps per bucket and per moment (100,000 and 232,033 of them at 100k) is made of
    tuples of strings, which the collector stops tracking once it has seen them: lists stayed in its rounds, and
    every full collection walked them."""
    import gc

    for title, body in [("芒果过敏", "我对芒果过敏，吃了会起疹子。"), ("周末爬山", "周末和室友去爬山。\n\n看了日出。")]:
        brain.write("u", title=title, body=body)
    brain.turn("u", "s", "我对什么过敏？", dry_run=True)
    followed = brain.store.core._lexical["u"]
    snap = followed.index._current()
    gc.collect()
    assert followed.moments and not any(gc.is_tracked(ids) for ids in followed.moments.values())
    assert not gc.is_tracked(snap.ids) and len(snap.ids) == len(followed.index)


def test_every_connection_to_the_ledger_keeps_a_larger_page_cache(brain):
    """SQLite keeps 2 MB of pages a connection by default; a turn on a large ledger read most of its pages again."""
    import threading

    from ombre_brain.store.ledger.sqlite import CACHE_KIB

    ledger = brain.store.ledger
    seen = [ledger.one("PRAGMA cache_size")[0]]
    worker = threading.Thread(target=lambda: seen.append(ledger.one("PRAGMA cache_size")[0]))  # its own connection
    worker.start()
    worker.join()
    assert seen == [-CACHE_KIB, -CACHE_KIB] and CACHE_KIB > 2000


def test_the_wal_is_folded_in_on_a_thread_of_its_own_never_inside_a_commit(tmp_path, monkeypatch):
    """SQLite checkpointed inside whichever commit took the WAL past 1,000 pages (a turn's record, 10–220 ms at 100k):
    commits now only nudge the checkpointer's thread, which folds the WAL in a second later; close stops it."""
    import threading

    from ombre_brain.store.ledger import sqlite as lsql

    monkeypatch.setattr(lsql, "CHECKPOINT_DELAY_S", 0.05)
    ledger = lsql.SqliteLedger(tmp_path / "l.db")
    done = threading.Event()
    where: list[str] = []
    real = ledger.checkpoint

    def spy():
        where.append(threading.current_thread().name)
        real()
        done.set()

    ledger.checkpoint = spy
    with ledger.tx() as c:
        c.execute("CREATE TABLE t (x TEXT)")
        c.executemany("INSERT INTO t VALUES (?)", [("x" * 4000,) for _ in range(1500)])  # past 1,000 pages
    assert ledger.one("PRAGMA wal_autocheckpoint")[0] == 0
    assert done.wait(30) and where[0] == "ombre-wal-checkpoint", where
    thread = ledger._checkpointer._thread
    ledger.close()
    assert thread is not None and not thread.is_alive()


def test_preparing_loads_every_table_a_turn_reads(tmp_path):
    """A server prepares before its first turn: the dictionary, jieba's tags and IDF table and wordfreq are loaded,
    and the objects built stay out of the collector's rounds, whose full collections come ten times rarer; a library
    caller's process is never frozen, and a bench gives its process the collector back."""
    code = ("import gc, sys\nfrom ombre_brain import Brain\n"
            f"b = Brain.open({str(tmp_path / 'd')!r})\n"
            "b.admitter.prepare()\nprint('FROZEN' if gc.get_freeze_count() else 'NOT FROZEN')\n"
            "import ombre_brain.retrieval.lexical as lx, ombre_brain.retrieval.dictionary as d\n"
            "print('LOADED' if 'wordfreq' in sys.modules and lx._GENERAL_IDF is not None and d.bridge_if_built() "
            "else 'NOT LOADED')\n"
            "full = gc.get_threshold()[2]\n"
            "b.admitter.prepare(freeze=True)\nprint('FROZEN' if gc.get_freeze_count() > 100000 else 'NOT FROZEN')\n"
            "from ombre_brain.retrieval.evidence import FULL_ROUNDS, thaw\n"
            "print('RARER' if gc.get_threshold()[2] == FULL_ROUNDS > full else 'AS BEFORE')\n"
            "thaw()\nprint('THAWED' if gc.get_freeze_count() == 0 and gc.get_threshold()[2] == full else 'STILL')\n"
            "b.close()\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.stdout.split() == ["NOT", "FROZEN", "LOADED", "FROZEN", "RARER", "THAWED"], out.stderr[-2000:]


def _recorded(tmp_path, **ratios) -> str:
    f = tmp_path / "recorded.json"
    f.write_text(json.dumps({"buckets": 30, "context": 0, "queries": 4, **ratios}))
    return str(f)


def test_a_ratio_worse_than_recorded_past_the_tolerance_fails():
    rec = {"buckets": 10000, "overhead_p95": 2.0, "write_ratio": 0.9}
    ok = check_run({"buckets": 10000, "overhead_p95": 2.2, "write_ratio": 0.8}, rec, 0.15)
    assert [c.ok for c in ok] == [True, True]
    worse = check_run({"buckets": 10000, "overhead_p95": 2.4, "write_ratio": 0.7}, rec, 0.15)
    assert [(c.name, c.ok) for c in worse] == [("overhead_p95", False), ("write_ratio", False)]
    with pytest.raises(ValidationError, match="buckets is 1000"):
        check_run({"buckets": 1000, "overhead_p95": 2.0}, rec)
    with pytest.raises(ValidationError, match="tolerance"):
        check_run({"buckets": 10000, "overhead_p95": 2.0}, rec, 1.5)


def test_a_run_recorded_with_the_floor_after_the_turns_is_held_against_that_floor():
    """Records from before the floor was sampled between the turns compare with this run's floor sampled the old
    way; a record of the new method compares with the new ratio."""
    t = {"p50": 30.0, "p95": 40.0}
    run = {"buckets": 10000, "turn_ms": t, "overhead_p95": 2.0, "floor_after_ms": {"p50": 15.0, "p95": 16.0},
           "overhead_p95_floor_after": 2.5}
    old = {"buckets": 10000, "turn_ms": t, "floor_ms": {"p50": 15.0, "p95": 19.0}, "overhead_p95": 2.1}
    assert [(c.name, c.now, c.ok) for c in check_run(run, old, 0.2)] == [("overhead_p95_floor_after", 2.5, True)]
    assert [(c.name, c.ok) for c in check_run(run, old, 0.1)] == [("overhead_p95_floor_after", False)]
    new = dict(run, overhead_p95=1.8)
    assert [(c.name, c.now, c.ok) for c in check_run(run, new, 0.1)] == [("overhead_p95", 2.0, False)]


def test_a_recorded_file_that_is_no_bench_result_is_named(tmp_path):
    bad = tmp_path / "notes.json"
    bad.write_text('{"hello": 1}')
    with pytest.raises(ValidationError, match="notes.json"):
        read_recorded(bad)
    assert cli.main(["bench", "--turns", "--buckets", "30", "--check", str(tmp_path / "missing.json")]) == 2


def test_bench_check_passes_and_fails_by_the_recorded_ratio(capsys, tmp_path):
    argv = ["bench", "--turns", "--buckets", "30", "--queries", "4"]
    assert cli.main([*argv, "--check", _recorded(tmp_path, overhead_p95=1000.0)]) == 0
    assert "overhead_p95" in capsys.readouterr().out
    assert cli.main([*argv, "--check", _recorded(tmp_path, overhead_p95=0.001), "--json"]) == 1
    res = json.loads(capsys.readouterr().out)
    assert res["check"]["ratios"]["overhead_p95"]["ok"] is False
    assert cli.main([*argv, "--context", "2", "--check", _recorded(tmp_path, overhead_p95=1.0)]) == 2
    assert "context" in capsys.readouterr().err  # a run of another shape is refused before it runs


@pytest.mark.parametrize("message,back", [
    ("when was it that my mom went to a concert?", False),   # "it" and "that", but about the concert
    ("how is she now?", True),
    ("is it still bad?", True),
    ("he already bought her a tiny onesie with his station's logo on it", True),  # a person pointed at
    ("那她现在怎么样了", True),
    ("讲讲给猫洗澡那天", False),
])
def test_a_message_that_names_its_own_thing_does_not_point_back(message, back):
    from ombre_brain.config import load_config
    from ombre_brain.recall_policy import RecallPolicy
    from ombre_brain.turn.carry import points_back

    plan = RecallPolicy(load_config()).plan_query(message, [])
    assert points_back(plan, dictionary=True) is back
    if not any("\u4e00" <= ch <= "\u9fff" for ch in message):
        assert points_back(plan, dictionary=False) is plan.anaphoric  # no dictionary: English names nothing


def test_the_shipped_kinds_are_what_tagging_says(tmp_path):
    """The table of English stems that name things or times gives the answer tagging every headword gives (a
    sample of the whole dictionary), and is not used for another jieba or dictionary."""
    from ombre_brain.retrieval import dict_kinds
    from ombre_brain.retrieval.dictionary import bridge, known_kinds
    from ombre_brain.retrieval.lexical import names_a_thing, names_a_time

    b = bridge()
    for test in (names_a_thing, names_a_time):
        table = known_kinds(b, test)
        assert table is not None
        for stem in sorted(b.en_words)[::61]:
            heads = b.en_words[stem]
            assert (stem in table) == (sum(test(h) for h in heads) >= dict_kinds.THING_SHARE * len(heads)), stem
    other = tmp_path / "kinds.json.gz"
    dict_kinds.write(b, {"thing": ["sister"], "time": []}, other)
    assert dict_kinds.load(b, other) == {"thing": frozenset({"sister"}), "time": frozenset()}
    import gzip
    data = json.loads(gzip.open(other, "rt").read())
    data["stamp"]["jieba"] = "0.0"
    with gzip.open(other, "wt") as f:
        json.dump(data, f)
    assert dict_kinds.load(b, other) is None  # made for another jieba: tagged on the turn instead


def test_kinds_without_package_metadata_are_not_used(monkeypatch):
    from importlib import metadata

    from ombre_brain.retrieval import dict_kinds
    from ombre_brain.retrieval.dictionary import bridge

    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(dict_kinds.metadata, "version", missing)
    assert dict_kinds.load(bridge()) is None  # words are tagged on the turn instead; nothing fails


def test_a_query_encoded_ahead_is_the_same_and_a_purge_meanwhile_drops_it(brain):
    """The second opinion's query is encoded on its own thread while the turn searches; admission gets the same vector
    it would have encoded itself, and a purge that lands meanwhile leaves nothing of it cached."""
    import numpy as np

    enc = brain.store.second
    alone = enc.query("周末和外婆去海边了吗")
    enc.clear_cache()
    enc.query_ahead("周末和外婆去海边了吗")
    assert np.array_equal(enc.query("周末和外婆去海边了吗"), alone)
    enc.query_ahead("did grandma like the beach?")
    pending = enc._pending.get("did grandma like the beach?")
    enc.clear_cache()  # a purge while it is being encoded
    if pending is not None:
        pending.result()
    assert "did grandma like the beach?" not in enc._cache


def test_a_memory_s_words_come_from_its_stored_tokens_as_a_cut_would_give_them(brain, monkeypatch):
    """Admission reads a short memory's words from the tokens its write stored, and they are the words cutting its
    fields again gives; a memory with a moment long enough to be a piece of a cut sentence, or a bucket of another
    version than the stored one, is cut again; a turn admits the same either way."""
    from ombre_brain.buckets import bucket_from_dict
    from ombre_brain.retrieval.alignment import memory_words
    from ombre_brain.retrieval.evidence import SHORT_MOMENT

    long_sentence = "我们沿着海边一直走" * (SHORT_MOMENT // 8)
    written = [brain.write("u", title=t, body=b, tags=tags) for t, b, tags in [
        ("和外婆去海边", "周末和外婆去海边捡贝壳，看了日出。\n\n回来的路上吃了海鲜面。", ["家人"]),
        ("Guitar lessons with Mia", "Mia taught me three chords; I can't play barre chords yet.", ["music"]),
        ("哥哥的新工作", "哥哥在上海找到了新工作 at a bank, 3.5 days a week.\n### comment\n他很开心", []),
        ("一次长长的散步", long_sentence + "。", []),
    ]]
    adm = brain.admitter
    for w in written:
        b = brain.store.get("u", w)
        cut = adm._stored_cut(b)
        if b.title == "一次长长的散步":
            assert cut is None
            continue
        assert cut is not None
        fields = (b.title, b.summary or "", "\n".join(b.tags), b.main_text)
        assert (memory_words((b.summary or "", "\n".join(b.tags)), brain.store.tokens, adm._stop, cut=cut)
                == memory_words(fields, brain.store.tokens, adm._stop))
    b = brain.store.get("u", written[0])
    other = bucket_from_dict({"space": "u", "id": b.id, "title": b.title, "body": b.body + "又去了一次。",
                              "created": b.created}, space="u")
    assert adm._stored_cut(other) is None  # its moments are not the ones stored
    questions = ["还记得和外婆去海边吗", "what did Mia teach me?", "我哥在哪里工作", "那次长长的散步"]
    stored = {q: _admissions(brain.turn("u", "s", q, dry_run=True)) for q in questions}
    adm.clear_cache()
    monkeypatch.setattr(type(adm), "_stored_cut", lambda self, b: None)
    assert {q: _admissions(brain.turn("u", "s", q, dry_run=True)) for q in questions} == stored


def test_a_quiet_candidate_s_record_is_made_when_read_from_the_turn_s_own_decisions(brain):
    """The trace of a candidate left out without a name is serialised only when a page reads it, and then from the
    very layer and gate the turn decided with (never decided again)."""
    from ombre_brain.turn.context import Traced

    topics = ["做饭", "看电影", "学吉他", "去海边", "搬家", "考试", "养猫", "跑步", "加班", "逛超市", "画画", "下雨天"]
    for i, topic in enumerate(topics * 2):
        brain.write("u", title=f"第{i}次{topic}", body=f"那天{topic}，心情还不错。")
    turn = brain.turn("u", "s", "还记得去公园散步吗", dry_run=True)
    traced = turn.debug["trace"]
    assert traced and all(isinstance(t, Traced) for t in traced.values())
    bid, entry = next(iter(traced.items()))
    assert entry._made is None  # nothing built until read
    explained = turn.explain(bid)
    assert explained["layer_debug"] == entry._layer.to_dict() and explained["runtime_gate"] == entry._gate.to_dict()
    assert entry._made is not None and turn.explain(bid) == explained


def test_coverage_visits_only_the_groups_a_memory_holds_and_gives_the_same_floats_as_every_group():
    """With a conversation in play a turn asks some twenty term groups; coverage reads only the groups of the matched
    terms (``AskedTerms.groups_of``), summed in the groups' order: equal to the last float to the definition."""
    import random

    from ombre_brain.retrieval.asked import AskedTerms, _coverage, _heaviest
    from ombre_brain.retrieval.terms import term_weight

    def every_group(asked, matched):
        got = set(matched)

        def held(members):
            found = members & got
            return min(1.0, max(term_weight(m) for m in found) / _heaviest(members)) if found else 0.0

        def share(groups):
            total = sum(w for _, w in groups)
            return sum(w * held(members) for members, w in groups) / total if total > 0 else 0.0

        whole = share(asked.groups)
        return whole if asked.message_groups is None else max(whole, share(asked.groups[:asked.message_groups]))

    vocab = ["火锅", "重庆火锅", "朋友", "女朋友", "beach", "海边", "猫", "小猫咪", "concert", "mom", "周末", "run"]
    rng = random.Random(5)
    for _ in range(3000):
        k = rng.randint(1, 8)
        groups = tuple((frozenset(rng.sample(vocab, rng.randint(1, 3))), rng.random() * rng.choice([0, 1, 1]))
                       for _ in range(k))
        asked = AskedTerms(tuple(vocab), groups, rng.choice([None, rng.randint(0, k)]))
        matched = rng.sample(vocab, rng.randint(0, 6))
        assert _coverage(asked, matched) == every_group(asked, matched), (groups, asked.message_groups, matched)


def test_a_background_is_the_same_as_building_it_afresh_for_every_query():
    """The sample's layout (each moment's place, which scripts stand on their own) is worked out once per sample;
    every query's background holds the same sums and cosines as one built from scratch, to the last float."""
    import random

    from ombre_brain.buckets import bucket_id_of
    from ombre_brain.retrieval.admission import MIN_SCRIPT_BACKGROUND, Background

    def afresh(ids, cos, cjk=None):
        if len(cos) < 2:
            return None
        c = [float(x) for x in cos]
        whole = (len(c), sum(c), sum(x * x for x in c), dict(zip(ids, c, strict=True)))
        scripts = {}
        for script in (True, False) if cjk is not None else ():
            kept = [(i, x) for i, x, k in zip(ids, c, cjk, strict=True) if k == script]
            if len({bucket_id_of(i) for i, _ in kept}) >= MIN_SCRIPT_BACKGROUND and len(kept) < len(c):
                scripts[script] = afresh([i for i, _ in kept], [x for _, x in kept])
        return whole, scripts

    def seen(bg):
        return None if bg is None else ((bg.n, bg.s1, bg.s2, dict(bg.by_moment)), {s: seen(b) for s, b in
                                                                                  bg.by_script.items()})

    rng = random.Random(3)
    for _ in range(200):
        n = rng.randint(0, 40)
        ids = [f"b{rng.randint(0, 25)}#{rng.randint(1, 3)}" for _ in range(n)]
        cjk = [rng.random() < rng.random() for _ in range(n)]
        for _query in range(3):  # one sample, several queries
            cos = [rng.uniform(-0.2, 0.95) for _ in range(n)]
            assert seen(Background.of(ids, cos, cjk)) == afresh(ids, cos, cjk)
            assert seen(Background.of(ids, cos)) == afresh(ids, cos)
            bg = Background.of(ids, cos, cjk)
            by_dict = bg and Background(bg.n, bg.s1, bg.s2, dict(zip(ids, cos, strict=True)))
            for m in ids[:3] if bg is not None else ():
                assert bg.z(0.5, m) == by_dict.z(0.5, m) and bg.by_moment.get(m) == by_dict.by_moment[m]
            assert bg is None or bg.by_moment.get("absent#1") is None
    with pytest.raises(ValueError, match="3 moment ids but 2 cosines"):
        Background.of(["a#1", "b#1", "c#1"], [0.1, 0.2])
