"""The SQS event source mapping: long-polls a queue and invokes the function with Lambda-shaped batches.

As Lambda's event source mapping does:
- batches of up to BatchSize records, filled for up to MaximumBatchingWindowInSeconds (capped at 1 s);
- records shaped like Lambda's (messageId, receiptHandle, body, attributes, messageAttributes, md5OfBody,
  eventSource, eventSourceARN, awsRegion);
- success deletes the batch; an unhandled error deletes nothing; with ReportBatchItemFailures only the
  records not listed in ``batchItemFailures`` are deleted (an invalid list fails the whole batch);
- failed records become visible again after the queue's visibility timeout and SQS (moto) moves them to the
  dead-letter queue after maxReceiveCount receives.

Locally the polled queue's visibility timeout is short (seconds, set at creation) so retries are quick. A
batch is received with a long visibility instead (IN_FLIGHT_SECONDS, re-armed by a heartbeat while the function
runs), so a slow handler is not redelivered concurrently however loaded the machine is (Lambda avoids that with a
visibility timeout of 6x the function timeout); its failed records are then handed back with the queue's own
short timeout, and retried after it.
"""

from __future__ import annotations

import base64
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from dfdlocal.emulator import QueueInfo
from dfdlocal.names import REGION
from dfdlocal.runtime import Runtime
from dfdlocal.template import SqsSource

log = logging.getLogger("dfdlocal.poller")

WAIT_SECONDS = 1  # long-poll wait: bounds how long a stop takes
MAX_WINDOW_SECONDS = 1.0
IN_FLIGHT_SECONDS = 30  # a received batch's visibility while its invocation runs (the heartbeat re-arms it)


def lambda_record(message: dict[str, Any], queue_arn: str) -> dict[str, Any]:
    """One SQS message as Lambda's SQS event record."""
    attributes: dict[str, Any] = {}
    for name, value in (message.get("MessageAttributes") or {}).items():
        attribute: dict[str, Any] = {
            "stringListValues": list(value.get("StringListValues") or []),
            "binaryListValues": [base64.b64encode(v).decode() for v in value.get("BinaryListValues") or []],
            "dataType": value.get("DataType", "String"),
        }
        if "StringValue" in value:
            attribute["stringValue"] = value["StringValue"]
        if "BinaryValue" in value:
            attribute["binaryValue"] = base64.b64encode(value["BinaryValue"]).decode()
        attributes[name] = attribute
    record: dict[str, Any] = {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message.get("Body", ""),
        "attributes": dict(message.get("Attributes") or {}),
        "messageAttributes": attributes,
        "md5OfBody": message.get("MD5OfBody", ""),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": REGION,
    }
    if "MD5OfMessageAttributes" in message:
        record["md5OfMessageAttributes"] = message["MD5OfMessageAttributes"]
    return record


def failed_ids(result: Any, message_ids: set[str]) -> set[str] | None:
    """The records a ReportBatchItemFailures response lists, or None when it fails the whole batch."""
    if result is None or result == {} or result == "":
        return set()
    if not isinstance(result, dict):
        return None
    failures = result.get("batchItemFailures")
    if failures is None:
        return set()
    if not isinstance(failures, list):
        return None
    ids: set[str] = set()
    for failure in failures:
        identifier = failure.get("itemIdentifier") if isinstance(failure, dict) else None
        if not isinstance(identifier, str) or identifier not in message_ids:
            return None
        ids.add(identifier)
    return ids


