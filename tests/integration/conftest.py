"""The template's resources for the integration tests: its tables on AWS's DynamoDB Local (one per test process,
each test's tables under names of their own), everything else on moto's in-process `mock_aws`; the dfd wiring
reset. The reconcile workflow's tests (`emulator`, `local`) run on one moto server per module, its DynamoDB
requests forwarded to DynamoDB Local as the local stack's are."""

from __future__ import annotations

import dataclasses
import logging
import socket
import threading
import uuid
from collections.abc import Iterator
from typing import Any
from urllib import request as urlrequest

import boto3
import pytest
from moto import mock_aws
from werkzeug.serving import WSGIRequestHandler, make_server

from dfd import deps
from dfd.adapters.publisher import Tables
from dfd.core.config import Settings
from dfd.handlers import publisher
from dfdlocal import reconcile
from dfdlocal.ddblocal import DynamoDBLocal
from dfdlocal.emulator import IN_PROCESS_ENDPOINT, Resources, _create_table, make_emulator_server
from dfdlocal.lambda_api import LambdaApi
from dfdlocal.runtime import Runtime
from dfdlocal.template import TEMPLATE, LocalModel, read_model
from tests.conftest import TEST_ENV
from tests.integration.support import Aws, Emulator, Local, serialize_moto, template_resources


@pytest.fixture(scope="session")
def template_model() -> LocalModel:
    """template.yaml read once, with local names (queue URLs as in-process moto makes them)."""
    return read_model(TEMPLATE, IN_PROCESS_ENDPOINT)


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch, template_model: LocalModel, dynamodb_local: DynamoDBLocal) -> Iterator[Aws]:
    """The template's tables on DynamoDB Local (the engine of make run and of AWS's API), its queues and bucket on
    moto; the handlers' clients reach both (AWS_ENDPOINT_URL_DYNAMODB names DynamoDB Local)."""
    serialize_moto(monkeypatch)
    for name, value in TEST_ENV.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_ENDPOINT_URL", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    model = own_tables(monkeypatch, template_model, dynamodb_local)
    deps.reset()
    with mock_aws():
        resources = template_resources(model, boto3.client)
        ddb, s3, sqs = boto3.client("dynamodb"), boto3.client("s3"), boto3.client("sqs")
        env = Aws(Settings.from_env(), s3, ddb, sqs, resources.queues["IngestQueue"].url, model)
        env.drain()  # the s3:TestEvent sent when the notification was configured
        try:
            yield env
        finally:
            drop_tables(ddb, model)
    deps.reset()


def own_tables(monkeypatch: pytest.MonkeyPatch, template_model: LocalModel, engine: DynamoDBLocal) -> LocalModel:
    """The model with its tables renamed for one test (created by the caller, deleted by :func:`drop_tables`: no
    test sees another's items, even one whose teardown did not run), the environment naming them and DynamoDB
    Local. Without their TTL: DynamoDB Local deletes expired items as DynamoDB does, and the tests' clocks are
    fixed in the past, so their items would vanish at the sweeper's whim (TTL deletion is DynamoDB's background
    cleanup, no condition the service relies on)."""
    suffix = "-" + uuid.uuid4().hex[:8]
    tables = {
        logical_id: dataclasses.replace(
            table,
            name=table.name + suffix,
            properties={k: v for k, v in table.properties.items() if k != "TimeToLiveSpecification"},
        )
        for logical_id, table in template_model.tables.items()
    }
    renamed = {table.name: table.name + suffix for table in template_model.tables.values()}
    for name, value in TEST_ENV.items():
        monkeypatch.setenv(name, renamed.get(value, value))
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", engine.url)
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB_STREAMS", engine.url)
    # the publisher reads the names of the tables it serves once, at init (as on Lambda): this test's
    monkeypatch.setattr(publisher, "TABLES", Tables(renamed[TEST_ENV["UPLOADS_TABLE"]], renamed[TEST_ENV["DDB_TABLE"]]))
    return dataclasses.replace(template_model, tables=tables)


