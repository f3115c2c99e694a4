"""statemachine/reconcile.asl.json: valid ASL (statelint, cfn-lint's schema, moto's parser) that only orchestrates
— it loops the phases and pages of a run, invoking ReconcileFunction for every rule — wired in template.yaml with
complete substitutions, its role granted exactly that, and the function's grants narrowed by their conditions."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from dfd.reconcile.service import PAGE, PHASES
from dfdlocal import reconcile
from tests.unit.template_support import _as_list, _describe, _intrinsic, _template, function_policies

ROOT = Path(__file__).resolve().parents[2]
ASL = ROOT / "statemachine" / "reconcile.asl.json"
MACHINE = "ReconcileStateMachine"
FUNCTION = "ReconcileFunction"
LAMBDA_TRANSIENT = {  # Step Functions' best practice "Handle Lambda service exceptions"
    "Lambda.ClientExecutionTimeoutException",
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
    "Lambda.TooManyRequestsException",
}


def definition() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(ASL.read_text(encoding="utf-8"))
    return data


def substituted() -> str:
    names = reconcile.placeholders(ASL.read_text())
    return reconcile.load_definition({name: "aws" if name == "Partition" else f"sub-{name.lower()}" for name in names})


def states() -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = definition()["States"]
    return found


def tasks() -> list[tuple[str, dict[str, Any]]]:
    return [(name, state) for name, state in states().items() if state["Type"] == "Task"]


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return _template()


@pytest.fixture(scope="module")
def machine(template: dict[str, Any]) -> dict[str, Any]:
    resource: dict[str, Any] = template["Resources"][MACHINE]
    return resource


@pytest.fixture(scope="module")
def function(template: dict[str, Any]) -> dict[str, Any]:
    resource: dict[str, Any] = template["Resources"][FUNCTION]
    return resource


# --------------------------------------------------------------------------------------------------------
# The definition is valid ASL
# --------------------------------------------------------------------------------------------------------
def test_statelint_reports_no_problems() -> None:
    from statelint.linter import Linter

    problems = Linter.validate(str(ASL))
    assert problems == [], "\n".join(problems)


def _cfn_lint_definition(asl: dict[str, Any]) -> list[str]:
    """cfn-lint's state machine schema (E3601), which it applies to inline definitions only."""
    from cfnlint.api import ManualArgs, lint

    names = reconcile.placeholders(ASL.read_text())
    template = {
        "AWSTemplateFormatVersion": "2010-09-09",
        "Resources": {
            "Machine": {
                "Type": "AWS::StepFunctions::StateMachine",
                "Properties": {
                    "RoleArn": "arn:aws:iam::123456789012:role/reconcile",
                    "StateMachineType": "STANDARD",
                    "Definition": asl,
                    "DefinitionSubstitutions": {name: "x" for name in names},
                },
            }
        },
    }
    matches = lint(json.dumps(template), config=ManualArgs(regions=["us-east-1"]))
    return [f"{m.rule.id}: {m.message}" for m in matches]


def _in_partition_aws() -> dict[str, Any]:
    """The definition as CloudFormation gets it in the aws partition (cfn-lint's schema wants arn:aws: there)."""
    data: dict[str, Any] = json.loads(ASL.read_text(encoding="utf-8").replace("${Partition}", "aws"))
    return data


def test_cfn_lint_schema_accepts_the_definition() -> None:
    assert _cfn_lint_definition(_in_partition_aws()) == []
    broken = _in_partition_aws()
    broken["States"]["Route"]["Type"] = "Choise"  # the check does look at the definition
    assert any(problem.startswith("E3601") for problem in _cfn_lint_definition(broken))


def test_moto_interpreter_parses_the_substituted_definition() -> None:
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser

    program, _ = AmazonStateLanguageParser.parse(substituted())
    assert program is not None


# --------------------------------------------------------------------------------------------------------
# It orchestrates only
# --------------------------------------------------------------------------------------------------------
def test_it_is_small_and_holds_no_rule() -> None:
    """No item layout, no DynamoDB expression, no intrinsic arithmetic: every rule is the function's."""
    assert len(states()) <= 40
    text = ASL.read_text(encoding="utf-8")
    for word in ("Expression", "TableName", "TransactItems", "Bucket", "QueueUrl", "States.Math", "States.Format"):
        assert word not in text, word
    assert all(state["Type"] != "Map" for state in states().values())
    intrinsics = set(re.findall(r"States\.[A-Za-z]+\(", text))
    assert intrinsics <= {"States.UUID("}, intrinsics


def test_every_task_invokes_the_function_or_continues_the_run() -> None:
    for name, state in tasks():
        if name == "ContinueAsNew":
            assert state["Resource"] == "arn:${Partition}:states:::states:startExecution"
            continue
        assert state["Resource"] == "arn:${Partition}:states:::lambda:invoke", name
        assert state["Parameters"]["FunctionName"] == "${ReconcileFunctionArn}", name
        assert "entry" in state["Parameters"]["Payload"], name


