"""The counters' history (dfd.history.ports; dfd.adapters.dynamo.history): the shards read whole, snapshots kept
as the adapter's items (dfd.history.codec), one per series and interval."""

from __future__ import annotations

import copy

from dfd.core import codec as core_codec
from dfd.core.config import counter_id
from dfd.core.records import CounterShard
from dfd.core.usage import gate
from dfd.history import codec as history_codec
from dfd.history.ports import HistoryPoint, Snapshot, TenantTotals
from tests.unit.fakes.base import FakeTables


class FakeSnapshots(FakeTables):
    def counter_shards(self, *, consistent: bool = False) -> dict[str, CounterShard]:
        return {counter_id(shard): CounterShard(**values) for shard, values in self.counters.items()}

    def put_snapshot(self, snapshot: Snapshot) -> None:
        for item in history_codec.snapshot_items(snapshot):
            self.snapshot_items[(str(item["series"]), int(item["at"]))] = copy.deepcopy(item)
        self.snapshot_writes += 1

    def history(self, step: int, start: int, end: int) -> list[HistoryPoint]:
        name = history_codec.series(step)
        found = {at: item for (series, at), item in self.snapshot_items.items() if series == name and start <= at < end}
        return [history_codec.history_point({**found[at], "read": {}}, step) for at in sorted(found)]

    def latest_snapshot(self) -> Snapshot | None:
        found = self.snapshot_items.get((str(history_codec.LATEST_KEY["series"]), int(history_codec.LATEST_KEY["at"])))
        return history_codec.snapshot(found) if found else None

    def tenant_totals(self) -> list[TenantTotals]:
        refs = [{**item, "tenant": tenant, "hash": digest} for (tenant, digest), item in self.tenant_refs.items()]
        usage = [{**item, **core_codec.usage_key(gate(tenant))} for tenant, item in self.usage.items()]
        return history_codec.tenant_totals(refs + usage)
