"""The learned models' commands: `fit-writer` (the write decision, on labelled exchanges), `fit-reader` (the reader,
on authored memory stores) and `fit-supersede` (the profile's changed-fact model, on stores of facts that changed)."""

from __future__ import annotations

from ..evaluate import fit_reader as reader
from ..evaluate import fit_supersede as supersede
from ..evaluate.fit_writer import default_out, fit_writer, format_fit
from .recall import _require_files, _show


def cmd_fit_writer(args) -> int:
    _require_files(args.data)
    blocks = [b.strip() for b in args.blocks.split(",") if b.strip()]
    out = None if args.dry_run else (args.out or default_out())
    res = fit_writer(args.data, config=args.config, blocks=blocks, model_id=args.id, l2=args.l2, folds=args.folds,
                     out=out, user_model=args.user_model)
    return _show(res, args.json, format_fit)


def cmd_fit_reader(args) -> int:
    _require_files(args.data)
    out = None if args.dry_run else (args.out or reader.default_out())
    res = reader.fit_reader(args.data, config=args.config, folds=args.folds, out=out, model_id=args.id,
                            rows_file=args.rows)
    return _show(res, args.json, reader.format_reader_fit)


def cmd_fit_supersede(args) -> int:
    _require_files(args.data)
    out = None if args.dry_run else (args.out or supersede.default_out())
    res = supersede.fit_supersede(args.data, config=args.config, folds=args.folds, out=out, model_id=args.id)
    return _show(res, args.json, supersede.format_supersede_fit)
