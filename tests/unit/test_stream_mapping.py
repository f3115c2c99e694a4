"""The local DynamoDB stream event source mapping (dfdlocal.streams.StreamPoller) on a scripted stream: batches in
order, a partial failure delivered again from its first failed record, a failed invocation from the batch's first,
and after MaximumRetryAttempts the batch's place in the stream to the on-failure destination; the template's
DynamoDB event sources read into the model."""

from __future__ import annotations

import json
from typing import Any

from dfdlocal.emulator import IN_PROCESS_ENDPOINT
from dfdlocal.runtime import Invocation
from dfdlocal.streams import StreamPoller
from dfdlocal.template import TEMPLATE, StreamSource, read_model


class Streams:
    def __init__(self, count: int) -> None:
        self.records = [
            {"eventID": str(i), "eventName": "INSERT", "dynamodb": {"SequenceNumber": str(100 + i)}}
            for i in range(count)
        ]
        self.position = 0

    def describe_table(self, TableName: str) -> dict[str, Any]:
        return {"Table": {"LatestStreamArn": f"arn:aws:dynamodb:us-east-1:1:table/{TableName}/stream/x"}}

    def describe_stream(self, StreamArn: str) -> dict[str, Any]:
        return {"StreamDescription": {"Shards": [{"ShardId": "shard-1"}]}}

    def get_shard_iterator(self, **kwargs: Any) -> dict[str, Any]:
        return {"ShardIterator": "it"}

    def get_records(self, ShardIterator: str, Limit: int) -> dict[str, Any]:
        batch = self.records[self.position : self.position + Limit]
        self.position += len(batch)
        return {"Records": batch, "NextShardIterator": "it"}

    def send_message(self, QueueUrl: str, MessageBody: str) -> None:
        self.sent.append(json.loads(MessageBody))

    sent: list[dict[str, Any]] = []


def poller(streams: Streams, answers: list[Any], retries: int = 2) -> tuple[StreamPoller, list[list[str]]]:
    seen: list[list[str]] = []

    def invoke(name: str, event: dict[str, Any]) -> Invocation:
        seen.append([r["dynamodb"]["SequenceNumber"] for r in event["Records"]])
        answer = answers.pop(0) if answers else {"batchItemFailures": []}
        error = {"errorType": "Crash"} if answer == "crash" else None
        return Invocation(name, "id", None if error else answer, error, 1.0)

    source = StreamSource("F", "S", "T", batch_size=3, report_batch_item_failures=True, maximum_retry_attempts=retries)
    made = StreamPoller(source, "Uploads", invoke, lambda _: streams, on_failure_url="dlq", sleep=lambda _: None)
    return made, seen


def test_partial_failures_and_crashes_are_delivered_again_in_order() -> None:
    streams = Streams(5)
    streams.sent = []
    mapping, seen = poller(streams, [{"batchItemFailures": [{"itemIdentifier": "101"}]}, "crash"])
    while mapping.delivered < 5:
        mapping.poll_once()
    # from the first failed record on (the retry's batch filled up to BatchSize again, as Lambda reads on from it)
    assert seen == [["100", "101", "102"], ["101", "102", "103"], ["101", "102", "103"], ["104"]]
    assert streams.sent == []


def test_after_the_retries_the_batch_goes_to_the_on_failure_destination() -> None:
    streams = Streams(2)
    streams.sent = []
    mapping, seen = poller(streams, ["crash"] * 10, retries=2)
    while mapping.delivered < 2:
        mapping.poll_once()
    assert len(seen) == 3  # the first try and two retries
    (sent,) = streams.sent
    assert sent["DDBStreamBatchInfo"] | {"streamArn": None} == {
        "shardId": "shard-1",
        "startSequenceNumber": "100",
        "endSequenceNumber": "101",
        "batchSize": 2,
        "streamArn": None,
    }
    assert sent["requestContext"]["condition"] == "RetryAttemptsExhausted"


def test_the_template_streams_uploads_and_files_to_the_publisher() -> None:
    model = read_model(TEMPLATE, IN_PROCESS_ENDPOINT)
    sources = {s.table_logical_id: s for s in model.stream_sources}
    assert set(sources) == {"UploadsTable", "FilesTable"}
    for source in sources.values():
        assert source.function == "PublisherFunction" and source.report_batch_item_failures
        assert source.on_failure_queue == "PublisherDLQ" and source.maximum_retry_attempts == 20
    for table in ("UploadsTable", "FilesTable"):
        spec = model.tables[table].properties["StreamSpecification"]
        assert spec == {"StreamViewType": "NEW_AND_OLD_IMAGES"}
    assert model.event_buses == {"EventBus": "dfd-bus"}
    assert model.environment["EVENT_BUS_NAME"] == "dfd-bus"


class Resumable(Streams):
    """A stream whose iterators start where they are asked to (TRIM_HORIZON or after a sequence number)."""

    def get_shard_iterator(self, **kwargs: Any) -> dict[str, Any]:
        after = kwargs.get("SequenceNumber")
        numbers = [r["dynamodb"]["SequenceNumber"] for r in self.records]
        self.position = numbers.index(after) + 1 if after else 0
        return {"ShardIterator": "it"}


def test_a_restarted_mapping_reads_on_after_its_checkpoint(tmp_path: Any) -> None:
    checkpoint = tmp_path / "stream-T.json"
    seen: list[str] = []

    def invoke(name: str, event: dict[str, Any]) -> Invocation:
        seen.extend(r["dynamodb"]["SequenceNumber"] for r in event["Records"])
        return Invocation(name, "id", {"batchItemFailures": []}, None, 1.0)

    source = StreamSource("F", "S", "T", batch_size=2, report_batch_item_failures=True)
    streams = Resumable(5)
    first = StreamPoller(source, "Uploads", invoke, lambda _: streams, checkpoint=checkpoint)
    first.open()
    first.poll_once()  # 100, 101 done, then the process is killed
    assert json.loads(checkpoint.read_text())["shards"] == {"shard-1": "101"}
    again = StreamPoller(source, "Uploads", invoke, lambda _: streams, checkpoint=checkpoint)
    again.open()
    while again.poll_once():
        pass
    assert seen == ["100", "101", "102", "103", "104"]  # nothing delivered twice, nothing skipped
