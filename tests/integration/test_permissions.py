"""Least privilege, checked against what the code really does: every DynamoDB and S3 request each function makes
in the scenarios below is recorded (each table inside a BatchGetItem or a TransactWriteItems counted as its own
action, as IAM authorizes them), and must be allowed by that function's policy in template.yaml, resolved to
ARNs and matched with IAM's wildcards. Conversely every grant must be used, or be listed in NOT_SEEN with the
reason it is needed although the scenarios make no request for it.

moto does not enforce IAM, so without this test a missing grant would only show on AWS (an AccessDenied that
sends every affected record to the DLQ)."""

from __future__ import annotations

import hashlib
import json
import sys
import threading
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import boto3
import pytest

from dfd import deps
from dfd.adapters import aws as dfd_aws
from dfd.core.config import MIB
from dfd.handlers import admin_hashes, admin_stats, download, ingest, me, metadata, segment, snapshot, upload, uploads
from dfd.identity.s3access import prefix_for
from dfdlocal.template import Resolver, load_template
from tests.integration.support import ALICE_CLAIMS, DATA, Aws, create, post_upload, put, put_parts, route, s3_writer
from tests.support import ADMIN, ALICE, LambdaContext, api_event, call, s3_notification, sqs_batch

ROOT = Path(__file__).resolve().parents[2]
ROLE = "arn:aws:iam::123456789012:role/segments"  # moto evaluates no IAM
MODULES = {
    "upload": "UploadFunction",
    "metadata": "MetadataFunction",
    "download": "DownloadFunction",
    "me": "MeFunction",
    "admin_stats": "AdminStatsFunction",
    "admin_hashes": "AdminHashesFunction",
    "ingest": "IngestFunction",
    "multipart": "UploadPartsFunction",
    "uploads": "UploadsFunction",
    "snapshot": "SnapshotFunction",
    "copy": "CopyFunction",
    "segment": "SegmentFunction",
}
COPY_THREADS = ("dfd-partcopy",)  # the copy workflow's part-copy workers (dfd.ingest.dropcopy)
INGEST_THREADS = ("dfd-record", "dfd-range", "dfd-copy")  # the ingest's record, ranged-read and part-copy workers
# Grants the scenarios make no request for: (function, action, resource) -> why the function needs it
NOT_SEEN = {
    ("UploadFunction", "s3:PutObject", "*"): "presigning: the client's PUT is authorized as the signing function",
    ("DownloadFunction", "s3:GetObject", "*"): "presigning: the client's GET is authorized as the signing function",
    ("IngestFunction", "s3:ListBucket", "*"): "without it S3 answers a missing key with 403 instead of 404",
    ("UploadPartsFunction", "s3:ListBucket", "*"): "without it S3 answers a missing key with 403 instead of 404",
    ("UploadPartsFunction", "s3:GetObject", "*"): "a completion whose answer was lost: HEAD tells done from aborted",
    ("UploadPartsFunction", "s3:AbortMultipartUpload", "*"): "two first parts calls race: the loser aborts its own",
    ("IngestFunction", "s3:AbortMultipartUpload", "*"): "the drop zone's multipart copy, failed, aborts its upload",
    ("IngestFunction", "dynamodb:UpdateItem", "EventsTable"): (
        "a copy execution that died is restarted by the next drop event: its run counted on the copy item"
    ),
    ("CopyFunction", "s3:GetObject", "*"): "a copy whose completion answer was lost: HEAD of the target tells done",
    ("CopyFunction", "s3:ListBucket", "*"): "without it S3 answers a missing key with 403 instead of 404",
    ("CopyFunction", "s3:AbortMultipartUpload", "*"): "a source that moved on, or a racing step's upload, aborted",
    ("SegmentFunction", "s3:ListBucket", "*"): "without it S3 answers a missing key with 403 instead of 404",
    ("SegmentFunction", "s3:GetObjectVersion", "*"): "a versioned bucket's ranged GETs name the version",
    ("SegmentFunction", "dynamodb:GetItem", "FilesTable"): (
        "a lost race whose cancellation reason carries no item (the ingest's commit: a defensive read)"
    ),
    ("IngestFunction", "dynamodb:GetItem", "FilesTable"): (
        "a lost race whose cancellation reason carries no item (DynamoDB returns it: a defensive read)"
    ),
}
TRANSACT_ACTIONS = {
    "Put": "dynamodb:PutItem",
    "Update": "dynamodb:UpdateItem",
    "Delete": "dynamodb:DeleteItem",
    "ConditionCheck": "dynamodb:ConditionCheckItem",
}


