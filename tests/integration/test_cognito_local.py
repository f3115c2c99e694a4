"""The local user pool end to end, in process: template → moto cognito-idp → InitiateAuth → the local JWT
authorizer → API Gateway's claim strings → dfd.identity.caller's Caller."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import boto3
import pytest
import requests
from cfnlint.decode import cfn_yaml
from moto import mock_aws
from moto.server import ThreadedMotoServer

from dfd.core.errors import Unauthorized
from dfd.identity.caller import Caller, caller_from_event
from dfdlocal.cognito import (
    DEFAULT_PASSWORD,
    LOCAL_USERS,
    PASSWORD_ENV,
    LocalPool,
    bootstrap,
    cognito_definitions,
    local_password,
)
from dfdlocal.jwtauth import JwtVerifier, TokenRejected, api_gateway_claims
from dfdlocal.template import Resolver

TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"
ENDPOINT = "http://127.0.0.1:4566"


@pytest.fixture
def idp() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("cognito-idp", region_name="us-east-1")


@pytest.fixture
def pool(idp: Any) -> LocalPool:
    template = cfn_yaml.load(str(TEMPLATE))
    definitions = cognito_definitions(template, Resolver(template, ENDPOINT).resolve)
    return bootstrap(idp, definitions, endpoint=ENDPOINT, password=DEFAULT_PASSWORD)


def moto_jwks(pool: LocalPool) -> Mapping[str, Any]:
    """The JWKS from moto's (mocked) cognito-idp endpoint, at the issuer's well-known URL as on AWS."""
    response = requests.get(f"{pool.issuer}/.well-known/jwks.json", timeout=5)
    response.raise_for_status()
    document: Mapping[str, Any] = response.json()
    return document


def sign_in(idp: Any, pool: LocalPool, username: str, password: str = DEFAULT_PASSWORD) -> dict[str, Any]:
    result: dict[str, Any] = idp.initiate_auth(
        ClientId=pool.client_id,
        AuthFlow="USER_PASSWORD_AUTH",
        AuthParameters={"USERNAME": username, "PASSWORD": password},
    )["AuthenticationResult"]
    return result


def http_event(claims: Mapping[str, str]) -> dict[str, Any]:
    return {
        "version": "2.0",
        "routeKey": "GET /metadata/{id}",
        "rawPath": "/metadata/x",
        "headers": {},
        "requestContext": {
            "http": {"method": "GET", "path": "/metadata/x"},
            "stage": "$default",
            "authorizer": {"jwt": {"claims": dict(claims), "scopes": None}},
        },
        "isBase64Encoded": False,
    }


def caller_of(idp: Any, pool: LocalPool, verifier: JwtVerifier, username: str) -> tuple[Caller, dict[str, str]]:
    token = sign_in(idp, pool, username)["AccessToken"]
    claims = api_gateway_claims(verifier.verify_authorization(f"Bearer {token}"))
    return caller_from_event(http_event(claims)), claims


def test_bootstrap_creates_the_template_pool_client_groups_and_users(idp: Any, pool: LocalPool) -> None:
    described = idp.describe_user_pool(UserPoolId=pool.user_pool_id)["UserPool"]
    assert described["Name"] == "dfd-local-users"  # UserPoolName: !Sub "${AWS::StackName}-users", evaluated
    assert described["Policies"]["PasswordPolicy"]["MinimumLength"] == 12
    client = idp.describe_user_pool_client(UserPoolId=pool.user_pool_id, ClientId=pool.client_id)["UserPoolClient"]
    assert "ClientSecret" not in client
    assert set(client["ExplicitAuthFlows"]) == {
        "ALLOW_USER_PASSWORD_AUTH",
        "ALLOW_USER_SRP_AUTH",
        "ALLOW_REFRESH_TOKEN_AUTH",
    }
    groups = {g["GroupName"] for g in idp.list_groups(UserPoolId=pool.user_pool_id)["Groups"]}
    assert groups == {"admins", "tenant-acme", "tenant-globex"}
    for username, group in LOCAL_USERS.items():
        user = idp.admin_get_user(UserPoolId=pool.user_pool_id, Username=username)
        assert user["UserStatus"] == "CONFIRMED"
        member_of = idp.admin_list_groups_for_user(UserPoolId=pool.user_pool_id, Username=username)["Groups"]
        assert [g["GroupName"] for g in member_of] == [group]
    assert pool.issuer == f"https://cognito-idp.us-east-1.amazonaws.com/{pool.user_pool_id}"
    assert pool.jwks_url == f"{ENDPOINT}/{pool.user_pool_id}/.well-known/jwks.json"


def test_moto_issues_tokens_with_the_issuer_the_verifier_expects(idp: Any, pool: LocalPool) -> None:
    verifier = pool.verifier(jwks=lambda: moto_jwks(pool))
    claims = verifier.verify(sign_in(idp, pool, "alice")["AccessToken"])
    assert claims["iss"] == pool.issuer
    assert claims["client_id"] == pool.client_id
    assert claims["token_use"] == "access"


@pytest.mark.parametrize(
    ("username", "tenant", "is_admin"),
    [("alice", "acme", False), ("carol", "acme", False), ("bob", "globex", False)],
)
def test_tenant_users_become_callers_of_their_tenant(
    idp: Any, pool: LocalPool, username: str, tenant: str, is_admin: bool
) -> None:
    verifier = pool.verifier(jwks=lambda: moto_jwks(pool))
    caller, claims = caller_of(idp, pool, verifier, username)
    assert claims["cognito:groups"] == f"[tenant-{tenant}]"  # API Gateway's bracketed string
    assert caller.tenant == tenant
    assert caller.is_admin is is_admin
    assert caller.username == username
    assert caller.owner == claims["sub"]


def test_admin_is_admin_with_a_tenant_of_one(idp: Any, pool: LocalPool) -> None:
    verifier = pool.verifier(jwks=lambda: moto_jwks(pool))
    caller, _ = caller_of(idp, pool, verifier, "admin")
    assert caller.is_admin is True
    assert caller.tenant == f"user:{caller.owner}"


def test_alice_and_carol_share_a_tenant_but_not_an_owner(idp: Any, pool: LocalPool) -> None:
    verifier = pool.verifier(jwks=lambda: moto_jwks(pool))
    alice, _ = caller_of(idp, pool, verifier, "alice")
    carol, _ = caller_of(idp, pool, verifier, "carol")
    assert alice.tenant == carol.tenant == "acme"
    assert alice.owner != carol.owner


def test_id_tokens_and_other_clients_are_refused(idp: Any, pool: LocalPool) -> None:
    verifier = pool.verifier(jwks=lambda: moto_jwks(pool))
    with pytest.raises(TokenRejected, match="token_use"):
        verifier.verify(sign_in(idp, pool, "alice")["IdToken"])
    other = idp.create_user_pool_client(UserPoolId=pool.user_pool_id, ClientName="other")["UserPoolClient"]
    token = idp.initiate_auth(
        ClientId=other["ClientId"],
        AuthFlow="USER_PASSWORD_AUTH",
        AuthParameters={"USERNAME": "alice", "PASSWORD": DEFAULT_PASSWORD},
    )["AuthenticationResult"]["AccessToken"]
    with pytest.raises(TokenRejected, match="client_id"):
        verifier.verify(token)


def test_a_token_of_another_pool_is_refused(idp: Any, pool: LocalPool) -> None:
    """moto signs every pool's tokens with the same key: only the issuer tells them apart."""
    template = cfn_yaml.load(str(TEMPLATE))
    other = bootstrap(idp, cognito_definitions(template, Resolver(template, ENDPOINT).resolve), endpoint=ENDPOINT)
    verifier = pool.verifier(jwks=lambda: moto_jwks(pool))
    with pytest.raises(TokenRejected, match="iss"):
        verifier.verify(sign_in(idp, other, "alice")["AccessToken"])


