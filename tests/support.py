"""Test helpers shared by the suites: fixtures from events/, API Gateway v2 events, SQS batches."""

from __future__ import annotations

import copy
import json
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

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


def api_event(
    method: str,
    path: str,
    *,
    body: Any = None,
    raw_body: str | None = None,
    query: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    """An API Gateway HTTP API (v2) event for one of the template's routes."""
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
