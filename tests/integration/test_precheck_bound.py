"""Prechecks bounded on DynamoDB (moto): PRECHECK_LIMIT 409s per tenant per window, counted on the tenant's usage
item in the 409's own transaction; the next one is 429 with Retry-After and changes nothing."""

from __future__ import annotations

import hashlib

import pytest
import requests

from dfd import deps
from dfd.handlers import admin_stats, ingest, upload
from tests.integration.conftest import Aws
from tests.support import BOB, CAROL, LambdaContext, api_event, call, sqs_batch

DATA = b"a file everyone in acme has\n" * 40
DIGEST = hashlib.sha256(DATA).hexdigest()


def test_repeated_prechecks_are_refused_beyond_the_bound(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRECHECK_LIMIT", "2")
    deps.reset()
    status, answer = call(upload.handler, api_event("POST", "/upload", body={"filename": "a", "size": len(DATA)}))
    assert status == 201
    assert requests.put(answer["upload_url"], data=DATA, headers=answer["headers"], timeout=10).status_code == 200
    messages = aws.drain()
    assert ingest.handler(sqs_batch(*(m["Body"] for m in messages)), LambdaContext()) == {"batchItemFailures": []}

    body = {"filename": "again", "size": len(DATA), "sha256": DIGEST}
    for _ in range(2):
        assert call(upload.handler, api_event("POST", "/upload", body=body, user=CAROL))[0] == 409
    _, before = call(admin_stats.handler, api_event("GET", "/admin/stats"))
    response = upload.handler(api_event("POST", "/upload", body=body, user=CAROL), LambdaContext())
    assert response["statusCode"] == 429
    retry_after = int(response["headers"]["Retry-After"])
    assert 1 <= retry_after <= 3600
    status, refused = call(upload.handler, api_event("POST", "/upload", body=body))
    assert status == 429 and refused["error"]["code"] == "too_many_prechecks"
    assert refused["error"]["details"]["limit"] == 2
    _, after = call(admin_stats.handler, api_event("GET", "/admin/stats"))
    assert after == before and before["duplicates_avoided"] == 2 and before["total_s3_size_saved"] == 2 * len(DATA)
    # the bound is the tenant's: bob (another tenant, not holding it) is asked to upload, as before
    assert call(upload.handler, api_event("POST", "/upload", body=body, user=BOB))[0] == 201
    aws.assert_invariants(settled=False)
