"""`serve` and `demo`: the HTTP API, the proxy and the debug UI on waitress."""

from __future__ import annotations

import ipaddress
import os

from ..brain import Brain
from ..config import load_config
from ..config.parse import load_yaml_text
from ..demo.seed import DEMO_PERSONA, seed_persona
from ..errors import ConfigError
from .common import open_brain


def _check_bind(host: str, brain: Brain) -> None:
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


def serve(brain: Brain, host: str, port: int, threads: int = 8) -> None:
    from ..server.app import create_app  # Flask and the MCP SDK: ~1 s of imports only `serve` and `demo` need
    from ..server.wsgi import make_server

    if brain.lock_note:  # said first: it answers the stale ombre.lock an operator may be looking at
        print(f"Note: {brain.lock_note}.", flush=True)
    _check_bind(host, brain)
    app = create_app(brain)
    app.config["OMBRE_BIND_HOST"] = host  # /mcp's DNS-rebinding check allows loopback Host headers on loopback
    server = make_server(app, host=host, port=port, threads=threads, max_body_bytes=brain.config.server.max_body_bytes)
    brain.gateway.start_worker()
    brain.admitter.admission_model(brain.admitter.model_key())  # load the models now; warn now if unfitted
    brain.admitter.prepare(freeze=True)  # the dictionary bridge, the reference, the tables: before any turn
    print(f"Ombre Brain serving on http://{host}:{server.effective_port}  (debug UI: /debug/)", flush=True)
    try:
        server.run()
    finally:
        brain.close()


def cmd_serve(args) -> int:
    serve(open_brain(args), args.host, args.port, args.threads)
    return 0


def cmd_demo(args) -> int:
    persona = load_yaml_text(DEMO_PERSONA.read_text(encoding="utf-8"))
    cfg = load_config({"identity": persona.get("identity", {}), "server": {"default_space": persona.get("space")}},
                      args.config)
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
