"""Opaque pagination tokens: base64url of a small JSON naming the last file-table key of a page.

A token is opaque to clients (they pass it back as it came) and strictly validated: anything that is not the
base64url encoding of exactly ``{"hash": <64 lowercase hex>}``, within MAX_TOKEN_CHARS, is a 400
``invalid_token``. It is deliberately NOT signed. A token only names a position in a listing that its caller is
already allowed to read in full: ``GET /admin/hashes`` is admin-only, and any hash an admin writes into a token
just starts the scan at that hash, which the admin could list anyway. A signature would protect nothing, while
its key would have to be a managed secret (a Secrets Manager read at every cold start) — a key derived from
resource names, as before, is no secret at all. Future owner-scoped listings must put the owner in the token
and check it against the caller (docs/design.md, "Pagination tokens").
"""

from __future__ import annotations

import base64
import binascii
import json

from dfd.core.errors import BadRequest
from dfd.core.ids import is_hash, is_upload_id

MAX_TOKEN_CHARS = 512


def encode_token(last_key: dict[str, str]) -> str:
    payload = json.dumps(last_key, separators=(",", ":"), sort_keys=True).encode()
    return base64.urlsafe_b64encode(payload).decode().rstrip("=")


def decode_upload_token(token: str, owner: str) -> dict[str, str]:
    """GET /uploads' token: the position in its caller's own listing (owner, created_at, upload_id), strictly
    validated, and refused (400 invalid_token, as any other bad token) unless it names the CALLER's listing."""
    invalid = BadRequest("last_evaluated_key is not a token this API issued", code="invalid_token")
    key = _decode_json(token, invalid)
    if not isinstance(key, dict) or set(key) != {"owner", "created_at", "upload_id"}:
        raise invalid
    if not all(isinstance(value, str) for value in key.values()) or not is_upload_id(key["upload_id"]):
        raise invalid
    if key["owner"] != owner or not 1 <= len(key["created_at"]) <= 40:
        raise invalid
    return {"owner": key["owner"], "created_at": key["created_at"], "upload_id": key["upload_id"]}


def _decode_json(token: str, invalid: BadRequest) -> object:
    if not token or len(token) > MAX_TOKEN_CHARS:
        raise invalid
    try:
        raw = base64.b64decode(token + "=" * (-len(token) % 4), altchars=b"-_", validate=True)
        decoded: object = json.loads(raw)
    except (binascii.Error, ValueError):
        raise invalid from None
    return decoded


def decode_token(token: str) -> dict[str, str]:
    """The file-table key a token stands for; BadRequest for anything that is not a token this API issues."""
    invalid = BadRequest("last_evaluated_key is not a token this API issued", code="invalid_token")
    if not token or len(token) > MAX_TOKEN_CHARS:
        raise invalid
    try:
        raw = base64.b64decode(token + "=" * (-len(token) % 4), altchars=b"-_", validate=True)
        key = json.loads(raw)
    except (binascii.Error, ValueError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise invalid from None
    if not isinstance(key, dict) or set(key) != {"hash"} or not isinstance(key["hash"], str):
        raise invalid
    if not is_hash(key["hash"]):
        raise invalid
    return {"hash": key["hash"]}
