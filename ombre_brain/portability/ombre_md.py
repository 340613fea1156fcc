"""Migration from an Ombre-Brain store (``ombre-brain import --from ombre-md DIR --space S [--tz Z]``).

DIR is an Ombre-Brain vault (the folder holding ``dynamic/``, ``permanent/``, ``archive/``,
``feel/``, ``plans/``, ``letters/``) or a GitHub backup of one (a repository whose
``<prefix>/_ombre_backup_manifest.json`` names the vault). How one file maps onto §3 fields is
in :mod:`.ombre_md_map`. What this module decides is which files become memories:

- **Only bucket files.** Only the six bucket folders are walked (a backup's README, ``_media/``
  and ``_sources/`` are not memories). A folder with none of them is read as a flat folder of
  ``.md`` buckets.
- **One copy per id.** Ombre-Brain moves a file when a memory is pinned, archived, resolved or
  deleted, and a backup keeps the old path too, so one id can sit in two folders. With a backup
  manifest, the files it lists are the current ones and every other file is a stale copy.
  Without one, per id the copy ranked first wins: its folder agrees with its frontmatter (a
  pinned memory in ``permanent/``, a plan in ``plans/<status>/``), then the latest of
  ``last_active``, ``deleted_at``, ``tombstoned_at`` and its plan ``change_log``, then the later
  stage of life (deleted, archived, a closed plan, pinned). The others are reported as superseded.
- **Deleted stays deleted.** A memory the user deleted in Ombre-Brain (``deleted_at``,
  ``tombstone: true``, ``erasure_mode`` and the older variants) is not imported. Its source
  ``ombre-md:<id>`` is purged (with a receipt), which suppresses it, so no later import brings it
  back, and a copy imported before the deletion is forgotten.
- **Times.** Ombre-Brain writes naive server-local times; ``naive_tz`` (``--tz``) says which zone
  that was (UTC by default), and the report counts the naive times it read.

A file that cannot be read or mapped is reported with its path and reason; the others are
imported. Importing the same store again changes nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone, tzinfo
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..buckets import Bucket, bucket_from_dict, validate_space
from ..errors import OmbreError, ValidationError
from ..kinds.anchors import ANCHOR_LIMIT
from ..kinds.fields import kind_part
from ..kinds.letters import is_sealed
from ..timeutil import coerce_time
from .jsonl import ImportReport, Problem, apply_buckets
from .ombre_md_map import (
    BUCKET_ROOTS,
    Bad,
    bucket_id,
    deletion_marker,
    is_naive_time,
    map_fields,
    ombre_kind,
    ombre_md_fields,
    read_bucket_file,
    top_folder,
)

MANIFEST = "_ombre_backup_manifest.json"
TIME_KEYS = ("created", "last_active", "updated", "event_time")


def naive_zone(text: str | None) -> tzinfo:
    """The zone for naive times from ``--tz``: ``UTC`` (default), ``local``, ``+08:00`` or an IANA name."""
    if text is None or text.strip().upper() in ("", "UTC", "Z"):
        return timezone.utc
    t = text.strip()
    if t.lower() == "local":
        return datetime.now().astimezone().tzinfo or timezone.utc
    if t[0] in "+-" and t[1:3].isdigit():
        h, _, m = t[1:].partition(":")
        try:
            delta = timedelta(hours=int(h), minutes=int(m or 0))
            return timezone(delta if t[0] == "+" else -delta)
        except ValueError:
            pass
    try:
        return ZoneInfo(t)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValidationError(f"unknown time zone {text!r}: use UTC, local, an offset like +08:00, or a name like "
                              "Asia/Shanghai", field="tz") from None


@dataclass
class _Copy:
    """One readable bucket file: where it is and what its frontmatter says."""

    path: Path
    rel: str
    fm: dict
    body: str
    id: str

    @property
    def deleted(self) -> str | None:
        return deletion_marker(self.fm)


@dataclass
class _Found:
    vault: Path
    files: list[Path]
    manifest: dict[str, dict] | None = None
    notes: list[str] = field(default_factory=list)
    outside: int = 0  # .md files outside the bucket folders: not read, but counted, so a progress bar ends full


def _read_manifest(path: Path) -> dict[str, dict] | None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        files = doc["files"]
        return {str(f["path"]).replace("\\", "/"): f for f in files if isinstance(f, dict) and f.get("path")}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _has_roots(folder: Path) -> bool:
    return any((folder / r).is_dir() for r in BUCKET_ROOTS)


def markdown_files(root: Path) -> list[Path]:
    """Every Markdown file under ``root``, ``.md`` in any case: what an import reads and its progress bar counts."""
    return sorted(p for p in root.rglob("*") if p.suffix.lower() == ".md" and p.is_file())


def find_vault(root: Path) -> _Found:
    """The vault under ``root`` (itself, or the one folder below it holding the buckets or a manifest)."""
    candidates = [root] + sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    vault = next((c for c in candidates if (c / MANIFEST).is_file()), None)
    if vault is None:
        vault = next((c for c in candidates if _has_roots(c)), root)
    found = _Found(vault, [])
    if (vault / MANIFEST).is_file():
        found.manifest = _read_manifest(vault / MANIFEST)
        if found.manifest is None:
            found.notes.append(f"{vault / MANIFEST} is not a readable backup manifest; ignored")
    roots = [vault / r for r in BUCKET_ROOTS if (vault / r).is_dir()] or [vault]
    found.files = sorted(p for r in roots for p in markdown_files(r))
    if roots != [vault]:
        found.outside = outside = len(markdown_files(root)) - len(found.files)
        if outside:
            found.notes.append(f"{outside} .md file(s) outside the bucket folders ({', '.join(BUCKET_ROOTS)}) "
                               "were not read")
    return found


def _when(value: Any, naive_tz: tzinfo) -> float:
    try:
        dt = coerce_time(value, naive_tz)
    except ValueError:
        return float("-inf")
    return dt.timestamp() if dt is not None else float("-inf")


def _consistent(c: _Copy) -> bool:
    """Does the file sit in the folder its frontmatter implies? A stale copy usually does not."""
    top, kind = top_folder(c.rel), ombre_kind(c.fm, c.rel)
    if c.deleted or str(c.fm.get("type") or "").strip().lower() == "archived":
        return top == "archive"
    if kind == "plan":
        sub = c.rel.split("/")[1].lower() if c.rel.count("/") >= 2 else ""
        return top == "plans" and sub == str(c.fm.get("status") or "active").strip().lower()
    if kind == "permanent" or c.fm.get("pinned") is True:
        return top == "permanent"
    want = {"letter": "letters", "feel": "feel"}.get(kind, "dynamic")
    return top == want


def _lifecycle(c: _Copy) -> int:
    """Later stages of a memory's life rank higher: deleted, archived, a closed plan, pinned or permanent."""
    if c.deleted:
        return 4
    if str(c.fm.get("type") or "").strip().lower() == "archived" or top_folder(c.rel) == "archive":
        return 3
    if str(c.fm.get("status") or "").strip().lower() in ("resolved", "abandoned"):
        return 2
    return 1 if c.fm.get("pinned") is True or ombre_kind(c.fm, c.rel) == "permanent" else 0


