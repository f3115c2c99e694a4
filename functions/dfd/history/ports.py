"""The history's records and the storage slice it uses (dfd.adapters.dynamo.history implements it)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Protocol

from dfd.core.records import CounterShard

if TYPE_CHECKING:
    from collections.abc import Mapping

# every counter shard field, in the order a snapshot records each shard's values
SNAPSHOT_FIELDS = tuple(spec.name for spec in fields(CounterShard))
# the steps of the series: every 5 minutes, the hourly and the daily roll-up
STEPS = (300, 3600, 86400)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The counter totals at `taken_at` (epoch seconds), and the shard values they are the sum of (`read`: shard
    id -> its SNAPSHOT_FIELDS values; empty on the roll-ups, which carry the totals only)."""

    taken_at: int
    totals: Mapping[str, int]
    read: Mapping[str, tuple[int, ...]]


@dataclass(frozen=True, slots=True)
class HistoryPoint:
    """One point of a series: the last snapshot taken in the interval [at, at + step)."""

    step: int
    at: int
    snapshot: Snapshot


@dataclass(frozen=True, slots=True)
class TenantTotals:
    """What one tenant holds, summed over its references and its usage shards: contents held (`files`, a
    reference at a count above 0), their bytes, its uploads of them, the uploads beyond the first of each content
    (`duplicates`) and their bytes (`bytes_saved`), and its quota usage (dfd.core.usage)."""

    tenant: str
    files: int = 0
    bytes: int = 0
    uploads: int = 0
    duplicates: int = 0
    bytes_saved: int = 0
    pending_uploads: int = 0
    used_bytes: int = 0


class TenantTotalsReads(Protocol):
    """What GET /admin/tenants reads."""

    def tenant_totals(self) -> list[TenantTotals]:
        """Every tenant with a reference or a usage shard, from one paged Scan of the tenant view."""
        ...


class SnapshotStore(Protocol):
    """What the snapshot function reads and writes."""

    def counter_shards(self, *, consistent: bool = False) -> dict[str, CounterShard]:
        """Every counter shard that exists, by shard id: ONE BatchGetItem, eventually consistent unless
        `consistent` (half the read units: a snapshot records what it read, a write of the last second may be in
        the next one)."""
        ...

    def put_snapshot(self, snapshot: Snapshot) -> None:
        """The snapshot as the point of each series its time falls in (STEPS): ONE BatchWriteItem."""
        ...


class HistoryReads(Protocol):
    """What GET /admin/stats/history reads."""

    def history(self, step: int, start: int, end: int) -> list[HistoryPoint]:
        """The points of the series of `step` with start <= at < end, oldest first."""
        ...


class SnapshotReads(Protocol):
    """What the audit's check of the latest snapshot reads (dfd.reconcile.service)."""

    def latest_snapshot(self) -> Snapshot | None:
        """The newest snapshot of the 5-minute series, with the shard values it read (None: none yet)."""
        ...

    def counter_shards(self, *, consistent: bool = False) -> dict[str, CounterShard]:
        """Every counter shard that exists, by shard id: ONE BatchGetItem (the check reads it consistently: a
        stale shard would look as if it had fallen below the snapshot)."""
        ...
