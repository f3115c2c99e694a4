"""statemachine/copies.asl.json and its wiring in template.yaml: valid ASL that loops one copy step per CopyFunction
invocation while the answer is `more`, retrying a failed step but never a payload that is not its own or an unknown
copy; the ingest hands drop-zone objects above DropCopyThresholdBytes to it, its role reaching only the copy items
and the workflow's own executions."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from dfd.handlers.copy import CopyInputError
from dfd.ingest.dropcopy import COPY_THRESHOLD, CopyUnknown, execution_name
from tests.unit.template_support import _as_list, _describe, _template, function_policies

ROOT = Path(__file__).resolve().parents[2]
ASL = ROOT / "statemachine" / "copies.asl.json"


def _definition() -> dict[str, Any]:
    found: dict[str, Any] = json.loads(ASL.read_text(encoding="utf-8"))
    return found


def test_the_definition_is_valid_asl() -> None:
    done = subprocess.run([str(ROOT / ".venv" / "bin" / "statelint"), str(ASL)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_it_loops_steps_until_an_answer_other_than_more() -> None:
    states = _definition()["States"]
    step, choice = states["Copy"], states["More?"]
    assert step["Parameters"] == {"FunctionName": "${CopyFunctionArn}", "Payload": {"event_key.$": "$.event_key"}}
    assert step["OutputPath"] == "$.Payload" and step["Next"] == "More?"
    assert choice["Choices"] == [{"Variable": "$.outcome", "StringEquals": "more", "Next": "Copy"}]
    assert states[choice["Default"]]["Type"] == "Succeed"
    never, every = step["Retry"]
    assert never["MaxAttempts"] == 0 and set(never["ErrorEquals"]) == {CopyInputError.__name__, CopyUnknown.__name__}
    assert every["ErrorEquals"] == ["States.ALL"] and every["MaxAttempts"] >= 3


def test_the_workflow_is_wired_to_the_ingest() -> None:
    template = _template()
    resources = template["Resources"]
    machine = resources["CopyStateMachine"]["Properties"]
    assert machine["Type"] == "STANDARD" and machine["DefinitionUri"] == "statemachine/copies.asl.json"
    assert set(machine["DefinitionSubstitutions"]) == {"CopyFunctionArn", "Partition"}
    assert _describe(machine["DefinitionSubstitutions"]["CopyFunctionArn"]) == "CopyFunction.Arn"
    variables = resources["IngestFunction"]["Properties"]["Environment"]["Variables"]
    assert _describe(variables["COPY_STATE_MACHINE_ARN"]) == "Ref(CopyStateMachine)"
    assert variables["COPY_THRESHOLD_BYTES"] == {"Ref": "DropCopyThresholdBytes"}
    assert template["Parameters"]["DropCopyThresholdBytes"]["Default"] == COPY_THRESHOLD


def test_the_copy_items_are_reached_only_by_their_leading_keys() -> None:
    template = _template()
    for logical_id in ("IngestFunction", "CopyFunction"):
        statements = {
            s.get("Sid"): s for policy in function_policies(template, logical_id) for s in _as_list(policy["Statement"])
        }
        condition = statements["DropCopyItems"]["Condition"]
        assert condition == {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["copy#*"]}}, logical_id


def test_an_execution_name_fits_step_functions_and_names_one_version_and_run() -> None:
    key = "b/s3/acme/" + "x" * 2000 + "#etag"
    names = {execution_name(key), execution_name(key, 1), execution_name(key + "2")}
    assert len(names) == 3 and all(len(n) <= 80 for n in names)


def test_the_ingest_hands_off_only_with_the_workflows_arn(monkeypatch: pytest.MonkeyPatch) -> None:
    from dfd import deps

    monkeypatch.delenv("COPY_STATE_MACHINE_ARN", raising=False)
    assert deps.copy_handoff() is None  # every drop-zone object copied inline
    monkeypatch.setenv("COPY_STATE_MACHINE_ARN", "arn:aws:states:us-east-1:123456789012:stateMachine:dfd-copies")
    handoff = deps.copy_handoff()
    assert handoff is not None and handoff.threshold == COPY_THRESHOLD
    monkeypatch.setenv("COPY_THRESHOLD_BYTES", "1048576")
    assert (deps.copy_handoff() or handoff).threshold == 1048576
    deps.reset()
