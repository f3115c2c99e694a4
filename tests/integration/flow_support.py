"""The upload flow against moto for integration tests: POST /upload, the PUT, the S3 event's delivery."""

from __future__ import annotations

from typing import Any

import requests

from dfd.handlers import ingest, upload
from tests.integration.conftest import Aws
from tests.support import LambdaContext, api_event, call, sqs_batch


def post_upload(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    return call(upload.handler, api_event("POST", "/upload", body=body))


def put(answer: dict[str, Any], data: bytes) -> requests.Response:
    return requests.put(answer["upload_url"], data=data, headers=answer["headers"], timeout=10)


def deliver(aws: Aws) -> dict[str, Any]:
    """Hand what S3 put on the queue to the ingest function, as the event source mapping would."""
    messages = aws.drain()
    assert messages, "S3 sent no notification"
    result: dict[str, Any] = ingest.handler(sqs_batch(*(m["Body"] for m in messages)), LambdaContext())
    return result


def upload_bytes(aws: Aws, data: bytes, filename: str, **extra: Any) -> dict[str, Any]:
    status, answer = post_upload({"filename": filename, "size": len(data), **extra})
    assert status == 201, answer
    assert put(answer, data).status_code == 200
    assert deliver(aws) == {"batchItemFailures": []}
    return answer
