"""DynamoDB stream records -> the changes of typed records (dfd.records): the publisher's one view of a stream.

A record's images are DynamoDB attribute values; boto3's TypeDeserializer turns them into Python values and the
item codec parses those into records, exactly as a read of the table would. An image that is no record of its
table's kind (moto writes a key-only image before an upsert's attributes) is no change of state: it is skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Generic, TypeVar

from boto3.dynamodb.types import TypeDeserializer

from dfd.records import FileRecord, UploadRecord, UploadStatus

R = TypeVar("R")
_deserializer = TypeDeserializer()


@dataclass(frozen=True, slots=True)
class Change(Generic[R]):
    """One committed write of one item: the record before and after (None: absent), and when it committed."""

    sequence_number: str
    old: R | None
    new: R | None
    committed_at: str  # the stream record's ApproximateCreationDateTime, ISO 8601 UTC: the same on every retry


class NotARecord(ValueError):
    """The image is no item of the table's kind."""


def plain(image: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A stream image (attribute values) as Python values, numbers as int where they are whole."""
    if image is None:
        return None
    item = {name: _deserializer.deserialize(value) for name, value in image.items()}
    return {name: _number(value) for name, value in item.items()}


def _number(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value


def committed_at(record: Mapping[str, Any]) -> str:
    """ApproximateCreationDateTime (epoch seconds in a Lambda event) as ISO 8601 UTC, milliseconds."""
    raw = (record.get("dynamodb") or {}).get("ApproximateCreationDateTime")
    moment = datetime.fromtimestamp(float(raw), UTC) if raw is not None else datetime.fromtimestamp(0, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def change(record: Mapping[str, Any], parse: Callable[[Mapping[str, Any]], R]) -> Change[R]:
    """One Lambda-shaped DynamoDB stream record as the change of a record of the kind `parse` reads."""
    body = record.get("dynamodb") or {}
    return Change(
        sequence_number=str(body.get("SequenceNumber", "")),
        old=_parsed(body.get("OldImage"), parse),
        new=_parsed(body.get("NewImage"), parse),
        committed_at=committed_at(record),
    )


def _parsed(image: Mapping[str, Any] | None, parse: Callable[[Mapping[str, Any]], R]) -> R | None:
    item = plain(image)
    if item is None:
        return None
    try:
        return parse(item)
    except (KeyError, ValueError, TypeError) as error:
        raise NotARecord(f"{type(error).__name__}: {error}") from error


# The item codec's readers for the two tables whose items change state (their item layout is the codec's).
def upload_record(item: Mapping[str, Any]) -> UploadRecord:
    def text(name: str) -> str | None:
        value = item.get(name)
        return None if value is None else str(value)

    outcome = item.get("outcome")
    return UploadRecord(
        upload_id=str(item["upload_id"]),
        status=UploadStatus(item["status"]),
        outcome=UploadStatus(outcome) if outcome else None,
        filename=text("filename"),
        size=None if item.get("size") is None else int(item["size"]),
        sha256=text("sha256"),
        hash=text("hash"),
        owner=text("owner"),
        tenant=item["tenant"] if isinstance(item.get("tenant"), str) else None,
        processed_at=text("processed_at"),
        failed_at=text("failed_at"),
        deleted_at=text("deleted_at"),
    )


def file_record(item: Mapping[str, Any]) -> FileRecord:
    return FileRecord(
        hash=str(item["hash"]),
        size=int(item.get("size") or 0),
        s3_key=None if item.get("s3_key") is None else str(item["s3_key"]),
        bucket=None if item.get("bucket") is None else str(item["bucket"]),
        etag=None if item.get("etag") is None else str(item["etag"]),
        created_at=None if item.get("created_at") is None else str(item["created_at"]),
        last_upload_at=None if item.get("last_upload_at") is None else str(item["last_upload_at"]),
        generation=int(item.get("generation") or 0),
    )
