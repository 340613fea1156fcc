"""Migration from an Ombre-Brain vault in the exact shape Ombre-Brain writes (invented content).

tests/data/ombre_md_store holds what a real store shows: one id in two folders after a pin, a plan
status change, a letter archived by decay and a stale copy of a deleted memory; soft deletes in
every shape; ``dont_surface``; plan ``weight``; a fractional ``activation_count``. Every file is
accounted for: imported, superseded by the current copy, or skipped as deleted.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from datetime import timedelta, timezone
from pathlib import Path

import pytest

from ombre_brain.cli.store import _count_rows
from ombre_brain.portability import jsonl as portability
from ombre_brain.portability.ombre_md import import_ombre_md, markdown_files, naive_zone, ombre_md_fields
from ombre_brain.portability.ombre_md_map import deletion_marker

FIXTURE = Path(__file__).parent / "data" / "ombre_md_store"
SPACE = "haven:xiaoyu"

IMPORTED = {"3f9a1c2b7d4e", "8c0d5e7f2a19", "b41e07aa9c3d", "e5d4c3b2a190", "4e5f60718293", "3d4e5f607182",
            "feel_202603162130_V072", "6f7a8b9c0d1e"}
STALE = {
    "dynamic/恋爱/2026-02-01 21-00-00 不在深夜吵架_8c0d5e7f2a19.md",  # pinned since: now in permanent/
    "plans/active/2026-03-01 10-00-00_b41e07aa9c3d.md",  # resolved since: now in plans/resolved/
    "letters/history/2026-01-10 23-05-41 写给三个月后的我们_e5d4c3b2a190.md",  # archived by decay since
    "dynamic/居家/2026-03-20 19-00-00 搬家那天_0a1b2c3d4e5f.md",  # deleted since: now in archive/
}
DELETED = {"0a1b2c3d4e5f": "deleted_at", "1b2c3d4e5f60": "deleted_at", "2c3d4e5f6071": "deleted_at",
           "5a6b7c8d9e0f": "tombstone: true"}


def _rel(report_items) -> set[str]:
    return {Path(p.where.split(" (bucket")[0]).relative_to(FIXTURE).as_posix() for p in report_items}


def test_every_file_is_imported_superseded_or_skipped(brain):
    report = import_ombre_md(brain, FIXTURE, space=SPACE)
    assert report.problems == [] and report.refused == [] and report.ok
    assert report.created == len(IMPORTED)
    assert {b.id for b in brain.list(SPACE, limit=100)} == IMPORTED
    assert _rel(report.superseded) == STALE
    assert {p.where.split("'")[1]: p.reason for p in report.skipped} == {
        bid: f"deleted in Ombre-Brain ({marker}): not imported" for bid, marker in DELETED.items()}
    assert any("1 .md file(s) outside the bucket folders" in n for n in report.notes)  # the fixture's README
    unmapped = next(n for n in report.notes if n.startswith("frontmatter keys not mapped"))
    assert "source_tool (8 files)" in unmapped and "title" not in unmapped
    assert "change_log" not in unmapped and "lock_type" not in unmapped  # a plan's history, a letter's lock
    assert any("16 time(s) without a UTC offset were read as UTC" in n for n in report.notes)


def test_the_current_copy_wins(brain):
    import_ombre_md(brain, FIXTURE, space=SPACE)
    rule = brain.get(SPACE, "8c0d5e7f2a19")  # the permanent/ copy, not the stale dynamic/ one
    assert (rule.type, rule.pinned, rule.importance, rule.activation_count) == ("permanent", True, 10, 5)
    assert rule.last_active == "2026-03-02T09:12:44+00:00"
    plan = brain.get(SPACE, "b41e07aa9c3d")  # resolved (a status move keeps last_active; change_log decides)
    fields = plan.kind_fields["plan"]
    assert plan.type == "plan" and fields["status"] == "resolved" and fields["weight"] == 0.8
    assert [h["action"] for h in plan.kind_fields["plan"]["history"]] == ["created", "status"]
    assert fields["related"] == "3f9a1c2b7d4e" and not any(t.startswith("ombre_type") for t in plan.tags)
    assert plan.importance == 7 and plan.title == "周末陪她去配眼镜"  # the name is only a timestamp
    letter = brain.get(SPACE, "e5d4c3b2a190")  # the archive copy; its kind recovered from __letter__
    assert letter.archived and letter.type == "letter" and letter.kind_fields["letter"]["lock_type"] == "none"
    assert (letter.kind_fields["letter"]["locked_by"], letter.kind_fields["letter"]["writer"]) == ("companion", "阿澈")
    queue = brain.get(SPACE, "4e5f60718293")  # decay-archived: forgotten, not deleted
    assert queue.archived and queue.resolved and queue.type == "dynamic"


def test_fields_with_a_clear_home_are_mapped(brain):
    import_ombre_md(brain, FIXTURE, space=SPACE)
    walk = brain.get(SPACE, "3f9a1c2b7d4e")
    assert walk.title == "晚饭后散步" and walk.source == "ombre-md:3f9a1c2b7d4e"
    assert walk.tags == ("散步", "公园", "domain:日常", "domain:运动")
    assert walk.body == ("晚饭后沿着河边走了四十分钟，风有点大，她把围巾借给了我。\n\n---\n"  # a merge keeps its ---
                         "第二天又去了一次，这次绕到了桥的另一边。")
    assert [(c.author, c.content) for c in walk.comments] == [
        ("ombre:why_remembered", "我想记住她说走路让她安静下来"), ("ombre:meaning", "这是我们开始固定散步的第一周")]
    assert walk.created == "2026-03-14T20:15:02+00:00"
    dog = brain.get(SPACE, "6f7a8b9c0d1e")
    assert dog.title == "小狗豆包" and dog.activation_count == 1  # 1.3 rounded; the name's timestamp dropped
    feel = brain.get(SPACE, "feel_202603162130_V072")
    assert feel.type == "feel" and "__feel__" not in feel.tags
    call = brain.get(SPACE, "3d4e5f607182")
    assert call.dont_surface and call.resolved


def test_dont_surface_memory_never_surfaces_even_asked_for_by_old_cue(brain):
    import_ombre_md(brain, FIXTURE, space=SPACE)
    turn = brain.turn(SPACE, "s", "以前那通电话之后她一下午没说话", now="2026-03-20T12:00:00+00:00", dry_run=True)
    assert turn.plan.explicit_old
    assert "3d4e5f607182" not in turn.item_ids()
    assert turn.explain("3d4e5f607182")["runtime_gate"]["reason"] == "dont_surface"


def test_deleted_memories_are_gone_and_stay_gone(brain):
    import_ombre_md(brain, FIXTURE, space=SPACE)
    for bid in DELETED:
        assert brain.get(SPACE, bid) is None
        assert brain.forget.is_suppressed(SPACE, brain.forget.source_digest(SPACE, f"ombre-md:{bid}"))
    turn = brain.turn(SPACE, "s", "以前搬家那天箱子堆到天花板", now="2026-04-10T12:00:00+00:00", dry_run=True)
    assert turn.plan.explicit_old and "0a1b2c3d4e5f" not in turn.item_ids() and "搬家" not in turn.rendered
    receipts = len(brain.forget.receipts(SPACE))
    assert receipts == len(DELETED)

    again = import_ombre_md(brain, FIXTURE, space=SPACE)  # idempotent, and no new purge
    assert (again.created, again.replaced, again.unchanged) == (0, 0, len(IMPORTED))
    assert len(again.skipped) == len(DELETED) and len(brain.forget.receipts(SPACE)) == receipts


def test_a_memory_deleted_after_an_earlier_import_is_forgotten(brain, tmp_path):
    vault = tmp_path / "vault"
    shutil.copytree(FIXTURE, vault)
    live = vault / "dynamic" / "宠物" / "2026-04-05 18-20-00 小狗豆包_6f7a8b9c0d1e.md"
    import_ombre_md(brain, vault, space=SPACE)
    assert brain.get(SPACE, "6f7a8b9c0d1e") is not None

    before = live.read_text(encoding="utf-8")  # the user deletes it in Ombre-Brain: stamped, moved to archive/
    deleted = vault / "archive" / live.name
    deleted.write_text(before.replace("domain:\n", "deleted_at: '2026-05-01T10:00:00'\ndomain:\n")
                       .replace("id: 6f7a", "erasure_mode: tombstone_only\nid: 6f7a"), encoding="utf-8")
    live.unlink()
    report = import_ombre_md(brain, vault, space=SPACE)
    assert brain.get(SPACE, "6f7a8b9c0d1e") is None
    assert any("1 imported earlier and now forgotten" in n for n in report.notes)

    live.write_text(before, encoding="utf-8")  # an old backup still has it live: it does not come back
    deleted.unlink()
    report = import_ombre_md(brain, vault, space=SPACE)
    assert brain.get(SPACE, "6f7a8b9c0d1e") is None
    assert [p.where.split("'")[1] for p in report.refused] == ["6f7a8b9c0d1e"]
    assert "was purged" in report.refused[0].reason


def test_a_backup_manifest_decides_which_copy_is_current(brain, tmp_path):
    repo = tmp_path / "backup"
    vault = repo / "ombre"
    shutil.copytree(FIXTURE, vault)
    (vault / "README.md").unlink()
    (repo / "README.md").write_text("# my Ombre-Brain backup\n", encoding="utf-8")
    (vault / "_media").mkdir()
    (vault / "_media" / "caption.md").write_text("a caption, not a bucket\n", encoding="utf-8")
    # The manifest lists the letters/history copy (restored since), not the archive/letter one the
    # folder ranking alone would pick: the manifest is the authority.
    current = set(p.relative_to(vault).as_posix() for p in vault.rglob("*.md")
                  if p.parts[len(vault.parts)] != "_media") - STALE
    current = (current - {"archive/letter/2026-01-10 23-05-41 写给三个月后的我们_e5d4c3b2a190.md"}) | {
        "letters/history/2026-01-10 23-05-41 写给三个月后的我们_e5d4c3b2a190.md"}
    files = []
    for rel in sorted(current):
        data = (vault / rel).read_bytes()
        files.append({"bytes": len(data), "path": rel, "sha256": hashlib.sha256(data).hexdigest()})
    files[0]["sha256"] = "0" * 64
    (vault / "_ombre_backup_manifest.json").write_text(json.dumps(
        {"branch": "main", "file_count": len(files), "files": files, "path_prefix": "ombre", "repo": "owner/backup",
         "schema_version": 1, "source": "ombre-brain"}, ensure_ascii=False), encoding="utf-8")

    report = import_ombre_md(brain, repo, space=SPACE)
    assert report.problems == [] and report.created == len(IMPORTED)
    stale = {Path(p.where).relative_to(vault).as_posix() for p in report.superseded}
    assert stale == (STALE - {"letters/history/2026-01-10 23-05-41 写给三个月后的我们_e5d4c3b2a190.md"}) | {
        "archive/letter/2026-01-10 23-05-41 写给三个月后的我们_e5d4c3b2a190.md"}
    assert all("not in the backup manifest" in p.reason for p in report.superseded)
    letter = brain.get(SPACE, "e5d4c3b2a190")
    assert letter.type == "letter" and not letter.archived
    assert any("1 file(s) differ from the backup manifest" in n for n in report.notes)
    assert any("2 .md file(s) outside the bucket folders" in n for n in report.notes)


@pytest.mark.parametrize("extra,marker", [
    ({"deleted_at": "2026-05-09T14:00:00"}, "deleted_at"),
    ({"tombstone": True}, "tombstone: true"),
    ({"tombstone": "true"}, "tombstone: true"),
    ({"tombstoned_at": "2026-05-09T14:00:00"}, "tombstoned_at"),
    ({"erasure_mode": "tombstone_only"}, "erasure_mode"),
    ({"type": "tombstone"}, "type: tombstone"),
    ({"deleted": True}, "deleted: true"),
    ({"erased_at": "2026-05-09"}, "erased_at"),
    ({"physical_erasure": True}, "physical_erasure: true"),
    ({"status": "deleted"}, "status: deleted"),
    ({"status": "erased"}, "status: erased"),
    ({"status": "Tombstone"}, "status: Tombstone"),
    ({"tombstone": False, "deleted_at": ""}, None),
    ({"type": "archived", "resolved": True}, None),
    ({"status": "resolved"}, None),
])
def test_every_soft_delete_variant_is_recognised(extra, marker):
    assert deletion_marker({"id": "x", "name": "n", **extra}) == marker


def test_naive_times_take_the_given_zone(tmp_path):
    f = FIXTURE / "dynamic" / "宠物" / "2026-04-05 18-20-00 小狗豆包_6f7a8b9c0d1e.md"
    data, _ = ombre_md_fields(f, FIXTURE, SPACE, naive_tz=naive_zone("+08:00"))
    assert data["created"] == "2026-04-05T18:20:00+08:00"
    assert naive_zone(None) is timezone.utc and naive_zone("UTC") is timezone.utc
    assert naive_zone("-05:30").utcoffset(None) == -timedelta(hours=5, minutes=30)
    assert str(naive_zone("Asia/Shanghai")) == "Asia/Shanghai"
    with pytest.raises(Exception, match="unknown time zone"):
        naive_zone("Mars/Olympus")


def test_cli_reads_the_vault_with_a_zone(tmp_path):
    r = subprocess.run([sys.executable, "-m", "ombre_brain.cli", "import", "--from", "ombre-md", "--space", SPACE,
                        "--tz", "+08:00", "--data", str(tmp_path / "data"), str(FIXTURE)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"imported {FIXTURE} into {SPACE}: 8 created, 0 replaced, 0 unchanged" in r.stdout
    assert "superseded (4):" in r.stdout and "skipped (4):" in r.stdout
    assert "read as UTC+08:00" in r.stdout
    assert "Traceback" not in r.stdout + r.stderr


def test_the_progress_bar_moves_during_the_writes_and_ends_full(brain, monkeypatch):
    """The bar counts every .md file once; the new memories tick once per write batch, not once at the end."""
    monkeypatch.setattr(portability, "IMPORT_BATCH", 3)
    ticks: list[int] = []
    report = import_ombre_md(brain, FIXTURE, space=SPACE, progress=ticks.append)
    assert report.created == 8 and ticks[-3:] == [3, 3, 2]
    assert sum(ticks) == _count_rows(FIXTURE, "ombre-md") == 17  # the CLI's bar total


def test_upper_case_suffixes_are_read_and_counted_once(brain, tmp_path):
    """A vault copied from Windows may say ``.MD``: read like ``.md``, and the bar's total still matches its ticks."""
    vault = shutil.copytree(FIXTURE, tmp_path / "vault")
    for md in [vault / "README.md", *(vault / "dynamic" / "日常").glob("*.md")]:
        md.rename(md.with_suffix(".MD"))
    ticks: list[int] = []
    report = import_ombre_md(brain, vault, space=SPACE, progress=ticks.append)
    assert report.created == 8
    assert min(ticks) >= 0 and sum(ticks) == _count_rows(vault, "ombre-md") == len(markdown_files(vault)) == 17
    assert any("1 .md file(s) outside the bucket folders" in n for n in report.notes), report.notes
