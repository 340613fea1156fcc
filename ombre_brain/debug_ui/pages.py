"""Debug pages for people under ``/debug/``: the debug JSON routes as readable pages.

Server-rendered Jinja (autoescape on: memory text is data and is always shown, never run)
over the very dicts ``/api/*`` returns, plus one local stylesheet and a little local JS.
The pages make no request outside this server (a strict Content-Security-Policy says so),
and with a token configured they take it from ``?token=`` and carry it in every link.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, render_template, request, url_for

from ..errors import AuthError, NotFoundError, OmbreError
from ..turn.sections import DYNAMIC_ORDER, STABLE_ORDER
from ..web import authorize_space, current_scope, get_brain, int_arg, json_request, str_arg
from . import debug_views as V
from . import playground as P
from .api_debug import breath_data, diffusion_data, injections_data, moments_data, profile_data, recall_debug_data

bp = Blueprint("debug_pages", __name__, url_prefix="/debug", template_folder="templates",
               static_folder="static", static_url_path="/static")

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")


@bp.after_request
def _headers(resp):
    resp.headers["Content-Security-Policy"] = CSP
    resp.headers["Referrer-Policy"] = "no-referrer"
    resp.headers["X-Content-Type-Options"] = "nosniff"
    resp.headers.setdefault("Cache-Control", "no-store")
    return resp


@bp.errorhandler(OmbreError)
def _error(exc: OmbreError):
    hint = ""
    if isinstance(exc, AuthError) and exc.status == 401:
        hint = "Add ?token=<your token> to the address; the debug pages carry it on from there."
    return render_template("error.html", error=exc, hint=hint, space=None, spaces=[]), exc.status


def _token() -> str | None:
    return request.args.get("token") or None


def link(endpoint: str, **params: Any) -> str:
    """url_for that carries the page's token along to other pages (only when the page was opened with one).

    Only the pages take a token from the address; the JSON routes (``/api/*``) want the header,
    so a link there never puts the token into a URL.
    """
    token = _token()
    if token and "token" not in params and endpoint.startswith(f"{bp.name}."):
        params["token"] = token
    return url_for(endpoint, **{k: v for k, v in params.items() if v not in (None, "")})


@bp.app_template_global("debug_link")
def _debug_link(endpoint: str, **params: Any) -> str:
    return link(endpoint, **params)


@bp.context_processor
def _helpers() -> dict:
    return {"link": link, "gate_badges": V.gate_badges, "describe": V.describe, "words": V.words, "token": _token(),
            "turn_items": lambda turn: list(V.turn_items(turn))}


def _spaces() -> list[str]:
    scope = current_scope()
    spaces = get_brain().spaces()
    return [s for s in spaces if scope == "*" or s in scope]


def _page_space() -> tuple[str, list[str]]:
    """The page's space: ?space=, else the configured default, else the first space the token may see."""
    spaces = _spaces()
    raw = request.args.get("space")
    if not raw:
        default, scope = get_brain().config.server.default_space, current_scope()
        if default in spaces or (not spaces and (scope == "*" or default in scope)):
            raw = default
        else:
            raw = spaces[0] if spaces else scope[0]
    return authorize_space(raw), spaces


def _query_page(template: str, loader, **extra: Any):
    space, spaces = _page_space()
    q = str_arg("q")
    session = str_arg("session", max_len=200)
    data = loader(space, q) if q else None
    return render_template(template, space=space, spaces=spaces, q=q or "", session=session or "", data=data,
                           **extra)


@bp.get("/")
def recall():
    """Search box plus the recall-debug table beside the rendered injection."""
    return _query_page("recall.html", recall_debug_data, page="recall")


@bp.get("/breath")
def breath():
    return _query_page("breath.html", breath_data, page="breath")


@bp.get("/profile")
def profile():
    """The profile: who the user is and how to be with them, every stable memory with why it is in or out."""
    space, spaces = _page_space()
    q = str_arg("q")
    session = str_arg("session", max_len=200)
    return render_template("profile.html", space=space, spaces=spaces, q=q or "", session=session or "",
                           data=profile_data(space, q), page="profile")


@bp.get("/diffusion")
def diffusion():
    return _query_page("diffusion.html", diffusion_data, page="diffusion")


@bp.get("/buckets")
def buckets():
    space, spaces = _page_space()
    q = str_arg("q")
    data = moments_data(space, None, q, int_arg("limit", 500, 1, 5000))
    return render_template("buckets.html", space=space, spaces=spaces, q=q or "", session="", data=data,
                           page="buckets")


@bp.get("/buckets/<bucket_id>")
def bucket(bucket_id: str):
    space, spaces = _page_space()
    brain = get_brain()
    b = brain.get(space, bucket_id)
    if b is None:
        raise NotFoundError(f"no bucket {bucket_id!r} in space {space!r}")
    q = str_arg("q")
    data = moments_data(space, bucket_id, q)
    others = {e["from_id"] for e in data["edges"]} | {e["to_id"] for e in data["edges"]}
    titles = {bid: x.title for bid, x in brain.get_many(space, others).items()}
    sessions = brain.gateway.sessions
    logged = []
    for turn in sessions.injections_log(space, None, 50):
        for key, item in V.turn_items(turn):
            if item["bucket_id"] == bucket_id:
                logged.append({"at": turn.get("at"), "session": turn.get("session"), "query": turn.get("query"),
                               "section": key, "shape": item.get("shape"), "runtime_gate": item.get("runtime_gate")})
        for s in turn.get("suppressed", ()):
            if s.get("bucket_id") == bucket_id:
                logged.append({"at": turn.get("at"), "session": turn.get("session"), "query": turn.get("query"),
                               "section": None, "shape": None, "runtime_gate": s.get("runtime_gate")})
                break
    return render_template("bucket.html", space=space, spaces=spaces, q=q or "", session="", bucket=b,
                           fields=b.to_dict(), sections=b.sections, data=data, titles=titles,
                           injections=sessions.bucket_injections(space, bucket_id), logged=logged, page="buckets")


@bp.get("/injections")
def injections():
    space, spaces = _page_space()
    session = str_arg("session", max_len=200)
    data = injections_data(space, session, int_arg("limit", 20, 1, 500))
    return render_template("injections.html", space=space, spaces=spaces, q="", session=session or "", data=data,
                           page="injections")


@bp.get("/playground")
def playground():
    """The policy playground: edit the serving policy as YAML, replay turns under it, keep it as an overlay."""
    space, spaces = _page_space()
    return render_template("playground.html", space=space, spaces=spaces, q="", session="", data=P.info(space),
                           page="playground")


@bp.post("/playground/overlay")
def playground_overlay():
    """The draft as an overlay file, from ``{policy}`` sent as ``application/json`` (what ``/api/playground/overlay``
    does, here under the page's address and its ``?token=``). A form post is refused: another site could make a
    browser send one, with no preflight and, with no token configured, nothing else in its way."""
    body = json_request()
    space, _spaces = _page_space()
    name, text = P.keep_overlay(space, P.draft_text(P.known_fields(body, P.DRAFT_FIELDS)))
    return Response(text, mimetype="application/yaml",
                    headers={"Content-Disposition": f'attachment; filename="{name}"'})


@bp.get("/layers")
def layers():
    space, spaces = _page_space()
    cfg = get_brain().config
    return render_template("layers.html", space=space, spaces=spaces, q="", session="",
                           rows=V.layer_policy_table(cfg), cfg=cfg, sections=(*STABLE_ORDER, *DYNAMIC_ORDER),
                           page="layers")
