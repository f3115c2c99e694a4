"""The reconcile workflow: statemachine/reconcile.asl.json executed by moto's Step Functions interpreter.

moto runs here as a server (the local stack's emulator, in a thread); the executions' lambda:invoke tasks run
ReconcileFunction on the local runtime behind Lambda's Invoke API (another thread), whose clients go through the
same DynamoDB serialization as `make run`. Tables, bucket, notification and queues come from template.yaml, the
state machine from the template's DefinitionUri and DefinitionSubstitutions. The ingest function runs in-process
on what the queue holds.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from types import SimpleNamespace
from typing import Any
from urllib.parse import unquote_plus

import pytest
import requests

from dfd import deps
from dfd.core import clock
from dfd.core.config import MIB
from dfd.handlers import metadata, upload
from dfd.handlers import multipart as parts_handler
from dfdlocal import reconcile
from dfdlocal.names import RECONCILE_STATE_MACHINE
from dfdlocal.template import TEMPLATE, load_template
from dfdtools import reconcile as reconcile_tool
from tests.integration.support import ALICE_CLAIMS as ALICE
from tests.integration.support import Local, as_user, later, metric_sums
from tests.support import api_event, call


def nothing(summary: dict[str, Any]) -> bool:
    counts = (summary["redriven"], summary["expired"], summary["failed"], summary["orphans"])
    return counts == (0, 0, 0, 0) and summary["drift"] == {
        "files": 0,
        "bytes": 0,
    }


# --------------------------------------------------------------------------------------------------------
def test_empty_stack_reports_nothing(local: Local) -> None:
    summary = local.run()
    assert nothing(summary), summary
    assert summary["executions"] == 1
    assert local.drain() == []


def test_lost_notification_is_replayed_and_ingested(local: Local) -> None:
    data = b"lost notification\n" * 100
    answer = local.upload(data, "lost.txt")
    assert local.drain(), "S3 sent its notification"  # ... and it is lost
    assert local.audit().ok is False  # an uploaded object nobody ingested

    summary = local.run(now=later(hours=1))
    assert summary["redriven"] == 1 and summary["expired"] == 0 and summary["orphans"] == 0, summary
    (replay,) = local.deliver()
    (record,) = replay["Records"]
    assert record["eventSource"] == "aws:s3" and record["eventName"] == "ObjectCreated:Put"
    assert record["s3"]["bucket"]["name"] == local.settings.bucket
    assert unquote_plus(record["s3"]["object"]["key"]) == answer["key"]  # URL-encoded, as S3 sends keys

    item = local.upload_item(answer["upload_id"])
    assert item["status"] == "stored" and "pending_shard" not in item
    local.assert_invariants()
    # the upload left the pending index: the next run finds nothing to do
    before = local.snapshot()
    assert nothing(local.run(now=later(hours=1)))
    assert local.drain() == [] and local.snapshot() == before


def test_upload_whose_ingest_never_completes_becomes_failed(local: Local) -> None:
    """Every re-drive is dead-lettered (a poison object, a broken deployment): after ReconcileMaxRedrives
    re-drives the upload is marked failed and left alone; a later DLQ redrive still stores it."""
    max_redrives = int(load_template(TEMPLATE)["Parameters"]["ReconcileMaxRedrives"]["Default"])
    answer = local.upload(b"never ingested\n" * 50, "poison.bin")
    (original,) = local.drain()  # lost
    for attempt in range(1, max_redrives + 1):
        summary = local.run(now=later(hours=attempt))
        assert summary["redriven"] == 1 and summary["failed"] == 0, summary
        assert len(local.drain()) == 1  # ... and dead-lettered: never ingested
        assert int(local.upload_item(answer["upload_id"])["redrives"]) == attempt

    summary = local.run(now=later(hours=max_redrives + 1))
    assert summary["failed"] == 1 and summary["redriven"] == 0 and summary["orphans"] == 0, summary
    assert local.drain() == []
    item = local.upload_item(answer["upload_id"])
    assert item["status"] == "failed" and "pending_shard" not in item
    assert f"re-driven {max_redrives} times" in item["failure"]
    status, shown = call(metadata.handler, api_event("GET", f"/metadata/{answer['upload_id']}"))
    assert status == 200 and shown["status"] == "failed" and shown["failure"] == item["failure"], shown

    assert nothing(local.run(now=later(hours=max_redrives + 2)))  # neither the pending pass nor the sweep
    assert local.drain() == []

    local.sqs.send_message(QueueUrl=local.queue_url, MessageBody=original)  # the operator redrives the DLQ
    local.deliver()
    assert local.upload_item(answer["upload_id"])["status"] == "stored"
    local.assert_invariants()


def test_replay_after_the_original_event_changes_nothing(local: Local) -> None:
    """A slow notification: reconcile replays it, then the original arrives too. One ingest counts."""
    answer = local.upload(b"slow" * 1000)
    original = local.drain()
    assert local.run(now=later(hours=1))["redriven"] == 1
    local.sqs.send_message(QueueUrl=local.queue_url, MessageBody=original[0])
    assert len(local.deliver()) == 2
    assert local.upload_item(answer["upload_id"])["status"] == "stored"
    local.assert_invariants()


def test_abandoned_upload_expires_and_a_fresh_one_is_left_alone(local: Local, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECONCILE_GRACE_SECONDS", "60")
    monkeypatch.setenv("UPLOAD_URL_EXPIRES", "3600")
    deps.reset()
    abandoned = local.register(b"never uploaded")
    # past the grace period but the URL is still valid: the client may still upload
    assert nothing(local.run(now=later(minutes=10)))
    assert local.upload_item(abandoned["upload_id"])["status"] == "pending"

    summary = local.run(now=later(hours=2))  # past the URL's expiry, no object
    assert summary["expired"] == 1 and summary["redriven"] == 0, summary
    item = local.upload_item(abandoned["upload_id"])
    assert item["status"] == "expired" and "pending_shard" not in item and "expired_at" in item
    assert "ttl" in item  # still cleaned up by TTL
    local.assert_invariants()
    before = local.snapshot()
    assert nothing(local.run(now=later(hours=2)))
    assert local.snapshot() == before


def test_pending_uploads_are_found_with_the_run_s_own_clock(local: Local) -> None:
    """No `now` in the input: the function's own clock, in the format the index holds (one format everywhere)."""
    due = local.upload(b"due" * 10)
    not_yet = local.upload(b"not yet" * 10)
    local.drain()
    for answer, moved in ((due, -1), (not_yet, +1)):
        local.ddb.update_item(
            TableName=local.settings.uploads_table,
            Key={"upload_id": {"S": answer["upload_id"]}},
            UpdateExpression="SET reconcile_after = :t",
            ExpressionAttributeValues={":t": {"S": later(hours=moved)}},
        )
    summary = local.run()
    assert summary["redriven"] == 1, summary
    (replay,) = local.deliver()
    assert replay["Records"][0]["s3"]["object"]["key"] == due["key"]


