"""DynamoDB streams locally: the stream event source mapping, moto's streams made transactional, and the event
bus routed to the local `dfd-events` queue.

- :class:`StreamPoller` is Lambda's DynamoDB event source mapping: it reads a table's stream in order (one shard
  locally, as moto keeps one), invokes the function with Lambda-shaped batches and, as Lambda does with
  ReportBatchItemFailures, delivers again from the first failed record (from the batch's first record when the
  invocation failed), after a growing pause; after MaximumRetryAttempts the batch's description (shard, sequence
  numbers) goes to the on-failure destination queue and the mapping moves on.
- :func:`patch_moto_streams`: moto appends a transaction's stream records as each of its writes applies, and a
  cancelled transaction puts back a copy of its tables — records included, but in a new shard object that open
  iterators never see, while the old one keeps the cancelled writes' records. Patched: the copy shares the
  shard, and a cancelled transaction leaves it exactly as it was (only committed writes are streamed, as
  DynamoDB does).
  moto's PutEvents and SendMessage made affordable (JSONPath parses cached, the clock read cheaply, no count of
  the queue's messages at every send).
- :func:`route_events`: every event on the template's buses goes to the local queue `dfd-events` (a rule per
  bus, pattern: source dfd), which local consumers, tests and scripts/events read.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from dfdlocal.motoversion import require_supported
from dfdlocal.names import ACCOUNT_ID, EVENTS_QUEUE, REGION
from dfdlocal.persist import read_state, write_whole
from dfdlocal.runtime import Invocation
from dfdlocal.template import StreamSource

log = logging.getLogger("dfdlocal.streams")

IDLE_SECONDS = 0.1  # an empty shard is read again after this (Lambda polls a shard 4 times a second)
MAX_PAUSE_SECONDS = 2.0
STALE_ITERATOR = frozenset({"TrimmedDataAccessException", "ExpiredIteratorException"})
CLOSED = "closed"  # a checkpoint's mark of a shard read to its end and done
LOCAL_RULE = "dfd-events-local"


# --------------------------------------------------------------------------------------------------------- moto
_patched = False


def patch_moto_streams() -> None:
    """Only committed writes reach a table's stream (idempotent; call before the first transaction)."""
    global _patched
    if _patched:
        return
    require_supported()
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.table import StreamShard

    original = DynamoDBBackend.transact_write_items
    # the copy of the tables a transaction takes (to put back when cancelled) shares their streams instead of
    # copying every record: a cancelled transaction's records are cut off below
    StreamShard.__deepcopy__ = lambda self, memo: self  # type: ignore[attr-defined]

    def transact_write_items(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
        shards = {
            name: (table.stream_shard, len(table.stream_shard.items))
            for name, table in self.tables.items()
            if table.stream_shard is not None
        }
        try:
            original(self, transact_items)
        except Exception:
            for name, (shard, length) in shards.items():
                del shard.items[length:]  # the cancelled writes' records
                table = self.tables.get(name)
                if table is not None:
                    table.stream_shard = shard  # the shard open iterators read
                    shard.table = table
            raise

    DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]

    # moto's PutEvents shapes each event for its targets with eight JSONPath expressions, parsing each anew (a
    # parser built per parse: ~100 ms of CPU per event); the expressions are constant, their parses are kept
    import jsonpath_ng.ext
    from moto.sqs import models as sqs_models

    jsonpath_ng.ext.parse = functools.lru_cache(maxsize=256)(jsonpath_ng.ext.parse)  # type: ignore[attr-defined]
    # every SendMessage computes the queue's attributes, its approximate counts included: two clock reads per
    # message waiting (datetime arithmetic, ~10 us each) — a queue nobody drains (dfd-events) made every send
    # slower; the same clock, read as time.time()
    original_millis = sqs_models.unix_time_millis  # type: ignore[attr-defined]

    def unix_time_millis(dt: datetime | None = None) -> float:
        return time.time() * 1000.0 if dt is None else float(original_millis(dt))

    sqs_models.unix_time_millis = unix_time_millis  # type: ignore[attr-defined]

    # ...and SendMessage reads one attribute (ContentBasedDeduplication) of all it computes: the approximate counts
    # walk every message waiting, so a send cost O(messages): PutEvents to dfd-events took 11 ms empty, 148 ms at
    # 20,000 messages, and a stack that had published 50,000 events spent its CPU there (docs/performance.md,
    # target 8). Within SendMessage the counts it never reads are not computed.
    sending = threading.local()
    original_send = sqs_models.SQSBackend.send_message

    @functools.wraps(original_send)
    def send_message(self: Any, *args: Any, **kwargs: Any) -> Any:
        sending.active = True
        try:
            return original_send(self, *args, **kwargs)
        finally:
            sending.active = False

    sqs_models.SQSBackend.send_message = send_message  # type: ignore[method-assign]
    for name in (
        "approximate_number_of_messages",
        "approximate_number_of_messages_delayed",
        "approximate_number_of_messages_not_visible",
    ):
        count = getattr(sqs_models.Queue, name).fget

        def counted(queue: Any, count: Callable[[Any], int] = count) -> int:
            return 0 if getattr(sending, "active", False) else count(queue)

        setattr(sqs_models.Queue, name, property(counted))
    _patched = True


