"""Purge receipts: canonical JSON, HMAC-SHA256, base64url without padding (design §10).

Pure functions, no I/O, so that anyone holding the key can check a receipt with a few lines
of any language: canonicalise the payload (sorted keys, no whitespace, UTF-8), HMAC it with
the secret named by ``payload["kid"]``, and compare base64url strings in constant time.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Mapping
from typing import Any

from ..errors import ValidationError
from ..text import canonical_json

RECEIPT_TYPE = "purge-receipt+v1"


def _invalid(message: str) -> ValidationError:
    """A receipt that is malformed, names an unknown key, or whose signature does not match."""
    return ValidationError(message, code="receipt_invalid")


def canonical(value: Any) -> bytes:
    """The exact bytes that are signed: sorted keys, no whitespace, UTF-8, no NaN or infinity."""
    try:
        return canonical_json(value)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"receipt payload is not canonical JSON: {exc}", code="receipt_invalid") from None


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    """Decode base64url without padding; anything else (padding, other alphabets) is refused."""
    if not isinstance(text, str) or "=" in text or any(c in text for c in "+/ \n\r\t"):
        raise _invalid("signature is not base64url without padding")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise _invalid("signature is not base64url without padding") from None


def sign(payload: Mapping[str, Any], secret: bytes) -> str:
    """HMAC-SHA256 of the canonical payload, base64url without padding."""
    if not secret:
        raise ValueError("refusing to sign with an empty key")
    return b64url(hmac.new(secret, canonical(payload), hashlib.sha256).digest())


def make_receipt(payload: Mapping[str, Any], secret: bytes) -> dict:
    return {"payload": dict(payload), "signature": sign(payload, secret)}


ANSWER_FIELDS = frozenset({"status", "purge_id", "receipt"})  # a whole POST /v1/purge answer
PURGED, NOTHING_MATCHED = "purged", "nothing_matched"


def matched_nothing(payload: Mapping[str, Any]) -> bool:
    """True when a purge found nothing to remove: every deleted count 0 and no claim released."""
    deleted = payload.get("deleted")
    counts = deleted.values() if isinstance(deleted, Mapping) else ()
    return not any(counts) and not payload.get("released")


def status_of(payload: Mapping[str, Any]) -> str:
    """The answer's ``status`` for a receipt payload: ``purged``, or ``nothing_matched`` (deleted counts all 0)."""
    return NOTHING_MATCHED if matched_nothing(payload) else PURGED
RECEIPT_FIELDS = frozenset({"payload", "signature"})


def unwrap(document: Any) -> dict:
    """The receipt inside a file: a bare ``{payload, signature}`` or a whole ``POST /v1/purge`` answer.

    Only the payload is signed, so nothing unsigned may say something else: a field beside the
    receipt that disagrees with the payload (another ``purge_id``, a ``status`` other than the
    payload's: ``purged``, or ``nothing_matched`` when every deleted count is 0), or one that is
    not part of either shape, makes the receipt invalid.
    """
    outer: Mapping = {}
    if isinstance(document, Mapping) and isinstance(document.get("receipt"), Mapping):
        outer, document = document, document["receipt"]
    if not isinstance(document, Mapping):
        raise _invalid("expected a JSON object with 'payload' and 'signature'")
    payload, signature = document.get("payload"), document.get("signature")
    if not isinstance(payload, Mapping) or not isinstance(signature, str):
        raise _invalid("expected a JSON object with 'payload' (an object) and 'signature' (a string)")
    extra = sorted(set(outer) - ANSWER_FIELDS) + sorted(set(document) - RECEIPT_FIELDS)
    if extra:
        raise _invalid(f"unsigned field(s) {', '.join(map(str, extra))} beside the signed payload; a receipt "
                       "carries only payload and signature")
    if "purge_id" in outer and outer["purge_id"] != payload.get("purge_id"):
        raise _invalid(f"purge_id {outer['purge_id']!r} beside the receipt differs from the signed payload's "
                       f"{payload.get('purge_id')!r}")
    if "status" in outer and outer["status"] != status_of(payload):
        raise _invalid(f"status {outer['status']!r} beside the receipt is not {status_of(payload)!r}, what the "
                       "signed payload says")
    if payload.get("typ") != RECEIPT_TYPE:
        raise _invalid(f"payload typ is {payload.get('typ')!r}, expected {RECEIPT_TYPE!r}")
    if not isinstance(payload.get("kid"), str) or not payload["kid"]:
        raise _invalid("payload has no key id ('kid')")
    return {"payload": dict(payload), "signature": signature}


def verify(document: Any, secrets: Mapping[str, bytes]) -> str:
    """Check a receipt against the secrets by key id; returns the kid that verified it.

    The comparison is constant-time (``hmac.compare_digest``) over the base64url strings.
    """
    receipt = unwrap(document)
    kid = receipt["payload"]["kid"]
    secret = secrets.get(kid)
    if not secret:
        raise _invalid(f"receipt is signed with key {kid!r}, which is not configured")
    b64url_decode(receipt["signature"])  # refuse malformed encodings before comparing
    expected = sign(receipt["payload"], secret)
    if not hmac.compare_digest(expected.encode("ascii"), receipt["signature"].encode("ascii", "replace")):
        raise _invalid(f"signature does not match the payload under key {kid!r}")
    return kid