def test_orphan_object_is_ingested(local: Local) -> None:
    bucket, prefix = local.settings.bucket, local.settings.upload_prefix
    local.s3.put_object(Bucket=bucket, Key=f"{prefix}direct/put-1.bin", Body=b"put while notifications were off")
    local.s3.put_object(Bucket=bucket, Key=f"{prefix}folder/", Body=b"")  # a "folder": never ingested
    local.s3.put_object(Bucket=bucket, Key="elsewhere/x.bin", Body=b"outside the prefix")
    local.drain()

    summary = local.run()
    assert summary["orphans"] == 1 and summary["redriven"] == 0, summary
    (replay,) = local.deliver()
    assert replay["Records"][0]["s3"]["object"]["key"] == f"{prefix}direct/put-1.bin"
    files = local.ddb.scan(TableName=local.settings.files_table)["Items"]
    assert [f["s3_key"]["S"] for f in files] == [f"{prefix}direct/put-1.bin"]

    local.s3.delete_object(Bucket=bucket, Key=f"{prefix}folder/")
    local.assert_invariants()
    before = local.snapshot()
    assert nothing(local.run())
    assert local.drain() == [] and local.snapshot() == before


def test_leftover_bytes_of_a_committed_duplicate_are_deleted(local: Local) -> None:
    """A duplicate committed, then the function died before deleting its bytes and the message was lost
    (dead-lettered, expired): the sweep re-drives the object and the ingest's replay path deletes it."""
    first = local.upload(b"same bytes" * 10, "first")
    local.deliver()  # on its own: the records of one batch are ingested concurrently, in no set order
    second = local.upload(b"same bytes" * 10, "second")
    local.deliver()
    assert local.upload_item(second["upload_id"])["status"] == "duplicate"
    local.s3.put_object(Bucket=local.settings.bucket, Key=second["key"], Body=b"same bytes" * 10)  # the leftover
    local.drain()
    assert not local.audit().ok

    summary = local.run()
    assert summary["orphans"] == 1, summary
    local.deliver()
    keys = [o["Key"] for o in local.s3.list_objects_v2(Bucket=local.settings.bucket)["Contents"]]
    assert keys == [first["key"]]
    local.assert_invariants()
    assert nothing(local.run())


