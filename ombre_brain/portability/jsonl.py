"""Backup and restore: a portable, versioned JSONL export of one space, and its import.

Export format, version 1 (one JSON object per line, UTF-8)::

    {"format": "ombre-brain-export", "version": 1, "space": S, "exported_at": ISO,
     "model_id": M, "counts": {"buckets": n, "edges": n, "facts": n}}
    {"kind": "bucket", "id": …, "space": S, …every §3 field…}
    {"kind": "edge", "space": S, "from_id": …, "to_id": …, "relation": …, "confidence": …}
    {"kind": "fact", "record_id": …, "space": S, …what FactsStore.export gives…}

No embeddings are written: an import re-embeds with the configured model, so an export moves
between embedders and stores. The header's counts let an import detect a truncated file. Only
live material is exported: purged buckets are gone from the ledger, and a bucket whose source
identity was purged is left out even if it came back some other way.

Every §3 field travels, flags included (``dont_surface`` too: a memory the user asked never to
surface stays unsurfaced after a restore; an export without it reads as false).

An import checks every line before it writes anything and names each bad line; it keeps ids,
so importing the same file again changes nothing (identical buckets are skipped, differing
ones are replaced by the file's version). ``--space`` imports into another space, except a sealed
letter: its words stay in the space whose sides it belongs to until its lock opens.

Migration from Ombre-Brain's markdown buckets (``--from ombre-md``) lives in :mod:`.ombre_md`.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import IO

from ..buckets import Bucket, bucket_from_dict, validate_space
from ..errors import ConflictError, NotFoundError, OmbreError, ValidationError
from ..kinds.letters import is_sealed
from ..store.edges import RELATIONS

FORMAT = "ombre-brain-export"
VERSION = 1
KINDS = ("bucket", "edge", "fact")
EDGE_FIELDS = ("space", "from_id", "to_id", "relation", "confidence")
MAX_SHOWN = 25  # problems listed in an error message; the report object keeps all of them
IMPORT_BATCH = 32  # memories a write batch: the bar moves once a batch, a few s of e5 (its vectors do not depend on it)

_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}$")


@dataclass(frozen=True)
class Problem:
    """One rejected piece of input: where it is (``line 12`` or a file path) and why."""

    where: str
    reason: str

    def __str__(self) -> str:
        return f"{self.where}: {self.reason}"


class ImportProblems(ValidationError):
    """Raised when an import file has bad lines; nothing was written. ``problems`` lists them all."""

    code = "bad_import"

    def __init__(self, source: str, problems: list[Problem]) -> None:
        shown = "\n".join(f"  {p}" for p in problems[:MAX_SHOWN])
        more = f"\n  … and {len(problems) - MAX_SHOWN} more" if len(problems) > MAX_SHOWN else ""
        n = len(problems)
        super().__init__(f"{source}: {n} problem{'s' if n != 1 else ''}, nothing imported:\n{shown}{more}")
        self.problems = problems


@dataclass
class ImportReport:
    """What an import did; ``problems`` are rejected inputs, ``refused`` are rows policy kept out.

    A migration also names what it left out on purpose, which is no failure: ``superseded``
    (stale copies of a memory imported from another file) and ``skipped`` (memories deleted at
    the source).
    """

    source: str
    space: str | None = None
    created: int = 0
    replaced: int = 0
    unchanged: int = 0
    edges: int = 0
    facts: int = 0
    refused: list[Problem] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    superseded: list[Problem] = field(default_factory=list)
    skipped: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and not self.refused

    def to_dict(self) -> dict:
        return {
            "source": self.source, "space": self.space, "created": self.created, "replaced": self.replaced,
            "unchanged": self.unchanged, "edges": self.edges, "facts": self.facts,
            "refused": [str(p) for p in self.refused], "problems": [str(p) for p in self.problems],
            "notes": list(self.notes), "superseded": [str(p) for p in self.superseded],
            "skipped": [str(p) for p in self.skipped],
        }

    def summary(self) -> str:
        lines = [f"imported {self.source} into {self.space}: {self.created} created, {self.replaced} replaced, "
                 f"{self.unchanged} unchanged; {self.edges} edges, {self.facts} facts"]
        lines += [f"note: {n}" for n in self.notes]
        for label, items in (("superseded", self.superseded), ("skipped", self.skipped)):
            if items:
                lines.append(f"{label} ({len(items)}):")
                lines += [f"  {p}" for p in items]
        if self.refused:
            lines.append(f"refused {len(self.refused)}:")
            lines += [f"  {p}" for p in self.refused]
        if self.problems:
            lines.append(f"not imported ({len(self.problems)}):")
            lines += [f"  {p}" for p in self.problems]
        return "\n".join(lines)


# ---------------------------------------------------------------- export


def _snapshot(ledger):
    """One read transaction, so buckets and edges come from the same moment of the ledger."""
    return ledger.snapshot()


def _suppressed(brain, bucket: Mapping) -> bool:
    if not bucket.get("source"):
        return False
    try:
        brain.forget.check_source(bucket["space"], bucket["source"])
    except ConflictError:
        return True
    return False


def export_rows(brain, space: str) -> tuple[dict, list[dict]]:
    """The export of one space as (header, rows), without writing anything."""
    validate_space(space)
    with _snapshot(brain.ledger) as conn:  # the facts store joins this read transaction: one consistent view
        model_id, buckets, edges = brain.store.export_rows(conn, space)
        facts = list(brain.facts.export(space))
    if model_id is None and not buckets and not facts:
        spaces = ", ".join(brain.spaces()) or "none"
        raise NotFoundError(f"space {space!r} has nothing to export (spaces in this store: {spaces})")
    buckets = [b for b in buckets if not _suppressed(brain, b)]
    live = {b["id"] for b in buckets}
    edges = [e for e in edges if e["from_id"] in live and e["to_id"] in live]
    rows = [{"kind": "bucket", **b} for b in buckets]
    rows += [{"kind": "edge", "space": space, **e} for e in edges]
    rows += [{"kind": "fact", **f, "space": space} for f in facts]
    counts = {"buckets": len(buckets), "edges": len(edges), "facts": len(facts)}
    header = {"format": FORMAT, "version": VERSION, "space": space,
              "exported_at": datetime.now(timezone.utc).isoformat(),
              "model_id": model_id, "counts": counts}
    return header, rows


def export_space(brain, space: str, out: str | Path | IO[str], *, progress: Callable[[int], None] | None = None
                 ) -> dict:
    """Write one space as JSONL to a path (atomically), ``-`` (stdout) or a text stream; returns the header."""
    header, rows = export_rows(brain, space)
    write_export(header, rows, out, progress=progress)
    return header


def write_export(header: dict, rows: list[dict], out: str | Path | IO[str], *,
                 progress: Callable[[int], None] | None = None) -> None:
    """Write what :func:`export_rows` gave, atomically when ``out`` is a path."""
    space = header["space"]

    def write(stream: IO[str]) -> None:
        stream.write(_line(header))
        for row in rows:
            stream.write(_line(row))
            if progress is not None:
                progress(1)

    if hasattr(out, "write"):
        write(out)  # type: ignore[arg-type]
    elif str(out) == "-":
        write(sys.stdout)
    else:
        path = Path(out)
        if path.is_dir():
            raise ValidationError(f"{path} is a directory; give a file name such as {path / (space + '.jsonl')}",
                                  field="out")
        if not path.parent.exists():
            raise ValidationError(f"folder {path.parent} does not exist", field="out")
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
                write(f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def _line(obj: Mapping) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n"


# ---------------------------------------------------------------- JSONL import


@dataclass
class _Parsed:
    header: dict
    buckets: list[tuple[int, Bucket]] = field(default_factory=list)
    edges: list[tuple[int, dict]] = field(default_factory=list)
    facts: list[tuple[int, dict]] = field(default_factory=list)
    claims: dict[str, list[str]] = field(default_factory=dict)  # bucket id -> its other sources


def _read_lines(path: Path) -> Iterator[tuple[int, str | Problem]]:
    """(line number, text) per line; a line that is not UTF-8 comes back as a Problem."""
    try:
        f = path.open("rb")
    except FileNotFoundError:
        raise ValidationError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ValidationError(f"{path} is a directory; a JSONL import takes a file (use --from ombre-md "
                              "for a folder of markdown buckets)") from None
    except OSError as exc:
        raise ValidationError(f"{path}: cannot read: {exc.strerror}") from None
    with f:
        for n, raw in enumerate(f, 1):
            if n == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            try:
                yield n, raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as exc:
                yield n, Problem(f"line {n}", f"not UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})")


def _json_line(n: int, text: str) -> dict | Problem:
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        return Problem(f"line {n}", f"malformed JSON at column {exc.colno}: {exc.msg}")
    if not isinstance(obj, dict):
        return Problem(f"line {n}", f"expected a JSON object, got {type(obj).__name__}")
    return obj


def _check_header(obj: dict | Problem, source: str) -> dict:
    if isinstance(obj, Problem):
        raise ImportProblems(source, [Problem(obj.where, f"{obj.reason} (the first line must be the "
                                                                  f'{{"format": "{FORMAT}", …}} header)')])
    problems = []
    if obj.get("format") != FORMAT:
        problems.append(Problem("line 1", f"not an Ombre Brain export: expected \"format\": \"{FORMAT}\", got "
                                          f"{json.dumps(obj.get('format'), ensure_ascii=False)[:60]}"))
    version = obj.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        problems.append(Problem("line 1", f"expected \"version\": {VERSION}, got {json.dumps(version)[:40]}"))
    elif version > VERSION:
        problems.append(Problem("line 1", f"written by a newer Ombre Brain (format version {version}); this one "
                                          f"reads version {VERSION}"))
    try:
        validate_space(obj.get("space"))
    except ValidationError as exc:
        problems.append(Problem("line 1", exc.message))
    counts = obj.get("counts")
    if counts is not None and (not isinstance(counts, dict) or not all(
            isinstance(counts.get(k, 0), int) and not isinstance(counts.get(k, 0), bool)
            for k in ("buckets", "edges", "facts"))):
        problems.append(Problem("line 1", "counts: expected {buckets, edges, facts} as integers"))
    if problems:
        raise ImportProblems(source, problems)
    return obj


def parse_export(path: str | Path, *, brain, space: str | None = None) -> _Parsed:
    """Read and check a whole export; raises ImportProblems naming every bad line."""
    path = Path(path)
    lines = _read_lines(path)
    first = next(lines, None)
    if first is None:
        raise ValidationError(f"{path}: the file is empty (an export starts with a \"{FORMAT}\" header line)")
    n, text = first
    if isinstance(text, Problem):
        raise ImportProblems(str(path), [text])
    header = _check_header(_json_line(n, text), str(path))
    source_space = header["space"]
    target = validate_space(space) if space is not None else source_space
    parsed = _Parsed(header)
    problems: list[Problem] = []
    seen_ids: dict[str, int] = {}
    for n, text in lines:
        if isinstance(text, Problem):
            problems.append(text)
            continue
        if not text.strip():
            continue
        obj = _json_line(n, text)
        if isinstance(obj, Problem):
            problems.append(obj)
            continue
        kind = obj.pop("kind", None)
        if kind not in KINDS:
            problems.append(Problem(f"line {n}", f"unknown kind {json.dumps(kind, ensure_ascii=False)[:40]} "
                                                 f"(expected one of {', '.join(KINDS)})"))
            continue
        if obj.get("space") != source_space:
            shown = json.dumps(obj.get("space"), ensure_ascii=False)[:60]
            problems.append(Problem(f"line {n}", f"{kind} is in space {shown} but the header says {source_space!r}"))
            continue
        obj["space"] = target
        if kind == "bucket":
            bid = obj.get("id")
            if not isinstance(bid, str) or not bid:
                problems.append(Problem(f"line {n}", "bucket has no id (an export keeps every bucket's id)"))
                continue
            if bid in seen_ids:
                problems.append(Problem(f"line {n}", f"bucket {bid!r} appears twice (first at line {seen_ids[bid]})"))
                continue
            seen_ids[bid] = n
            others = obj.pop("sources", [])
            if not isinstance(others, list) or not all(isinstance(x, str) and len(x) <= 512 for x in others):
                problems.append(Problem(f"line {n}", f"bucket {bid!r}: sources must be a list of source strings"))
                continue
            parsed.claims[bid] = others
            try:
                parsed.buckets.append((n, bucket_from_dict(obj, limits=brain.limits)))
            except ValidationError as exc:
                problems.append(Problem(f"line {n}", f"bucket {bid!r}: {exc.message}"))
        elif kind == "edge":
            problem = _check_edge(n, obj)
            if problem is not None:
                problems.append(problem)
            else:
                parsed.edges.append((n, obj))
        else:
            problem = _check_fact(n, obj, brain)
            if problem is not None:
                problems.append(problem)
            else:
                parsed.facts.append((n, obj))
    problems += _check_edge_ends(parsed, brain, target)
    counts = header.get("counts")
    if isinstance(counts, dict) and not problems:
        found = {"buckets": len(parsed.buckets), "edges": len(parsed.edges), "facts": len(parsed.facts)}
        for k, v in found.items():
            if k in counts and counts[k] != v:
                problems.append(Problem("header", f"says {counts[k]} {k} but the file holds {v} (truncated or "
                                                  "edited file?)"))
    if problems:
        raise ImportProblems(str(path), problems)
    return parsed


def _check_edge(n: int, obj: dict) -> Problem | None:
    where = f"line {n}"
    unknown = sorted(set(obj) - set(EDGE_FIELDS))
    if unknown:
        return Problem(where, f"edge has unknown field(s) {', '.join(unknown)}")
    for key in ("from_id", "to_id"):
        if not isinstance(obj.get(key), str) or not _ID_RE.fullmatch(obj[key]):
            return Problem(where, f"edge {key}: expected a bucket id, got {json.dumps(obj.get(key))[:40]}")
    if obj["from_id"] == obj["to_id"]:
        return Problem(where, "edge joins a bucket to itself")
    if obj.get("relation") not in RELATIONS:
        return Problem(where, f"edge relation: expected one of {', '.join(RELATIONS)}, got "
                              f"{json.dumps(obj.get('relation'), ensure_ascii=False)[:40]}")
    c = obj.get("confidence")
    if isinstance(c, bool) or not isinstance(c, int | float) or not 0 <= c <= 1:
        return Problem(where, f"edge confidence: expected a number between 0 and 1, got {json.dumps(c)[:40]}")
    return None


def _check_fact(n: int, obj: dict, brain) -> Problem | None:
    rid = obj.get("record_id")
    if not isinstance(rid, str) or not rid:
        return Problem(f"line {n}", "fact has no record_id")
    try:
        from ..facts.restore import parse_record
    except ImportError:  # no facts capability in this build: restoring will say so
        return None
    try:
        parse_record(obj, 0, brain.config.facts.max_conditions)
    except ValidationError as exc:
        return Problem(f"line {n}", f"fact {rid!r}: {exc.message.replace('records[0].', '')}")
    return None


def _check_edge_ends(parsed: _Parsed, brain, target: str) -> list[Problem]:
    in_file = {b.id for _, b in parsed.buckets}
    wanted = {e[k] for _, e in parsed.edges for k in ("from_id", "to_id")} - in_file
    in_store = set(brain.store.get_many(target, wanted)) if wanted else set()
    problems = []
    for n, e in parsed.edges:
        for key in ("from_id", "to_id"):
            if e[key] not in in_file and e[key] not in in_store:
                problems.append(Problem(f"line {n}", f"edge {e['from_id']}->{e['to_id']}: {key} {e[key]!r} is "
                                                     f"neither in the file nor in space {target!r}"))
                break
    return problems


def import_jsonl(brain, path: str | Path, *, space: str | None = None,
                 progress: Callable[[int], None] | None = None) -> ImportReport:
    """Restore an export into ``space`` (default: the export's own), re-embedding; idempotent by id."""
    parsed = parse_export(path, brain=brain, space=space)
    target = space or parsed.header["space"]
    report = ImportReport(source=str(path), space=target)
    model = parsed.header.get("model_id")
    if parsed.buckets and model and model != brain.embedder.model_id:
        report.notes.append(f"exported with {model}; re-embedded with {brain.embedder.model_id}")
    crossing, now = target != parsed.header["space"], datetime.now(timezone.utc)
    sealed = {b.id for _, b in parsed.buckets if crossing and is_sealed(b, now)}  # a sealed letter stays in its space
    report.refused += [Problem(f"line {n}", f"letter {b.id!r} is sealed: it is not copied into another space while "
                                            "its lock holds") for n, b in parsed.buckets if b.id in sealed]
    refused_ids = sealed | apply_buckets(brain, target, [(f"line {n}", b) for n, b in parsed.buckets
                                                         if b.id not in sealed], report, progress)
    brain.store.add_claims(target, [(bid, src) for bid, srcs in parsed.claims.items() if bid not in refused_ids
                                    for src in srcs if not src or not brain.forget.is_suppressed(
                                        target, brain.forget.source_digest(target, src))])
    existing = {(e.from_id, e.to_id, e.relation): e.confidence for e in brain.store.edges(target)}
    for n, e in parsed.edges:
        if e["from_id"] in refused_ids or e["to_id"] in refused_ids:
            report.refused.append(Problem(f"line {n}", f"edge {e['from_id']}->{e['to_id']}: an end was refused"))
            continue
        key = (e["from_id"], e["to_id"], e["relation"])
        if existing.get(key) != float(e["confidence"]):
            brain.store.add_edge(target, e["from_id"], e["to_id"], e["relation"], float(e["confidence"]))
            report.edges += 1
    if parsed.facts:
        _apply_facts(brain, target, parsed.facts, report)
    return report


def apply_buckets(brain, space: str, items: list[tuple[str, Bucket]], report: ImportReport,
                   progress: Callable[[int], None] | None) -> set[str]:
    """Create new ids, replace differing ones, skip identical ones; returns the ids refused as suppressed."""
    allowed: list[tuple[str, Bucket]] = []
    refused: set[str] = set()
    for where, b in items:
        try:
            if b.source:
                brain.forget.check_source(b.space, b.source)
        except ConflictError as exc:
            report.refused.append(Problem(f"{where} (bucket '{b.id}')", exc.message))
            refused.add(b.id)
            if progress is not None:
                progress(1)
            continue
        allowed.append((where, b))
    current = brain.store.get_many(space, [b.id for _, b in allowed]) if allowed else {}
    fresh: list[Bucket] = []
    for _, b in allowed:
        old = current.get(b.id)
        if old is None:
            fresh.append(b)
            continue
        if old.to_dict() == b.to_dict():
            report.unchanged += 1
        else:
            brain.store.update(b)
            report.replaced += 1
        if progress is not None:
            progress(1)
    if not fresh:
        return refused
    results = brain.store.write_many(fresh, dedupe=False, progress=progress, batch_size=IMPORT_BATCH)
    report.created += sum(1 for _, created in results if created)
    return refused


def _apply_facts(brain, space: str, facts: list[tuple[int, dict]], report: ImportReport) -> None:
    try:
        result = brain.facts.restore(space, [f for _, f in facts])
    except OmbreError as exc:  # e.g. a record here with other content: the buckets stay, the facts are named
        report.problems.append(Problem(f"lines {facts[0][0]}-{facts[-1][0]}", f"facts not restored: {exc.message}"))
        return
    report.facts += int(result if isinstance(result, int) else len(facts))


__all__ = [
    "FORMAT", "VERSION", "ImportProblems", "ImportReport", "Problem", "export_rows", "export_space",
    "apply_buckets", "import_jsonl", "parse_export", "write_export",
]
