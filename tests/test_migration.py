"""Migration from Ombre-Brain markdown buckets: good files map onto §3 fields, bad files are named."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ombre_brain.portability.ombre_md import import_ombre_md, ombre_md_fields
from ombre_brain.store.doctor import doctor

SPACE = "haven:xiaoyu"

GOOD = {
    "dynamic/海边.md": """\
        ---
        id: sea_2026
        name: 一起去海边
        tags: [海边, 贝壳]
        domain: [旅行, 未分类]
        valence: 0.8
        arousal: 0.4
        importance: 7
        type: dynamic
        created: 2026-08-01T19:30:00+08:00
        last_active: '2026-08-03T09:00:00+08:00'
        pinned: false
        resolved: false
        comments:
          - author: Haven
            created: 2026-08-02T10:00:00+08:00
            content: 她那天笑得很开心
          - 记得带防晒
        meaning: [第一次一起看海]
        ---
        ### moment
        我们在海边捡贝壳，她把最亮的那只放进我口袋。

        ### feeling
        安心。
        """,
    "permanent/boundary.md": """\
        ---
        id: no-late-calls
        name: Don't call after midnight
        tags: boundary
        domain: 生活
        importance: 9
        protected: true
        created: 2026-01-05 08:00:00
        ---
        She asked me not to call after midnight; she sleeps early for work.
        """,
    "archive/old_fight.md": """\
        ---
        name: 为搬家吵架
        valence: "0.2"
        arousal: 0.9
        created: 2025-11-11
        digested: yes
        ---
        那次为了搬家的事吵得很凶，后来和好了。
        """,
    "feel/weather.md": """\
        ---
        id: feel-2026-08-05
        name: 这几天的关系天气
        tags: [relationship_weather]
        type: feel
        anchor: true
        ---
        最近很亲近，像晴天。
        """,
    "plans/trip.md": """\
        ---
        id: plan-kyoto
        name: Kyoto trip plan
        type: plan
        status: active
        importance: 6
        ---
        Book the ryokan before October.
        """,
}

BAD = {
    "dynamic/no_frontmatter.md": ("Just some notes without any frontmatter.\n",
                                  "no YAML frontmatter: the file must start with a '---' line"),
    "dynamic/broken_yaml.md": ("---\nname: 断掉的\ntags: [a, b\n---\nbody\n", "invalid YAML frontmatter at line"),
    "dynamic/no_name.md": ("---\nid: nameless\nvalence: 0.5\n---\nNo title here.\n",
                           "the frontmatter has no name or title (Ombre-Brain's title fields)"),
    "dynamic/bad_valence.md": ("---\nname: 心情\nvalence: very happy\n---\n好\n",
                               "valence: expected a number between 0 and 1, got 'very happy'"),
    "dynamic/valence_high.md": ("---\nname: 太开心\nvalence: 1.7\n---\n好\n",
                                "valence: expected a number between 0 and 1, got 1.7"),
    "dynamic/unclosed.md": ("---\nname: 没关上\nbody continues forever\n", "the frontmatter is never closed"),
    "dynamic/list_frontmatter.md": ("---\n- name\n- tags\n---\nbody\n",
                                    "the frontmatter must be a mapping of keys, got a list"),
    "dynamic/bad_time.md": ("---\nname: 某天\ncreated: last spring\n---\nbody\n",
                            "created: expected an ISO-8601 time like 2026-11-30T20:00:00+08:00, got 'last spring'"),
    "dynamic/bad_flag.md": ("---\nname: 钉住\npinned: maybe\n---\nbody\n",
                            'pinned: expected true or false, got "maybe"'),
    "dynamic/huge_title.md": ("---\nname: " + "长" * 300 + "\n---\nbody\n",
                              "title: is 300 characters; the limit is 200"),
}
NOT_UTF8 = "dynamic/gbk.md"
# Two files with one id and nothing to rank them by: one is imported, the other reported as superseded.
TWINS = {"dynamic/dup_a.md": "---\nid: twin\nname: 双胞胎一\n---\nbody\n",
         "dynamic/dup_b.md": "---\nid: twin\nname: 双胞胎二\n---\nbody\n"}


def write_folder(root: Path) -> Path:
    for rel, text in GOOD.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text), encoding="utf-8")
    for rel, (text, _) in BAD.items():
        (root / rel).write_text(text, encoding="utf-8")
    for rel, text in TWINS.items():
        (root / rel).write_text(text, encoding="utf-8")
    (root / NOT_UTF8).write_bytes("---\nname: 编码\n---\n这是GBK编码的文字\n".encode("gbk"))
    (root / "_media").mkdir()
    (root / "_media" / "photo.jpg").write_bytes(b"\xff\xd8 not markdown")
    return root


def test_migration_imports_good_files_and_names_bad_ones(brain, tmp_path):
    root = write_folder(tmp_path / "buckets")
    report = import_ombre_md(brain, root, space=SPACE)
    assert report.created == len(GOOD) + 1
    problems = {Path(p.where).relative_to(root).as_posix(): p.reason for p in report.problems}
    expected = {rel: reason for rel, (_, reason) in BAD.items()}
    expected[NOT_UTF8] = "not UTF-8 text (byte 0xb1 at offset 10)"
    assert sorted(problems) == sorted(expected)
    for rel, reason in expected.items():
        assert problems[rel].startswith(reason) or reason in problems[rel], (rel, problems[rel])
    assert not report.ok
    assert [Path(p.where).relative_to(root).as_posix() for p in report.superseded] == ["dynamic/dup_a.md"]
    assert "dynamic/dup_b.md, the current copy" in report.superseded[0].reason
    assert brain.get(SPACE, "twin").title == "双胞胎二"
    assert not any("meaning" in n or "status" in n for n in report.notes)  # both mapped now
    assert any("2 time(s) without a UTC offset were read as UTC" in n for n in report.notes)

    sea = brain.get(SPACE, "sea_2026")
    assert sea.title == "一起去海边"
    assert sea.tags == ("海边", "贝壳", "domain:旅行")
    assert (sea.valence, sea.arousal, sea.importance, sea.type) == (0.8, 0.4, 7, "dynamic")
    assert sea.created == "2026-08-01T19:30:00+08:00" and sea.last_active == "2026-08-03T09:00:00+08:00"
    assert sea.body.startswith("### moment\n我们在海边捡贝壳") and "### feeling\n安心。" in sea.body
    assert [s.name for s in sea.sections] == ["moment", "feeling"]
    assert [(c.author, c.content) for c in sea.comments] == [("Haven", "她那天笑得很开心"), ("unknown", "记得带防晒"),
                                                             ("ombre:meaning", "第一次一起看海")]
    assert sea.comments[0].created == "2026-08-02T10:00:00+08:00"
    assert sea.source == "ombre-md:sea_2026"  # by id: the same memory keeps its source when its file moves

    rule = brain.get(SPACE, "no-late-calls")
    assert rule.type == "permanent" and rule.protected and rule.tags == ("boundary", "domain:生活")
    assert rule.created == "2026-01-05T08:00:00+00:00"  # a naive time is read as UTC

    fights = [b for b in brain.list(SPACE, limit=50) if b.title == "为搬家吵架"]
    assert len(fights) == 1
    fight = fights[0]
    assert fight.archived and fight.digested and fight.valence == 0.2 and fight.id == "old_fight"  # the stem
    assert fight.created == "2025-11-11T00:00:00+00:00"

    weather = brain.get(SPACE, "feel-2026-08-05")
    assert weather.type == "feel" and weather.anchor and weather.tags == ("relationship_weather",)
    plan = brain.get(SPACE, "plan-kyoto")
    assert plan.type == "plan" and plan.kind_fields["plan"]["status"] == "active"  # a plan is a plan (design §19)
    assert not plan.resolved and not any(t.startswith(("ombre_type:", "plan_status:")) for t in plan.tags)

    store = brain.store
    hits = store.lexical_search(SPACE, store.tokens("贝壳 口袋"), 5)
    assert any(m.startswith("sea_2026#") for m in hits)
    assert doctor(brain, repair=False)["consistent"]

    again = import_ombre_md(brain, root, space=SPACE)  # idempotent: same ids, nothing changes
    assert (again.created, again.replaced, again.unchanged) == (0, 0, len(GOOD) + 1)
    assert brain.store.count(SPACE) == len(GOOD) + 1
    assert len(again.problems) == len(expected)


def test_edited_file_replaces_the_migrated_bucket(brain, tmp_path):
    root = tmp_path / "b"
    (root / "dynamic").mkdir(parents=True)
    f = root / "dynamic" / "cat.md"
    f.write_text("---\nid: cat\nname: 小猫豆豆\nimportance: 4\n---\n豆豆今天打翻了杯子。\n", encoding="utf-8")
    assert import_ombre_md(brain, root, space=SPACE).created == 1
    f.write_text("---\nid: cat\nname: 小猫豆豆\nimportance: 8\n---\n豆豆今天打翻了杯子。\n", encoding="utf-8")
    r = import_ombre_md(brain, root, space=SPACE)
    assert (r.created, r.replaced, r.unchanged) == (0, 1, 0)
    assert brain.get(SPACE, "cat").importance == 8


def test_odd_ids_get_stable_derived_ids(tmp_path):
    root = tmp_path / "b"
    root.mkdir()
    f = root / "x.md"
    f.write_text("---\nid: 桶 001\nname: t\n---\n", encoding="utf-8")
    a, _ = ombre_md_fields(f, root, SPACE)
    b, _ = ombre_md_fields(f, root, SPACE)
    assert a["id"] == b["id"] and a["id"].startswith("omd-")


@pytest.mark.parametrize("tz,expected", [(None, "2026-01-05T08:00:00+00:00")])
def test_naive_times_default_to_utc(tmp_path, tz, expected):
    root = tmp_path / "b"
    root.mkdir()
    f = root / "x.md"
    f.write_text("---\nname: t\ncreated: 2026-01-05T08:00:00\n---\n", encoding="utf-8")
    data, _ = ombre_md_fields(f, root, SPACE)
    assert data["created"] == expected


def test_cli_migration_names_bad_files_and_exits_1(tmp_path):
    root = tmp_path / "buckets"
    (root / "dynamic").mkdir(parents=True)
    (root / "dynamic" / "ok.md").write_text("---\nid: ok1\nname: 好的记忆\n---\n一起吃了火锅。\n", encoding="utf-8")
    (root / "dynamic" / "bad.md").write_text("---\nname: 坏的\nimportance: 99\n---\nx\n", encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "ombre_brain.cli", "import", "--from", "ombre-md", "--space", SPACE,
                        "--data", str(tmp_path / "data"), str(root)], capture_output=True, text=True, timeout=180)
    assert r.returncode == 1, r.stderr
    assert f"imported {root} into {SPACE}: 1 created, 0 replaced, 0 unchanged" in r.stdout
    assert f"not imported (1):\n  {root / 'dynamic' / 'bad.md'}: importance: expected a number between 1 and 10, " \
           "got 99" in r.stdout
    assert "Traceback" not in r.stdout + r.stderr