def test_orphan_keys_with_spaces_and_non_ascii_characters(local: Local) -> None:
    key = "uploads/direct/my notes é 1.txt"
    local.s3.put_object(Bucket=local.settings.bucket, Key=key, Body=b"notes")
    local.drain()
    assert local.run()["orphans"] == 1
    (replay,) = local.deliver()
    assert unquote_plus(replay["Records"][0]["s3"]["object"]["key"]) == key  # URL-encoded, as S3 sends keys
    local.assert_invariants()


def test_orphan_key_with_plus_and_percent(local: Local) -> None:
    key = "uploads/direct/a+b%20c.txt"
    local.s3.put_object(Bucket=local.settings.bucket, Key=key, Body=b"plus")
    local.drain()
    assert local.run()["orphans"] == 1
    local.deliver()
    local.assert_invariants()


def test_processed_and_pending_uploads_are_not_orphans(local: Local) -> None:
    stored = local.upload(b"stored" * 10)
    local.deliver()
    local.upload(b"pending" * 10)
    local.drain()  # lost, but young: the pending pass owns it after its grace period
    # the Events items expire (TTL): a stored object is known through its upload, which carries its event
    for item in local.ddb.scan(TableName=local.settings.events_table)["Items"]:
        if not item["event_key"]["S"].startswith("claim#"):
            local.ddb.delete_item(TableName=local.settings.events_table, Key={"event_key": item["event_key"]})
    summary = local.run()
    assert summary["orphans"] == 0 and summary["redriven"] == 0, summary
    assert local.upload_item(stored["upload_id"])["status"] == "stored"


def test_corrupted_counter_shard_shows_as_drift(local: Local, capsys: pytest.CaptureFixture[str]) -> None:
    for i in range(3):
        local.upload(f"file {i}".encode() * 50, f"{i}.txt")
    local.upload(b"file 0" * 50, "again.txt")  # a duplicate
    local.deliver()
    local.assert_invariants()
    assert nothing(local.run())

    local.ddb.update_item(
        TableName=local.settings.counters_table,
        Key={"counter_id": {"S": "shard#002"}},
        UpdateExpression="ADD total_files :f, total_bytes_stored :b",
        ExpressionAttributeValues={":f": {"N": "2"}, ":b": {"N": "1000"}},
    )
    capsys.readouterr()
    summary = local.run()
    assert summary["drift"] == {"files": 2, "bytes": 1000}, summary
    emitted = metric_sums(capsys.readouterr().out)  # what CounterDriftAlarm watches, and the drift's size
    assert (emitted["CounterDriftDetected"], emitted["CounterDriftFiles"], emitted["CounterDriftBytes"]) == (1, 2, 1000)

    local.ddb.update_item(  # now under-counted
        TableName=local.settings.counters_table,
        Key={"counter_id": {"S": "shard#002"}},
        UpdateExpression="ADD total_files :f, total_bytes_stored :b",
        ExpressionAttributeValues={":f": {"N": "-3"}, ":b": {"N": "-1300"}},
    )
    assert local.run()["drift"] == {"files": -1, "bytes": -300}
    # the audit writes nothing: only the shards and the run's lease are there
    ids = {i["counter_id"]["S"] for i in local.ddb.scan(TableName=local.settings.counters_table)["Items"]}
    assert ids and all(i.startswith(("shard#", "lease#reconcile")) for i in ids)


def test_a_second_run_right_after_changes_nothing(local: Local) -> None:
    local.upload(b"one" * 100)
    local.upload(b"two" * 100)
    local.register(b"abandoned")
    local.s3.put_object(Bucket=local.settings.bucket, Key="uploads/orphan.bin", Body=b"orphan")
    local.drain()
    summary = local.run(now=later(hours=2))
    assert (summary["redriven"], summary["expired"], summary["orphans"]) == (2, 1, 1), summary
    local.deliver()
    local.assert_invariants()

    before = local.snapshot()
    assert nothing(local.run(now=later(hours=2)))
    assert local.drain() == []
    assert local.snapshot() == before