def test_a_wrong_password_gets_no_token(idp: Any, pool: LocalPool) -> None:
    with pytest.raises(idp.exceptions.NotAuthorizedException):
        sign_in(idp, pool, "alice", password="wrong-Password1")


def test_no_claims_is_unauthorized() -> None:
    with pytest.raises(Unauthorized):
        caller_from_event(http_event({}))


def test_the_password_comes_from_the_environment(idp: Any) -> None:
    assert local_password({}) == DEFAULT_PASSWORD
    assert local_password({PASSWORD_ENV: ""}) == DEFAULT_PASSWORD
    assert local_password({PASSWORD_ENV: "Another-pass-2"}) == "Another-pass-2"
    template = cfn_yaml.load(str(TEMPLATE))
    definitions = cognito_definitions(template, Resolver(template, ENDPOINT).resolve)
    pool = bootstrap(idp, definitions, endpoint=ENDPOINT, password="Another-pass-2")
    assert sign_in(idp, pool, "bob", password="Another-pass-2")["AccessToken"]
    with pytest.raises(idp.exceptions.NotAuthorizedException):
        sign_in(idp, pool, "bob")


def test_a_password_the_template_policy_refuses_fails_the_bootstrap(idp: Any) -> None:
    template = cfn_yaml.load(str(TEMPLATE))
    definitions = cognito_definitions(template, Resolver(template, ENDPOINT).resolve)
    with pytest.raises(idp.exceptions.InvalidPasswordException):
        bootstrap(idp, definitions, endpoint=ENDPOINT, password="short")


def test_server_mode_serves_the_jwks_to_the_local_verifier() -> None:
    """As `make run` does: moto over HTTP, the verifier fetching the pool's JWKS from the emulator."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        idp = boto3.client("cognito-idp", region_name="us-east-1", endpoint_url=endpoint)
        template = cfn_yaml.load(str(TEMPLATE))
        pool = bootstrap(idp, cognito_definitions(template, Resolver(template, endpoint).resolve), endpoint=endpoint)
        assert pool.jwks_url.startswith(endpoint + "/")
        verifier = pool.verifier()  # fetches pool.jwks_url over HTTP
        token = sign_in(idp, pool, "bob")["AccessToken"]
        caller = caller_from_event(http_event(api_gateway_claims(verifier.verify_authorization(f"Bearer {token}"))))
        assert (caller.tenant, caller.is_admin, caller.username) == ("globex", False, "bob")
    finally:
        server.stop()
