"""What template.yaml gives an operator: an alarm on every queue, stream consumer, function and the API, all to
one optional SNS topic; the dashboard; the user pool kept; no partition or URL suffix written out; every function's
role written out (SAM's generated roles carry managed policies that allow Resource "*").

The template is read as the local stack reads it (cfn-lint's decoder, intrinsics in long form); what depends on
parameters is evaluated with the local stack's resolver (dfdlocal.template), as ``make run`` does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cfnlint.decode import cfn_yaml

from dfd.ingest.service import Outcome
from dfdlocal.template import NO_VALUE, read_model
from tests.unit.template_support import TEMPLATE, _describe, _intrinsic, _template

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "deploy" / "site.yaml"
FUNCTION_TYPES = {"AWS::Serverless::Function", "AWS::Lambda::Function"}
STREAM_EVENTS = {"DynamoDB", "Kinesis"}
ALARM_ACTIONS = {
    "Fn::If": [
        "HasAlarmEmail",
        [{"Ref": "AlarmTopic"}],
        {"Fn::If": ["HasAlarmTopicArn", [{"Ref": "AlarmTopicArn"}], {"Ref": "AWS::NoValue"}]},
    ]
}


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return _template()


def _of_type(template: dict[str, Any], *types: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v.get("Type") in types}


def _watched(alarm: dict[str, Any]) -> list[tuple[str, str, dict[str, str]]]:
    """(namespace, metric name, {dimension: described value}) of every metric an alarm reads."""
    props = alarm["Properties"]
    metrics = (
        [props]
        if "MetricName" in props
        else [m["MetricStat"]["Metric"] for m in props.get("Metrics", []) if "MetricStat" in m]
    )
    return [
        (
            m["Namespace"] if isinstance(m["Namespace"], str) else _describe(m["Namespace"]),
            m["MetricName"],
            {d["Name"]: _describe(d["Value"]) for d in m.get("Dimensions", [])},
        )
        for m in metrics
    ]


def _alarms_on(template: dict[str, Any], namespace: str, metric: str, dimension: str, value: str) -> list[str]:
    return [
        logical_id
        for logical_id, alarm in _of_type(template, "AWS::CloudWatch::Alarm").items()
        if any(w[:2] == (namespace, metric) and w[2].get(dimension) == value for w in _watched(alarm))
    ]


def _walk(node: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    yield path, node
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _walk(value, f"{path}/{key}")
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value, f"{path}/[]")


def _dead_letter_queues(template: dict[str, Any]) -> set[str]:
    """Queues some resource names as where its failures go (SQS redrive, EventBridge target, stream on-failure)."""
    found: set[str] = set()
    for path, node in _walk(template["Resources"]):
        if re.search(r"/(deadLetterTargetArn|DeadLetterConfig/Arn|OnFailure/Destination)$", path):
            found.add(_describe(node).removesuffix(".Arn"))
    return found


# --------------------------------------------------------------------------------------------------------
# An alarm on every queue, stream consumer, function, the API and the workflow
# --------------------------------------------------------------------------------------------------------
def test_every_queue_has_an_alarm(template: dict[str, Any]) -> None:
    queues = _of_type(template, "AWS::SQS::Queue")
    dead_letter = _dead_letter_queues(template)
    assert {"IngestDLQ", "PublisherDLQ", "EventsWebhookDLQ", "EventsExampleDLQ"} <= dead_letter <= set(queues)
    missing = []
    for queue, resource in queues.items():
        # a DLQ alarms on any message; a working queue on its oldest message's age
        metric = "ApproximateNumberOfMessagesVisible" if queue in dead_letter else "ApproximateAgeOfOldestMessage"
        alarms = _alarms_on(template, "AWS/SQS", metric, "QueueName", f"{queue}.QueueName")
        if not alarms:
            missing.append(f"{queue} ({metric})")
        for alarm in alarms:  # exists exactly when its queue does
            assert template["Resources"][alarm].get("Condition") == resource.get("Condition"), alarm
    assert not missing, f"queues without an alarm: {missing}"


def test_every_stream_consumer_has_an_iterator_age_alarm(template: dict[str, Any]) -> None:
    consumers = [
        (function, name)
        for function, resource in _of_type(template, *FUNCTION_TYPES).items()
        for name, event in (resource["Properties"].get("Events") or {}).items()
        if event["Type"] in STREAM_EVENTS
    ]
    consumers += [
        (_describe(mapping["Properties"]["FunctionName"]).removeprefix("Ref(").removesuffix(")"), logical_id)
        for logical_id, mapping in _of_type(template, "AWS::Lambda::EventSourceMapping").items()
        if "StartingPosition" in mapping["Properties"]  # a stream's
    ]
    assert {name for _, name in consumers} >= {"UploadsStream", "FilesStream"}
    # Lambda reports IteratorAge per function: the oldest record any of its stream mappings holds back
    missing = [
        f"{function}.{name}"
        for function, name in consumers
        if not _alarms_on(template, "AWS/Lambda", "IteratorAge", "FunctionName", f"Ref({function})")
    ]
    assert not missing, f"stream consumers without an IteratorAge alarm: {missing}"


@pytest.mark.parametrize("metric", ["Errors", "Throttles"])
def test_every_function_has_errors_and_throttles_alarms(template: dict[str, Any], metric: str) -> None:
    functions = _of_type(template, *FUNCTION_TYPES)
    assert len(functions) == 16
    missing = [f for f in functions if not _alarms_on(template, "AWS/Lambda", metric, "FunctionName", f"Ref({f})")]
    assert not missing, f"functions without a {metric} alarm: {missing}"


def test_the_api_alarms_on_its_5xx_rate(template: dict[str, Any]) -> None:
    (alarm,) = _alarms_on(template, "AWS/ApiGateway", "5xx", "ApiId", "Ref(HttpApi)")
    props = template["Resources"][alarm]["Properties"]
    assert {w[1] for w in _watched(template["Resources"][alarm])} == {"5xx", "Count"}
    (rate,) = [m for m in props["Metrics"] if m.get("ReturnData")]
    assert rate["Expression"] == "IF(requests >= 20, 100 * FILL(errors, 0) / requests, 0)"  # a rate, in percent
    assert (props["Threshold"], props["ComparisonOperator"]) == (1, "GreaterThanThreshold")


@pytest.mark.parametrize("machine", ["ReconcileStateMachine", "SegmentStateMachine"])
def test_the_workflows_alarm_on_failed_executions(template: dict[str, Any], machine: str) -> None:
    for metric in ("ExecutionsFailed", "ExecutionsTimedOut"):
        assert _alarms_on(template, "AWS/States", metric, "StateMachineArn", f"Ref({machine})"), metric


def test_every_alarm_notifies_the_one_topic_and_treats_silence_as_healthy(template: dict[str, Any]) -> None:
    alarms = _of_type(template, "AWS::CloudWatch::Alarm")
    assert len(alarms) >= 36
    for logical_id, alarm in alarms.items():
        props = alarm["Properties"]
        assert props["AlarmActions"] == ALARM_ACTIONS, logical_id
        assert props["OKActions"] == ALARM_ACTIONS, logical_id
        assert props["TreatMissingData"] == "notBreaching", logical_id
        assert 40 <= len(props["AlarmDescription"]) <= 1024, logical_id  # what it means and what to do


def _model(**overrides: str) -> Any:
    return read_model(TEMPLATE, "http://127.0.0.1:4566", overrides)


def _actions(model: Any) -> Any:
    raw = model.resolver.template["Resources"]["IngestDLQAlarm"]["Properties"]["AlarmActions"]
    return model.resolver.evaluate("IngestDLQAlarm", "AlarmActions", raw)


def test_without_a_topic_parameter_no_topic_is_created_and_the_alarms_have_no_actions() -> None:
    model = _model()
    assert not {"AWS::SNS::Topic", "AWS::SNS::Subscription", "AWS::SNS::TopicPolicy"} & set(model.ignored.values())
    assert model.ignored["IngestDLQAlarm"] == "AWS::CloudWatch::Alarm"  # the alarms exist all the same
    assert _actions(model) is NO_VALUE


def test_an_alarm_email_creates_the_topic_and_subscribes_it() -> None:
    model = _model(AlarmEmail="ops@example.com")
    assert model.ignored["AlarmTopic"] == "AWS::SNS::Topic"
    assert model.ignored["AlarmTopicPolicy"] == "AWS::SNS::TopicPolicy"
    assert model.ignored["AlarmEmailSubscription"] == "AWS::SNS::Subscription"
    assert _actions(model) == ["AlarmTopic"]
    subscription = model.resolver.template["Resources"]["AlarmEmailSubscription"]["Properties"]
    assert model.resolver.evaluate("AlarmEmailSubscription", "Endpoint", subscription["Endpoint"]) == "ops@example.com"
    assert subscription["Protocol"] == "email"


def test_an_existing_topic_is_notified_and_none_is_created() -> None:
    arn = "arn:aws:sns:eu-west-1:123456789012:ops"
    model = _model(AlarmTopicArn=arn)
    assert "AlarmTopic" not in model.ignored
    assert _actions(model) == [arn]


def test_an_email_and_a_topic_together_are_refused(template: dict[str, Any]) -> None:
    rule = template["Rules"]["OneAlarmTopic"]
    assert rule["RuleCondition"] == {"Fn::Not": [{"Fn::Equals": [{"Ref": "AlarmEmail"}, ""]}]}
    (assertion,) = rule["Assertions"]
    assert assertion["Assert"] == {"Fn::Equals": [{"Ref": "AlarmTopicArn"}, ""]}
    assert template["Parameters"]["AlarmEmail"]["Default"] == ""
    pattern = template["Parameters"]["AlarmEmail"]["AllowedPattern"]
    assert re.fullmatch(pattern, "ops@example.com") and re.fullmatch(pattern, "")
    assert not re.fullmatch(pattern, "arn:aws:sns:eu-west-1:123456789012:ops")


# --------------------------------------------------------------------------------------------------------
# The dashboard
# --------------------------------------------------------------------------------------------------------
def _emitted_metrics() -> set[str]:
    """Metric names the functions emit through Powertools (handlers: add_metric / the ingest's _metric)."""
    names = {f"Ingest_{outcome.value}" for outcome in Outcome}
    for source in (ROOT / "functions" / "dfd").rglob("*.py"):
        text = source.read_text(encoding="utf-8")
        names |= set(re.findall(r'add_metric\(name="(\w+)"', text)) | set(re.findall(r'_metric\("(\w+)"', text))
    return names


@pytest.fixture(scope="module")
def dashboard() -> tuple[Any, list[dict[str, Any]]]:
    model = _model()
    for alarm in _of_type(model.resolver.template, "AWS::CloudWatch::Alarm"):  # the local stack makes no alarms
        model.resolver.bind(alarm, alarm, {"Arn": f"arn:aws:cloudwatch:us-east-1:123456789012:alarm:{alarm}"})
    raw = model.resolver.template["Resources"]["OperationsDashboard"]["Properties"]["DashboardBody"]
    body = model.resolver.evaluate("OperationsDashboard", "DashboardBody", raw)
    widgets: list[dict[str, Any]] = json.loads(body)["widgets"]
    return model, widgets


def _rows(widgets: list[dict[str, Any]]) -> list[list[Any]]:
    return [row for w in widgets for row in w["properties"].get("metrics", [])]


def test_dashboard_shows_errors_and_throttles_of_every_function(dashboard: tuple[Any, list[dict[str, Any]]]) -> None:
    model, widgets = dashboard
    for metric in ("Errors", "Throttles"):
        shown = {row[3] for row in _rows(widgets) if row[:3] == ["AWS/Lambda", metric, "FunctionName"]}
        assert shown == {model.resolver.ref(f) for f in model.functions}, metric


def test_dashboard_shows_ingests_duplicates_latency_and_queue_age(dashboard: tuple[Any, list[dict[str, Any]]]) -> None:
    model, widgets = dashboard
    rows = _rows(widgets)
    dfd = {row[1] for row in rows if row[0] == "dfd"}  # MetricsNamespace's default
    assert {f"Ingest_{o.value}" for o in Outcome} <= dfd  # every outcome of the ingest, per minute
    assert {"DuplicatesAvoidedPrecheck", "BytesSaved"} <= dfd
    assert dfd <= _emitted_metrics(), f"the dashboard reads metrics no function emits: {dfd - _emitted_metrics()}"
    ingest = model.resolver.ref("IngestFunction")
    assert any(row[:4] == ["AWS/Lambda", "Duration", "FunctionName", ingest] for row in rows)
    queue = model.queues["IngestQueue"].name
    assert any(row[:4] == ["AWS/SQS", "ApproximateAgeOfOldestMessage", "QueueName", queue] for row in rows)
    for widget in widgets:
        assert widget["properties"].get("region", "us-east-1") == "us-east-1"  # ${AWS::Region}, the local one


def test_dashboard_shows_the_dedup_ratio_by_metric_math_over_a_week(
    dashboard: tuple[Any, list[dict[str, Any]]],
) -> None:
    _, widgets = dashboard
    (widget,) = [w for w in widgets if "Dedup over the last 7 days" in w["properties"].get("title", "")]
    props = widget["properties"]
    assert props["period"] == 3600 and props["start"] == "-P7D"
    ids = {row[-1]["id"]: row for row in props["metrics"]}
    expression = ids["ratio"][0]["expression"]
    for metric, metric_id in (
        ("Ingest_stored", "stored"),
        ("Ingest_duplicate", "after"),
        ("DuplicatesAvoidedPrecheck", "before"),
    ):
        assert ids[metric_id][1] == metric and f"FILL({metric_id}, 0)" in expression
    assert ids["saved"][1] == "BytesSaved"


def test_dashboard_lists_every_alarm_of_every_stack(
    template: dict[str, Any], dashboard: tuple[Any, list[dict[str, Any]]]
) -> None:
    raw = template["Resources"]["OperationsDashboard"]["Properties"]["DashboardBody"]
    found = _intrinsic(raw)
    assert found is not None and found[0] == "Sub" and isinstance(found[1], str)
    listed = set(re.findall(r"\$\{(\w+)\.Arn\}", found[1]))
    unconditional = {k for k, v in _of_type(template, "AWS::CloudWatch::Alarm").items() if "Condition" not in v}
    assert listed == unconditional  # an alarm that may not exist cannot be named in the body
    assert sum(1 for w in dashboard[1] if w["type"] == "alarm") == 1


# --------------------------------------------------------------------------------------------------------
# Data kept, roles without "*", partitions, vended logs
# --------------------------------------------------------------------------------------------------------
def test_the_user_pool_survives_the_stack_and_is_protected(template: dict[str, Any]) -> None:
    pool = template["Resources"]["UserPool"]
    assert (pool["DeletionPolicy"], pool["UpdateReplacePolicy"]) == ("Retain", "Retain")
    assert pool["Properties"]["DeletionProtection"] == {"Ref": "UserPoolDeletionProtection"}
    parameter = template["Parameters"]["UserPoolDeletionProtection"]
    assert parameter["Default"] == "ACTIVE" and parameter["AllowedValues"] == ["ACTIVE", "INACTIVE"]


def test_every_function_has_its_own_role_naming_its_own_log_group(template: dict[str, Any]) -> None:
    """SAM's generated role of a function always carries AWSLambdaBasicExecutionRole (logs actions on Resource "*"),
    and for SQS or DynamoDB stream event sources AWSLambdaSQSQueueExecutionRole or AWSLambdaDynamoDBExecutionRole (on
    every queue or stream), for Tracing AWSXrayWriteOnlyAccess: every function has its role written out instead."""
    assert not {"Role", "Policies"} & set(template["Globals"]["Function"])
    functions = _of_type(template, *FUNCTION_TYPES)
    assert len(functions) == 16
    for logical_id, resource in functions.items():
        props = resource["Properties"]
        assert _describe(props.get("Role")) == f"{logical_id}Role.Arn", logical_id
        assert "Policies" not in props, f"{logical_id}: SAM ignores Policies beside Role"
        role = template["Resources"][f"{logical_id}Role"]
        assert role["Type"] == "AWS::IAM::Role" and "Condition" not in role, logical_id
        assert set(role["Properties"]) == {"AssumeRolePolicyDocument", "Policies"}, logical_id  # no managed policy
        (trust,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        assert trust == {
            "Effect": "Allow",
            "Principal": {"Service": "lambda.amazonaws.com"},
            "Action": "sts:AssumeRole",
        }
        runtime, *_ = role["Properties"]["Policies"]
        log_group = _describe(props["LoggingConfig"]["LogGroup"])
        assert runtime["PolicyName"] == "lambda-runtime" and log_group == f"Ref({logical_id}LogGroup)", logical_id
        logs = [s for s in runtime["PolicyDocument"]["Statement"] if s["Sid"] == "OwnLogGroup"]
        assert [_describe(s["Resource"]) for s in logs] == [f"{logical_id}LogGroup.Arn"], logical_id
    # SAM generates the state machine's role from its Policies alone (AWSXrayWriteOnlyAccess only with Tracing)
    for logical_id, resource in _of_type(template, "AWS::Serverless::StateMachine").items():
        assert not {"Tracing", "Role"} & set(resource["Properties"]), logical_id


def test_every_function_logs_json_at_the_template_s_levels(template: dict[str, Any]) -> None:
    """Every function logs in Lambda's JSON format, its own lines at FunctionSystemLogLevel (WARN by default: no
    START/END/REPORT, which bench row 17's log budget counts out) and the application's at LogLevel's mapping."""
    functions = _of_type(template, "AWS::Serverless::Function")
    assert functions
    for logical_id, resource in functions.items():
        config = resource["Properties"]["LoggingConfig"]
        assert config["LogFormat"] == "JSON", logical_id
        assert _describe(config["SystemLogLevel"]) == "Ref(FunctionSystemLogLevel)", logical_id
        assert "LogLevel" in _describe(config["ApplicationLogLevel"]), logical_id
    assert template["Parameters"]["FunctionSystemLogLevel"]["Default"] == "WARN"


def _strings(node: Any, path: str = "") -> Iterator[tuple[str, str]]:
    for where, value in _walk(node, path):
        if isinstance(value, str) and not re.search(r"/(\w*Description|Comment|Metadata)(/|$)", where):
            yield where, value


@pytest.mark.parametrize("path", [TEMPLATE, SITE], ids=lambda p: p.name)
def test_no_partition_or_url_suffix_is_written_out(path: Path) -> None:
    loaded = cfn_yaml.load(str(path))
    found = []
    for where, value in _strings(loaded):
        # service principals are <service>.amazonaws.com in every partition
        if where.endswith("/Principal/Service") and re.fullmatch(r"[a-z0-9.-]+\.amazonaws\.com", value):
            continue
        if "arn:aws:" in value or "amazonaws.com" in value:
            found.append(f"{where}: {value}")
    assert not found, "write ${AWS::Partition} / ${AWS::URLSuffix}:\n" + "\n".join(found)


@pytest.mark.parametrize("path", sorted((ROOT / "statemachine").glob("*.asl.json")), ids=lambda p: p.name)
def test_no_partition_is_written_out_in_the_workflow(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert "arn:aws:" not in text and "amazonaws.com" not in text  # DefinitionSubstitutions' ${Partition}


def test_log_groups_of_services_are_under_vendedlogs(template: dict[str, Any]) -> None:
    """CloudWatch Logs' resource policy (10 per account, 5,120 characters) must not grow with every API's log group:
    groups written by AWS services other than Lambda live under /aws/vendedlogs/, which one policy entry covers."""
    names = {
        k: _intrinsic(v["Properties"]["LogGroupName"]) for k, v in _of_type(template, "AWS::Logs::LogGroup").items()
    }
    services = {k: n[1] for k, n in names.items() if n is not None and not n[1].startswith("/aws/lambda/")}
    assert set(services) == {"HttpApiAccessLogGroup", "ReconcileLogGroup", "SegmentLogGroup", "CopyLogGroup"}
    assert all(name.startswith("/aws/vendedlogs/") for name in services.values()), services


def test_alarm_list_of_the_docs_is_complete(template: dict[str, Any]) -> None:
    doc = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    alarms = set(_of_type(template, "AWS::CloudWatch::Alarm"))
    described = set(re.findall(r"`(\w+Alarm)`", doc))
    # the functions' Errors/Throttles alarms are described together, by their pattern
    per_function = {a for a in alarms if re.fullmatch(r"\w+(Errors|Throttles)Alarm", a)}
    assert alarms - per_function <= described, (
        f"alarms docs/operations.md does not describe: {alarms - per_function - described}"
    )
    assert described <= alarms, f"docs/operations.md names alarms the template lacks: {described - alarms}"
    assert "UserPoolDeletionProtection" in doc and "OperationsDashboard" in doc
