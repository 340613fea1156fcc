"""Migration of Ombre-Brain's letters, plans, anchors and I entries as our kinds (docs/design.md §19).

tests/data/ombre_md_kinds is an invented vault in Ombre-Brain 2.16's shape: a letter of each lock
state, an active, a resolved and an abandoned plan, two anchors, and I entries at every stage. The
import keeps each as its kind with its lock, status and stage; a second import changes nothing; a
store with more than 24 anchors keeps them all and says what the cap means; a store imported
before the kinds existed converts when it is opened.
"""

from __future__ import annotations

import textwrap
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from ombre_brain import Brain
from ombre_brain.errors import ConflictError
from ombre_brain.kinds.anchors import ANCHOR_LIMIT
from ombre_brain.kinds.letters import is_sealed
from ombre_brain.kinds.migrate import DONE_KEY
from ombre_brain.portability.ombre_md import import_ombre_md, naive_zone

FIXTURE = Path(__file__).parent / "data" / "ombre_md_kinds"
SPACE = "haven:xiaoyu"
TZ = naive_zone("+08:00")


@pytest.fixture
def imported(brain):
    report = import_ombre_md(brain, FIXTURE, space=SPACE, naive_tz=TZ)
    assert report.ok and report.problems == [] and report.refused == [], report.summary()
    return report


def test_letters_keep_their_lock_writer_and_side(brain, imported):
    now = datetime.now(timezone.utc)
    got = {b.id: b for b in brain.letters.letters(SPACE)}
    assert set(got) == {f"a1000000000{i}" for i in range(1, 6)} and all(b.type == "letter" for b in got.values())
    open_, timed, opened, permanent, old = (got[f"a1000000000{i}"].kind_fields["letter"] for i in range(1, 6))
    assert (open_["lock_type"], open_["locked_by"], open_["writer"], open_["author"]) == ("none", "companion", "阿澈",
                                                                                          "阿澈")
    assert (timed["lock_type"], timed["locked_by"], timed["side"]) == ("timed", "person", "person")
    assert timed["unlock_at"] == "2099-12-24T20:00:00+08:00"  # a naive unlock_date is read in --tz
    assert (opened["lock_type"], permanent["lock_type"], permanent["unlock_at"]) == ("timed", "permanent", None)
    assert (old["lock_type"], old["locked_by"], old["side"]) == ("none", None, None)  # no side inferred from author
    sealed = {bid for bid, b in got.items() if is_sealed(b, now)}
    assert sealed == {"a10000000002", "a10000000004"}
    # the companion reads the person's timed letter as metadata; its own permanent one whole
    reads = {r.meta["letter_id"]: r for r in brain.letters.read(SPACE, "companion", limit=10)}
    assert not reads["a10000000002"].readable and "银杏叶" not in str(reads["a10000000002"].to_dict())
    assert reads["a10000000004"].readable and "灯塔守夜人" in reads["a10000000004"].to_dict()["content"]
    assert reads["a10000000003"].readable and reads["a10000000003"].meta["opened"]  # its time has passed
    person = {r.meta["letter_id"]: r for r in brain.letters.read(SPACE, "person", limit=10)}
    assert person["a10000000002"].readable and not person["a10000000004"].readable
    assert brain.get(SPACE, "a10000000002").body == "" and brain.get(SPACE, "a10000000002").title == "sealed letter"


def test_plans_keep_their_status_weight_and_history(brain, imported):
    plans = {b.id: b.kind_fields["plan"] for b in brain.plans.plans(SPACE)}
    assert {k: v["status"] for k, v in plans.items()} == {"b20000000001": "active", "b20000000002": "resolved",
                                                          "b20000000003": "abandoned"}
    assert plans["b20000000001"]["weight"] == 0.7 and plans["b20000000003"]["weight"] == 0.2
    done = plans["b20000000002"]["history"]
    assert [h["action"] for h in done] == ["created", "status"] and done[-1]["to"] == "resolved"
    assert done[-1]["by"] == "c30000000003" and done[-1]["reason"] == "她说眼镜已经配好了"
    assert done[-1]["at"] == "2026-04-22T19:30:00+08:00"
    plan = brain.get(SPACE, "b20000000001")
    assert plan.body == "周日提醒她给妈妈打电话" and plan.importance == 7
    assert [c.content for c in plan.comments] == ["她说最近总忘记"]
    assert "周日" not in brain.turn(SPACE, "s", "周日提醒她给妈妈打电话").rendered  # a plan never surfaces


