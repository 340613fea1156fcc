"""Recall quality and speed: `replay`, `eval`, `bench`, and `config check`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

from ..config import load_config
from ..errors import ValidationError
from ..evaluate.bench import format_bench, plot_turn_p95, run_bench
from ..evaluate.bench_check import check_run, check_shape, format_checks, read_recorded
from ..evaluate.bench_playground import bench_playground, format_playground
from ..evaluate.calibrate import STORE_FREE, calibrate, format_calibration, write_overlay
from ..evaluate.conversation import eval_conversation, format_conversation
from ..evaluate.inject import eval_inject, format_inject
from ..evaluate.longmemeval import eval_longmemeval, format_longmemeval
from ..evaluate.plan import eval_plan, format_plan
from ..evaluate.ranking import eval_locomo, eval_recall, format_locomo, format_recall
from ..replay.scenario import run_scenario
from .common import print_json


def _show(res: dict, as_json: bool, fmt) -> int:
    """Print a command's result as JSON or as its readable table."""
    if as_json:
        print_json(res)
    else:
        print(fmt(res))
    return 0


def _require_files(paths) -> None:
    for f in paths:
        if not Path(f).is_file():
            raise ValidationError(f"no such file: {f}", field="data")


def cmd_config_check(args) -> int:
    cfg = load_config(*(f for f in (args.file,) if f))
    print(yaml.safe_dump(cfg.to_dict(), allow_unicode=True, sort_keys=False), end="")
    print(f"# ok: config version {cfg.version}", file=sys.stderr)
    return 0


def cmd_replay(args) -> int:
    paths: list[Path] = []
    for f in args.files:
        p = Path(f)
        paths.extend(sorted(p.glob("*.yaml")) if p.is_dir() else [p])
    results = [run_scenario(p, config=args.config) for p in paths]
    if args.json:
        out = [r.to_dict() for r in results]
        print_json(out[0] if len(out) == 1 else out)
        return 0
    for r in results:
        print(r.report())
    failed = sum(not r.ok for r in results)
    print(f"{len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


def _parse_ks(text: str) -> list[int]:
    try:
        ks = sorted({int(k) for k in str(text).split(",") if k.strip()})
    except ValueError:
        raise ValidationError(f"expected comma-separated integers like 5,10,25,50, got {text!r}", field="--k") from None
    if not ks or ks[0] < 1:
        raise ValidationError(f"expected positive integers, got {text!r}", field="--k")
    return ks


def cmd_eval_locomo(args) -> int:
    res = eval_locomo(args.data, _parse_ks(args.k), config=args.config, rankings_to=args.rankings)
    return _show(res, args.json, format_locomo)


def cmd_eval_recall(args) -> int:
    _require_files([args.data])
    res = eval_recall(args.data, config=args.config)
    return _show(res, args.json, format_recall)


def cmd_eval_inject(args) -> int:
    _require_files(args.data)
    res = eval_inject(args.data, locomo=args.locomo, config=args.config)
    return _show(res, args.json, format_inject)


def cmd_eval_conversation(args) -> int:
    _require_files(args.data)
    res = eval_conversation(args.data, config=args.config, oracle_writes=args.oracle_writes)
    return _show(res, args.json, format_conversation)


def cmd_eval_plan(args) -> int:
    res = eval_plan(args.data, config=args.config)
    return _show(res, args.json, format_plan)


def cmd_eval_longmemeval(args) -> int:
    if not Path(args.data).is_dir():
        raise ValidationError(f"no such folder: {args.data}", field="data")
    res = eval_longmemeval(args.data, config=args.config)
    return _show(res, args.json, format_longmemeval)


def cmd_calibrate(args) -> int:
    _require_files([*args.data, *args.conversations])
    features = None
    if args.features:
        features = STORE_FREE if args.features == "store_free" else [f.strip() for f in args.features.split(",")]
    res = calibrate(args.data, locomo=args.locomo, config=args.config, folds=args.folds,
                    conversations=args.conversations, features=features)
    if args.out:
        write_overlay(res, args.out)
    return _show(res, args.json, format_calibration)


def cmd_bench(args) -> int:
    if args.plot:
        return _plot(args.plot, args.results)
    if args.results:
        raise ValidationError("result files are read only with --plot PNG")
    write = args.write or not args.turns
    turns = args.turns or not args.write
    if args.playground < 0:
        raise ValidationError("--playground must be 0 (off) or a number of turns to record and replay")
    n = args.playground  # then: record n more turns and time one playground replay of them
    then = (lambda brain: {"playground": bench_playground(brain, n, args.seed)}) if n else None
    recorded = read_recorded(args.check) if args.check else None  # a bad file fails before an hour of benching
    if recorded is not None:
        check_shape({"buckets": args.buckets, "context": args.context, "queries": args.queries}, recorded,
                    args.tolerance, source=args.check)
    res = run_bench(args.buckets, args.queries, seed=args.seed, write=write, turns=turns, config=args.config,
                    data_dir=args.keep, context=args.context, then=then)
    checks = check_run(res, recorded, args.tolerance, source=args.check) if recorded is not None else []
    if checks:
        res["check"] = {"against": args.check, "tolerance": args.tolerance,
                        "ratios": {c.name: {"recorded": c.recorded, "now": c.now, "limit": c.limit, "ok": c.ok}
                                   for c in checks}}
    _show(res, args.json, lambda r: format_bench(r) + (
        "\n" + format_playground(r["playground"]) if "playground" in r else "") + (
        "\n" + format_checks(checks, args.tolerance) if checks else ""))
    return 0 if all(c.ok for c in checks) else 1


def _plot(out: str, files: list[str]) -> int:
    if not files:
        raise ValidationError("--plot needs the --json outputs of earlier bench runs to draw, e.g. "
                              "ombre-brain bench --plot p95.png 1k.json 10k.json")
    results = []
    for f in files:
        try:
            r = json.loads(Path(f).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ValidationError(f"cannot read bench results from {f}: {exc}") from exc
        if not isinstance(r, dict) or not isinstance(r.get("turn_ms"), dict) or "buckets" not in r:
            raise ValidationError(f"{f} is not the --json output of a bench run that measured turns")
        results.append(r)
    plot_turn_p95(results, out)
    print(f"wrote {out} from {len(results)} runs")
    return 0
