"""The history's items (the stats history table: key `series` + `at`) <-> its records (dfd.core.codec: what an
item is).

A snapshot is written once per series (dfd.history.ports.STEPS) under the start of the interval its time falls
in: `series` is `step#<seconds>`, `at` that start. A later snapshot in the same interval replaces the item, so each
point holds the last snapshot of its interval: hourly and daily roll-ups are the 5-minute snapshots at their
boundaries, and an interval's figures are the difference of two points. Each counter total is an attribute of its
own name; the 5-minute points also keep `read` (shard id -> its values in SNAPSHOT_FIELDS order), what the audit
checks. Every item expires (`ttl`) RETENTION_DAYS after its snapshot.
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


def point_key(step: int, at: int) -> Item:
    return {"series": series(step), "at": at}


def snapshot_items(snapshot: Snapshot) -> list[Item]:
    """The items of a snapshot: one per series, the finest with the shard values it read."""
    expires = snapshot.taken_at + RETENTION_DAYS * 86400
    totals = {name: int(snapshot.totals.get(name, 0)) for name in SNAPSHOT_FIELDS}
    items: list[Item] = []
    for step in STEPS:
        item: Item = point_key(step, interval_start(snapshot.taken_at, step))
        item |= {"taken_at": snapshot.taken_at, "ttl": expires, **totals}
        if step == STEPS[0]:
            item["read"] = {shard: list(values) for shard, values in snapshot.read.items()}
        items.append(item)
    return items


def history_point(item: Mapping[str, Any]) -> HistoryPoint:
    """The point an item of the history table is (any attribute absent reads as 0, `read` as empty)."""
    step = int(str(item["series"]).removeprefix(SERIES_PREFIX))
    read = item.get("read") or {}
    snapshot = Snapshot(
        taken_at=int(item.get("taken_at", item["at"])),
        totals={name: int(item.get(name, 0)) for name in SNAPSHOT_FIELDS},
        read={str(shard): tuple(int(value) for value in values) for shard, values in read.items()},
    )
    return HistoryPoint(step=step, at=int(item["at"]), snapshot=snapshot)


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
