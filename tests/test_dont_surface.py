"""``dont_surface``: a memory the user asked never to surface is refused by every section's gate.

Each case shows the memory in its section first, then sets the flag and shows that the same turn
leaves it out with the reason ``dont_surface``, while it stays stored, listed, exportable and
explained on the debug routes.
"""

from __future__ import annotations

import json

import pytest

from ombre_brain import Brain
from ombre_brain.buckets import bucket_from_dict
from ombre_brain.errors import ProvenanceError, ValidationError
from ombre_brain.portability.jsonl import export_space, import_jsonl
from ombre_brain.turn import gates as G
from ombre_brain.turn.gate_table import REASONS

SPACE = "haven:xiaoyu"
NOW = "2026-11-30T20:00:00+08:00"


@pytest.fixture
def haven(tmp_path):
    b = Brain.open(tmp_path / "data", {"identity": {"ai_name": "Haven"},
                                       "gateway": {"budgets": {"core_memory": 300}}})
    yield b
    b.close()


def _flip(brain: Brain, bid: str, query: str, section: str) -> None:
    """Shown in ``section`` while unflagged; left out with reason dont_surface once flagged."""
    before = brain.turn(SPACE, "s", query, now=NOW, dry_run=True)
    assert bid in before.item_ids(section), (section, before.to_dict()["sections"])
    brain.update(SPACE, bid, dont_surface=True)
    after = brain.turn(SPACE, "s", query, now=NOW, dry_run=True)
    assert bid not in after.item_ids(), (section, after.to_dict()["sections"])
    assert brain.get(SPACE, bid).dont_surface
    why = after.explain(bid)
    assert why is not None and why["runtime_gate"]["reason"] == "dont_surface", why


def test_direct_recall_honours_dont_surface(haven):
    bid = haven.write(space=SPACE, title="那通电话", body="那通电话之后她一下午没说话，晚上才说是妈妈打来的。",
                      created="2026-11-20T20:00:00+08:00")
    _flip(haven, bid, "那通电话之后她怎么了", "recalled_memory")


def test_related_memory_honours_dont_surface(haven):
    a = haven.write(space=SPACE, title="领养小猫年糕", body="小雨从救助站领养了一只橘猫，取名叫年糕。",
                    created="2026-11-01T20:00:00+08:00")
    v = haven.write(space=SPACE, title="第一次去宠物医院", body="医生说它有点营养不良，要慢慢增加猫粮。",
                    created="2026-11-02T20:00:00+08:00")
    haven.link(SPACE, a, v, "same_event", 0.9)
    _flip(haven, v, "年糕刚来家里那天是什么样子", "diffused_memory")


def test_recent_context_honours_dont_surface(haven):
    bid = haven.write(space=SPACE, title="今天加班", body="小雨今天加班到九点，说累得不想说话。",
                      created="2026-11-30T18:00:00+08:00")
    _flip(haven, bid, "最近怎么样", "recent_context")


def test_favorite_card_honours_dont_surface(haven):
    body = "我们五点起床去看日出，她靠在我肩上睡着了。\n### favorite_reason\n那是她第一次在我身边睡着。"
    bid = haven.write(space=SPACE, title="海边的日出", tags=["haven_favorite"], body=body,
                      created="2026-10-01T20:00:00+08:00")
    _flip(haven, bid, "你最喜欢的回忆是哪一段", "favorite_memory")


def test_core_memory_honours_dont_surface(haven):
    bid = haven.write(space=SPACE, title="不在深夜吵架", body="过了十二点有分歧就先睡，第二天再说。", pinned=True,
                      created="2026-10-01T20:00:00+08:00")
    _flip(haven, bid, "今天吃什么", "core_memory")


def test_weather_honours_dont_surface(haven):
    bid = haven.write(space=SPACE, title="这几天的关系天气", type="feel", tags=["relationship_weather"],
                      body="最近很亲近，像晴天。", created="2026-11-30T08:00:00+08:00")
    _flip(haven, bid, "今天吃什么", "relationship_weather")


def test_a_flagged_memory_feeds_no_dream(haven):
    for i, (title, body) in enumerate([("夜跑", "晚上沿着江边跑了五公里。"), ("煮面", "回家煮了一碗番茄面。"),
                                       ("那通电话", "那通电话之后她一下午没说话。")]):
        haven.write(space=SPACE, title=title, body=body, dont_surface=(i == 2), created="2026-11-30T12:00:00+08:00")
    run = haven.dream_engine.run(SPACE, now=NOW)
    assert all(m.bucket.title != "那通电话" for m in run.material)


def test_every_gate_gives_the_one_reason():
    b = bucket_from_dict({"space": SPACE, "title": "t", "body": "x", "dont_surface": True})
    assert G.surface_block(b).reason == "dont_surface" and "dont_surface" in REASONS
    assert G.surface_block(bucket_from_dict({"space": SPACE, "title": "t"})) is None


def test_flag_is_validated_protected_and_round_trips(haven, tmp_path):
    with pytest.raises(ValidationError) as e:
        haven.write(space=SPACE, title="t", dont_surface="yes")
    assert e.value.field == "dont_surface"
    bid = haven.write(space=SPACE, title="那通电话", body="那通电话之后她一下午没说话。", dont_surface=True)
    with pytest.raises(ProvenanceError):  # an assistant cannot bring back what the user asked to hide
        haven.update(SPACE, bid, origin="assistant", dont_surface=False)
    assert [b.dont_surface for b in haven.list(SPACE)] == [True]

    out = tmp_path / "export.jsonl"
    export_space(haven, SPACE, out)
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()[1:]]
    assert rows[0]["dont_surface"] is True
    with Brain.open(tmp_path / "other") as other:
        import_jsonl(other, out)
        assert other.get(SPACE, bid).dont_surface


def test_debug_routes_show_the_flag_and_the_reason(haven):
    from ombre_brain.server.app import create_app

    bid = haven.write(space=SPACE, title="那通电话", body="那通电话之后她一下午没说话。", dont_surface=True,
                      created="2026-11-20T20:00:00+08:00")
    client = create_app(haven).test_client()
    got = client.get(f"/v1/buckets/{bid}?space={SPACE}")
    assert got.status_code == 200 and got.get_json()["dont_surface"] is True, got.get_json()
    page = client.get("/api/breath-debug", query_string={"space": SPACE, "q": "那通电话之后她怎么了"}).get_json()
    row = next(r for r in page["buckets"] if r["bucket_id"] == bid)
    assert not row["would_surface"] and row["reason"] == "dont_surface", row
