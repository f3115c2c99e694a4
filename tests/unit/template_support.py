"""template.yaml read for the template tests: the parsed template, its intrinsics, the functions' permissions."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from dfdlocal.template import load_template

TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"
OBJECTS = "${FilesBucket.Arn}/${UploadPrefix}*"


# X-Ray's two write actions take no resource ARN: the only grants on Resource "*" a function's role may carry
TRACING = {("xray:PutTraceSegments", "*"), ("xray:PutTelemetryRecords", "*")}


# what Step Functions needs to deliver the workflow's logs: these actions take no resource ARN either
LOG_DELIVERY = [
    f"logs:{action}"
    for action in (
        "CreateLogDelivery",
        "GetLogDelivery",
        "UpdateLogDelivery",
        "DeleteLogDelivery",
        "ListLogDeliveries",
        "PutResourcePolicy",
        "DescribeResourcePolicies",
        "DescribeLogGroups",
    )
]


def runtime(function: str) -> set[tuple[str, str]]:
    """What every function's own role grants Lambda's runtime: its own log group's streams and events, X-Ray."""
    return {(f"logs:{action}", f"{function}LogGroup.Arn") for action in ("CreateLogStream", "PutLogEvents")} | TRACING


# Exactly what each function may do, as (action, resource) pairs; resources are shown by _describe().
PERMISSIONS: dict[str, set[tuple[str, str]]] = {
    "UploadFunction": {
        *runtime("UploadFunction"),
        ("dynamodb:BatchGetItem", "FilesTable.Arn"),
        ("dynamodb:BatchGetItem", "TenantFilesTable.Arn"),
        ("dynamodb:PutItem", "UploadsTable.Arn"),
        ("dynamodb:Query", "TenantFilesTable.Arn"),  # the tenant's usage shards, with a quota set
        ("dynamodb:UpdateItem", "FilesTable.Arn"),
        ("dynamodb:UpdateItem", "TenantFilesTable.Arn"),
        ("dynamodb:UpdateItem", "CountersTable.Arn"),
        ("s3:PutObject", OBJECTS),
    },
    "MetadataFunction": {
        *runtime("MetadataFunction"),
        ("dynamodb:GetItem", "FilesTable.Arn"),
        ("dynamodb:GetItem", "UploadsTable.Arn"),
        ("dynamodb:BatchGetItem", "FilesTable.Arn"),
        ("dynamodb:BatchGetItem", "TenantFilesTable.Arn"),
        ("dynamodb:GetItem", "EventsTable.Arn"),  # a pending large upload's hashing progress (hashing-key#*)
    },
    "DownloadFunction": {
        *runtime("DownloadFunction"),
        ("dynamodb:GetItem", "FilesTable.Arn"),
        ("dynamodb:GetItem", "UploadsTable.Arn"),
        ("dynamodb:BatchGetItem", "FilesTable.Arn"),
        ("dynamodb:BatchGetItem", "TenantFilesTable.Arn"),
        ("s3:GetObject", OBJECTS),
    },
    "UploadsFunction": {  # a delete reads the upload only, then one transaction (dfd.deletes.service)
        *runtime("UploadsFunction"),
        ("dynamodb:GetItem", "UploadsTable.Arn"),
        ("dynamodb:UpdateItem", "UploadsTable.Arn"),
        ("dynamodb:UpdateItem", "FilesTable.Arn"),
        ("dynamodb:UpdateItem", "TenantFilesTable.Arn"),
        ("dynamodb:UpdateItem", "CountersTable.Arn"),
        ("s3:AbortMultipartUpload", OBJECTS),
        ("dynamodb:Query", "${UploadsTable.Arn}/index/OwnerIndex"),
    },
    "AdminStatsFunction": {
        *runtime("AdminStatsFunction"),
        ("dynamodb:BatchGetItem", "CountersTable.Arn"),
        ("dynamodb:Query", "StatsHistoryTable.Arn"),  # GET /admin/stats/history
        ("dynamodb:Scan", "TenantFilesTable.Arn"),  # GET /admin/tenants
    },
    # the counters' history: one read of the shards, one write of the snapshot (dfd.history.service)
    "SnapshotFunction": {
        *runtime("SnapshotFunction"),
        ("dynamodb:BatchGetItem", "CountersTable.Arn"),
        ("dynamodb:BatchWriteItem", "StatsHistoryTable.Arn"),
    },
    "MeFunction": {*runtime("MeFunction"), ("dynamodb:Query", "TenantFilesTable.Arn")},
    "AdminHashesFunction": {*runtime("AdminHashesFunction"), ("dynamodb:Scan", "FilesTable.Arn")},
    "IngestFunction": {
        *runtime("IngestFunction"),
        # the SQS event source's polling (SAM's AWSLambdaSQSQueueExecutionRole allows it on every queue)
        ("sqs:ReceiveMessage", "IngestQueue.Arn"),
        ("sqs:DeleteMessage", "IngestQueue.Arn"),
        ("sqs:GetQueueAttributes", "IngestQueue.Arn"),
        ("s3:GetObject", OBJECTS),
        ("s3:DeleteObject", OBJECTS),
        ("s3:ListBucket", "FilesBucket.Arn"),
        *{
            (f"dynamodb:{action}", f"{table}.Arn")
            for action in ("BatchGetItem", "PutItem")
            for table in ("EventsTable", "FilesTable")
        },
        ("dynamodb:GetItem", "FilesTable.Arn"),  # events and claims: BatchGetItem, with the upload item
        ("dynamodb:BatchGetItem", "UploadsTable.Arn"),
        ("dynamodb:BatchGetItem", "TenantFilesTable.Arn"),  # the reference the object's tenant hint names
        ("dynamodb:DeleteItem", "EventsTable.Arn"),  # a lost stored copy's key claim, when a duplicate adopts
        ("dynamodb:UpdateItem", "FilesTable.Arn"),
        ("dynamodb:UpdateItem", "UploadsTable.Arn"),
        ("dynamodb:UpdateItem", "CountersTable.Arn"),
        ("dynamodb:UpdateItem", "TenantFilesTable.Arn"),
        ("dynamodb:ConditionCheckItem", "EventsTable.Arn"),
        # the drop zone (dfd.ingest.dropzone): read and delete under s3/, copy to an upload key, register the upload
        ("s3:GetObject", "${FilesBucket.Arn}/s3/*"),
        ("s3:DeleteObject", "${FilesBucket.Arn}/s3/*"),
        ("s3:PutObject", OBJECTS),
        ("s3:AbortMultipartUpload", OBJECTS),
        ("dynamodb:GetItem", "UploadsTable.Arn"),
        ("dynamodb:PutItem", "UploadsTable.Arn"),
        ("dynamodb:Query", "TenantFilesTable.Arn"),
        # a drop-zone object's writer (dfd.identity.s3sessions): its owner's sessions and tokens, its user now
        ("dynamodb:GetItem", "LfsTokensTable.Arn"),
        ("cognito-idp:AdminGetUser", "UserPool.Arn"),
        ("cognito-idp:AdminListGroupsForUser", "UserPool.Arn"),
        # the hand-off of a large drop-zone object (dfd.ingest.dropcopy.CopyHandoff): its copy item, its execution
        ("dynamodb:GetItem", "EventsTable.Arn"),
        ("dynamodb:UpdateItem", "EventsTable.Arn"),
        ("states:StartExecution", "Ref(CopyStateMachine)"),
        (
            "states:DescribeExecution",
            "arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:execution:${CopyStateMachine.Name}:*",
        ),
        # the hand-off of a large object (dfd.ingest.service.Handoff): its state (hashing#*), its execution
        ("states:StartExecution", "Ref(SegmentStateMachine)"),
        (
            "states:DescribeExecution",
            "arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:execution:${SegmentStateMachine.Name}:*",
        ),
    },
    # one step of a large drop-zone object's copy (dfd.ingest.dropcopy): UploadPartCopy from s3/ (its source read,
    # then deleted), the multipart upload at the upload key, the copy item (copy#*)
    "CopyFunction": {
        *runtime("CopyFunction"),
        ("s3:GetObject", "${FilesBucket.Arn}/s3/*"),
        ("s3:DeleteObject", "${FilesBucket.Arn}/s3/*"),
        ("s3:GetObject", OBJECTS),
        ("s3:PutObject", OBJECTS),
        ("s3:ListMultipartUploadParts", OBJECTS),
        ("s3:AbortMultipartUpload", OBJECTS),
        ("s3:ListBucket", "FilesBucket.Arn"),
        ("dynamodb:GetItem", "EventsTable.Arn"),
        ("dynamodb:UpdateItem", "EventsTable.Arn"),
    },
    # the copy workflow only invokes CopyFunction
    "CopyStateMachine": {
        ("lambda:InvokeFunction", "CopyFunction.Arn"),
        ("lambda:InvokeFunction", "${CopyFunction.Arn}:*"),
        *{(action, "*") for action in LOG_DELIVERY},
    },
    # one segment of a large object (dfd.ingest.segments): ranged GETs of its version, its state (hashing#*,
    # hashing-key#*); the last segment's commit is the ingest's (Ingestor.commit_hashed), the duplicate's delete too
    "SegmentFunction": {
        *runtime("SegmentFunction"),
        ("s3:GetObject", OBJECTS),
        ("s3:GetObjectVersion", OBJECTS),
        ("s3:DeleteObject", OBJECTS),
        ("s3:ListBucket", "FilesBucket.Arn"),
        ("dynamodb:GetItem", "EventsTable.Arn"),
        *{
            (f"dynamodb:{action}", f"{table}.Arn")
            for action in ("BatchGetItem", "PutItem")
            for table in ("EventsTable", "FilesTable")
        },
        ("dynamodb:GetItem", "FilesTable.Arn"),
        ("dynamodb:BatchGetItem", "UploadsTable.Arn"),
        ("dynamodb:BatchGetItem", "TenantFilesTable.Arn"),
        ("dynamodb:DeleteItem", "EventsTable.Arn"),
        ("dynamodb:UpdateItem", "FilesTable.Arn"),
        ("dynamodb:UpdateItem", "UploadsTable.Arn"),
        ("dynamodb:UpdateItem", "CountersTable.Arn"),
        ("dynamodb:UpdateItem", "TenantFilesTable.Arn"),
        ("dynamodb:ConditionCheckItem", "EventsTable.Arn"),
    },
    # the two stream event sources' reads (SAM's AWSLambdaDynamoDBExecutionRole allows them on every stream)
    "PublisherFunction": {
        *runtime("PublisherFunction"),
        *{
            (f"dynamodb:{action}", f"{table}.StreamArn")
            for action in ("DescribeStream", "GetShardIterator", "GetRecords")
            for table in ("UploadsTable", "FilesTable")
        },
        ("dynamodb:ListStreams", "${UploadsTable.Arn}/stream/*"),
        ("dynamodb:ListStreams", "${FilesTable.Arn}/stream/*"),
        ("events:PutEvents", "EventBus.Arn"),
        ("sqs:SendMessage", "PublisherDLQ.Arn"),
    },
    # the workflow only orchestrates: it invokes ReconcileFunction and continues itself as a new execution
    "ReconcileStateMachine": {
        ("lambda:InvokeFunction", "ReconcileFunction.Arn"),
        ("lambda:InvokeFunction", "${ReconcileFunction.Arn}:*"),
        (
            "states:StartExecution",
            "arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:stateMachine:${AWS::StackName}-reconcile",
        ),
        *{(action, "*") for action in LOG_DELIVERY},
    },
    # the segment workflow only invokes SegmentFunction
    "SegmentStateMachine": {
        ("lambda:InvokeFunction", "SegmentFunction.Arn"),
        ("lambda:InvokeFunction", "${SegmentFunction.Arn}:*"),
        *{(action, "*") for action in LOG_DELIVERY},
    },
    # the reconcile's rules (dfd.reconcile.service); its writes to CountersTable are limited to the shards and its
    # lease, the claims it deletes to claim#* (Conditions, checked in tests/unit/test_asl.py)
    "ReconcileFunction": {
        *runtime("ReconcileFunction"),
        ("dynamodb:Query", "${UploadsTable.Arn}/index/PendingIndex"),
        ("dynamodb:Query", "${FilesTable.Arn}/index/ReapIndex"),
        ("dynamodb:Query", "${TenantFilesTable.Arn}/index/ReapIndex"),
        ("dynamodb:BatchGetItem", "UploadsTable.Arn"),
        ("dynamodb:BatchGetItem", "EventsTable.Arn"),
        ("dynamodb:BatchGetItem", "CountersTable.Arn"),
        ("dynamodb:UpdateItem", "UploadsTable.Arn"),
        ("dynamodb:Scan", "FilesTable.Arn"),
        ("dynamodb:UpdateItem", "FilesTable.Arn"),
        ("dynamodb:DeleteItem", "FilesTable.Arn"),
        ("dynamodb:UpdateItem", "TenantFilesTable.Arn"),
        ("dynamodb:DeleteItem", "TenantFilesTable.Arn"),
        ("dynamodb:DeleteItem", "EventsTable.Arn"),
        ("dynamodb:UpdateItem", "CountersTable.Arn"),
        ("s3:GetObject", OBJECTS),  # HeadObject; DeleteObject IfMatch an ETag is authorized with it too
        ("s3:DeleteObject", OBJECTS),
        ("s3:AbortMultipartUpload", OBJECTS),
        ("s3:ListBucket", "FilesBucket.Arn"),
        ("s3:GetObject", "${FilesBucket.Arn}/inventory/*"),  # the newest inventory report (dfd.reconcile.inventory)
        ("sqs:SendMessage", "IngestQueue.Arn"),
        ("dynamodb:GetItem", "StatsHistoryTable.Arn"),  # the audit's check of the latest snapshot
        ("dynamodb:GetItem", "EventsTable.Arn"),  # a pending large upload's hashing progress (hashing-key#*)
    },
}


