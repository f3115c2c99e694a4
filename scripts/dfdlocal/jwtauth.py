"""The local stack's JWT authorizer: API Gateway's HTTP API JWT authorizer, verified by :mod:`dfd.identity.jwtverify`
(the same code the /lfs routes run), and the claims handed to the function as API Gateway does.

Every failure is a 401 ``{"message":"Unauthorized"}`` (dfdlocal.apigw).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from dfd.identity.jwtverify import JwksSource, JwtVerifier, TokenRejected, http_jwks_source

__all__ = ["JwksSource", "JwtVerifier", "TokenRejected", "api_gateway_claims", "http_jwks_source"]


def api_gateway_claims(claims: Mapping[str, Any]) -> dict[str, str]:
    """The claims as API Gateway passes them in ``requestContext.authorizer.jwt.claims``: every value a string,
    numbers in decimal (``"1700000000"``), booleans ``"true"``/``"false"``, arrays as ``"[a b]"``
    (``cognito:groups`` becomes ``"[admins tenant-acme]"``), objects as JSON; null claims are left out."""
    return {name: _claim_text(value) for name, value in claims.items() if value is not None}


def _claim_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "[" + " ".join(_claim_text(item) for item in value if item is not None) + "]"
    return json.dumps(value, separators=(",", ":"), sort_keys=True)