class Recorder:
    """(function, action, table or bucket/key) of every request dfd's handlers make, from botocore's
    before-parameter-build event (the operation's own arguments); requests made outside a handler (the tests'
    own setup) are not attributed."""

    def __init__(self) -> None:
        self.calls: set[tuple[str, str, str]] = set()
        self._lock = threading.Lock()

    @staticmethod
    def function() -> str | None:
        if threading.current_thread().name.startswith(COPY_THREADS):
            return "CopyFunction"
        if threading.current_thread().name.startswith(INGEST_THREADS):
            return "IngestFunction"
        frame = sys._getframe()
        while frame is not None:
            path = Path(frame.f_code.co_filename)
            if path.parent.name == "handlers" and path.parent.parent.name == "dfd" and path.stem in MODULES:
                return MODULES[path.stem]
            frame = frame.f_back  # type: ignore[assignment]
        return None

    def __call__(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        function = self.function()
        if function is None:
            return
        service = model.service_model.endpoint_prefix
        name = model.name
        found: list[tuple[str, str]] = []
        if service == "dynamodb":
            if name in ("BatchGetItem", "BatchWriteItem"):
                found = [(f"dynamodb:{name}", table) for table in params["RequestItems"]]
            elif name == "TransactWriteItems":
                for item in params["TransactItems"]:
                    ((kind, body),) = item.items()
                    found.append((TRANSACT_ACTIONS[kind], body["TableName"]))
            elif params.get("IndexName"):  # a Query of an index is authorized on the index's ARN
                found = [(f"dynamodb:{name}", params["TableName"] + "/index/" + params["IndexName"])]
            else:
                found = [(f"dynamodb:{name}", params["TableName"])]
        elif service == "s3":
            # HEAD is authorized as s3:GetObject; a multipart upload's calls as s3:PutObject, ListParts as its own
            action = {
                "HeadObject": "GetObject",
                "CreateMultipartUpload": "PutObject",
                "UploadPart": "PutObject",
                "CompleteMultipartUpload": "PutObject",
                "ListParts": "ListMultipartUploadParts",
                "CopyObject": "PutObject",
                "UploadPartCopy": "PutObject",
            }.get(name, name)
            found = [(f"s3:{action}", f"{params['Bucket']}/{params.get('Key', '')}")]
            if name in ("CopyObject", "UploadPartCopy"):  # and s3:GetObject on the source
                source = params["CopySource"]
                found.append(("s3:GetObject", f"{source['Bucket']}/{source['Key']}"))
        with self._lock:
            self.calls.update((function, action, resource) for action, resource in found)


@pytest.fixture
def recorder(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> Recorder:
    """Records on every client dfd makes from now on (dfd.adapters.aws builds its clients lazily, after deps.reset() in
    the aws fixture, and again after each reset)."""
    recording = Recorder()
    make = dfd_aws.client

    def recorded(service: str, config: Any) -> Any:
        client = make(service, config)
        client.meta.events.register("before-parameter-build.*.*", recording)
        return client

    monkeypatch.setattr(dfd_aws, "client", recorded)
    return recording


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def grants(resolver: Resolver) -> dict[str, set[tuple[str, str]]]:
    """Each function's (action, resource ARN pattern) pairs, from template.yaml resolved with local names."""
    template = resolver.template
    result: dict[str, set[tuple[str, str]]] = {}
    for function in MODULES.values():
        pairs: set[tuple[str, str]] = set()
        # every function has its own role (<function>Role): that role's policy documents
        assert template["Resources"][function]["Properties"]["Role"] == {"Fn::GetAtt": [f"{function}Role", "Arn"]}
        role = template["Resources"][f"{function}Role"]["Properties"]
        for policy in (policy["PolicyDocument"] for policy in role["Policies"]):
            for statement in policy["Statement"]:
                if all(
                    str(action).startswith(("logs:", "xray:", "cognito-idp:"))
                    for action in _listed(statement["Action"])
                ):
                    continue  # the runtime's (its log group, traces), not requests of the code; the user pool's
                statement = resolver.resolve(statement)
                assert statement["Effect"] == "Allow"
                actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
                resources = statement["Resource"]
                for action in actions:
                    for resource in resources if isinstance(resources, list) else [resources]:
                        pairs.add((action, resource))
        result[function] = pairs
    return result


def arn(aws: Aws, resolver: Resolver, service_resource: tuple[str, str]) -> str:
    """A recorded request's resource as the ARN the template's local names give it."""
    action, resource = service_resource
    s = aws.settings
    if action.startswith("dynamodb:"):
        resource, _, index = resource.partition("/index/")
        logical = {
            s.files_table: "FilesTable",
            s.counters_table: "CountersTable",
            s.uploads_table: "UploadsTable",
            s.events_table: "EventsTable",
            s.tenant_files_table: "TenantFilesTable",
            deps.lfs_settings().tokens_table: "LfsTokensTable",
            s.history_table: "StatsHistoryTable",
        }[resource]
        table_arn = resolver.get_att(logical, "Arn")
        return f"{table_arn}/index/{index}" if index else table_arn
    bucket, _, key = resource.partition("/")
    assert bucket == s.bucket, resource
    bucket_arn = resolver.get_att("FilesBucket", "Arn")
    return f"{bucket_arn}/{key}" if key else bucket_arn


def uploaded(aws: Aws, data: bytes, name: str, *, sha256: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {"filename": name, "size": len(data)}
    if sha256:
        body["sha256"] = hashlib.sha256(data).hexdigest()
    status, answer = post_upload(body)
    assert status == 201, answer
    assert put(answer, data).status_code == 200
    aws.drain()
    return answer


def ingest_keys(aws: Aws, *keys: str) -> None:
    result = ingest.handler(sqs_batch(*(s3_notification(aws.settings.bucket, k) for k in keys)), LambdaContext())
    assert result == {"batchItemFailures": []}


def exercise_every_path(aws: Aws) -> None:
    """Each distinct request the functions make: new content, duplicate, replay, the checksummed (HEAD)
    path, a gone object, a lost stored copy adopted, an object overwritten in place, a second PUT with the
    same URL, objects put straight into the bucket (events and claims of their own), every read."""
    bucket = aws.settings.bucket
    first = uploaded(aws, b"permissions" * 100, "first.bin")
    second = uploaded(aws, b"permissions" * 100, "second.bin")
    checked = uploaded(aws, b"checksummed" * 100, "checked.bin", sha256=True)
    checked_twice = uploaded(aws, b"checksummed" * 100, "again.bin", sha256=True)
    ingest_keys(aws, first["key"])
    ingest_keys(aws, second["key"], checked["key"])
    ingest_keys(aws, checked_twice["key"])
    ingest_keys(aws, first["key"], second["key"], checked_twice["key"])  # replays; the duplicates are gone
    aws.s3.delete_object(Bucket=bucket, Key=checked["key"])  # the stored copy lost: the next duplicate adopts
    survivor = uploaded(aws, b"checksummed" * 100, "survivor.bin")
    ingest_keys(aws, survivor["key"])
    aws.s3.put_object(Bucket=bucket, Key=first["key"], Body=b"overwritten in place")  # a conflict
    aws.s3.put_object(Bucket=bucket, Key=second["key"], Body=b"PERMISSIONS" * 100)  # a second PUT: rejected
    aws.drain()
    ingest_keys(aws, first["key"], second["key"])
    ingest_keys(aws, first["key"])  # the conflict replayed: its record found by record_event's answer
    # objects put straight into the bucket at keys with no upload id: their events and claims are items of their own
    one, two, three = (f"uploads/direct/{name}.bin" for name in ("one", "two", "three"))
    for key in (one, two):
        aws.s3.put_object(Bucket=bucket, Key=key, Body=b"put straight" * 100)
    ingest_keys(aws, one)
    ingest_keys(aws, two)  # a duplicate: conditioned on no claim at its key
    aws.s3.delete_object(Bucket=bucket, Key=one)  # the stored copy lost: the next duplicate adopts, the claim moves
    aws.s3.put_object(Bucket=bucket, Key=three, Body=b"put straight" * 100)
    ingest_keys(aws, three)

    digest = hashlib.sha256(b"permissions" * 100).hexdigest()
    assert (
        call(upload.handler, api_event("POST", "/upload", body={"filename": "x", "size": 5, "sha256": digest}))[0]
        == 409
    )
    for ident in (first["upload_id"], digest):
        for user in (ALICE, ADMIN):  # the tenant's view (file + reference), the global record
            assert call(metadata.handler, api_event("GET", f"/metadata/{ident}", user=user))[0] == 200
            assert call(download.handler, api_event("GET", f"/download/{ident}", user=user))[0] == 200
    assert call(admin_stats.handler, api_event("GET", "/admin/stats"))[0] == 200
    assert snapshot.handler({"source": "aws.events", "detail-type": "Scheduled Event"}, LambdaContext())["totals"]
    assert call(admin_stats.handler, api_event("GET", "/admin/stats/history"))[0] == 200
    assert call(admin_stats.handler, api_event("GET", "/admin/tenants"))[0] == 200
    exercise_multipart()
    status, page = call(admin_hashes.handler, api_event("GET", "/admin/hashes", query={"limit": "1"}))
    assert status == 200 and page["last_evaluated_key"]
    token = page["last_evaluated_key"]
    query = {"limit": "1", "last_evaluated_key": token}
    assert call(admin_hashes.handler, api_event("GET", "/admin/hashes", query=query))[0] == 200
    assert call(me.handler, api_event("GET", "/me", user=ALICE))[0] == 200
    exercise_deletes(aws)


def delete_upload(upload_id: str, user: Any = ALICE) -> int:
    event = api_event("DELETE", f"/uploads/{upload_id}", user=user)
    event["routeKey"] = event["requestContext"]["routeKey"] = "DELETE /uploads/{id}"
    event["pathParameters"] = {"id": upload_id}
    return int(uploads.handler(event, LambdaContext())["statusCode"])


def exercise_deletes(aws: Aws) -> None:
    """Deletes: a reference among several, the last (tenant reference deleted, content tombstoned), a pending
    single PUT cancelled, a pending multipart aborted, an admin's delete of a direct put's upload (no tenant)."""
    first = uploaded(aws, b"deleted" * 100, "first.bin")
    second = uploaded(aws, b"deleted" * 100, "second.bin")
    ingest_keys(aws, first["key"], second["key"])
    assert delete_upload(first["upload_id"]) == 204
    assert delete_upload(second["upload_id"]) == 204
    status, pending = post_upload({"filename": "pending.bin", "size": 10})
    assert status == 201 and delete_upload(pending["upload_id"]) == 204
    answer = create(len(DATA))
    assert route("POST", answer["upload_id"], "parts", ALICE_CLAIMS, {"parts": [{"part_number": 1}]})[0] == 200
    assert delete_upload(answer["upload_id"]) == 204
    direct = "uploads/" + "d" * 32
    aws.s3.put_object(Bucket=aws.settings.bucket, Key=direct, Body=b"put straight into the bucket")
    aws.drain()
    ingest_keys(aws, direct)
    assert delete_upload("d" * 32, ADMIN) == 204
    event = api_event("GET", "/uploads", query={"limit": "1"})
    assert call(uploads.handler, event)[0] == 200


def exercise_multipart() -> None:
    """A multipart upload of two parts (the 64 MiB threshold is not needed: it asks), listed and completed."""
    answer = create(len(DATA))
    upload_id = answer["upload_id"]
    status, presigned = route("POST", upload_id, "parts", ALICE_CLAIMS, {"parts": [{"part_number": n} for n in (1, 2)]})
    assert status == 200, presigned
    put_parts(presigned, [1, 2], part_size=answer["part_size"])
    assert route("GET", upload_id, "parts", ALICE_CLAIMS)[0] == 200
    assert route("POST", upload_id, "complete", ALICE_CLAIMS)[0] == 202


def exercise_segments(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> None:
    """Objects above the segment threshold: handed off (the state begun, the workflow started), shown hashing by GET
    /metadata, an execution that died restarted (its run counted), hashed a segment per SegmentFunction call, the
    last one committing through the ingest's decision: stored, a duplicate (its bytes deleted), and objects put
    straight into the bucket (their events and claims; a lost stored copy adopted, its claim moved)."""
    sfn = boto3.client("stepfunctions")  # moto's, in this process
    definition = '{"StartAt": "S", "States": {"S": {"Type": "Pass", "End": true}}}'
    arn = sfn.create_state_machine(name="segments", definition=definition, roleArn=ROLE)["stateMachineArn"]
    monkeypatch.setenv("SEGMENT_STATE_MACHINE_ARN", arn)
    monkeypatch.setenv("SEGMENT_THRESHOLD_BYTES", "1000")
    monkeypatch.setenv("SEGMENT_BYTES", "1024")
    deps.reset()
    bucket, data = aws.settings.bucket, b"segmented " * 400  # four segments

    def hashed(key: str) -> str:
        ingest_keys(aws, key)
        found = aws.ddb.scan(
            TableName=aws.settings.events_table,
            FilterExpression="begins_with(event_key, :h) AND #k = :k",
            ExpressionAttributeNames={"#k": "key"},
            ExpressionAttributeValues={":h": {"S": "hashing#"}, ":k": {"S": key}},
        )["Items"]
        event_key = found[0]["event_key"]["S"].removeprefix("hashing#")
        while (outcome := segment.handler({"event_key": event_key}, LambdaContext()))["outcome"] == "more":
            pass
        return str(outcome["ingest"])

    first = uploaded(aws, data, "huge.bin")
    ingest_keys(aws, first["key"])
    assert call(metadata.handler, api_event("GET", f"/metadata/{first['upload_id']}", user=ALICE))[0] == 200
    for execution in sfn.list_executions(stateMachineArn=arn)["executions"]:
        sfn.stop_execution(executionArn=execution["executionArn"])  # it died: the next event restarts it
    assert hashed(first["key"]) == "stored"
    assert hashed(uploaded(aws, data, "again.bin")["key"]) == "duplicate"
    one, two, three = (f"uploads/direct/huge-{name}.bin" for name in ("one", "two", "three"))
    direct = b"straight " * 400
    for key in (one, two):
        aws.s3.put_object(Bucket=bucket, Key=key, Body=direct)
    aws.drain()
    assert hashed(one) == "stored"
    assert hashed(two) == "duplicate"  # conditioned on no claim at its key
    aws.s3.delete_object(Bucket=bucket, Key=one)  # the stored copy lost: the next duplicate adopts, the claim moves
    aws.s3.put_object(Bucket=bucket, Key=three, Body=direct)
    aws.drain()
    assert hashed(three) in ("stored", "duplicate")
    monkeypatch.delenv("SEGMENT_STATE_MACHINE_ARN")
    deps.reset()


def exercise_quotas(monkeypatch: pytest.MonkeyPatch) -> None:
    """An upload larger than the tenant's whole quota: refused after reading the usage it would exceed."""
    monkeypatch.setenv("TENANT_QUOTA_BYTES", "10")
    deps.reset()
    status, answer = post_upload({"filename": "big.bin", "size": 11})
    assert status == 403 and answer["error"]["code"] == "quota_exceeded", answer


def exercise_drop_zone(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> None:
    """Objects written under a caller's s3/ prefix: registered against the quota (its usage read), copied to the
    upload key (CopyObject; UploadPartCopy above the copy threshold), deleted; one too large, rejected."""
    from dfd.adapters.s3 import copies

    monkeypatch.setenv("TENANT_QUOTA_BYTES", str(64 * MIB))
    monkeypatch.setenv("MAX_UPLOAD_BYTES", str(16 * MIB))
    deps.reset()
    monkeypatch.setattr(copies, "COPY_MAX", 6 * MIB)
    monkeypatch.setattr(copies, "COPY_PART", 5 * MIB)
    s3_writer(monkeypatch, ALICE)  # her credentials recorded: the writer check reads the tokens table
    prefix = prefix_for(ALICE.caller.tenant, ALICE.caller.owner)
    sizes = {"small.bin": 100, "parts.bin": 6 * MIB + 1, "huge.bin": 16 * MIB + 1}
    for name, size in sizes.items():
        aws.s3.put_object(Bucket=aws.settings.bucket, Key=prefix + name, Body=b"d" * size)
    aws.drain()
    ingest_keys(aws, *(prefix + name for name in sizes))
    copied = aws.drain()
    assert copied  # the copies' own events (moto announces a multipart copy twice: the second is a replay)
    assert ingest.handler(sqs_batch(*(m["Body"] for m in copied)), LambdaContext()) == {"batchItemFailures": []}


def exercise_copy_workflow(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> None:
    """A drop-zone object above the copy threshold: handed to the copy workflow (its copy item begun, its execution
    started), then copied part by part by CopyFunction's steps, the s3/ object deleted."""
    import boto3

    from dfd.handlers.copy import run_copy

    definition = (ROOT / "statemachine" / "copies.asl.json").read_text()
    definition = definition.replace("${Partition}", "aws").replace("${CopyFunctionArn}", "arn:aws:lambda:x")
    machine = boto3.client("stepfunctions").create_state_machine(
        name="dfd-copies", definition=definition, roleArn="arn:aws:iam::123456789012:role/dfd-copies"
    )
    monkeypatch.setenv("COPY_STATE_MACHINE_ARN", machine["stateMachineArn"])
    monkeypatch.setenv("COPY_THRESHOLD_BYTES", str(MIB))
    monkeypatch.setenv("COPY_PART_BYTES", str(5 * MIB))
    deps.reset()
    key = prefix_for(ALICE.caller.tenant, ALICE.caller.owner) + "copied.bin"
    aws.s3.put_object(Bucket=aws.settings.bucket, Key=key, Body=b"c" * (6 * MIB + 1))
    aws.drain()
    (result,) = ingest.handler(s3_notification(aws.settings.bucket, key), LambdaContext())["results"]
    assert result["outcome"] == "copying"
    (execution,) = boto3.client("stepfunctions").list_executions(stateMachineArn=machine["stateMachineArn"])[
        "executions"
    ]
    event_key = json.loads(
        boto3.client("stepfunctions").describe_execution(executionArn=execution["executionArn"])["input"]
    )["event_key"]
    while run_copy({"event_key": event_key}, lambda: 0.0)["outcome"] == "more":
        pass
    copied = aws.drain()
    assert copied
    assert ingest.handler(sqs_batch(*(m["Body"] for m in copied)), LambdaContext()) == {"batchItemFailures": []}


def test_every_request_is_granted_and_every_grant_is_used(
    aws: Aws, recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    exercise_every_path(aws)
    exercise_multipart()
    exercise_segments(aws, monkeypatch)
    exercise_quotas(monkeypatch)
    exercise_drop_zone(aws, monkeypatch)
    exercise_copy_workflow(aws, monkeypatch)
    resolver = Resolver(load_template(ROOT / "template.yaml"), "http://127.0.0.1:1")
    granted = grants(resolver)
    used: dict[tuple[str, str], set[str]] = {}  # (function, action) -> ARNs requested

    denied = []
    for function, action, resource in sorted(recorder.calls):
        target = arn(aws, resolver, (action, resource))
        used.setdefault((function, action), set()).add(target)
        if not any(a == action and fnmatchcase(target, pattern) for a, pattern in granted[function]):
            denied.append(f"{function}: {action} on {target}")
    assert not denied, "requests the template does not allow (AccessDenied on AWS):\n" + "\n".join(denied)

    assert {function for function, _ in used} == set(MODULES.values()), "a function made no request at all"
    explained = {
        (function, action, "*" if resource == "*" else resolver.get_att(resource, "Arn"))
        for function, action, resource in NOT_SEEN
    }
    unused = [
        f"{function}: {action} on {pattern}"
        for function, pairs in granted.items()
        for action, pattern in sorted(pairs)
        if action.split(":")[0] in {"dynamodb", "s3"}
        and (function, action, "*") not in explained
        and (function, action, pattern) not in explained
        and not any(fnmatchcase(target, pattern) for target in used.get((function, action), set()))
    ]
    assert not unused, "grants no request needs (least privilege):\n" + "\n".join(unused)
