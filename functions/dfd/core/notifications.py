"""Incoming ingest payloads → the objects they name.

Shapes: an S3 notification document ({"Records": [...]}, also the body of an SQS message), an EventBridge
"Object Created" event, a minimal hand-written record (only s3.bucket.name and s3.object.key), and the
s3:TestEvent S3 sends when a notification is configured (names no object).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote_plus, unquote_plus

from dfd.core.errors import InvalidEvent

MAX_KEY_BYTES = 1024


@dataclass(frozen=True)
class ObjectRef:
    bucket: str
    key: str


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidEvent(f"{what} is missing or not a non-empty string")
    return value


def _decoded_key(raw: Any) -> str:
    # S3 URL-encodes keys in its notifications; hand-written records follow the same form
    key = unquote_plus(_text(raw, "s3.object.key"))
    try:
        size = len(key.encode())
    except UnicodeEncodeError:
        raise InvalidEvent("s3.object.key is not valid UTF-8 text") from None
    if size > MAX_KEY_BYTES:
        raise InvalidEvent("s3.object.key is longer than 1024 bytes")
    return key


def _object_ref(section: Mapping[str, Any], malformed: str, bucket_name: str) -> ObjectRef:
    """The object a notification's section names by its `bucket` and `object` mappings (`malformed`: the error
    when either is not one; `bucket_name`: where the bucket's name is, for its error)."""
    bucket, obj = section.get("bucket"), section.get("object")
    if not isinstance(bucket, Mapping) or not isinstance(obj, Mapping):
        raise InvalidEvent(malformed)
    return ObjectRef(_text(bucket.get("name"), bucket_name), _decoded_key(obj.get("key")))


def _from_record(record: Any) -> ObjectRef | None:
    if not isinstance(record, Mapping):
        raise InvalidEvent("a record is not an object")
    name = record.get("eventName")
    if name is not None and not str(name).startswith(("ObjectCreated:", "s3:ObjectCreated:")):
        return None  # removals, restores, replication: nothing to ingest
    s3 = record.get("s3")
    if not isinstance(s3, Mapping):
        raise InvalidEvent("record has no s3 section")
    return _object_ref(s3, "record needs s3.bucket.name and s3.object.key", "s3.bucket.name")


def refs_from_payload(payload: Any) -> list[ObjectRef]:
    """Objects named by one payload (possibly none: a TestEvent, a removal). InvalidEvent when malformed."""
    if not isinstance(payload, Mapping):
        raise InvalidEvent("event is not a JSON object")
    if payload.get("Event") == "s3:TestEvent":
        return []
    if "detail-type" in payload or payload.get("source") == "aws.s3":
        if payload.get("detail-type") != "Object Created":
            return []
        detail = payload.get("detail")
        if not isinstance(detail, Mapping):
            raise InvalidEvent("EventBridge event has no detail")
        return [_object_ref(detail, "EventBridge detail needs bucket.name and object.key", "detail.bucket.name")]
    records = payload.get("Records")
    if not isinstance(records, list) or not records:
        raise InvalidEvent("event has neither Records nor an EventBridge detail")
    return [ref for ref in (_from_record(r) for r in records) if ref is not None]


def refs_from_message_body(body: str | None) -> list[ObjectRef]:
    """The body of an SQS message from the ingest queue (an S3 notification, or EventBridge via a rule)."""
    if not body:
        raise InvalidEvent("SQS message body is empty")
    try:
        payload = json.loads(body)
    except ValueError as error:
        raise InvalidEvent(f"SQS message body is not JSON: {error}") from None
    return refs_from_payload(payload)


def check_sqs_batch(event: Mapping[str, Any]) -> None:
    """Every record of an SQS event must carry a messageId of its own and a body: without an id of its own no
    failure can be reported for it, so a batch that lacks one (or repeats one, which SQS never does) is malformed
    as a whole."""
    seen: set[str] = set()
    for record in event["Records"]:
        if not isinstance(record.get("messageId"), str) or not record["messageId"]:
            raise InvalidEvent("an SQS record has no messageId")
        if record["messageId"] in seen:
            raise InvalidEvent(f"SQS messageId {record['messageId']} appears twice in one batch")
        seen.add(record["messageId"])
        if not isinstance(record.get("body"), str):
            raise InvalidEvent(f"SQS record {record['messageId']} has no body")


def is_sqs_batch(event: Any) -> bool:
    records = event.get("Records") if isinstance(event, Mapping) else None
    return (
        bool(records)
        and isinstance(records, list)
        and all(isinstance(r, Mapping) and r.get("eventSource") == "aws:sqs" for r in records)
    )


def notification(bucket: str, key: str, event_time: str | None = None) -> dict[str, Any]:
    """The document S3 sends when an object is created (its key URL-encoded as S3 encodes it): what the reconcile
    re-drives for an object whose notification was lost, and what scripts/replay delivers."""
    record: dict[str, Any] = {
        "eventVersion": "2.1",
        "eventSource": "aws:s3",
        "eventName": "ObjectCreated:Put",
        "s3": {"s3SchemaVersion": "1.0", "bucket": {"name": bucket}, "object": {"key": quote_plus(key, safe="/")}},
    }
    if event_time is not None:
        record["eventTime"] = event_time
    return {"Records": [record]}


def notification_body(bucket: str, key: str, event_time: str) -> str:
    """:func:`notification` as an SQS message's body."""
    return json.dumps(notification(bucket, key, event_time), separators=(",", ":"))
