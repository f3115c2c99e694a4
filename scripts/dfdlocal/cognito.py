"""The local user pool: the template's Cognito pool, app client and groups created on the emulator (moto's
cognito-idp), plus the local tenants and users every developer signs in with.

Users (one password for all: ``$DFD_LOCAL_PASSWORD``, default :data:`DEFAULT_PASSWORD`, set permanent so no
NEW_PASSWORD_REQUIRED challenge):

* ``alice`` and ``carol`` — group ``tenant-acme`` (tenant ``acme``)
* ``bob`` — group ``tenant-globex`` (tenant ``globex``)
* ``admin`` — group ``admins``

What moto does (moto 5.1, ``moto/cognitoidp``), and what follows for the local stack:

* Tokens are RS256, signed with ONE key for every pool (``kid`` ``"dummy"``); moto ships its private half in
  its package, so anyone could mint tokens with it. :func:`install_signing_key` replaces it, when the stack
  starts, with a key generated then and held in memory only: the authorizer trusts that key alone (the public
  half, which the emulator also serves at ``/<pool-id>/.well-known/jwks.json``). In server mode moto picks the
  backend of a request from the credential scope of its ``Authorization`` header first; an unsigned GET of that
  path is routed by path matching (it works with moto 5.1). :attr:`LocalPool.jwks_source` sends a
  SigV4-looking header naming cognito-idp (:data:`MOTO_JWKS_HEADERS`) so the routing does not depend on that
  fallback.
* ``iss`` is ``https://cognito-idp.<region>.amazonaws.com/<pool-id>`` — the AWS value, not the emulator's URL —
  so the local verifier is configured with :attr:`LocalPool.issuer` and fetches keys from
  :attr:`LocalPool.jwks_url` (the emulator).
* Access tokens carry ``client_id``, ``username``, ``scope`` ``aws.cognito.signin.user.admin``, ``token_use``,
  ``cognito:groups`` (a list, absent when the user has no group); id tokens ``aud`` and ``cognito:username``.
* Tokens always live 1 hour: moto ignores the client's ``AccessTokenValidity`` / ``TokenValidityUnits``. It does
  not enforce ``ExplicitAuthFlows`` nor ``AliasAttributes`` / ``CaseSensitive: false`` (sign in with the exact
  username); it does enforce the pool's password policy on ``AdminSetUserPassword``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dfdlocal.jwtauth import JwksSource, JwtVerifier, http_jwks_source

if TYPE_CHECKING:
    from collections.abc import Iterable

    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment
    from mypy_boto3_cognito_idp import CognitoIdentityProviderClient

PASSWORD_ENV = "DFD_LOCAL_PASSWORD"  # noqa: S105 - the variable name, not a password
DEFAULT_PASSWORD = "dfd-Local-pass1"  # noqa: S105 - documented local-only password
ADMIN_GROUP = "admins"
LOCAL_TENANT_GROUPS: dict[str, str] = {
    "tenant-acme": "Local tenant acme (alice, carol).",
    "tenant-globex": "Local tenant globex (bob).",
}
LOCAL_USERS: dict[str, str] = {
    "alice": "tenant-acme",
    "carol": "tenant-acme",
    "bob": "tenant-globex",
    "admin": "admins",
}
# Required by the deployed authorizer (template.yaml): Cognito puts it in access tokens only.
ACCESS_SCOPE = "aws.cognito.signin.user.admin"
MOTO_JWKS_HEADERS = {
    "Authorization": (
        "AWS4-HMAC-SHA256 Credential=testing/20240101/{region}/cognito-idp/aws4_request, "
        "SignedHeaders=host, Signature=0"
    )
}

COGNITO_TARGET_PREFIX = "AWSCognitoIdentityProviderService."
CORS_EXPOSED = "x-amzn-requestid,x-amzn-errortype,x-amzn-errormessage,date"

POOL_TYPE = "AWS::Cognito::UserPool"
CLIENT_TYPE = "AWS::Cognito::UserPoolClient"
GROUP_TYPE = "AWS::Cognito::UserPoolGroup"
# Template property -> CreateUserPool parameter, for what moto accepts.
POOL_PROPERTIES = {
    "UserPoolName": "PoolName",
    "AliasAttributes": "AliasAttributes",
    "UsernameAttributes": "UsernameAttributes",
    "AutoVerifiedAttributes": "AutoVerifiedAttributes",
    "UsernameConfiguration": "UsernameConfiguration",
    "Policies": "Policies",
    "AdminCreateUserConfig": "AdminCreateUserConfig",
    "AccountRecoverySetting": "AccountRecoverySetting",
    "MfaConfiguration": "MfaConfiguration",
    "DeletionProtection": "DeletionProtection",
    "Schema": "Schema",
    "UserPoolTags": "UserPoolTags",
}
CLIENT_PROPERTIES = (
    "ClientName",
    "GenerateSecret",
    "ExplicitAuthFlows",
    "AccessTokenValidity",
    "IdTokenValidity",
    "RefreshTokenValidity",
    "TokenValidityUnits",
    "PreventUserExistenceErrors",
    "EnableTokenRevocation",
    "ReadAttributes",
    "WriteAttributes",
)
GROUP_PROPERTIES = ("GroupName", "Description", "Precedence")


class CognitoTemplateError(ValueError):
    """The template has no usable Cognito pool / client for the local stack."""


@dataclass(frozen=True)
class CognitoDefs:
    """The template's pool, its app client and its groups, properties evaluated."""

    pool_logical_id: str
    pool: dict[str, Any]
    client_logical_id: str
    client: dict[str, Any]
    groups: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class LocalPool:
    user_pool_id: str
    client_id: str
    issuer: str  # the `iss` of moto's tokens (the AWS form)
    jwks_url: str  # on the emulator
    region: str
    password: str
    users: Mapping[str, str]  # username -> group

    def describe(self, endpoint: str) -> dict[str, Any]:
        """What the stack publishes (ready file, tests, scripts/token): ``endpoint`` is the emulator's URL."""
        return {
            "endpoint": endpoint,
            "user_pool_id": self.user_pool_id,
            "client_id": self.client_id,
            "issuer": self.issuer,
            "jwks_url": self.jwks_url,
            "region": self.region,
            "password": self.password,
            "users": dict(self.users),
        }

    def jwks_source(self) -> JwksSource:
        """Fetches the pool's JWKS from the emulator (moto server mode)."""
        headers = {name: value.format(region=self.region) for name, value in MOTO_JWKS_HEADERS.items()}
        return http_jwks_source(self.jwks_url, headers=headers)

    def verifier(self, jwks: JwksSource | None = None) -> JwtVerifier:
        """The local JWT authorizer for this pool and client (access tokens with the template's scope)."""
        return JwtVerifier(
            issuer=self.issuer,
            client_id=self.client_id,
            jwks=jwks or self.jwks_source(),
            token_uses=("access",),
            required_scopes=(ACCESS_SCOPE,),
        )


