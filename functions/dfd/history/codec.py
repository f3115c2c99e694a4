"""The history's items (the stats history table: key `series` + `at`) <-> its records (dfd.core.codec: what an
item is).

A snapshot is written once per series (dfd.history.ports.STEPS) under the start of the interval its time falls
in: `series` is `step#<seconds>`, `at` that start. A later snapshot in the same interval replaces the item, so each
point holds the last snapshot of its interval: hourly and daily roll-ups are the 5-minute snapshots at their
boundaries, and an interval's figures are the difference of two points. A point is one string, `t`: its
snapshot's `taken_at`, then the SNAPSHOT_FIELDS totals in that order, comma-separated — the one attribute a
series' Query projects (for DynamoDB to send and botocore to parse: one value a point, not 15); its `at` is the
start of the interval `taken_at` falls in. An item without `t` (written before it) holds `taken_at` and each total
as an attribute of its own name: a range that has one is read again whole (dfd.adapters.dynamo.history). Every
point expires (`ttl`) RETENTION_DAYS after its snapshot. One more item, LATEST_KEY, holds the latest snapshot
whole: its totals and `read` (shard id -> its values in SNAPSHOT_FIELDS order), what the audit checks; the points
carry no shard values, so a series' read costs what its totals weigh. A `t` or a shard's values shorter than
SNAPSHOT_FIELDS (taken before the counters had the fields at its end) read those as 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from dfd.core import codec as core_codec
from dfd.history.ports import SNAPSHOT_FIELDS, STEPS, HistoryPoint, Snapshot, TenantTotals
from dfd.ingest import codec as ingest_codec

if TYPE_CHECKING:
    from dfd.core.codec import Item

RETENTION_DAYS = 401  # every series is kept at least 400 days
SERIES_PREFIX = "step#"


def series(step: int) -> str:
    return f"{SERIES_PREFIX}{step}"


def interval_start(moment: int, step: int) -> int:
    return moment - moment % step


# the latest snapshot with the shard values it read: one item, replaced by each snapshot (no ttl)
LATEST_KEY: Item = {"series": "latest", "at": 0}


def point_key(step: int, at: int) -> Item:
    return {"series": series(step), "at": at}


def snapshot_items(snapshot: Snapshot) -> list[Item]:
    """The items of a snapshot: one point per series (its totals), and LATEST_KEY's (its totals and `read`)."""
    expires = snapshot.taken_at + RETENTION_DAYS * 86400
    totals = {name: int(snapshot.totals.get(name, 0)) for name in SNAPSHOT_FIELDS}
    packed = ",".join(str(value) for value in (snapshot.taken_at, *(totals[name] for name in SNAPSHOT_FIELDS)))
    items: list[Item] = [
        point_key(step, interval_start(snapshot.taken_at, step)) | {"ttl": expires, PACKED: packed} for step in STEPS
    ]
    read = {shard: list(values) for shard, values in snapshot.read.items()}
    items.append(LATEST_KEY | {"taken_at": snapshot.taken_at, **totals, "read": read})
    return items


# the attribute of a point that a series' Query projects
PACKED = "t"


def snapshot(item: Mapping[str, Any]) -> Snapshot:
    """The snapshot an item holds (any total absent reads as 0, `read` absent as empty, a shard's value beyond
    those it holds as 0)."""
    read = item.get("read") or {}
    width = len(SNAPSHOT_FIELDS)
    return Snapshot(
        taken_at=int(item["taken_at"]),
        totals={name: int(item.get(name, 0)) for name in SNAPSHOT_FIELDS},
        read={
            str(shard): tuple(int(value) for value in values[:width]) + (0,) * (width - len(values))
            for shard, values in read.items()
        },
    )


def history_point(item: Mapping[str, Any], step: int) -> HistoryPoint:
    """The point an item of the series of `step` is (`t` only, as a series' Query projects it, or, written before
    `t`, whole)."""
    packed = item.get(PACKED)
    if packed is None:
        found = snapshot(item)
    else:
        taken_at, *values = map(int, str(packed).split(","))
        if len(values) < len(SNAPSHOT_FIELDS):
            values += [0] * (len(SNAPSHOT_FIELDS) - len(values))
        found = Snapshot(taken_at=taken_at, totals=dict(zip(SNAPSHOT_FIELDS, values, strict=False)), read={})
    return HistoryPoint(step=step, at=interval_start(found.taken_at, step), snapshot=found)


# what GET /admin/tenants reads of each item of the tenant view (references and usage shards)
TENANT_VIEW_ATTRS = ("tenant", "hash", "upload_count", "size", *core_codec.USAGE_ATTRS.values())


_SUMS = ("files", "bytes", "uploads", "duplicates", "saved", "c", "u")


def tenant_totals(items: Iterable[Mapping[str, Any]]) -> list[TenantTotals]:
    """Every tenant's totals from the items of the tenant view (references and usage shards), by tenant name."""
    sums: dict[str, dict[str, int]] = {}
    for item in items:
        tenant = str(item.get("tenant", ""))
        totals = sums.setdefault(
            tenant, dict.fromkeys(("files", "bytes", "uploads", "duplicates", "saved", "c", "u"), 0)
        )
        if core_codec.is_usage(item):
            if core_codec.usage_shard(item) is not None:
                usage = core_codec.tenant_usage(item)
                totals["c"] += usage.pending_count
                totals["u"] += usage.used_bytes
            continue
        ref = ingest_codec.tenant_ref(item)
        if not ref.holds:
            continue
        size = ref.size or 0
        totals["files"] += 1
        totals["bytes"] += size
        totals["uploads"] += ref.upload_count
        totals["duplicates"] += ref.upload_count - 1
        totals["saved"] += (ref.upload_count - 1) * size
    return [
        TenantTotals(
            tenant=tenant,
            files=t["files"],
            bytes=t["bytes"],
            uploads=t["uploads"],
            duplicates=t["duplicates"],
            bytes_saved=t["saved"],
            pending_uploads=t["c"],
            used_bytes=t["u"],
        )
        for tenant, t in sorted(sums.items())
        if tenant
    ]
