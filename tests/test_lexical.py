"""Tokenisation and BM25: real jieba, real bm25s, and a slow pure-Python BM25 as the reference."""

from __future__ import annotations

import math
import random
import subprocess
import sys
import threading
from collections import Counter

import pytest

from ombre_brain.retrieval.lexical import K1, B, LexicalIndex, init_jieba, lucene_idf, tokenize


@pytest.fixture(scope="module", autouse=True)
def _jieba():
    init_jieba(None)


# ---------------------------------------------------------------- tokenize


def test_chinese_is_cut_in_search_mode():
    toks = tokenize("小雨最喜欢吃重庆火锅")
    assert {"小雨", "喜欢", "重庆", "火锅", "重庆火锅"} <= set(toks)
    assert tokenize("我们一起去海边看日出") == ["我们", "一起", "去", "海边", "看", "日出"]


def test_english_words_keep_apostrophes_and_numbers():
    assert tokenize("Xiaoyu DOESN\u2019T like peanuts: 2 times, 3.5 kg!") == [
        "xiaoyu", "doesn't", "like", "peanuts", "2", "times", "3.5", "kg",
    ]


def test_mixed_scripts_and_full_width():
    toks = tokenize("和Haven一起看Taylor Swift演唱会，２０２４年")
    assert toks[:4] == ["和", "haven", "一起", "看"]
    assert {"taylor", "swift", "演唱", "演唱会", "2024", "年"} <= set(toks)
    assert tokenize("ありがとう 안녕하세요") == ["ありがとう", "안녕하세요"]


def test_stop_words_punctuation_and_whitespace_are_dropped():
    stops = frozenset({"的", "了", "The", "a"})
    assert tokenize("The 小狗的 名字, a dog 了!", stops) == ["小狗", "名字", "dog"]
    assert tokenize(" ，。！？…… --- \n\t ") == []
    assert tokenize("") == []


def test_tokenize_is_deterministic():
    text = "上次吵架之后我们和好了, we made up after the fight 在重庆"
    assert tokenize(text) == tokenize(text) == tokenize(str(text))


