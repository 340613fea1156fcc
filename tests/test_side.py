"""The side sections (turn/side.py) read exactly the lists announced for them, under the same conditions.

A list a section reads without announcing it costs a shared ledger a round trip of its own; one
announced and never read is a wasted statement. Both are invisible in the answers, so these tests
watch the store's list reads directly, on every combination of sections.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta, timezone

import pytest

from ombre_brain import Brain
from ombre_brain.dream.engine import DreamEngine
from ombre_brain.store.interfaces import ListRead
from ombre_brain.turn.side import CORE, FAVORITE, WEATHER

from .conftest import merged

T = datetime(2026, 11, 30, 20, 0, tzinfo=timezone(timedelta(hours=8)))
S = "haven:side"
IDENTITY = {"identity": {"ai_name": "Haven", "user_name": "Xiaoyu"}}
EVERY_SECTION = {"gateway": {"favorite_interval_rounds": 1, "budgets": {"core_memory": 600}}}
TURNS = [  # (space, query, hours after T, dry run)
    (S, "我又想起海边了", 8, False),
    (S, "你最喜欢的回忆是什么", 9, False),  # a favorite request
    (S, "明天要交报告", 10, False),
    (S, "我又想起海边了", 11, True),
    (S, "", 12, False),
    ("haven:nowhere", "你好呀，今天怎么样", 12, False),  # a space nobody wrote to: no recent context to read
]


def seed(brain) -> None:
    w = brain.write
    w(S, created=(T - timedelta(hours=20)).isoformat(), title="海边的日落", body="傍晚的海边很安静。", tags=["海边"])
    w(S, created=(T - timedelta(days=3)).isoformat(), title="这周的天气", body="这周我们很亲近。",
      tags=["relationship_weather"])
    w(S, created=(T - timedelta(days=30)).isoformat(), title="第一次看海", body="在青岛第一次看到大海。",
      tags=["海边", "haven_favorite"], importance=9)
    w(S, title="她叫小雨", body="用户的名字是小雨。", pinned=True)
    w(S, created=(T - timedelta(hours=24)).isoformat(), type="dream", title="梦：海边", body="我梦见海边的灯塔。",
      recall_cues=["海边"], core_affect={"valence": 0.7, "arousal": 0.5})


def watch(store, monkeypatch) -> tuple[list[ListRead], list[ListRead]]:
    """The lists announced ahead and the lists read through ``store`` from now on."""
    announced: list[ListRead] = []
    read: list[ListRead] = []
    real_list, real_ahead = store.list, store.list_ahead

    def list_(space, **kw):
        if kw.get("role") != "profile":  # the profile's book catches up once per change of the space, as the lexical
            read.append(ListRead(**kw))  # index does (profile/cache.py): no side section's per-turn list
        return real_list(space, **kw)

    def list_ahead(space, *reads):
        announced.extend(ListRead(**kw) for kw in reads)
        return real_ahead(space, *reads)

    monkeypatch.setattr(store, "list", list_)
    monkeypatch.setattr(store, "list_ahead", list_ahead)
    return announced, read


@pytest.mark.parametrize("overlay", [{}, EVERY_SECTION, merged(EVERY_SECTION, {"gateway": {"dream_section": False}}),
                                     {"gateway": {"budgets": {"facts": 0}}}],
                         ids=["defaults", "every_section", "no_dream_section", "no_facts"])
def test_each_side_section_reads_the_list_announced_for_it(tmp_path, monkeypatch, overlay):
    with Brain.open(tmp_path / "data", merged(IDENTITY, overlay)) as brain:
        seed(brain)
        announced, read = watch(brain.store, monkeypatch)
        everything: set[ListRead] = set()
        for space, query, hours, dry in TURNS:
            announced.clear()
            read.clear()
            brain.turn(space, "s1", query, now=T + timedelta(hours=hours), dry_run=dry)
            assert WEATHER in read and Counter(read) == Counter(announced), (space, query)
            everything.update(read)
        announced.clear()
        read.clear()
        brain.breath(S, "s1", now=T + timedelta(hours=13))  # outside a turn scope: announced, then read directly
        assert Counter(read) == Counter(announced)
    if overlay is EVERY_SECTION:  # the test saw every section read its list
        assert {WEATHER, FAVORITE, CORE, DreamEngine.LATENT} <= everything
        assert any(r.since for r in everything)


def test_the_dream_section_reads_what_the_engine_declares(brain):
    """The turn announces the engine's own read (DreamEngine.LATENT), the one latent() lists with."""
    assert DreamEngine.LATENT == ListRead(type="dream", limit=None)
    assert brain.dream_engine.LATENT is DreamEngine.LATENT
