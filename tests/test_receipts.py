"""Receipts are checked here against an independent HMAC computation, byte for byte."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ombre_brain import ValidationError
from ombre_brain.forget.receipts import RECEIPT_TYPE, b64url_decode, canonical, make_receipt, sign, unwrap, verify

KEY = b"test-secret-\xe2\x9c\x93"


def payload(**over) -> dict:
    p = {"typ": RECEIPT_TYPE, "kid": "k1", "purge_id": "pg_1", "space": "haven:小雨",
         "target": {"bucket_ids": ["b1", "b2"]}, "deleted": {"buckets": 2, "moments": 5, "edges": 1, "facts": 0},
         "at": "2026-11-30T12:00:00+00:00"}
    p.update(over)
    return p


def independent_signature(p: dict, key: bytes) -> str:
    """What a third party would compute from the documented recipe, without our code."""
    raw = json.dumps(p, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return base64.urlsafe_b64encode(hmac.new(key, raw, hashlib.sha256).digest()).decode().rstrip("=")


def test_canonical_form_is_sorted_compact_utf8():
    raw = canonical({"b": 1, "a": {"d": [1, 2], "c": "小雨"}})
    assert raw == '{"a":{"c":"小雨","d":[1,2]},"b":1}'.encode()
    with pytest.raises(ValidationError):
        canonical({"x": float("nan")})


def test_signature_matches_independent_hmac_and_has_no_padding():
    r = make_receipt(payload(), KEY)
    assert r["signature"] == independent_signature(payload(), KEY)
    assert "=" not in r["signature"] and len(r["signature"]) == 43
    assert verify(r, {"k1": KEY}) == "k1"


def test_one_changed_payload_byte_fails():
    r = make_receipt(payload(), KEY)
    raw = bytearray(canonical(r["payload"]))
    i = raw.index(b'"moments":5') + len(b'"moments":')
    raw[i] = ord("6")  # one byte
    forged = json.loads(raw.decode())
    assert independent_signature(forged, KEY) != r["signature"]
    with pytest.raises(ValidationError, match="does not match"):
        verify({"payload": forged, "signature": r["signature"]}, {"k1": KEY})


@pytest.mark.parametrize("mutate, message", [
    (lambda r: r.update(signature=r["signature"][:-1] + ("A" if r["signature"][-1] != "A" else "B")),
     "does not match"),
    (lambda r: r.update(signature=r["signature"] + "="), "base64url"),
    (lambda r: r.update(signature="not base64!"), "base64url"),
    (lambda r: r["payload"].update(kid="k9"), "not configured"),
    (lambda r: r["payload"].update(typ="other"), "typ"),
    (lambda r: r.pop("payload"), "payload"),
])
def test_tampered_or_malformed_receipts_fail(mutate, message):
    r = make_receipt(payload(), KEY)
    r = json.loads(json.dumps(r))
    mutate(r)
    with pytest.raises(ValidationError, match=message) as exc:
        verify(r, {"k1": KEY})
    assert exc.value.code == "receipt_invalid"


def test_wrong_key_fails_and_rotated_key_still_verifies_its_own_receipts():
    old = make_receipt(payload(kid="k1"), b"old")
    new = make_receipt(payload(kid="k2"), b"new")
    keys = {"k1": b"old", "k2": b"new"}
    assert verify(old, keys) == "k1" and verify(new, keys) == "k2"
    with pytest.raises(ValidationError):
        verify(old, {"k1": b"new"})


def test_unwrap_accepts_the_http_answer_and_refuses_empty_keys():
    r = make_receipt(payload(), KEY)
    assert unwrap({"status": "purged", "purge_id": "pg_1", "receipt": r}) == r
    with pytest.raises(ValueError):
        sign(payload(), b"")
    with pytest.raises(ValidationError):
        b64url_decode("ab+/")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**12, 10**12) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(extra=st.dictionaries(st.text(min_size=1, max_size=8).filter(lambda k: k not in ("typ", "kid")), json_values,
                             max_size=5),
       key=st.binary(min_size=1, max_size=64), flip=st.integers(min_value=0))
def test_any_payload_round_trips_and_any_byte_flip_is_caught(extra, key, flip):
    p = payload() | extra
    r = make_receipt(p, key)
    assert r["signature"] == independent_signature(p, key)
    assert verify(r, {"k1": key}) == "k1"
    raw = bytearray(canonical(p))
    i = flip % len(raw)
    raw[i] ^= 0x01
    try:
        forged = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return  # the flipped bytes are no longer a payload at all
    if not isinstance(forged, dict) or canonical(forged) == canonical(p):
        return
    with pytest.raises(ValidationError):
        verify({"payload": forged, "signature": r["signature"]}, {"k1": key})
