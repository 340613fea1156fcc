"""The store on real Chroma (embedded and `chroma run`), SQLite and jieba: roundtrip, dedupe, update, delete.

Every test runs twice through ``mode_brain``: once on embedded Chroma and once against a real
Chroma server on loopback, so server mode is exercised end to end.
"""

from __future__ import annotations

import random

import pytest

from ombre_brain import Brain, DuplicateError
from ombre_brain.store.doctor import doctor

from .conftest import sqlite_only

SPACE = "haven:xiaoyu"

ZH_NAMES = ["小雨", "阿杰", "林老师", "外婆", "小猫豆豆", "同桌", "表姐", "房东", "教练", "邻居"]
ZH_PLACES = ["海边", "图书馆", "火锅店", "公园", "地铁站", "山顶", "夜市", "医院", "机场", "咖啡馆"]
ZH_ACTS = ["吵架", "看日落", "排队", "迷路", "下雨", "放风筝", "拍照", "唱歌", "发呆", "告白"]
ZH_THINGS = ["贝壳", "雨伞", "围巾", "耳机", "明信片", "蛋糕", "钥匙", "吉他", "相机", "月饼"]
EN_SYLL = ["ka", "lo", "mi", "ren", "to", "shu", "va", "ne", "qi", "zu"]
EN_PLACES = ["harbor", "library", "market", "orchard", "stadium", "bakery", "museum", "island", "canyon", "temple"]


def nonce(i: int) -> str:
    """A made-up word unique to i, so each English bucket has words of its own."""
    return "".join(EN_SYLL[int(d)] for d in f"{i:03d}")


