"""The policy playground's JSON routes (docs/design.md §22), beside the page ``/debug/playground``.

Every route is space-scoped and token-protected like the rest of ``/api/``: the space comes from
``?space=`` (or the body) and must be one the bearer token allows; a replay job is found only under its
own space. The draft travels as YAML text (``policy``) and is checked on every use, so a bad draft is
a 400 ``bad_config`` whose ``error`` names the ``line`` and ``key``; the serving policy keeps running.
Every POST takes only ``application/json`` (:func:`~ombre_brain.web.json_request`): a form another site
makes a browser post is refused, tokens or none.

| route | what |
|---|---|
| ``GET /api/playground?space`` | the serving policy as YAML, what the turn log keeps, the files on offer |
| ``POST /api/playground/check`` | ``{space, policy}`` -> ``{ok, changed}`` or ``{ok: false, error: {line, key}}`` |
| ``POST /api/playground/replay`` | ``{space, policy, source, last | scenarios | set}`` -> 202 the job |
| ``GET /api/playground/replay/<id>?space`` | its progress, then its result |
| ``DELETE /api/playground/replay/<id>?space`` | cancel it |
| ``POST /api/playground/overlay`` | the draft as an overlay file (only keys that differ from the defaults) |
| ``POST /api/playground/save`` | ``{space, policy, name}``: save it as a persona overlay (off by default) |
"""

from __future__ import annotations

from flask import Blueprint, Response, jsonify, request

from ..web import authorize_space, current_scope, json_request
from . import playground as P

bp = Blueprint("debug_playground_api", __name__)


def _space_of(body: dict | None = None) -> str:
    current_scope()
    return authorize_space((body or {}).get("space") or request.args.get("space"))


@bp.get("/api/playground")
def playground_info():
    return jsonify(P.info(_space_of()))


@bp.post("/api/playground/check")
def playground_check():
    body = json_request()
    _space_of(body)
    return jsonify(P.check(body))


@bp.post("/api/playground/replay")
def playground_replay():
    body = json_request()
    job = P.start_replay(_space_of(body), body)
    return jsonify(job.to_dict(with_result=False)), 202


@bp.get("/api/playground/replay/<job_id>")
def playground_job(job_id: str):
    return jsonify(P.jobs().get(job_id, _space_of()).to_dict())


@bp.delete("/api/playground/replay/<job_id>")
def playground_cancel(job_id: str):
    return jsonify(P.jobs().cancel(job_id, _space_of()).to_dict(with_result=False))


@bp.post("/api/playground/overlay")
def playground_overlay():
    body = json_request()
    space = _space_of(body)
    name, text = P.keep_overlay(space, P.draft_text(P.known_fields(body, P.DRAFT_FIELDS)))
    return Response(text, mimetype="application/yaml",
                    headers={"Content-Disposition": f'attachment; filename="{name}"'})


@bp.post("/api/playground/save")
def playground_save():
    body = json_request()
    return jsonify(P.save(_space_of(body), body)), 201
