"""Exactly-once on the running local stack: uploads over HTTP from 8 threads while every event is replayed
10 times through the queue and through the Lambda invoke API; then scripts/audit must report every invariant
holding and the counters must be exact. A poison message reaches the DLQ and nothing else is lost."""

from __future__ import annotations

import hashlib
import json
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests

from dfd.core.notifications import notification
from tests.e2e.e2e_helpers import RunningStack, nothing_to_reap, run_audit, settled, take_events, wait_until

pytestmark = pytest.mark.e2e


def totals(stack: RunningStack) -> dict[str, int]:
    stats: dict[str, int] = requests.get(f"{stack.api_url}/admin/stats", headers=stack.auth("admin"), timeout=10).json()
    return stats


def upload(stack: RunningStack, data: bytes, name: str, *, precheck: bool = False) -> dict[str, Any]:
    """POST /upload, then PUT with exactly the returned headers (what curl or a browser does)."""
    body: dict[str, Any] = {"filename": name, "size": len(data), "content_type": "text/plain"}
    if precheck:
        body["sha256"] = hashlib.sha256(data).hexdigest()
    answer = requests.post(f"{stack.api_url}/upload", json=body, headers=stack.auth("alice"), timeout=10)
    if answer.status_code == 409:
        return {"duplicate": True, **answer.json()}
    assert answer.status_code == 201, answer.text
    issued: dict[str, Any] = answer.json()
    put = requests.put(issued["upload_url"], data=data, headers=issued["headers"], timeout=10)
    assert put.status_code == 200, put.text
    return issued


def invoke(stack: RunningStack, event: dict[str, Any]) -> None:
    url = f"{stack.lambda_url}/2015-03-31/functions/IngestFunction/invocations"
    response = requests.post(url, json=event, timeout=60)
    assert response.status_code == 200 and "X-Amz-Function-Error" not in response.headers, response.text


def test_replay_storm_during_concurrent_uploads(stack: RunningStack) -> None:
    wait_until(lambda: settled(stack) and nothing_to_reap(stack), timeout=150)
    start = totals(stack)
    run = uuid.uuid4().hex[:8]
    contents = [f"{run} content {i}\n".encode() * (50 + i) for i in range(6)]
    # first wave: every content once or twice, plus a direct put into the prefix (aws s3 cp)
    first = [upload(stack, contents[i % 4], f"first-{i}.txt") for i in range(6)]
    direct_key = f"uploads/{run} direct copy.txt"
    stack.client("s3").put_object(Bucket=stack.bucket, Key=direct_key, Body=contents[0])
    wait_until(lambda: settled(stack), timeout=60)
    keys = [a["key"] for a in first] + [direct_key]

    # the storm: 8 threads — new uploads (new and known content, some hash-first) while every event so far is
    # replayed 10 times through the queue and through the invoke API
    sqs = stack.client("sqs")
    sqs_lock = threading.Lock()
    uploads_done: list[dict[str, Any]] = []

    def replay(key: str) -> None:
        event = notification(stack.bucket, key)
        with sqs_lock:
            sqs.send_message(QueueUrl=stack.ingest_queue_url, MessageBody=json.dumps(event))
        invoke(stack, event)

    def new_upload(i: int) -> None:
        uploads_done.append(upload(stack, contents[i % 6], f"storm-{i}.txt", precheck=i % 3 == 0))

    jobs = [(replay, key) for key in keys for _ in range(10)] + [(new_upload, i) for i in range(12)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        for future in [pool.submit(fn, arg) for fn, arg in jobs]:
            future.result()
    wait_until(lambda: settled(stack), timeout=120)

    end = totals(stack)
    uploads = 6 + 1 + 12  # first wave, the direct put, the storm (409 prechecks included)
    distinct = 6
    assert end["total_uploads"] - start["total_uploads"] == uploads
    assert end["total_files"] - start["total_files"] == distinct
    assert end["duplicates_avoided"] - start["duplicates_avoided"] == uploads - distinct
    saved = (
        sum(len(contents[i % 4]) for i in range(6)) + len(contents[0]) + sum(len(contents[i % 6]) for i in range(12))
    )
    saved -= sum(len(c) for c in contents)
    assert end["total_s3_size_saved"] - start["total_s3_size_saved"] == saved

    # one stored object per content: every duplicate's bytes are gone
    listing = stack.client("s3").list_objects_v2(Bucket=stack.bucket, Prefix="uploads/")["Contents"]
    ours = {o["Key"] for o in listing} & ({a["key"] for a in first + uploads_done if "key" in a} | {direct_key})
    assert len(ours) == distinct

    # every outcome published exactly once (docs/events/): counts equal the counters' and no event_id twice
    digests = {hashlib.sha256(c).hexdigest() for c in contents}
    upload_ids = {a["upload_id"] for a in first + uploads_done}
    events: list[dict[str, Any]] = []

    def ours() -> list[dict[str, Any]]:
        take_events(stack, events)
        return [
            e
            for e in events
            if e["detail"].get("upload_id") in upload_ids
            or (e["detail-type"] == "File Stored" and e["detail"]["sha256"] in digests)
        ]

    wait_until(lambda: len(ours()) >= distinct + 18, timeout=60)  # 6 contents stored, 18 upload records
    mine = ours()
    kinds = [e["detail-type"] for e in mine]
    assert kinds.count("File Stored") == end["total_files"] - start["total_files"] == distinct
    stored_uploads, deduplicated = kinds.count("Upload Stored"), kinds.count("Upload Deduplicated")
    assert stored_uploads + deduplicated == 18
    # the direct put has no upload record: when its object became the stored copy, every upload is a duplicate
    assert deduplicated == end["duplicates_avoided"] - start["duplicates_avoided"] - (stored_uploads - 5)
    ids = [e["detail"]["event_id"] for e in mine]
    assert len(ids) == len(set(ids)) == distinct + 18

    # and the operator's tool agrees
    audit_run = run_audit(stack)
    assert audit_run.returncode == 0, audit_run.stdout + audit_run.stderr
    assert "BROKEN" not in audit_run.stdout and audit_run.stdout.count("holds") >= 4


def test_poison_message_reaches_the_dlq_and_nothing_else_is_lost(stack: RunningStack) -> None:
    sqs = stack.client("sqs")
    poison = f"poison {uuid.uuid4().hex}: not an S3 notification"
    sqs.send_message(QueueUrl=stack.ingest_queue_url, MessageBody=poison)
    data = f"survivor {uuid.uuid4().hex}".encode()
    issued = upload(stack, data, "survivor.txt")

    def dead_lettered() -> bool:
        got = sqs.receive_message(QueueUrl=stack.dlq_url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
        for message in got.get("Messages", []):
            sqs.delete_message(QueueUrl=stack.dlq_url, ReceiptHandle=message["ReceiptHandle"])
            if message["Body"] == poison:
                return True
        return False

    wait_until(dead_lettered, timeout=90, interval=0.5)

    def survivor() -> dict[str, Any]:
        answer: dict[str, Any] = requests.get(
            f"{stack.api_url}/metadata/{issued['upload_id']}", headers=stack.auth("alice"), timeout=10
        ).json()
        return answer

    wait_until(lambda: survivor()["status"] != "pending", timeout=30)
    meta = survivor()
    assert meta["status"] == "stored" and meta["hash"] == hashlib.sha256(data).hexdigest(), meta
    wait_until(lambda: settled(stack), timeout=60)