def test_pending_only_run_skips_the_sweep(local: Local) -> None:
    local.upload(b"pending" * 10)
    local.s3.put_object(Bucket=local.settings.bucket, Key="uploads/orphan.bin", Body=b"orphan")
    local.drain()
    summary = local.run(sweep=False, now=later(hours=1))
    assert summary["redriven"] == 1 and summary["orphans"] is None and summary["drift"] is None, summary
    (replay,) = local.drain()
    assert json.loads(replay)["Records"][0]["s3"]["object"]["key"] != "uploads/orphan.bin"


def test_a_run_past_its_budget_continues_in_new_executions(local: Local) -> None:
    """An execution runs at most `budget` pages, then a fresh execution carries the run on (its history stays
    bounded): the chain ends with the totals of the whole run."""
    for i in range(3):
        local.upload(f"pending {i}".encode())
    local.register(b"abandoned")
    for i in range(2):
        local.s3.put_object(Bucket=local.settings.bucket, Key=f"uploads/orphan-{i}.bin", Body=b"o%d" % i)
    local.drain()
    summary = local.run(now=later(hours=2), budget=1)
    assert (summary["redriven"], summary["expired"], summary["orphans"]) == (3, 1, 2), summary
    assert summary["drift"] == {"files": 0, "bytes": 0}
    # one page per shard of the three sharded indexes (pending, reaper, references), two of orphans (the upload prefix,
    # the drop zone), one of files; each page spends the budget, so each starts a new execution, and the last one
    # finishes the run
    pages = 3 * local.settings.pending_shards + 3
    assert summary["executions"] == pages + 1, summary
    local.deliver()
    local.assert_invariants()
    executions = local.sfn.list_executions(stateMachineArn=local.state_machine_arn)["executions"]
    assert len(executions) == summary["executions"]
    assert {e["status"] for e in executions} == {"SUCCEEDED"}


# --------------------------------------------------------------------------------------------------------
# The local stack's hook and scripts/reconcile
# --------------------------------------------------------------------------------------------------------
def test_local_stack_hook_runs_the_workflow_on_a_timer(local: Local) -> None:
    local.s3.put_object(Bucket=local.settings.bucket, Key="uploads/orphan.bin", Body=b"orphan")
    local.drain()
    local.sfn.delete_state_machine(stateMachineArn=local.state_machine_arn)
    stack = SimpleNamespace(
        model=local.emulator.model,
        aws_url=local.emulator.endpoint,
        client=local.emulator.client,
        lambda_url=local.emulator.lambda_url,
    )
    schedule = reconcile.start_reconcile_schedule(stack, interval=0.2)  # type: ignore[arg-type]
    assert schedule is not None
    try:
        assert RECONCILE_STATE_MACHINE in schedule.describe()
        deadline = time.monotonic() + 20
        while not local.drain():
            assert time.monotonic() < deadline, "the timer never re-drove the orphan"
            time.sleep(0.1)
    finally:
        schedule.stop()
        # stop() waits 5 s at most and never cuts a run short: an execution the timer started would go on in
        # moto's executor and, once the next test has reset the emulator, re-drive into that test's queue
        arn = reconcile.find_state_machine(local.sfn)
        deadline = time.monotonic() + 60
        while arn and any(
            e["status"] == "RUNNING" for e in local.sfn.list_executions(stateMachineArn=arn)["executions"]
        ):
            assert time.monotonic() < deadline, "the timer's last run did not finish"
            time.sleep(0.1)


