"""Objects hashed across invocations on the local stack: the segment workflow (statemachine/segments.asl.json) runs
on moto's interpreter, one SegmentFunction invocation per segment, the threshold and the segment budget lowered
(SegmentThresholdBytes, SegmentBytes) so that a 1 GiB object takes 32 segments. The digest is hashlib's; GET
/metadata shows the bytes hashed while it runs; a duplicate of a huge object is counted and its bytes deleted
once; a SIGKILL of the whole stack mid-way, then a start on the same data, resumes the execution and the object
ends stored exactly once (scripts/audit clean); an object overwritten while it is hashed ends superseded, never
committed under the first version's hash. One stack lineage per module: the kill test's restart serves the tests
after it."""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import signal
import socket
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests

from tests.e2e.e2e_helpers import (
    ROOT,
    RunningStack,
    clean_env,
    launch_stack,
    run_audit,
    settled,
    stop_stack,
    wait_until,
)
from tests.e2e.openapi_check import validating_responses

pytestmark = pytest.mark.e2e

MIB = 1024 * 1024
GIB = 1024 * MIB
THRESHOLD = 64 * MIB  # SegmentThresholdBytes: above it, hashed in segments
SEGMENT = 32 * MIB  # SegmentBytes: a 1 GiB object takes 32 segments
HASHED = 600.0  # seconds a huge object may take from its completion to stored, on a loaded machine
PUT_WORKERS = 4


@dataclass
class Lineage:
    """The module's stack: the kill test replaces it with the start that follows the kill."""

    base: Path
    data: Path
    stack: RunningStack
    starts: int = 1


def launch(base: Path, data: Path, name: str) -> RunningStack:
    work = base / name
    work.mkdir()
    command = [sys.executable, "-m", "dfdlocal", "--host", "127.0.0.1", "--api-port", "0", "--lambda-port", "0"]
    command += ["--aws-port", "0", "--ready-file", str(work / "ready.json")]
    command += ["--param", f"SegmentThresholdBytes={THRESHOLD}", "--param", f"SegmentBytes={SEGMENT}"]
    command += ["--param", "TenantQuotaBytes=0"]  # the tests store a few GiB for one tenant
    env = clean_env() | {"DFD_DATA_DIR": str(data), "DFD_RECONCILE_INTERVAL": "0"}
    return launch_stack(command, cwd=ROOT, env=env, workdir=work)


@pytest.fixture(scope="module")
def lineage(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lineage]:
    base = tmp_path_factory.mktemp("dfdlocal-segments")
    data = base / "data"
    held = Lineage(base, data, launch(base, data, "start-1"))
    # the first start's API responses are checked against docs/openapi.yaml (GET /metadata's hashing among them)
    with validating_responses(held.stack.api_url) as checker:
        yield held
    stop_stack(held.stack)
    if checker.failures:
        pytest.fail(f"{len(checker.failures)} API response(s) broke docs/openapi.yaml:\n" + "\n".join(checker.failures))


def content(seed: int, size: int) -> bytes:
    rng = random.Random(seed)
    return b"".join(rng.randbytes(min(16 * MIB, size - at)) for at in range(0, size, 16 * MIB))


def call(stack: RunningStack, method: str, path: str, user: str = "alice", **kw: Any) -> requests.Response:
    return requests.request(method, stack.api_url + path, headers=stack.auth(user), timeout=60, **kw)


def upload(stack: RunningStack, data: bytes, user: str = "alice") -> dict[str, Any]:
    """POST /upload (no sha256: nothing S3 checked stands for the hash), every part PUT, the upload completed."""
    created = call(stack, "POST", "/upload", user, json={"filename": "huge.bin", "size": len(data)})
    assert created.status_code == 201, created.text
    answer: dict[str, Any] = created.json()
    assert answer["multipart"] is True, answer
    upload_id, size, count = answer["upload_id"], answer["part_size"], answer["part_count"]
    view = memoryview(data)
    numbers = list(range(1, count + 1))
    parts: dict[int, dict[str, Any]] = {}
    for first in range(0, count, 100):
        wanted = [{"part_number": n} for n in numbers[first : first + 100]]
        presigned = call(stack, "POST", f"/uploads/{upload_id}/parts", user, json={"parts": wanted})
        assert presigned.status_code == 200, presigned.text
        parts.update({part["part_number"]: part for part in presigned.json()["parts"]})

    def put(number: int) -> None:
        part = parts[number]
        body = view[(number - 1) * size : number * size]
        sent = requests.put(part["url"], data=bytes(body), headers=part["headers"], timeout=120)
        assert sent.status_code == 200, sent.text

    with ThreadPoolExecutor(PUT_WORKERS) as pool:
        list(pool.map(put, numbers))
    completed = call(stack, "POST", f"/uploads/{upload_id}/complete", user)
    assert completed.status_code == 202, completed.text
    return answer


def metadata(stack: RunningStack, upload_id: str, user: str = "alice") -> dict[str, Any]:
    answer = call(stack, "GET", f"/metadata/{upload_id}", user)
    assert answer.status_code == 200, answer.text
    document: dict[str, Any] = answer.json()
    return document


