"""Helpers shared by the integration tests: test modules import them from here, never from one another."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.request import Request, urlopen

import boto3
import pytest
import requests
from botocore.config import Config
from moto.core.botocore_stubber import BotocoreStubber

from dfd.core import clock
from dfd.core.config import MIB, Settings
from dfd.handlers import download, ingest, metadata, upload, uploads
from dfd.handlers import multipart as parts_handler
from dfd.identity.s3access import session_policy
from dfd.reconcile.codec import LEASE_ID
from dfdlocal import reconcile
from dfdlocal.emulator import Resources, _create_role, create_resources
from dfdlocal.names import BUCKET, REGION
from dfdlocal.streams import patch_moto_streams
from dfdlocal.template import LocalModel
from dfdtools.audit import Report, audit
from tests import support
from tests.support import (
    ALICE,
    ApiUser,
    LambdaContext,
    api_event,
    call,
    sqs_batch,
)


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


ALICE_CLAIMS = support.ALICE.claims()  # alice's claims, as the multipart routes take them


PART = 5 * MIB


DATA = (b"multipart!" * (PART // 10 + 1))[:PART] * 2 + b"tail" * 1000  # parts: 5 MiB, 5 MiB, 4,000 bytes


def as_user(event: dict[str, Any], claims: dict[str, str]) -> dict[str, Any]:
    """The event as API Gateway's JWT authorizer passes it for a user with these claims."""
    event["requestContext"]["authorizer"] = {"jwt": {"claims": claims, "scopes": None}}
    return event


def route(method: str, upload_id: str, action: str, claims: dict[str, str], body: Any = None) -> tuple[int, Any]:
    event = as_user(api_event(method, f"/uploads/{upload_id}/{action}", body=body), claims)
    event["routeKey"] = f"{method} /uploads/{{id}}/{action}"
    event["pathParameters"] = {"id": upload_id}
    return call(parts_handler.handler, event)


def create(size: int = len(DATA), claims: dict[str, str] = ALICE_CLAIMS, **extra: Any) -> dict[str, Any]:
    body = {"filename": "big.bin", "size": size, "multipart": True, **extra}
    status, answer = call(upload.handler, as_user(api_event("POST", "/upload", body=body), claims))
    assert status == 201, answer
    return answer


def put_parts(answer: dict[str, Any], numbers: list[int], data: bytes = DATA, part_size: int = PART) -> dict[int, str]:
    etags = {}
    for part in answer["parts"]:
        number = part["part_number"]
        if number not in numbers:
            continue
        chunk = data[(number - 1) * part_size : number * part_size]
        response = requests.put(part["url"], data=chunk, headers=part["headers"], timeout=10)
        assert response.status_code == 200, response.text
        etags[number] = response.headers["ETag"]
    return etags


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


def delete(upload_id: str, user: ApiUser = ALICE) -> tuple[int, dict[str, Any]]:
    event = api_event("DELETE", f"/uploads/{upload_id}", user=user)
    event["routeKey"] = event["requestContext"]["routeKey"] = "DELETE /uploads/{id}"
    event["pathParameters"] = {"id": upload_id}
    response = uploads.handler(event, LambdaContext())
    body = response.get("body") or ""
    return int(response["statusCode"]), (json.loads(body) if body else {})


def is_lease(item: dict[str, Any]) -> bool:
    """The reconcile's lease: the run's own bookkeeping, not state a run changes (snapshots leave it out)."""
    return item.get("counter_id", {}).get("S") == LEASE_ID


@dataclass
class Emulator:
    endpoint: str
    lambda_url: str  # the template's functions (Lambda's Invoke API on the local runtime)
    model: Any

    def client(self, service: str) -> Any:
        return boto3.client(service, endpoint_url=self.endpoint, region_name=REGION)


def empty_s3_stack(emulator: Emulator) -> Emulator:
    """`emulator` emptied (what a restart of the local stack leaves), then the bucket and the template's roles,
    S3CredentialsRole among them, made as the local stack makes them."""
    urlopen(Request(emulator.endpoint + "/moto-api/reset", method="POST"), timeout=10).read()
    emulator.client("s3").create_bucket(Bucket=BUCKET)
    for role in emulator.model.roles.values():
        _create_role(emulator.client("iam"), role)
    return emulator


def s3_credentials(emulator: Emulator, prefix: str, *, session: str = "alice", **extra: Any) -> dict[str, Any]:
    """The call the service makes: AssumeRole on S3CredentialsRole with the session policy of `prefix`."""
    answer = emulator.client("sts").assume_role(
        RoleArn=emulator.model.environment["S3_CREDENTIALS_ROLE_ARN"],
        RoleSessionName=session,
        Policy=json.dumps(session_policy(BUCKET, prefix)),
        DurationSeconds=900,
        **extra,
    )
    credentials: dict[str, Any] = answer["Credentials"]
    return credentials


