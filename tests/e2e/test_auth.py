"""Authentication and access over HTTP against the local stack, as API Gateway's JWT authorizer answers.

Every route of the template refuses an anonymous caller and any token that is not the pool's: signed with
another key, an edited payload under the original signature, ``alg: none``, expired (signed with moto's real
key, so only ``exp`` is wrong), another pool's (same key, other ``iss``) or another client's. The handlers'
rules (branch ``tenant``): ``/admin/*`` is 403 for a non-admin, another tenant's upload is 404, the same tenant
and admins see it. ``scripts/token`` prints only a token, or one line on stderr and exit 2.
"""

from __future__ import annotations

import base64
import gzip
import importlib.resources
import json
import os
import re
import subprocess
import sys
import uuid
from typing import Any

import pytest
import requests
from joserfc import jwt
from joserfc.jwk import RSAKey

from dfdlocal.template import load_template
from tests.e2e.e2e_helpers import ROOT, RunningStack, wait_until

pytestmark = pytest.mark.e2e

UNAUTHORIZED = {"message": "Unauthorized"}


def template_routes() -> list[tuple[str, str]]:
    """(method, path) of every HttpApi event in template.yaml, path parameters filled in."""
    template = load_template(ROOT / "template.yaml")
    routes = []
    for resource in template["Resources"].values():
        for event in ((resource.get("Properties") or {}).get("Events") or {}).values():
            if event.get("Type") == "HttpApi":
                props = event["Properties"]
                path = re.sub(r"\{[^}]+\}", "0" * 64, props["Path"])
                routes.append((str(props["Method"]).upper(), path))
    assert len(routes) >= 5, routes
    return routes


# the /lfs routes check credentials in their function (git-lfs's Basic challenge, personal access tokens): every
# token refused below is refused there too, with git-lfs's 401 (assert_lfs_refused)
# POST /me/s3-credentials checks them in its function too (a personal access token is accepted there): every token
# refused below is refused there with dfd's 401 (assert_own_check_refused)
OWN_CHECK = [("POST", "/me/s3-credentials")]
ROUTES = [route for route in template_routes() if not route[1].startswith("/lfs/") and route not in OWN_CHECK]
# well-formed path parameters (a repo name, a verify link's 32-hex upload id, a lock id): a malformed one is a 404
# before the credentials are read (dfd.lfs.request), so only these reach the credentials' check
LFS_ROUTES = [
    (method, re.sub(r"(/verify/|/uploads/)0{64}", r"\g<1>" + "0" * 32, path.replace("0" * 64, "game", 1)))
    for method, path in template_routes()
    if path.startswith("/lfs/")
]


