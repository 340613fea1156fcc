"""Issue 50, N14: text is normalised on the way in; "don't remember" is heard however it is written.

Zero-width characters, bidi controls (an RTL override) and a BOM used to be stored verbatim in titles,
where they split a word for search and dedupe ("海\\u200b边" is two words, and another memory than
"海边") and make a title display as something else. Now what is stored is NFC without them (a joiner
stays where it joins: inside an emoji sequence or a Persian word), tags are NFKC, and every match reads
text without them. The write decision's "别记这个" was missed with a zero-width character inside, and in
Traditional Chinese ("別記這個"); the cue lists now read Traditional Chinese as Simplified (OpenCC).
All through HTTP on the real app.
"""

from __future__ import annotations

import httpx
import pytest

from ombre_brain import Brain

from .conftest import LiveServer

SPACE = "haven:xiaoyu"
NOW = "2026-10-01T20:00:00+08:00"


@pytest.fixture
def site(tmp_path):
    brain = Brain.open(tmp_path / "data", {})
    live = LiveServer(brain)
    yield live
    live.close()
    brain.close()


def _post(site, path: str, body: dict) -> httpx.Response:
    return httpx.post(f"{site.url}{path}", json=body, timeout=60)


@pytest.mark.parametrize("title,stored", [
    ("海\u200b边的傍晚", "海边的傍晚"),
    ("\u202e晚傍的边海\u202c", "晚傍的边海"),  # an RTL override that would show it reversed
    ("\ufeff海边的傍晚\u2066", "海边的傍晚"),
    ("cafe\u0301 by the sea", "caf\u00e9 by the sea"),  # one character, as NFC writes it
    ("👩\u200d💻 写代码", "👩\u200d💻 写代码"),  # a joiner inside an emoji sequence stays
])
def test_titles_are_stored_without_invisible_characters(site, title, stored):
    r = _post(site, "/v1/buckets", {"space": SPACE, "title": title, "body": f"正文：{title}",
                                    "tags": ["\u200b旅行", "ｔｒｉｐ"]})
    assert r.status_code == 201, r.text
    got = httpx.get(f"{site.url}/v1/buckets/{r.json()['id']}", params={"space": SPACE}, timeout=30).json()
    assert got["title"] == stored and got["body"] == f"正文：{stored}", got
    assert got["tags"] == ["旅行", "trip"], got["tags"]


def test_a_title_with_a_hidden_character_is_the_same_memory(site):
    first = _post(site, "/v1/buckets", {"space": SPACE, "title": "海边的傍晚", "body": "我们捡了贝壳。"})
    again = _post(site, "/v1/buckets", {"space": SPACE, "title": "海\u200b边的\u2060傍晚",
                                        "body": "我们捡了\u200d贝壳。"})
    assert first.status_code == 201 and again.status_code in (200, 201), again.text
    assert again.json()["id"] == first.json()["id"]
    listed = httpx.get(f"{site.url}/v1/buckets", params={"space": SPACE}, timeout=30).json()
    assert len(listed["buckets"]) == 1


def test_a_title_of_only_invisible_characters_is_refused(site):
    r = _post(site, "/v1/buckets", {"space": SPACE, "title": "\u200b\u202e\ufeff", "body": "x"})
    assert r.status_code == 400 and "title" in r.json()["error"]["message"]


@pytest.mark.parametrize("dont", ["别记这个", "别\u200b记这个", "別記這個", "别\u202e记这个", "先別記住"])
def test_dont_keep_is_heard_with_a_hidden_character_or_in_traditional_chinese(site, dont):
    said = [{"role": "user", "content": "我对芒果过敏，吃了会起疹子"}]
    r = _post(site, "/v1/exchanges", {"space": SPACE, "session_id": "s", "messages": said, "reply": "好的，记住了。",
                                      "now": NOW})
    assert r.status_code == 200 and r.json()["bucket_ids"], r.text
    kept = r.json()["bucket_ids"]
    assert all(site.brain.get(SPACE, i) is not None for i in kept)
    follow = [*said, {"role": "assistant", "content": "好的，记住了。"}, {"role": "user", "content": dont}]
    r = _post(site, "/v1/exchanges", {"space": SPACE, "session_id": "s", "messages": follow, "reply": "好，当没听到。",
                                      "now": "2026-10-01T20:01:00+08:00"})
    assert r.status_code == 200 and r.json()["bucket_ids"] == [], r.text
    assert all(site.brain.get(SPACE, i) is None for i in kept), "the exchange before it is forgotten"
    listed = httpx.get(f"{site.url}/v1/buckets", params={"space": SPACE}, timeout=30).json()["buckets"]
    assert not [b for b in listed if "芒果" in b["title"] + b["body"] or "记" in b["title"]], listed