def test_lambda_tasks_retry_only_lambda_s_own_transient_errors() -> None:
    for name, state in tasks():
        if name == "ContinueAsNew":
            continue
        (retry,) = state["Retry"]
        assert set(retry["ErrorEquals"]) == LAMBDA_TRANSIENT, name
        assert retry["BackoffRate"] >= 2 and retry["JitterStrategy"] == "FULL" and retry["MaxAttempts"] <= 6, name


def test_a_failed_step_frees_the_lease_then_fails_the_execution() -> None:
    """Every step after the lease is taken catches any error into Abandon (the lease freed at once), which ends in
    a Fail state carrying the step's error: the execution fails, ReconcileFailuresAlarm fires."""
    for name, state in tasks():
        if name in ("Begin", "Abandon"):
            continue
        (catch,) = state["Catch"]
        assert catch == {"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Abandon"}, name
    abandon = states()["Abandon"]
    assert abandon["Parameters"]["Payload"]["entry"] == "abandon" and abandon["Next"] == "Failed"
    assert abandon["Catch"][0]["Next"] == "Failed"  # a release that fails still fails the execution
    assert states()["Failed"] == {**states()["Failed"], "Type": "Fail", "ErrorPath": "$.error.Error"}


def test_each_phase_of_the_rules_is_a_state_routed_by_the_run_s_phase() -> None:
    route = states()["Route"]
    routed = {choice["StringEquals"]: choice["Next"] for choice in route["Choices"]}
    assert set(routed) == set(PHASES)
    assert routed.pop("done") == "Finish"
    for phase, name in routed.items():
        state = states()[name]
        assert state["Parameters"]["Payload"] == {"entry": phase, "state.$": "$"}, name
        assert state["OutputPath"] == "$.Payload" and state["Next"] == "Budget?", name
    assert set(routed) == set(PAGE)


def test_an_execution_runs_at_most_its_budget_of_pages_then_continues_as_new() -> None:
    (budget,) = states()["Budget?"]["Choices"]
    assert budget == {
        "Variable": "$.pos.pages",
        "NumericGreaterThanEqualsPath": "$.run.budget",
        "Next": "ContinueAsNew",
    }
    cont = states()["ContinueAsNew"]
    assert cont["Parameters"]["StateMachineArn.$"] == "$$.StateMachine.Id"
    assert cont["Parameters"]["Input"]["state.$"] == "$"  # the next execution's Begin renews the run's lease
    assert states()[cont["Next"]]["Type"] == "Succeed"


def test_a_run_finding_the_lease_held_succeeds_saying_so() -> None:
    begin = states()["Begin"]
    assert begin["Parameters"]["Payload"] == {"entry": "begin", "input.$": "$"}
    (skipped,) = states()["Skipped?"]["Choices"]
    assert skipped == {"Variable": "$.skipped", "IsPresent": True, "Next": "Skipped"}
    assert states()["Skipped"]["Type"] == "Succeed"
    assert "ListExecutions" not in ASL.read_text() and "listExecutions" not in ASL.read_text()


# --------------------------------------------------------------------------------------------------------
# Wiring in template.yaml
# --------------------------------------------------------------------------------------------------------
def test_state_machine_resource(machine: dict[str, Any]) -> None:
    assert machine["Type"] == "AWS::Serverless::StateMachine"
    props = machine["Properties"]
    assert props["Type"] == "STANDARD"
    assert props["DefinitionUri"] == "statemachine/reconcile.asl.json"
    assert (ROOT / props["DefinitionUri"]).is_file()
    assert props["Logging"]["Level"] in {"ERROR", "ALL"}
    (destination,) = props["Logging"]["Destinations"]
    assert _describe(destination["CloudWatchLogsLogGroup"]["LogGroupArn"]) == "ReconcileLogGroup.Arn"
    assert _intrinsic(props["Name"]) == ("Sub", "${AWS::StackName}-reconcile")


def test_substitutions_cover_every_placeholder_and_nothing_else(machine: dict[str, Any]) -> None:
    substitutions = machine["Properties"]["DefinitionSubstitutions"]
    assert set(substitutions) == reconcile.placeholders(ASL.read_text())
    assert {name: _describe(value) for name, value in substitutions.items()} == {
        "ReconcileFunctionArn": "ReconcileFunction.Arn",
        "Partition": "Ref(AWS::Partition)",  # the service integrations' ARNs, in every partition
    }


def test_the_function_and_its_settings(function: dict[str, Any], template: dict[str, Any]) -> None:
    props = function["Properties"]
    assert props["Handler"] == "dfd.handlers.reconcile.handler"
    env = props["Environment"]["Variables"]
    assert _describe(env["INGEST_QUEUE_URL"]) == "Ref(IngestQueue)"
    assert _describe(env["RECONCILE_MAX_REDRIVES"]) == "Ref(ReconcileMaxRedrives)"
    assert "Events" not in props  # only the workflow invokes it


