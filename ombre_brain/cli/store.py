"""The data directory: `export`, `import`, `doctor`, `reindex`, `purge`, `verify-receipt` and `migrate-ledger`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..config import load_config
from ..errors import ValidationError
from ..forget import receipts
from ..forget.keys import verification_secrets
from ..forget.purge import answer
from ..portability.jsonl import export_rows, import_jsonl, write_export
from ..portability.migrate_ledger import migrate_ledger
from ..portability.ombre_md import import_ombre_md, markdown_files, naive_zone
from ..portability.read_only import open_reader
from ..store.doctor import describe_space, doctor
from .common import open_brain, print_json, progress_bar


def cmd_export(args) -> int:
    """Read-only: the ledger alone, without the data directory's lock, so it runs beside `serve`."""
    with open_reader(args.data, args.config) as reader:
        header, rows = export_rows(reader, args.space)
        bar = progress_bar(len(rows), "export")
        try:
            write_export(header, rows, args.out, progress=bar.update)
        finally:
            bar.close()
    c = header["counts"]
    print(f"exported space {args.space}: {c['buckets']} buckets, {c['edges']} edges, {c['facts']} facts -> "
          f"{args.out}", file=sys.stderr if str(args.out) == "-" else sys.stdout)
    return 0


def _count_rows(path: Path, fmt: str) -> int:
    try:
        if fmt == "ombre-md":
            return len(markdown_files(path)) if path.is_dir() else 0
        with path.open("rb") as f:
            return max(0, sum(1 for _ in f) - 1)
    except OSError:
        return 0


def cmd_import(args) -> int:
    fmt = args.from_format or "jsonl"
    if fmt == "ombre-md" and not args.space:
        raise ValidationError("--space is required with --from ombre-md (the space to migrate into)")
    if getattr(args, "tz", None) and fmt != "ombre-md":
        raise ValidationError("--tz applies to --from ombre-md only (an export's times carry their offsets)")
    naive_tz = naive_zone(getattr(args, "tz", None))
    path = Path(args.path)
    with open_brain(args) as brain:
        bar = progress_bar(_count_rows(path, fmt), "import")
        try:
            if fmt == "ombre-md":
                report = import_ombre_md(brain, path, space=args.space, naive_tz=naive_tz, progress=bar.update)
            else:
                report = import_jsonl(brain, path, space=args.space, progress=bar.update)
        finally:
            bar.close()
    print(report.summary())
    return 0 if report.ok else 1


def cmd_doctor(args) -> int:
    with open_brain(args) as brain:
        report = doctor(brain)
    print(f"lock: {report['lock']}")
    rec = report["reconciled"]
    print(f"reconciled on open: {rec['rolled_forward']} writes rolled forward, {rec['deleted']} deletes finished")
    for space, e in report["spaces"].items():
        print("\n".join(describe_space(space, e)))
    if report["orphan_collections"]:
        print(f"orphan Chroma collections (spaces unknown to the ledger): {', '.join(report['orphan_collections'])}")
        print(f"  repaired: {report.get('repaired_collections', 'not repaired')}")
    if report["consistent"]:
        print(f"consistent: {len(report['spaces'])} spaces checked, nothing to repair")
        return 0
    if report["consistent_after"]:
        print(f"repaired {report['issues']} problems; the store is now consistent")
        return 0
    print("inconsistencies remain after repair (see above)", file=sys.stderr)
    return 1


def cmd_reindex(args) -> int:
    with open_brain(args) as brain:
        print_json(brain.store.reindex(args.space))
    return 0


EXIT_NOTHING_MATCHED = 3


def cmd_purge(args) -> int:
    """Exit 0 when something was purged, 3 when the target matched nothing (the receipt says so too)."""
    named = [flag for flag, given in (("--bucket", args.bucket_ids), ("--source", args.source is not None),
                                      ("--whole-space", args.whole_space)) if given]
    if len(named) != 1:
        raise ValidationError("name exactly one target: --bucket ID (repeatable), --source S or --whole-space; "
                              f"got {' and '.join(named) or 'none'}")
    with open_brain(args) as brain:
        receipt = brain.purge(args.space, bucket_ids=args.bucket_ids, source=args.source,
                              whole_space=bool(args.whole_space))
    out = answer(receipt)
    print_json(out)
    return EXIT_NOTHING_MATCHED if out["status"] == receipts.NOTHING_MATCHED else 0


def cmd_verify_receipt(args) -> int:
    """Exit 0 when the receipt verifies, 1 when it does not, 2 when it cannot be checked (config, file)."""
    config = load_config(*(f for f in (args.config,) if f))
    try:
        with open(args.file, encoding="utf-8") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValidationError(f"cannot read receipt file {args.file}: {exc}") from None
    try:
        document = json.loads(text)
        receipt = receipts.unwrap(document)
        kid = receipt["payload"]["kid"]
        receipts.verify(receipt, verification_secrets(config, kid, Path(args.data)))
    except json.JSONDecodeError as exc:
        print(f"invalid: {args.file} is not JSON ({exc.msg} at line {exc.lineno})", file=sys.stderr)
        return 1
    except ValidationError as exc:
        print(f"invalid: {exc.message}", file=sys.stderr)
        return 1
    p = receipt["payload"]
    print(f"ok: receipt {p.get('purge_id')} (space {p.get('space')}) verified with key {kid}")
    return 0


def cmd_migrate_ledger(args) -> int:
    """`ombre-brain migrate-ledger --from DIR --to postgresql://…`: an embedded ledger into PostgreSQL."""
    config = load_config(*(f for f in (args.config,) if f))
    bar = progress_bar(None, "copy")
    try:
        report = migrate_ledger(args.source, args.to, config, progress=lambda _table, n: bar.update(n))
    finally:
        bar.close()
    if args.json:
        print_json(report)
        return 0
    rows = sum(report["tables"].values())
    if report["status"] == "already_migrated":
        print(f"already migrated: {report['to']} holds store {report['store_id']} with the same "
              f"{len(report['tables'])} tables ({rows} rows); nothing was copied")
    else:
        print(f"copied {rows} rows in {len(report['tables'])} tables from {report['from']} into {report['to']}")
        for table, n in sorted(report["tables"].items()):
            if n:
                print(f"  {table}: {n}")
    print(f"vectors: {report['vectors']}")
    print("next: set store.ledger.url (and forget.keys) in every process's config, start them, and run "
          "`ombre-brain doctor` once with that config (docs/deploy.md)")
    return 0