# --------------------------------------------------------------------------------------------- the mapping
def lambda_record(record: Mapping[str, Any], stream_arn: str) -> dict[str, Any]:
    """A GetRecords record as Lambda's DynamoDB event record (ApproximateCreationDateTime in epoch seconds)."""
    body = dict(record.get("dynamodb") or {})
    created = body.get("ApproximateCreationDateTime")
    if isinstance(created, datetime):
        body["ApproximateCreationDateTime"] = created.timestamp()
    return {
        "eventID": record.get("eventID"),
        "eventName": record.get("eventName"),
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": REGION,
        "dynamodb": body,
        "eventSourceARN": stream_arn,
    }


def failed_from(invocation: Invocation, records: Sequence[Mapping[str, Any]], partial: bool) -> int | None:
    """The index of the first record to deliver again, or None when the batch is done."""
    if not invocation.ok:
        return 0
    if not partial:
        return None
    failures = (invocation.result or {}).get("batchItemFailures") if isinstance(invocation.result, dict) else None
    if not failures:
        return None
    numbers = [str((r.get("dynamodb") or {}).get("SequenceNumber")) for r in records]
    failed = {str(f.get("itemIdentifier")) for f in failures if isinstance(f, dict)}
    indexes = [numbers.index(n) for n in failed if n in numbers]
    return min(indexes) if len(indexes) == len(failed) else 0  # an unknown identifier fails the whole batch


