"""moto `mock_aws` environment with the resources the template defines, and the dfd wiring reset."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.core.botocore_stubber import BotocoreStubber

from dfd import deps
from dfd.config import Settings
from dfdlocal.audit import Report, audit
from tests.conftest import TEST_ENV


@dataclass
class Aws:
    settings: Settings
    s3: Any
    ddb: Any
    sqs: Any
    queue_url: str

    def audit(self, *, settled: bool = True) -> Report:
        return audit(self.ddb, self.s3, self.settings, settled=settled)

    def assert_invariants(self, *, settled: bool = True) -> Report:
        report = self.audit(settled=settled)
        assert report.ok, report.text()
        return report

    def snapshot(self) -> dict[str, list[dict[str, Any]]]:
        """Every table's items and every object: to prove a replay changed nothing."""
        tables = [self.settings.files_table, self.settings.counters_table, self.settings.uploads_table]
        tables += [self.settings.events_table, self.settings.tenant_files_table]
        state: dict[str, list[dict[str, Any]]] = {}
        for table in tables:
            items = self.ddb.scan(TableName=table, ConsistentRead=True)["Items"]
            state[table] = sorted(items, key=repr)
        listing = self.s3.list_objects_v2(Bucket=self.settings.bucket).get("Contents", [])
        state["objects"] = sorted(({"Key": o["Key"], "ETag": o["ETag"]} for o in listing), key=repr)
        return state

    def drain(self, max_messages: int = 10) -> list[dict[str, Any]]:
        """Receive every message S3 sent to the ingest queue (deleting them), as SQS event records."""
        records: list[dict[str, Any]] = []
        while True:
            got = self.sqs.receive_message(
                QueueUrl=self.queue_url, MaxNumberOfMessages=max_messages, AttributeNames=["All"]
            ).get("Messages", [])
            if not got:
                return records
            for message in got:
                self.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"])
                records.append(message)


def create_resources(settings: Settings) -> tuple[Any, Any, Any, str]:
    ddb = boto3.client("dynamodb")
    s3 = boto3.client("s3")
    sqs = boto3.client("sqs")
    for table, key in (
        (settings.files_table, "hash"),
        (settings.counters_table, "counter_id"),
        (settings.uploads_table, "upload_id"),
        (settings.events_table, "event_key"),
    ):
        ddb.create_table(
            TableName=table,
            KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
    ddb.create_table(
        TableName=settings.tenant_files_table,
        KeySchema=[{"AttributeName": "tenant", "KeyType": "HASH"}, {"AttributeName": "hash", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "tenant", "AttributeType": "S"},
            {"AttributeName": "hash", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    s3.create_bucket(Bucket=settings.bucket)
    queue_url = sqs.create_queue(QueueName="dfd-ingest")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    s3.put_bucket_notification_configuration(
        Bucket=settings.bucket,
        NotificationConfiguration={
            "QueueConfigurations": [
                {
                    "QueueArn": arn,
                    "Events": ["s3:ObjectCreated:*"],
                    "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": settings.upload_prefix}]}},
                }
            ]
        },
    )
    return ddb, s3, sqs, queue_url


_MOTO = threading.RLock()


def serialize_moto(monkeypatch: pytest.MonkeyPatch) -> None:
    """One in-process moto request at a time, as the local stack's emulator serializes DynamoDB requests.

    The ingest handler runs a batch's records in threads, and moto answers in the calling thread; its DynamoDB
    is not transaction-safe (a cancelled TransactWriteItems puts back a copy of the tables taken when it
    started, undoing what other threads committed meanwhile). Real DynamoDB isolates transactions itself."""
    process = BotocoreStubber.process_request

    def serialized(self: BotocoreStubber, request: Any) -> Any:
        with _MOTO:
            return process(self, request)

    monkeypatch.setattr(BotocoreStubber, "process_request", serialized)


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[Aws]:
    serialize_moto(monkeypatch)
    for name, value in TEST_ENV.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_ENDPOINT_URL", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    deps.reset()
    with mock_aws():
        settings = Settings.from_env()
        ddb, s3, sqs, queue_url = create_resources(settings)
        env = Aws(settings, s3, ddb, sqs, queue_url)
        env.drain()  # the s3:TestEvent sent when the notification was configured
        yield env
    deps.reset()
