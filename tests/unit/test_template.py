"""Static checks of template.yaml: cfn-lint clean, routes and handlers, least privilege, queue/table settings.

No network, no AWS: the template is read as the local stack reads it (cfn-lint's decoder), CloudFormation
short tags (!Ref, !Sub, !GetAtt, ...) in their unevaluated long form ({"Ref": ...}, {"Fn::Sub": ...}).
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest

from dfd.core.records import UploadRecord
from dfd.ingest import dropzone
from dfd.ingest.segments import HANDOFF_THRESHOLD, SEGMENT_BYTES
from tests.unit.template_support import (
    LOG_DELIVERY,
    PERMISSIONS,
    TEMPLATE,
    TRACING,
    _as_list,
    _describe,
    _intrinsic,
    _template,
    function_policies,
)

ROOT = Path(__file__).resolve().parents[2]

ROUTES = {
    ("POST", "/upload"): "UploadFunction",
    ("GET", "/metadata/{id}"): "MetadataFunction",
    ("GET", "/download/{id}"): "DownloadFunction",
    ("GET", "/me"): "MeFunction",
    ("GET", "/admin/stats"): "AdminStatsFunction",
    ("GET", "/admin/stats/history"): "AdminStatsFunction",
    ("GET", "/admin/tenants"): "AdminStatsFunction",
    ("GET", "/admin/hashes"): "AdminHashesFunction",
    ("POST", "/uploads/{id}/parts"): "UploadPartsFunction",
    ("GET", "/uploads/{id}/parts"): "UploadPartsFunction",
    ("POST", "/uploads/{id}/complete"): "UploadPartsFunction",
    ("DELETE", "/uploads/{id}"): "UploadsFunction",
    ("GET", "/uploads"): "UploadsFunction",
    ("POST", "/lfs/{repo}/objects/batch"): "LfsFunction",
    ("POST", "/lfs/{repo}/verify/{id}"): "LfsFunction",
    ("POST", "/lfs/{repo}/uploads/{id}/parts"): "LfsFunction",
    ("GET", "/lfs/{repo}/uploads/{id}/parts"): "LfsFunction",
    ("POST", "/lfs/{repo}/uploads/{id}/complete"): "LfsFunction",
    ("DELETE", "/lfs/{repo}/uploads/{id}"): "LfsFunction",
    ("POST", "/lfs/{repo}/locks"): "LfsFunction",
    ("GET", "/lfs/{repo}/locks"): "LfsFunction",
    ("POST", "/lfs/{repo}/locks/verify"): "LfsFunction",
    ("POST", "/lfs/{repo}/locks/{id}/unlock"): "LfsFunction",
    ("POST", "/me/tokens"): "TokensFunction",
    ("GET", "/me/tokens"): "TokensFunction",
    ("DELETE", "/me/tokens/{id}"): "TokensFunction",
    ("POST", "/me/s3-credentials"): "TokensFunction",
}
HANDLERS = {
    "UploadFunction": "dfd.handlers.upload.handler",
    "MetadataFunction": "dfd.handlers.metadata.handler",
    "DownloadFunction": "dfd.handlers.download.handler",
    "MeFunction": "dfd.handlers.me.handler",
    "AdminStatsFunction": "dfd.handlers.admin_stats.handler",
    "AdminHashesFunction": "dfd.handlers.admin_hashes.handler",
    "UploadPartsFunction": "dfd.handlers.multipart.handler",
    "LfsFunction": "dfd.handlers.lfs.handler",
    "TokensFunction": "dfd.handlers.tokens.handler",
    "UploadsFunction": "dfd.handlers.uploads.handler",
    "IngestFunction": "dfd.handlers.ingest.handler",
    "PublisherFunction": "dfd.handlers.publisher.handler",
    "ReconcileFunction": "dfd.handlers.reconcile.handler",
    "SnapshotFunction": "dfd.handlers.snapshot.handler",
    "CopyFunction": "dfd.handlers.copy.handler",
    "SegmentFunction": "dfd.handlers.segment.handler",
}
API_FUNCTIONS = sorted(set(ROUTES.values()))

# Actions AWS only authorizes on Resource "*", and where (a pattern of the policy's path): X-Ray's two write
# actions (active tracing) in every function's own role; the log-delivery actions Step Functions logging needs in
# the workflow's role (SAM generates it from the state machine's Policies, and attaches nothing else: no Tracing).
# Nothing else may use "*".
STAR_RESOURCE_ONLY = {
    **{action: r"/\w+FunctionRole/Properties/Policies/PolicyDocument" for action, _ in TRACING},
    **{action: "/(Reconcile|Segment|Copy)StateMachine/Properties/Policies" for action in LOG_DELIVERY},
}
# (logical id, hash key, TTL attribute or None)
TABLES = [
    ("FilesTable", "hash", None),
    ("CountersTable", "counter_id", None),
    ("UploadsTable", "upload_id", "ttl"),
    ("EventsTable", "event_key", "ttl"),
]
RETAINED = ["FilesTable", "CountersTable", "FilesBucket"]


# --------------------------------------------------------------------------------------------------------
# The template, as the local stack reads it (cfn-lint's decoder: short tags in long form)
# --------------------------------------------------------------------------------------------------------
def Tag(name: str, value: Any) -> dict[str, Any]:
    """The long form of a short-tag intrinsic: `!Sub "x"` -> Tag("Sub", "x") == {"Fn::Sub": "x"}."""
    return {name: value} if name in ("Ref", "Condition") else {f"Fn::{name}": value}


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return _template()


def _is_ref(node: Any, target: str) -> bool:
    return _intrinsic(node) == ("Ref", target)


def _is_getatt(node: Any, target: str) -> bool:
    found = _intrinsic(node)
    return found is not None and found[0] == "GetAtt" and _describe(node) == target


def _resources(template: dict[str, Any], type_: str | None = None) -> dict[str, dict[str, Any]]:
    resources: dict[str, dict[str, Any]] = template["Resources"]
    return {k: v for k, v in resources.items() if type_ is None or v.get("Type") == type_}


def _functions(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return _resources(template, "AWS::Serverless::Function")


def _function_props(template: dict[str, Any], logical_id: str) -> dict[str, Any]:
    """Function properties over the Globals (shallow, enough for scalar settings)."""
    globals_ = template.get("Globals", {}).get("Function", {})
    return {**globals_, **template["Resources"][logical_id]["Properties"]}


def _param_value(template: dict[str, Any], node: Any) -> Any:
    """A literal, or the Default of the parameter a !Ref points at."""
    found = _intrinsic(node)
    if found is not None and found[0] == "Ref":
        return template["Parameters"][found[1]]["Default"]
    return node


def _statements(policy_holder: Any) -> list[dict[str, Any]]:
    statements = policy_holder.get("Statement", []) if isinstance(policy_holder, dict) else []
    return _as_list(statements)


def _all_policy_statements(node: Any, where: str = "") -> list[tuple[str, dict[str, Any]]]:
    """Every statement of every policy document anywhere in the template (IAM and resource policies)."""
    found: list[tuple[str, dict[str, Any]]] = []
    if isinstance(node, dict):
        statement = node.get("Statement")
        if isinstance(statement, list | dict) and ("Version" in node or where.endswith("Policies")):
            found.extend((where, s) for s in _as_list(statement) if isinstance(s, dict))
        for key, value in node.items():
            found.extend(_all_policy_statements(value, f"{where}/{key}"))
    elif isinstance(node, list):
        for value in node:
            found.extend(_all_policy_statements(value, where))
    return found


def _tags_used(node: Any) -> set[str]:
    """Names of all intrinsics used inside a node."""
    found = _intrinsic(node)
    names: set[str] = set()
    if found is not None:
        names.add(found[0])
        node = found[1]
    if isinstance(node, dict):
        for value in node.values():
            names |= _tags_used(value)
    elif isinstance(node, list):
        for value in node:
            names |= _tags_used(value)
    return names


# --------------------------------------------------------------------------------------------------------
# cfn-lint
# --------------------------------------------------------------------------------------------------------
def test_cfn_lint_reports_no_errors() -> None:
    from cfnlint.api import ManualArgs, lint_file

    matches = lint_file(TEMPLATE, config=ManualArgs())
    findings = "\n".join(f"{m.rule.id} line {m.linenumber}: {m.message}" for m in matches)
    errors = [m for m in matches if m.rule.id.startswith("E")]
    assert not errors, f"cfn-lint errors in {TEMPLATE.name}:\n{findings}"


def test_template_is_sam_and_plain_yaml_readable(template: dict[str, Any]) -> None:
    assert template["Transform"] == "AWS::Serverless-2016-10-31"
    assert template["AWSTemplateFormatVersion"] == "2010-09-09"


# --------------------------------------------------------------------------------------------------------
# Routes, handlers, function settings
# --------------------------------------------------------------------------------------------------------
def test_routes_map_to_one_function_each(template: dict[str, Any]) -> None:
    routes: dict[tuple[str, str], str] = {}
    for logical_id, resource in _functions(template).items():
        for event in resource["Properties"].get("Events", {}).values():
            if event["Type"] != "HttpApi":
                continue
            props = event["Properties"]
            assert _is_ref(props.get("ApiId"), "HttpApi"), f"{logical_id} route is not on HttpApi"
            route = (props["Method"].upper(), props["Path"])
            assert route not in routes, f"{route} is served twice"
            routes[route] = logical_id
    assert routes == ROUTES
    assert _resources(template)["HttpApi"]["Type"] == "AWS::Serverless::HttpApi"


def test_functions_are_exactly_the_expected_ones(template: dict[str, Any]) -> None:
    assert set(_functions(template)) == set(HANDLERS)


@pytest.mark.parametrize("logical_id", sorted(HANDLERS))
def test_handler_strings(template: dict[str, Any], logical_id: str) -> None:
    assert _function_props(template, logical_id)["Handler"] == HANDLERS[logical_id]


@pytest.mark.parametrize("logical_id", sorted(HANDLERS))
def test_handler_resolves_to_a_module_under_code_uri(template: dict[str, Any], logical_id: str) -> None:
    props = _function_props(template, logical_id)
    module, _, attribute = props["Handler"].rpartition(".")
    source = ROOT / props["CodeUri"] / Path(*module.split(".")).with_suffix(".py")
    assert source.is_file(), f"{logical_id}: {props['Handler']} -> {source.relative_to(ROOT)} does not exist"
    defined: set[str] = set()
    for statement in ast.parse(source.read_text(encoding="utf-8")).body:
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
            defined.add(statement.name)
        elif isinstance(statement, ast.Assign):
            defined |= {t.id for t in statement.targets if isinstance(t, ast.Name)}
        elif isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            defined.add(statement.target.id)
        elif isinstance(statement, ast.ImportFrom):
            defined |= {alias.asname or alias.name for alias in statement.names}
    assert attribute in defined, f"{source.relative_to(ROOT)} defines no top-level {attribute!r}"


@pytest.mark.parametrize("logical_id", sorted(HANDLERS))
def test_function_runtime_settings(template: dict[str, Any], logical_id: str) -> None:
    props = _function_props(template, logical_id)
    assert props["CodeUri"] == "functions/"
    assert props["Runtime"] == "python3.12"
    assert props["Architectures"] == ["arm64"]
    assert _param_value(template, props["Tracing"]) == "PassThrough"  # Active: a trace per invocation at a low rate
    if logical_id in ("IngestFunction", "SegmentFunction"):
        # Lambda's maximum: the largest inline object, or one segment, is hashed in one invocation
        assert props["Timeout"] == 900
        assert _is_ref(props["MemorySize"], "IngestMemorySize")
        assert _param_value(template, props["MemorySize"]) == 1769  # one full vCPU: hashing is CPU bound
    elif logical_id == "PublisherFunction":
        assert props["Timeout"] == 60  # a batch of 100 records, PutEvents retried per entry
        assert props["MemorySize"] == 256
    elif logical_id == "ReconcileFunction":  # a page of a phase: a few hundred requests, 16 at a time
        assert props["Timeout"] == 300
        assert props["MemorySize"] == 512
    elif logical_id == "CopyFunction":  # a step's part copies wait on S3 (server-side) until 30 s before the end
        assert props["Timeout"] == 900
        assert props["MemorySize"] == 512
    elif logical_id == "LfsFunction":  # a verify may ingest its object (the HTTP API's 30 s) at the LFS's own size
        assert props["Timeout"] == 29
        assert _is_ref(props["MemorySize"], "LfsMemorySize")
        assert _param_value(template, props["MemorySize"]) == 512
    else:
        # complete's wait for S3 (10,000 parts): under the HTTP API's 30 s
        assert props["Timeout"] == (29 if logical_id == "UploadPartsFunction" else 10)
        assert props["MemorySize"] == 256


def test_every_function_gets_the_settings_environment(template: dict[str, Any]) -> None:
    env = template["Globals"]["Function"]["Environment"]["Variables"]
    expected_refs = {
        "DDB_TABLE": "FilesTable",
        "DDB_COUNTERS_TABLE": "CountersTable",
        "UPLOADS_TABLE": "UploadsTable",
        "EVENTS_TABLE": "EventsTable",
        "TENANT_FILES_TABLE": "TenantFilesTable",
        "S3_BUCKET": "FilesBucket",
        "UPLOAD_PREFIX": "UploadPrefix",
        "COUNTER_SHARDS": "CounterShards",
        "PENDING_SHARDS": "PendingShards",
        "MAX_UPLOAD_BYTES": "MaxUploadBytes",
        "POWERTOOLS_METRICS_NAMESPACE": "MetricsNamespace",
        "POWERTOOLS_LOG_LEVEL": "LogLevel",
    }
    for name, target in expected_refs.items():
        assert _is_ref(env.get(name), target), f"{name} should be !Ref {target}, got {env.get(name)!r}"
    assert env["POWERTOOLS_SERVICE_NAME"] == "dfd"
    assert _intrinsic(env["ALLOWED_ORIGINS"]) == ("Join", [",", Tag("Ref", "AllowedOrigins")])
    assert "TOKEN_SECRET" not in env  # pagination tokens are not signed (dfd.queries.tokens says why)
    for logical_id in HANDLERS:
        local = template["Resources"][logical_id]["Properties"].get("Environment", {}).get("Variables", {})
        assert not set(local) & set(env), f"{logical_id} overrides global variables {set(local) & set(env)}"


def test_parameters_and_defaults(template: dict[str, Any]) -> None:
    params = template["Parameters"]
    defaults = {
        "AllowedOrigins": "*",
        "UploadPrefix": "uploads/",
        "CounterShards": 100,
        "PendingShards": 4,
        "MaxUploadBytes": 10_000 * 5 * 2**30,  # S3's largest object (docs/performance.md, "The largest object")
        "LogLevel": "INFO",
        "MetricsNamespace": "dfd",
        "IngestMemorySize": 1769,
        "IngestMaxConcurrency": 100,
    }
    assert {name: params[name]["Default"] for name in defaults} == defaults
    assert params["AllowedOrigins"]["Type"] == "CommaDelimitedList"
    assert "INFO" in params["LogLevel"]["AllowedValues"]
    # Stats reads every shard in ONE BatchGetItem (100 keys at most).
    assert params["CounterShards"]["MaxValue"] <= 100


# --------------------------------------------------------------------------------------------------------
# IAM: least privilege
# --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("logical_id", sorted(PERMISSIONS))
def test_function_policy_grants_exactly_what_it_needs(template: dict[str, Any], logical_id: str) -> None:
    granted: set[tuple[str, str]] = set()
    for policy in function_policies(template, logical_id):
        assert isinstance(policy, dict) and set(policy) <= {"Version", "Statement"}, (
            f"{logical_id}: only inline Statement policies (no managed policies or SAM templates): {policy!r}"
        )
        for statement in _statements(policy):
            assert statement["Effect"] == "Allow"
            assert "NotAction" not in statement and "NotResource" not in statement
            for action in _as_list(statement["Action"]):
                for resource in _as_list(statement["Resource"]):
                    granted.add((action, _describe(resource)))
    assert granted == PERMISSIONS[logical_id], (
        f"{logical_id}: extra {sorted(granted - PERMISSIONS[logical_id])}, "
        f"missing {sorted(PERMISSIONS[logical_id] - granted)}"
    )


def test_no_allow_statement_uses_wildcards(template: dict[str, Any]) -> None:
    statements = _all_policy_statements(template["Resources"])
    assert statements, "no policy statements found: the walker is broken"
    for where, statement in statements:
        if statement.get("Effect") != "Allow":
            continue  # Deny with a wildcard (e.g. deny non-TLS s3:*) only narrows access
        actions = [a for a in _as_list(statement.get("Action", [])) if isinstance(a, str)]
        assert "NotAction" not in statement, f"{where}: NotAction in an Allow statement"
        for action in actions:
            assert "*" not in action, f"{where}: Allow of wildcard action {action!r}"
        if "*" in _as_list(statement.get("Resource", [])):
            for action in actions:
                assert re.fullmatch(STAR_RESOURCE_ONLY.get(action, "-"), where), f"{where}: Resource '*' for {action}"


# --------------------------------------------------------------------------------------------------------
# Ingest: queue, DLQ, event source
# --------------------------------------------------------------------------------------------------------
def _sqs_events(template: dict[str, Any]) -> list[dict[str, Any]]:
    events = template["Resources"]["IngestFunction"]["Properties"]["Events"].values()
    return [e["Properties"] for e in events if e["Type"] == "SQS"]


def test_ingest_event_source(template: dict[str, Any]) -> None:
    (event,) = _sqs_events(template)
    assert _is_getatt(event["Queue"], "IngestQueue.Arn")
    assert event["BatchSize"] == 10
    assert event["MaximumBatchingWindowInSeconds"] == 1
    assert "ReportBatchItemFailures" in event["FunctionResponseTypes"]
    assert _param_value(template, event["ScalingConfig"]["MaximumConcurrency"]) == 100


def test_queue_visibility_covers_six_ingest_timeouts(template: dict[str, Any]) -> None:
    timeout = _param_value(template, _function_props(template, "IngestFunction")["Timeout"])
    queue = _resources(template)["IngestQueue"]
    assert queue["Type"] == "AWS::SQS::Queue"
    visibility = queue["Properties"]["VisibilityTimeout"]
    assert visibility >= 6 * timeout, f"VisibilityTimeout {visibility} < 6 x IngestFunction Timeout {timeout}"


def test_queues_redrive_and_encryption(template: dict[str, Any]) -> None:
    queue = template["Resources"]["IngestQueue"]["Properties"]
    dlq = template["Resources"]["IngestDLQ"]["Properties"]
    assert queue["RedrivePolicy"]["maxReceiveCount"] == 5
    assert _is_getatt(queue["RedrivePolicy"]["deadLetterTargetArn"], "IngestDLQ.Arn")
    assert dlq["MessageRetentionPeriod"] == 14 * 24 * 3600
    # SSE-SQS unless a customer-managed key is given (tests/unit/test_template_posture.py checks the KMS side)
    sse_sqs = Tag("If", ["HasKmsKey", Tag("Ref", "AWS::NoValue"), True])
    assert queue["SqsManagedSseEnabled"] == sse_sqs and dlq["SqsManagedSseEnabled"] == sse_sqs


def test_queue_policy_lets_only_this_bucket_send(template: dict[str, Any]) -> None:
    policy = template["Resources"]["IngestQueuePolicy"]
    assert policy["Type"] == "AWS::SQS::QueuePolicy"
    assert [_is_ref(q, "IngestQueue") for q in policy["Properties"]["Queues"]] == [True]
    statements = _statements(policy["Properties"]["PolicyDocument"])
    (allow,) = [s for s in statements if s["Effect"] == "Allow"]
    assert allow["Principal"] == {"Service": "s3.amazonaws.com"}
    assert _as_list(allow["Action"]) == ["sqs:SendMessage"]
    assert _is_ref(allow["Condition"]["StringEquals"]["aws:SourceAccount"], "AWS::AccountId")
    source_arn = _intrinsic(allow["Condition"]["ArnEquals"]["aws:SourceArn"])
    bucket_name = _intrinsic(template["Resources"]["FilesBucket"]["Properties"]["BucketName"])
    assert source_arn is not None and bucket_name is not None
    assert source_arn[0] == bucket_name[0] == "Sub"
    # Same name expression as the bucket (the bucket cannot be referenced: it depends on this policy).
    assert source_arn[1] == ["arn:${AWS::Partition}:s3:::" + bucket_name[1][0], bucket_name[1][1]], (
        f"aws:SourceArn {source_arn[1]!r} does not match BucketName {bucket_name[1]!r}"
    )
    assert any(
        s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for s in statements
    )


# --------------------------------------------------------------------------------------------------------
# Storage
# --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("logical_id", "hash_key", "ttl"), TABLES)
def test_tables(template: dict[str, Any], logical_id: str, hash_key: str, ttl: str | None) -> None:
    table = template["Resources"][logical_id]
    assert table["Type"] == "AWS::DynamoDB::Table"
    props = table["Properties"]
    assert "TableName" not in props, "let CloudFormation name the table"
    assert _param_value(template, props["BillingMode"]) == "PAY_PER_REQUEST"  # TableBillingMode
    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert props["SSESpecification"]["SSEEnabled"] is True
    assert props["KeySchema"] == [{"AttributeName": hash_key, "KeyType": "HASH"}]
    assert {"AttributeName": hash_key, "AttributeType": "S"} in props["AttributeDefinitions"]
    if ttl is None:
        assert "TimeToLiveSpecification" not in props
    else:
        assert props["TimeToLiveSpecification"] == {"AttributeName": ttl, "Enabled": True}


def test_uploads_pending_index(template: dict[str, Any]) -> None:
    props = template["Resources"]["UploadsTable"]["Properties"]
    index, owners = props["GlobalSecondaryIndexes"][1], props["GlobalSecondaryIndexes"][0]
    assert owners["IndexName"] == "OwnerIndex"  # GET /uploads
    assert owners["KeySchema"] == [
        {"AttributeName": "owner", "KeyType": "HASH"},
        {"AttributeName": "created_at", "KeyType": "RANGE"},
    ]
    assert index["IndexName"] == "PendingIndex"
    assert index["KeySchema"] == [
        {"AttributeName": "pending_shard", "KeyType": "HASH"},
        {"AttributeName": "reconcile_after", "KeyType": "RANGE"},
    ]
    # each index carries the upload record's fields (its readers parse UploadRecords): more than the 20
    # NonKeyAttributes an INCLUDE projection may name, so the whole item
    assert len({spec.name for spec in dataclasses.fields(UploadRecord)}) > 20
    for gsi in (owners, index):
        assert gsi["Projection"] == {"ProjectionType": "ALL"}
    attributes = {a["AttributeName"]: a["AttributeType"] for a in props["AttributeDefinitions"]}
    assert attributes == {
        "upload_id": "S",
        "pending_shard": "S",
        "reconcile_after": "S",
        "owner": "S",
        "created_at": "S",
    }


@pytest.mark.parametrize("logical_id", RETAINED)
def test_data_survives_the_stack(template: dict[str, Any], logical_id: str) -> None:
    resource = template["Resources"][logical_id]
    assert resource["DeletionPolicy"] == "Retain"
    assert resource["UpdateReplacePolicy"] == "Retain"


def test_bucket(template: dict[str, Any]) -> None:
    bucket = template["Resources"]["FilesBucket"]
    assert bucket["Type"] == "AWS::S3::Bucket"
    assert "IngestQueuePolicy" in _as_list(bucket["DependsOn"])
    props = bucket["Properties"]
    assert set(props["PublicAccessBlockConfiguration"].values()) == {True}
    assert len(props["PublicAccessBlockConfiguration"]) == 4
    assert props["OwnershipControls"] == {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}
    # SSE-S3 unless a customer-managed key is given (tests/unit/test_template_posture.py checks the KMS side)
    (encryption,) = props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    (condition, _, default) = encryption["Fn::If"]
    assert condition == "HasKmsKey"
    assert default == {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
    rule, drops, reports = props["LifecycleConfiguration"]["Rules"]
    assert rule["Status"] == "Enabled"
    assert rule["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": {"Ref": "AbortIncompleteMultipartDays"}}
    # what stays in the drop zone expires, well after a drop-zone upload may expire and the daily sweeps after it
    assert drops == {"Id": "ExpireDropZone", "Status": "Enabled", "Prefix": "s3/", "ExpirationInDays": 7}
    assert drops["ExpirationInDays"] * 86400 >= dropzone.PENDING_SECONDS + 2 * 86400
    # the inventory reports (the reconcile reads the newest) expire, outside the upload prefix
    assert reports == {
        "Id": "ExpireInventoryReports", "Status": "Enabled", "Prefix": "inventory/", "ExpirationInDays": 3
    }  # fmt: skip
    (inventory,) = props["InventoryConfigurations"]
    assert inventory["ScheduleFrequency"] == "Daily" and inventory["Destination"]["Format"] == "CSV"
    assert _is_ref(inventory["Prefix"], "UploadPrefix") and inventory["OptionalFields"] == ["ETag"]
    assert inventory["Destination"]["Prefix"] == "inventory" and inventory["IncludedObjectVersions"] == "Current"

    (cors,) = props["CorsConfiguration"]["CorsRules"]
    assert set(cors["AllowedMethods"]) == {"PUT", "GET", "HEAD"}
    assert _is_ref(cors["AllowedOrigins"], "AllowedOrigins")
    assert cors["AllowedHeaders"] == ["*"]
    assert set(cors["ExposedHeaders"]) == {"ETag", "x-amz-checksum-sha256"}
    assert cors["MaxAge"] == 3000

    # the upload prefix, and the drop zone (s3/: objects written with prefix-scoped credentials)
    notification, drops = props["NotificationConfiguration"]["QueueConfigurations"]
    for config in (notification, drops):
        assert config["Event"] == "s3:ObjectCreated:*"
        assert _is_getatt(config["Queue"], "IngestQueue.Arn")
    (key_rule,) = notification["Filter"]["S3Key"]["Rules"]
    assert key_rule["Name"] == "prefix"
    assert _is_ref(key_rule["Value"], "UploadPrefix")
    assert drops["Filter"]["S3Key"]["Rules"] == [{"Name": "prefix", "Value": "s3/"}]


def test_bucket_name_is_computed_lowercase_and_unique_per_stack(template: dict[str, Any]) -> None:
    found = _intrinsic(template["Resources"]["FilesBucket"]["Properties"]["BucketName"])
    assert found is not None and found[0] == "Sub"
    pattern, variables = found[1]
    assert "${AWS::AccountId}" in pattern and "${AWS::Region}" in pattern
    assert variables and all("AWS::StackId" in repr(v) for v in variables.values()), "no per-stack fragment"
    # Worst case: a 14-character region and a stack-id fragment of up to 8 lowercase hex digits.
    sample = pattern.replace("${AWS::AccountId}", "123456789012").replace("${AWS::Region}", "ap-southeast-2")
    for name in variables:
        sample = sample.replace("${" + name + "}", "0123abcd")
    assert re.fullmatch(r"[a-z0-9][a-z0-9-]{1,61}[a-z0-9]", sample), f"invalid bucket name {sample!r}"


def test_bucket_policy_is_tls_only_and_forbids_overwrites(template: dict[str, Any]) -> None:
    (policy,) = _resources(template, "AWS::S3::BucketPolicy").values()
    assert _is_ref(policy["Properties"]["Bucket"], "FilesBucket")
    # the statements after these three deny S3CredentialsRole's sessions (tests/unit/test_s3_credentials_template.py)
    statement, no_overwrites, inventory, *_ = _statements(policy["Properties"]["PolicyDocument"])
    # S3 Inventory (the service, for this bucket and account) may write its reports under inventory/ only
    assert inventory["Effect"] == "Allow" and inventory["Principal"] == {"Service": "s3.amazonaws.com"}
    assert inventory["Action"] == "s3:PutObject"
    assert _describe(inventory["Resource"]) == "${FilesBucket.Arn}/inventory/*"
    assert _describe(inventory["Condition"]["ArnLike"]["aws:SourceArn"]) == "FilesBucket.Arn"
    assert no_overwrites["Effect"] == "Deny" and no_overwrites["Action"] == "s3:PutObject"
    assert no_overwrites["Condition"] == {
        "Null": {"s3:if-none-match": "true"},
        "Bool": {"s3:ObjectCreationOperation": "true"},
    }
    assert _describe(no_overwrites["Resource"]) == "${FilesBucket.Arn}/${UploadPrefix}*"
    assert statement["Effect"] == "Deny"
    assert statement["Principal"] == "*"
    assert statement["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert {_describe(r) for r in _as_list(statement["Resource"])} == {"FilesBucket.Arn", "${FilesBucket.Arn}/*"}


# --------------------------------------------------------------------------------------------------------
# HTTP API, outputs, and what the local stack reads
# --------------------------------------------------------------------------------------------------------
def test_http_api_cors(template: dict[str, Any]) -> None:
    cors = template["Resources"]["HttpApi"]["Properties"]["CorsConfiguration"]
    assert _is_ref(cors["AllowOrigins"], "AllowedOrigins")
    assert cors["AllowMethods"] == ["GET", "POST", "DELETE", "OPTIONS"]
    assert [h.lower() for h in cors["AllowHeaders"]] == ["content-type", "authorization"]
    assert cors["MaxAge"] == 600


def test_outputs(template: dict[str, Any]) -> None:
    expected = {
        "ApiUrl",
        "BucketName",
        "FilesTableName",
        "CountersTableName",
        "UploadsTableName",
        "EventsTableName",
        "IngestQueueUrl",
        "IngestDLQUrl",
    }
    assert expected <= set(template["Outputs"])
    outputs = {name: template["Outputs"][name]["Value"] for name in expected - {"ApiUrl"}}
    refs = {name: _intrinsic(value) for name, value in outputs.items()}
    assert refs == {
        "BucketName": ("Ref", "FilesBucket"),
        "FilesTableName": ("Ref", "FilesTable"),
        "CountersTableName": ("Ref", "CountersTable"),
        "UploadsTableName": ("Ref", "UploadsTable"),
        "EventsTableName": ("Ref", "EventsTable"),
        "IngestQueueUrl": ("Ref", "IngestQueue"),
        "IngestDLQUrl": ("Ref", "IngestDLQ"),
    }


def test_local_stack_sections_are_literal(template: dict[str, Any]) -> None:
    """What the local stack reads must not need intrinsics beyond !Ref, !Sub, !GetAtt and !If (TableBillingMode's
    ProvisionedThroughput: dfdlocal's resolver evaluates the condition)."""
    resources = template["Resources"]
    sections: dict[str, Any] = {"HttpApi.CorsConfiguration": resources["HttpApi"]["Properties"]["CorsConfiguration"]}
    for logical_id, _, _ in TABLES:
        props = resources[logical_id]["Properties"]
        for key in ("KeySchema", "AttributeDefinitions", "GlobalSecondaryIndexes", "TimeToLiveSpecification"):
            sections[f"{logical_id}.{key}"] = props.get(key)
    bucket = resources["FilesBucket"]["Properties"]
    sections["FilesBucket.CorsConfiguration"] = bucket["CorsConfiguration"]
    sections["FilesBucket.NotificationConfiguration"] = bucket["NotificationConfiguration"]
    sections["IngestQueue.RedrivePolicy"] = resources["IngestQueue"]["Properties"]["RedrivePolicy"]
    for logical_id in HANDLERS:
        sections[f"{logical_id}.Events"] = resources[logical_id]["Properties"].get("Events")
    for name, section in sections.items():
        assert _intrinsic(section) is None, f"{name} is wrapped in an intrinsic"
        assert _tags_used(section) <= {"Ref", "Sub", "GetAtt", "If"}, f"{name} uses {_tags_used(section)}"


def test_index_projections_within_dynamodbs_limits(template: dict[str, Any]) -> None:
    """DynamoDB refuses an INCLUDE projection naming more than 20 NonKeyAttributes, or more than 100 across a
    table's indexes (Projection, DynamoDB API reference); DynamoDB Local and moto accept them."""
    tables = [r for r in template["Resources"].values() if r["Type"] == "AWS::DynamoDB::Table"]
    assert tables
    for table in tables:
        props = table["Properties"]
        indexes = props.get("GlobalSecondaryIndexes", []) + props.get("LocalSecondaryIndexes", [])
        named = [len(index["Projection"].get("NonKeyAttributes", [])) for index in indexes]
        assert all(n <= 20 for n in named) and sum(named) <= 100, (props.get("KeySchema"), named)
        for index in indexes:
            assert ("NonKeyAttributes" in index["Projection"]) == (index["Projection"]["ProjectionType"] == "INCLUDE")


# what each role may touch of the Events table's hashing items (dfd.adapters.dynamo.hashing): by statement id, the
# leading keys its DynamoDB actions are limited to
HASHING_KEYS = {
    "IngestFunction": {"HashingStates": ["hashing#*"]},
    "SegmentFunction": {"HashingStates": ["hashing#*", "hashing-key#*"]},
    "MetadataFunction": {"ReadHashingProgress": ["hashing-key#*"]},
    "ReconcileFunction": {"ReadHashingProgress": ["hashing-key#*"]},
}


@pytest.mark.parametrize("logical_id", sorted(HASHING_KEYS))
def test_the_hashing_items_are_reached_only_by_their_leading_keys(template: dict[str, Any], logical_id: str) -> None:
    statements = {
        s.get("Sid"): s for policy in function_policies(template, logical_id) for s in _as_list(policy["Statement"])
    }
    for sid, keys in HASHING_KEYS[logical_id].items():
        assert statements[sid]["Condition"] == {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": keys}}, sid


def test_the_segment_workflow_is_wired_to_the_ingest_and_its_readers(template: dict[str, Any]) -> None:
    machine = template["Resources"]["SegmentStateMachine"]["Properties"]
    assert machine["Type"] == "STANDARD" and machine["DefinitionUri"] == "statemachine/segments.asl.json"
    assert _describe(machine["DefinitionSubstitutions"]["SegmentFunctionArn"]) == "SegmentFunction.Arn"
    for logical_id in ("IngestFunction", "MetadataFunction", "ReconcileFunction"):
        variables = _function_props(template, logical_id)["Environment"]["Variables"]
        assert _describe(variables["SEGMENT_STATE_MACHINE_ARN"]) == "Ref(SegmentStateMachine)", logical_id
        assert _is_ref(variables["SEGMENT_THRESHOLD_BYTES"], "SegmentThresholdBytes"), logical_id
    assert _param_value(template, {"Ref": "SegmentThresholdBytes"}) == HANDOFF_THRESHOLD
    assert _param_value(template, {"Ref": "SegmentBytes"}) == SEGMENT_BYTES
    for logical_id in ("IngestFunction", "SegmentFunction"):
        variables = _function_props(template, logical_id)["Environment"]["Variables"]
        assert _is_ref(variables["SEGMENT_BYTES"], "SegmentBytes"), logical_id
