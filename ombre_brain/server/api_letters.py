"""``/v1/letters``: the person's side of letters (design §19).

The MCP letter tools are the companion's channel; these routes are the person's (a page or an
app of theirs calls them). A letter written here is locked, when locked, by the ``person``; a
read here sees the person's own locked letters whole and the companion's sealed ones as metadata
only. Tokens scope spaces; a token bound to the companion (``server.tokens[].side: companion``)
is refused here, so the companion's credentials cannot act for the person.

- ``GET /v1/letters?space&query&limit&author&date_from&date_to``: newest first, or by ``query``
- ``GET /v1/letters/<id>?space``: one letter
- ``POST /v1/letters`` ``{space, content, title?, author?, user_name?, ai_name?, date?, lock_type?, unlock_date?}``
- ``PATCH /v1/letters/<id>`` ``{space, lock_type, unlock_date?}``: only the lock, only by its side
"""

from __future__ import annotations

from flask import Blueprint, jsonify, request

from ..errors import ValidationError
from ..tokens import require_side
from ..web import authorize_space, current_side, get_brain, int_arg, json_body, str_arg

bp = Blueprint("letters", __name__)

WRITE_FIELDS = frozenset({"space", "content", "title", "author", "user_name", "ai_name", "date", "lock_type",
                          "unlock_date"})


def _person() -> str:
    return require_side(current_side(), "person")


def _strings(body: dict, allowed: frozenset[str]) -> dict:
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise ValidationError(f"unknown field(s) {', '.join(unknown)}", code="unknown_field")
    for k, v in body.items():
        if k != "space" and not isinstance(v, str):
            raise ValidationError("expected a string", field=k)
    return {k: v for k, v in body.items() if k != "space"}


@bp.get("/v1/letters")
def list_letters():
    space = authorize_space(request.args.get("space"))
    side = _person()
    rows = get_brain().letters.read(space, side, query=str_arg("query") or "", limit=int_arg("limit", 10, 1, 100),
                                    author=str_arg("author") or "", date_from=str_arg("date_from") or "",
                                    date_to=str_arg("date_to") or "")
    return jsonify({"space": space, "side": side, "letters": [r.to_dict() for r in rows]})


@bp.get("/v1/letters/<letter_id>")
def get_letter(letter_id: str):
    space = authorize_space(request.args.get("space"))
    side = _person()
    return jsonify(get_brain().letters.get(space, side, letter_id).to_dict())


@bp.post("/v1/letters")
def write_letter():
    body = json_body()
    space = authorize_space(body.get("space"))
    side = _person()
    fields = _strings(body, WRITE_FIELDS)
    brain = get_brain()
    letter = brain.letters.write(space, side, **fields)
    return jsonify(brain.letters.get(space, side, letter.id).to_dict()), 201


@bp.patch("/v1/letters/<letter_id>")
def relock_letter(letter_id: str):
    body = json_body()
    space = authorize_space(request.args.get("space") or body.get("space"))
    side = _person()
    fields = _strings(body, frozenset({"space", "lock_type", "unlock_date"}))
    if "lock_type" not in fields:
        raise ValidationError("is required: none, timed or permanent", field="lock_type")
    read = get_brain().letters.relock(space, side, letter_id, fields["lock_type"], fields.get("unlock_date", ""))
    return jsonify(read.to_dict())
