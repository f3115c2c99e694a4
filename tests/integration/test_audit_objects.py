"""scripts/audit reports a stored object it cannot vouch for — missing, archived (unreadable), overwritten with
other bytes — as BROKEN with its key and the reason, and exits 1; it never crashes on one (an object whose stored
checksum disagrees with its bytes: tests/integration/test_checksum_trust.py)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import pytest
import requests

from dfd.handlers import ingest, upload
from dfdtools import audit
from tests.integration.conftest import Aws
from tests.support import LambdaContext, api_event, call, sqs_batch

DATA = b"audited content\n" * 64


def stored(aws: Aws) -> str:
    """Upload DATA through the API and ingest it: its stored object's key."""
    status, answer = call(upload.handler, api_event("POST", "/upload", body={"filename": "a.txt", "size": len(DATA)}))
    assert status == 201, answer
    assert requests.put(answer["upload_url"], data=DATA, headers=answer["headers"], timeout=10).status_code == 200
    messages = aws.drain()
    assert ingest.handler(sqs_batch(*(m["Body"] for m in messages)), LambdaContext()) == {"batchItemFailures": []}
    aws.assert_invariants()
    return str(answer["key"])


def _archive(aws: Aws, key: str) -> None:
    aws.s3.copy_object(
        Bucket=aws.settings.bucket,
        Key=key,
        CopySource={"Bucket": aws.settings.bucket, "Key": key},
        StorageClass="GLACIER",
    )


def _overwrite(aws: Aws, key: str) -> None:
    aws.s3.put_object(Bucket=aws.settings.bucket, Key=key, Body=b"other bytes")


def _delete(aws: Aws, key: str) -> None:
    aws.s3.delete_object(Bucket=aws.settings.bucket, Key=key)


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (_archive, "cannot be read: InvalidObjectState"),
        (_overwrite, "hashes to " + hashlib.sha256(b"other bytes").hexdigest()),
        (_delete, "is missing"),
    ],
)
def test_a_damaged_object_is_broken_with_its_key_and_reason(
    aws: Aws, damage: Callable[[Aws, str], None], reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    key = stored(aws)
    damage(aws, key)
    aws.drain()  # the damage's own events are not the ingest's business here
    report = aws.audit()
    assert not report.ok
    problems = [p for p in report.problems() if key in p]
    assert len(problems) == 1 and reason in problems[0], report.text()
    assert audit.main(["--aws"]) == 1
    out = capsys.readouterr().out
    assert "BROKEN" in out and key in out and reason in out
