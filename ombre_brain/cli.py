"""The `ombre-brain` command: a thin skin over the library.

Command names match Brain methods and flags match keyword arguments. Library errors become
one-line CLI errors here and nowhere else, with exit status 2 (1 is reserved for a failed
check such as a replay miss).
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import logging
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from .errors import ConfigError, OmbreError  # noqa: E402

log = logging.getLogger("ombre_brain")
DEMO_PERSONA = Path(__file__).resolve().parent / "demo" / "persona.yaml"


def _common(p: argparse.ArgumentParser, data: bool = True) -> None:
    if data:
        p.add_argument("--data", default="./ombre-data", help="data directory (default ./ombre-data)")
    p.add_argument("--config", default=None, help="YAML overlay merged over config/default.yaml")


def _brain(args):
    from .brain import Brain

    return Brain.open(args.data, args.config)


def _print(obj) -> None:
    print(json.dumps(obj, ensure_ascii=False, indent=2))


# ---------------------------------------------------------------- commands


def cmd_config_check(args) -> int:
    from .config import load_config

    cfg = load_config(*(f for f in (args.file,) if f))
    import yaml

    print(yaml.safe_dump(cfg.to_dict(), allow_unicode=True, sort_keys=False), end="")
    print(f"# ok: config version {cfg.version}", file=sys.stderr)
    return 0


def cmd_replay(args) -> int:
    from .tools.replay import run_scenario

    paths: list[Path] = []
    for f in args.files:
        p = Path(f)
        paths.extend(sorted(p.glob("*.yaml")) if p.is_dir() else [p])
    results = [run_scenario(p, config=args.config) for p in paths]
    if args.json:
        out = [r.to_dict() for r in results]
        _print(out[0] if len(out) == 1 else out)
        return 0
    for r in results:
        print(r.report())
    failed = sum(not r.ok for r in results)
    print(f"{len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


def _check_bind(host: str, brain) -> None:
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if loopback:
        return
    tokens = brain.config.server.tokens
    has_token = bool(os.environ.get("OMBRE_TOKEN")) or any(os.environ.get(r.token_env) for r in tokens)
    if not has_token:
        raise ConfigError(f"refusing to bind {host} (not loopback) without a token: set OMBRE_TOKEN or server.tokens")


def serve(brain, host: str, port: int, threads: int = 8) -> None:
    from waitress import create_server

    from .server.app import create_app

    _check_bind(host, brain)
    app = create_app(brain)
    server = create_server(app, host=host, port=port, threads=threads, asyncore_use_poll=True, max_request_body_size=
                           brain.config.server.max_body_bytes + 1024)
    worker = getattr(brain.gateway, "start_worker", None)
    if callable(worker):
        worker()
    print(f"Ombre Brain serving on http://{host}:{server.effective_port}  (debug UI: /debug/)", flush=True)
    try:
        server.run()
    finally:
        brain.close()


def cmd_serve(args) -> int:
    serve(_brain(args), args.host, args.port, args.threads)
    return 0


def seed_persona(brain, path: Path = DEMO_PERSONA) -> tuple[str, int]:
    """Write the demo persona (idempotent: buckets dedupe by id and content)."""
    from datetime import datetime, timezone

    from .config import load_yaml_text
    from .tools.replay import _seed

    data = load_yaml_text(path.read_text(encoding="utf-8"))
    space = data.get("space", "haven:xiaoyu")
    if brain.store.count(space) == 0:
        _seed(brain, data, datetime.now(timezone.utc), space, path)
    return space, brain.store.count(space)


def cmd_demo(args) -> int:
    from .config import load_yaml_text

    overlay = args.config
    persona = load_yaml_text(DEMO_PERSONA.read_text(encoding="utf-8"))
    from .brain import Brain
    from .config import load_config

    cfg = load_config({"identity": persona.get("identity", {}), "server": {"default_space": persona.get("space")}},
                      overlay)
    brain = Brain.open(args.data, cfg)
    space, n = seed_persona(brain)
    base = f"http://{args.host}:{args.port}"
    print(f"Seeded demo persona: {n} buckets in space {space} (data: {args.data})")
    print("Try:")
    print(f"  curl -s {base}/v1/inject -H 'Content-Type: application/json' "
          f"-d '{{\"space\": \"{space}\", \"session_id\": \"demo\", \"query\": \"还记得我们去海边那次吗\"}}'")
    print(f"  curl -s {base}/v1/chat/completions -H 'Content-Type: application/json' -H 'X-Ombre-Space: {space}' "
          "-d '{\"model\": \"demo\", \"messages\": "
          "[{\"role\": \"user\", \"content\": \"还记得我们去海边那次吗\"}]}'")
    print(f"  open {base}/debug/")
    serve(brain, args.host, args.port, args.threads)
    return 0


def cmd_reindex(args) -> int:
    from .tools.doctor import reindex

    with _brain_for_reindex(args) as brain:
        _print(reindex(brain, args.space))
    return 0


def _brain_for_reindex(args):
    from .brain import Brain

    return Brain.open(args.data, args.config)


def _dispatch(module: str, func: str):
    """Commands implemented in their capability's module, imported only when used."""

    def run(args) -> int:
        import importlib

        mod = importlib.import_module(f"ombre_brain.{module}")
        return getattr(mod, func)(args)

    return run