def drop_tables(client: Any, model: LocalModel) -> None:
    for table in model.tables.values():
        client.delete_table(TableName=table.name)


@pytest.fixture(scope="session")
def dynamodb_local() -> Iterator[DynamoDBLocal]:
    """AWS's DynamoDB Local, in memory, one per test process (make test installs it: never skipped)."""
    engine = DynamoDBLocal(None)
    engine.start()
    yield engine
    engine.stop()


@pytest.fixture
def local_dynamodb(
    monkeypatch: pytest.MonkeyPatch, template_model: LocalModel, dynamodb_local: DynamoDBLocal
) -> Iterator[tuple[Any, Settings]]:
    """The template's tables alone on DynamoDB Local (:func:`own_tables`), and the settings naming them."""
    model = own_tables(monkeypatch, template_model, dynamodb_local)
    client = boto3.client(
        "dynamodb",
        endpoint_url=dynamodb_local.url,
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )
    for table in model.tables.values():
        _create_table(client, table, Resources())
    try:
        yield client, Settings.from_env()
    finally:
        drop_tables(client, model)


class _Quiet(WSGIRequestHandler):
    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        pass


def _listening() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    return sock


@pytest.fixture(scope="module")
def emulator(dynamodb_local: DynamoDBLocal) -> Iterator[Emulator]:
    """One moto server for the module (the local stack's emulator app), and the template's functions behind
    Lambda's Invoke API (the local runtime, where the reconcile workflow's lambda:invoke tasks go); each test
    resets the emulator."""
    with pytest.MonkeyPatch.context() as patch:
        sock, lambda_sock = _listening(), _listening()
        port = sock.getsockname()[1]
        endpoint = f"http://127.0.0.1:{port}"
        lambda_url = f"http://127.0.0.1:{lambda_sock.getsockname()[1]}"
        for name, value in TEST_ENV.items():
            patch.setenv(name, value)
        patch.setenv("AWS_ENDPOINT_URL", endpoint)  # the handlers' clients and presigned URLs
        patch.setenv("MOTO_PORT", str(port))  # where the Step Functions executor sends its SDK calls
        model = read_model(TEMPLATE, endpoint)
        for name in ("INGEST_QUEUE_URL", "RECONCILE_MAX_REDRIVES"):  # ReconcileFunction's own variables
            patch.setenv(name, model.environment[name])
        # moto logs every JSONPath a Choice finds absent (IsPresent false) at ERROR
        interpreter_log = logging.getLogger(reconcile.MOTO_INTERPRETER_LOGGER)
        level = interpreter_log.level
        interpreter_log.setLevel(logging.CRITICAL)
        reconcile.patch_moto_start_execution()
        reconcile.patch_moto_lambda(lambda_url)
        server = make_emulator_server(sock, dynamodb=(dynamodb_local.host, dynamodb_local.port))
        runtime = Runtime(model.functions, reconcile.ROOT)
        host, lambda_port = lambda_sock.getsockname()[:2]
        functions = make_server(
            host, lambda_port, LambdaApi(runtime), threaded=True, request_handler=_Quiet, fd=lambda_sock.fileno()
        )
        servers = [server, functions]
        for each in servers:
            threading.Thread(target=each.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
        try:
            yield Emulator(endpoint, lambda_url, model)
        finally:
            for each in servers:
                each.shutdown()
                each.server_close()
            sock.close()
            lambda_sock.close()
            interpreter_log.setLevel(level)
            deps.reset()


@pytest.fixture
def local(emulator: Emulator, dynamodb_local: DynamoDBLocal, monkeypatch: pytest.MonkeyPatch) -> Iterator[Local]:
    urlrequest.urlopen(urlrequest.Request(emulator.endpoint + "/moto-api/reset", method="POST"), timeout=10).read()
    reconcile.enable_executions(emulator.endpoint)
    model = own_tables(monkeypatch, emulator.model, dynamodb_local)
    resources = template_resources(model, emulator.client)
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
        model,
    )
    env.drain()  # the s3:TestEvent sent when the notification was configured
    try:
        yield env
    finally:
        drop_tables(env.ddb, model)
    deps.reset()