def make_fields(i: int, rng: random.Random) -> dict:
    """One bucket's input, Chinese for even i and English for odd i, using most §3 fields."""
    a, b, c = i % 10, (i // 10) % 10, (i // 100 + i) % 10  # (a, b, c) is unique per i below 1000
    if i % 2 == 0:
        title = f"{ZH_NAMES[a]}在{ZH_PLACES[b]}{ZH_ACTS[c]}"
        body = f"{ZH_NAMES[a]}在{ZH_PLACES[b]}{ZH_ACTS[c]}，拿着{ZH_THINGS[(a + c) % 10]}。"
        if i % 10 == 0:
            body = f"### moment\n{body}\n\n### feeling\n有点想哭，但也很安心。"
        tags = [ZH_PLACES[b], ZH_THINGS[(a + c) % 10]]
    else:
        word = nonce(i)
        title = f"We talked about {word} at the {EN_PLACES[b]}"
        body = "" if i % 10 != 1 else f"The {word} evening went on until the lights went out."
        tags = [word, EN_PLACES[b]]
    fields: dict = {
        "id": f"b{i:03d}", "title": title, "body": body, "tags": tags,
        "type": rng.choice(["dynamic", "dynamic", "permanent", "feel", "journal"]),
        "importance": rng.randint(1, 10), "valence": round(rng.random(), 3), "arousal": round(rng.random(), 3),
        "pinned": rng.random() < 0.1, "protected": rng.random() < 0.1, "anchor": rng.random() < 0.1,
        "archived": rng.random() < 0.1, "resolved": rng.random() < 0.1, "digested": rng.random() < 0.1,
        "created": f"2026-0{1 + i % 9}-1{i % 10}T20:0{i % 10}:00+08:00",
        "last_active": f"2026-10-1{i % 10}T08:00:00+00:00",
        "updated": "2026-10-20T08:00:00+00:00",
        "activation_count": i % 7, "origin": rng.choice(["user", "assistant", "derived"]),
        "basis": rng.choice(["stated", "observed", "inferred", "unknown"]),
    }
    if i % 10 == 3:
        fields["comments"] = [{"author": "Haven", "created": "2026-10-01T10:00:00+08:00", "content": f"评论 {i}"}]
        fields["summary"] = f"summary {i}"
        fields["event_time"] = "2026-05-01T12:00:00-05:00"
    if i % 4 == 1:
        fields["source_ref"] = {"path": f"chats/{i}.md", "start_line": i + 1, "end_line": i + 3}
        fields["source"] = f"chat:{i}"
        fields["confidence"] = 0.75
    if i % 5 == 2:
        fields.update(memory_subject="relationship", memory_layer="relationship_lesson",
                      memory_classification_source="model_adjusted")
    return fields


def own_hit(brain, space: str, bucket_id: str, hits: dict) -> bool:
    return any(m.split("#")[0] == bucket_id for m in hits)


def test_200_buckets_roundtrip_and_find_by_own_words(mode_brain, brain_path, store_mode):
    rng = random.Random(2)
    inputs = [make_fields(i, rng) for i in range(200)]
    for f in inputs[:30]:  # the single write path
        assert mode_brain.write(space=SPACE, **f) == f["id"]
    assert mode_brain.write_many([{"space": SPACE, **f} for f in inputs[30:]]) == [f["id"] for f in inputs[30:]]
    before = {b.id: b.to_dict() for b in mode_brain.list(SPACE, limit=1000)}
    assert len(before) == 200
    mode_brain.close()

    with Brain.open(brain_path, store_mode) as brain:
        after = {b.id: b.to_dict() for b in brain.list(SPACE, limit=1000)}
        assert after == before
        for f in inputs:  # every field given comes back as given
            got = after[f["id"]]
            for key, value in f.items():
                assert got[key] == value, (f["id"], key)
            assert brain.get(SPACE, f["id"]).to_dict() == got
        assert brain.store.count(SPACE) == 200
        report = doctor(brain, repair=False)
        assert report["consistent"], report

        store = brain.store
        for f in inputs[::5]:  # 40 buckets, Chinese and English
            lex = store.lexical_search(SPACE, store.tokens(f["title"]), 5)
            assert own_hit(brain, SPACE, f["id"], lex), (f["title"], lex)
            text = f["body"].split("\n")[1] if "###" in f["body"] else f["body"] or f["title"]
            vec = store.vector_search(SPACE, brain.embedder.query(text), 10)
            assert own_hit(brain, SPACE, f["id"], vec), (f["title"], vec)


def test_exact_duplicate_returns_the_existing_id(mode_brain):
    a = mode_brain.write(space=SPACE, title="一起去海边", body="捡了很多贝壳", tags=["海边"])
    b = mode_brain.write(space=SPACE, title="一起去海边", body="捡了很多贝壳", tags=["海边"])
    assert a == b
    with pytest.raises(DuplicateError):  # the stored importance would silently win (test_provenance.py)
        mode_brain.write(space=SPACE, title="一起去海边", body="捡了很多贝壳", tags=["海边"], importance=9)
    c = mode_brain.write(space=SPACE, title="一起去海边", body="捡了很多贝壳", tags=["沙滩"])
    assert c != a
    assert mode_brain.store.count(SPACE) == 2
    d = mode_brain.write(space=SPACE, title="一起去海边", body="捡了很多贝壳", tags=["海边"], dedupe=False)
    assert d not in (a, c)
    assert mode_brain.store.count(SPACE) == 3
    assert doctor(mode_brain, repair=False)["consistent"]


def test_a_duplicate_of_a_write_in_flight_is_answered_once_that_write_is_committed(mode_brain):
    """Two writers of the same content at once: the second is answered with the first's id only when that bucket is
    committed, so an edit right after never finds it missing (it did, now and then, in test_concurrency.py)."""
    import threading

    store = mode_brain.store
    writer = store.writer
    real_put = writer._chroma_put
    in_flight, release = threading.Event(), threading.Event()

    def slow_put(bucket, moments, vectors):  # the first writer stops between its pending row and Chroma
        if not in_flight.is_set():
            in_flight.set()
            release.wait(30)
        real_put(bucket, moments, vectors)

    writer._chroma_put = slow_put
    got: dict = {}

    def first():
        got["first"] = mode_brain.write(space=SPACE, title="外婆做的红烧肉", body="过年的时候做的")

    def second():
        try:
            bid = got["second"] = mode_brain.write(space=SPACE, title="外婆做的红烧肉", body="过年的时候做的")
            mode_brain.update(SPACE, bid, importance=9)  # at once, as an HTTP client editing what it was answered
        except Exception as exc:  # noqa: BLE001 - the assertion below names it
            got["error"] = repr(exc)

    a = threading.Thread(target=first)
    a.start()
    assert in_flight.wait(30)
    b = threading.Thread(target=second)
    b.start()
    b.join(2)  # without the turn-taking the second writer is answered (and its edit fails) well within this
    release.set()
    a.join(30)
    b.join(30)
    writer._chroma_put = real_put
    assert "error" not in got, got.get("error")
    assert got["first"] == got["second"] and mode_brain.get(SPACE, got["first"]).importance == 9
    assert doctor(mode_brain, repair=False)["consistent"]


def test_a_bulk_write_racing_a_single_write_of_the_same_content_keeps_one_copy(mode_brain, monkeypatch):
    """write_many checks for duplicates up front, then embeds for seconds: a single write of one of its
    contents landing in between is found again under the content lock, and claimed instead of copied."""
    core = mode_brain.store.core
    real = core.embed_moments
    raced: list[str] = []

    def embed_then_race(memories, **kw):  # the other writer lands while this batch is embedding
        if not raced:
            raced.append("")
            raced[0] = mode_brain.write(space=SPACE, title="外婆做的红烧肉", body="过年的时候做的", source="chat")
        return real(memories, **kw)

    monkeypatch.setattr(core, "embed_moments", embed_then_race)
    ids = mode_brain.write_many([
        {"space": SPACE, "title": "外婆做的红烧肉", "body": "过年的时候做的", "source": "import"},
        {"space": SPACE, "title": "第一次养猫", "body": "她叫年糕"},
    ])
    assert ids[0] == raced[0] and ids[1] != raced[0]
    assert mode_brain.store.count(SPACE) == 2
    assert mode_brain.store.sources(SPACE, raced[0]) == ["chat", "import"]
    assert doctor(mode_brain, repair=False)["consistent"]


def test_update_reindexes_words_and_vectors(mode_brain):
    store = mode_brain.store
    bid = mode_brain.write(space=SPACE, title="周末计划", body="我们打算去爬山，看云海。\n\n### feeling\n很期待")
    old_moments = {m.id for m in store.moments(SPACE, bid)}
    assert own_hit(mode_brain, SPACE, bid, store.lexical_search(SPACE, store.tokens("爬山 云海"), 5))
    updated = mode_brain.update(SPACE, bid, body="改成去博物馆看恐龙化石。")
    assert updated.body == "改成去博物馆看恐龙化石。"
    assert mode_brain.get(SPACE, bid).body == updated.body
    assert not store.lexical_search(SPACE, store.tokens("爬山 云海"), 5)
    assert own_hit(mode_brain, SPACE, bid, store.lexical_search(SPACE, store.tokens("恐龙 化石"), 5))
    vec = store.vector_search(SPACE, mode_brain.embedder.query("去博物馆看恐龙化石"), 3)
    assert own_hit(mode_brain, SPACE, bid, vec)
    new_moments = {m.id for m in store.moments(SPACE, bid)}
    assert set(store.chroma.all_ids(SPACE)) == new_moments  # the feeling moment is gone from Chroma too
    assert old_moments - new_moments
    assert doctor(mode_brain, repair=False)["consistent"]


def test_delete_removes_bucket_everywhere(mode_brain):
    store = mode_brain.store
    keep = mode_brain.write(space=SPACE, title="Tea with grandma", body="She poured oolong and told old stories.")
    gone = mode_brain.write(space=SPACE, title="Lost umbrella", body="The blue umbrella stayed on the tram.")
    other = mode_brain.write(space=SPACE, title="Found umbrella", body="A red umbrella in the lobby.")
    mode_brain.link(SPACE, gone, other, "same_event", 0.8)
    assert mode_brain.delete(SPACE, gone)
    assert not mode_brain.delete(SPACE, gone)
    assert mode_brain.get(SPACE, gone) is None
    assert mode_brain.edges(SPACE) == []
    assert not own_hit(mode_brain, SPACE, gone, store.lexical_search(SPACE, store.tokens("blue umbrella tram"), 5))
    vec = store.vector_search(SPACE, mode_brain.embedder.query("The blue umbrella stayed on the tram."), 5)
    assert not own_hit(mode_brain, SPACE, gone, vec)
    assert not [i for i in store.chroma.all_ids(SPACE) if i.startswith(gone + "#")]
    assert {b.id for b in mode_brain.list(SPACE)} == {keep, other}
    words = store.vocabulary(1000)  # what a prepared server encodes: a deleted memory's words are not among them
    assert "umbrella" == words[0] and {"oolong", "lobby"} <= set(words) and not {"blue", "tram"} & set(words)
    assert store.vocabulary(1) == ["umbrella"]
    assert doctor(mode_brain, repair=False)["consistent"]


def test_spaces_are_separate_collections(mode_brain):
    a = mode_brain.write(space="haven:a", title="secret garden", body="only a knows")
    mode_brain.write(space="haven:b", title="open field", body="b knows this")
    store = mode_brain.store
    assert mode_brain.get("haven:b", a) is None
    assert not store.lexical_search("haven:b", store.tokens("secret garden"), 5)
    assert not own_hit(mode_brain, "haven:b", a,
                       store.vector_search("haven:b", mode_brain.embedder.query("secret garden"), 5))


@pytest.mark.parametrize("mode", ["http"])
def test_two_stores_share_one_chroma_server_without_collisions(tmp_path, chroma_server, mode):
    host, port = chroma_server
    cfg = {"store": {"chroma": {"mode": mode, "host": host, "port": port}}}
    with Brain.open(tmp_path / "one", cfg) as one, Brain.open(tmp_path / "two", cfg) as two:
        one.write(space=SPACE, id="same", title="from store one", body="one")
        two.write(space=SPACE, id="same", title="from store two", body="two")
        for store, words in ((one.store, "from store one"), (two.store, "from store two")):
            title = store.moments(SPACE, "same")[0]
            assert title.text == words
            assert store.chroma.get_text_hashes(SPACE, ["same#0"]) == {"same#0": title.text_hash}
        two.store.drop_space(SPACE)
        assert one.get(SPACE, "same").title == "from store one"
        assert doctor(one, repair=False)["consistent"]


def test_a_role_is_read_as_an_index_seek_over_every_value_that_holds_it(brain):
    """The store reads a role as ``roles IN (every value holding it)``: each combination storage_roles can write
    is among those values, and a bucket with several roles is listed under each of them."""
    import itertools

    from ombre_brain.buckets import Bucket
    from ombre_brain.memory_layers import STORAGE_ROLES, role_values, storage_roles

    flags = {"core": {"pinned": True}, "anchor": {"anchor": True}, "self": {"kind_fields": {"self": {}}},
             "weather": {"type": "feel", "tags": ["relationship_weather"]},
             "favorite": {"body": "那天。\n\n### favorite_reason\n她笑了。"},
             "profile": {"memory_layer": "stable_boundary", "memory_classification_source": "model"}}
    for n in range(1, len(STORAGE_ROLES) + 1):
        for held in itertools.combinations(STORAGE_ROLES, n):
            kw = {k: v for r in held for k, v in flags[r].items()}
            roles = storage_roles(Bucket(id="b", space="u", title="t", **{"body": "那天。", **kw}))
            assert roles == f",{','.join(held)},"
            assert all(roles in role_values(r) for r in held)
            assert not any(roles in role_values(r) for r in STORAGE_ROLES if r not in held)
    several = brain.write(space=SPACE, title="海边的约定", body="每年都去。\n\n### favorite_reason\n那是我们的开始。",
                          tags=["haven_favorite"], pinned=True, anchor=True)
    brain.write(space=SPACE, title="平常的一天", body="去公园散步。")
    for role in ("core", "anchor", "favorite"):
        assert [b.id for b in brain.store.list(SPACE, role=role, limit=10)] == [several], role
    assert brain.store.list(SPACE, role="weather", limit=10) == []


@sqlite_only
def test_side_section_roles_are_indexed_and_backfilled_in_an_old_ledger(brain_path):
    """Core, weather and favorite candidates come from an indexed ``roles`` column, which an older
    ledger without it gains (filled from the stored buckets) the first time it is opened."""
    import sqlite3

    with Brain.open(brain_path) as b:
        pinned = b.write(space=SPACE, title="我们的约定", body="吵架以后第二天一定要说开。", pinned=True)
        fav = b.write(space=SPACE, title="海边捡贝壳", body="那天风很大。\n\n### favorite_reason\n她笑得很开心。",
                      tags=["haven_favorite"])
        weather = b.write(space=SPACE, title="这周", body="这周我们都很亲近。", type="feel",
                          tags=["relationship_weather"])
        plain = [b.write(space=SPACE, title=f"平常的一天 {i}", body=f"去{p}散步。") for i, p in enumerate(ZH_PLACES)]
        by_role = {r: [x.id for x in b.store.list(SPACE, role=r, limit=100)] for r in ("core", "favorite", "weather")}
        assert by_role == {"core": [pinned], "favorite": [fav], "weather": [weather]}
        assert len(b.store.list(SPACE, limit=100)) == 3 + len(plain)
    with sqlite3.connect(brain_path / "ledger.db") as c:  # the ledger as an older version wrote it
        c.execute("DROP INDEX buckets_roles2")
        c.execute("ALTER TABLE buckets DROP COLUMN roles")
        c.execute("DROP TABLE schema_versions")  # older versions recorded none: every step runs again
    with Brain.open(brain_path, {"gateway": {"budgets": {"core_memory": 200}}}) as b:
        assert [x.id for x in b.store.list(SPACE, role="core", limit=100)] == [pinned]
        assert [x.id for x in b.store.list(SPACE, role="favorite", limit=100)] == [fav]
        turn = b.turn(SPACE, "s", "你好呀", dry_run=True)
        assert turn.item_ids("core_memory") == [pinned]
        b.update(SPACE, pinned, pinned=False)  # an update moves the bucket out of the role
        assert b.store.list(SPACE, role="core", limit=100) == []