def test_two_schedules(template: dict[str, Any], machine: dict[str, Any]) -> None:
    events = machine["Properties"]["Events"]
    assert {name: e["Type"] for name, e in events.items()} == {"Pending": "Schedule", "Sweep": "Schedule"}
    assert json.loads(events["Pending"]["Properties"]["Input"]) == {"sweep": False}
    assert json.loads(events["Sweep"]["Properties"]["Input"]) == {"sweep": True}
    assert _intrinsic(events["Pending"]["Properties"]["Schedule"]) == ("Sub", "rate(${ReconcileRate})")
    assert _intrinsic(events["Sweep"]["Properties"]["Schedule"]) == ("Sub", "rate(${ReconcileSweepRate})")
    params = template["Parameters"]
    assert params["ReconcileRate"]["Default"] == "15 minutes"
    for name in ("ReconcileRate", "ReconcileSweepRate"):
        pattern = params[name]["AllowedPattern"]
        assert re.fullmatch(pattern, params[name]["Default"])
        assert not re.fullmatch(pattern, "rate(15 minutes)")


def _statement(template: dict[str, Any], sid: str) -> dict[str, Any]:
    for policy in function_policies(template, FUNCTION):
        for statement in _as_list(policy["Statement"]):
            if statement.get("Sid") == sid:
                return dict(statement)
    raise AssertionError(f"no statement {sid}")


def test_policy_conditions_narrow_the_function_s_writes_and_listing(template: dict[str, Any]) -> None:
    listing = _statement(template, "ListUploads")
    # IfExists: S3's own 404 check of HeadObject/DeleteObject carries no prefix (else 403, which fails the run)
    uploads, drops = listing["Condition"]["StringLikeIfExists"]["s3:prefix"]  # the sweep lists the drop zone too
    assert _intrinsic(uploads) == ("Sub", "${UploadPrefix}*") and drops == "s3/*"
    claims = _statement(template, "ReapClaims")
    assert claims["Condition"] == {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["claim#*"]}}
    counters = _statement(template, "CountersOfTheReconcile")
    assert counters["Condition"] == {
        "ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["shard#*", "lease#reconcile"]}
    }
    assert _as_list(counters["Action"]) == ["dynamodb:UpdateItem"]


def test_alarms(template: dict[str, Any], function: dict[str, Any]) -> None:
    alarms = {k: v["Properties"] for k, v in template["Resources"].items() if v["Type"] == "AWS::CloudWatch::Alarm"}
    # the workflow's and its audit's (tests/unit/test_template_operations.py checks every alarm of the template)
    alarms = {
        k: alarms[k] for k in ("ReconcileFailuresAlarm", "ReconcileErrorsAlarm", "CounterDriftAlarm", "LostFilesAlarm")
    }
    for name, alarm in alarms.items():
        assert alarm["TreatMissingData"] == "notBreaching", name
        assert alarm["ComparisonOperator"] == "GreaterThanThreshold" and alarm["Threshold"] == 0, name
    failures = alarms["ReconcileFailuresAlarm"]
    stats = {m["Id"]: m["MetricStat"]["Metric"] for m in failures["Metrics"] if "MetricStat" in m}
    assert {m["MetricName"] for m in stats.values()} == {"ExecutionsFailed", "ExecutionsTimedOut"}
    for metric in stats.values():
        assert metric["Namespace"] == "AWS/States"
        assert _describe(metric["Dimensions"][0]["Value"]) == "Ref(ReconcileStateMachine)"
    # the function emits its metrics with Powertools (POWERTOOLS_METRICS_NAMESPACE, dimension service=dfd):
    # the alarms watch exactly those (tests/integration/test_reconcile.py reads what it emits)
    env = template["Globals"]["Function"]["Environment"]["Variables"]
    assert _describe(env["POWERTOOLS_METRICS_NAMESPACE"]) == "Ref(MetricsNamespace)"
    assert env["POWERTOOLS_SERVICE_NAME"] == "dfd"
    source = (ROOT / "functions" / "dfd" / "reconcile" / "service.py").read_text(encoding="utf-8")
    for name in ("CounterDriftAlarm", "LostFilesAlarm"):
        alarm = alarms[name]
        assert _describe(alarm["Namespace"]) == "Ref(MetricsNamespace)", name
        assert alarm["Dimensions"] == [{"Name": "service", "Value": "dfd"}], name
        assert f'emit("{alarm["MetricName"]}"' in source, name


# --------------------------------------------------------------------------------------------------------
# The local plumbing
# --------------------------------------------------------------------------------------------------------
def test_load_definition_substitutes_json_safely() -> None:
    text = reconcile.load_definition({name: 'a"b\\c' for name in reconcile.placeholders(ASL.read_text())})
    assert '"FunctionName": "a\\"b\\\\c"' in text
    json.loads(text)


def test_load_definition_refuses_a_missing_substitution() -> None:
    with pytest.raises(reconcile.ReconcileError, match="no substitution for"):
        reconcile.load_definition({"FilesTable": "x"})
