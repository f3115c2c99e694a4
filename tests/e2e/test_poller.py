"""The SQS event source mapping stand-in, driving test functions from queues in the stack's emulator."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from dfdlocal.emulator import QueueInfo
from dfdlocal.poller import IN_FLIGHT_SECONDS, SqsPoller
from dfdlocal.runtime import Runtime
from dfdlocal.template import FunctionDef, SqsSource
from tests.e2e.e2e_helpers import ROOT, RunningStack, wait_until

pytestmark = pytest.mark.e2e

Handler = Callable[[dict[str, Any], Any], Any]


class Harness:
    def __init__(
        self,
        stack: RunningStack,
        handler: Handler,
        *,
        max_receive: int = 2,
        concurrency: int = 1,
        in_flight: int = IN_FLIGHT_SECONDS,
    ) -> None:
        self.stack = stack
        self.sqs = stack.client("sqs")
        suffix = uuid.uuid4().hex[:8]
        self.dlq_url = self.sqs.create_queue(QueueName=f"poller-dlq-{suffix}")["QueueUrl"]
        dlq_arn = self.arn(self.dlq_url)
        redrive = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": max_receive})
        self.url = self.sqs.create_queue(
            QueueName=f"poller-{suffix}", Attributes={"VisibilityTimeout": "1", "RedrivePolicy": redrive}
        )["QueueUrl"]
        self.events: list[dict[str, Any]] = []
        self.lock = threading.Lock()

        def recording(event: dict[str, Any], context: Any) -> Any:
            with self.lock:
                self.events.append(event)
            return handler(event, context)

        runtime = Runtime({}, ROOT)
        runtime.register(FunctionDef("Fn", "tests.Fn.handler", ".", "python3.12", 30, 128, {}), recording)
        queue = QueueInfo("Q", f"poller-{suffix}", self.url, self.arn(self.url), 1, None, "Dlq", max_receive)
        source = SqsSource("Fn", "Queue", "Q", batch_size=10, report_batch_item_failures=True)
        self.poller = SqsPoller(
            source, queue, runtime, stack.client, concurrency=concurrency, in_flight_seconds=in_flight
        )

    def arn(self, url: str) -> str:
        attributes = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]
        return str(attributes["QueueArn"])

    def send(self, *bodies: str) -> None:
        for body in bodies:
            self.sqs.send_message(
                QueueUrl=self.url,
                MessageBody=body,
                MessageAttributes={"kind": {"DataType": "String", "StringValue": "test"}},
            )

    def count(self, url: str) -> int:
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesNotVisible"])

    def deliveries(self, body: str) -> list[dict[str, Any]]:
        with self.lock:
            return [record for event in self.events for record in event["Records"] if record["body"] == body]


@pytest.fixture
def harness(stack: RunningStack) -> Iterator[Callable[..., Harness]]:
    made: list[Harness] = []

    def make(handler: Handler, **options: Any) -> Harness:
        made.append(Harness(stack, handler, **options))
        return made[-1]

    yield make
    for item in made:
        item.poller.stop()


def fail_bad(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return {"batchItemFailures": [{"itemIdentifier": r["messageId"]} for r in event["Records"] if r["body"] == "bad"]}


def test_partial_failures_are_retried_then_dead_lettered(harness: Callable[..., Harness]) -> None:
    h = harness(fail_bad, max_receive=2)
    h.send("good-1", "good-2", "bad")
    h.poller.start()

    wait_until(lambda: h.count(h.dlq_url) == 1 and h.count(h.url) == 0, timeout=15)
    dead = h.sqs.receive_message(QueueUrl=h.dlq_url, MaxNumberOfMessages=10)["Messages"]
    assert [m["Body"] for m in dead] == ["bad"]
    assert len(h.deliveries("good-1")) == len(h.deliveries("good-2")) == 1
    attempts = h.deliveries("bad")
    assert [r["attributes"]["ApproximateReceiveCount"] for r in attempts] == ["1", "2"]

    record = h.deliveries("good-1")[0]
    assert record["eventSource"] == "aws:sqs"
    assert record["eventSourceARN"] == h.arn(h.url)
    assert record["awsRegion"] == "us-east-1"
    assert record["md5OfBody"] and record["receiptHandle"] and record["messageId"]
    assert record["messageAttributes"]["kind"]["stringValue"] == "test"
    assert record["messageAttributes"]["kind"]["dataType"] == "String"
    assert {"ApproximateReceiveCount", "SentTimestamp"} <= set(record["attributes"])


def test_unhandled_error_or_invalid_response_keeps_the_whole_batch(harness: Callable[..., Harness]) -> None:
    calls: list[int] = []

    def flaky(event: dict[str, Any], context: Any) -> Any:
        calls.append(len(event["Records"]))
        if len(calls) == 1:
            raise RuntimeError("first attempt fails")
        if len(calls) == 2:
            return {"batchItemFailures": [{"itemIdentifier": "not-in-this-batch"}]}
        return {"batchItemFailures": []}

    h = harness(flaky, max_receive=5)
    h.send("one")
    h.poller.start()
    wait_until(lambda: h.count(h.url) == 0 and len(calls) >= 3, timeout=15)
    time.sleep(1.5)  # one more visibility timeout: nothing comes back once deleted
    assert len(calls) == 3
    assert [r["attributes"]["ApproximateReceiveCount"] for r in h.deliveries("one")] == ["1", "2", "3"]
    assert h.count(h.dlq_url) == 0


def test_slow_invocation_is_not_redelivered_meanwhile(harness: Callable[..., Harness]) -> None:
    """The batch is received invisible for the in-flight period (here 4 s, not the default 30 s, so that the
    heartbeat must re-arm it: every 4/3 s, each beat may be late by more than 2 s on a loaded machine); another
    poller would receive it within a second of it becoming visible."""

    def slow(event: dict[str, Any], context: Any) -> dict[str, Any]:
        time.sleep(6)  # > the queue's 1 s visibility timeout and the 4 s in-flight one
        return {"batchItemFailures": []}

    h = harness(slow, concurrency=2, in_flight=4)
    h.send("slow")
    h.poller.start()
    wait_until(lambda: h.count(h.url) == 0 and h.deliveries("slow"), timeout=15)
    assert len(h.deliveries("slow")) == 1
