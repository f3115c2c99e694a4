"""Hashing across invocations on moto's S3 and Step Functions and DynamoDB Local: with the threshold and the segment
budget lowered (a 1 MiB object takes 16 segments: the rules are the same at any size, the budget only scales them),
the ingest hands the object off and starts ONE named execution however often its event comes; the segment
function's loop (as statemachine/segments.asl.json runs it) reads exactly the version's ranges and its last segment
commits through the ingest's decision: the digest is hashlib's, a duplicate is counted and deleted once, an
overwrite while hashing ends superseded with nothing committed. S3's stored CRC64NVME (moto stores the one a put
sends with x-amz-sdk-checksum-algorithm CRC64NVME, as an SDK with the CRT sends it) is compared in the same pass: a
mismatch ends rejected. The audit holds throughout."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Any

import boto3
import pytest
import requests

from dfd import deps
from dfd.adapters.s3 import ObjectStore
from dfd.core.errors import ObjectChanged
from dfd.core.objects import ObjectInfo
from dfd.handlers import ingest
from dfd.handlers.segment import run_segment
from dfd.ingest import crc64nvme
from dfd.ingest.segments import execution_name
from tests.integration.support import Aws, get, post_upload, uploaded
from tests.support import ALICE, LambdaContext, s3_notification

ROOT = Path(__file__).resolve().parents[2]
KIB = 1024
SEGMENT = 64 * KIB


@pytest.fixture
def machine(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> str:
    """The segment workflow on moto (its executions do not run: the tests run its loop), the ingest wired to it."""
    sfn = boto3.client("stepfunctions")
    definition = (ROOT / "statemachine" / "segments.asl.json").read_text()
    definition = definition.replace("${Partition}", "aws").replace("${SegmentFunctionArn}", "arn:aws:lambda:x")
    arn: str = sfn.create_state_machine(
        name="dfd-segments", definition=definition, roleArn="arn:aws:iam::123456789012:role/dfd-segments"
    )["stateMachineArn"]
    monkeypatch.setenv("SEGMENT_STATE_MACHINE_ARN", arn)
    monkeypatch.setenv("SEGMENT_THRESHOLD_BYTES", str(SEGMENT))
    monkeypatch.setenv("SEGMENT_BYTES", str(SEGMENT))
    deps.reset()
    return arn


def _event(aws: Aws, key: str) -> dict[str, Any]:
    return ingest.handler(s3_notification(aws.settings.bucket, key), LambdaContext())  # type: ignore[no-any-return]


def _executions(arn: str) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = boto3.client("stepfunctions").list_executions(stateMachineArn=arn)["executions"]
    return listed


def _loop(event_key: str) -> list[dict[str, Any]]:
    """What one execution does: Segment while the answer is `more`."""
    answers = [run_segment({"event_key": event_key}, lambda: 900.0)]
    while answers[-1]["outcome"] == "more":
        answers.append(run_segment({"event_key": event_key}, lambda: 900.0))
    return answers


def _input(execution: dict[str, Any]) -> dict[str, Any]:
    found = boto3.client("stepfunctions").describe_execution(executionArn=execution["executionArn"])
    payload: dict[str, Any] = json.loads(found["input"])
    return payload


def test_a_large_object_is_handed_off_once_and_stored_once(aws: Aws, machine: str) -> None:
    data = random.Random(1).randbytes(1024 * KIB + 3)
    answer = uploaded(aws, data, "big.bin")
    for _ in range(3):  # the notification delivered three times
        (result,) = _event(aws, answer["key"])["results"]
        assert result["outcome"] == "hashing"
    (execution,) = _executions(machine)
    event_key = _input(execution)["event_key"]
    assert set(_input(execution)) == {"event_key"}  # the version only: its state stays server-side
    assert execution["name"] == execution_name(event_key)
    status, view = get("metadata", answer["upload_id"], ALICE)
    assert status == 200 and view["status"] == "pending"  # nothing committed while it hashes
    assert view["hashing"] == {"hashed_bytes": 0, "total_bytes": len(data)}
    answers = [run_segment({"event_key": event_key}, lambda: 900.0) for _ in range(3)]
    status, view = get("metadata", answer["upload_id"], ALICE)
    assert view["status"] == "pending" and view["hashing"] == {"hashed_bytes": 3 * SEGMENT, "total_bytes": len(data)}
    answers += _loop(event_key)
    assert len(answers) == 17 and answers[-1]["outcome"] == "done" and answers[-1]["ingest"] == "stored"
    status, view = get("metadata", answer["upload_id"], ALICE)
    assert status == 200 and view["status"] == "stored" and view["hash"] == hashlib.sha256(data).hexdigest()
    assert "hashing" not in view
    assert _loop(event_key)[-1]["ingest"] == "replay"  # the last segment re-run: nothing committed twice
    assert _event(aws, answer["key"])["results"][0]["outcome"] == "replay"  # a late event: no execution
    assert len(_executions(machine)) == 1
    aws.assert_invariants()


def test_a_large_duplicate_is_counted_and_deleted_once(aws: Aws, machine: str) -> None:
    data = random.Random(2).randbytes(512 * KIB)
    first = uploaded(aws, data, "one.bin")
    second = uploaded(aws, data, "two.bin")
    keys = {}
    for answer in (first, second):
        (result,) = _event(aws, answer["key"])["results"]
        assert result["outcome"] == "hashing"
        keys[answer["key"]] = result["event_key"]
    assert _loop(keys[first["key"]])[-1]["ingest"] == "stored"
    assert _loop(keys[second["key"]])[-1]["ingest"] == "duplicate"
    assert _loop(keys[second["key"]])[-1]["ingest"] == "replay"
    listed = {o["Key"] for o in aws.s3.list_objects_v2(Bucket=aws.settings.bucket).get("Contents", [])}
    assert first["key"] in listed and second["key"] not in listed
    record = aws.ddb.get_item(TableName=aws.settings.files_table, Key={"hash": {"S": hashlib.sha256(data).hexdigest()}})
    assert record["Item"]["upload_count"] == {"N": "2"} and record["Item"]["s3_key"] == {"S": first["key"]}
    aws.assert_invariants()


def test_an_overwrite_while_hashing_ends_superseded(aws: Aws, machine: str) -> None:
    data = random.Random(3).randbytes(512 * KIB)
    answer = uploaded(aws, data, "big.bin")
    (result,) = _event(aws, answer["key"])["results"]
    event_key = result["event_key"]
    for _ in range(3):
        assert run_segment({"event_key": event_key}, lambda: 900.0)["outcome"] == "more"
    aws.s3.put_object(Bucket=aws.settings.bucket, Key=answer["key"], Body=b"other bytes" * 1000)
    aws.drain()  # the newer version's own notification
    answer_after = run_segment({"event_key": event_key}, lambda: 900.0)
    assert answer_after["outcome"] == "superseded" and answer_after["hashed"] == 3 * SEGMENT
    assert (
        aws.ddb.get_item(TableName=aws.settings.files_table, Key={"hash": {"S": hashlib.sha256(data).hexdigest()}}).get(
            "Item"
        )
        is None
    )


def _uploaded_with_crc64nvme(aws: Aws, data: bytes, value: int) -> dict[str, Any]:
    """POST /upload, then its PUT carrying a CRC64NVME, as an SDK sends it (`value`: any, a wrong one too)."""
    status, answer = post_upload({"filename": "big.bin", "size": len(data)})
    assert status == 201
    headers = answer["headers"] | {
        "x-amz-sdk-checksum-algorithm": "CRC64NVME",
        "x-amz-checksum-crc64nvme": crc64nvme.to_b64(value),
    }
    assert requests.put(answer["upload_url"], data=data, headers=headers, timeout=10).status_code == 200
    aws.drain()
    return answer


def _state(aws: Aws, event_key: str) -> dict[str, Any]:
    item = aws.ddb.get_item(TableName=aws.settings.events_table, Key={"event_key": {"S": "hashing#" + event_key}})
    found: dict[str, Any] = item["Item"]
    return found


def test_s3s_crc64nvme_is_compared_in_the_same_pass(aws: Aws, machine: str) -> None:
    data = random.Random(4).randbytes(1024 * KIB + 3)
    answer = _uploaded_with_crc64nvme(aws, data, crc64nvme.update(data))
    head = aws.s3.head_object(Bucket=aws.settings.bucket, Key=answer["key"], ChecksumMode="ENABLED")
    assert head["ChecksumCRC64NVME"] == crc64nvme.to_b64(crc64nvme.update(data))  # moto stored it
    (result,) = _event(aws, answer["key"])["results"]
    first = run_segment({"event_key": result["event_key"]}, lambda: 900.0)
    assert first["outcome"] == "more"
    state = _state(aws, result["event_key"])  # carried beside the SHA-256 state
    assert state["crc64nvme"] == {"S": f"{crc64nvme.update(data[:SEGMENT]):016x}"}
    assert state["s3_crc64nvme"] == {"S": f"{crc64nvme.update(data):016x}"}
    answers = _loop(result["event_key"])
    assert len(answers) >= 8 and answers[-1]["ingest"] == "stored"
    record = aws.ddb.get_item(TableName=aws.settings.files_table, Key={"hash": {"S": hashlib.sha256(data).hexdigest()}})
    assert record["Item"]["s3_key"] == {"S": answer["key"]}
    aws.assert_invariants()


def test_a_crc64nvme_mismatch_ends_rejected_with_nothing_committed(aws: Aws, machine: str) -> None:
    data = random.Random(5).randbytes(512 * KIB)
    answer = _uploaded_with_crc64nvme(aws, data, crc64nvme.update(data) ^ 0xFF)
    (result,) = _event(aws, answer["key"])["results"]
    answers = _loop(result["event_key"])
    assert answers[-1]["outcome"] == "done" and answers[-1]["ingest"] == "rejected"
    files = aws.ddb.get_item(TableName=aws.settings.files_table, Key={"hash": {"S": hashlib.sha256(data).hexdigest()}})
    assert "Item" not in files
    listed = {o["Key"] for o in aws.s3.list_objects_v2(Bucket=aws.settings.bucket).get("Contents", [])}
    assert answer["key"] not in listed  # deleted, as any rejected version
    # a redelivered event: the object is gone, nothing committed
    (again,) = _event(aws, answer["key"])["results"]
    assert again["outcome"] == "gone"
    aws.assert_invariants(settled=False)


def test_the_adapter_reads_only_a_full_object_crc64nvme_of_exactly_the_version(aws: Aws) -> None:
    bucket, s3 = aws.settings.bucket, aws.s3
    objects = ObjectStore(s3, s3)
    data = random.Random(6).randbytes(6 * 1024 * KIB)

    def info(key: str) -> ObjectInfo:
        head = s3.head_object(Bucket=bucket, Key=key)
        return ObjectInfo(bucket, key, head["ETag"], head.get("VersionId"), head["ContentLength"], None, None)

    def add_crc(request: Any, **_: Any) -> None:
        request.headers["x-amz-sdk-checksum-algorithm"] = "CRC64NVME"
        request.headers["x-amz-checksum-crc64nvme"] = crc64nvme.to_b64(crc64nvme.update(data))

    s3.meta.events.register_first("before-sign.s3.PutObject", add_crc, unique_id="crc64nvme")
    try:
        s3.put_object(Bucket=bucket, Key="full.bin", Body=data)
    finally:
        s3.meta.events.unregister("before-sign.s3.PutObject", unique_id="crc64nvme")
    assert objects.stored_crc64nvme(info("full.bin")) == crc64nvme.update(data)
    s3.put_object(Bucket=bucket, Key="plain.bin", Body=data, ChecksumAlgorithm="SHA256")
    assert objects.stored_crc64nvme(info("plain.bin")) is None  # another algorithm's checksum
    # a multipart's COMPOSITE checksum of part checksums is never the content's
    upload = s3.create_multipart_upload(Bucket=bucket, Key="parts.bin", ChecksumAlgorithm="SHA256")["UploadId"]
    parts = []
    for number, chunk in enumerate((data[: 5 * 1024 * KIB], data[5 * 1024 * KIB :]), start=1):
        part = s3.upload_part(
            Bucket=bucket, Key="parts.bin", UploadId=upload, PartNumber=number, Body=chunk, ChecksumAlgorithm="SHA256"
        )
        parts.append({"PartNumber": number, "ETag": part["ETag"], "ChecksumSHA256": part["ChecksumSHA256"]})
    s3.complete_multipart_upload(Bucket=bucket, Key="parts.bin", UploadId=upload, MultipartUpload={"Parts": parts})
    assert objects.stored_crc64nvme(info("parts.bin")) is None
    # exactly the version identified: an overwrite answers 412
    before = info("full.bin")
    s3.put_object(Bucket=bucket, Key="full.bin", Body=b"other")
    with pytest.raises(ObjectChanged):
        objects.stored_crc64nvme(before)
