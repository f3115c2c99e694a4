"""DynamoDB stream records -> the changes of typed records (dfd.core.records): the publisher's one view of a stream.

A record's images are DynamoDB attribute values: they become Python values (base.from_item: the adapter's
attribute values) and records through the features' item codecs (dfd.uploads.codec, dfd.ingest.codec), exactly
as a read of the table would. An image that is no record of its table's kind (moto writes a key-only image before
an upsert's attributes) is no change of state: it is skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from dfd.adapters.dynamo.base import from_item

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Change(Generic[R]):
    """One committed write of one item: the record before and after (None: absent), and when it committed."""

    sequence_number: str
    old: R | None
    new: R | None
    committed_at: str  # the stream record's ApproximateCreationDateTime, ISO 8601 UTC: the same on every retry


class NotARecord(ValueError):
    """The image is no item of the table's kind."""


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
    if image is None:
        return None
    try:
        return parse(from_item(image))
    except (KeyError, ValueError, TypeError) as error:
        raise NotARecord(f"{type(error).__name__}: {error}") from error