MOTO_KID = "dummy"  # moto writes this kid into every token header


def install_signing_key(kept: Mapping[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Make every user pool of this process's emulator sign with ``kept`` (a private JWK, from the data directory)
    or a key generated now (call before the first pool is created) and serve its public half as the pools' JWKS;
    return that JWKS (the authorizer's) and the private JWK (to keep)."""
    from joserfc.jwk import RSAKey
    from moto.cognitoidp import models, responses

    if kept is not None:
        key = RSAKey.import_key(dict(kept))
    else:
        key = RSAKey.generate_key(2048, parameters={"kid": MOTO_KID, "alg": "RS256", "use": "sig"}, private=True)
    private, jwks = key.as_dict(private=True), {"keys": [key.as_dict(private=False)]}
    shipped = getattr(models, "load_resource")  # noqa: B009 - moto's module imports it, without re-exporting

    def load_resource(resource: str) -> Any:
        return dict(private) if resource == "cognitoidp/resources/jwks-private.json" else shipped(resource)

    setattr(models, "load_resource", load_resource)  # noqa: B010 - read by each CognitoIdpUserPool as it is created
    responses.CognitoIdpJsonWebKeyResponse.json_web_key = json.dumps(jwks).encode()
    return jwks, private


def local_password(environ: Mapping[str, str] | None = None) -> str:
    """``$DFD_LOCAL_PASSWORD`` or the documented default."""
    return (environ if environ is not None else os.environ).get(PASSWORD_ENV) or DEFAULT_PASSWORD


def cognito_definitions(template: Mapping[str, Any], resolve: Callable[[Any], Any]) -> CognitoDefs:
    """The one user pool of ``template`` (CloudFormation long form), its app client and its groups.

    ``resolve`` evaluates intrinsic functions with local names (``dfdlocal.template.Resolver.resolve``).
    """
    resources: Mapping[str, Any] = template.get("Resources") or {}
    pools = [lid for lid, res in resources.items() if isinstance(res, dict) and res.get("Type") == POOL_TYPE]
    if len(pools) != 1:
        raise CognitoTemplateError(f"expected exactly one {POOL_TYPE}, found {len(pools)}")
    pool_id = pools[0]

    def of_pool(kind: str) -> list[tuple[str, dict[str, Any]]]:
        found = []
        for logical_id, resource in resources.items():
            if not isinstance(resource, dict) or resource.get("Type") != kind:
                continue
            properties = dict(resource.get("Properties") or {})
            if properties.get("UserPoolId") == {"Ref": pool_id}:
                found.append((logical_id, properties))
        return found

    clients = of_pool(CLIENT_TYPE)
    if len(clients) != 1:
        raise CognitoTemplateError(f"expected exactly one {CLIENT_TYPE} of {pool_id}, found {len(clients)}")
    client_id, client = clients[0]

    def evaluated(logical_id: str, properties: Mapping[str, Any], names: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in names:
            if name in properties:
                try:
                    out[name] = resolve(properties[name])
                except Exception as exc:
                    raise CognitoTemplateError(f"{logical_id}.{name}: {exc}") from exc
        return out

    pool_props = dict(resources[pool_id].get("Properties") or {})
    return CognitoDefs(
        pool_logical_id=pool_id,
        pool=evaluated(pool_id, pool_props, POOL_PROPERTIES),
        client_logical_id=client_id,
        client=evaluated(client_id, client, CLIENT_PROPERTIES),
        groups=tuple(evaluated(lid, props, GROUP_PROPERTIES) for lid, props in of_pool(GROUP_TYPE)),
    )


def bootstrap(
    idp: CognitoIdentityProviderClient,
    definitions: CognitoDefs,
    *,
    endpoint: str,
    password: str | None = None,
) -> LocalPool:
    """Create the pool, its client, the template's groups, the local tenant groups and the local users.

    ``endpoint`` is the emulator's URL (for the JWKS URL). Every call creates a new pool (the emulator starts
    empty each run).
    """
    password = password or local_password()
    region = idp.meta.region_name
    pool_params = {POOL_PROPERTIES[name]: value for name, value in definitions.pool.items()}
    pool_params.setdefault("PoolName", definitions.pool_logical_id)
    user_pool_id = idp.create_user_pool(**pool_params)["UserPool"]["Id"]

    client_params = dict(definitions.client)
    client_params.setdefault("ClientName", definitions.client_logical_id)
    client_params["GenerateSecret"] = False  # the local stack signs in like the public web client
    client_id = idp.create_user_pool_client(UserPoolId=user_pool_id, **client_params)["UserPoolClient"]["ClientId"]

    groups: dict[str, dict[str, Any]] = {}
    for group in definitions.groups:
        groups[str(group["GroupName"])] = group
    for name, description in LOCAL_TENANT_GROUPS.items():
        groups.setdefault(name, {"GroupName": name, "Description": description})
    if ADMIN_GROUP not in groups:
        raise CognitoTemplateError(f"the template defines no {GROUP_TYPE} named {ADMIN_GROUP!r}")
    for group in groups.values():
        idp.create_group(UserPoolId=user_pool_id, **group)

    for username, group_name in LOCAL_USERS.items():
        idp.admin_create_user(UserPoolId=user_pool_id, Username=username, MessageAction="SUPPRESS")
        idp.admin_set_user_password(UserPoolId=user_pool_id, Username=username, Password=password, Permanent=True)
        idp.admin_add_user_to_group(UserPoolId=user_pool_id, Username=username, GroupName=group_name)

    return local_pool(user_pool_id, client_id, region=region, endpoint=endpoint, password=password)


def adopt(
    idp: CognitoIdentityProviderClient, user_pool_id: str, *, endpoint: str, password: str | None = None
) -> LocalPool:
    """The pool kept from the last run (dfdlocal.persist): its app client, its users as they were (their ``sub``
    too); the local users' password is set to this run's (the banner's)."""
    password = password or local_password()
    client_id = idp.list_user_pool_clients(UserPoolId=user_pool_id, MaxResults=1)["UserPoolClients"][0]["ClientId"]
    for username in LOCAL_USERS:
        idp.admin_set_user_password(UserPoolId=user_pool_id, Username=username, Password=password, Permanent=True)
    return local_pool(user_pool_id, client_id, region=idp.meta.region_name, endpoint=endpoint, password=password)


def local_pool(user_pool_id: str, client_id: str, *, region: str, endpoint: str, password: str) -> LocalPool:
    return LocalPool(
        user_pool_id=user_pool_id,
        client_id=client_id,
        issuer=f"https://cognito-idp.{region}.amazonaws.com/{user_pool_id}",
        jwks_url=f"{endpoint.rstrip('/')}/{user_pool_id}/.well-known/jwks.json",
        region=region,
        password=password,
        users=dict(LOCAL_USERS),
    )


class CognitoCors:
    """WSGI middleware: CORS for the Cognito API on the emulator, as cognito-idp answers browsers (any origin).

    The web pages sign in from the HTTP API's origin with ``POST /`` and ``X-Amz-Target:
    AWSCognitoIdentityProviderService.InitiateAuth``; the emulator runs with moto's global CORS off (the bucket's
    CORS rules are authoritative), so the preflight naming ``x-amz-target`` and the Cognito calls get their CORS
    headers here. Other requests (S3 preflights, signed SDK calls) pass through untouched.
    """

    def __init__(self, app: WSGIApplication) -> None:
        self.app = app

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        origin = environ.get("HTTP_ORIGIN")
        if not origin:
            return self.app(environ, start_response)
        requested = str(environ.get("HTTP_ACCESS_CONTROL_REQUEST_HEADERS", "")).lower()
        if environ.get("REQUEST_METHOD") == "OPTIONS" and "x-amz-target" in requested.replace(" ", "").split(","):
            start_response(
                "200 OK",
                [
                    ("access-control-allow-origin", "*"),
                    ("access-control-allow-methods", "POST"),
                    ("access-control-allow-headers", requested),
                    ("access-control-max-age", "600"),
                    ("content-length", "0"),
                ],
            )
            return [b""]
        if not str(environ.get("HTTP_X_AMZ_TARGET", "")).startswith(COGNITO_TARGET_PREFIX):
            return self.app(environ, start_response)

        def with_cors(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            kept = [(name, value) for name, value in headers if not name.lower().startswith("access-control-")]
            kept += [("access-control-allow-origin", "*"), ("access-control-expose-headers", CORS_EXPOSED)]
            return start_response(status, kept, exc_info)

        return self.app(environ, with_cors)
