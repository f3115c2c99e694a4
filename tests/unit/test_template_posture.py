"""Security posture of template.yaml: log groups with retention, API access logs and
throttling, the optional customer-managed KMS key, the optional bucket access logs, the prefix-limited listing,
the ingest's reserved concurrency, and the checkov skips (each with its reason).

The template is loaded with cfn-lint's decoder (intrinsics in long form: ``{"Fn::If": [...]}``); the conditional
parts are also evaluated both ways with the local stack's resolver, which is what ``make run`` creates.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from cfnlint.decode import cfn_yaml

from dfdlocal.template import read_model

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"
KEY_ARN = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
FUNCTIONS = [
    "UploadFunction",
    "UploadPartsFunction",
    "UploadsFunction",
    "MetadataFunction",
    "MeFunction",
    "DownloadFunction",
    "AdminStatsFunction",
    "AdminHashesFunction",
    "IngestFunction",
    "PublisherFunction",
    "LfsFunction",
    "TokensFunction",
    "ReconcileFunction",
    "SnapshotFunction",
    "CopyFunction",
    "SegmentFunction",
]
TABLES = ["FilesTable", "CountersTable", "UploadsTable", "EventsTable", "StatsHistoryTable"]
QUEUES = ["IngestQueue", "IngestDLQ", "PublisherDLQ", "EventsExampleQueue", "EventsExampleDLQ", "EventsWebhookDLQ"]
NO_VALUE = {"Ref": "AWS::NoValue"}
KEY_OR_NOTHING = {"Fn::If": ["HasKmsKey", {"Ref": "KmsKeyArn"}, NO_VALUE]}


@cache
def _load() -> dict[str, Any]:
    template = cfn_yaml.load(str(TEMPLATE))
    assert isinstance(template, dict)
    return template


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return _load()


def _resources(template: dict[str, Any], type_: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v.get("Type") == type_}


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _model(**overrides: str) -> Any:
    return read_model(TEMPLATE, "http://127.0.0.1:4566", overrides)


# --------------------------------------------------------------------------------------------------------
# Log groups
# --------------------------------------------------------------------------------------------------------
def test_every_log_group_has_the_retention_parameter_and_the_optional_key(template: dict[str, Any]) -> None:
    groups = _resources(template, "AWS::Logs::LogGroup")
    assert len(groups) == len(FUNCTIONS) + 4  # + API access log + the reconcile, segment and copy workflows
    for logical_id, group in groups.items():
        props = group["Properties"]
        assert props["RetentionInDays"] == {"Ref": "LogRetentionDays"}, logical_id
        assert props["KmsKeyId"] == KEY_OR_NOTHING, logical_id
    assert template["Parameters"]["LogRetentionDays"]["Default"] == 30


@pytest.mark.parametrize("logical_id", FUNCTIONS)
def test_every_function_logs_to_its_own_group(template: dict[str, Any], logical_id: str) -> None:
    props = template["Resources"][logical_id]["Properties"]
    target = props["LoggingConfig"]["LogGroup"]
    assert target == {"Ref": f"{logical_id}LogGroup"}
    group = template["Resources"][f"{logical_id}LogGroup"]
    assert group["Type"] == "AWS::Logs::LogGroup"
    assert group["Properties"]["LogGroupName"] == {"Fn::Sub": "/aws/lambda/${AWS::StackName}/" + logical_id}


def test_functions_encrypt_their_environment_with_the_key_when_given(template: dict[str, Any]) -> None:
    assert template["Globals"]["Function"]["KmsKeyArn"] == KEY_OR_NOTHING


# --------------------------------------------------------------------------------------------------------
# HTTP API: access log, throttling
# --------------------------------------------------------------------------------------------------------
def test_http_api_writes_json_access_logs(template: dict[str, Any]) -> None:
    settings = template["Resources"]["HttpApi"]["Properties"]["AccessLogSettings"]
    assert settings["DestinationArn"] == {"Fn::GetAtt": ["HttpApiAccessLogGroup", "Arn"]}
    line = json.loads(settings["Format"])  # one JSON object per request
    assert {"requestId", "ip", "routeKey", "status", "responseLatency", "integrationError"} <= set(line)
    assert all(re.fullmatch(r"\$context\.[A-Za-z.]+", value) for value in line.values()), line


def test_http_api_default_route_throttling_is_wired_to_parameters(template: dict[str, Any]) -> None:
    route = template["Resources"]["HttpApi"]["Properties"]["DefaultRouteSettings"]
    assert route == {
        "ThrottlingRateLimit": {"Ref": "ApiThrottlingRateLimit"},
        "ThrottlingBurstLimit": {"Ref": "ApiThrottlingBurstLimit"},
    }
    params = template["Parameters"]
    assert params["ApiThrottlingRateLimit"]["Default"] == 100
    assert params["ApiThrottlingBurstLimit"]["Default"] == 200
    assert params["ApiThrottlingRateLimit"]["MinValue"] >= 1 and params["ApiThrottlingBurstLimit"]["MinValue"] >= 1


# --------------------------------------------------------------------------------------------------------
# Ingest reserved concurrency
# --------------------------------------------------------------------------------------------------------
def test_ingest_reserved_concurrency_is_wired_and_covers_the_event_source(template: dict[str, Any]) -> None:
    props = template["Resources"]["IngestFunction"]["Properties"]
    assert props["ReservedConcurrentExecutions"] == {
        "Fn::If": ["ReservesIngestConcurrency", {"Ref": "IngestReservedConcurrency"}, NO_VALUE]
    }
    # 0 = no reservation (Lambda would read 0 as "never run")
    assert template["Conditions"]["ReservesIngestConcurrency"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "IngestReservedConcurrency"}, 0]}]
    }
    reserved, maximum = (template["Parameters"][name] for name in ("IngestReservedConcurrency", "IngestMaxConcurrency"))
    # not reserved by default: Lambda refuses a reservation leaving fewer than 100 unreserved, and a new account's
    # quota is often 10, so any default reservation fails the first deploy there
    assert reserved["Default"] == 0
    # the SQS event source may run IngestMaxConcurrency at once: a reservation must be able to cover it
    assert reserved["MaxValue"] >= maximum["MaxValue"]
    assert "IngestMaxConcurrency" in reserved["Description"]
    # the event source's own cap keeps protecting DynamoDB, reserved or not
    scaling = props["Events"]["IngestQueueEvent"]["Properties"]["ScalingConfig"]
    assert scaling == {"MaximumConcurrency": {"Ref": "IngestMaxConcurrency"}}


# --------------------------------------------------------------------------------------------------------
# Encryption: the optional customer-managed key
# --------------------------------------------------------------------------------------------------------
def test_kms_key_parameter_is_optional(template: dict[str, Any]) -> None:
    param = template["Parameters"]["KmsKeyArn"]
    assert param["Default"] == ""
    assert re.fullmatch(param["AllowedPattern"], "")
    assert re.fullmatch(param["AllowedPattern"], KEY_ARN)
    assert not re.fullmatch(param["AllowedPattern"], "alias/aws/s3")
    assert template["Conditions"]["HasKmsKey"] == {"Fn::Not": [{"Fn::Equals": [{"Ref": "KmsKeyArn"}, ""]}]}


@pytest.mark.parametrize("logical_id", QUEUES)
def test_queues_state_their_encryption(template: dict[str, Any], logical_id: str) -> None:
    props = template["Resources"][logical_id]["Properties"]
    assert props["SqsManagedSseEnabled"] == {"Fn::If": ["HasKmsKey", NO_VALUE, True]}
    assert props["KmsMasterKeyId"] == KEY_OR_NOTHING


def test_every_queue_has_a_tls_only_policy_of_its_own_condition(template: dict[str, Any]) -> None:
    queues = _resources(template, "AWS::SQS::Queue")
    assert set(queues) == set(QUEUES)
    covered: dict[str, str | None] = {}
    for logical_id, policy in _resources(template, "AWS::SQS::QueuePolicy").items():
        statements = policy["Properties"]["PolicyDocument"]["Statement"]
        deny = [
            s
            for s in statements
            if s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        ]
        assert deny and deny[0]["Principal"] == "*" and deny[0]["Action"] == "sqs:*", logical_id
        for queue in policy["Properties"]["Queues"]:
            covered[queue["Ref"]] = policy.get("Condition")
    assert covered == {name: queue.get("Condition") for name, queue in queues.items()}


@pytest.mark.parametrize("logical_id", TABLES)
def test_tables_use_the_key_when_given(template: dict[str, Any], logical_id: str) -> None:
    sse = template["Resources"][logical_id]["Properties"]["SSESpecification"]
    assert sse == {
        "SSEEnabled": True,
        "SSEType": {"Fn::If": ["HasKmsKey", "KMS", NO_VALUE]},
        "KMSMasterKeyId": KEY_OR_NOTHING,
    }


def test_without_a_key_everything_uses_aws_managed_encryption() -> None:
    model = _model()
    for queue in model.queues.values():
        assert queue.properties["SqsManagedSseEnabled"] is True
        assert "KmsMasterKeyId" not in queue.properties
    for table in model.tables.values():
        assert table.properties["SSESpecification"] == {"SSEEnabled": True}
    bucket = model.buckets["FilesBucket"].properties
    assert bucket["BucketEncryption"] == {
        "ServerSideEncryptionConfiguration": [{"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
    }
    assert "LoggingConfiguration" not in bucket
    assert "KmsKeyUsePolicy" not in model.ignored  # a resource whose condition is false is not in the stack


def test_with_a_key_the_bucket_tables_and_queues_use_it() -> None:
    model = _model(KmsKeyArn=KEY_ARN)
    for queue in model.queues.values():
        assert queue.properties["KmsMasterKeyId"] == KEY_ARN
        assert "SqsManagedSseEnabled" not in queue.properties  # SQS refuses both
    for table in model.tables.values():
        assert table.properties["SSESpecification"] == {"SSEEnabled": True, "SSEType": "KMS", "KMSMasterKeyId": KEY_ARN}
    (rule,) = model.buckets["FilesBucket"].properties["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule == {
        "ServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": KEY_ARN},
        "BucketKeyEnabled": True,
    }
    assert model.ignored["KmsKeyUsePolicy"] == "AWS::IAM::Policy"


def test_with_a_key_every_role_may_use_it_only_through_the_stack_services(template: dict[str, Any]) -> None:
    policy = template["Resources"]["KmsKeyUsePolicy"]
    assert policy["Type"] == "AWS::IAM::Policy"
    assert policy["Condition"] == "HasKmsKey"
    roles = {role["Ref"] for role in policy["Properties"]["Roles"]}
    # and the prefix-scoped S3 credentials' role: S3 encrypts their writes with the key
    machines = ["ReconcileStateMachine", "SegmentStateMachine", "CopyStateMachine"]
    assert roles == {f"{name}Role" for name in [*FUNCTIONS, *machines, "S3Credentials"]}
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Effect"] == "Allow"
    assert set(statement["Action"]) == {"kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"}
    assert statement["Resource"] == {"Ref": "KmsKeyArn"}
    services = statement["Condition"]["StringEquals"]["kms:ViaService"]
    assert [s["Fn::Sub"].split(".")[0] for s in services] == ["s3", "dynamodb", "sqs"]


# --------------------------------------------------------------------------------------------------------
# Bucket access logs, listing
# --------------------------------------------------------------------------------------------------------
def test_bucket_access_logging_is_optional(template: dict[str, Any]) -> None:
    assert template["Parameters"]["AccessLogBucketName"]["Default"] == ""
    logging = _model(AccessLogBucketName="my-access-logs").buckets["FilesBucket"].properties["LoggingConfiguration"]
    assert logging == {"DestinationBucketName": "my-access-logs", "LogFilePrefix": "dfd-local/"}


def test_every_listing_grant_is_limited_to_the_upload_prefix(template: dict[str, Any]) -> None:
    found: list[str] = []
    for logical_id, resource in template["Resources"].items():
        for policy in _as_list(resource.get("Properties", {}).get("Policies", [])):
            if isinstance(policy, dict) and "PolicyDocument" in policy:  # an AWS::IAM::Role's
                policy = policy["PolicyDocument"]
            for statement in _as_list(policy.get("Statement", []) if isinstance(policy, dict) else []):
                if "s3:ListBucket" not in _as_list(statement["Action"]):
                    continue
                found.append(logical_id)
                ((operator, keys),) = statement["Condition"].items()
                assert operator in ("StringLike", "StringLikeIfExists"), logical_id
                if statement.get("Sid") == "ListInventoryReports":  # the reconcile's: the inventory reports only
                    assert logical_id == "ReconcileFunctionRole" and keys == {"s3:prefix": "inventory/*"}
                    continue
                if logical_id == "S3CredentialsRole":  # the callers' prefixes (each session narrows it to its own)
                    assert keys == {"s3:prefix": "s3/*"}
                    continue
                if logical_id in ("IngestFunctionRole", "ReconcileFunctionRole", "CopyFunctionRole"):  # and s3/
                    assert keys == {"s3:prefix": [{"Fn::Sub": "${UploadPrefix}*"}, "s3/*"]}, logical_id
                    continue
                assert keys == {"s3:prefix": {"Fn::Sub": "${UploadPrefix}*"}}, logical_id
    # the reconcile's second: the inventory's
    roles = ("Copy", "Ingest", "Lfs", "Reconcile", "Reconcile", "Segment", "UploadParts")
    assert sorted(found) == sorted([*(f"{name}FunctionRole" for name in roles), "S3CredentialsRole"])


# --------------------------------------------------------------------------------------------------------
# checkov skips
# --------------------------------------------------------------------------------------------------------
def test_every_checkov_skip_names_a_check_and_gives_a_one_line_reason(template: dict[str, Any]) -> None:
    skips = [
        (logical_id, skip)
        for logical_id, resource in template["Resources"].items()
        for skip in (resource.get("Metadata") or {}).get("checkov", {}).get("skip", [])
    ]
    assert skips, "no checkov skip found: the walker is broken"
    for logical_id, skip in skips:
        assert set(skip) == {"id", "comment"}, (logical_id, skip)
        assert re.fullmatch(r"CKV_AWS_[0-9]+", skip["id"]), (logical_id, skip)
        comment = skip["comment"]
        assert isinstance(comment, str) and 20 <= len(comment) <= 160 and "\n" not in comment, (logical_id, skip)
    # encryption, logging and the ingest's reservation are fixed, never skipped
    never = {"CKV_AWS_27", "CKV_AWS_119", "CKV_AWS_18", "CKV_AWS_95", "CKV_AWS_158", "CKV_AWS_173", "CKV_AWS_19"}
    assert not [s for _, s in skips if s["id"] in never]
    assert "CKV_AWS_115" not in {s["id"] for lid, s in skips if lid == "IngestFunction"}
