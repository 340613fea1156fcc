"""Debug JSON routes (design §8): why did this memory surface, or not?

Each route that takes a query runs the real pipeline as a dry run (``brain.turn(...,
dry_run=True)``: no round, cooldown, claim or log is written) and serialises that Turn
through :mod:`debug_views`. ``/api/gateway-injections`` reads the turns actually sent.
Every route is space-scoped and token-protected exactly like the HTTP API.
"""

from __future__ import annotations

from flask import Blueprint, jsonify, request

from ..errors import NotFoundError
from ..turn.conversation import context_messages
from ..web import authorize_space, current_scope, get_brain, int_arg, str_arg
from . import debug_views as V

bp = Blueprint("debug_api", __name__)

MAX_LIST = 5000


def space_arg() -> str:
    """The request's space, after the token check (so a caller without a token learns nothing else)."""
    current_scope()
    return authorize_space(request.args.get("space"))


def dry_turn(space: str, query: str):
    """The same pipeline the gateway runs, without writing any session state.

    ``ctx`` is the conversation before the query, one message per line (``user: …`` / ``assistant: …``).
    """
    session = str_arg("session", "debug", max_len=200)
    lines = [ln for ln in (str_arg("ctx", "", max_len=20000) or "").splitlines() if ln.strip()]
    return get_brain().turn(space, session, query, str_arg("now", max_len=64), context=list(context_messages(lines)),
                            dry_run=True)


def recall_debug_data(space: str, query: str) -> dict:
    brain = get_brain()
    return V.recall_debug(dry_turn(space, query), brain.config)


def moments_data(space: str, bucket_id: str | None, query: str | None, limit: int = 1000) -> dict:
    brain = get_brain()
    turn = dry_turn(space, query) if query else None
    if bucket_id:
        bucket = brain.get(space, bucket_id)
        if bucket is None:
            raise NotFoundError(f"no bucket {bucket_id!r} in space {space!r}")
        return V.moments_view(turn, brain.config, bucket, brain.store.moments(space, bucket_id),
                              brain.store.edges(space, [bucket_id]))
    buckets = brain.list(space, limit=limit)  # a sealed letter by its metadata only
    moments = {b.id: brain.store.moments(space, b.id) for b in buckets}
    out = V.moments_stats(turn, brain.config, buckets, moments, brain.store.edges(space),
                          total=brain.store.count(space))
    out["space"] = space
    return out


def diffusion_data(space: str, query: str) -> dict:
    brain = get_brain()
    turn = dry_turn(space, query)
    rec = turn.debug.get("diffusion") or {}
    ids = {e.from_id for e in rec.get("edges", ())} | {e.to_id for e in rec.get("edges", ())}
    ids |= {d.bucket.id for d in turn.debug.get("direct") or []}
    return V.diffusion_debug(turn, brain.config, brain.get_many(space, ids))


def breath_data(space: str, query: str, limit: int = 1000) -> dict:
    brain = get_brain()
    turn = dry_turn(space, query)
    # a letter takes no part in a turn (design §19): the surfacing view lists the memories a turn may weigh
    buckets = [b for b in brain.list(space, limit=limit) if b.type != "letter"]
    return V.breath_debug(turn, brain.config, buckets, total=brain.store.count(space))


def profile_data(space: str, query: str | None) -> dict:
    """The space's profile as a turn with this message (or none) would show it, every line with why."""
    return V.profile_view(dry_turn(space, query or ""), get_brain().config)


def injections_data(space: str, session: str | None, limit: int = 20) -> dict:
    sessions = get_brain().gateway.sessions
    return {"space": space, "session": session, "sessions": sessions.sessions(space),
            "turns": sessions.injections_log(space, session, limit)}


@bp.get("/api/recall-debug")
def recall_debug():
    space = space_arg()
    return jsonify(recall_debug_data(space, str_arg("q", required=True)))


@bp.get("/api/moments")
def moments():
    space = space_arg()
    return jsonify(moments_data(space, str_arg("bucket_id", max_len=200), str_arg("q"),
                                int_arg("limit", 1000, 1, MAX_LIST)))


@bp.get("/api/diffusion-debug")
def diffusion_debug():
    space = space_arg()
    return jsonify(diffusion_data(space, str_arg("q", required=True)))


@bp.get("/api/breath-debug")
def breath_debug():
    space = space_arg()
    return jsonify(breath_data(space, str_arg("q", required=True), int_arg("limit", 1000, 1, MAX_LIST)))


@bp.get("/api/gateway-injections")
def gateway_injections():
    space = space_arg()
    return jsonify(injections_data(space, str_arg("session", max_len=200), int_arg("limit", 20, 1, 500)))


@bp.get("/api/profile")
def profile():
    space = space_arg()
    return jsonify(profile_data(space, str_arg("q")))