class SqsPoller:
    """Pollers (threads) for one event source mapping."""

    def __init__(
        self,
        source: SqsSource,
        queue: QueueInfo,
        runtime: Runtime,
        client: Callable[[str], Any],
        *,
        concurrency: int,
        dead_letter_queue: str | None = None,
        in_flight_seconds: int = IN_FLIGHT_SECONDS,
    ) -> None:
        self.source = source
        self.queue = queue
        self.runtime = runtime
        self.client = client
        self.concurrency = max(1, concurrency)
        self.in_flight = max(1, in_flight_seconds, queue.visibility_timeout)
        self.dead_letter_queue = dead_letter_queue
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    @property
    def description(self) -> str:
        return f"{self.queue.name} -> {self.source.function}"

    def start(self) -> None:
        for index in range(self.concurrency):
            thread = threading.Thread(target=self._run, name=f"poller-{self.queue.name}-{index}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def stop(self, timeout: float = 15.0) -> None:
        self._stop.set()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                log.warning("%s is still running an invocation; not waiting for it", thread.name)

    def _run(self) -> None:
        sqs = self.client("sqs")
        while not self._stop.is_set():
            try:
                self.poll_once(sqs)
            except Exception as exc:
                if self._stop.is_set():
                    return
                log.warning("polling %s failed: %s; retrying in 1 s", self.queue.name, exc)
                self._stop.wait(1.0)

    # -- one batch ----------------------------------------------------------------------------------
    def receive_batch(self, sqs: Any) -> list[dict[str, Any]]:
        batch_size = max(1, self.source.batch_size)
        messages: list[dict[str, Any]] = []
        seen: set[str] = set()
        window_end: float | None = None
        while len(messages) < batch_size and not self._stop.is_set():
            wait = WAIT_SECONDS if not messages else 0
            response = sqs.receive_message(
                QueueUrl=self.queue.url,
                MaxNumberOfMessages=min(10, batch_size - len(messages)),
                WaitTimeSeconds=wait,
                VisibilityTimeout=self.in_flight,
                MessageSystemAttributeNames=["All"],
                MessageAttributeNames=["All"],
            )
            received = [m for m in response.get("Messages", []) if m["MessageId"] not in seen]
            seen.update(m["MessageId"] for m in received)
            messages.extend(received)
            if not messages:
                return []
            if window_end is None:
                window_end = time.monotonic() + min(self.source.batching_window_seconds, MAX_WINDOW_SECONDS)
            if time.monotonic() >= window_end:
                break
            if not received:
                self._stop.wait(0.05)
        return messages

    def poll_once(self, sqs: Any) -> int:
        """Receive one batch and process it; the number of messages handled."""
        messages = self.receive_batch(sqs)
        if not messages:
            return 0
        records = [lambda_record(message, self.queue.arn) for message in messages]
        heartbeat = _Heartbeat(sqs, self.queue, messages, self.in_flight)
        heartbeat.start()
        try:
            invocation = self.runtime.invoke(self.source.function, {"Records": records})
        finally:
            heartbeat.stop()

        ids = {message["MessageId"] for message in messages}
        if not invocation.ok:
            failed: set[str] | None = None
            reason = f"{invocation.error and invocation.error.get('errorType')}"
        elif self.source.report_batch_item_failures:
            failed = failed_ids(invocation.result, ids)
            reason = "invalid batchItemFailures response" if failed is None else "batchItemFailures"
        else:
            failed, reason = set(), ""
        to_fail = ids if failed is None else failed
        done = [message for message in messages if message["MessageId"] not in to_fail]
        self._delete(sqs, done)
        self._hand_back(sqs, [message for message in messages if message["MessageId"] in to_fail])
        level = logging.INFO if not to_fail else logging.WARNING
        log.log(
            level,
            "%s: batch of %d from %s -> %s (%.0f ms)",
            self.source.function,
            len(messages),
            self.queue.name,
            f"{len(done)} done" + (f", {len(to_fail)} failed ({reason}), retried later" if to_fail else ""),
            invocation.duration_ms,
        )
        self._warn_last_attempts(messages, to_fail)
        return len(messages)

    def _delete(self, sqs: Any, messages: list[dict[str, Any]]) -> None:
        for start in range(0, len(messages), 10):
            chunk = messages[start : start + 10]
            response = sqs.delete_message_batch(
                QueueUrl=self.queue.url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(chunk)],
            )
            for failure in response.get("Failed", []):
                log.warning("could not delete a message from %s: %s", self.queue.name, failure)

    def _hand_back(self, sqs: Any, messages: list[dict[str, Any]]) -> None:
        """Failed records: visible again after the queue's visibility timeout (not the in-flight one)."""
        change_visibility(sqs, self.queue, messages, self.queue.visibility_timeout, level=logging.WARNING)

    def _warn_last_attempts(self, messages: list[dict[str, Any]], failed: set[str]) -> None:
        limit = self.queue.max_receive_count
        if limit is None:
            return
        for message in messages:
            count = int((message.get("Attributes") or {}).get("ApproximateReceiveCount", "0"))
            if message["MessageId"] in failed and count >= limit:
                log.warning(
                    "message %s failed on receive %d of %d: SQS moves it to %s",
                    message["MessageId"],
                    count,
                    limit,
                    self.dead_letter_queue or "the dead-letter queue",
                )


def change_visibility(sqs: Any, queue: QueueInfo, messages: list[dict[str, Any]], seconds: int, *, level: int) -> None:
    """Set the messages' visibility timeout (10 per request); what fails is logged at `level`, not raised."""
    for start in range(0, len(messages), 10):
        chunk = messages[start : start + 10]
        entries = [
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": seconds}
            for i, m in enumerate(chunk)
        ]
        try:
            response = sqs.change_message_visibility_batch(QueueUrl=queue.url, Entries=entries)
        except Exception as exc:
            log.log(level, "could not set %d messages of %s visible in %d s: %s", len(chunk), queue.name, seconds, exc)
            continue
        for failure in response.get("Failed", []):
            log.log(level, "could not set a message of %s visible in %d s: %s", queue.name, seconds, failure)


class _Heartbeat:
    """Keeps the batch invisible while the function runs: re-arms its in-flight visibility three times per period
    (a beat may be two thirds of a period late)."""

    def __init__(self, sqs: Any, queue: QueueInfo, messages: list[dict[str, Any]], visibility: int) -> None:
        self.sqs = sqs
        self.queue = queue
        self.messages = messages
        self.visibility = visibility
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{queue.name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._done.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._done.wait(self.visibility / 3):
            change_visibility(self.sqs, self.queue, self.messages, self.visibility, level=logging.DEBUG)
