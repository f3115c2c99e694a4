"""A DynamoDB stream of the fake repository: the committed changes of its upload and file items, as the
publisher receives them (Lambda-shaped records, attribute-value images, both images).

`drain()` compares the items with what it saw last and returns one record per item that changed (INSERT,
MODIFY, REMOVE) — one write of one item, as DynamoDB streams it; an item written with no change is no record.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from boto3.dynamodb.types import TypeSerializer

from dfd.adapters.eventbridge import entry
from dfd.adapters.publisher import Tables
from dfd.events.outcomes import OutcomeEvent
from tests.unit.fakes import FakeRepository

_serializer = TypeSerializer()
TABLES = Tables(uploads="Uploads", files="FileMetadata")


def stream_arn(table: str) -> str:
    return f"arn:aws:dynamodb:us-east-1:123456789012:table/{table}/stream/2026-03-01T12:00:00.000"


def image(item: dict[str, Any] | None) -> dict[str, Any] | None:
    if item is None:
        return None
    return {name: _serializer.serialize(value) for name, value in item.items() if value is not None}


def stream_record(table: str, sequence: int, old: dict[str, Any] | None, new: dict[str, Any] | None) -> dict[str, Any]:
    body: dict[str, Any] = {"SequenceNumber": str(sequence), "ApproximateCreationDateTime": 1772366400 + sequence}
    body["Keys"] = image({"upload_id": (new or old or {}).get("upload_id")} if table == TABLES.uploads else {})
    if old is not None:
        body["OldImage"] = image(old)
    if new is not None:
        body["NewImage"] = image(new)
    name = "INSERT" if old is None else "REMOVE" if new is None else "MODIFY"
    return {
        "eventID": f"e{sequence}",
        "eventName": name,
        "eventSource": "aws:dynamodb",
        "eventSourceARN": stream_arn(table),
        "dynamodb": body,
    }


class FakeStream:
    def __init__(self, repo: FakeRepository) -> None:
        self.repo = repo
        self.sequence = 100
        self._seen: dict[str, dict[str, dict[str, Any]]] = {TABLES.uploads: {}, TABLES.files: {}}

    def _items(self, table: str) -> dict[str, dict[str, Any]]:
        return self.repo.uploads if table == TABLES.uploads else self.repo.files

    def drain(self) -> list[dict[str, Any]]:
        records: list[dict[str, Any]] = []
        for table in (TABLES.uploads, TABLES.files):
            now, seen = self._items(table), self._seen[table]
            for key in sorted(set(now) | set(seen)):
                old, new = seen.get(key), now.get(key)
                if old == new:
                    continue
                self.sequence += 1
                records.append(stream_record(table, self.sequence, old, copy.deepcopy(new)))
            self._seen[table] = copy.deepcopy(now)
        return records


@dataclass
class RecordingSink:
    """The event bus: what it took, in order; `refuse` names event ids it refuses (once each, or always)."""

    taken: list[OutcomeEvent] = field(default_factory=list)
    refuse: set[str] = field(default_factory=set)
    refuse_always: bool = False

    def put(self, events: Sequence[OutcomeEvent]) -> list[bool]:
        answers = []
        for event in events:
            entry(event, "bus")  # every event is a valid entry
            if event.event_id in self.refuse:
                if not self.refuse_always:
                    self.refuse.discard(event.event_id)
                answers.append(False)
                continue
            self.taken.append(event)
            answers.append(True)
        return answers
