"""The records of an SQS batch are ingested concurrently; each failure is still reported on its own."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from dfd import deps
from dfd.core.errors import ServiceUnavailable
from dfd.core.notifications import ObjectRef
from dfd.handlers import ingest
from dfd.ingest.service import IngestResult
from tests.integration.support import Aws, uploaded
from tests.support import LambdaContext, s3_notification, sqs_batch

RECORDS = 6


def test_one_failing_record_among_concurrent_ones_is_the_only_failure(
    aws: Aws, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert RECORDS <= ingest.RECORD_WORKERS
    answers = [uploaded(aws, f"content {i}".encode() * 50, f"f{i}.bin") for i in range(RECORDS)]
    batch = sqs_batch(*(s3_notification(aws.settings.bucket, a["key"]) for a in answers))
    failing = 2
    failing_id = batch["Records"][failing]["messageId"]

    ingestor = deps.ingestor()
    real = ingestor.ingest
    # every record waits here until all of them are in flight: a sequential loop would time out
    in_flight = threading.Barrier(RECORDS, timeout=10)
    threads: set[str] = set()

    def ingest_concurrently(ref: ObjectRef) -> IngestResult:
        threads.add(threading.current_thread().name)
        in_flight.wait()
        if ref.key == answers[failing]["key"]:
            raise ServiceUnavailable("injected: DynamoDB unavailable for this record")
        return real(ref)

    monkeypatch.setattr(ingestor, "ingest", ingest_concurrently)
    result: dict[str, Any] = ingest.handler(batch, LambdaContext())

    assert result == {"batchItemFailures": [{"itemIdentifier": failing_id}]}
    assert len(threads) == RECORDS
    statuses = [aws_upload_status(aws, a["upload_id"]) for a in answers]
    assert statuses == ["stored" if i != failing else "pending" for i in range(RECORDS)]
    assert deps.repository().counter_totals()["total_files"] == RECORDS - 1

    # SQS redelivers the failed record alone; the others' redeliveries (if any) are replays
    monkeypatch.setattr(ingestor, "ingest", real)
    assert ingest.handler(sqs_batch(batch["Records"][failing]["body"]), LambdaContext()) == {"batchItemFailures": []}
    assert ingest.handler(batch, LambdaContext()) == {"batchItemFailures": []}
    assert deps.repository().counter_totals()["total_files"] == RECORDS
    aws.assert_invariants()


def test_every_record_of_a_batch_fails_on_its_own(
    aws: Aws, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    answers = [uploaded(aws, f"other {i}".encode() * 50, f"g{i}.bin") for i in range(3)]
    batch = sqs_batch(*(s3_notification(aws.settings.bucket, a["key"]) for a in answers))

    def unavailable(ref: ObjectRef) -> IngestResult:
        raise ServiceUnavailable("injected")

    monkeypatch.setattr(deps.ingestor(), "ingest", unavailable)
    result = ingest.handler(batch, LambdaContext())
    assert sorted(f["itemIdentifier"] for f in result["batchItemFailures"]) == sorted(
        r["messageId"] for r in batch["Records"]
    )
    # each failed record is logged with its id and its error
    warned = {
        r.__dict__["message_id"]: r.__dict__["error"]
        for r in caplog.records
        if r.getMessage() == "record stays on the queue"
    }
    assert warned == {r["messageId"]: "ServiceUnavailable('injected')" for r in batch["Records"]}


def aws_upload_status(aws: Aws, upload_id: str) -> str:
    item = aws.ddb.get_item(TableName=aws.settings.uploads_table, Key={"upload_id": {"S": upload_id}})["Item"]
    return str(item["status"]["S"])
