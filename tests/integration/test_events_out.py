"""Events out on DynamoDB Local's streams: the API and the ingest write, the tables' streams carry the committed
changes, the stream event source mapping (dfdlocal.streams) runs the publisher, EventBridge routes every event
to the local `dfd-events` queue. A storm with replays ends with event counts equal to the audit's counts and no
event_id twice; a publisher crash between two PutEvents calls re-publishes the same event_ids only."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
import requests

from dfd import deps
from dfd.adapters.eventbridge import EventBridgeSink
from dfd.handlers import ingest, publisher, upload
from tests.integration.outbox import Outbox, in_process_client, kinds
from tests.integration.support import Aws, delete
from tests.support import ALICE, BOB, CAROL, ApiUser, LambdaContext, api_event, call, sqs_batch


@pytest.fixture
def outbox(aws: Aws) -> Iterator[Outbox]:
    deps.reset()
    yield Outbox(aws.model, in_process_client)


def post(data: bytes, user: ApiUser = ALICE, **extra: Any) -> tuple[int, dict[str, Any]]:
    return call(
        upload.handler, api_event("POST", "/upload", body={"filename": "f.bin", "size": len(data), **extra}, user=user)
    )


def stored(aws: Aws, data: bytes, user: ApiUser = ALICE) -> tuple[dict[str, Any], list[str]]:
    status, answer = post(data, user)
    assert status == 201, answer
    assert requests.put(answer["upload_url"], data=data, headers=answer["headers"], timeout=10).status_code == 200
    bodies = [m["Body"] for m in aws.drain()]
    assert ingest.handler(sqs_batch(*bodies), LambdaContext()) == {"batchItemFailures": []}
    return answer, bodies


def test_each_outcome_once_counts_equal_the_audit_and_replays_publish_nothing(aws: Aws, outbox: Outbox) -> None:
    data, other = b"events out " * 100, b"another content " * 50
    _first, first_bodies = stored(aws, data)
    assert kinds(outbox.publish()) == {"Upload Stored": 1, "File Stored": 1}
    same, _ = stored(aws, data, CAROL)
    _cross, _ = stored(aws, data, BOB)
    assert kinds(outbox.publish()) == {"Upload Deduplicated": 2}
    status, _precheck = post(data, ALICE, sha256=hashlib.sha256(data).hexdigest())
    assert status == 409
    status, pending = post(other, BOB)
    assert status == 201
    assert delete(pending["upload_id"], BOB)[0] == 204  # a cancel
    assert delete(same["upload_id"], CAROL)[0] == 204
    assert kinds(outbox.publish()) == {"Upload Deduplicated": 1, "Upload Deleted": 2}

    # replays: the same S3 notifications again, the same deletes again: nothing changes, nothing is published
    for _ in range(3):
        assert ingest.handler(sqs_batch(*first_bodies), LambdaContext()) == {"batchItemFailures": []}
    assert delete(same["upload_id"], CAROL)[0] == 204
    assert outbox.publish() == []

    for i in range(6):  # a small storm: new contents and duplicates of them, interleaved
        stored(aws, f"storm {i % 3}".encode() * 100, (ALICE, BOB)[i % 2])
    outbox.publish()

    aws.assert_invariants()  # the counters below are the audit's recount
    totals = {name: 0 for name in ("total_files", "duplicates_avoided", "deleted_uploads")}
    for item in aws.ddb.scan(TableName=aws.settings.counters_table)["Items"]:
        if item["counter_id"]["S"].startswith("shard#"):
            for name in totals:
                totals[name] += int(item.get(name, {"N": "0"})["N"])
    seen = kinds(outbox.received)
    assert seen["File Stored"] == totals["total_files"] == 4
    assert seen["Upload Stored"] == 4  # every new content came from an upload
    assert seen["Upload Deduplicated"] == totals["duplicates_avoided"]
    cancelled = 1
    assert seen["Upload Deleted"] == totals["deleted_uploads"] + cancelled
    ids = [event["detail"]["event_id"] for event in outbox.received]
    assert len(ids) == len(set(ids))
    for event in outbox.received:
        assert event["source"] == "dfd"
        if event["detail-type"].startswith("Upload "):
            assert event["detail"]["tenant"] in ("acme", "globex") and event["detail"]["owner"]
        else:
            assert "tenant" not in event["detail"] and "owner" not in event["detail"]


class CrashOnce:
    """The EventBridge client of a publisher that dies on its second PutEvents call (once)."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.calls = 0

    def put_events(self, **kwargs: Any) -> Any:
        self.calls += 1
        if self.calls == 2:
            raise RuntimeError("the publisher crashed")
        return self.real.put_events(**kwargs)


def test_a_crash_between_two_events_republishes_the_same_event_ids_only(
    aws: Aws, outbox: Outbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(12):  # one batch of the Uploads stream: 12 outcomes, two PutEvents calls (10 + 2)
        stored(aws, f"content {i}".encode() * 100, ALICE)
    crashing = CrashOnce(boto3.client("events"))
    first_call: list[str] = []

    def sink() -> EventBridgeSink:
        return EventBridgeSink(crashing, publisher.BUS)

    real_put = crashing.put_events

    def watched(**kwargs: Any) -> Any:
        if crashing.calls == 0:
            first_call.extend(json.loads(entry["Detail"])["event_id"] for entry in kwargs["Entries"])
        return real_put(**kwargs)

    monkeypatch.setattr(crashing, "put_events", watched)
    monkeypatch.setattr(publisher, "sink", sink)
    events = outbox.publish()
    ids = Counter(event["detail"]["event_id"] for event in events)
    assert kinds(events) == {"Upload Stored": 12 + 10, "File Stored": 12}  # the first call's 10 twice
    assert len(ids) == 24  # every outcome, each with one id
    assert {event_id for event_id, count in ids.items() if count == 2} == set(first_call)
    assert len(first_call) == 10 and max(ids.values()) == 2


def test_content_stored_again_after_every_upload_was_deleted_is_a_new_file_event(aws: Aws, outbox: Outbox) -> None:
    data = b"stored, deleted, stored again " * 30
    first, _ = stored(aws, data)
    assert delete(first["upload_id"])[0] == 204
    again, _ = stored(aws, data, BOB)  # before the reaper: its own bytes resurrect the content (generation 2)
    events = outbox.publish()
    assert [e["detail-type"] for e in events].count("File Stored") == 2
    assert kinds(events) == {"Upload Stored": 2, "File Stored": 2, "Upload Deleted": 1}
    assert len({e["detail"]["event_id"] for e in events}) == 5
    assert {e["detail"]["upload_id"] for e in events if e["detail-type"] == "Upload Stored"} == {
        first["upload_id"],
        again["upload_id"],
    }