def _rank(c: _Copy, naive_tz: tzinfo) -> tuple:
    log = c.fm.get("change_log")
    stamps = [c.fm.get(k) for k in ("last_active", "deleted_at", "tombstoned_at")]
    stamps += [e.get("ts") for e in log if isinstance(e, dict)] if isinstance(log, list) else []
    return (_consistent(c), max(_when(s, naive_tz) for s in stamps), _lifecycle(c), c.rel)


def _stale_by_manifest(found: _Found, report: ImportReport) -> list[Path]:
    """The files the manifest lists (checking bytes and sha256); every other one is reported as stale."""
    listed = found.manifest or {}
    keep = []
    changed = []
    for p in found.files:
        rel = p.relative_to(found.vault).as_posix()
        entry = listed.get(rel)
        if entry is None:
            report.superseded.append(Problem(str(p), "not in the backup manifest: a stale copy left at an old path"))
            continue
        data = p.read_bytes()
        if entry.get("bytes") not in (None, len(data)) or entry.get("sha256") not in (
                None, hashlib.sha256(data).hexdigest()):
            changed.append(rel)
        keep.append(p)
    missing = sorted(set(listed) - {p.relative_to(found.vault).as_posix() for p in found.files})
    if changed:
        report.notes.append(f"{len(changed)} file(s) differ from the backup manifest (edited since?), imported as "
                            f"they are: {', '.join(changed[:10])}")
    if missing:
        report.notes.append(f"{len(missing)} file(s) in the backup manifest are missing: {', '.join(missing[:10])}")
    return keep


