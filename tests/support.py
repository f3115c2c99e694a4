"""Test helpers shared by the suites: fixtures from events/, API Gateway v2 events, SQS batches."""

from __future__ import annotations

import copy
import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote_plus

from dfd.identity.caller import Caller, caller_from_claims

ROOT = Path(__file__).resolve().parent.parent
EVENTS = ROOT / "events"


def fixture(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EVENTS / name).read_text())
    return data


def s3_notification(bucket: str, key: str, *, size: int = 0, etag: str = "0") -> dict[str, Any]:
    """The S3 notification S3 would send (key URL-encoded like real S3: spaces as '+')."""
    event = fixture("s3-put.json")
    obj = event["Records"][0]["s3"]
    obj["bucket"]["name"] = bucket
    obj["bucket"]["arn"] = f"arn:aws:s3:::{bucket}"
    obj["object"].update({"key": quote_plus(key, safe="/"), "size": size, "eTag": etag})
    return event


def minimal_record(bucket: str, key: str) -> dict[str, Any]:
    event = fixture("s3-minimal.json")
    event["Records"][0]["s3"]["bucket"]["name"] = bucket
    event["Records"][0]["s3"]["object"]["key"] = quote_plus(key, safe="/")
    return event


def eventbridge(bucket: str, key: str) -> dict[str, Any]:
    event = fixture("eventbridge-object-created.json")
    event["detail"]["bucket"]["name"] = bucket
    event["detail"]["object"]["key"] = quote_plus(key, safe="/")
    return event


def sqs_batch(*bodies: Any) -> dict[str, Any]:
    """An SQS event (event source mapping shape) with one record per body (dicts are JSON-encoded)."""
    template = fixture("sqs-s3-put.json")["Records"][0]
    records = []
    for body in bodies:
        record = copy.deepcopy(template)
        record["messageId"] = str(uuid.uuid4())
        record["receiptHandle"] = "rh-" + record["messageId"]
        record["body"] = body if isinstance(body, str) else json.dumps(body)
        records.append(record)
    return {"Records": records}


@dataclass(frozen=True)
class ApiUser:
    """A well-known test user: the claims API Gateway's JWT authorizer passes for its Cognito access token."""

    username: str
    sub: str
    groups: tuple[str, ...] = ()

    def claims(self) -> dict[str, str]:
        """As API Gateway passes them: every claim a string, `cognito:groups` bracketed and space-separated."""
        claims = {
            "sub": self.sub,
            "username": self.username,
            "client_id": "testclient0000000000000000",
            "token_use": "access",
            "scope": "aws.cognito.signin.user.admin",
            "iss": "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_TEST",
            "auth_time": "1767225600",
            "exp": "1767229200",
            "iat": "1767225600",
            "jti": f"jti-{self.username}",
            "origin_jti": f"origin-{self.username}",
            "event_id": f"event-{self.username}",
        }
        if self.groups:
            claims["cognito:groups"] = "[" + " ".join(self.groups) + "]"
        return claims

    @property
    def caller(self) -> Caller:
        return caller_from_claims(self.claims())


# The test callers, in one place (the local stack creates users of the same names and groups).
ALICE = ApiUser("alice", "00000000-0000-4000-8000-00000000a11c", ("tenant-acme",))
CAROL = ApiUser("carol", "00000000-0000-4000-8000-0000000ca201", ("tenant-acme",))
BOB = ApiUser("bob", "00000000-0000-4000-8000-000000000b0b", ("tenant-globex",))
ADMIN = ApiUser("admin", "00000000-0000-4000-8000-00000000ad31", ("admins",))
DAVE = ApiUser("dave", "00000000-0000-4000-8000-00000000da7e")  # no group: a tenant of one
USERS = {user.username: user for user in (ALICE, CAROL, BOB, ADMIN, DAVE)}


class _Default:
    """api_event's default caller: admin for /admin/*, alice otherwise."""


DEFAULT_USER: Final = _Default()


def api_event(
    method: str,
    path: str,
    *,
    body: Any = None,
    raw_body: str | None = None,
    query: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
    user: ApiUser | _Default | None = DEFAULT_USER,
    claims: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """An API Gateway HTTP API (v2) event for one of the template's routes, authorized as API Gateway's JWT
    authorizer passes it (`requestContext.authorizer.jwt.claims`): as `user` (default: admin for /admin/*, alice
    otherwise), or with exactly `claims`; `user=None` (and no claims) sends no authorizer at all."""
    route = path
    params: dict[str, str] | None = None
    for prefix in ("/metadata/", "/download/"):
        if path.startswith(prefix):
            route, params = prefix + "{id}", {"id": path[len(prefix) :]}
    event = fixture("api-get-stats.json")
    event.update(routeKey=f"{method} {route}", rawPath=path)
    event["requestContext"].update(routeKey=f"{method} {route}")
    event["requestContext"]["http"].update(method=method, path=path)
    event["headers"].update(headers or {})
    event["rawQueryString"] = "&".join(f"{k}={v}" for k, v in (query or {}).items())
    if query:
        event["queryStringParameters"] = query
    if params:
        event["pathParameters"] = params
    if raw_body is not None:
        event["body"] = raw_body
    elif body is not None:
        event["body"] = json.dumps(body)
    if isinstance(user, _Default):
        user = ADMIN if path.startswith("/admin/") else ALICE
    if claims is None and user is not None:
        claims = user.claims()
    event["requestContext"].pop("authorizer", None)
    if claims is not None:
        event["requestContext"]["authorizer"] = {
            "jwt": {"claims": claims, "scopes": None},
            "principalId": "",
            "integrationLatency": 0,
        }
    return event


def call(handler: Any, event: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """Invoke an HTTP handler; return (status, parsed JSON body)."""
    response = handler(event, LambdaContext())
    return int(response["statusCode"]), json.loads(response["body"]) if response.get("body") else {}


class LambdaContext:
    function_name = "test"
    memory_limit_in_mb = 1024
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:test"
    aws_request_id = "00000000-0000-0000-0000-000000000000"
    log_group_name = "/aws/lambda/test"
    log_stream_name = "test"

    @staticmethod
    def get_remaining_time_in_millis() -> int:
        return 300_000
