"""`POST /v1/purge`: forget buckets, a source or a whole space, and get a signed receipt (design §10)."""

from __future__ import annotations

from flask import Blueprint, jsonify

from ..errors import ConfigError, ValidationError
from ..forget.purge import answer
from ..web import authorize_space, get_brain, json_body

bp = Blueprint("forget", __name__)

FIELDS = frozenset({"space", "bucket_ids", "source", "whole_space"})


@bp.post("/v1/purge")
def purge():
    body = json_body()
    space = authorize_space(body.get("space"))
    unknown = sorted(set(body) - FIELDS)
    if unknown:
        raise ValidationError(f"unknown field(s) {', '.join(unknown)}; send space and one of bucket_ids, source "
                              "or whole_space", code="unknown_field")
    try:
        receipt = get_brain().purge(space, bucket_ids=body.get("bucket_ids"), source=body.get("source"),
                                    whole_space=body.get("whole_space", False))
    except ConfigError as exc:  # the server's signing key is missing: not the caller's mistake
        exc.status = 503
        raise
    return jsonify(answer(receipt))