class StreamPoller:
    """One DynamoDB stream event source mapping: `poll_once` handles one batch (tests drive it directly)."""

    def __init__(
        self,
        source: StreamSource,
        table: str,
        invoke: Callable[[str, Any], Invocation],
        client: Callable[[str], Any],
        *,
        on_failure_url: str | None = None,
        sleep: Callable[[float], None] | None = None,
        trim: Callable[[str, int], None] | None = None,
        checkpoint: Path | None = None,
    ) -> None:
        self.source = source
        self.table = table
        self.invoke = invoke
        self.client = client
        self.on_failure_url = on_failure_url
        self._trim = trim
        self._checkpoint = checkpoint
        self._shards: list[str] = []  # shards still to read after the current one, oldest first
        self._positions: dict[str, str] = {}  # shard -> sequence number of its last record done, or CLOSED
        self._stop = threading.Event()
        self._skip_asked, self._skip = threading.Event(), threading.Event()
        self._sleep = sleep or self._stop.wait
        self._thread: threading.Thread | None = None
        self._streams: Any = None
        self._iterator: str | None = None
        self._pending: list[dict[str, Any]] = []
        self._attempts = 0
        self.stream_arn = ""
        self.shard_id = ""
        self.delivered = 0  # records done (published, or sent to the on-failure destination)

    @property
    def description(self) -> str:
        return f"{self.table} stream -> {self.source.function}"

    def open(self) -> None:
        """Find the stream and where to read it: after the checkpoint's records (a restart: what was done is not
        delivered again, what was not is), else at the source's StartingPosition."""
        self._streams = self.client("dynamodbstreams")
        self.stream_arn = self.client("dynamodb").describe_table(TableName=self.table)["Table"]["LatestStreamArn"]
        saved = self._load_checkpoint()
        self._positions = dict(saved or {})
        shards = [shard for shard in self._all_shards() if self._positions.get(shard["ShardId"]) != CLOSED]
        if saved is None and self.source.starting_position == "LATEST":
            shards = shards[-1:]
        self._shards = [shard["ShardId"] for shard in shards]
        self._next_shard(initial=saved is None)

    def _all_shards(self) -> list[dict[str, Any]]:
        """The stream's shards, oldest first (a parent before its children)."""
        shards: list[dict[str, Any]] = []
        start: dict[str, str] = {}
        while True:
            described = self._streams.describe_stream(StreamArn=self.stream_arn, **start)["StreamDescription"]
            shards += described.get("Shards", [])
            last = described.get("LastEvaluatedShardId")
            if not last:
                break
            start = {"ExclusiveStartShardId": last}

        def first(shard: Mapping[str, Any]) -> int:
            return int((shard.get("SequenceNumberRange") or {}).get("StartingSequenceNumber") or 0)

        return sorted(shards, key=first)

    def _next_shard(self, *, initial: bool = False) -> bool:
        """Open an iterator on the next shard to read; False when there is none (yet)."""
        if not self._shards:
            known = set(self._positions) | ({self.shard_id} if self.shard_id else set())
            self._shards = [s["ShardId"] for s in self._all_shards() if s["ShardId"] not in known]
        if not self._shards:
            self._iterator = None
            return False
        self.shard_id = self._shards.pop(0)
        position = self._positions.get(self.shard_id)
        self._iterator = self._iterator_after(position, self.source.starting_position if initial else "TRIM_HORIZON")
        return True

    def _iterator_after(self, position: str | None, otherwise: str = "TRIM_HORIZON") -> str:
        """An iterator on the current shard after the record `position`, or at `otherwise` without one."""
        where: dict[str, str] = {"ShardIteratorType": otherwise}
        if position:
            where = {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": position}
        answer = self._streams.get_shard_iterator(StreamArn=self.stream_arn, ShardId=self.shard_id, **where)
        return str(answer["ShardIterator"])

    def _last_read(self) -> str | None:
        """The sequence number of the current shard's last record read (pending or done)."""
        pending = [r for r in self._pending if r["_shard"] == self.shard_id]
        if pending:
            return str(pending[-1]["dynamodb"]["SequenceNumber"])
        return self._positions.get(self.shard_id) or None

    def _load_checkpoint(self) -> dict[str, str] | None:
        if self._checkpoint is None or not self._checkpoint.exists():
            return None
        try:
            saved = json.loads(read_state(self._checkpoint))
        except (OSError, ValueError) as exc:
            log.warning("%s: unreadable (%s): the stream is read from its start", self._checkpoint, exc)
            return {}
        if saved.get("stream_arn") != self.stream_arn:  # the table was made anew (--reset)
            return None
        return {str(k): str(v) for k, v in (saved.get("shards") or {}).items()}

    def _save_checkpoint(self) -> None:
        if self._checkpoint is None:
            return
        # whole or not at all, even when the process is killed; its user's alone
        write_whole(self._checkpoint, json.dumps({"stream_arn": self.stream_arn, "shards": self._positions}).encode())

    def start(self) -> None:
        self.open()
        self._thread = threading.Thread(target=self._run, name=f"stream-{self.table}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def skip_to_latest(self, timeout: float = 30.0) -> bool:
        """Deliver nothing written so far: the mapping reads on from the stream's end (for a bench that writes a
        stack's history as items, whose events a real stack published long ago). True once done."""
        self._skip.clear()
        self._skip_asked.set()
        return self._skip.wait(timeout)

    def _skip_now(self) -> None:
        self._pending.clear()
        self._shards = []
        shards = self._all_shards()
        self.shard_id = shards[-1]["ShardId"]
        self._positions = {s["ShardId"]: CLOSED for s in shards[:-1]}
        self._iterator = self._iterator_after(None, "LATEST")
        self._skip_asked.clear()
        self._skip.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            if self._skip_asked.is_set():
                self._skip_now()
            try:
                if self.poll_once() == 0 and not self._pending:
                    self._stop.wait(IDLE_SECONDS)
            except Exception as exc:
                if self._stop.is_set():
                    return
                log.warning("reading the %s stream failed: %s; retrying in 1 s", self.table, exc)
                self._stop.wait(1.0)

    def _fill(self) -> None:
        if len(self._pending) >= self.source.batch_size:
            return
        if self._iterator is None and (self._pending or not self._next_shard()):
            return
        try:
            response = self._streams.get_records(ShardIterator=self._iterator, Limit=self.source.batch_size)
        except Exception as exc:
            code = str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))
            if code not in STALE_ITERATOR:
                raise
            # an expired iterator, or one DynamoDB Local took on a shard still empty (it then answers
            # TrimmedDataAccessException once records arrive): a new one, after the last record read
            self._iterator = self._iterator_after(self._last_read())
            response = self._streams.get_records(ShardIterator=self._iterator, Limit=self.source.batch_size)
        self._iterator = response.get("NextShardIterator")
        self._pending += [dict(record, _shard=self.shard_id) for record in response.get("Records", [])]
        if self._iterator is None and not any(r["_shard"] == self.shard_id for r in self._pending):
            self._positions[self.shard_id] = CLOSED  # read to its end and done: on to its children
            self._save_checkpoint()

    def poll_once(self) -> int:
        """Invoke the function with the next batch; the number of records done (0: nothing to read, or a retry)."""
        if self._streams is None:
            self.open()
        self._fill()
        if not self._pending:
            return 0
        batch = self._pending[: self.source.batch_size]
        records = [lambda_record(record, self.stream_arn) for record in batch]  # without their _shard
        invocation = self.invoke(self.source.function, {"Records": records})
        first_failed = failed_from(invocation, records, self.source.report_batch_item_failures)
        if first_failed is None:
            return self._done(len(batch))
        done = self._done(first_failed) if first_failed else 0
        self._attempts += 1
        limit = self.source.maximum_retry_attempts
        if limit >= 0 and self._attempts > limit:
            rest = self._pending[: len(batch) - first_failed]
            self._send_to_destination(rest, invocation)
            return done + self._done(len(rest))
        pause = min(MAX_PAUSE_SECONDS, 0.05 * 2**self._attempts)
        log.warning(
            "%s: %d record(s) from %s not done (%s); delivered again in %.2f s",
            self.source.function,
            len(batch) - first_failed,
            self.table,
            "invocation failed" if not invocation.ok else "batchItemFailures",
            pause,
        )
        self._sleep(pause)
        return done

    def _done(self, count: int) -> int:
        if count:
            last = self._pending[count - 1]
            if self._trim is not None:
                self._trim(self.table, int(last["dynamodb"]["SequenceNumber"]))
            self._positions[last["_shard"]] = str(last["dynamodb"]["SequenceNumber"])
            if self._iterator is None and len(self._pending) == count:  # the closed shard's last records
                self._positions[last["_shard"]] = CLOSED
            self._save_checkpoint()
        del self._pending[:count]
        self._attempts = 0 if count else self._attempts
        self.delivered += count
        return count

    def _send_to_destination(self, records: Sequence[Mapping[str, Any]], invocation: Invocation) -> None:
        """What Lambda sends to an on-failure destination: the batch's place in the stream, not its records."""
        numbers = [str((r.get("dynamodb") or {}).get("SequenceNumber")) for r in records]
        document = {
            "requestContext": {
                "functionArn": f"arn:aws:lambda:{REGION}:{ACCOUNT_ID}:function:{self.source.function}",
                "condition": "RetryAttemptsExhausted",
                "approximateInvokeCount": self._attempts,
            },
            "responseContext": {"functionError": (invocation.error or {}).get("errorType", "")},
            "DDBStreamBatchInfo": {
                "shardId": self.shard_id,
                "startSequenceNumber": numbers[0],
                "endSequenceNumber": numbers[-1],
                "batchSize": len(numbers),
                "streamArn": self.stream_arn,
            },
        }
        log.error("%s: %d record(s) from %s gave up: %s", self.source.function, len(numbers), self.table, document)
        if self.on_failure_url:
            self.client("sqs").send_message(QueueUrl=self.on_failure_url, MessageBody=json.dumps(document))