# ---------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="ombre-brain", description="Layered, explainable memory for companion bots.")
    ap.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("serve", help="serve the HTTP API, proxy and debug UI")
    _common(p)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--threads", type=int, default=8)
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("demo", help="seed the demo persona and serve it")
    _common(p)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--threads", type=int, default=8)
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("replay", help="run scenario files (DESIGN §11) and check their expectations")
    _common(p, data=False)
    p.add_argument("files", nargs="+", help="scenario YAML files or folders of them")
    p.add_argument("--json", action="store_true", help="print the output object instead of checking")
    p.set_defaults(func=cmd_replay)

    p = sub.add_parser("config", help="config tools")
    csub = p.add_subparsers(dest="config_command", required=True, metavar="SUBCOMMAND")
    pc = csub.add_parser("check", help="print the merged config, or name what is wrong with it")
    pc.add_argument("file", nargs="?", help="YAML overlay to check (default: only config/default.yaml)")
    pc.set_defaults(func=cmd_config_check)

    p = sub.add_parser("reindex", help="re-embed a space with the configured embedding model")
    _common(p)
    p.add_argument("--space", required=True)
    p.set_defaults(func=cmd_reindex)

    p = sub.add_parser("bench", help="measure write throughput and turn latency against their floors")
    _common(p, data=False)
    p.add_argument("--buckets", type=int, default=1000)
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--write", action="store_true", help="only the write benchmark")
    p.add_argument("--turns", action="store_true", help="only the turn benchmark")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--keep", metavar="DIR", help="build the store in DIR and keep it; a later run with the same DIR, "
                   "size and seed reuses it and measures turns only")
    p.add_argument("--json", action="store_true")
    p.add_argument("--plot", metavar="PNG", help="draw turn p95 against store size from earlier --json results "
                   "(given as RESULTS) instead of running")
    p.add_argument("results", nargs="*", metavar="RESULTS", help="bench --json output files, with --plot")
    p.set_defaults(func=_dispatch("tools.bench", "cmd_bench"))

    p = sub.add_parser("eval", help="retrieval evaluation (LoCoMo, Chinese companion set)")
    esub = p.add_subparsers(dest="eval_command", required=True, metavar="SET")
    pe = esub.add_parser("locomo", help="turn-level recall@k on LoCoMo conversations")
    _common(pe, data=False)
    pe.add_argument("--data", required=True, help="folder of LoCoMo *.json conversations")
    pe.add_argument("--k", default="5,10,25,50")
    pe.add_argument("--json", action="store_true")
    pe.set_defaults(func=_dispatch("tools.evaluate", "cmd_eval_locomo"))
    pe = esub.add_parser("recall", help="hit@k and MRR on a memories-and-queries YAML")
    _common(pe, data=False)
    pe.add_argument("--data", required=True, help="the YAML file")
    pe.add_argument("--json", action="store_true")
    pe.set_defaults(func=_dispatch("tools.evaluate", "cmd_eval_recall"))

    p = sub.add_parser("export", help="write a space as portable JSONL")
    _common(p)
    p.add_argument("--space", required=True)
    p.add_argument("out")
    p.set_defaults(func=_dispatch("tools.portability", "cmd_export"))

    p = sub.add_parser("import", help="restore a JSONL export, or migrate Ombre-Brain markdown buckets")
    _common(p)
    p.add_argument("path")
    p.add_argument("--from", dest="from_format", choices=["jsonl", "ombre-md"], default="jsonl")
    p.add_argument("--space", default=None, help="target space (required for ombre-md; overrides the export's)")
    p.set_defaults(func=_dispatch("tools.portability", "cmd_import"))

    p = sub.add_parser("purge", help="forget buckets, a source or a whole space, with a signed receipt")
    _common(p)
    p.add_argument("--space", required=True)
    p.add_argument("--bucket", action="append", dest="bucket_ids", default=None)
    p.add_argument("--source", default=None)
    p.add_argument("--whole-space", action="store_true")
    p.set_defaults(func=_dispatch("forget.purge", "cmd_purge"))

    p = sub.add_parser("verify-receipt", help="verify a purge receipt file")
    _common(p, data=False)
    p.add_argument("file")
    p.set_defaults(func=_dispatch("forget.purge", "cmd_verify_receipt"))

    p = sub.add_parser("dream", help="the dream engine")
    dsub = p.add_subparsers(dest="dream_command", required=True, metavar="SUBCOMMAND")
    pd = dsub.add_parser("run", help="compose a dream from recent material")
    _common(pd)
    pd.add_argument("--space", required=True)
    pd.add_argument("--now", default=None)
    pd.set_defaults(func=_dispatch("dream.engine", "cmd_dream_run"))

    p = sub.add_parser("jobs", help="list and retry post-exchange memory-writing jobs")
    _common(p)
    p.add_argument("--retry", action="append", default=None, help="job id to retry (or 'dead' for all dead-lettered)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_dispatch("gateway.ingest", "cmd_jobs"))

    p = sub.add_parser("doctor", help="check Chroma, the lexical index and the ledger agree; repair")
    _common(p)
    p.set_defaults(func=_dispatch("tools.doctor", "cmd_doctor"))
    return ap


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s")
    try:
        return int(args.func(args) or 0)
    except OmbreError as exc:
        print(f"ombre-brain: error: {exc.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