def test_anchors_and_self_entries_come_across(brain, imported):
    assert {b.id for b in brain.anchors.anchored(SPACE)} == {"c30000000001", "c30000000002"}
    formal = {b.id: b.kind_fields["self"] for b in brain.self_model.formal(SPACE)}
    assert set(formal) == {"d40000000001", "d40000000003"}
    assert formal["d40000000003"] == {"stage": "formal", "aspect": "stance", "from_candidate": "d40000000002",
                                      "dream_dates": ["2026-04-10", "2026-04-12", "2026-04-15"], "promoted_to": None}
    assert formal["d40000000001"]["aspect"] == "nature" and formal["d40000000001"]["from_candidate"] is None
    assert [t for t in brain.get(SPACE, "d40000000001").tags if t.startswith("aspect:")] == []
    waiting = brain.self_model.candidates(SPACE)
    assert [b.id for b in waiting] == ["d40000000004"] and waiting[0].type == "dynamic"
    assert waiting[0].kind_fields["self"]["dream_dates"] == ["2026-05-01", "2026-05-03"]
    promoted = brain.get(SPACE, "d40000000002")
    assert promoted.kind_fields["self"]["stage"] == "promoted"
    assert promoted.kind_fields["self"]["promoted_to"] == "d40000000003"
    note = next(n for n in imported.notes if n.startswith("kinds:"))
    assert note == ("kinds: 5 letter(s) (2 sealed now), 3 plan(s) (abandoned 1, active 1, resolved 1), self entries: "
                    "2 formal, 1 candidate(s), 1 promoted candidate(s)")


def test_a_second_import_changes_nothing(brain, imported):
    again = import_ombre_md(brain, FIXTURE, space=SPACE, naive_tz=TZ)
    assert (again.created, again.replaced, again.unchanged) == (0, 0, imported.created)


def _anchored(i: int) -> str:
    return textwrap.dedent(f"""\
        ---
        anchor: true
        created: '2026-01-{i + 1:02d}T10:00:00'
        id: e5{i:010d}
        importance: 6
        name: 2026-01-{i + 1:02d} 10-00-00 坐标{i}
        type: dynamic
        ---

        第{i}个坐标：我们约好的第{i}件小事。
        """)


def test_more_anchors_than_the_cap_all_arrive_and_the_cap_is_explained(brain, tmp_path):
    vault = tmp_path / "vault"
    (vault / "dynamic").mkdir(parents=True)
    for i in range(ANCHOR_LIMIT + 2):
        (vault / "dynamic" / f"2026-01-{i + 1:02d} 10-00-00 坐标{i}_e5{i:010d}.md").write_text(_anchored(i),
                                                                                             encoding="utf-8")
    report = import_ombre_md(brain, vault, space=SPACE)
    assert report.created == ANCHOR_LIMIT + 2 and len(brain.anchors.anchored(SPACE)) == ANCHOR_LIMIT + 2
    assert any(f"{ANCHOR_LIMIT + 2} anchors in space {SPACE}: all were imported" in n and "until 3 are released" in n
               for n in report.notes)
    extra = brain.write(SPACE, title="新的坐标", body="又一件想记住的事。")
    with pytest.raises(ConflictError, match="anchor cap reached"):
        brain.anchors.anchor(SPACE, extra)
    for i in range(3):
        brain.anchors.release(SPACE, f"e5{i:010d}")
    assert brain.anchors.anchor(SPACE, extra)[1:] == (True, ANCHOR_LIMIT)


def test_a_store_imported_before_the_kinds_converts_when_opened(brain_path):
    """The old import's shapes (journal + ombre_type:letter, dynamic + plan_status tags, ombre_type:i) become kinds."""
    with Brain.open(brain_path) as brain:
        brain.write(SPACE, id="old-letter", type="journal", title="旧的信", body="信的内容。",
                    tags=["ombre_type:letter", "domain:letter"])
        brain.write(SPACE, id="old-plan", title="配眼镜", body="陪她去配眼镜", resolved=True,
                    tags=["ombre_type:plan", "plan_status:resolved", "domain:plan"])
        brain.write(SPACE, id="old-self", title="我是谁", body="我是同一个我。", tags=["ombre_type:i"])
        brain.write(SPACE, id="old-anchor", title="坐标", body="我们的暗号。", anchor=True)
        with brain.ledger.tx() as c:  # as a store from before: no conversion recorded, no anchor role
            c.execute("DELETE FROM kinds_state WHERE key = ?", (DONE_KEY,))
            c.execute("UPDATE buckets SET roles = '' WHERE id = 'old-anchor'")
    with Brain.open(brain_path) as brain:
        letter, plan, me = (brain.store.get(SPACE, i) for i in ("old-letter", "old-plan", "old-self"))
        assert letter.type == "letter" and letter.kind_fields["letter"]["lock_type"] == "none"
        assert letter.tags == ("domain:letter",)
        assert plan.type == "plan" and plan.kind_fields["plan"]["status"] == "resolved" and not plan.resolved
        assert plan.tags == ("domain:plan",)
        assert me.type == "self" and me.kind_fields["self"]["stage"] == "formal" and me.tags == ()
        assert [b.id for b in brain.anchors.anchored(SPACE)] == ["old-anchor"]
        assert brain.store.moments(SPACE, "old-letter") == []  # its words left the index with the conversion
    with Brain.open(brain_path) as brain:  # once: a second open finds it done
        assert brain.ledger.one("SELECT value FROM kinds_state WHERE key = ?", (DONE_KEY,)) is not None


def test_an_imported_timed_letter_opens_on_time(brain, imported):
    letter = brain.store.get(SPACE, "a10000000002")
    opens = datetime.fromisoformat(letter.kind_fields["letter"]["unlock_at"])
    assert is_sealed(letter, opens - timedelta(seconds=1)) and not is_sealed(letter, opens)
