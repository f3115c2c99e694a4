"""The counters' history: a snapshot of the counter totals every few minutes (ONE read of the counter shards, ONE
write: nothing is added to the upload, ingest or delete paths), the series an admin reads from them, and the
audit's check of the latest snapshot.

A snapshot is exact at its own time: its totals are the sum of the shard values it read. An interval's figures
are differences of two snapshots, so they are exact at snapshot boundaries; a point whose interval had no
snapshot is absent, and the next point's figures cover everything since the point before it (`since`).
"""

from __future__ import annotations

import csv
import io
import re
from typing import TYPE_CHECKING, Any

from dfd.core import clock
from dfd.core.errors import BadRequest, Forbidden
from dfd.history.codec import interval_start
from dfd.history.ports import SNAPSHOT_FIELDS, STEPS, HistoryPoint, Snapshot

if TYPE_CHECKING:
    from collections.abc import Mapping
    from datetime import datetime

    from dfd.core.records import CounterShard
    from dfd.history.ports import HistoryReads, SnapshotStore
    from dfd.identity.caller import Caller

# the longest range one call reads, by step (2,016, 2,208 and 800 points)
MAX_RANGE = {300: 7 * 86400, 3600: 92 * 86400, 86400: 800 * 86400}
DEFAULT_RANGE = 86400
_EPOCH_RE = re.compile(r"[0-9]{1,11}")

# counters that only grow: a shard's value read now is at least the value a snapshot read (the reaper lowers only
# total_files and total_bytes_stored)
GROWING = (
    "total_uploads",
    "duplicates_avoided",
    "total_s3_size_saved",
    "deleted_uploads",
    "reaped_uploads",
    "reaped_duplicates",
    "reaped_saved",
    "reaped_contents",
    "reaped_bytes",
    "expired_uploads",
    "failed_uploads",
    "rejected_uploads",
)
# what an interval reports: name -> the total whose difference it is
INTERVAL_FIELDS = {
    "uploads": "total_uploads",
    "duplicates": "duplicates_avoided",
    "bytes_saved": "total_s3_size_saved",
    "deletes": "deleted_uploads",
    "files_change": "total_files",
    "bytes_stored_change": "total_bytes_stored",
    "contents_reaped": "reaped_contents",
    "bytes_reaped": "reaped_bytes",
    "expired_uploads": "expired_uploads",
    "failed_uploads": "failed_uploads",
    "rejected_uploads": "rejected_uploads",
}
# an interval's figures derived from those: new contents are the contents recorded (a content whose record the
# reaper has not removed yet, uploaded again after its delete, is not new)
DERIVED_FIELDS = ("new_contents", "dedup_ratio", "since")
TOTAL_FIELDS = (
    "total_files",
    "total_bytes_stored",
    "total_uploads",
    "duplicates_avoided",
    "total_s3_size_saved",
    "deleted_uploads",
    "reaped_contents",
    "reaped_bytes",
    "expired_uploads",
    "failed_uploads",
    "rejected_uploads",
)


# the totals series_view reads of each point (TOTAL_FIELDS first), and where each interval figure's total is in it
_READ = (*TOTAL_FIELDS, *(name for name in INTERVAL_FIELDS.values() if name not in TOTAL_FIELDS))
_INTERVAL_AT = tuple((key, _READ.index(name)) for key, name in INTERVAL_FIELDS.items())


def ratio(duplicates: int, uploads: int) -> float:
    """Duplicates per upload, as GET /admin/stats computes its dedup_ratio (0 without uploads)."""
    return round(duplicates / uploads, 6) if uploads else 0.0


def snapshot_of(shards: Mapping[str, CounterShard], taken_at: int) -> Snapshot:
    """The snapshot of these shard values: their totals, and each shard's values as read."""
    read = {shard: tuple(getattr(values, name) for name in SNAPSHOT_FIELDS) for shard, values in sorted(shards.items())}
    totals = {name: sum(values[index] for values in read.values()) for index, name in enumerate(SNAPSHOT_FIELDS)}
    return Snapshot(taken_at=taken_at, totals=totals, read=read)


def take_snapshot(repo: SnapshotStore, now: datetime) -> Snapshot:
    """One read of the counter shards, one write of the snapshot (every series)."""
    snapshot = snapshot_of(repo.counter_shards(), clock.epoch(now))
    repo.put_snapshot(snapshot)
    return snapshot


