"""statemachine/reconcile.asl.json: valid ASL (statelint, cfn-lint's schema, moto's parser), wired in
template.yaml with complete substitutions, and granted exactly the permissions its tasks use."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dfdlocal import reconcile
from tests.unit.template_support import PERMISSIONS, _as_list, _describe, _intrinsic, _template

ROOT = Path(__file__).resolve().parents[2]
ASL = ROOT / "statemachine" / "reconcile.asl.json"
MACHINE = "ReconcileStateMachine"

# the table behind each substitution (policy resources are shown as "<LogicalId>.Arn")
TABLES = {
    "${FilesTable}": "FilesTable",
    "${TenantFilesTable}": "TenantFilesTable",
    "${CountersTable}": "CountersTable",
    "${UploadsTable}": "UploadsTable",
    "${EventsTable}": "EventsTable",
}
# what a task resource needs in IAM (aws-sdk action names are the API's; IAM's differ for S3 listings)
IAM_ACTIONS = {
    "aws-sdk:s3:listObjectsV2": "s3:ListBucket",
    "aws-sdk:s3:deleteObject": "s3:DeleteObject",
    "aws-sdk:s3:abortMultipartUpload": "s3:AbortMultipartUpload",
    "aws-sdk:sqs:sendMessage": "sqs:SendMessage",
    "aws-sdk:cloudwatch:putMetricData": "cloudwatch:PutMetricData",
    "states:startExecution": "states:StartExecution",
    "aws-sdk:sfn:listExecutions": "states:ListExecutions",
}
IAM_RESOURCES = {
    "s3:ListBucket": "FilesBucket.Arn",
    "s3:DeleteObject": "${FilesBucket.Arn}/${UploadPrefix}*",
    "s3:AbortMultipartUpload": "${FilesBucket.Arn}/${UploadPrefix}*",
    "sqs:SendMessage": "IngestQueue.Arn",
    "cloudwatch:PutMetricData": "*",
    # its own ARN, from its fixed name (continuations)
    "states:StartExecution": "arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:stateMachine:"
    "${AWS::StackName}-reconcile",
    "states:ListExecutions": "arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:stateMachine:"
    "${AWS::StackName}-reconcile",
}


def definition() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(ASL.read_text(encoding="utf-8"))
    return data


def substituted() -> str:
    return reconcile.load_definition({name: f"sub-{name.lower()}" for name in reconcile.placeholders(ASL.read_text())})


def all_states(states: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for name, state in states.items():
        yield name, state
        processor = state.get("ItemProcessor") or state.get("Iterator")
        if processor:
            yield from all_states(processor["States"])
        for branch in state.get("Branches", []):
            yield from all_states(branch["States"])


def tasks() -> list[tuple[str, dict[str, Any]]]:
    return [(name, state) for name, state in all_states(definition()["States"]) if state["Type"] == "Task"]


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return _template()


@pytest.fixture(scope="module")
def machine(template: dict[str, Any]) -> dict[str, Any]:
    resource: dict[str, Any] = template["Resources"][MACHINE]
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


def test_cfn_lint_schema_accepts_the_definition() -> None:
    assert _cfn_lint_definition(definition()) == []
    broken = definition()
    broken["States"]["Route"]["Type"] = "Choise"  # the check does look at the definition
    assert any(problem.startswith("E3601") for problem in _cfn_lint_definition(broken))


def test_moto_interpreter_parses_the_substituted_definition() -> None:
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser

    program, _ = AmazonStateLanguageParser.parse(substituted())
    assert program is not None


def test_only_sdk_integrations_no_lambda() -> None:
    for name, state in tasks():
        resource = state["Resource"]
        assert resource.startswith("arn:aws:states:::"), f"{name}: {resource}"
        assert "lambda" not in resource, f"{name} invokes Lambda"
        service = resource.removeprefix("arn:aws:states:::")
        assert service.startswith(
            ("aws-sdk:dynamodb:", "aws-sdk:s3:", "aws-sdk:sqs:", "aws-sdk:cloudwatch:", "aws-sdk:sfn:")
        ) or (service == "states:startExecution"), f"{name}: {service}"


def test_every_task_retries_with_backoff_and_jitter() -> None:
    for name, state in tasks():
        *answers, retrier = state["Retry"]
        # errors that are answers (caught by the state) come first, never retried
        assert all(answer["MaxAttempts"] == 0 for answer in answers), name
        assert retrier["BackoffRate"] >= 2 and retrier["MaxAttempts"] >= 5, name
        assert retrier["JitterStrategy"] == "FULL" and retrier["MaxDelaySeconds"] <= 60, name
        if ":dynamodb:" in state["Resource"]:
            # throttling and conflicts only: a failed condition is an answer, not a fault
            assert "DynamoDb.ProvisionedThroughputExceededException" in retrier["ErrorEquals"], name
            assert "States.TaskFailed" not in retrier["ErrorEquals"], name


def test_no_json_path_uses_an_array_index() -> None:
    """moto evaluates `$.a[0].b` to a one-element list (AWS: the element): use States.ArrayGetItem."""
    text = ASL.read_text()
    assert not re.search(r'"\$[^"]*\[\d+\]', text)


def test_maps_are_inline_and_bounded() -> None:
    for name, state in all_states(definition()["States"]):
        if state["Type"] == "Map":
            assert state["ItemProcessor"]["ProcessorConfig"]["Mode"] == "INLINE", name
            assert state["MaxConcurrencyPath"] == "$.run.concurrency", name
    defaults = definition()["States"]["Defaults"]["Parameters"]["defaults"]
    assert 1 <= defaults["concurrency"] <= 40  # the inline Map ceiling
    # ~25 history events per item at worst, 100 items per page: a continuation well before 25,000 events
    assert defaults["budget"] * 25 + 100 * 25 < 25_000


def test_queries_use_the_templates_pending_index(template: dict[str, Any]) -> None:
    indexes = template["Resources"]["UploadsTable"]["Properties"]["GlobalSecondaryIndexes"]
    (index,) = [index for index in indexes if index["IndexName"] == "PendingIndex"]
    keys = [k["AttributeName"] for k in index["KeySchema"]]
    queries = [state for _, state in tasks() if state["Resource"].endswith(":dynamodb:query")]
    queries = [query for query in queries if query["Parameters"]["TableName"] == "${UploadsTable}"]
    assert len(queries) == 2
    for query in queries:
        params = query["Parameters"]
        assert params["IndexName"] == index["IndexName"]
        assert params["KeyConditionExpression"] == f"{keys[0]} = :shard AND {keys[1]} < :now"


# --------------------------------------------------------------------------------------------------------
# Wiring in template.yaml
# --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("table", ["FilesTable", "TenantFilesTable"])
def test_the_reaper_queries_the_templates_reap_indexes(template: dict[str, Any], table: str) -> None:
    (index,) = template["Resources"][table]["Properties"]["GlobalSecondaryIndexes"]
    keys = [k["AttributeName"] for k in index["KeySchema"]]
    defined = {
        a["AttributeName"]: a["AttributeType"]
        for a in template["Resources"][table]["Properties"]["AttributeDefinitions"]
    }
    assert all(defined[key] == "S" for key in keys)
    queries = [state for _, state in tasks() if state["Resource"].endswith(":dynamodb:query")]
    queries = [query for query in queries if query["Parameters"]["TableName"] == "${" + table + "}"]
    assert len(queries) == 2
    for query in queries:
        params = query["Parameters"]
        assert params["IndexName"] == index["IndexName"] == "ReapIndex"
        assert params["KeyConditionExpression"] == f"{keys[0]} = :shard AND {keys[1]} < :now"


def test_the_reaper_spends_two_calls_per_content_and_never_deletes_another_object() -> None:
    """No listing: DeleteObject IfMatch the generation's ETag (NoSuchKey an answer: on to the record; any
    unmodeled S3 error — a 412 — skips the content), then ONE transaction conditioned on the count still 0 at the
    generation and key read."""
    states = definition()["States"]["ReapItems"]["ItemProcessor"]["States"]
    assert not [name for name, state in states.items() if state.get("Resource", "").endswith(":listObjectsV2")]
    for name, key, etag, after in (
        ("DeleteOlder", "$.item.reap_key.S", "$.item.reap_etag.S", "ClearOlder"),
        ("DeleteCurrent", "$.item.s3_key.S", "$.item.etag.S", "ReapHistory"),
    ):
        task = states[name]
        assert task["Parameters"] == {"Bucket": "${BucketName}", "Key.$": key, "IfMatch.$": etag}
        catches = {tuple(c["ErrorEquals"]): c["Next"] for c in task["Catch"]}
        assert catches == {
            ("S3.NoSuchKeyException", "s3.NoSuchKeyException"): after,
            ("S3.S3Exception", "s3.s3Exception"): "ReapSkipped",
        }
        assert task["Next"] == after
    assert states["IsTombstoned"]["Choices"] == [
        {"Variable": "$.item.live_refs.N", "StringEquals": "0", "Next": "DeleteCurrent"}
    ]
    unindex = states["Unindex"]["Parameters"]
    assert unindex["ConditionExpression"] == "live_refs > :zero AND attribute_not_exists(reap_key)"
    delete, counters, claim = (next(iter(i.values())) for i in states["ReapRecord"]["Parameters"]["TransactItems"])
    # the key's claim goes too, never another content's
    assert claim["Key"] == {"event_key": {"S.$": "States.Format('claim#${BucketName}/{}', $.item.s3_key.S)"}}
    assert claim["ConditionExpression"] == "attribute_not_exists(event_key) OR #h = :hash"
    older = [next(iter(i.values())) for i in states["ClearOlder"]["Parameters"]["TransactItems"]]
    assert older[1]["Key"] == {"event_key": {"S.$": "States.Format('claim#${BucketName}/{}', $.item.reap_key.S)"}}
    assert delete["ConditionExpression"] == (
        "live_refs = :zero AND #gen = :gen AND s3_key = :key AND attribute_not_exists(reap_key)"
    )
    assert delete["ExpressionAttributeValues"][":key"] == {"S.$": "$.item.s3_key.S"}
    history = counters["ExpressionAttributeValues"]
    assert history[":dups"] == {"N.$": "$.history.dups"} and history[":saved"] == {"N.$": "$.history.saved"}
    assert "States.MathAdd" in states["ReapHistory"]["Parameters"]["dups.$"]
    assert states["SavedBytes"]["InputPath"] == "$.item.saved_bytes.N"


def test_the_reaper_drops_tenant_references_only_at_zero() -> None:
    states = definition()["States"]["RefItems"]["ItemProcessor"]["States"]
    assert states["RefAtZero"]["Choices"] == [
        {"Variable": "$.item.upload_count.N", "StringEquals": "0", "Next": "RefSized"}
    ]
    assert states["RefSized"]["Choices"] == [{"Variable": "$.item.size.N", "IsPresent": True, "Next": "ReleaseRef"}]
    assert states["RefSized"]["Default"] == "DropRef"
    drop, unindex = states["DropRef"]["Parameters"], states["UnindexRef"]["Parameters"]
    assert drop["TableName"] == unindex["TableName"] == "${TenantFilesTable}"
    assert drop["ConditionExpression"] == "upload_count <= :zero"
    assert unindex["ConditionExpression"] == "upload_count > :zero"
    assert unindex["UpdateExpression"] == "REMOVE reap_shard, reap_after"
    for name in ("DropRef", "UnindexRef"):
        assert states[name]["Catch"][0]["ErrorEquals"] == ["DynamoDb.ConditionalCheckFailedException"]
    route = {c["StringEquals"]: c["Next"] for c in definition()["States"]["Route"]["Choices"]}
    assert route["reaprefs"] == "RefsPage"  # a continuation resumes the pass


def test_a_reaped_reference_releases_its_size_from_its_tenant_s_usage_in_the_same_transaction() -> None:
    """docs/design.md, "Quotas": stored_bytes = the sizes of the tenant's reference items. The item's delete
    (still at 0: a takeover meanwhile cancels the whole transaction) and the release on `usage#<tenant>` are ONE
    TransactWriteItems — one call per reference, as the DeleteItem was."""
    states = definition()["States"]["RefItems"]["ItemProcessor"]["States"]
    release = states["ReleaseRef"]
    assert release["Resource"].endswith(":dynamodb:transactWriteItems")
    delete, usage = (next(iter(entry.values())) for entry in release["Parameters"]["TransactItems"])
    assert [next(iter(entry)) for entry in release["Parameters"]["TransactItems"]] == ["Delete", "Update"]
    assert delete["TableName"] == "${TenantFilesTable}"
    assert delete["Key"] == states["DropRef"]["Parameters"]["Key"]
    assert delete["ConditionExpression"] == "upload_count <= :zero"
    assert usage["TableName"] == "${CountersTable}"
    assert usage["Key"] == {"counter_id": {"S.$": "States.Format('usage#{}', $.item.tenant.S)"}}
    assert usage["UpdateExpression"] == "ADD stored_bytes :release, used_bytes :release"
    assert usage["ExpressionAttributeValues"] == {":release": {"N.$": "States.Format('-{}', $.item.size.N)"}}
    assert "ConditionExpression" not in usage  # a release is never refused
    assert release["Catch"] == [
        {"ErrorEquals": ["DynamoDb.TransactionCanceledException"], "ResultPath": None, "Next": "RefSkipped"}
    ]
    assert release["Next"] == "RefDropped"


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
    described = {name: _describe(value) for name, value in substitutions.items()}
    assert described == {
        "FilesTable": "Ref(FilesTable)",
        "TenantFilesTable": "Ref(TenantFilesTable)",
        "CountersTable": "Ref(CountersTable)",
        "UploadsTable": "Ref(UploadsTable)",
        "EventsTable": "Ref(EventsTable)",
        "BucketName": "Ref(FilesBucket)",
        "UploadPrefix": "Ref(UploadPrefix)",
        "IngestQueueUrl": "Ref(IngestQueue)",
        "PendingShards": "Ref(PendingShards)",
        "MaxRedrives": "Ref(ReconcileMaxRedrives)",
        "MetricsNamespace": "Ref(MetricsNamespace)",
    }


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


def test_policy_grants_exactly_what_the_tasks_use() -> None:
    used: set[tuple[str, str]] = set()
    for name, state in tasks():
        service = state["Resource"].removeprefix("arn:aws:states:::")
        if service == "aws-sdk:dynamodb:transactWriteItems":  # authorized per item action
            for entry in state["Parameters"]["TransactItems"]:
                ((kind, item),) = entry.items()
                used.add((f"dynamodb:{kind}Item", f"{TABLES[item['TableName']]}.Arn"))
        elif ":dynamodb:" in service:
            api = service.rsplit(":", 1)[1]
            params = state["Parameters"]
            if api == "transactWriteItems":  # authorized per item action
                for item in params["TransactItems"]:
                    ((kind, body),) = item.items()
                    used.add((f"dynamodb:{kind}Item", f"{TABLES[body['TableName']]}.Arn"))
                continue
            resource = f"{TABLES[params['TableName']]}.Arn"
            if api == "query":
                resource = "${" + TABLES[params["TableName"]] + ".Arn}/index/" + params["IndexName"]
            used.add((f"dynamodb:{api[0].upper()}{api[1:]}", resource))
        else:
            assert service in IAM_ACTIONS, f"{name}: no IAM action known for {service}"
            action = IAM_ACTIONS[service]
            used.add((action, IAM_RESOURCES[action]))
            if service == "aws-sdk:s3:deleteObject" and "IfMatch.$" in state["Parameters"]:
                used.add(("s3:GetObject", IAM_RESOURCES[action]))  # S3 authorizes IfMatch an ETag with GetObject
    granted = {(a, r) for a, r in PERMISSIONS[MACHINE] if not a.startswith("logs:")}
    assert used == granted


def _statement(machine: dict[str, Any], sid: str) -> dict[str, Any]:
    for policy in machine["Properties"]["Policies"]:
        for statement in _as_list(policy["Statement"]):
            if statement.get("Sid") == sid:
                return dict(statement)
    raise AssertionError(f"no statement {sid}")


def test_policy_conditions_narrow_the_writes_listing_and_metric(machine: dict[str, Any]) -> None:
    audit = _statement(machine, "AuditScratchItemOnly")
    assert audit["Condition"] == {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["audit#*"]}}
    assert {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"} == set(_as_list(audit["Action"]))
    listing = _statement(machine, "ListUploads")
    # IfExists: S3's 404 check of the reaper's DeleteObject IfMatch carries no prefix (else 403, not NoSuchKey)
    assert _intrinsic(listing["Condition"]["StringLikeIfExists"]["s3:prefix"]) == ("Sub", "${UploadPrefix}*")
    metric = _statement(machine, "DriftMetric")
    assert _describe(metric["Condition"]["StringEquals"]["cloudwatch:namespace"]) == "Ref(MetricsNamespace)"
    # the audit's writes in the ASL all target the scratch item
    for name, state in tasks():
        if any(state["Resource"].endswith(a) for a in (":putItem", ":deleteItem", ":updateItem")) and (
            state["Parameters"]["TableName"] == "${CountersTable}"
        ):
            params = state["Parameters"]
            key = params.get("Key") or {"counter_id": params["Item"]["counter_id"]}
            assert key["counter_id"]["S.$"] in {"$.run.audit", "$.audit"}, name
    # the reaper's counter updates (in its transaction) target the one shard its statement allows
    claims = _statement(machine, "ReapClaims")
    assert claims["Condition"] == {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["claim#*"]}}
    reap = _statement(machine, "ReapCounters")
    (shard,) = reap["Condition"]["ForAllValues:StringEquals"]["dynamodb:LeadingKeys"]
    for name, state in tasks():
        if state["Resource"].endswith(":transactWriteItems"):
            for item in state["Parameters"]["TransactItems"]:
                ((_, body),) = item.items()
                if body["TableName"] == "${CountersTable}":
                    key = body["Key"]["counter_id"]
                    # the reaper's shard, or a tenant's quota usage item (the quota releases, checked above)
                    assert key == {"S": shard} or key.get("S.$", "").startswith("States.Format('usage#{}'"), name
    audit_key = definition()["States"]["Defaults"]["Parameters"]["defaults"]["audit.$"]
    assert audit_key.startswith("States.Format('audit#{}'")


def test_alarms(template: dict[str, Any]) -> None:
    alarms = {k: v["Properties"] for k, v in template["Resources"].items() if v["Type"] == "AWS::CloudWatch::Alarm"}
    assert set(alarms) == {
        "IngestDLQAlarm",
        "IngestErrorsAlarm",
        "ReconcileFailuresAlarm",
        "CounterDriftAlarm",
        "LostFilesAlarm",
        "PublisherDLQAlarm",
    }
    for name, alarm in alarms.items():
        assert alarm["TreatMissingData"] == "notBreaching", name
        assert alarm["ComparisonOperator"] == "GreaterThanThreshold" and alarm["Threshold"] == 0, name

    dlq = alarms["IngestDLQAlarm"]
    assert (dlq["Namespace"], dlq["MetricName"]) == ("AWS/SQS", "ApproximateNumberOfMessagesVisible")
    assert _describe(dlq["Dimensions"][0]["Value"]) == "IngestDLQ.QueueName"
    unpublished = alarms["PublisherDLQAlarm"]
    assert (unpublished["Namespace"], unpublished["MetricName"]) == ("AWS/SQS", "ApproximateNumberOfMessagesVisible")
    assert _describe(unpublished["Dimensions"][0]["Value"]) == "PublisherDLQ.QueueName"
    errors = alarms["IngestErrorsAlarm"]
    assert (errors["Namespace"], errors["MetricName"]) == ("AWS/Lambda", "Errors")
    assert _describe(errors["Dimensions"][0]["Value"]) == "Ref(IngestFunction)"
    failures = alarms["ReconcileFailuresAlarm"]
    stats = {m["Id"]: m["MetricStat"]["Metric"] for m in failures["Metrics"] if "MetricStat" in m}
    assert {m["MetricName"] for m in stats.values()} == {"ExecutionsFailed", "ExecutionsTimedOut"}
    for metric in stats.values():
        assert metric["Namespace"] == "AWS/States"
        assert _describe(metric["Dimensions"][0]["Value"]) == "Ref(ReconcileStateMachine)"

    drift = alarms["CounterDriftAlarm"]
    assert _describe(drift["Namespace"]) == "Ref(MetricsNamespace)"
    emitted = definition()["States"]["EmitDrift"]["Parameters"]
    assert emitted["Namespace"] == "${MetricsNamespace}"
    (detected,) = [m for m in emitted["MetricData"] if m["MetricName"] == drift["MetricName"]]
    assert detected["Dimensions"] == drift["Dimensions"]  # the alarm watches exactly what the workflow emits

    lost = alarms["LostFilesAlarm"]
    assert _describe(lost["Namespace"]) == "Ref(MetricsNamespace)"
    emitted = definition()["States"]["EmitLost"]["Parameters"]
    assert emitted["Namespace"] == "${MetricsNamespace}"
    (marked,) = [m for m in emitted["MetricData"] if m["MetricName"] == lost["MetricName"]]
    assert marked["Dimensions"] == lost["Dimensions"]


def test_the_sweep_marks_a_file_lost_only_while_its_record_names_the_missing_object() -> None:
    states = definition()["States"]["RecountFiles"]["ItemProcessor"]["States"]
    assert states["FindStoredObject"]["Resource"].endswith(":s3:listObjectsV2")  # no s3:GetObject, no 404/403
    mark = states["MarkLost"]["Parameters"]
    assert mark["TableName"] == "${FilesTable}"
    assert "attribute_not_exists(#st)" in mark["ConditionExpression"]
    assert "s3_key = :key" in mark["ConditionExpression"]
    assert mark["ExpressionAttributeValues"][":key"] == {"S.$": "$.file.s3_key.S"}
    catches = states["MarkLost"]["Catch"]
    assert catches == [{"ErrorEquals": ["DynamoDb.ConditionalCheckFailedException"], "Next": "FileChecked"}]
    for scan in ("ScanFilesFirst", "ScanFilesNext"):
        params = definition()["States"][scan]["Parameters"]
        projected = {params["ExpressionAttributeNames"].get(n, n) for n in params["ProjectionExpression"].split(", ")}
        assert projected == {"size", "hash", "s3_key", "etag", "state", "live_refs"}
    # a record without a live reference is the reaper's (its object may be gone legitimately): not checked
    marked = states["FileMarked"]["Choices"]
    zero = {"Variable": "$.file.live_refs.N", "StringEquals": "0"}
    assert any(choice.get("And", [None, None])[1] == zero and choice["Next"] == "FileChecked" for choice in marked)
    assert "(attribute_not_exists(live_refs) OR live_refs > :zero)" in mark["ConditionExpression"]


# --------------------------------------------------------------------------------------------------------
# The local plumbing
# --------------------------------------------------------------------------------------------------------
def test_load_definition_substitutes_json_safely() -> None:
    text = reconcile.load_definition({name: 'a"b\\c' for name in reconcile.placeholders(ASL.read_text())})
    assert '"TableName": "a\\"b\\\\c"' in text
    json.loads(text)


def test_load_definition_refuses_a_missing_substitution() -> None:
    with pytest.raises(reconcile.ReconcileError, match="no substitution for"):
        reconcile.load_definition({"FilesTable": "x"})


def test_expiring_a_multipart_upload_aborts_it_first() -> None:
    """An expired upload with an S3 multipart upload (`s3_upload_id`) is aborted in S3, then marked expired;
    without one (single PUT, or a multipart upload never given a parts call) it is marked expired directly."""
    states = definition()["States"]["PendingItems"]["ItemProcessor"]["States"]
    (expired,) = states["UrlExpired"]["Choices"]
    assert expired["Next"] == "ExpireMultipart"
    choice = states["ExpireMultipart"]
    assert choice["Choices"] == [{"Variable": "$.upload.s3_upload_id.S", "IsPresent": True, "Next": "AbortMultipart"}]
    assert choice["Default"] == "MarkExpiredQuota"  # then MarkExpired, or MarkExpiredCounted (quota release)
    abort = states["AbortMultipart"]
    assert abort["Resource"] == "arn:aws:states:::aws-sdk:s3:abortMultipartUpload"
    assert abort["Parameters"] == {
        "Bucket": "${BucketName}",
        "Key.$": "$.upload.s3_key.S",
        "UploadId.$": "$.upload.s3_upload_id.S",
    }
    assert abort["Next"] == "MarkExpiredQuota" and abort["ResultPath"] is None
    # an upload S3 no longer knows (aborted by DELETE or the lifecycle rule) is expired all the same, at once:
    # NoSuchUpload (S3.… on AWS, s3.… under moto) is caught and never retried; any other failure is retried
    gone = ["S3.NoSuchUploadException", "s3.NoSuchUploadException"]
    (catch,) = abort["Catch"]
    assert catch == {"ErrorEquals": gone, "ResultPath": None, "Next": "MarkExpiredQuota"}
    answer, retrier = abort["Retry"]
    assert answer == {"ErrorEquals": gone, "MaxAttempts": 0}
    assert retrier["ErrorEquals"] == ["States.TaskFailed"]


def test_quota_releases_write_only_usage_items(machine: dict[str, Any]) -> None:
    """Expired/failed uploads counted against a quota release it in one transaction with the upload's own update;
    the workflow may write only usage#* items for that (its policy's condition)."""
    counted = [(name, state) for name, state in tasks() if name.endswith("Counted")]
    assert sorted(name for name, _ in counted) == ["MarkExpiredCounted", "MarkFailedCounted"]
    assert all(state["Resource"].endswith(":transactWriteItems") for _, state in counted)
    for name, state in counted:
        upload, usage = (entry["Update"] for entry in state["Parameters"]["TransactItems"])
        assert upload["TableName"] == "${UploadsTable}" and "quota_bytes = :quota" in upload["ConditionExpression"]
        assert "#status = :pending" in upload["ConditionExpression"], name
        assert upload["UpdateExpression"].endswith("quota_bytes"), name  # REMOVE ..., quota_bytes
        assert usage["TableName"] == "${CountersTable}"
        assert usage["Key"]["counter_id"]["S.$"].startswith("States.Format('usage#{}'"), name
        plain = name.removesuffix("Counted")
        assert state["ResultSelector"] == all_task_states()[plain]["ResultSelector"], name
    release = _statement(machine, "ReleaseQuotaUsage")
    assert release["Condition"] == {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["usage#*"]}}
    assert _as_list(release["Action"]) == ["dynamodb:UpdateItem"]


def test_a_fresh_execution_first_checks_for_another_run() -> None:
    states = definition()["States"]
    assert states["Start"]["Choices"] == [{"Variable": "$.run", "IsPresent": True, "Next": "Route"}]
    assert states["Start"]["Default"] == "OtherRuns"
    check = states["OtherRuns"]
    assert check["Resource"] == "arn:aws:states:::aws-sdk:sfn:listExecutions"
    assert check["Parameters"]["StatusFilter"] == "RUNNING" and check["Parameters"]["StateMachineArn.$"] == (
        "$$.StateMachine.Id"
    )
    assert states["AnotherRun"]["Choices"][0]["NumericGreaterThan"] == 1
    assert states["AnotherRun"]["Choices"][0]["Next"] == "AlreadyRunning"
    assert states["AlreadyRunning"]["End"] is True


def all_task_states() -> dict[str, dict[str, Any]]:
    return dict(tasks())
