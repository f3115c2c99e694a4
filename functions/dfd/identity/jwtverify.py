"""Cognito JWT verification, the way API Gateway's HTTP API JWT authorizer does it: ONE implementation for the
local stack's authorizer (dfdlocal.jwtauth) and the /lfs routes, which verify their credentials themselves
(dfd.identity.credentials: git-lfs needs an ``LFS-Authenticate`` challenge and HTTP Basic, which the authorizer cannot
do).

API Gateway (https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-jwt-authorizer.html) takes
the token from the identity source (``Authorization``, with or without ``Bearer``), checks its algorithm and
signature against the issuer's JWKS (key chosen by ``kid``), then the claims: ``iss`` equal to the configured
issuer, ``aud`` (or, when the token has no ``aud``, ``client_id``) equal to a configured audience, ``exp`` in the
future, ``nbf`` and ``iat`` in the past, and the route's scopes if any.

Here the same checks run with joserfc (never by hand): RS256 only (``alg: none``, HS256 with the public key and
every other algorithm are refused before any key is used), the key looked up by ``kid`` in a cached JWKS that is
fetched again, at most every ``min_refetch_seconds``, when a token names an unknown ``kid`` (key rotation). On
top, ``token_use`` must be one of ``token_uses`` (``access`` by default): the deployed authorizer gets the same
effect from its required scope ``aws.cognito.signin.user.admin``, which Cognito puts only in access tokens.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.request
from collections.abc import Callable, Collection, Mapping
from typing import Any

from joserfc import jws, jwt
from joserfc.errors import ClaimError, JoseError
from joserfc.jwk import Key, KeySet

log = logging.getLogger("dfd.identity.jwtverify")

ALGORITHMS = ("RS256",)
DEFAULT_LEEWAY_SECONDS = 10
DEFAULT_MIN_REFETCH_SECONDS = 30.0
MAX_TOKEN_BYTES = 16 * 1024

JwksSource = Callable[[], Mapping[str, Any]]
"""Returns the issuer's JSON Web Key Set ({"keys": [...]}); raises on failure."""


class TokenRejected(Exception):
    """The request carries no valid token: the server answers 401 {"message":"Unauthorized"}.

    ``reason`` says why (for logs only: a client is never told which check failed).
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def http_jwks_source(url: str, headers: Mapping[str, str] | None = None, timeout: float = 5.0) -> JwksSource:
    """A JWKS source that GETs ``url`` (the issuer's ``/.well-known/jwks.json``)."""

    def fetch() -> Mapping[str, Any]:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"JWKS URL must be http(s): {url}")
        request = urllib.request.Request(url, headers=dict(headers or {}))  # noqa: S310 - scheme checked above
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            document = json.loads(response.read())
        if not isinstance(document, dict):
            raise ValueError(f"{url} did not return a JSON object")
        return document

    return fetch


class JwtVerifier:
    """Verifies Cognito tokens for one issuer and one app client, like API Gateway's JWT authorizer."""

    def __init__(
        self,
        *,
        issuer: str,
        client_id: str,
        jwks: JwksSource,
        token_uses: Collection[str] = ("access",),
        required_scopes: Collection[str] = (),
        leeway_seconds: int = DEFAULT_LEEWAY_SECONDS,
        min_refetch_seconds: float = DEFAULT_MIN_REFETCH_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not issuer or not client_id:
            raise ValueError("issuer and client_id are required")
        self.issuer = issuer
        self.client_id = client_id
        self.token_uses = frozenset(token_uses)
        self.required_scopes = frozenset(required_scopes)
        self.leeway_seconds = leeway_seconds
        self.min_refetch_seconds = min_refetch_seconds
        self._jwks = jwks
        self._clock = clock
        self._keys: dict[str, Key] = {}
        self._fetched_at: float | None = None
        self._lock = threading.Lock()

    # -- entry points ------------------------------------------------------------------------------
    def verify_authorization(self, header: str | None) -> dict[str, Any]:
        """The claims of the token in an ``Authorization`` header value (``Bearer <jwt>`` or ``<jwt>``)."""
        if not header or not header.strip():
            raise TokenRejected("no Authorization header")
        scheme, _, rest = header.strip().partition(" ")
        token = rest.strip() if scheme.lower() == "bearer" else header.strip()
        return self.verify(token)

    def verify(self, token: str) -> dict[str, Any]:
        """The verified claims of ``token``; :class:`TokenRejected` for anything else."""
        if not token or len(token) > MAX_TOKEN_BYTES or token.count(".") != 2:
            raise TokenRejected("not a compact JWS")
        try:
            unverified = jws.extract_compact(token.encode("ascii"))
            header = unverified.headers()
        except (JoseError, ValueError, TypeError) as exc:
            raise TokenRejected(f"undecodable token: {exc}") from None
        alg = header.get("alg")
        if alg not in ALGORITHMS:
            raise TokenRejected(f"algorithm {alg!r} is not accepted")
        kid = header.get("kid")
        if not isinstance(kid, str) or not kid:
            raise TokenRejected("the token names no key (kid)")
        key = self._key(kid)
        try:
            decoded = jwt.decode(token, key, algorithms=list(ALGORITHMS))
        except (JoseError, ValueError, TypeError) as exc:
            raise TokenRejected(f"bad signature or payload: {type(exc).__name__}") from None
        claims = dict(decoded.claims)
        self._check_claims(claims)
        return claims

    # -- claims ----------------------------------------------------------------------------------------
    def _check_claims(self, claims: dict[str, Any]) -> None:
        registry = jwt.JWTClaimsRegistry(
            now=int(self._clock()),
            leeway=self.leeway_seconds,
            iss={"essential": True, "value": self.issuer},
            exp={"essential": True},
        )
        try:
            registry.validate(claims)
        except ClaimError as exc:
            raise TokenRejected(f"claim {exc.claim} refused: {exc}") from None
        # API Gateway: "aud" when present, else "client_id", must be one of the audiences.
        if "aud" in claims:
            audience = claims["aud"]
            audiences = audience if isinstance(audience, list) else [audience]
            if self.client_id not in audiences:
                raise TokenRejected("aud is not this client")
        elif claims.get("client_id") != self.client_id:
            raise TokenRejected("client_id is not this client")
        if claims.get("token_use") not in self.token_uses:
            raise TokenRejected(f"token_use {claims.get('token_use')!r} is not accepted")
        if self.required_scopes:
            scopes = claims.get("scope")
            granted = set(scopes.split()) if isinstance(scopes, str) else set()
            if not granted & self.required_scopes:
                raise TokenRejected("the token has none of the required scopes")

    # -- keys ------------------------------------------------------------------------------------------
    def _key(self, kid: str) -> Key:
        with self._lock:
            key = self._keys.get(kid)
            if key is not None:
                return key
            now = self._clock()
            if self._fetched_at is None or now - self._fetched_at >= self.min_refetch_seconds:
                self._fetched_at = now
                self._keys = self._load_keys()
                key = self._keys.get(kid)
            if key is None:
                raise TokenRejected(f"unknown key id {kid!r}")
            return key

    def _load_keys(self) -> dict[str, Key]:
        try:
            document = self._jwks()
            key_set = KeySet.import_key_set(dict(document))  # type: ignore[arg-type]
        except Exception as exc:  # any failure of the source: no keys, every token refused
            log.warning("cannot load the JWKS: %s", exc)
            return dict(self._keys)
        keys: dict[str, Key] = {}
        for key in key_set:
            if key.kid and key.key_type == "RSA" and key.get("use", "sig") == "sig":
                keys[key.kid] = key
        return keys
