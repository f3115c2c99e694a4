"""template.yaml's identity parts: the Cognito pool, its public client, the admins group, the HTTP API's JWT
authorizer on every route with CORS preflights left open, and the outputs clients need."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

from cfnlint.decode import decode

from dfdlocal.cognito import ACCESS_SCOPE, ADMIN_GROUP, DEFAULT_PASSWORD

TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"
ISSUER = {"Fn::Sub": "https://cognito-idp.${AWS::Region}.${AWS::URLSuffix}/${UserPool}"}


@cache
def template() -> dict[str, Any]:
    loaded, matches = decode(str(TEMPLATE))
    assert not matches, matches
    assert loaded is not None
    return dict(loaded)


def resources(kind: str) -> dict[str, dict[str, Any]]:
    return {lid: res for lid, res in template()["Resources"].items() if res["Type"] == kind}


def props(logical_id: str) -> dict[str, Any]:
    return dict(template()["Resources"][logical_id].get("Properties") or {})


def test_one_user_pool_with_admin_created_users_and_a_password_policy() -> None:
    assert list(resources("AWS::Cognito::UserPool")) == ["UserPool"]
    pool = props("UserPool")
    assert pool["AdminCreateUserConfig"]["AllowAdminCreateUserOnly"] is True
    assert pool["AliasAttributes"] == ["email"]  # sign in with the username or the verified email
    assert pool["UsernameConfiguration"]["CaseSensitive"] is False
    policy = pool["Policies"]["PasswordPolicy"]
    assert policy["MinimumLength"] >= 12
    assert policy["RequireLowercase"] and policy["RequireUppercase"] and policy["RequireNumbers"]
    # the documented local password satisfies the policy it is created under
    assert len(DEFAULT_PASSWORD) >= policy["MinimumLength"]
    assert re.search(r"[a-z]", DEFAULT_PASSWORD) and re.search(r"[A-Z]", DEFAULT_PASSWORD)
    assert re.search(r"[0-9]", DEFAULT_PASSWORD)
    assert pool["DeletionProtection"] == {"Ref": "UserPoolDeletionProtection"}


def test_one_public_client_with_the_three_flows_and_short_access_tokens() -> None:
    assert list(resources("AWS::Cognito::UserPoolClient")) == ["UserPoolClient"]
    client = props("UserPoolClient")
    assert client["UserPoolId"] == {"Ref": "UserPool"}
    assert client["GenerateSecret"] is False
    assert sorted(client["ExplicitAuthFlows"]) == [
        "ALLOW_REFRESH_TOKEN_AUTH",
        "ALLOW_USER_PASSWORD_AUTH",
        "ALLOW_USER_SRP_AUTH",
    ]
    assert client["TokenValidityUnits"]["AccessToken"] == "minutes"
    assert 5 <= client["AccessTokenValidity"] <= 60
    assert client["PreventUserExistenceErrors"] == "ENABLED"


def test_the_admins_group() -> None:
    groups = resources("AWS::Cognito::UserPoolGroup")
    assert [g["Properties"]["GroupName"] for g in groups.values()] == [ADMIN_GROUP]
    assert all(g["Properties"]["UserPoolId"] == {"Ref": "UserPool"} for g in groups.values())


def test_the_jwt_authorizer_is_the_default_of_the_http_api() -> None:
    auth = props("HttpApi")["Auth"]
    name = auth["DefaultAuthorizer"]
    authorizer = auth["Authorizers"][name]
    assert authorizer["IdentitySource"] == "$request.header.Authorization"
    assert authorizer["JwtConfiguration"]["issuer"] == ISSUER
    assert authorizer["JwtConfiguration"]["audience"] == [{"Ref": "UserPoolClient"}]
    assert authorizer["AuthorizationScopes"] == [ACCESS_SCOPE]  # access tokens only


# git-lfs needs an LFS-Authenticate challenge and HTTP Basic: these routes check credentials in the function
# (dfd.identity.credentials; tests/unit/test_lfs_credentials.py walks each of them with bad credentials)
LFS_FUNCTION = "LfsFunction"
# a personal access token is accepted there too, checked the same way (tests/unit/test_s3_credentials_api.py)
OWN_CREDENTIALS = {("TokensFunction", "POST", "/me/s3-credentials")}


def test_every_route_uses_the_default_authorizer_and_none_is_an_options_route() -> None:
    """No function but LfsFunction opts out (Auth on its event), and it only for /lfs routes, but for
    POST /me/s3-credentials (TokensFunction); no route is OPTIONS
    or ANY: API Gateway answers every CORS preflight from CorsConfiguration, before the authorizer (SAM never puts
    the DefaultAuthorizer on an OPTIONS method)."""
    routes = 0
    for logical_id, function in resources("AWS::Serverless::Function").items():
        for event_name, event in (function["Properties"].get("Events") or {}).items():
            if event["Type"] != "HttpApi":
                continue
            routes += 1
            event_props = event["Properties"]
            assert event_props["ApiId"] == {"Ref": "HttpApi"}, f"{logical_id}.{event_name} is on another API"
            if logical_id == LFS_FUNCTION:
                assert event_props["Auth"] == {"Authorizer": "NONE"}
                assert event_props["Path"].startswith("/lfs/{repo}/")
            elif (logical_id, event_props["Method"], event_props["Path"]) in OWN_CREDENTIALS:
                assert event_props["Auth"] == {"Authorizer": "NONE"}
            else:
                assert "Auth" not in event_props, f"{logical_id}.{event_name} overrides the default authorizer"
            assert event_props["Method"].upper() in {"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD"}
    assert routes >= 5
    assert "OPTIONS" in props("HttpApi")["CorsConfiguration"]["AllowMethods"]
    assert "authorization" in [h.lower() for h in props("HttpApi")["CorsConfiguration"]["AllowHeaders"]]
    assert not resources("AWS::Serverless::HttpApi").keys() - {"HttpApi"}


def test_identity_outputs() -> None:
    outputs = template()["Outputs"]
    assert outputs["UserPoolId"]["Value"] == {"Ref": "UserPool"}
    assert outputs["UserPoolClientId"]["Value"] == {"Ref": "UserPoolClient"}
    assert outputs["UserPoolIssuer"]["Value"] == ISSUER
    assert "ApiUrl" in outputs
