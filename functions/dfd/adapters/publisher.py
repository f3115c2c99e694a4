"""The outbox's publisher: a batch of DynamoDB stream records (the committed changes of uploads and contents,
parsed by the features' codecs) in, their outcomes (dfd.events.outcomes) out to the event bus (an EventSink:
dfd.adapters.eventbridge), and which records must be delivered again.

Records are published in stream order, all of a batch's events in few PutEvents calls (10 entries each); an
entry the bus refused is retried (bounded), and a record any of whose events is still unpublished is reported
failed: the event source delivers it (and, in a stream, every later record of the shard) again, and its events
carry the same event_id as before — consumers deduplicate on it. A record that is no change of a record of its
table's kind (dfd.adapters.streams.NotARecord) publishes nothing and is not retried.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from dfd.adapters.streams import NotARecord, change
from dfd.events.outcomes import OutcomeEvent, file_events, upload_events
from dfd.ingest import codec as ingest_codec
from dfd.uploads import codec as uploads_codec


class EventSink(Protocol):
    def put(self, events: Sequence[OutcomeEvent]) -> list[bool]:
        """Publish the events in order; for each, whether the bus took it (after the sink's own retries)."""
        ...


@dataclass(frozen=True, slots=True)
class Tables:
    """The tables whose streams carry outcomes, by name (a record's eventSourceARN names its table)."""

    uploads: str
    files: str


@dataclass
class BatchResult:
    published: list[OutcomeEvent] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # the sequence numbers to deliver again
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (sequence number, why): no change of state


def table_of(record: Mapping[str, Any]) -> str:
    """arn:aws:dynamodb:<region>:<account>:table/<name>/stream/<label> -> <name>."""
    arn = str(record.get("eventSourceARN", ""))
    return arn.partition(":table/")[2].partition("/")[0]


def events_of(record: Mapping[str, Any], tables: Tables) -> list[OutcomeEvent]:
    """The outcomes of one stream record (NotARecord: none, and nothing to retry)."""
    table = table_of(record)
    if table == tables.uploads:
        uploads = change(record, uploads_codec.upload_record)
        return upload_events(uploads.old, uploads.new, committed_at=uploads.committed_at)
    if table == tables.files:
        files = change(record, ingest_codec.file_record)
        return file_events(files.old, files.new, committed_at=files.committed_at)
    raise NotARecord(f"a record of table {table!r}, which carries no outcome")


def sequence_number(record: Mapping[str, Any]) -> str:
    return str((record.get("dynamodb") or {}).get("SequenceNumber", ""))


def publish(records: Sequence[Mapping[str, Any]], tables: Tables, sink: EventSink) -> BatchResult:
    """Publish the batch's outcomes, in stream order; which records to deliver again."""
    result = BatchResult()
    owners: list[str] = []  # per event: the sequence number of its record
    events: list[OutcomeEvent] = []
    for record in records:
        number = sequence_number(record)
        try:
            found = events_of(record, tables)
        except NotARecord as why:
            result.skipped.append((number, str(why)))
            continue
        events += found
        owners += [number] * len(found)
    taken = sink.put(events) if events else []
    failed: set[str] = set()
    for event, owner, ok in zip(events, owners, taken, strict=True):
        if ok:
            result.published.append(event)
        else:
            failed.add(owner)
    result.failed = [sequence_number(r) for r in records if sequence_number(r) in failed]
    return result
