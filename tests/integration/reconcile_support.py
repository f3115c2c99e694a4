"""The reconcile workflow's local emulator for integration tests (its fixtures are in conftest.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import requests

from dfd import clock
from dfd.config import Settings
from dfd.handlers import ingest, upload
from dfdlocal import reconcile
from dfdlocal.emulator import SerializeDynamoDB
from dfdlocal.names import REGION
from dfdtools.audit import Report, audit
from tests.support import LambdaContext, api_event, call, sqs_batch


def dynamodb_lock(app: Any) -> Any:
    """The lock of the emulator's SerializeDynamoDB middleware, wherever it sits in the middleware chain."""
    while not isinstance(app, SerializeDynamoDB):
        app = app.app
    return app.lock


@dataclass
class Emulator:
    endpoint: str
    model: Any
    dynamodb_lock: Any  # the emulator's DynamoDB serialization: held, it pauses every DynamoDB request

    def client(self, service: str) -> Any:
        return boto3.client(service, endpoint_url=self.endpoint, region_name=REGION)


@dataclass
class Local:
    emulator: Emulator
    settings: Settings
    ddb: Any
    s3: Any
    sqs: Any
    sfn: Any
    queue_url: str
    state_machine_arn: str

    # -- the workflow ---------------------------------------------------------------------------------
    def run(self, **execution_input: Any) -> dict[str, Any]:
        return reconcile.run_reconcile(self.sfn, self.state_machine_arn, 60, execution_input=execution_input)

    # -- the ingest queue and function ----------------------------------------------------------------
    def drain(self) -> list[str]:
        """Take every message off the ingest queue (a lost notification, or to deliver it)."""
        bodies: list[str] = []
        while True:
            got = self.sqs.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=10).get("Messages", [])
            if not got:
                return bodies
            for message in got:
                self.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"])
                bodies.append(message["Body"])

    def deliver(self) -> list[dict[str, Any]]:
        """Hand the queue's messages to the ingest function (the event source mapping); their payloads."""
        bodies = self.drain()
        if bodies:
            result = ingest.handler(sqs_batch(*bodies), LambdaContext())
            assert result == {"batchItemFailures": []}
        return [json.loads(body) for body in bodies]

    # -- uploads --------------------------------------------------------------------------------------
    def register(self, data: bytes, filename: str = "f.bin") -> dict[str, Any]:
        status, answer = call(
            upload.handler, api_event("POST", "/upload", body={"filename": filename, "size": len(data)})
        )
        assert status == 201, answer
        return answer

    def upload(self, data: bytes, filename: str = "f.bin") -> dict[str, Any]:
        """POST /upload and the PUT; the S3 notification stays on the queue."""
        answer = self.register(data, filename)
        response = requests.put(answer["upload_url"], data=data, headers=answer["headers"], timeout=10)
        assert response.status_code == 200, response.text
        return answer

    def upload_item(self, upload_id: str) -> dict[str, Any]:
        item = self.ddb.get_item(TableName=self.settings.uploads_table, Key={"upload_id": {"S": upload_id}})["Item"]
        return {k: next(iter(v.values())) for k, v in item.items()}

    # -- state ----------------------------------------------------------------------------------------
    def audit(self) -> Report:
        return audit(self.ddb, self.s3, self.settings)

    def assert_invariants(self) -> None:
        report = self.audit()
        assert report.ok, report.text()

    def snapshot(self) -> dict[str, list[Any]]:
        s = self.settings
        state: dict[str, list[Any]] = {}
        for table in (s.files_table, s.counters_table, s.uploads_table, s.events_table):
            state[table] = sorted(self.ddb.scan(TableName=table, ConsistentRead=True)["Items"], key=repr)
        listing = self.s3.list_objects_v2(Bucket=s.bucket).get("Contents", [])
        state["objects"] = sorted((o["Key"], o["ETag"]) for o in listing)
        return state


def later(**delta: float) -> str:
    """An execution's notion of now, moved forward (instead of waiting out grace periods and URL expiry)."""
    return clock.iso(datetime.now(UTC) + timedelta(**delta))
