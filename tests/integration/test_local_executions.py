"""The local stack's Step Functions executions across a restart (dfdlocal.sfnpersist) on the emulator: a running
execution is on disk before StartExecution answers, leaves the file once it ended, and a start on the same data
runs it again under its name and input; the machines the keeper skips are not kept."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib import request as urlrequest

import pytest

from dfdlocal import reconcile, sfnpersist
from dfdlocal.names import ACCOUNT_ID
from tests.integration.support import Emulator

ROLE = f"arn:aws:iam::{ACCOUNT_ID}:role/dfd-test"
WAITS = json.dumps({"StartAt": "Wait", "States": {"Wait": {"Type": "Wait", "Seconds": 120, "End": True}}})
ENDS = json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}})


def reset(emulator: Emulator) -> None:
    """What a restart does to moto's Step Functions: every machine and execution gone."""
    url = emulator.endpoint + "/moto-api/reset"
    urlrequest.urlopen(urlrequest.Request(url, method="POST"), timeout=10).read()
    reconcile.enable_executions(emulator.endpoint)


@pytest.fixture
def sfn(emulator: Emulator) -> Iterator[Any]:
    reset(emulator)
    client = emulator.client("stepfunctions")
    yield client
    for machine in client.list_state_machines()["stateMachines"]:
        for execution in client.list_executions(stateMachineArn=machine["stateMachineArn"])["executions"]:
            if execution["status"] == "RUNNING":
                client.stop_execution(executionArn=execution["executionArn"])


def machine(sfn: Any, name: str, definition: str) -> str:
    return str(sfn.create_state_machine(name=name, definition=definition, roleArn=ROLE)["stateMachineArn"])


def test_a_running_execution_is_kept_and_run_again_after_a_restart(
    emulator: Emulator, sfn: Any, tmp_path: Path
) -> None:
    waits, ends, skipped = (
        machine(sfn, f"{kind}-{uuid.uuid4().hex[:6]}", d)
        for kind, d in (
            ("waits", WAITS),
            ("ends", ENDS),
            ("skipped", WAITS),
        )
    )
    keeper = sfnpersist.KeptExecutions(tmp_path, skip=frozenset({skipped}), interval=0.1)
    keeper.install()
    keeper.start()
    try:
        sfn.start_execution(stateMachineArn=waits, name="h-one", input='{"event_key": "b/k#e"}')
        # on disk before StartExecution answered
        assert sfnpersist.kept(tmp_path) == [
            {"state_machine_arn": waits, "name": "h-one", "input": '{"event_key": "b/k#e"}'}
        ]
        sfn.start_execution(stateMachineArn=skipped, name="r-one", input="{}")
        sfn.start_execution(stateMachineArn=ends, name="e-one", input="{}")
        deadline = time.monotonic() + 20
        while [e["name"] for e in sfnpersist.kept(tmp_path)] != ["h-one"]:  # the ended one leaves the file
            assert time.monotonic() < deadline, sfnpersist.kept(tmp_path)
            time.sleep(0.1)
    finally:
        keeper.stop()
    sfn.start_execution(stateMachineArn=waits, name="h-two", input="{}")  # after stop(): not kept
    assert [e["name"] for e in sfnpersist.kept(tmp_path)] == ["h-one"]

    reset(emulator)
    assert sfnpersist.resume(tmp_path, sfn) == 0  # its state machine is not there (yet): skipped
    again = machine(sfn, waits.rsplit(":", 1)[1], WAITS)
    assert again == waits
    assert sfnpersist.resume(tmp_path, sfn) == 1
    described = sfn.describe_execution(executionArn=waits.replace(":stateMachine:", ":execution:") + ":h-one")
    assert described["status"] == "RUNNING" and described["input"] == '{"event_key": "b/k#e"}'
    # the ingest's StartExecution of the same name and input is the running execution's (as on AWS)
    same = sfn.start_execution(stateMachineArn=waits, name="h-one", input='{"event_key": "b/k#e"}')
    assert same["executionArn"] == described["executionArn"]
