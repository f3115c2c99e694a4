"""Opaque pagination tokens: the LastEvaluatedKey, signed so a tampered or foreign token is refused."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json

from dfd.errors import BadRequest
from dfd.ids import is_hash

_MAC_BYTES = 16
MAX_TOKEN_CHARS = 512


def encode_token(last_key: dict[str, str], secret: str) -> str:
    payload = json.dumps(last_key, separators=(",", ":"), sort_keys=True).encode()
    mac = hmac.new(secret.encode(), payload, hashlib.sha256).digest()[:_MAC_BYTES]
    return base64.urlsafe_b64encode(mac + payload).decode().rstrip("=")


def decode_token(token: str, secret: str) -> dict[str, str]:
    """The file-table key a token stands for; BadRequest for anything malformed or tampered with."""
    invalid = BadRequest("last_evaluated_key is not a token this API issued", code="invalid_token")
    if not token or len(token) > MAX_TOKEN_CHARS:
        raise invalid
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    except (binascii.Error, ValueError):
        raise invalid from None
    mac, payload = raw[:_MAC_BYTES], raw[_MAC_BYTES:]
    expected = hmac.new(secret.encode(), payload, hashlib.sha256).digest()[:_MAC_BYTES]
    if len(mac) != _MAC_BYTES or not hmac.compare_digest(mac, expected):
        raise invalid
    try:
        key = json.loads(payload)
    except ValueError:
        raise invalid from None
    if not isinstance(key, dict) or set(key) != {"hash"} or not isinstance(key["hash"], str):
        raise invalid
    if not is_hash(key["hash"]):
        raise invalid
    return {"hash": key["hash"]}
