"""The drop zone's copy items (dfd.ingest.ports.CopyStore) in memory: items written and parsed by dfd.ingest.codec, as
the adapter's are, under the adapter's conditions (tests/integration/contract/test_copies.py holds both to them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from dfd.core import clock
from dfd.core.codec import Item
from dfd.ingest import codec as ingest_codec
from dfd.ingest.ports import CopyProgress


@dataclass
class FakeCopyStore:
    items: dict[str, Item] = field(default_factory=dict)  # by event key (the Events table's `copy#…` items)
    writes: int = 0  # writes that landed: the start, and each update

    def get_copy(self, event_key: str) -> CopyProgress | None:
        item = self.items.get(event_key)
        return ingest_codec.copy_progress(item) if item is not None else None

    def start_copy(self, progress: CopyProgress, now: datetime) -> CopyProgress:
        if progress.event_key not in self.items:
            self.items[progress.event_key] = self._item(progress, now)
            self.writes += 1
        found = self.get_copy(progress.event_key)
        assert found is not None
        return found

    def update_copy(self, progress: CopyProgress, upload_id: str | None, now: datetime) -> bool:
        item = self.items.get(progress.event_key)
        if item is None or "ended" in item or item.get("upload_id") != upload_id:
            return False
        written = self._item(progress, now)
        for name in (*ingest_codec.COPY_CHANGES, "updated_at", "ttl"):
            if name in written:
                item[name] = written[name]
            else:
                item.pop(name, None)
        self.writes += 1
        return True

    def next_copy_run(self, progress: CopyProgress, now: datetime) -> bool:
        item = self.items.get(progress.event_key)
        if item is None or "ended" in item or int(item.get("run", 0)) != progress.run:
            return False
        item.update(run=progress.run + 1, updated_at=clock.iso(now))
        return True

    @staticmethod
    def _item(progress: CopyProgress, now: datetime) -> Item:
        return ingest_codec.copy_item(progress, clock.iso(now), int(now.timestamp()))