def hashing_state(stack: RunningStack, key: str) -> dict[str, Any] | None:
    """The hashing state item of the version of `key` (the Events table's hashing#<event key>), plain values."""
    pages = (
        stack.client("dynamodb")
        .get_paginator("scan")
        .paginate(
            TableName=stack.events_table,
            FilterExpression="begins_with(event_key, :h) AND #k = :k",
            ExpressionAttributeNames={"#k": "key"},
            ExpressionAttributeValues={":h": {"S": "hashing#"}, ":k": {"S": key}},
            ConsistentRead=True,
        )
    )
    for page in pages:
        for item in page["Items"]:
            return {name: next(iter(value.values())) for name, value in item.items()}
    return None


def executions(stack: RunningStack, event_key: str) -> list[dict[str, Any]]:
    """The segment workflow's executions of a version (named h-<sha256 of its event key>[-<run>])."""
    sfn = stack.client("stepfunctions")
    arn = stack.description["state_machines"]["SegmentStateMachine"]
    name = "h-" + hashlib.sha256(event_key.encode()).hexdigest()
    listed = sfn.list_executions(stateMachineArn=arn)["executions"]
    return [sfn.describe_execution(executionArn=e["executionArn"]) for e in listed if e["name"].startswith(name)]


def stats(stack: RunningStack) -> dict[str, Any]:
    answer = requests.get(f"{stack.api_url}/admin/stats", headers=stack.auth("admin"), timeout=30)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def object_exists(stack: RunningStack, key: str) -> bool:
    try:
        stack.client("s3").head_object(Bucket=stack.bucket, Key=key)
    except stack.client("s3").exceptions.ClientError as error:
        if error.response["Error"]["Code"] in ("404", "NoSuchKey", "NotFound"):
            return False
        raise
    return True


