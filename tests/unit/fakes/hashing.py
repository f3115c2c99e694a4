"""The hashing states (dfd.ingest.ports.HashingStore) in memory: items written and parsed by dfd.ingest.codec, as
the adapter's are, under the adapter's conditions (tests/integration/contract/test_hashing.py holds both to them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from dfd.core import clock
from dfd.core.codec import Item
from dfd.ingest import codec as ingest_codec
from dfd.ingest.ports import HashingShown, HashProgress


@dataclass
class FakeHashingStore:
    items: dict[str, Item] = field(default_factory=dict)  # by event key (the Events table's `hashing#…` items)
    writes: int = 0  # state puts that landed: one per segment, and the first
    shown: dict[tuple[str, str], Item] = field(default_factory=dict)  # the progress items, by (bucket, key)

    def get_hashing(self, event_key: str) -> HashProgress | None:
        item = self.items.get(event_key)
        return ingest_codec.hash_progress(item) if item is not None else None

    def start_hashing(self, progress: HashProgress, now: datetime) -> HashProgress:
        if progress.event_key not in self.items:
            self._put(progress, now)
        found = self.get_hashing(progress.event_key)
        assert found is not None
        return found

    def advance_hashing(self, progress: HashProgress, from_length: int, now: datetime) -> bool:
        item = self.items.get(progress.event_key)
        if item is None or "digest" in item or int(item["hashed"]) != from_length:
            return False
        self._put(progress, now)
        return True

    def next_run(self, progress: HashProgress, now: datetime) -> bool:
        item = self.items.get(progress.event_key)
        if item is None or "digest" in item or int(item.get("run", 0)) != progress.run:
            return False
        item.update(run=progress.run + 1, updated_at=clock.iso(now))
        return True

    def hashing_of_key(self, bucket: str, key: str) -> HashingShown | None:
        item = self.shown.get((bucket, key))
        return ingest_codec.hashing_shown(item) if item is not None else None

    def _put(self, progress: HashProgress, now: datetime) -> None:
        self.items[progress.event_key] = ingest_codec.hashing_item(progress, clock.iso(now), int(now.timestamp()))
        self.shown[(progress.bucket, progress.key)] = ingest_codec.progress_item(
            progress, clock.iso(now), int(now.timestamp())
        )
        self.writes += 1