def s3_client(emulator: Emulator, credentials: dict[str, Any]) -> Any:
    """An S3 client of the emulator signing with `credentials`, one attempt a call."""
    return boto3.client(
        "s3",
        endpoint_url=emulator.endpoint,
        region_name=REGION,
        aws_access_key_id=credentials["AccessKeyId"],
        aws_secret_access_key=credentials["SecretAccessKey"],
        aws_session_token=credentials["SessionToken"],
        config=Config(retries={"max_attempts": 1}, s3={"addressing_style": "path"}),
    )


class FirstCallsTogether:
    """The client, with each thread's first call held until `parties` threads have made theirs: every caller
    reads or writes before any of them goes on — the race a check-then-write loses."""

    def __init__(self, client: Any, parties: int) -> None:
        self._client = client
        self._barrier = threading.Barrier(parties)
        self._seen = threading.local()

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._client, name)

        def call(**kwargs: Any) -> Any:
            if not getattr(self._seen, "once", False):
                self._seen.once = True
                with contextlib.suppress(threading.BrokenBarrierError):  # a broken barrier: go on
                    self._barrier.wait(timeout=10)
            return method(**kwargs)

        return call


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
    model: LocalModel  # the template's resources as this test's names them

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
            items = self.ddb.scan(TableName=table, ConsistentRead=True)["Items"]
            state[table] = sorted((item for item in items if not is_lease(item)), key=repr)
        listing = self.s3.list_objects_v2(Bucket=s.bucket).get("Contents", [])
        state["objects"] = sorted((o["Key"], o["ETag"]) for o in listing)
        return state


def metric_sums(output: str, service: str = "dfd") -> dict[str, float]:
    """The sum of each metric the functions emitted (Powertools' embedded metric format lines in `output`) with
    the dimension service=`service`, as CloudWatch would aggregate them for an alarm."""
    sums: dict[str, float] = {}
    for line in output.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict) or "_aws" not in record or record.get("service") != service:
            continue
        for directive in record["_aws"].get("CloudWatchMetrics", []):
            for metric in directive.get("Metrics", []):
                values = record.get(metric["Name"])
                values = values if isinstance(values, list) else [values]
                sums[metric["Name"]] = sums.get(metric["Name"], 0) + sum(float(v) for v in values)
    return sums


def later(**delta: float) -> str:
    """An execution's notion of now, moved forward (instead of waiting out grace periods and URL expiry)."""
    return clock.iso(datetime.now(UTC) + timedelta(**delta))


def uploaded(aws: Aws, data: bytes, name: str = "f.bin") -> dict[str, Any]:
    status, answer = post_upload({"filename": name, "size": len(data)})
    assert status == 201
    assert put(answer, data).status_code == 200
    aws.drain()  # the S3 notification: these tests deliver events themselves
    return answer


@dataclass
class Aws:
    settings: Settings
    s3: Any
    ddb: Any
    sqs: Any
    queue_url: str
    model: LocalModel  # the template's resources as this test's names them

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
            state[table] = sorted((item for item in items if not is_lease(item)), key=repr)
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


def bench_rows(row: str, tmp_path: Path, *, timeout: float) -> list[dict[str, Any]]:
    """``bench/run --only ROW --quick`` in its own process, which must exit 0: the rows it writes as JSON."""
    out = tmp_path / "bench.json"
    command = [sys.executable, "-m", "dfdbench", "--only", row, "--quick", "--json", str(out)]
    root = Path(__file__).resolve().parents[2]
    ran = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=timeout, check=False)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    rows: list[dict[str, Any]] = json.loads(out.read_text())["rows"]
    return rows


def s3_writer(monkeypatch: pytest.MonkeyPatch, user: ApiUser) -> None:
    """`user` holds valid S3 credentials, as POST /me/s3-credentials records them: the drop zone's writer check
    (dfd.identity.s3sessions, on the tokens table) admits objects under the user's prefix; the user pool is
    tests.support's users."""
    from dfd import deps
    from dfd.adapters import aws as dfd_aws
    from dfd.adapters.dynamo.pats import DynamoTokenStore
    from dfd.adapters.dynamo.s3sessions import DynamoS3SessionStore
    from dfd.identity.ports import S3Session
    from dfd.identity.s3sessions import S3SessionLedger, S3Writers
    from tests.unit.fakes.lfs import FakeDirectory

    table = deps.lfs_settings().tokens_table
    store = DynamoS3SessionStore(dfd_aws.dynamodb(), table)
    now = clock.now()
    caller = user.caller
    session_id = hashlib.sha256(user.sub.encode()).hexdigest()[:16]
    session = S3Session(session_id, caller.tenant, user.username, None, now, clock.plus(now, hours=1))
    if all(s.session_id != session.session_id for s in store.sessions(caller.owner)[0]):
        S3SessionLedger(store).add(caller.owner, session)
    writers = S3Writers(store, DynamoTokenStore(dfd_aws.dynamodb(), table), FakeDirectory())
    monkeypatch.setattr(deps, "s3_writers", functools.cache(lambda: writers))  # deps.reset() clears it
