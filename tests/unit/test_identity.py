"""Claims → Caller (dfd.identity.caller): both group formats, none, many tenants, admin, missing or malformed claims."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEventV2

from dfd.core.errors import Forbidden, Unauthorized
from dfd.identity.caller import Caller, caller_from_claims, caller_from_event, current_caller, parse_groups

SUB = "7d8e2f4a-1b2c-4d5e-8f90-a1b2c3d4e5f6"


def claims(groups: Any = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"sub": SUB, "username": "alice", "token_use": "access", **extra}
    if groups is not None:
        out["cognito:groups"] = groups
    return out


def http_event(jwt_claims: dict[str, Any] | None) -> dict[str, Any]:
    authorizer: dict[str, Any] = {} if jwt_claims is None else {"jwt": {"claims": jwt_claims, "scopes": None}}
    return {
        "version": "2.0",
        "routeKey": "GET /whoami",
        "rawPath": "/whoami",
        "rawQueryString": "",
        "headers": {},
        "requestContext": {
            "http": {"method": "GET", "path": "/whoami", "sourceIp": "127.0.0.1"},
            "stage": "$default",
            "authorizer": authorizer,
        },
        "isBase64Encoded": False,
    }


@pytest.mark.parametrize(
    "groups",
    [
        "[admins tenant-acme]",  # API Gateway's bracketed string
        '["admins","tenant-acme"]',  # a JSON-list string
        ["admins", "tenant-acme"],  # a JSON list
        "  [ admins   tenant-acme ]  ",
    ],
)
def test_every_group_format_gives_the_same_caller(groups: Any) -> None:
    caller = caller_from_claims(claims(groups))
    assert caller == Caller(owner=SUB, tenant="acme", is_admin=True, username="alice", groups=("admins", "tenant-acme"))
    assert not caller.has_personal_tenant


@pytest.mark.parametrize("groups", [None, "[]", "[ ]", [], "[\n]"])
def test_no_tenant_group_is_a_tenant_of_one(groups: Any) -> None:
    caller = caller_from_claims(claims(groups))
    assert caller.tenant == f"user:{SUB}"
    assert caller.has_personal_tenant
    assert caller.is_admin is False
    assert caller.groups == ()


def test_a_personal_tenant_never_collides_with_a_named_one() -> None:
    named = caller_from_claims(claims("[tenant-user]"))
    personal = caller_from_claims(claims(None, sub="user"))
    assert named.tenant == "user"
    assert personal.tenant == "user:user"
    assert named.tenant != personal.tenant


def test_other_groups_do_not_make_a_tenant_or_an_admin() -> None:
    caller = caller_from_claims(claims("[editors admins-readonly tenants acme]"))
    assert caller.tenant == f"user:{SUB}"
    assert caller.is_admin is False
    assert caller.groups == ("editors", "admins-readonly", "tenants", "acme")


def test_admin_without_tenant() -> None:
    caller = caller_from_claims(claims("[admins]"))
    assert caller.is_admin is True
    assert caller.tenant == f"user:{SUB}"


def test_a_repeated_tenant_group_is_one_tenant() -> None:
    assert caller_from_claims(claims(["tenant-acme", "tenant-acme"])).tenant == "acme"


@pytest.mark.parametrize("groups", ["[tenant-acme tenant-globex]", ["tenant-acme", "admins", "tenant-globex"]])
def test_more_than_one_tenant_is_ambiguous(groups: Any) -> None:
    with pytest.raises(Forbidden) as raised:
        caller_from_claims(claims(groups))
    assert (raised.value.status, raised.value.code) == (403, "ambiguous_tenant")


@pytest.mark.parametrize(
    "group",
    ["tenant-", "tenant-Acme", "tenant-ac_me", "tenant-ac.me", "tenant--acme", "tenant-" + "a" * 65, "tenant-ümlaut"],
)
def test_a_tenant_group_with_an_invalid_name_is_refused(group: str) -> None:
    with pytest.raises(Forbidden) as raised:
        caller_from_claims(claims([group, "tenant-acme"]))
    assert (raised.value.status, raised.value.code) == (403, "invalid_tenant")


@pytest.mark.parametrize("name", ["a", "acme", "acme-2", "0", "a" * 64])
def test_valid_tenant_names(name: str) -> None:
    assert caller_from_claims(claims(f"[tenant-{name}]")).tenant == name


@pytest.mark.parametrize(
    "groups",
    [
        "admins",  # not bracketed
        "admins tenant-acme",
        "[admins",
        '["admins", tenant-acme]',  # half JSON
        '["admins",]',
        '[admins "tenant-acme"]',
        "[[admins]]",
        42,
        {"admins": True},
        [1, 2],
        ["admins", None],
        ["admins", ""],
        ["tenant acme"],
        '["admins", 1]',
    ],
)
def test_malformed_groups_are_unauthorized(groups: Any) -> None:
    with pytest.raises(Unauthorized) as raised:
        caller_from_claims(claims(groups))
    assert (raised.value.status, raised.value.code) == (401, "unauthorized")


@pytest.mark.parametrize(
    "jwt_claims",
    [
        None,
        {},
        {"username": "alice", "cognito:groups": "[admins]"},  # no sub
        {"sub": ""},
        {"sub": 12345},
        {"sub": "has space"},
        {"sub": "a" * 129},
        {"sub": "user:spoof"},  # a colon would let a sub imitate an encoded tenant
    ],
)
def test_missing_or_invalid_subject_is_unauthorized(jwt_claims: Any) -> None:
    with pytest.raises(Unauthorized):
        caller_from_claims(jwt_claims)


def test_username_falls_back_to_the_id_token_claim_and_may_be_absent() -> None:
    assert caller_from_claims({"sub": SUB, "cognito:username": "carol"}).username == "carol"
    assert caller_from_claims({"sub": SUB}).username is None


def test_caller_from_event_reads_the_http_api_jwt_claims() -> None:
    event = http_event({"sub": SUB, "username": "bob", "cognito:groups": "[tenant-globex]"})
    expected = Caller(owner=SUB, tenant="globex", is_admin=False, username="bob", groups=("tenant-globex",))
    assert caller_from_event(event) == expected
    assert caller_from_event(APIGatewayProxyEventV2(event)) == expected


@pytest.mark.parametrize(
    "event",
    [
        http_event(None),  # no authorizer context: the route had no authorizer
        {k: v for k, v in http_event(None).items() if k != "requestContext"},
        {**http_event(None), "requestContext": {"authorizer": {"jwt": None}}},
        {**http_event(None), "requestContext": {"authorizer": {"jwt": {"claims": None}}}},
        {**http_event(None), "requestContext": {"authorizer": {"jwt": {"claims": "sub=x"}}}},
        {**http_event(None), "requestContext": {"authorizer": "nope"}},
    ],
)
def test_an_event_without_claims_is_unauthorized(event: dict[str, Any]) -> None:
    with pytest.raises(Unauthorized):
        caller_from_event(event)


def test_current_caller_in_a_resolver_route_and_the_401_body() -> None:
    app = APIGatewayHttpResolver()

    @app.get("/whoami")
    def whoami() -> dict[str, Any]:
        caller = current_caller(app)
        return {"owner": caller.owner, "tenant": caller.tenant, "admin": caller.is_admin}

    @app.exception_handler(Unauthorized)  # type: ignore[untyped-decorator]
    def unauthorized(error: Unauthorized) -> Response[str]:
        return Response(status_code=error.status, content_type="application/json", body=json.dumps(error.to_body()))

    ok = app.resolve(http_event({"sub": SUB, "cognito:groups": "[tenant-acme admins]"}), {})
    assert ok["statusCode"] == 200
    assert '"tenant":"acme"' in ok["body"]
    assert '"admin":true' in ok["body"]
    refused = app.resolve(http_event(None), {})
    assert refused["statusCode"] == 401
    assert json.loads(refused["body"])["error"]["code"] == "unauthorized"


def test_parse_groups_directly() -> None:
    assert parse_groups(None) == ()
    assert parse_groups("[123 true null]") == ("123", "true", "null")  # bracketed items are names, not JSON
    assert parse_groups('["a,b"]') == ("a,b",)
