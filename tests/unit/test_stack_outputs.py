"""`--stack NAME`: the operator tools find a deployed stack's resources from its outputs (DescribeStacks). The
outputs are faked from template.yaml's own Outputs, so a tool can never need an output the template lacks."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from dfdlocal.template import load_template
from dfdtools import tools

ROOT = Path(__file__).resolve().parents[2]
NEEDED = {
    *tools.STACK_SETTINGS,
    "IngestQueueUrl",
    "IngestFunctionName",
    "ApiUrl",
    "UserPoolClientId",
    "ReconcileStateMachineArn",
}


class FakeCloudFormation:
    def __init__(self, outputs: dict[str, str]) -> None:
        self.outputs = outputs
        self.asked: list[str] = []

    def describe_stacks(self, StackName: str) -> dict[str, Any]:
        self.asked.append(StackName)
        if StackName != "dfd-prod":
            raise ClientError({"Error": {"Code": "ValidationError", "Message": "Stack does not exist"}}, "Describe")
        return {"Stacks": [{"Outputs": [{"OutputKey": k, "OutputValue": v} for k, v in self.outputs.items()]}]}


@pytest.fixture
def outputs() -> dict[str, str]:
    """What DescribeStacks answers for a stack deployed from this template (values made up per output)."""
    declared = load_template(ROOT / "template.yaml")["Outputs"]
    fake = {key: f"dfd-prod-{key.lower()}" for key in declared}
    fake["UploadPrefix"] = "uploads/"
    return fake


def test_the_template_outputs_everything_the_tools_read(outputs: dict[str, str]) -> None:
    assert set(outputs) >= NEEDED


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    tools.add_target_args(parser)
    return parser.parse_args(list(argv))


def test_stack_gives_the_settings_and_implies_aws(monkeypatch: pytest.MonkeyPatch, outputs: dict[str, str]) -> None:
    fake = FakeCloudFormation(outputs)
    monkeypatch.setattr(tools.boto3.Session, "client", lambda self, service, **_: fake)
    for name in tools.STACK_SETTINGS.values():
        monkeypatch.setenv(name, "from-the-environment")  # the stack wins over a stale environment
    args = _args("--stack", "dfd-prod", "--region", "eu-west-1")
    where = tools.target(args)
    assert fake.asked == ["dfd-prod"] and args.aws and where.endpoint is None
    s = where.settings
    assert (s.files_table, s.counters_table, s.uploads_table) == (
        outputs["FilesTableName"], outputs["CountersTableName"], outputs["UploadsTableName"]
    )  # fmt: skip
    assert (s.events_table, s.tenant_files_table, s.bucket, s.upload_prefix) == (
        outputs["EventsTableName"], outputs["TenantFilesTableName"], outputs["BucketName"], "uploads/"
    )  # fmt: skip
    assert where.outputs["IngestQueueUrl"] == outputs["IngestQueueUrl"]


def test_an_unknown_stack_or_a_missing_output_is_one_clear_error(
    monkeypatch: pytest.MonkeyPatch, outputs: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    del outputs["TenantFilesTableName"]
    fake = FakeCloudFormation(outputs)
    monkeypatch.setattr(tools.boto3.Session, "client", lambda self, service, **_: fake)

    @tools.reports_unreachable
    def main(argv: list[str] | None = None) -> int:
        tools.target(_args(*(argv or [])))
        return 0

    assert main(["--stack", "nope", "--region", "eu-west-1"]) == 2
    assert "stack nope: Stack does not exist" in capsys.readouterr().err
    assert main(["--stack", "dfd-prod", "--region", "eu-west-1"]) == 2
    assert "no output TenantFilesTableName" in capsys.readouterr().err


def test_token_and_upload_take_the_client_and_the_api_from_the_stack(
    monkeypatch: pytest.MonkeyPatch, outputs: dict[str, str]
) -> None:
    from dfdtools import token, upload

    fake = FakeCloudFormation(outputs)
    monkeypatch.setattr(tools.boto3.Session, "client", lambda self, service, **_: fake)
    signed: list[str] = []
    monkeypatch.setattr(token, "sign_in", lambda idp, client_id, *_: signed.append(client_id) or "t")
    args = argparse.Namespace(
        user="alice", password="pw", stack="dfd-prod", region="eu-west-1", aws=False, client_id=None, endpoint_url="",
        new_password=None,
    )  # fmt: skip
    assert token.token_for(args) == "t" and signed == [outputs["UserPoolClientId"]] and args.aws

    with pytest.raises(SystemExit):  # an unknown stack is a usage error naming it
        upload.main(["--stack", "nope", "--region", "eu-west-1", "--list", "--token", "t"])


def test_reconcile_runs_the_stacks_state_machine(
    monkeypatch: pytest.MonkeyPatch, outputs: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    from dfdtools import reconcile

    fake = FakeCloudFormation(outputs)
    clients: list[str] = []

    def client(self: Any, service: str, **_: Any) -> Any:
        clients.append(service)
        return fake

    runs: list[tuple[str, dict[str, Any], float]] = []

    def run(
        sfn: Any, arn: str, timeout: float, *, execution_input: dict[str, Any], poll: float, wait_for_turn: bool
    ) -> dict[str, Any]:
        assert wait_for_turn  # asked for now: a run the timer's holds up runs after it, never "skipped"
        runs.append((arn, execution_input, poll))
        return {"redriven": 0, "expired": 0, "orphans": None, "drift": None, "now": "x", "executions": 1}

    monkeypatch.setattr(tools.boto3.Session, "client", client)
    monkeypatch.setattr(reconcile, "run_reconcile", run)
    assert reconcile.main(["--stack", "dfd-prod", "--region", "eu-west-1", "--pending-only"]) == 0
    assert runs == [(outputs["ReconcileStateMachineArn"], {"sweep": False}, 2.0)]
    assert clients == ["cloudformation", "stepfunctions"]
    assert reconcile.main(["--stack", "nope", "--region", "eu-west-1"]) == 2
    assert "stack nope" in capsys.readouterr().err
