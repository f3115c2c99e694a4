"""The events-out pipeline for integration tests: the template's stream sources read as the local stack's mapping
reads them (dfdlocal.streams), the publisher hosted by dfdlocal's runtime, every event routed to `dfd-events`."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

from dfdlocal.runtime import Runtime
from dfdlocal.streams import StreamPoller, patch_moto_streams, route_events
from dfdlocal.template import LocalModel

ROOT = Path(__file__).resolve().parents[2]


def in_process_client(service: str) -> Any:
    """A client of the test's services: in-process moto, DynamoDB and its streams on DynamoDB Local (the ``aws``
    fixture's AWS_ENDPOINT_URL_DYNAMODB*); DynamoDB Streams at its regional endpoint otherwise (botocore would send
    its calls to <account>.streams-ddb..., which moto does not answer)."""
    config = Config(account_id_endpoint_mode="disabled") if service == "dynamodbstreams" else None
    return boto3.client(service, config=config)  # type: ignore[call-overload]


class Outbox:
    def __init__(self, model: LocalModel, client: Any) -> None:
        patch_moto_streams()
        self.sqs = client("sqs")
        self.runtime = Runtime(model.functions, ROOT)
        _, self.queue_url = route_events(model.event_buses, client)
        self.pollers = [
            StreamPoller(s, model.tables[s.table_logical_id].name, self.runtime.invoke, client, sleep=lambda _: None)
            for s in model.stream_sources
        ]
        for poller in self.pollers:
            poller.open()
        self.received: list[dict[str, Any]] = []

    def publish(self) -> list[dict[str, Any]]:
        """Run the mappings until the streams are read to their end; the events delivered meanwhile."""
        for _ in range(1000):
            if sum(poller.poll_once() for poller in self.pollers) == 0 and not any(p._pending for p in self.pollers):
                break
        got: list[dict[str, Any]] = []
        while messages := self.sqs.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=10).get("Messages"):
            for message in messages:
                got.append(json.loads(message["Body"]))
                self.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"])
        self.received += got
        return got


def kinds(events: list[dict[str, Any]]) -> Counter[str]:
    return Counter(event["detail-type"] for event in events)