def test_cli_creates_the_state_machine_when_absent_and_prints_the_summary(
    local: Local, capsys: pytest.CaptureFixture[str]
) -> None:
    local.upload(b"cli" * 10)
    local.drain()
    local.sfn.delete_state_machine(stateMachineArn=local.state_machine_arn)
    now = later(hours=1)
    capsys.readouterr()  # the upload handler's metrics line
    assert reconcile_tool.main(["--endpoint-url", local.emulator.endpoint, "--pending-only", "--now", now]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == {
        "redriven": 1,
        "expired": 0,
        "failed": 0,
        "reaped": 0,
        "refs_reaped": 0,
        "orphans": None,
        "drift": None,
        "snapshot": None,
        "now": now,
        "executions": 1,
    }
    assert f"created state machine {RECONCILE_STATE_MACHINE}" in err
    assert len(local.drain()) == 1
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused (no fixed port's luck)
        nobody = f"http://127.0.0.1:{closed.getsockname()[1]}"
        assert reconcile_tool.main(["--endpoint-url", nobody, "--timeout", "5"]) == 2


def test_expired_multipart_uploads_are_aborted_in_s3(local: Local, monkeypatch: pytest.MonkeyPatch) -> None:
    """Abandoned multipart uploads past their expiry: the workflow aborts the S3 multipart upload (its parts are
    freed) before marking the upload expired — also when S3 forgot it already (lifecycle rule, or never created:
    no parts call was made)."""
    monkeypatch.setenv("MULTIPART_MIN_PART_BYTES", str(5 * MIB))
    monkeypatch.setenv("MULTIPART_EXPIRES", "3600")
    deps.reset()
    part = b"p" * (5 * MIB)

    def create() -> str:
        body = {"filename": "big.bin", "size": 2 * len(part), "multipart": True}
        status, answer = call(upload.handler, as_user(api_event("POST", "/upload", body=body), ALICE))
        assert status == 201 and answer["multipart"] is True, answer
        return str(answer["upload_id"])

    def presign(upload_id: str) -> dict[str, Any]:
        event = as_user(api_event("POST", f"/uploads/{upload_id}/parts", body={"parts": [{"part_number": 1}]}), ALICE)
        event["routeKey"] = "POST /uploads/{id}/parts"
        event["pathParameters"] = {"id": upload_id}
        status, answer = call(parts_handler.handler, event)
        assert status == 200, answer
        return dict(answer["parts"][0])

    with_part, never_started, gone_from_s3 = create(), create(), create()
    first = presign(with_part)
    assert requests.put(first["url"], data=part, headers=first["headers"], timeout=30).status_code == 200
    presign(gone_from_s3)
    s3_ids = {upload_id: local.upload_item(upload_id).get("s3_upload_id") for upload_id in (with_part, gone_from_s3)}
    bucket, key_of = local.settings.bucket, {u: local.upload_item(u)["s3_key"] for u in (with_part, gone_from_s3)}
    local.s3.abort_multipart_upload(Bucket=bucket, Key=key_of[gone_from_s3], UploadId=s3_ids[gone_from_s3])
    assert "s3_upload_id" not in local.upload_item(never_started)
    held = local.s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    assert [(u["Key"], u["UploadId"]) for u in held] == [(key_of[with_part], s3_ids[with_part])]

    # before the expiry nothing happens: the client may still send its parts
    assert local.run(now=later(minutes=30))["expired"] == 0
    assert len(local.s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])) == 1

    summary = local.run(now=later(hours=2))
    assert summary["expired"] == 3 and summary["redriven"] == 0 and summary["orphans"] == 0, summary
    assert local.s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    with pytest.raises(local.s3.exceptions.NoSuchUpload):
        local.s3.list_parts(Bucket=bucket, Key=key_of[with_part], UploadId=s3_ids[with_part])
    for upload_id in (with_part, never_started, gone_from_s3):
        item = local.upload_item(upload_id)
        assert item["status"] == "expired" and "pending_shard" not in item, item
    # the owner is told the upload is over
    event = as_user(api_event("GET", f"/uploads/{with_part}/parts"), ALICE)
    event["routeKey"] = "GET /uploads/{id}/parts"
    event["pathParameters"] = {"id": with_part}
    status, answer = call(parts_handler.handler, event)
    assert status == 409 and answer["error"]["code"] == "not_pending", answer
    local.assert_invariants()
    assert nothing(local.run(now=later(hours=3)))


# --------------------------------------------------------------------------------------------------------
# Quotas and runs that never overlap
def usage_of(local: Local, tenant: str = "acme") -> dict[str, int]:
    return deps.repository().tenant_usage(tenant).as_dict()