def call(stack: RunningStack, method: str, path: str, headers: dict[str, str] | None = None) -> requests.Response:
    body = {"filename": "x.txt", "size": 1, "content_type": "text/plain"} if method == "POST" else None
    return requests.request(method, stack.api_url + path, json=body, headers=headers or {}, timeout=10)


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def claims_of(token: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(unb64(token.split(".")[1]))
    return document


def moto_key() -> Any:
    """moto's bundled signing key (public knowledge: what a stack must NOT sign with)."""
    resource = importlib.resources.files("moto") / "cognitoidp" / "resources" / "jwks-private.json.gz"
    document = json.loads(gzip.decompress(resource.read_bytes()))
    return RSAKey.import_key(document)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def assert_unauthorized(response: requests.Response) -> None:
    assert response.status_code == 401, (response.status_code, response.text)
    assert response.json() == UNAUTHORIZED
    assert response.text == '{"message":"Unauthorized"}'


# ------------------------------------------------------------------------------------------------
# 401: no token or not the pool's token, on every route
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_anonymous_is_refused_on_every_route(stack: RunningStack, method: str, path: str) -> None:
    for headers in ({}, {"Authorization": ""}, {"Authorization": "Bearer"}, {"Authorization": "Bearer x.y.z"}):
        assert_unauthorized(call(stack, method, path, headers))
    assert call(stack, method, path, stack.auth("admin")).status_code != 401


def assert_lfs_refused(stack: RunningStack, token: str | None) -> None:
    """Every /lfs route answers git-lfs's 401 (the Basic challenge, the LFS error body) to `token` as a Bearer
    and as a Basic password (None: to no credentials at all)."""
    if token is None:
        attempts: list[dict[str, str]] = [{}, {"Authorization": ""}, {"Authorization": "Bearer x.y.z"}]
    else:
        basic = base64.b64encode(f"git:{token}".encode()).decode()
        attempts = [bearer(token), {"Authorization": f"Basic {basic}"}]
    for method, path in LFS_ROUTES:
        for headers in attempts:
            response = call(stack, method, path, headers)
            assert response.status_code == 401, (method, path, response.text)
            assert response.headers["LFS-Authenticate"] == 'Basic realm="dfd"'
            assert set(response.json()) == {"message", "request_id", "documentation_url"}


def assert_own_check_refused(stack: RunningStack, token: str | None) -> None:
    """POST /me/s3-credentials answers dfd's 401 to `token` as a Bearer and as a Basic password (None: to no
    credentials at all), before anything is issued."""
    if token is None:
        attempts: list[dict[str, str]] = [{}, {"Authorization": ""}, {"Authorization": "Bearer x.y.z"}]
    else:
        basic = base64.b64encode(f"git:{token}".encode()).decode()
        attempts = [bearer(token), {"Authorization": f"Basic {basic}"}]
    for method, path in OWN_CHECK:
        for headers in attempts:
            response = requests.request(method, stack.api_url + path, headers=headers, timeout=10)
            assert response.status_code == 401, (method, path, response.text)
            assert response.json()["error"]["code"] == "unauthorized"


def test_the_own_check_routes_refuse_anonymous_callers_and_take_access_tokens(stack: RunningStack) -> None:
    assert_own_check_refused(stack, None)
    for method, path in OWN_CHECK:
        assert (
            requests.request(method, stack.api_url + path, headers=stack.auth("admin"), timeout=10).status_code == 201
        )


def test_lfs_routes_refuse_anonymous_callers_and_take_access_tokens(stack: RunningStack) -> None:
    assert len(LFS_ROUTES) == 10
    assert_lfs_refused(stack, None)
    for method, path in LFS_ROUTES:
        assert call(stack, method, path, stack.auth("admin")).status_code != 401


def test_forged_tokens_are_refused(stack: RunningStack) -> None:
    genuine = stack.token("alice")
    header_b64, payload_b64, signature = genuine.split(".")
    header = json.loads(unb64(header_b64))
    claims = claims_of(genuine)
    assert call(stack, "POST", "/upload", bearer(genuine)).status_code == 201

    other_key = RSAKey.generate_key(2048, parameters={"kid": header["kid"]})
    forged: dict[str, str] = {
        "another key": jwt.encode({"alg": "RS256", "kid": header["kid"]}, claims, other_key),
        "edited payload": ".".join(
            (header_b64, b64(json.dumps({**claims, "cognito:groups": ["admins"]}).encode()), signature)
        ),
        "alg none": ".".join((b64(json.dumps({"alg": "none", "typ": "JWT"}).encode()), payload_b64, "")),
        "alg none, kid kept": ".".join((b64(json.dumps({**header, "alg": "none"}).encode()), payload_b64, "")),
        "corrupted signature": ".".join((header_b64, payload_b64, signature[::-1])),
        # the key moto ships (anyone can read it): the stack signs with a key of its own, made when it started
        "moto's shipped key": jwt.encode({"alg": "RS256", "kid": header["kid"]}, claims, moto_key()),
        "moto's shipped key, admin": jwt.encode(
            {"alg": "RS256", "kid": header["kid"]}, {**claims, "cognito:groups": ["admins"]}, moto_key()
        ),
    }
    # (expired and not-yet-valid tokens of the right key: tests/unit/test_jwtauth.py)
    for name, token in forged.items():
        for method, path in ROUTES:
            response = call(stack, method, path, bearer(token))
            assert response.status_code == 401, (name, method, path, response.text)
            assert response.json() == UNAUTHORIZED
            assert "invalid_token" in response.headers.get("www-authenticate", ""), name
        assert_lfs_refused(stack, token)
        assert_own_check_refused(stack, token)


def test_the_stack_signs_with_a_key_of_its_own(stack: RunningStack) -> None:
    served = requests.get(stack.cognito["jwks_url"], timeout=10).json()["keys"]
    shipped = moto_key().as_dict(private=False)
    assert [key["kid"] for key in served] == [shipped["kid"]] and served[0]["n"] != shipped["n"]
    assert "d" not in served[0]  # the public half only
    token = stack.token("alice")
    assert jwt.decode(token, RSAKey.import_key(served[0])).claims["username"] == "alice"


def test_tokens_of_another_pool_or_client_are_refused(stack: RunningStack) -> None:
    idp = stack.client("cognito-idp")
    tag = uuid.uuid4().hex[:8]
    pool_id = idp.create_user_pool(PoolName=f"other-{tag}")["UserPool"]["Id"]
    other_pool_client = idp.create_user_pool_client(UserPoolId=pool_id, ClientName="other")["UserPoolClient"]
    same_pool_client = idp.create_user_pool_client(UserPoolId=stack.cognito["user_pool_id"], ClientName=f"x-{tag}")
    idp.admin_create_user(UserPoolId=pool_id, Username="alice", MessageAction="SUPPRESS")
    idp.admin_set_user_password(UserPoolId=pool_id, Username="alice", Password=stack.password, Permanent=True)
    try:
        tokens = {}
        for name, client_id in (
            ("another pool", other_pool_client["ClientId"]),
            ("another client of the pool", same_pool_client["UserPoolClient"]["ClientId"]),
        ):
            answer = idp.initiate_auth(
                AuthFlow="USER_PASSWORD_AUTH",
                ClientId=client_id,
                AuthParameters={"USERNAME": "alice", "PASSWORD": stack.password},
            )
            tokens[name] = answer["AuthenticationResult"]["AccessToken"]
        assert claims_of(tokens["another pool"])["iss"] != stack.cognito["issuer"]
        assert claims_of(tokens["another client of the pool"])["iss"] == stack.cognito["issuer"]
        for name, token in tokens.items():
            for method, path in ROUTES:
                response = call(stack, method, path, bearer(token))
                assert response.status_code == 401, (name, method, path, response.text)
                assert response.json() == UNAUTHORIZED
            assert_lfs_refused(stack, token)
            assert_own_check_refused(stack, token)
    finally:
        idp.delete_user_pool_client(
            UserPoolId=stack.cognito["user_pool_id"], ClientId=same_pool_client["UserPoolClient"]["ClientId"]
        )
        idp.delete_user_pool(UserPoolId=pool_id)


def test_id_tokens_lack_the_required_scope(stack: RunningStack) -> None:
    """The authorizer requires aws.cognito.signin.user.admin, which Cognito puts in access tokens only."""
    id_token = stack.sign_in("alice")["IdToken"]
    response = call(stack, "POST", "/upload", bearer(id_token))
    assert response.status_code == 403, response.text
    assert response.json() == {"message": "Forbidden"}
    assert "insufficient_scope" in response.headers["www-authenticate"]
    assert_lfs_refused(stack, id_token)  # the /lfs check takes access tokens only, as the authorizer's scope
    assert_own_check_refused(stack, id_token)


def test_bearer_prefix_is_optional_and_preflights_stay_open(stack: RunningStack) -> None:
    token = stack.token("alice")
    assert call(stack, "POST", "/upload", {"Authorization": token}).status_code == 201
    preflight = requests.options(
        stack.api_url + "/upload",
        headers={
            "Origin": "http://localhost:5173",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization,content-type",
        },
        timeout=10,
    )
    assert preflight.status_code == 204
    assert "authorization" in preflight.headers["access-control-allow-headers"].split(",")
    refused = call(stack, "GET", "/admin/stats", {"Origin": "http://localhost:5173"})
    assert refused.status_code == 401  # CORS headers on the 401 too, so a page can read it
    assert refused.headers["access-control-allow-origin"] in ("*", "http://localhost:5173")


# ------------------------------------------------------------------------------------------------
# 403 / 404: the handlers' rules (branch tenant)
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", [path for method, path in ROUTES if path.startswith("/admin/")])
def test_admin_routes_are_for_admins(stack: RunningStack, path: str) -> None:
    for user in ("alice", "carol", "bob"):
        response = requests.get(stack.api_url + path, headers=stack.auth(user), timeout=10)
        assert response.status_code == 403, (user, response.text)
        assert response.json()["error"]["code"] == "forbidden"
    assert requests.get(stack.api_url + path, headers=stack.auth("admin"), timeout=10).status_code == 200


def test_uploads_are_seen_by_their_tenant_and_admins_only(stack: RunningStack) -> None:
    body = f"alice's file {uuid.uuid4().hex}\n".encode()
    created = requests.post(
        stack.api_url + "/upload",
        json={"filename": "alice.txt", "size": len(body), "content_type": "text/plain"},
        headers=stack.auth("alice"),
        timeout=10,
    )
    assert created.status_code == 201, created.text
    issued = created.json()
    put = requests.put(issued["upload_url"], data=body, headers=issued["headers"], timeout=10)
    assert put.status_code == 200, put.text
    upload_id = issued["upload_id"]

    def stored() -> dict[str, Any] | None:
        answer = requests.get(f"{stack.api_url}/metadata/{upload_id}", headers=stack.auth("alice"), timeout=10)
        document: dict[str, Any] = answer.json()
        return document if answer.status_code == 200 and document.get("status") == "stored" else None

    document = wait_until(stored, timeout=20)
    for route in (f"/metadata/{upload_id}", f"/download/{upload_id}", f"/metadata/{document['hash']}"):
        for user, status in (("carol", 200), ("admin", 200), ("bob", 404)):
            response = requests.get(stack.api_url + route, headers=stack.auth(user), timeout=10)
            assert response.status_code == status, (route, user, response.text)
            if status == 404:
                assert "alice.txt" not in response.text


# ------------------------------------------------------------------------------------------------
# scripts/token
# ------------------------------------------------------------------------------------------------
def token_tool(*args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    return subprocess.run(
        [sys.executable, "-m", "dfdtools.token", *args], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env
    )


def test_token_tool_prints_only_a_token(stack: RunningStack) -> None:
    result = token_tool("--endpoint-url", stack.aws_url, "admin")
    assert result.returncode == 0, result.stderr
    token = result.stdout.strip()
    assert result.stdout == token + "\n" and token.count(".") == 2 and result.stderr == ""
    assert claims_of(token)["username"] == "admin" and claims_of(token)["token_use"] == "access"
    assert requests.get(stack.api_url + "/admin/stats", headers=bearer(token), timeout=10).status_code == 200

    port = stack.aws_url.rsplit(":", 1)[1]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "DFD_AWS_PORT": port, "DFD_LOCAL_PASSWORD": "nope"}
    via_port = subprocess.run(
        [sys.executable, "-m", "dfdtools.token", "--password", stack.password, "bob"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert via_port.returncode == 0, via_port.stderr
    assert claims_of(via_port.stdout.strip())["username"] == "bob"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--password", "Wrong-password-1", "alice"), "wrong password"),
        (("nobody",), "no user 'nobody'"),
    ],
)
def test_token_tool_errors_are_one_line(stack: RunningStack, args: tuple[str, ...], message: str) -> None:
    result = token_tool("--endpoint-url", stack.aws_url, *args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert message in result.stderr and result.stderr.count("\n") == 1, result.stderr


def test_token_tool_without_a_stack() -> None:
    import socket

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        result = token_tool("--endpoint-url", f"http://127.0.0.1:{closed.getsockname()[1]}", "alice")
    assert result.returncode == 2 and result.stdout == ""
    assert "is `make run` running?" in result.stderr and result.stderr.count("\n") == 1, result.stderr