def wait_stored(stack: RunningStack, upload_id: str, seen: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """GET /metadata until the upload is no longer pending; each `hashing` it showed meanwhile into `seen`."""
    deadline = time.monotonic() + HASHED
    while True:
        document = metadata(stack, upload_id)
        if document["status"] != "pending":
            return document
        if seen is not None and "hashing" in document:
            seen.append(document["hashing"])
        assert time.monotonic() < deadline, f"still pending after {HASHED:g} s: {document}\n{stack.logs()}"
        time.sleep(0.2)


def port_closed(url: str) -> bool:
    parts = urlsplit(url)
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex((parts.hostname or "127.0.0.1", parts.port or 80)) != 0


# --------------------------------------------------------------------------------------------------------
def test_local_stack_runs_the_segment_workflow_the_ingest_starts(lineage: Lineage) -> None:
    stack = lineage.stack
    machines = stack.description["state_machines"]
    assert set(machines) == {"ReconcileStateMachine", "SegmentStateMachine"}
    found = stack.client("stepfunctions").describe_state_machine(stateMachineArn=machines["SegmentStateMachine"])
    assert json.loads(found["definition"])["StartAt"] == "Segment"
    assert stack.description["environment"]["SEGMENT_STATE_MACHINE_ARN"] == machines["SegmentStateMachine"]
    assert stack.description["environment"]["SEGMENT_THRESHOLD_BYTES"] == str(THRESHOLD)


def test_a_huge_object_is_hashed_in_segments_to_hashlib_s_digest_its_progress_shown(lineage: Lineage) -> None:
    stack = lineage.stack
    data = content(1, GIB)
    digest = hashlib.sha256(data).hexdigest()
    answer = upload(stack, data)
    seen: list[dict[str, Any]] = []
    document = wait_stored(stack, answer["upload_id"], seen)
    assert document["status"] == "stored" and document["hash"] == digest and document["size"] == GIB, document
    # while it ran, GET /metadata said how far the hashing was, in bytes of the whole
    assert seen, "GET /metadata never showed the hashing"
    assert all(shown["total_bytes"] == GIB and 0 <= shown["hashed_bytes"] < GIB for shown in seen), seen
    assert any(shown["hashed_bytes"] > 0 for shown in seen), seen
    assert [s["hashed_bytes"] for s in seen] == sorted(s["hashed_bytes"] for s in seen)
    state = hashing_state(stack, answer["key"])
    assert state is not None and state["digest"] == digest
    assert int(state["segments"]) >= 8, state
    (execution,) = executions(stack, state["event_key"].removeprefix("hashing#"))
    assert execution["status"] == "SUCCEEDED"
    assert json.loads(execution["output"]) | {"event_key": None} == {
        "event_key": None,
        "outcome": "done",
        "hashed": GIB,
        "size": GIB,
        "ingest": "stored",
    }


def test_a_duplicate_of_a_huge_object_is_counted_and_its_bytes_deleted_once(lineage: Lineage) -> None:
    stack = lineage.stack
    data = content(4, 8 * SEGMENT)
    first = upload(stack, data)
    assert wait_stored(stack, first["upload_id"])["status"] == "stored"
    before = stats(stack)
    answer = upload(stack, data)
    document = wait_stored(stack, answer["upload_id"])
    assert document["status"] == "duplicate" and document["hash"] == hashlib.sha256(data).hexdigest(), document
    assert not object_exists(stack, answer["key"])  # the duplicate's bytes, deleted; the stored copy's kept
    assert object_exists(stack, first["key"])
    after = stats(stack)
    assert after["total_files"] == before["total_files"], (before, after)
    assert after["total_bytes_stored"] == before["total_bytes_stored"], (before, after)
    assert after["total_uploads"] == before["total_uploads"] + 1, (before, after)
    assert after["duplicates_avoided"] == before["duplicates_avoided"] + 1, (before, after)
    assert after["total_s3_size_saved"] == before["total_s3_size_saved"] + len(data), (before, after)
    state = hashing_state(stack, answer["key"])
    assert state is not None and int(state["segments"]) >= 8
    (execution,) = executions(stack, state["event_key"].removeprefix("hashing#"))
    assert json.loads(execution["output"])["ingest"] == "duplicate"
    assert settled(stack)


def test_a_sigkill_mid_hashing_resumes_after_the_restart_and_stores_once(lineage: Lineage) -> None:
    first = lineage.stack
    data = content(2, GIB)
    digest = hashlib.sha256(data).hexdigest()
    before = stats(first)  # the counters are on disk: the restart finds them
    answer = upload(first, data)

    def midway() -> int | None:
        shown = metadata(first, answer["upload_id"]).get("hashing")
        hashed = int(shown["hashed_bytes"]) if shown else 0
        return hashed if 2 * SEGMENT <= hashed < GIB - 8 * SEGMENT else None

    shown_before = wait_until(midway, timeout=HASHED, interval=0.1)
    os.killpg(first.process.pid, signal.SIGKILL)  # the whole stack: emulator, functions, DynamoDB Local
    first.process.wait(10)
    wait_until(lambda: port_closed(first.description["dynamodb_url"]), timeout=20)
    lineage.starts += 1
    second = launch(lineage.base, lineage.data, f"start-{lineage.starts}")
    lineage.stack = second
    document = wait_stored(second, answer["upload_id"])
    assert document["status"] == "stored" and document["hash"] == digest, document
    state = hashing_state(second, answer["key"])
    assert state is not None and state["digest"] == digest and int(state["run"]) == 0, state
    # the execution that died with the stack was started again by the new start, under its own name, and went on
    # from the state it had stored: the new start's first segment began past what GET /metadata showed before
    logs = second.log_path.read_text(errors="replace")
    assert "1 Step Functions execution(s) of the last start resumed" in logs
    (execution,) = executions(second, state["event_key"].removeprefix("hashing#"))
    assert execution["status"] == "SUCCEEDED" and json.loads(execution["output"])["ingest"] == "stored"
    offsets = [int(found) for found in re.findall(r"segment hashed .*? hashed=(\d+) ", logs)]
    assert offsets and offsets[0] >= shown_before + SEGMENT and offsets == sorted(offsets), (shown_before, offsets)
    # stored exactly once: one more file of its size, counted once
    after = stats(second)
    assert after["total_files"] == before["total_files"] + 1, (before, after)
    assert after["total_bytes_stored"] == before["total_bytes_stored"] + GIB, (before, after)
    wait_until(lambda: settled(second), timeout=180, interval=1.0)
    audit = run_audit(second)
    assert audit.returncode == 0, audit.stdout + audit.stderr


def test_an_object_overwritten_while_hashed_ends_superseded_never_committed(lineage: Lineage) -> None:
    stack = lineage.stack
    data = content(3, 10 * SEGMENT)
    digest = hashlib.sha256(data).hexdigest()
    answer = upload(stack, data)

    def started() -> dict[str, Any] | None:
        state = hashing_state(stack, answer["key"])
        return state if state is not None and 0 < int(state["hashed"]) <= len(data) // 2 else None

    state = wait_until(started, timeout=HASHED, interval=0.05)
    # a new version at the upload's key (S3's own write: If-None-Match does not bind this caller)
    stack.client("s3").put_object(Bucket=stack.bucket, Key=answer["key"], Body=b"another version")
    event_key = state["event_key"].removeprefix("hashing#")

    def ended() -> list[dict[str, Any]] | None:
        found = executions(stack, event_key)
        return found if found and all(e["status"] != "RUNNING" for e in found) else None

    (execution,) = wait_until(ended, timeout=HASHED, interval=0.5)
    assert execution["status"] == "SUCCEEDED"
    assert json.loads(execution["output"])["outcome"] == "superseded", execution["output"]
    final = hashing_state(stack, answer["key"])
    assert final is not None and final.get("digest") is None
    # nothing was committed under the first version's hash
    assert call(stack, "GET", f"/metadata/{digest}", "admin").status_code == 404
    document = metadata(stack, answer["upload_id"])
    assert document.get("hash") != digest, document
