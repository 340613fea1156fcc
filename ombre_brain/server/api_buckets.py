"""`/v1/buckets` and `/v1/edges`: the write path over HTTP (design §8)."""

from __future__ import annotations

from flask import Blueprint, jsonify, request

from ..buckets import BUCKET_FIELDS, BUCKET_TYPES
from ..errors import NotFoundError, ValidationError
from ..web import authorize_space, get_brain, int_arg, json_body, str_arg

bp = Blueprint("buckets", __name__)


def _only_bucket_fields(body: dict, extra: frozenset[str] = frozenset()) -> dict:
    """Refuse any key that is not a design §3 field before it reaches a keyword argument.

    ``now``, ``self``, ``bucket_id`` or ``dedupe`` in a body would otherwise become an argument of
    the write call itself (a 500, or a silently changed write); each is named in a 400 instead.
    """
    unknown = sorted(k for k in body if k not in BUCKET_FIELDS and k not in extra)
    if unknown:
        raise ValidationError(f"unknown field(s) {', '.join(unknown)}; known fields are the design §3 names",
                              code="unknown_field")
    return body


def _no_letter(what: str) -> None:
    raise ValidationError(f"{what} a letter here: letters are written and locked through /v1/letters (the person's "
                          "side) or the MCP letter tools (the companion's), which record the side", field="type",
                          code="letter_route")


@bp.post("/v1/buckets")
def create_bucket():
    body = json_body()
    space = authorize_space(body.get("space"))
    if body.get("type") == "letter":
        _no_letter("cannot write")
    bid = get_brain().write(**_only_bucket_fields(body) | {"space": space})
    return jsonify({"id": bid}), 201


@bp.get("/v1/buckets")
def list_buckets():
    space = authorize_space(request.args.get("space"))
    btype = str_arg("type")
    if btype is not None and btype not in BUCKET_TYPES:
        raise ValidationError(f"expected one of {', '.join(BUCKET_TYPES)}, got {btype!r}", field="type")
    limit = int_arg("limit", 50, 1, 1000)
    return jsonify({"buckets": [b.to_dict() for b in get_brain().list(space, type=btype, limit=limit)]})


def _bucket_or_404(space: str, bucket_id: str):
    b = get_brain().get(space, bucket_id)
    if b is None:
        raise NotFoundError(f"no bucket {bucket_id!r} in space {space!r}")
    return b


@bp.get("/v1/buckets/<bucket_id>")
def get_bucket(bucket_id: str):
    space = authorize_space(request.args.get("space"))
    return jsonify(_bucket_or_404(space, bucket_id).to_dict())


@bp.get("/v1/buckets/<bucket_id>/sources")
def bucket_sources(bucket_id: str):
    """Every source that wrote this bucket's text ('' for a write without one): what a purge by source weighs."""
    space = authorize_space(request.args.get("space"))
    _bucket_or_404(space, bucket_id)
    return jsonify({"id": bucket_id, "sources": get_brain().sources(space, bucket_id)})


@bp.patch("/v1/buckets/<bucket_id>")
def patch_bucket(bucket_id: str):
    body = json_body()
    space = authorize_space(request.args.get("space") or body.get("space"))
    _only_bucket_fields(body)
    if body.get("type") == "letter" or _bucket_or_404(space, bucket_id).type == "letter":
        _no_letter("cannot change")
    body.pop("space", None)
    origin = body.pop("origin", None)
    bucket = get_brain().update(space, bucket_id, origin=origin, **body)
    return jsonify(bucket.to_dict())


@bp.delete("/v1/buckets/<bucket_id>")
def delete_bucket(bucket_id: str):
    space = authorize_space(request.args.get("space"))
    if not get_brain().delete(space, bucket_id):
        raise NotFoundError(f"no bucket {bucket_id!r} in space {space!r}")
    return jsonify({"deleted": bucket_id})


@bp.post("/v1/edges")
def create_edge():
    body = json_body()
    space = authorize_space(body.get("space"))
    unknown = sorted(set(body) - {"space", "from_id", "to_id", "relation", "confidence"})
    if unknown:
        raise ValidationError(f"unknown field(s) {', '.join(unknown)}", code="unknown_field")
    for key in ("from_id", "to_id", "relation"):
        if not isinstance(body.get(key), str):
            raise ValidationError("is required and must be a string", field=key)
    edge = get_brain().link(space, body["from_id"], body["to_id"], body["relation"], body.get("confidence", 0.8))
    return jsonify(edge.to_dict()), 201
