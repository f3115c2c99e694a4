"""Credentials on the /lfs routes, checked by the function itself with the HTTP API authorizer's code and rules.

git-lfs first calls without credentials and understands only ``LFS-Authenticate: Basic``; the HTTP API's JWT
authorizer answers 401 without that header and refuses Basic, so the /lfs routes have no authorizer and run
this instead:

* ``Authorization: Basic base64(<any user>:<secret>)`` — git's credential helpers — where the secret is a
  personal access token (``dfd_pat_...``, dfd.identity.pats) or a Cognito access token;
* ``Authorization: Bearer <access token>`` — ``git config http.<lfs.url>.extraHeader`` in CI jobs (a personal
  access token is accepted there too).

An access token is verified by :class:`dfd.identity.jwtverify.JwtVerifier` exactly as the authorizer does (RS256 against
the pool's JWKS, issuer, client, expiry, token_use ``access`` and the authorizer's scope), then turned into a
:class:`dfd.identity.caller.Caller` by the same :func:`dfd.identity.caller.caller_from_claims`. Anything else is 401.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping
from dataclasses import dataclass

from dfd.core.config import required_env
from dfd.core.errors import Unauthorized
from dfd.identity.caller import Caller, caller_from_claims
from dfd.identity.jwtverify import JwtVerifier, TokenRejected
from dfd.identity.pats import PatService, looks_like_pat

ACCESS_SCOPE = "aws.cognito.signin.user.admin"  # the HTTP API authorizer's AuthorizationScopes (template.yaml)
MAX_HEADER = 16 * 1024
DEFAULT_DOCUMENTATION_URL = "https://github.com/git-lfs/git-lfs/blob/main/docs/api/batch.md"


@dataclass(frozen=True, slots=True)
class LfsSettings:
    tokens_table: str
    locks_table: str
    issuer: str  # the user pool's issuer: https://cognito-idp.<region>.amazonaws.com/<pool id>
    client_id: str  # the app client the tokens must be for
    user_pool_id: str  # the pool personal access tokens' users are looked up in
    jwks_url: str  # the pool's keys: <issuer>/.well-known/jwks.json unless set (the local stack's emulator)
    documentation_url: str  # the documentation_url of every LFS error body
    # the API's URL, for the links the batch hands out (never the request's Host or X-Forwarded-Proto):
    # LFS_API_URL, where "{api_id}" stands for the invoking HTTP API's id (the template cannot name its own API
    # here: the API's integrations name this function, so a reference would be a cycle)
    api_url: str

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> LfsSettings:
        env = os.environ if env is None else env
        values = {}
        for name, variable in (
            ("tokens_table", "LFS_TOKENS_TABLE"),
            ("locks_table", "LFS_LOCKS_TABLE"),
            ("issuer", "JWT_ISSUER"),
            ("client_id", "JWT_AUDIENCE"),
            ("user_pool_id", "USER_POOL_ID"),
            ("api_url", "LFS_API_URL"),
        ):
            values[name] = required_env(variable, env)
        issuer = values["issuer"].rstrip("/")
        return cls(
            tokens_table=values["tokens_table"],
            locks_table=values["locks_table"],
            issuer=values["issuer"],
            client_id=values["client_id"],
            user_pool_id=values["user_pool_id"],
            jwks_url=env.get("JWKS_URL", "").strip() or f"{issuer}/.well-known/jwks.json",
            documentation_url=env.get("LFS_DOCUMENTATION_URL", "").strip() or DEFAULT_DOCUMENTATION_URL,
            api_url=values["api_url"].rstrip("/"),
        )

    def api_url_for(self, api_id: str) -> str:
        """The API's base URL (no trailing slash) for a request that ``api_id`` (API Gateway's, not the
        client's) delivered."""
        return self.api_url.replace("{api_id}", api_id)


class CredentialChecker:
    def __init__(self, verifier: JwtVerifier, pats: PatService) -> None:
        self._verifier = verifier
        self._pats = pats

    def caller(self, authorization: str | None) -> Caller:
        """The caller an ``Authorization`` header proves; Unauthorized (401) for anything else."""
        if not authorization or len(authorization) > MAX_HEADER:
            raise Unauthorized("credentials are required")
        scheme, _, value = authorization.strip().partition(" ")
        value = value.strip()
        if scheme.lower() == "basic":
            try:
                decoded = base64.b64decode(value, validate=True).decode("utf-8")
            except (binascii.Error, ValueError):
                raise Unauthorized("malformed Basic credentials") from None
            _, colon, secret = decoded.partition(":")
            if not colon:
                raise Unauthorized("malformed Basic credentials")
        elif scheme.lower() == "bearer":
            secret = value
        else:
            raise Unauthorized("credentials must be Basic or Bearer")
        return self._secret(secret)

    def _secret(self, secret: str) -> Caller:
        if looks_like_pat(secret):
            caller = self._pats.authenticate(secret)
            if caller is None:
                raise Unauthorized("the personal access token is unknown, revoked or expired")
            return caller
        try:
            claims = self._verifier.verify(secret)
        except TokenRejected:
            raise Unauthorized("the access token is not valid") from None
        return caller_from_claims(claims)


def verifier_for(settings: LfsSettings) -> JwtVerifier:
    """The JWT checks of the HTTP API's authorizer: this pool, this client, access tokens with its scope."""
    from dfd.identity.jwtverify import http_jwks_source

    return JwtVerifier(
        issuer=settings.issuer,
        client_id=settings.client_id,
        jwks=http_jwks_source(settings.jwks_url),
        token_uses=("access",),
        required_scopes=(ACCESS_SCOPE,),
    )
