"""Events out for what the reconcile workflow and its reaper write (Step Functions SDK integrations, no dfd code):
the tables' streams carry their changes like any other, so an expired upload and a reaped content are published
once, and a run that changes nothing publishes nothing."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from dfdlocal.runtime import Runtime
from dfdlocal.streams import StreamPoller, patch_moto_streams, route_events
from tests.integration.test_deletes import delete
from tests.integration.test_reconcile import Local, emulator, later, local

__all__ = ["emulator", "local"]  # the fixtures

ROOT = Path(__file__).resolve().parents[2]


def published(local: Local, pollers: list[StreamPoller], queue: str) -> Counter[str]:
    for _ in range(1000):
        if sum(poller.poll_once() for poller in pollers) == 0:
            break
    kinds: Counter[str] = Counter()
    while messages := local.sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10).get("Messages"):
        for message in messages:
            event: dict[str, Any] = json.loads(message["Body"])
            kinds[event["detail-type"]] += 1
            local.sqs.delete_message(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"])
    return kinds


def test_expired_uploads_and_reaped_contents_are_published_once(local: Local) -> None:
    patch_moto_streams()
    model = local.emulator.model
    _, queue = route_events(model.event_buses, local.emulator.client)
    runtime = Runtime(model.functions, ROOT)
    pollers = [
        StreamPoller(
            s, model.tables[s.table_logical_id].name, runtime.invoke, local.emulator.client, sleep=lambda _: None
        )
        for s in model.stream_sources
    ]
    for poller in pollers:
        poller.open()

    answer = local.upload(b"reaped, then published\n" * 40)
    local.deliver()
    assert delete(answer["upload_id"])[0] == 204
    abandoned = local.register(b"never uploaded")
    assert published(local, pollers, queue) == {"Upload Stored": 1, "File Stored": 1, "Upload Deleted": 1}

    summary = local.run(now=later(hours=2))  # past the URL's expiry and the delete's grace period
    assert summary["expired"] == 1, summary
    assert local.upload_item(abandoned["upload_id"])["status"] == "expired"
    assert published(local, pollers, queue) == {"Upload Expired": 1, "File Removed": 1}
    local.assert_invariants()

    local.run(now=later(hours=3))  # nothing left to do: nothing published
    assert published(local, pollers, queue) == {}