def trim_stream(table_name: str, upto: int) -> None:
    """Drop the in-process moto stream's records up to sequence number `upto` (delivered: DynamoDB trims after 24
    hours). moto copies a table's stream with the table at every transaction: an ever-growing stream would make
    every transaction slower. Call with DynamoDB requests paused (the emulator's lock)."""
    from moto.dynamodb.models import dynamodb_backends

    shard = dynamodb_backends[ACCOUNT_ID][REGION].get_table(table_name).stream_shard
    if shard is None:
        return
    count = min(len(shard.items), upto + 1 - shard.starting_sequence_number)
    if count > 0:
        del shard.items[:count]
        shard.starting_sequence_number += count  # sequence numbers and open iterators stay valid


# ---------------------------------------------------------------------------------------------- the buses
def route_events(buses: Mapping[str, str], client: Callable[[str], Any]) -> tuple[str, str]:
    """Create the buses and the local queue every event on them goes to: (queue name, queue URL)."""
    events, sqs = client("events"), client("sqs")
    url = sqs.create_queue(QueueName=EVENTS_QUEUE)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    for name in buses.values():
        events.create_event_bus(Name=name)
        events.put_rule(
            Name=LOCAL_RULE,
            EventBusName=name,
            EventPattern=json.dumps({"source": ["dfd"]}),
            Description="local stack: every event to the dfd-events queue",
        )
        events.put_targets(Rule=LOCAL_RULE, EventBusName=name, Targets=[{"Id": "dfd-events", "Arn": arn}])
    return EVENTS_QUEUE, url


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Poll `condition` until true or `timeout` seconds passed (tests, the tools)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True
