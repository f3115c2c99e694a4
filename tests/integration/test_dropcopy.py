"""A drop-zone object copied across invocations on moto's S3 and Step Functions and the template's tables: with the
copy threshold lowered and parts of S3's smallest size (5 MiB), a 16 MiB object's drop event starts ONE named
execution however often it comes; the copy function's loop (as statemachine/copies.asl.json runs it), each step
with no time to spare past its first part, copies it part by part into an object byte-identical to the source,
deletes the s3/ object, and the copy's own event drives the ingest. A source overwritten between two steps aborts
the multipart upload."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Any

import boto3
import pytest

from dfd import deps
from dfd.core.ids import event_key
from dfd.handlers import ingest
from dfd.handlers.copy import CopyInputError, run_copy
from dfd.identity.s3access import prefix_for
from dfd.ingest.dropcopy import execution_name
from tests.integration.support import Aws, s3_writer
from tests.support import ALICE, LambdaContext, s3_notification, sqs_batch

ROOT = Path(__file__).resolve().parents[2]
MIB = 1024 * 1024


@pytest.fixture(autouse=True)
def writer(monkeypatch: pytest.MonkeyPatch, aws: Aws) -> None:
    s3_writer(monkeypatch, ALICE)


@pytest.fixture
def machine(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> str:
    """The copy workflow on moto (its executions do not run: the tests run its loop), the ingest wired to it."""
    sfn = boto3.client("stepfunctions")
    definition = (ROOT / "statemachine" / "copies.asl.json").read_text()
    definition = definition.replace("${Partition}", "aws").replace("${CopyFunctionArn}", "arn:aws:lambda:x")
    arn: str = sfn.create_state_machine(
        name="dfd-copies", definition=definition, roleArn="arn:aws:iam::123456789012:role/dfd-copies"
    )["stateMachineArn"]
    monkeypatch.setenv("COPY_STATE_MACHINE_ARN", arn)
    monkeypatch.setenv("COPY_THRESHOLD_BYTES", str(MIB))
    monkeypatch.setenv("COPY_PART_BYTES", str(5 * MIB))  # S3's smallest part but the last (moto checks it)
    deps.reset()
    return arn


def _deliver(aws: Aws) -> list[dict[str, Any]]:
    """Deliver what S3 sent to the ingest queue (its messages)."""
    records = aws.drain()
    if records:
        result = ingest.handler(sqs_batch(*(m["Body"] for m in records)), LambdaContext())
        assert result == {"batchItemFailures": []}
    return records


def _executions(arn: str) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = boto3.client("stepfunctions").list_executions(stateMachineArn=arn)["executions"]
    return listed


def _drop(aws: Aws, data: bytes, name: str) -> tuple[str, str]:
    """The object under ALICE's prefix, its drop event delivered: (its key, its version's event key)."""
    key = prefix_for(ALICE.caller.tenant, ALICE.caller.owner) + name
    aws.s3.put_object(Bucket=aws.settings.bucket, Key=key, Body=data, ContentType="video/mp4")
    etag = aws.s3.head_object(Bucket=aws.settings.bucket, Key=key)["ETag"]
    assert len(_deliver(aws)) == 1
    return key, event_key(aws.settings.bucket, key, etag.strip('"'))


def _keys(aws: Aws, prefix: str) -> list[str]:
    listing = aws.s3.list_objects_v2(Bucket=aws.settings.bucket, Prefix=prefix).get("Contents", [])
    return [o["Key"] for o in listing]


def test_a_large_drop_is_copied_part_by_part_across_invocations_then_ingested(aws: Aws, machine: str) -> None:
    data = random.Random(1).randbytes(16 * MIB + 3)  # parts of 5, 5, 5 and 1 MiB
    key, version = _drop(aws, data, "video/master.mov")
    (execution,) = _executions(machine)
    found = boto3.client("stepfunctions").describe_execution(executionArn=execution["executionArn"])
    assert json.loads(found["input"]) == {"event_key": version}  # the version only: its upload stays server-side
    assert execution["name"] == execution_name(version)
    for _ in range(2):  # delivered again, re-driven: no second execution, no second upload
        (result,) = ingest.handler(s3_notification(aws.settings.bucket, key), LambdaContext())["results"]
        # Step Functions answers a start of a running execution's name and input with that execution
        assert result["outcome"] == "copying" and result["execution"] == execution_name(version)
    assert len(_executions(machine)) == 1
    assert _keys(aws, "uploads/") == []  # nothing copied inline
    sent: list[tuple[str, dict[str, Any]]] = []
    deps.drop_copies()._objects._s3.meta.events.register(
        "provide-client-params.s3.*", lambda params, model, **_: sent.append((model.name, dict(params)))
    )
    answers = [run_copy({"event_key": version}, lambda: 0.0)]  # no time past the first part: one part a step
    while answers[-1]["outcome"] == "more":
        answers.append(run_copy({"event_key": version}, lambda: 0.0))
    assert [a["outcome"] for a in answers] == ["more", "more", "more", "done"]
    assert [a["copied"] for a in answers] == [5 * MIB, 10 * MIB, 15 * MIB, len(data)]
    assert answers[-1]["deleted"] is True and _keys(aws, "s3/") == []
    (complete,) = [params for name, params in sent if name == "CompleteMultipartUpload"]
    assert complete["IfNoneMatch"] == "*"  # what the bucket policy requires of every write under uploads/
    assert not aws.s3.list_multipart_uploads(Bucket=aws.settings.bucket).get("Uploads")
    (target,) = _keys(aws, "uploads/")
    copied = aws.s3.get_object(Bucket=aws.settings.bucket, Key=target)
    assert copied["Body"].read() == data and copied["ContentType"] == "video/mp4"
    # the copy's own event: the ingest of any upload
    assert all(target.replace("/", "%2F") in m["Body"] or target in m["Body"] for m in _deliver(aws))
    upload = aws.ddb.get_item(
        TableName=aws.settings.uploads_table, Key={"upload_id": {"S": target.removeprefix("uploads/")}}
    )["Item"]
    assert upload["status"] == {"S": "stored"} and upload["hash"] == {"S": hashlib.sha256(data).hexdigest()}
    assert run_copy({"event_key": version}, lambda: 0.0)["outcome"] == "done"  # a retried last step changes nothing
    aws.assert_invariants()


def test_every_part_copy_is_pinned_to_the_version_and_a_deleted_source_aborts_the_copy(aws: Aws, machine: str) -> None:
    """moto enforces no CopySourceIfMatch (the fakes do: tests/unit/test_dropcopy.py, an overwrite aborts): the
    requests are checked as sent; a source deleted between two steps ends the copy `gone`, its upload aborted."""
    data = random.Random(2).randbytes(11 * MIB)
    key, version = _drop(aws, data, "big.bin")
    etag = aws.s3.head_object(Bucket=aws.settings.bucket, Key=key)["ETag"]
    sent: list[tuple[str, dict[str, Any]]] = []
    deps.drop_copies()._objects._s3.meta.events.register(
        "provide-client-params.s3.*", lambda params, model, **_: sent.append((model.name, dict(params)))
    )
    assert run_copy({"event_key": version}, lambda: 0.0)["outcome"] == "more"
    aws.s3.delete_object(Bucket=aws.settings.bucket, Key=key)
    assert run_copy({"event_key": version}, lambda: 0.0)["outcome"] == "gone"
    assert not aws.s3.list_multipart_uploads(Bucket=aws.settings.bucket).get("Uploads")
    assert _keys(aws, "uploads/") == []
    copies = [params for name, params in sent if name == "UploadPartCopy"]
    assert copies and all(p["CopySourceIfMatch"] == etag for p in copies)
    assert [name for name, _ in sent].count("CreateMultipartUpload") == 1
    assert run_copy({"event_key": version}, lambda: 0.0)["outcome"] == "gone"  # a retry: nothing more


def test_a_payload_that_is_not_the_workflows_is_refused(aws: Aws, machine: str) -> None:
    for payload in ({}, {"event_key": 7}, [], {"event_key": ""}):
        with pytest.raises(CopyInputError):
            run_copy(payload, lambda: 900.0)