def test_expired_and_failed_uploads_release_their_quota_bytes(local: Local, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECONCILE_GRACE_SECONDS", "60")
    deps.reset()
    abandoned = local.register(b"never uploaded" * 10)  # 140 bytes
    poison = local.upload(b"never ingested" * 5)  # 70 bytes
    local.drain()  # its notification is lost, and every re-drive is dead-lettered below
    assert usage_of(local) == {"pending_count": 2, "pending_bytes": 210, "stored_bytes": 0, "used_bytes": 210}

    max_redrives = int(load_template(TEMPLATE)["Parameters"]["ReconcileMaxRedrives"]["Default"])
    summary = local.run(now=later(hours=2))
    assert summary["expired"] == 1 and summary["redriven"] == 1, summary
    assert local.upload_item(abandoned["upload_id"])["status"] == "expired"
    assert "quota_bytes" not in local.upload_item(abandoned["upload_id"])
    assert usage_of(local) == {"pending_count": 1, "pending_bytes": 70, "stored_bytes": 0, "used_bytes": 70}
    for hours in range(3, max_redrives + 3):
        local.drain()
        local.run(now=later(hours=hours))
    assert local.upload_item(poison["upload_id"])["status"] == "failed"
    assert usage_of(local) == {"pending_count": 0, "pending_bytes": 0, "stored_bytes": 0, "used_bytes": 0}

    before = local.snapshot()
    assert nothing(local.run(now=later(hours=max_redrives + 4)))  # released once: nothing moves again
    assert local.snapshot() == before

    # an operator's DLQ redrive still ingests the failed upload: stored, its bytes counted, pending untouched
    local.sqs.send_message(
        QueueUrl=local.queue_url,
        MessageBody=json.dumps(
            {
                "Records": [
                    {
                        "eventSource": "aws:s3",
                        "s3": {"bucket": {"name": local.settings.bucket}, "object": {"key": poison["key"]}},
                    }
                ]
            }
        ),
    )
    local.deliver()
    assert local.upload_item(poison["upload_id"])["status"] == "stored"
    assert usage_of(local) == {"pending_count": 0, "pending_bytes": 0, "stored_bytes": 70, "used_bytes": 70}
    local.assert_invariants()


def hold_lease(holder: str = "another-run", seconds: float = 600) -> None:
    """Another run in progress: its lease, taken as a run takes it."""
    lease = deps.repository().take_lease(holder, clock.now(), clock.plus(clock.now(), seconds=seconds))
    assert lease.holder == holder, lease


def test_a_run_that_finds_the_lease_held_exits_and_its_sweep_runs_next(local: Local) -> None:
    """A run finding another's lease changes nothing and says so; the sweep it was asked for is noted due, and the
    next run — even a pending-only one — sweeps. An expired lease is taken over."""
    local.upload(b"lost while another run works" * 10)
    local.s3.put_object(Bucket=local.settings.bucket, Key="uploads/orphan.bin", Body=b"orphan")
    local.drain()
    hold_lease()
    assert local.run(now=later(hours=1)) == {"skipped": "another reconcile run is in progress", "executions": 1}
    assert local.drain() == []  # nothing re-driven
    deps.repository().release_lease("another-run")

    summary = local.run(sweep=False, now=later(hours=1))
    assert summary["redriven"] == 1 and summary["orphans"] == 1 and summary["drift"] == {"files": 0, "bytes": 0}
    assert len(local.drain()) == 2
    again = local.run(sweep=False, now=later(hours=1))  # swept: nothing is due any more
    assert again["orphans"] is None and again["drift"] is None, again

    hold_lease("a-run-that-died", seconds=-1)  # its lease expired
    assert "skipped" not in local.run(sweep=False)


def test_a_run_asked_for_now_waits_for_its_turn(local: Local) -> None:
    """scripts/reconcile (wait_for_turn) started while another run holds the lease does not report "skipped": it
    starts again until it runs, and prints that run's summary."""
    local.upload(b"reconciled after the turn" * 10)
    local.drain()
    waited: dict[str, Any] = {}

    def ask() -> None:
        waited["summary"] = reconcile.run_reconcile(
            local.sfn, local.state_machine_arn, 60, execution_input={"now": later(hours=1)}, wait_for_turn=True
        )

    hold_lease()
    asker = threading.Thread(target=ask)
    asker.start()
    for _ in range(2000):  # until the asker has been turned away at least once
        executions = local.sfn.list_executions(stateMachineArn=local.state_machine_arn)["executions"]
        if sum(e["status"] == "SUCCEEDED" for e in executions) >= 1:
            break
        threading.Event().wait(0.01)
    else:
        pytest.fail("the asking run was never turned away")
    deps.repository().release_lease("another-run")
    asker.join(60)
    summary = waited["summary"]
    assert "skipped" not in summary and summary["redriven"] == 1 and summary["drift"] == {"files": 0, "bytes": 0}


def test_a_failed_step_fails_the_execution_and_frees_the_lease(local: Local) -> None:
    """An error no rule answers (here: the ingest queue is gone) fails the execution with the step's error, so the
    failure alarm fires; the lease is freed at once, and the next run runs."""
    local.upload(b"cannot be re-driven" * 10)
    local.drain()
    local.sqs.delete_queue(QueueUrl=local.queue_url)
    with pytest.raises(reconcile.ReconcileError, match="FAILED"):
        local.run(now=later(hours=1))
    assert deps.repository().take_lease("next", clock.now(), clock.plus(clock.now(), seconds=60)).holder == "next"


# --------------------------------------------------------------------------------------------------------
# Lost copies: the sweep checks every file record's object
# --------------------------------------------------------------------------------------------------------
def file_item(local: Local, digest: str) -> dict[str, Any]:
    item = local.ddb.get_item(TableName=local.settings.files_table, Key={"hash": {"S": digest}}, ConsistentRead=True)
    return {k: next(iter(v.values())) for k, v in item["Item"].items()}


def test_a_healthy_file_record_is_left_untouched(local: Local, capsys: pytest.CaptureFixture[str]) -> None:
    answer = local.upload(b"healthy" * 40)
    local.deliver()
    digest = local.upload_item(answer["upload_id"])["hash"]
    before = local.snapshot()
    capsys.readouterr()
    assert nothing(local.run())
    assert file_item(local, digest).get("state", "live") == "live"  # live: no mark
    assert "LostFiles" not in metric_sums(capsys.readouterr().out)
    after = local.snapshot()
    after_ids = {i["counter_id"]["S"] for i in after[local.settings.counters_table]}
    assert after == before, (after_ids,)
    local.assert_invariants()


def test_a_file_whose_every_copy_is_gone_is_marked_lost_and_restored_by_a_new_upload(
    local: Local, capsys: pytest.CaptureFixture[str]
) -> None:
    data = b"only copy" * 30
    first = local.upload(data, "first")
    local.deliver()
    digest = local.upload_item(first["upload_id"])["hash"]
    local.s3.delete_object(Bucket=local.settings.bucket, Key=first["key"])  # lost out of band
    assert not local.audit().ok

    capsys.readouterr()
    local.run()
    item = file_item(local, digest)
    assert (item["state"], item["s3_key"]) == ("lost", first["key"]) and item["lost_at"]
    assert metric_sums(capsys.readouterr().out)["LostFiles"] == 1  # what LostFilesAlarm watches
    report = local.audit()
    assert report.ok, report.text()  # reported (listed as lost), not a silent "holds"
    assert any(digest in problem for problem in report.problems()), report.text()
    local.run()  # marked once: the next sweep neither marks nor counts it again
    assert "LostFiles" not in metric_sums(capsys.readouterr().out)
    assert file_item(local, digest)["lost_at"] == item["lost_at"]

    second = local.upload(data, "second")  # the same content again: adopted as the stored copy, kept
    local.deliver()
    item = file_item(local, digest)
    assert item["s3_key"] == second["key"] and item.get("state", "live") == "live" and "lost_at" not in item
    keys = [o["Key"] for o in local.s3.list_objects_v2(Bucket=local.settings.bucket)["Contents"]]
    assert keys == [second["key"]]
    local.assert_invariants()


def test_a_lost_copy_with_surviving_duplicate_bytes_is_repaired(local: Local) -> None:
    """The stored copy is gone, a duplicate's bytes survived (its delete never happened): the sweep re-drives
    the leftover and the ingest adopts it as the stored copy — the record moves to it, it is kept."""
    data = b"two copies" * 30
    first = local.upload(data, "first")
    local.deliver()
    second = local.upload(data, "second")
    local.deliver()
    digest = local.upload_item(first["upload_id"])["hash"]
    local.s3.put_object(Bucket=local.settings.bucket, Key=second["key"], Body=data)  # the leftover
    local.s3.delete_object(Bucket=local.settings.bucket, Key=first["key"])  # the stored copy, lost
    local.drain()

    assert local.run()["orphans"] == 1
    local.deliver()  # the replay adopts the surviving copy (also when the sweep marked the record lost)
    item = file_item(local, digest)
    assert item["s3_key"] == second["key"] and "state" not in item
    keys = [o["Key"] for o in local.s3.list_objects_v2(Bucket=local.settings.bucket)["Contents"]]
    assert keys == [second["key"]]
    local.assert_invariants()
    assert nothing(local.run())
