"""moto `mock_aws` environment with the resources the template defines, and the dfd wiring reset."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.core.botocore_stubber import BotocoreStubber

from dfd import deps
from dfd.config import Settings
from dfdlocal.emulator import IN_PROCESS_ENDPOINT, Resources, create_resources
from dfdlocal.streams import patch_moto_streams
from dfdlocal.template import TEMPLATE, LocalModel, read_model
from dfdtools.audit import Report, audit
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


QUEUE_VISIBILITY_TIMEOUT = 30  # seconds, for the polled ingest queue (the template's 30 min are for Lambda)


def template_resources(model: LocalModel, client: Callable[[str], Any]) -> Resources:
    """The template's tables, queues and bucket, created as the local stack creates them (GSIs, TTL, redrive,
    bucket notification, the tables' streams: only committed writes reach them, dfdlocal.streams), through
    ``client(service)``: in-process moto (mock_aws) or an emulator server."""
    patch_moto_streams()
    return create_resources(model, client, local_visibility_timeout=QUEUE_VISIBILITY_TIMEOUT)


@pytest.fixture(scope="session")
def template_model() -> LocalModel:
    """template.yaml read once, with local names (queue URLs as in-process moto makes them)."""
    return read_model(TEMPLATE, IN_PROCESS_ENDPOINT)


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
def aws(monkeypatch: pytest.MonkeyPatch, template_model: LocalModel) -> Iterator[Aws]:
    serialize_moto(monkeypatch)
    for name, value in TEST_ENV.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_ENDPOINT_URL", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    deps.reset()
    with mock_aws():
        resources = template_resources(template_model, boto3.client)
        ddb, s3, sqs = boto3.client("dynamodb"), boto3.client("s3"), boto3.client("sqs")
        env = Aws(Settings.from_env(), s3, ddb, sqs, resources.queues["IngestQueue"].url)
        env.drain()  # the s3:TestEvent sent when the notification was configured
        yield env
    deps.reset()