def test_jieba_cache_dir_is_honoured_and_quiet(tmp_path):
    cache = tmp_path / "jieba"
    code = (
        "from pathlib import Path\n"
        "from ombre_brain.retrieval.lexical import init_jieba, tokenize\n"
        f"init_jieba(Path({str(cache)!r}))\n"
        "init_jieba(Path('/nonexistent/elsewhere'))\n"  # idempotent: the first location wins
        "print(tokenize('重庆火锅'))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert (cache / "jieba.cache").is_file()
    assert "重庆" in run.stdout
    assert "Building prefix dict" not in run.stderr and "Loading model" not in run.stderr


# ---------------------------------------------------------------- LexicalIndex

ZH_WORDS = ["海边", "日出", "火锅", "重庆", "柯基", "豆包", "花生", "过敏", "生日", "蛋糕", "地铁", "加班",
            "猫咪", "雨天", "咖啡", "电影", "画画", "钢琴", "考试", "旅行", "外婆", "饺子", "樱花", "演唱会"]
EN_WORDS = ["beach", "sunrise", "hotpot", "corgi", "peanut", "allergy", "birthday", "cake", "subway",
            "overtime", "kitten", "rainy", "coffee", "movie", "drawing", "piano", "exam", "travel",
            "grandma", "dumplings", "sakura", "concert", "tokyo", "guitar"]


def _random_doc(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(4, 10)):
        parts.append(rng.choice(ZH_WORDS) if rng.random() < 0.6 else f" {rng.choice(EN_WORDS)} ")
    return "".join(parts)


def test_search_finds_each_doc_by_its_own_words():
    rng = random.Random(7)
    docs = {f"m{i:03d}": tokenize(_random_doc(rng)) for i in range(200)}
    index = LexicalIndex(docs.items())
    assert len(index) == 200 and "m042" in index
    top1 = 0
    for mid, toks in docs.items():
        ranked = [m for m, _ in index.search(toks, 5)]
        assert mid in ranked, (mid, toks, ranked)
        top1 += ranked[0] == mid
    assert top1 == 200


def test_remove_and_replace():
    index = LexicalIndex([("sea#1", tokenize("我们去海边看日出")), ("pot#1", tokenize("重庆火锅太辣了")),
                          ("dog#1", tokenize("my corgi Doubao loves the beach"))])
    assert [m for m, _ in index.search(tokenize("海边"), 3)] == ["sea#1"]
    index.remove(["sea#1", "never-existed"])
    assert index.search(tokenize("海边"), 3) == [] and "sea#1" not in index and len(index) == 2
    assert [m for m, _ in index.search(tokenize("beach"), 3)] == ["dog#1"]
    index.add([("dog#1", tokenize("my corgi sleeps all day"))])  # replaces, not duplicates
    assert index.search(tokenize("beach"), 3) == [] and len(index) == 2
    assert index.doc_freq("beach") == 0 and index.doc_freq("corgi") == 1


def test_a_kept_answer_is_the_search_until_the_index_changes():
    """Searches repeat (a conversation's earlier messages, turn after turn): their answers are kept, and every add or
    remove, with or without a rebuild, drops them."""
    rng = random.Random(11)
    index = LexicalIndex([(f"m{i}", tokenize(_random_doc(rng))) for i in range(60)], delta_limit=8)
    queries = [tokenize(_random_doc(rng))[:3] for _ in range(6)]
    for step in range(300):
        op = rng.random()
        if op < 0.15:
            index.add([(f"m{rng.randrange(90)}", tokenize(_random_doc(rng)))])
        elif op < 0.25:
            index.remove([f"m{rng.randrange(90)}"])
        else:
            q, k = rng.choice(queries), rng.choice((3, 10))
            got = index.search(q, k)
            assert got == index._search(tuple(dict.fromkeys(q)), k), step
            got.clear()  # the caller's list is its own
            assert index.search(q, k) == index._search(tuple(dict.fromkeys(q)), k)


def test_edge_cases_return_nothing():
    assert LexicalIndex().search(["海边"], 5) == []
    index = LexicalIndex([("a", ["海边"]), ("empty", [])])
    assert index.search([], 5) == [] and index.search(["海边"], 0) == []
    assert index.search(["unknown", "also-unknown"], 5) == []
    assert [m for m, _ in index.search(["unknown", "海边"], 5)] == ["a"]
    index.remove(["a", "empty"])
    assert index.search(["海边"], 5) == [] and len(index) == 0


def test_idf_and_doc_freq_follow_lucene():
    index = LexicalIndex([("a", ["x", "y", "x"]), ("b", ["x"]), ("c", ["z"])])
    assert index.doc_freq("x") == 2 and index.doc_freq("nope") == 0
    assert index.idf("x") == pytest.approx(math.log(1 + (3 - 2 + 0.5) / (2 + 0.5)))
    assert index.idf("z") > index.idf("x") > 0
    assert index.idf("nope") == 0.0
    assert lucene_idf(1, 3) == pytest.approx(index.idf("z"))


def _reference_scores(docs: dict[str, list[str]], query: list[str]) -> dict[str, float]:
    """Textbook BM25, bm25s "lucene" flavour: idf = ln(1 + (N - df + .5)/(df + .5)), tf/(tf + k1*norm)."""
    n = len(docs)
    avgdl = sum(len(t) for t in docs.values()) / n
    df = Counter(t for toks in docs.values() for t in set(toks))
    scores = {}
    for mid, toks in docs.items():
        tf = Counter(toks)
        s = 0.0
        for term in dict.fromkeys(query):
            if tf[term]:
                idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
                s += idf * tf[term] / (tf[term] + K1 * (1 - B + B * len(toks) / avgdl))
        scores[mid] = s
    return scores


@pytest.mark.parametrize("seed", range(25))
def test_topk_matches_reference_bm25(seed):
    rng = random.Random(seed)
    vocab = [f"t{i}" for i in range(rng.randint(5, 40))]
    weights = [1 / (i + 1) for i in range(len(vocab))]  # Zipf-like: some terms are everywhere
    docs = {f"d{i:02d}": rng.choices(vocab, weights, k=rng.randint(0, 25)) for i in range(rng.randint(1, 60))}
    index = LexicalIndex(docs.items())
    for _ in range(10):
        query = rng.choices(vocab + ["unknown"], k=rng.randint(1, 4))
        k = rng.randint(1, 12)
        ref = _reference_scores(docs, query)
        got = index.search(query, k)
        positive = sorted((s for s in ref.values() if s > 0), reverse=True)
        assert len(got) == min(k, len(positive))
        tol = 1e-4 * max(positive, default=1.0)
        for mid, score in got:
            assert score == pytest.approx(ref[mid], abs=tol)
        # Same set up to ties: every returned score reaches the reference's k-th best.
        if got:
            assert min(ref[m] for m, _ in got) >= positive[len(got) - 1] - tol
        scores = [s for _, s in got]
        assert scores == sorted(scores, reverse=True)


def test_concurrent_writes_and_searches():
    index = LexicalIndex([(f"seed{i}", ["海边", f"w{i}"]) for i in range(50)])
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(100):
                index.add([(f"w{n}-{i}", ["海边", f"x{i}"])])
                if i % 3 == 0:
                    index.remove([f"w{n}-{i - 3}"])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def reader() -> None:
        try:
            for _ in range(100):
                for mid, score in index.search(["海边", "x5"], 10):
                    assert score > 0 and isinstance(mid, str)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(2)]
    threads += [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(index) == 50 + 2 * (100 - 33)


def test_writes_after_a_build_use_the_delta_not_a_rebuild():
    docs = [(f"d{i}", [f"w{i % 50}", "海边", f"x{i}"]) for i in range(400)]
    index = LexicalIndex(docs)
    assert index.search(["海边"], 3)
    snap = index._snapshot
    index.add([("new", ["年糕", "海边"])])
    index.remove(["d7"])
    assert index.search(["年糕"], 3)[0][0] == "new"
    assert all(m != "d7" for m, _ in index.search(["x7", "海边"], 500))
    assert index._snapshot is snap, "a single write must not rebuild the whole space"
    index.add([(f"bulk{i}", ["bulk"]) for i in range(300)])
    assert len(index.search(["bulk"], 1000)) == 300
    assert index._snapshot is not snap, "a large delta triggers one rebuild"
