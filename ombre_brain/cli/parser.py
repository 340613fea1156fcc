"""The `ombre-brain` argument parser: every command, its flags and its handler, declared once."""

from __future__ import annotations

import argparse

from . import background, recall, serve, store, writing


def _cmd_mcp(args: argparse.Namespace) -> int:
    """`mcp`, imported when run: the MCP SDK takes ~0.6 s to import, which no other command should pay."""
    from .mcp import cmd_mcp

    return cmd_mcp(args)


def _common(p: argparse.ArgumentParser, data: bool = True) -> None:
    if data:
        p.add_argument("--data", default="./ombre-data", help="data directory (default ./ombre-data)")
    p.add_argument("--config", default=None, help="YAML overlay merged over config/default.yaml")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="ombre-brain", description="Layered, explainable memory for companion bots.")
    ap.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("serve", help="serve the HTTP API, proxy and debug UI")
    _common(p)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--threads", type=int, default=8)
    p.set_defaults(func=serve.cmd_serve)

    p = sub.add_parser("mcp", help="serve the MCP tools (breath, breath_search, hold, grow, trace, dream, pulse) "
                       "over stdio")
    _common(p)
    p.add_argument("--space", default=None,
                   help="default space (default: mcp.default_space, else server.default_space)")
    p.set_defaults(func=_cmd_mcp)

    p = sub.add_parser("demo", help="seed the demo persona and serve it")
    _common(p)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--threads", type=int, default=8)
    p.set_defaults(func=serve.cmd_demo)

    p = sub.add_parser("replay", help="run scenario files (docs/design.md §11) and check their expectations")
    _common(p, data=False)
    p.add_argument("files", nargs="+", help="scenario YAML files or folders of them")
    p.add_argument("--json", action="store_true", help="print the output object instead of checking")
    p.set_defaults(func=recall.cmd_replay)

    p = sub.add_parser("config", help="config tools")
    csub = p.add_subparsers(dest="config_command", required=True, metavar="SUBCOMMAND")
    pc = csub.add_parser("check", help="print the merged config, or name what is wrong with it")
    pc.add_argument("file", nargs="?", help="YAML overlay to check (default: only config/default.yaml)")
    pc.set_defaults(func=recall.cmd_config_check)

    p = sub.add_parser("reindex", help="re-embed a space with the configured embedding model")
    _common(p)
    p.add_argument("--space", required=True)
    p.set_defaults(func=store.cmd_reindex)

    p = sub.add_parser("bench", help="measure write throughput and turn latency against their floors")
    _common(p, data=False)
    p.add_argument("--buckets", type=int, default=1000)
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--write", action="store_true", help="only the write benchmark")
    p.add_argument("--turns", action="store_true", help="only the turn benchmark")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--context", type=int, default=0, metavar="N",
                   help="each turn hears the N messages before it (a sliding conversation)")
    p.add_argument("--playground", type=int, default=0, metavar="N",
                   help="also record N turns and time one policy-playground replay of them (docs/design.md §22)")
    p.add_argument("--keep", metavar="DIR", help="build the store in DIR and keep it; a later run with the same DIR, "
                   "size and seed reuses it and measures turns only")
    p.add_argument("--json", action="store_true")
    p.add_argument("--check", metavar="FILE", help="compare this run's ratios to the floor with a recorded --json "
                   "run; exit 1 when one is worse by more than --tolerance (a guard for changes, never for CI)")
    p.add_argument("--tolerance", type=float, default=0.15, metavar="FRACTION",
                   help="with --check: how much worse a ratio may be, as a fraction of the recorded one (0.15)")
    p.add_argument("--plot", metavar="PNG", help="draw turn p95 against store size from earlier --json results "
                   "(given as RESULTS) instead of running")
    p.add_argument("results", nargs="*", metavar="RESULTS", help="bench --json output files, with --plot")
    p.set_defaults(func=recall.cmd_bench)

    p = sub.add_parser("eval", help="retrieval and injection evaluation (LoCoMo, companion sets)")
    esub = p.add_subparsers(dest="eval_command", required=True, metavar="SET")
    pe = esub.add_parser("locomo", help="turn-level recall@k on LoCoMo conversations")
    _common(pe, data=False)
    pe.add_argument("--data", required=True, help="folder of LoCoMo *.json conversations")
    pe.add_argument("--k", default="5,10,25,50")
    pe.add_argument("--rankings", metavar="FILE", help="also write each question's ranking by every system (JSON)")
    pe.add_argument("--json", action="store_true")
    pe.set_defaults(func=recall.cmd_eval_locomo)
    pe = esub.add_parser("recall", help="hit@k and MRR on a memories-and-queries YAML")
    _common(pe, data=False)
    pe.add_argument("--data", required=True, help="the YAML file")
    pe.add_argument("--json", action="store_true")
    pe.set_defaults(func=recall.cmd_eval_recall)
    pe = esub.add_parser("inject", help="what turns inject end to end: inject recall, false recall, UNKNOWN, by "
                         "kind and language")
    _common(pe, data=False)
    pe.add_argument("--data", action="append", default=[], metavar="FILE",
                    help="an inject set (memories, queries, crosslingual, negatives, casual); repeatable")
    pe.add_argument("--locomo", metavar="DIR", help="LoCoMo conversations: categories 1-4 as positives")
    pe.add_argument("--json", action="store_true")
    pe.set_defaults(func=recall.cmd_eval_inject)
    pe = esub.add_parser("conversation", help="the whole loop on labelled multi-session chats: write recall, layer "
                         "accuracy, noise kept out, turn recall and false recall, by kind and language")
    _common(pe, data=False)
    pe.add_argument("--data", action="append", default=[], metavar="FILE", required=True,
                    help="a labelled conversations YAML (../shared/data/conversations/README.md); repeatable")
    pe.add_argument("--oracle-writes", action="store_true",
                    help="store each labelled side in the user's words instead of running the write decision")
    pe.add_argument("--json", action="store_true")
    pe.set_defaults(func=recall.cmd_eval_conversation)

    pe = esub.add_parser("plan", help="context_mode accuracy of the query planner on labelled messages")
    _common(pe, data=False)
    pe.add_argument("--data", required=True, help="a YAML of messages: [{q, mode}]")
    pe.add_argument("--json", action="store_true")
    pe.set_defaults(func=recall.cmd_eval_plan)
    pe = esub.add_parser("longmemeval", help="session and turn recall on LongMemEval-S questions")
    _common(pe, data=False)
    pe.add_argument("--data", required=True, help="folder of LongMemEval question *.json files")
    pe.add_argument("--json", action="store_true")
    pe.set_defaults(func=recall.cmd_eval_longmemeval)

    p = sub.add_parser("calibrate", help="fit the admission evidence score on labelled sets and write an overlay")
    _common(p, data=False)
    p.add_argument("--data", action="append", default=[], metavar="FILE",
                   help="a labelled inject set (as for eval inject); repeatable")
    p.add_argument("--conversations", action="append", default=[], metavar="FILE",
                   help="labelled conversations (as for eval conversation), replayed as young stores; repeatable")
    p.add_argument("--features", help="comma-separated admission features to fit (default: every registered one; "
                   "`store_free`: those that read one candidate alone)")
    p.add_argument("--locomo", metavar="DIR", help="also fit on LoCoMo conversations (categories 1-4 positive)")
    p.add_argument("--out", metavar="YAML", help="write the fitted retrieval.admission as a config overlay here")
    p.add_argument("--folds", type=int, default=5, help="cross-validation folds, grouped by memory (default 5)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=recall.cmd_calibrate)

    p = sub.add_parser("fit-reader", help="fit the reader (does a memory answer the message) on authored stores")
    _common(p, data=False)
    p.add_argument("--data", action="append", required=True, metavar="FILE",
                   help="authored memory stores with labelled messages (training/read/*.yaml); repeatable")
    p.add_argument("--out", metavar="DIR", help="where to write <id>.npz and <id>.json (default: the package's "
                   "ombre_brain/retrieval/models, where retrieval.reader.id is looked up)")
    p.add_argument("--id", default="rd-e5s-use3-1", help="the model id (default rd-e5s-use3-1)")
    p.add_argument("--folds", type=int, default=5, help="cross-validation folds, grouped by store (default 5)")
    p.add_argument("--rows", metavar="NPZ", help="keep the pipeline's rows here, and read them back if present "
                   "(building them reads every store through the pipeline: minutes)")
    p.add_argument("--dry-run", action="store_true", help="report the cross-validated figures, write nothing")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=writing.cmd_fit_reader)

    p = sub.add_parser("fit-supersede", help="fit the profile's changed-fact model on authored stores")
    _common(p, data=False)
    p.add_argument("--data", action="append", required=True, metavar="FILE",
                   help="stores of facts that changed (training/supersede/*.yaml, training/read/*.yaml); repeatable")
    p.add_argument("--out", metavar="DIR", help="where to write <id>.npz and <id>.json (default: the package's "
                   "ombre_brain/profile/models, where gateway.profile.supersede.id is looked up)")
    p.add_argument("--id", default="sp-e5s-use3-1", help="the model id (default sp-e5s-use3-1)")
    p.add_argument("--folds", type=int, default=5, help="cross-validation folds, grouped by store (default 5)")
    p.add_argument("--dry-run", action="store_true", help="report the cross-validated figures, write nothing")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=writing.cmd_fit_supersede)

    p = sub.add_parser("fit-writer", help="fit the learned write decision on labelled exchanges and write its weights")
    _common(p, data=False)
    p.add_argument("--data", action="append", required=True, metavar="FILE",
                   help="labelled exchanges (training/write/*.yaml) or conversations (eval format); repeatable")
    p.add_argument("--out", metavar="DIR", help="where to write <id>.npz and <id>.json (default: the package's "
                   "ombre_brain/writing/models, where writer.model.id is looked up)")
    p.add_argument("--id", default=None, help="the model id (default: writer.model.id of the config)")
    p.add_argument("--blocks", default="e5,use,signals",
                   help="feature blocks, comma-separated, among e5, use, signals (default all three)")
    p.add_argument("--user-model", choices=("mlp", "logistic"), default="mlp",
                   help="the user side: an ensemble of small perceptrons (default) or one-vs-rest logistic layers")
    p.add_argument("--l2", type=float, default=100.0, help="the L2 penalty on standardised features (default 100)")
    p.add_argument("--folds", type=int, default=5, help="cross-validation folds (default 5)")
    p.add_argument("--dry-run", action="store_true", help="report the cross-validated figures, write nothing")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=writing.cmd_fit_writer)

    p = sub.add_parser("export", help="write a space as portable JSONL")
    _common(p)
    p.add_argument("--space", required=True)
    p.add_argument("out")
    p.set_defaults(func=store.cmd_export)

    p = sub.add_parser("import", help="restore a JSONL export, or migrate Ombre-Brain markdown buckets")
    _common(p)
    p.add_argument("path")
    p.add_argument("--from", dest="from_format", choices=["jsonl", "ombre-md"], default="jsonl")
    p.add_argument("--space", default=None, help="target space (required for ombre-md; overrides the export's)")
    p.add_argument("--tz", default=None, help="ombre-md: the zone of times written without one (Ombre-Brain "
                                              "writes its server's local time): UTC (default), local, +08:00 or "
                                              "Asia/Shanghai")
    p.set_defaults(func=store.cmd_import)

    p = sub.add_parser("purge", help="forget buckets, a source or a whole space, with a signed receipt",
                       description="Forget what one target names, everywhere (docs/forgetting.md), and print the "
                       "answer with its signed receipt as JSON. Name exactly one target: --bucket (repeatable), "
                       "--source or --whole-space.",
                       epilog="exit status: 0 purged; 3 the target matched nothing (status nothing_matched, every "
                       "deleted count 0; a --source is still suppressed from now on); 2 an error (nothing was "
                       "purged)")
    _common(p)
    p.add_argument("--space", required=True, help="the space to purge in, e.g. haven:xiaoyu")
    p.add_argument("--bucket", action="append", dest="bucket_ids", default=None, metavar="ID",
                   help="a bucket id to forget; repeat for several")
    p.add_argument("--source", default=None, metavar="S",
                   help="a source identity: forget what only it wrote, release its claim on the rest, and refuse "
                        "its material from now on")
    p.add_argument("--whole-space", action="store_true", help="forget every memory, fact and log of the space")
    p.set_defaults(func=store.cmd_purge)

    p = sub.add_parser("verify-receipt", help="verify a purge receipt file",
                       description="Check a purge receipt's signature: the bare {payload, signature} or the whole "
                       "answer of `purge` / POST /v1/purge. Read-only: it runs beside a serving process.",
                       epilog="exit status: 0 the receipt verifies; 1 it does not (or is not a receipt); 2 it cannot "
                       "be checked (config, unreadable file)")
    p.add_argument("--data", default="./ombre-data",
                   help="data directory whose local key (forget.key) signed the receipt (default ./ombre-data); "
                        "not needed when the config names forget.keys")
    p.add_argument("--config", default=None, help="YAML overlay naming forget.keys, the keys a shared "
                   "deployment signs with (docs/deploy.md)")
    p.add_argument("file", help="the receipt file (JSON)")
    p.set_defaults(func=store.cmd_verify_receipt)

    p = sub.add_parser("dream", help="the dream engine")
    dsub = p.add_subparsers(dest="dream_command", required=True, metavar="SUBCOMMAND")
    pd = dsub.add_parser("run", help="compose a dream from recent material")
    _common(pd)
    pd.add_argument("--space", required=True)
    pd.add_argument("--now", default=None)
    pd.set_defaults(func=background.cmd_dream_run)

    p = sub.add_parser("jobs", help="list and retry post-exchange memory-writing jobs")
    _common(p)
    p.add_argument("--retry", action="append", default=None, help="job id to retry (or 'dead' for all dead-lettered)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=background.cmd_jobs)

    p = sub.add_parser("doctor", help="check Chroma, the lexical index and the ledger agree; repair")
    _common(p)
    p.set_defaults(func=store.cmd_doctor)

    p = sub.add_parser("migrate-ledger", help="copy an embedded ledger (DIR/ledger.db) into an empty PostgreSQL "
                       "database, for several gateway processes (docs/deploy.md)")
    _common(p, data=False)
    p.add_argument("--from", dest="source", required=True, metavar="DIR", help="the data directory to move")
    p.add_argument("--to", required=True, metavar="URL", help="postgresql://user@host:5432/db (an empty database)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=store.cmd_migrate_ledger)
    return ap
