"""Buckets: validation messages, section parsing (with Chinese aliases) and moment building."""

from __future__ import annotations

import pytest

from ombre_brain.buckets import bucket_from_dict, build_moments, parse_sections
from ombre_brain.errors import ValidationError

BASE = {"space": "haven:xiaoyu", "title": "t", "body": "b"}


def test_sections_with_aliases_and_unknown_headings():
    body = ("开头的话\n### 片段\n我们去海边。\n### 情绪锚点\n咸咸的风。\n### 随便写的\n还是锚点的一部分\n"
            "### favorite_reason\n因为她笑了。")
    secs = parse_sections(body)
    assert [s.name for s in secs] == ["original", "moment", "affect_anchor", "favorite_reason"]
    assert "### 随便写的" in secs[2].text and "还是锚点的一部分" in secs[2].text
    assert body[secs[1].start:secs[1].end] == "我们去海边。"


def test_moments_title_sections_windows_and_context_only():
    para = "这是一句很长的话，用来凑足长度。" * 30
    b = bucket_from_dict({**BASE, "id": "long", "title": "长日记",
                          "body": f"### moment\n第一段。\n\n{para}\n### comment\n旁注。",
                          "comments": [{"author": "haven", "content": "评论一"}]})
    ms = build_moments(b)
    assert ms[0].section == "title" and ms[0].id == "long#0" and not ms[0].context_only
    body_moments = [m for m in ms if m.section == "moment"]
    assert len(body_moments) >= 3, "a paragraph over 300 characters is split at sentences"
    assert all(len(m.text) <= 300 for m in body_moments)
    assert [m.context_only for m in ms if m.section == "comment"] == [True, True]
    for m in body_moments:
        assert b.body[m.start:m.end] == m.text


def test_evidence_text_excludes_context_only_sections():
    b = bucket_from_dict({**BASE, "body": "### moment\n雨里散步\n### affect_anchor\n薄荷糖",
                          "comments": [{"content": "薄荷"}]})
    assert "雨里散步" in b.evidence_text and "薄荷" not in b.evidence_text


@pytest.mark.parametrize("patch, field, expected", [
    ({"importance": 11}, "importance", "between 1 and 10"),
    ({"importance": 2.5}, "importance", "an integer"),
    ({"valence": -0.1}, "valence", "between 0 and 1"),
    ({"arousal": "hot"}, "arousal", "a number"),
    ({"type": "diary"}, "type", "one of dynamic, permanent"),
    ({"created": "2026-11-30 20:00"}, "created", "no UTC offset"),
    ({"created": "last tuesday"}, "created", "ISO-8601"),
    ({"title": ""}, "title", "must not be empty"),
    ({"title": "x" * 201}, "title", "the limit is 200"),
    ({"tags": "海边"}, "tags", "a list of strings"),
    ({"tags": ["x"] * 40}, "tags", "the limit is 32"),
    ({"memory_layer": "forever"}, "memory_layer", "stable_boundary"),
    ({"memory_subject": "cat"}, "memory_subject", "user, relationship, event"),
    ({"origin": "robot"}, "origin", "user, assistant, derived"),
    ({"pinned": "yes"}, "pinned", "true or false"),
    ({"space": "has space"}, "space", "space name"),
    ({"id": "bad id!"}, "id", "an id of letters"),
    ({"colour": "blue"}, None, "unknown field(s) colour"),
    ({"source_ref": {"start_line": 1}}, "source_ref", "path"),
    ({"body": "x\x00y"}, "body", "NUL"),
])
def test_bad_bucket_input_names_the_field(patch, field, expected):
    with pytest.raises(ValidationError) as exc:
        bucket_from_dict({**BASE, **patch})
    msg = str(exc.value)
    assert expected in msg, msg
    if field:
        assert msg.startswith(field), msg


def test_defaults_and_writer_hint_source():
    b = bucket_from_dict({**BASE, "memory_layer": "short_state"})
    assert b.memory_classification_source == "model"
    assert (b.type, b.importance, b.origin, b.basis) == ("dynamic", 5, "user", "unknown")
    assert b.last_active == b.created


def test_patch_keeps_identity():
    b = bucket_from_dict({**BASE, "id": "a"})
    with pytest.raises(ValidationError, match="cannot be changed"):
        bucket_from_dict({"id": "b"}, partial_of=b)
    c = bucket_from_dict({"importance": 9}, partial_of=b)
    assert c.id == "a" and c.importance == 9 and c.title == "t"