@cache
def _template() -> dict[str, Any]:
    return load_template(TEMPLATE)


# --------------------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------------------
def _intrinsic(node: Any) -> tuple[str, Any] | None:
    """("Ref" | "Sub" | "GetAtt" | ..., value) for a long-form {"Ref": ...} or {"Fn::X": ...} mapping."""
    if isinstance(node, dict) and len(node) == 1:
        (key, value) = next(iter(node.items()))
        if key == "Ref":
            return "Ref", value
        if isinstance(key, str) and key.startswith("Fn::"):
            return key[4:], value
    return None


def _describe(node: Any) -> str:
    """A readable form of a policy resource: 'X.Arn' for GetAtt, the template string for Sub, 'Ref(X)'."""
    found = _intrinsic(node)
    if found is None:
        return str(node)
    name, value = found
    if name == "GetAtt":
        return value if isinstance(value, str) else ".".join(value)
    if name == "Sub":
        return value if isinstance(value, str) else f"Sub({value[0]})"
    if name == "Ref":
        return f"Ref({value})"
    return f"{name}({value!r})"


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def function_policies(template: dict[str, Any], logical_id: str) -> list[Any]:
    """The policies that grant a function (or state machine) its permissions: the policy documents of the function's
    own role (``Role: !GetAtt <X>Role.Arn``; every function has one), or a state machine's Policies, from which SAM
    generates its role."""
    resource = template["Resources"][logical_id]
    props = resource["Properties"]
    role = _intrinsic(props.get("Role"))
    if role is None:
        # SAM's generated role of a function carries AWSLambdaBasicExecutionRole (logs actions on Resource "*")
        assert resource["Type"] != "AWS::Serverless::Function", f"{logical_id}: no Role, SAM would generate one"
        return _as_list(props.get("Policies", []))
    assert role[0] == "GetAtt" and _describe(props["Role"]) == f"{logical_id}Role.Arn", (logical_id, props["Role"])
    resource = template["Resources"][f"{logical_id}Role"]
    assert resource["Type"] == "AWS::IAM::Role" and "ManagedPolicyArns" not in resource["Properties"], logical_id
    assert "Policies" not in props, f"{logical_id}: SAM ignores Policies beside Role"
    return [policy["PolicyDocument"] for policy in resource["Properties"]["Policies"]]
