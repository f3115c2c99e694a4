"""POST /me/s3-credentials (TokensFunction): the caller's credentials checked in the function as /lfs checks them
(access token or personal access token, Bearer or Basic), the body's duration validated, AssumeRole called with
the caller's prefix in the session policy, and the credential_process document answered; STS failures are 503/502
JSON, never a trace."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import botocore.session
import pytest
from botocore.stub import Stubber

from dfd import deps
from dfd.adapters import aws
from dfd.adapters.sts import StsRoles
from dfd.core.errors import ServiceUnavailable, UpstreamFailed
from dfd.handlers import tokens as tokens_handler
from dfd.identity.caller import Caller
from dfd.identity.credentials import CredentialChecker
from dfd.identity.jwtverify import JwtVerifier
from dfd.identity.pats import PatService
from dfd.identity.ports import DirectoryUser
from dfd.identity.s3access import prefix_for
from dfd.identity.s3credentials import (
    MAX_DURATION,
    MIN_DURATION,
    IssuedCredentials,
    S3CredentialsService,
    S3CredentialsSettings,
    iso8601,
    session_name,
)
from dfd.identity.s3sessions import MAX_LIVE_SESSIONS, S3SessionLedger
from tests.support import ALICE, BOB, DAVE, LambdaContext, api_event
from tests.unit.fakes.lfs import FakeDirectory, FakeS3SessionStore, FakeTokenStore
from tests.unit.test_lfs_credentials import ACCESS_SCOPE, CLIENT, ISSUER, KEY, access_token, bad_credentials, basic

ROLE_ARN = "arn:aws:iam::123456789012:role/dfd-S3CredentialsRole-ABC"
BUCKET = "dfd-files"
EXPIRES = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
ANSWER_FIELDS = {
    "Version",
    "AccessKeyId",
    "SecretAccessKey",
    "SessionToken",
    "Expiration",
    "bucket",
    "prefix",
    "region",
    "endpoint_url",
}


class RecordingSts:
    def __init__(self, error: Exception | None = None) -> None:
        self.calls: list[dict[str, Any]] = []
        self.error = error

    def assume_role(self, role_arn: str, session_name: str, policy: str, duration_seconds: int) -> IssuedCredentials:
        self.calls.append(
            {
                "role_arn": role_arn,
                "session_name": session_name,
                "policy": json.loads(policy),
                "duration": duration_seconds,
            }
        )
        if self.error is not None:
            raise self.error
        return IssuedCredentials(f"ASIA{len(self.calls):016d}", "secret/key+1", "token==", EXPIRES)


SETTINGS = S3CredentialsSettings(
    role_arn=ROLE_ARN, bucket=BUCKET, region="eu-west-3", endpoint_url="http://127.0.0.1:4566"
)


@pytest.fixture
def sts() -> RecordingSts:
    return RecordingSts()


@pytest.fixture
def store() -> FakeTokenStore:
    return FakeTokenStore()


@pytest.fixture
def directory() -> FakeDirectory:
    return FakeDirectory()


@pytest.fixture
def sessions() -> FakeS3SessionStore:
    return FakeS3SessionStore()


def service_of(
    sts: RecordingSts,
    settings: S3CredentialsSettings = SETTINGS,
    directory: FakeDirectory | None = None,
    sessions: FakeS3SessionStore | None = None,
) -> S3CredentialsService:
    ledger = S3SessionLedger(sessions or FakeS3SessionStore(), sleep=lambda _: None)
    return S3CredentialsService(sts, settings, directory or FakeDirectory(), ledger)


@pytest.fixture
def pats(
    monkeypatch: pytest.MonkeyPatch,
    sts: RecordingSts,
    store: FakeTokenStore,
    directory: FakeDirectory,
    sessions: FakeS3SessionStore,
) -> Iterator[PatService]:
    jwks = {"keys": [KEY.as_dict(private=False)]}
    verifier = JwtVerifier(
        issuer=ISSUER, client_id=CLIENT, jwks=lambda: jwks, token_uses=("access",), required_scopes=(ACCESS_SCOPE,)
    )
    service = PatService(store, directory)
    monkeypatch.setattr(deps, "credentials", lambda: CredentialChecker(verifier, service))
    monkeypatch.setattr(deps, "s3_credentials", lambda: service_of(sts, SETTINGS, directory, sessions))
    yield service


def post(authorization: str | None, raw_body: str | None = None, **extra: Any) -> dict[str, Any]:
    event = api_event("POST", "/me/s3-credentials", raw_body=raw_body, user=None, **extra)
    event["headers"].pop("authorization", None)
    if authorization is not None:
        event["headers"]["authorization"] = authorization
    response: dict[str, Any] = tokens_handler.handler(event, LambdaContext())
    return response


def body(response: dict[str, Any]) -> Any:
    return json.loads(response["body"])


def test_an_access_token_gets_credentials_for_its_own_prefix(pats: PatService, sts: RecordingSts) -> None:
    response = post(f"Bearer {access_token()}")
    assert response["statusCode"] == 201, response
    assert response["headers"]["Cache-Control"] == "no-store"
    answer = body(response)
    assert set(answer) == ANSWER_FIELDS
    assert answer == {
        "Version": 1,
        "AccessKeyId": "ASIA0000000000000001",
        "SecretAccessKey": "secret/key+1",
        "SessionToken": "token==",
        "Expiration": "2030-01-02T03:04:05Z",
        "bucket": BUCKET,
        "prefix": prefix_for("acme", ALICE.sub),
        "region": "eu-west-3",
        "endpoint_url": "http://127.0.0.1:4566",
    }
    (call,) = sts.calls
    assert call["role_arn"] == ROLE_ARN and call["duration"] == 3600
    assert call["session_name"].startswith(f"dfd-{ALICE.sub}-")
    write, listing = call["policy"]["Statement"]
    assert write["Resource"] == f"arn:aws:s3:::{BUCKET}/s3/acme/{ALICE.sub}/*"
    assert listing["Condition"] == {"StringLike": {"s3:prefix": f"s3/acme/{ALICE.sub}/*"}}


def test_a_personal_access_token_as_bearer_or_basic_is_its_owner(pats: PatService, sts: RecordingSts) -> None:
    pat = pats.create(ALICE.caller, {"name": "laptop"})["token"]
    for authorization in (f"Bearer {pat}", basic(pat), basic(pat, user="anyone"), basic(access_token())):
        response = post(authorization)
        assert response["statusCode"] == 201, response
        assert body(response)["prefix"] == prefix_for("acme", ALICE.sub)
    assert len(sts.calls) == 4


def test_a_tenant_of_one_writes_under_its_personal_tenant(pats: PatService, sts: RecordingSts) -> None:
    response = post(f"Bearer {access_token(sub=DAVE.sub, username='dave', **{'cognito:groups': None})}")
    assert response["statusCode"] == 201, response
    assert body(response)["prefix"] == f"s3/user%3A{DAVE.sub}/{DAVE.sub}/"


def test_bad_credentials_are_401_json_before_sts_is_called(
    pats: PatService, sts: RecordingSts, store: FakeTokenStore
) -> None:
    for name, headers in bad_credentials(pats, store).items():
        response = post(headers.get("authorization"))
        assert response["statusCode"] == 401, name
        assert response["headers"]["Content-Type"] == "application/json", name
        assert body(response)["error"]["code"] == "unauthorized", name
    assert sts.calls == []


@pytest.mark.parametrize("duration", [900, 1800, 3600])
def test_the_duration_is_asked_of_sts(pats: PatService, sts: RecordingSts, duration: int) -> None:
    response = post(f"Bearer {access_token()}", json.dumps({"duration_seconds": duration}))
    assert response["statusCode"] == 201, response
    assert sts.calls[0]["duration"] == duration


def test_an_empty_object_asks_for_the_default(pats: PatService, sts: RecordingSts) -> None:
    assert post(f"Bearer {access_token()}", "{}")["statusCode"] == 201
    assert sts.calls[0]["duration"] == 3600


@pytest.mark.parametrize(
    "raw",
    [
        '{"duration_seconds": 899}',
        '{"duration_seconds": 3601}',
        '{"duration_seconds": 43200}',
        '{"duration_seconds": "3600"}',
        '{"duration_seconds": 3600.0}',
        '{"duration_seconds": true}',
        '{"duration_seconds": null}',
        '{"duration": 3600}',
        '{"duration_seconds": 3600, "prefix": "s3/other/"}',
        "[]",
        "null",
        "3600",
        "not json",
        '{"duration_seconds": 36',
    ],
)
def test_a_bad_body_is_400_json_and_nothing_is_issued(pats: PatService, sts: RecordingSts, raw: str) -> None:
    response = post(f"Bearer {access_token()}", raw)
    assert response["statusCode"] == 400, response
    assert body(response)["error"]["code"] in ("validation_error", "invalid_json")
    assert sts.calls == []


def test_an_unknown_query_parameter_is_400(pats: PatService, sts: RecordingSts) -> None:
    response = post(f"Bearer {access_token()}", query={"duration_seconds": "900"})
    assert response["statusCode"] == 400 and body(response)["error"]["code"] == "unknown_parameter"
    assert sts.calls == []


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (ServiceUnavailable("STS AssumeRole is throttled or unavailable (Throttling)"), 503, "service_unavailable"),
        (UpstreamFailed("STS refused AssumeRole (AccessDenied)"), 502, "upstream_error"),
    ],
)
def test_sts_failures_are_json_errors(
    monkeypatch: pytest.MonkeyPatch, pats: PatService, error: Exception, status: int, code: str
) -> None:
    monkeypatch.setattr(deps, "s3_credentials", lambda: service_of(RecordingSts(error)))
    response = post(f"Bearer {access_token()}")
    assert response["statusCode"] == status
    assert body(response)["error"]["code"] == code


def test_the_secret_and_token_are_never_logged(
    pats: PatService, sts: RecordingSts, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("DEBUG", logger="dfd"):
        assert post(f"Bearer {access_token()}")["statusCode"] == 201
    logged = " ".join(f"{record.getMessage()} {record.__dict__}" for record in caplog.records)
    assert "s3 credentials issued" in logged and prefix_for("acme", ALICE.sub) in logged
    for secret in ("secret/key+1", "token==", "ASIA0000000000000001"):
        assert secret not in logged


# -- the pure parts -------------------------------------------------------------------------------------------
def test_the_session_name_is_within_sts_s_charset_and_length_and_ends_with_the_record_id() -> None:
    session_id = "0123456789abcdef"
    long = session_name(Caller(owner="a" * 128, tenant="acme", is_admin=False), session_id)
    assert long == "dfd-" + "a" * 43 + "-" + session_id and len(long) == 64
    assert session_name(Caller(owner="x y/z~", tenant="acme", is_admin=False), session_id) == "dfd-x-y-z--" + session_id


def test_the_expiration_is_utc_iso8601() -> None:
    paris = datetime(2030, 1, 2, 4, 4, 5, 999, tzinfo=UTC).astimezone(
        __import__("datetime").timezone(timedelta(hours=1))
    )
    assert iso8601(paris) == "2030-01-02T04:04:05Z"


def test_the_partition_comes_from_the_role() -> None:
    china = S3CredentialsSettings("arn:aws-cn:iam::1:role/r", BUCKET, "cn-north-1", None)
    sts = RecordingSts()
    answer = service_of(sts, china).issue(ALICE.caller, {})
    assert answer["endpoint_url"] is None
    assert sts.calls[0]["policy"]["Statement"][0]["Resource"].startswith(f"arn:aws-cn:s3:::{BUCKET}/")


def test_the_bucket_key_is_in_the_policy_when_there_is_one() -> None:
    sts = RecordingSts()
    settings = S3CredentialsSettings(ROLE_ARN, BUCKET, "eu-west-3", None, kms_key_arn="arn:aws:kms:eu-west-3:1:key/k")
    service_of(sts, settings).issue(ALICE.caller, {})
    assert sts.calls[0]["policy"]["Statement"][-1]["Resource"] == "arn:aws:kms:eu-west-3:1:key/k"


# -- the STS adapter --------------------------------------------------------------------------------------------
def _stubbed() -> tuple[Any, Stubber]:
    client = botocore.session.get_session().create_client(
        "sts", region_name="eu-west-3", aws_access_key_id="AKIA", aws_secret_access_key="x"
    )
    return client, Stubber(client)


def test_the_adapter_passes_the_call_and_reads_the_credentials() -> None:
    client, stub = _stubbed()
    stub.add_response(
        "assume_role",
        {
            "Credentials": {
                "AccessKeyId": "ASIAXXXXXXXXXXXXXXXX",
                "SecretAccessKey": "s",
                "SessionToken": "t",
                "Expiration": EXPIRES,
            }
        },
        {"RoleArn": ROLE_ARN, "RoleSessionName": "dfd-x", "Policy": "{}", "DurationSeconds": 900},
    )
    with stub:
        issued = StsRoles(client).assume_role(ROLE_ARN, "dfd-x", "{}", 900)
    assert issued == IssuedCredentials("ASIAXXXXXXXXXXXXXXXX", "s", "t", EXPIRES)


@pytest.mark.parametrize(
    ("code", "http", "expected"),
    [
        ("Throttling", 400, ServiceUnavailable),
        ("InternalFailure", 500, ServiceUnavailable),
        ("AccessDenied", 403, UpstreamFailed),
        ("ValidationError", 400, UpstreamFailed),
        ("MalformedPolicyDocument", 400, UpstreamFailed),
    ],
)
def test_the_adapter_maps_sts_errors(code: str, http: int, expected: type[Exception]) -> None:
    client, stub = _stubbed()
    stub.add_client_error("assume_role", service_error_code=code, http_status_code=http)
    with stub, pytest.raises(expected) as raised:
        StsRoles(client).assume_role(ROLE_ARN, "dfd-x", "{}", 900)
    assert code in str(raised.value)


def test_the_sts_client_is_regional_and_retries_in_standard_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", "eu-west-3")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-3")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    deps.reset()
    try:
        client = aws.sts().build()
        assert client.meta.endpoint_url == "https://sts.eu-west-3.amazonaws.com"
        assert client.meta.config.retries["mode"] == "standard"
        assert aws.s3_endpoint_url() is None
        monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:4566")
        assert aws.s3_endpoint_url() == "http://127.0.0.1:4566"
    finally:
        deps.reset()


# -- who may still be issued credentials, and how many --------------------------------------------------------------
@pytest.mark.parametrize("change", ["deleted", "disabled", "sub of another", "two tenants"])
def test_a_valid_access_token_of_a_user_no_longer_valid_is_401_and_nothing_is_issued(
    pats: PatService, sts: RecordingSts, directory: FakeDirectory, sessions: FakeS3SessionStore, change: str
) -> None:
    if change in ("deleted", "disabled"):  # the directory answers None to both (dfd.adapters.cognito)
        del directory.users["alice"]
    elif change == "sub of another":  # the name was deleted and taken again
        directory.users["alice"] = DirectoryUser("00000000-0000-4000-8000-0000000000ff", ("tenant-acme",))
    else:
        directory.users["alice"] = DirectoryUser(ALICE.sub, ("tenant-acme", "tenant-globex"))
    response = post(f"Bearer {access_token()}")
    assert response["statusCode"] == 401, response
    assert body(response)["error"]["code"] == "unauthorized"
    assert sts.calls == [] and sessions.records == {}


def test_a_moved_user_is_issued_credentials_for_the_tenant_they_are_in_now(
    pats: PatService, sts: RecordingSts, directory: FakeDirectory, sessions: FakeS3SessionStore
) -> None:
    directory.users["alice"] = DirectoryUser(ALICE.sub, ("tenant-globex",))
    response = post(f"Bearer {access_token()}")  # the token still says tenant-acme
    assert response["statusCode"] == 201, response
    assert body(response)["prefix"] == prefix_for("globex", ALICE.sub)
    assert sts.calls[0]["policy"]["Statement"][0]["Resource"].endswith(f"/s3/globex/{ALICE.sub}/*")
    (recorded,) = sessions.records[ALICE.sub][0]
    assert recorded.tenant == "globex"


def test_each_issue_is_recorded_with_the_token_it_was_issued_with(
    pats: PatService, sts: RecordingSts, sessions: FakeS3SessionStore
) -> None:
    pat = pats.create(ALICE.caller, {"name": "laptop"})
    assert post(f"Bearer {pat['token']}")["statusCode"] == 201
    assert post(f"Bearer {access_token()}", '{"duration_seconds": 900}')["statusCode"] == 201
    first, second = sessions.records[ALICE.sub][0]
    assert (first.token_id, second.token_id) == (pat["id"], None)
    assert (first.tenant, first.username) == ("acme", "alice")
    assert (second.expires_at - second.issued_at).total_seconds() == 900
    assert [call["session_name"] for call in sts.calls] == [
        f"dfd-{ALICE.sub}-{first.session_id}",
        f"dfd-{ALICE.sub}-{second.session_id}",
    ]


def test_over_the_live_sessions_limit_is_429_with_retry_after_before_sts_is_asked(
    pats: PatService, sts: RecordingSts
) -> None:
    for _ in range(MAX_LIVE_SESSIONS):
        assert post(f"Bearer {access_token()}", '{"duration_seconds": 900}')["statusCode"] == 201
    response = post(f"Bearer {access_token()}")
    assert response["statusCode"] == 429, response
    assert body(response)["error"]["code"] == "too_many_requests"
    assert 1 <= int(response["headers"]["Retry-After"]) <= 900
    assert len(sts.calls) == MAX_LIVE_SESSIONS
    # another user is not counted with alice
    bob = access_token(sub=BOB.sub, username="bob", **{"cognito:groups": ["tenant-globex"]})
    assert post(f"Bearer {bob}")["statusCode"] == 201


def test_a_session_sts_refused_is_not_counted(sts: RecordingSts) -> None:
    sessions = FakeS3SessionStore()
    refusing = service_of(RecordingSts(UpstreamFailed("STS refused AssumeRole (AccessDenied)")), sessions=sessions)
    for _ in range(MAX_LIVE_SESSIONS + 1):
        with pytest.raises(UpstreamFailed):
            refusing.issue(ALICE.caller, {})
    assert sessions.records[ALICE.sub][0] == []
    service_of(sts, sessions=sessions).issue(ALICE.caller, {})
    assert len(sessions.records[ALICE.sub][0]) == 1


def test_many_unknown_fields_are_named_bounded_as_me_tokens_does(pats: PatService, sts: RecordingSts) -> None:
    fields = {f"field{index:05d}" + "x" * 100: 1 for index in range(10_000)}
    response = post(f"Bearer {access_token()}", json.dumps(fields))
    assert response["statusCode"] == 400
    assert len(response["body"]) < 1000
    error = body(response)["error"]
    assert error["code"] == "validation_error" and "10000 unknown field(s): field00000" in error["message"]
    assert error["details"]["count"] == 10_000 and len(error["details"]["fields"]) == 5
    assert sts.calls == []


def test_the_documents_name_the_limits_the_code_has() -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    openapi = (root / "docs" / "openapi.yaml").read_text()
    tools = (root / "docs" / "uploading" / "s3-tools.md").read_text()
    assert f"at most {MAX_LIVE_SESSIONS} live sessions" in openapi
    assert f"holds {MAX_LIVE_SESSIONS} live sessions" in openapi
    assert f"At most {MAX_LIVE_SESSIONS} live sessions per user" in tools
    assert f'"duration_seconds": {MIN_DURATION}..{MAX_DURATION}' in tools