def snapshot_mismatches(snapshot: Snapshot, shards: Mapping[str, CounterShard]) -> list[str]:
    """What the latest snapshot got wrong about the counters it was taken from, checked against the shards read
    now: its totals must be the sums of the values it read, and each growing counter of each shard must not have
    fallen below what it read (the counters move on after a snapshot, so only those are compared). Empty: exact."""
    wrong: list[str] = []
    for index, name in enumerate(SNAPSHOT_FIELDS):
        if snapshot.totals.get(name, 0) != sum(values[index] for values in snapshot.read.values()):
            wrong.append(f"{name}: the total is not the sum of the shards read")
    for shard, values in sorted(snapshot.read.items()):
        current = shards.get(shard)
        for index, name in enumerate(SNAPSHOT_FIELDS):
            if name in GROWING and (getattr(current, name) if current else 0) < values[index]:
                wrong.append(f"{shard}.{name}: read {values[index]}, now {getattr(current, name) if current else 0}")
    return wrong


def _epoch(raw: str | None, name: str) -> int | None:
    if raw is None:
        return None
    if not _EPOCH_RE.fullmatch(raw):
        raise BadRequest(f"{name} must be a time in epoch seconds (0 to 99999999999)", code="invalid_range")
    return int(raw)


def parse_range(raw_from: str | None, raw_to: str | None, raw_step: str | None, now: int) -> tuple[int, int, int]:
    """(from, to, step) of a history request, `from` and `to` aligned outwards to the step: the step is one of
    STEPS (default 300), `to` defaults to now, `from` to a day before `to`; the range is at most MAX_RANGE[step]."""
    steps = ", ".join(str(step) for step in STEPS)
    if raw_step is not None and raw_step not in {str(step) for step in STEPS}:
        raise BadRequest(f"step must be one of {steps} (seconds)", code="invalid_step")
    step = int(raw_step) if raw_step is not None else STEPS[0]
    end = _epoch(raw_to, "to")
    end = now if end is None else end
    start = _epoch(raw_from, "from")
    start = end - DEFAULT_RANGE if start is None else start
    if start >= end:
        raise BadRequest("from must be before to", code="invalid_range")
    start, end = interval_start(start, step), -interval_start(-end, step)
    limit = MAX_RANGE[step]
    if end - start > limit:
        raise BadRequest(
            f"a range at step={step} spans at most {limit} seconds ({limit // 86400} days); this one spans "
            f"{end - start}",
            code="invalid_range",
            details={"step": step, "max_range": limit},
        )
    return start, end, step


def series_view(points: list[HistoryPoint], start: int) -> list[dict[str, Any]]:
    """The API's points from the stored ones (oldest first; those before `start` serve as the first's baseline):
    the totals at the point's snapshot, and the interval since the point before it (None for the first one with
    none before it)."""
    shown: list[dict[str, Any]] = []
    before: Snapshot | None = None
    previous: tuple[int, ...] = ()
    for point in points:
        snapshot = point.snapshot
        values = tuple(snapshot.totals.get(name, 0) for name in _READ)
        if point.at >= start:
            totals: dict[str, Any] = dict(zip(TOTAL_FIELDS, values, strict=False))
            totals["dedup_ratio"] = ratio(totals["duplicates_avoided"], totals["total_uploads"])
            interval: dict[str, Any] | None = None
            if before is not None:
                interval = {key: values[i] - previous[i] for key, i in _INTERVAL_AT}
                interval["new_contents"] = interval["files_change"] + interval["contents_reaped"]
                interval["dedup_ratio"] = ratio(interval["duplicates"], interval["uploads"])
                interval["since"] = before.taken_at
            shown.append({"at": point.at, "taken_at": snapshot.taken_at, "totals": totals, "interval": interval})
        before, previous = snapshot, values
    return shown


CSV_COLUMNS = (
    "at",
    "taken_at",
    *TOTAL_FIELDS,
    "dedup_ratio",
    *(f"interval_{key}" for key in (*INTERVAL_FIELDS, *DERIVED_FIELDS)),
)


def history_csv(body: Mapping[str, Any]) -> str:
    """A history response as CSV: one row per point, the totals then the interval's figures (empty for a point
    without an interval)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    for point in body["points"]:
        interval = point["interval"] or {}
        writer.writerow(
            [
                point["at"],
                point["taken_at"],
                *(point["totals"][name] for name in (*TOTAL_FIELDS, "dedup_ratio")),
                *(interval.get(key, "") for key in (*INTERVAL_FIELDS, *DERIVED_FIELDS)),
            ]
        )
    return out.getvalue()


class History:
    """GET /admin/stats/history: admins only."""

    def __init__(self, repo: HistoryReads) -> None:
        self._repo = repo

    def series(
        self, caller: Caller, raw_from: str | None, raw_to: str | None, raw_step: str | None, now: datetime
    ) -> dict[str, Any]:
        if not caller.is_admin:
            raise Forbidden("admins only")
        start, end, step = parse_range(raw_from, raw_to, raw_step, clock.epoch(now))
        points = self._repo.history(step, start - step, end)
        return {"from": start, "to": end, "step": step, "points": series_view(points, start)}