def _forget_deleted(brain, space: str, copies: list[_Copy], report: ImportReport) -> None:
    """Purge (and so suppress) the source of each memory deleted in Ombre-Brain, once."""
    new = forgotten = 0
    for c in copies:
        source = f"ombre-md:{c.id}"
        where = f"{c.path} (bucket '{c.id}')"
        report.skipped.append(Problem(where, f"deleted in Ombre-Brain ({c.deleted}): not imported"))
        try:
            old = brain.store.get(space, c.id)
            if old is not None and old.source and old.source.startswith("ombre-md:") and old.source != source:
                brain.purge(space, bucket_ids=[c.id])  # imported before under a path source
                forgotten += 1
            if not brain.forget.is_suppressed(space, brain.forget.source_digest(space, source)):
                receipt = brain.purge(space, source=source)
                new += 1
                forgotten += int(receipt["payload"]["deleted"].get("buckets", 0))
        except OmbreError as exc:
            report.problems.append(Problem(where, f"deleted in Ombre-Brain, but its suppression could not be "
                                                  f"recorded: {exc.message}"))
    if new:
        report.notes.append(f"{new} deleted memor{'ies' if new != 1 else 'y'} suppressed (source ombre-md:<id> "
                            f"purged, with receipts), so a later import does not bring them back"
                            + (f"; {forgotten} imported earlier and now forgotten" if forgotten else ""))


def import_ombre_md(brain, folder: str | Path, *, space: str, naive_tz: tzinfo = timezone.utc,
                    progress: Callable[[int], None] | None = None) -> ImportReport:
    """Migrate an Ombre-Brain vault (or a backup of one) into ``space``; every file is accounted for."""
    validate_space(space)
    root = Path(folder)
    if not root.is_dir():
        raise ValidationError(f"{root}: no such folder (--from ombre-md takes Ombre-Brain's bucket folder)")
    found = find_vault(root)
    if not found.files:
        raise ValidationError(f"{root}: no .md files found")
    report = ImportReport(source=str(root), space=space)
    report.notes += found.notes

    def tick(n: int = 1) -> None:
        if progress is not None:
            progress(n)

    files = _stale_by_manifest(found, report) if found.manifest is not None else found.files
    tick(found.outside + len(found.files) - len(files))
    copies: dict[str, list[_Copy]] = {}
    for path in files:
        try:
            fm, body = read_bucket_file(path)
        except Bad as exc:
            report.problems.append(Problem(str(path), str(exc)))
        except OSError as exc:
            report.problems.append(Problem(str(path), f"cannot read: {exc.strerror}"))
        else:
            c = _Copy(path, path.relative_to(found.vault).as_posix(), fm, body, bucket_id(fm, path.stem))
            copies.setdefault(c.id, []).append(c)
            continue
        tick()
    winners: list[_Copy] = []
    for group in copies.values():
        ranked = sorted(group, key=lambda c: _rank(c, naive_tz), reverse=True)
        winners.append(ranked[0])
        for c in ranked[1:]:
            report.superseded.append(Problem(str(c.path), f"id {c.id!r} is also in {ranked[0].rel}, the current "
                                                          "copy, which was used instead"))
            tick()
    deleted = [c for c in winners if c.deleted]
    _forget_deleted(brain, space, deleted, report)
    tick(len(deleted))
    items, unmapped, naive = _map_live([c for c in winners if not c.deleted], brain, space, naive_tz, report, tick)
    if unmapped:
        shown = ", ".join(f"{k} ({n} file{'s' if n != 1 else ''})" for k, n in sorted(unmapped.items()))
        report.notes.append(f"frontmatter keys not mapped: {shown}")
    if naive:
        zone = getattr(naive_tz, "key", None) or str(naive_tz)
        report.notes.append(f"{naive} time(s) without a UTC offset were read as {zone} (Ombre-Brain writes its "
                            "server's local time; pass --tz if that was another zone)")
    apply_buckets(brain, space, items, report, progress)
    _kinds_note(brain, space, [b for _, b in items], report)
    return report


