"""moto `mock_aws` environment with the resources the template defines, and the dfd wiring reset."""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib import request as urlrequest

import boto3
import pytest
from moto import mock_aws
from moto.core.botocore_stubber import BotocoreStubber

from dfd import deps
from dfd.config import Settings
from dfdlocal import reconcile
from dfdlocal.emulator import IN_PROCESS_ENDPOINT, Resources, create_resources, make_emulator_server
from dfdlocal.template import TEMPLATE, LocalModel, read_model
from dfdtools.audit import Report, audit
from tests.conftest import TEST_ENV

if TYPE_CHECKING:
    from tests.integration.reconcile_support import Emulator, Local


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
    bucket notification), through ``client(service)``: in-process moto (mock_aws) or an emulator server."""
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


# The reconcile workflow's emulator (tests/integration/reconcile_support.py), for the modules that run it.
@pytest.fixture(scope="module")
def emulator() -> Iterator[Emulator]:
    """One moto server for the module (the local stack's emulator app); each test resets it."""
    from tests.integration.reconcile_support import Emulator, dynamodb_lock  # the handlers load on first use

    with pytest.MonkeyPatch.context() as patch:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        port = sock.getsockname()[1]
        endpoint = f"http://127.0.0.1:{port}"
        for name, value in TEST_ENV.items():
            patch.setenv(name, value)
        patch.setenv("AWS_ENDPOINT_URL", endpoint)  # the handlers' clients and presigned URLs
        patch.setenv("MOTO_PORT", str(port))  # where the Step Functions executor sends its SDK calls
        # moto logs every JSONPath a Choice finds absent (IsPresent false) at ERROR
        interpreter_log = logging.getLogger(reconcile.MOTO_INTERPRETER_LOGGER)
        level = interpreter_log.level
        interpreter_log.setLevel(logging.CRITICAL)
        reconcile.patch_moto_start_execution()
        server = make_emulator_server(sock)
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        thread.start()
        try:
            yield Emulator(endpoint, read_model(TEMPLATE, endpoint), dynamodb_lock(server.app))
        finally:
            server.shutdown()
            server.server_close()
            sock.close()
            interpreter_log.setLevel(level)
            deps.reset()


@pytest.fixture
def local(emulator: Emulator) -> Iterator[Local]:
    """The reconcile state machine on a reset emulator, with the stack's resources."""
    from tests.integration.reconcile_support import Local

    urlrequest.urlopen(urlrequest.Request(emulator.endpoint + "/moto-api/reset", method="POST"), timeout=10).read()
    reconcile.enable_executions(emulator.endpoint)
    resources = template_resources(emulator.model, emulator.client)
    name, path, substitutions = reconcile.state_machine_from_model(emulator.model)
    sfn = emulator.client("stepfunctions")
    arn = reconcile.create_state_machine(sfn, substitutions, name=name, definition_path=path)
    deps.reset()
    env = Local(
        emulator,
        Settings.from_env(),
        emulator.client("dynamodb"),
        emulator.client("s3"),
        emulator.client("sqs"),
        sfn,
        resources.queues["IngestQueue"].url,
        arn,
    )
    env.drain()  # the s3:TestEvent sent when the notification was configured
    yield env
    deps.reset()
