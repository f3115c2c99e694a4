"""The local stack for end-to-end tests: ``python -m dfdlocal`` in a subprocess, on free ports.

A subprocess, not in-process: the stack points os.environ (AWS_ENDPOINT_URL, credentials, DDB_TABLE...) at
itself and imports the handlers with those settings cached, which would leak into the unit/integration tests
sharing this pytest process (and moto's in-process mocks would intercept the stack's own calls).
Teardown sends SIGINT, as Ctrl-C does, and expects a clean exit 0.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from tests.conftest import TEST_ENV
from tests.e2e.e2e_helpers import ROOT, RunningStack
from tests.e2e.openapi_check import validating_responses


def _clean_env() -> dict[str, str]:
    """This process's environment without the test suites' AWS/dfd settings (the stack sets its own)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DFD_", "AWS_", "MOTO_", "POWERTOOLS_")) and k not in TEST_ENV
    }
    env["PYTHONUNBUFFERED"] = "1"
    return env


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    workdir = tmp_path_factory.mktemp("dfdlocal")
    ready = workdir / "ready.json"
    log_path = workdir / "stack.log"
    command = [
        sys.executable,
        "-m",
        "dfdlocal",
        "--host",
        "127.0.0.1",
        "--api-port",
        "0",
        "--lambda-port",
        "0",
        "--aws-port",
        "0",
        "--ready-file",
        str(ready),
    ]
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, cwd=ROOT, env=_clean_env(), stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60.0
    while not ready.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"local stack did not start (exit {process.poll()}):\n{log_path.read_text()[-4000:]}")
        time.sleep(0.1)
    info = json.loads(ready.read_text())
    tables, queues = info["tables"], info["queues"]
    ingest = next(q for q in queues.values() if "ingest" in q["name"] and "dlq" not in q["name"])
    dlq = next(q for q in queues.values() if "dlq" in q["name"])
    running = RunningStack(
        api_url=info["api_url"],
        lambda_url=info["lambda_url"],
        aws_url=info["aws_url"],
        region=info["region"],
        bucket=next(iter(info["buckets"].values())),
        files_table=tables["FilesTable"],
        counters_table=tables["CountersTable"],
        uploads_table=tables["UploadsTable"],
        events_table=tables["EventsTable"],
        tenant_files_table=tables["TenantFilesTable"],
        ingest_queue_url=ingest["url"],
        dlq_url=dlq["url"],
        description=info,
        log_path=log_path,
        process=process,
        cognito=info["cognito"],
    )
    # every API response the e2e tests receive is checked against docs/openapi.yaml
    with validating_responses(running.api_url) as checker:
        yield running

    process.send_signal(signal.SIGINT)
    try:
        code = process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        pytest.fail(f"local stack did not stop within 20 s of SIGINT:\n{running.logs()}")
    if code != 0:
        pytest.fail(f"local stack exited {code} after SIGINT:\n{running.logs()}")
    if checker.failures:
        pytest.fail(f"{len(checker.failures)} API response(s) broke docs/openapi.yaml:\n" + "\n".join(checker.failures))