def _kinds_note(brain, space: str, buckets: list[Bucket], report: ImportReport) -> None:
    """Say what became letters, plans and self entries, and what the anchor cap means for this space."""
    now = datetime.now(timezone.utc)
    letters = [b for b in buckets if b.type == "letter"]
    plans = Counter((kind_part(b, "plan") or {}).get("status") for b in buckets if b.type == "plan")
    stages = Counter((kind_part(b, "self") or {}).get("stage") for b in buckets if kind_part(b, "self"))
    if letters or plans or stages:
        report.notes.append(
            f"kinds: {len(letters)} letter(s) ({sum(1 for b in letters if is_sealed(b, now))} sealed now), "
            f"{sum(plans.values())} plan(s) ({', '.join(f'{s} {n}' for s, n in sorted(plans.items())) or 'none'}), "
            f"self entries: {stages.get('formal', 0)} formal, {stages.get('candidate', 0)} candidate(s), "
            f"{stages.get('promoted', 0)} promoted candidate(s)")
    anchors = len(brain.anchors.anchored(space)) if hasattr(brain, "anchors") else 0
    if anchors > ANCHOR_LIMIT:
        report.notes.append(f"{anchors} anchors in space {space}: all were imported, above Ombre-Brain's cap of "
                            f"{ANCHOR_LIMIT}; they stay anchors, and anchor() refuses new ones until "
                            f"{anchors - ANCHOR_LIMIT + 1} are released")


def _map_live(copies: list[_Copy], brain, space: str, naive_tz: tzinfo, report: ImportReport,
              tick: Callable[..., None]) -> tuple[list[tuple[str, Bucket]], dict[str, int], int]:
    """Map and validate each live winner; also refuses one whose old path source was purged."""
    validate = getattr(brain, "_validated", None)
    items: list[tuple[str, Bucket]] = []
    unmapped: dict[str, int] = {}
    naive = 0
    for c in sorted(copies, key=lambda c: c.rel):
        legacy = f"ombre-md:{c.rel}"  # the source an earlier version of this importer gave it
        if brain.forget.is_suppressed(space, brain.forget.source_digest(space, legacy)):
            report.refused.append(Problem(f"{c.path} (bucket '{c.id}')", f"source {legacy!r} was purged from "
                                                                         f"space {space!r}; not stored again"))
            tick()
            continue
        try:
            data, extra = map_fields(c.fm, c.body, rel=c.rel, stem=c.path.stem, space=space, naive_tz=naive_tz,
                                     mtime=c.path.stat().st_mtime)
            bucket = validate(data, None) if callable(validate) else bucket_from_dict(data, limits=brain.limits)
        except Bad as exc:
            report.problems.append(Problem(str(c.path), str(exc)))
        except ValidationError as exc:
            report.problems.append(Problem(str(c.path), exc.message))
        else:
            items.append((str(c.path), bucket))
            naive += sum(1 for k in TIME_KEYS if is_naive_time(c.fm.get(k)))
            for k in extra:
                unmapped[k] = unmapped.get(k, 0) + 1
            continue
        tick()
    return items, unmapped, naive


__all__ = ["find_vault", "import_ombre_md", "naive_zone", "ombre_md_fields"]
