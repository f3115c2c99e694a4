"""Calls of the API as a given user for integration tests."""

from __future__ import annotations

import hashlib
from typing import Any

from dfd.handlers import download, ingest, metadata, upload
from tests.integration.conftest import Aws
from tests.integration.flow_support import put
from tests.support import ApiUser, LambdaContext, api_event, call, sqs_batch


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def post(
    user: ApiUser, data: bytes, name: str, *, digest: bool = False, content_type: str | None = None
) -> tuple[int, dict[str, Any]]:
    body: dict[str, Any] = {"filename": name, "size": len(data)}
    if content_type:
        body["content_type"] = content_type
    if digest:
        body["sha256"] = sha(data)
    return call(upload.handler, api_event("POST", "/upload", body=body, user=user))


def ingest_all(aws: Aws) -> None:
    messages = aws.drain()
    assert messages
    result = ingest.handler(sqs_batch(*(m["Body"] for m in messages)), LambdaContext())
    assert result == {"batchItemFailures": []}


def upload_as(aws: Aws, user: ApiUser, data: bytes, name: str, content_type: str | None = None) -> dict[str, Any]:
    status, answer = post(user, data, name, content_type=content_type)
    assert status == 201, answer
    assert put(answer, data).status_code == 200
    ingest_all(aws)
    return answer


def get(route: str, ident: str, user: ApiUser) -> tuple[int, dict[str, Any]]:
    handler = metadata.handler if route == "metadata" else download.handler
    return call(handler, api_event("GET", f"/{route}/{ident}", user=user))
