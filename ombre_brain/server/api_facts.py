"""`/v1/facts…`: the facts contract over HTTP (design §9).

A well-formed batch the ledger refuses (stale target, source conflict, suppressed source,
duplicate fact, missing target) answers with its error status (409, or 404 for a missing
target) and a body that is both the §9 result (``accepted: false``, ``rejection_reason``)
and the usual ``error`` object, so either kind of client reads it. Malformed input is a 400
``error`` naming the field; a budget outside its range is a 400 ``bad_budget`` naming the limit.
"""

from __future__ import annotations

from flask import Blueprint, jsonify, request

from ..errors import ConflictError, NotFoundError
from ..web import authorize_space, get_brain, int_arg, json_body, str_arg

bp = Blueprint("facts", __name__)


@bp.post("/v1/facts/evidence")
def submit_evidence():
    body = json_body()
    authorize_space(body.get("space"))
    try:
        result = get_brain().facts.submit(body)
    except (ConflictError, NotFoundError) as exc:
        payload = {"accepted": False, "receipt_id": None, "records": [], "rejection_reason": exc.code}
        return jsonify(payload | exc.to_dict()), exc.status
    return jsonify(result)


@bp.get("/v1/facts")
def read_facts():
    space = authorize_space(request.args.get("space"))
    return jsonify(get_brain().facts.read(
        space,
        subject=str_arg("subject", max_len=128),
        as_of=str_arg("as_of", max_len=64),
        context=str_arg("context", max_len=4000),
        max_facts=int_arg("max_facts", 16),
        max_bytes=int_arg("max_bytes", 4096),
    ))


@bp.get("/v1/facts/history")
def fact_history():
    space = authorize_space(request.args.get("space"))
    record_id = str_arg("record_id", required=True, max_len=128)
    return jsonify(get_brain().facts.history(
        space, record_id, after_revision=int_arg("after_revision", 0, 0, 1 << 31),
        max_bytes=int_arg("max_bytes", 65536)))


@bp.get("/v1/facts/changes")
def fact_changes():
    space = authorize_space(request.args.get("space"))
    cursor = str_arg("cursor", max_len=64)
    return jsonify(get_brain().facts.changes(space, cursor, int_arg("limit", 100)))
