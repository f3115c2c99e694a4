"""The local stack's addresses: what it binds vs what it puts in URLs handed to clients (presigned URLs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dfdlocal.emulator import LoopbackApi
from dfdlocal.stack import LocalStack, StackOptions, StartupError, remote_warning

ASIA = "AWS4-HMAC-SHA256 Credential=ASIAEXAMPLE/20260101"
ANY_V4 = "0.0.0.0"  # noqa: S104 - an option's value under test, nothing is bound


@pytest.mark.parametrize(
    ("host", "public_host", "url"),
    [
        ("127.0.0.1", None, "http://127.0.0.1:4566"),
        (ANY_V4, None, "http://127.0.0.1:4566"),  # a wildcard is no address to connect to
        ("::", None, "http://127.0.0.1:4566"),
        (ANY_V4, "dfd.lan", "http://dfd.lan:4566"),  # other machines upload through the presigned URLs
        ("::1", None, "http://[::1]:4566"),
    ],
)
def test_urls_advertise_a_connectable_host(host: str, public_host: str | None, url: str) -> None:
    stack = LocalStack(StackOptions(root=Path("."), host=host, public_host=public_host))
    stack.ports["aws"] = 4566
    assert stack.url("aws") == url


# ---------------------------------------------------------------------------------------------- sharing the stack
def test_binding_beyond_loopback_must_be_asked_for_with_a_password_of_ones_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("DFD_LOCAL_PASSWORD", raising=False)
    for host in ("127.0.0.1", "::1", "localhost"):
        assert remote_warning(StackOptions(root=Path("."), host=host)) is None
    with pytest.raises(StartupError, match="--allow-remote"):
        remote_warning(StackOptions(root=Path("."), host=ANY_V4))
    with pytest.raises(StartupError, match="--allow-remote"):
        remote_warning(StackOptions(root=Path("."), host="dfd.lan"))
    with pytest.raises(StartupError, match="DFD_LOCAL_PASSWORD"):
        remote_warning(StackOptions(root=Path("."), host=ANY_V4, allow_remote=True))
    monkeypatch.setenv("DFD_LOCAL_PASSWORD", "A-long-local-pass-9")
    warning = remote_warning(StackOptions(root=Path("."), host=ANY_V4, allow_remote=True))
    assert warning is not None and "Lambda Invoke API listens on 127.0.0.1 only" in warning
    assert remote_warning(StackOptions(root=Path("."), host=ANY_V4, allow_remote=True, password="Other-pass-1"))


def test_the_lambda_invoke_api_is_advertised_on_loopback_when_shared() -> None:
    stack = LocalStack(StackOptions(root=Path("."), host=ANY_V4, public_host="dfd.lan", allow_remote=True))
    stack.ports.update({"aws": 4566, "api": 3000, "lambda": 3001})
    assert stack.url("aws") == "http://dfd.lan:4566" and stack.url("api") == "http://dfd.lan:3000"
    assert stack.url("lambda") == "http://127.0.0.1:3001"


def _environ(remote: str, method: str = "POST", **extra: str) -> dict[str, Any]:
    return {"REMOTE_ADDR": remote, "REQUEST_METHOD": method, "PATH_INFO": "/", "QUERY_STRING": "", **extra}


@pytest.mark.parametrize(
    ("environ", "allowed"),
    [
        (_environ("127.0.0.1", HTTP_AUTHORIZATION="AWS4-HMAC-SHA256 Credential=testing/..."), True),
        (_environ("::1", HTTP_X_AMZ_TARGET="DynamoDB_20120810.Scan", HTTP_AUTHORIZATION="x"), True),
        (_environ("192.0.2.7", HTTP_X_AMZ_TARGET="DynamoDB_20120810.Scan", HTTP_AUTHORIZATION="x"), False),
        (_environ("192.0.2.7", "GET", PATH_INFO="/dfd-file-service/uploads/x", HTTP_AUTHORIZATION="x"), False),
        (_environ("192.0.2.7", HTTP_X_AMZ_TARGET="AWSCognitoIdentityProviderService.AdminSetUserPassword"), False),
        (_environ("192.0.2.7", HTTP_X_AMZ_TARGET="AWSCognitoIdentityProviderService.InitiateAuth"), True),
        (
            _environ(
                "192.0.2.7",
                HTTP_X_AMZ_TARGET="AWSCognitoIdentityProviderService.InitiateAuth",
                HTTP_AUTHORIZATION="AWS4-HMAC-SHA256 Credential=testing/...",
            ),
            False,
        ),
        (_environ("192.0.2.7", "PUT", QUERY_STRING="X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=ab"), True),
        # S3 with temporary (STS-issued) credentials: the guard checks them (dfdlocal.s3session), from anywhere
        (_environ("192.0.2.7", "PUT", HTTP_AUTHORIZATION=f"{ASIA}/us-east-1/s3/aws4_request, ..."), True),
        (_environ("192.0.2.7", HTTP_AUTHORIZATION=f"{ASIA}/us-east-1/dynamodb/aws4_request, ..."), False),
        (
            _environ(
                "192.0.2.7",
                HTTP_X_AMZ_TARGET="DynamoDB_20120810.Scan",
                HTTP_AUTHORIZATION=f"{ASIA}/us-east-1/s3/aws4_request",
            ),
            False,
        ),
        (_environ("192.0.2.7", "OPTIONS", PATH_INFO="/dfd-file-service/uploads/x"), True),
        (_environ("192.0.2.7", "GET", PATH_INFO="/us-east-1_abc/.well-known/jwks.json"), True),
    ],
)
def test_other_machines_reach_only_the_emulator_s_public_surface(environ: dict[str, Any], allowed: bool) -> None:
    reached: list[str] = []

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        reached.append("app")
        start_response("200 OK", [])
        return [b""]

    statuses: list[str] = []
    b"".join(LoopbackApi(app)(environ, lambda status, headers: statuses.append(status)))
    assert (
        (statuses == ["200 OK"] and reached == ["app"]) if allowed else (statuses == ["403 Forbidden"] and not reached)
    )
