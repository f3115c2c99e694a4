"""dfd.history on the fakes of its ports: snapshots (one read, one write, every series), the series an admin reads
(intervals are differences of snapshots), the range's bounds, the CSV, and the audit's check of a snapshot."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta

import pytest

from dfd.core import clock
from dfd.core.errors import BadRequest, Forbidden
from dfd.history import codec as history_codec
from dfd.history.ports import SNAPSHOT_FIELDS, STEPS
from dfd.history.service import (
    CSV_COLUMNS,
    MAX_RANGE,
    History,
    history_csv,
    parse_range,
    snapshot_mismatches,
    take_snapshot,
)
from dfd.reconcile.service import Reconciler
from tests.unit.callers import ADMIN, ALICE, settings
from tests.unit.fakes import FakeIngestQueue, FakeObjectStore, FakeRepository

DAY = datetime(2026, 3, 1, tzinfo=UTC)  # midnight: the start of a day, an hour and a 5-minute interval
START = clock.epoch(DAY)


def repo_with(**shards: dict[str, int]) -> FakeRepository:
    repo = FakeRepository(settings())
    for index, values in enumerate(shards.values()):
        repo.counters[index] = dict(values)
    return repo


def count(repo: FakeRepository, shard: int, **deltas: int) -> None:
    totals = repo.counters.setdefault(shard, {})
    for name, delta in deltas.items():
        totals[name] = totals.get(name, 0) + delta


def test_a_snapshot_is_one_read_and_one_write_of_every_series_at_its_interval() -> None:
    repo = repo_with(a={"total_uploads": 3, "duplicates_avoided": 1}, b={"total_uploads": 2, "total_files": 4})
    snapshot = take_snapshot(repo, DAY + timedelta(minutes=7, seconds=3))
    assert snapshot.totals["total_uploads"] == 5 and snapshot.totals["total_files"] == 4
    assert snapshot.totals["duplicates_avoided"] == 1
    assert repo.snapshot_writes == 1
    points = [("step#300", START + 300), ("step#3600", START), ("step#86400", START)]
    assert sorted(repo.snapshot_items) == [("latest", 0), *points]
    packed = ",".join(str(value) for value in (START + 423, 4, 0, 5, 1, *[0] * (len(SNAPSHOT_FIELDS) - 4)))
    for key in points:
        item = repo.snapshot_items[key]
        assert set(item) == {"series", "at", "ttl", "t"} and item["t"] == packed  # taken_at, then the totals
        assert item["ttl"] - (START + 423) >= 400 * 86400  # kept at least 400 days
    # the latest snapshot keeps what was read, shard by shard, and is replaced by the next one (no ttl)
    latest = repo.snapshot_items[("latest", 0)]
    zeros = [0] * (len(SNAPSHOT_FIELDS) - 4)
    assert latest["read"] == {"shard#000": [0, 0, 3, 1, *zeros], "shard#001": [4, 0, 2, 0, *zeros]}
    assert latest["taken_at"] == START + 423 and latest["total_uploads"] == 5 and "ttl" not in latest
    assert list(SNAPSHOT_FIELDS[:3]) == ["total_files", "total_bytes_stored", "total_uploads"]


def test_a_snapshot_read_before_the_counters_had_a_field_reads_it_as_0() -> None:
    snapshot = history_codec.snapshot({"at": 0, "taken_at": 5, "total_uploads": 2, "read": {"shard#000": [1, 2]}})
    assert snapshot.read == {"shard#000": (1, 2, *[0] * (len(SNAPSHOT_FIELDS) - 2))}
    assert snapshot.totals["failed_uploads"] == 0 and snapshot.totals["total_uploads"] == 2
    point = history_codec.history_point({"t": "3605,1,10,4"}, 3600)
    assert (point.at, point.snapshot.taken_at) == (3600, 3605)
    assert point.snapshot.totals == {**dict.fromkeys(SNAPSHOT_FIELDS, 0), "total_files": 1, "total_bytes_stored": 10,
                                     "total_uploads": 4}  # fmt: skip
    # a point written with a total per attribute, before `t`
    old = history_codec.history_point({"at": 300, "taken_at": 301, "total_uploads": 7, "ttl": 9}, 300)
    assert (old.at, old.snapshot.taken_at, old.snapshot.totals["total_uploads"]) == (300, 301, 7)


def test_the_last_snapshot_of_an_interval_is_its_roll_up() -> None:
    repo = repo_with(a={"total_uploads": 1})
    take_snapshot(repo, DAY + timedelta(minutes=5))
    count(repo, 0, total_uploads=2)
    take_snapshot(repo, DAY + timedelta(minutes=55))
    hourly = repo.history(3600, START, START + 3600)
    assert [(p.at, p.snapshot.totals["total_uploads"]) for p in hourly] == [(START, 3)]
    assert [p.at for p in repo.history(300, START, START + 3600)] == [START + 300, START + 3300]
    latest = repo.latest_snapshot()
    assert latest is not None and latest.taken_at == START + 3300 and latest.totals["total_uploads"] == 3


def test_intervals_are_differences_of_snapshots_and_a_gap_is_covered_by_the_next_point() -> None:
    repo = repo_with(a={})
    history = History(repo)
    for minute, (uploads, duplicates) in enumerate([(0, 0), (4, 1), (10, 4), (12, 4)]):
        if minute == 2:
            count(repo, 0, total_uploads=uploads - 4, duplicates_avoided=duplicates - 1, total_s3_size_saved=300)
            continue  # no snapshot in this interval
        repo.counters[0] = {**repo.counters[0], "total_uploads": uploads, "duplicates_avoided": duplicates}
        take_snapshot(repo, DAY + timedelta(minutes=5 * minute, seconds=30))
    body = history.series(ADMIN, str(START + 300), str(START + 1200), "300", DAY + timedelta(hours=1))
    assert (body["from"], body["to"], body["step"]) == (START + 300, START + 1200, 300)
    points = body["points"]
    assert [p["at"] for p in points] == [START + 300, START + 900]  # START + 600 had no snapshot
    first, last = points
    # the point before the range (START) is the first one's baseline
    assert first["interval"] == {
        "uploads": 4,
        "duplicates": 1,
        "bytes_saved": 0,
        "deletes": 0,
        "files_change": 0,
        "bytes_stored_change": 0,
        "contents_reaped": 0,
        "bytes_reaped": 0,
        "expired_uploads": 0,
        "failed_uploads": 0,
        "rejected_uploads": 0,
        "new_contents": 0,
        "dedup_ratio": 0.25,
        "since": START + 30,
    }
    assert first["totals"]["total_uploads"] == 4 and first["totals"]["dedup_ratio"] == 0.25
    assert last["interval"]["uploads"] == 8 and last["interval"]["duplicates"] == 3
    assert last["interval"]["since"] == START + 330 and last["interval"]["bytes_saved"] == 300
    assert last["taken_at"] == START + 930


def test_an_interval_s_new_contents_count_those_the_reaper_removed_in_it() -> None:
    repo = repo_with(a={"total_files": 5, "total_bytes_stored": 500, "total_uploads": 5})
    take_snapshot(repo, DAY)
    # 3 contents recorded, 2 reaped (their bytes 150), an upload expired and one failed
    count(repo, 0, total_files=3 - 2, total_uploads=3, total_bytes_stored=300 - 150)
    count(repo, 1, reaped_contents=2, reaped_bytes=150, expired_uploads=1, failed_uploads=1, rejected_uploads=3)
    take_snapshot(repo, DAY + timedelta(minutes=5))
    body = History(repo).series(ADMIN, str(START + 300), str(START + 600), "300", DAY + timedelta(hours=1))
    (point,) = body["points"]
    interval = point["interval"]
    assert (interval["new_contents"], interval["files_change"], interval["contents_reaped"]) == (3, 1, 2)
    assert (interval["bytes_reaped"], interval["bytes_stored_change"]) == (150, 150)
    assert (interval["expired_uploads"], interval["failed_uploads"], interval["rejected_uploads"]) == (1, 1, 3)
    assert point["totals"]["reaped_contents"] == 2 and point["totals"]["total_files"] == 6
    rows = list(csv.DictReader(io.StringIO(history_csv(body))))
    assert rows[0]["interval_new_contents"] == "3" and rows[0]["reaped_bytes"] == "150"


def test_the_first_point_without_a_point_before_it_has_no_interval_and_an_empty_history_has_no_points() -> None:
    repo = repo_with(a={"total_uploads": 2})
    history = History(repo)
    assert history.series(ADMIN, str(START), str(START + 3600), "300", DAY)["points"] == []
    take_snapshot(repo, DAY)
    points = history.series(ADMIN, str(START), str(START + 3600), "300", DAY)["points"]
    assert len(points) == 1 and points[0]["interval"] is None and points[0]["totals"]["total_uploads"] == 2


def test_history_is_for_admins_only() -> None:
    with pytest.raises(Forbidden):
        History(repo_with(a={})).series(ALICE, None, None, None, DAY)


@pytest.mark.parametrize("step", STEPS)
def test_a_range_longer_than_its_step_allows_is_a_400_naming_the_limit(step: int) -> None:
    limit = MAX_RANGE[step]
    assert parse_range("0", str(limit), str(step), START) == (0, limit, step)
    with pytest.raises(BadRequest) as refused:
        parse_range("0", str(limit + step), str(step), START)
    assert refused.value.code == "invalid_range"
    assert f"step={step} spans at most {limit} seconds" in refused.value.message
    assert refused.value.details == {"step": step, "max_range": limit}


@pytest.mark.parametrize(
    ("raw_from", "raw_to", "raw_step", "code"),
    [
        (None, None, "60", "invalid_step"),
        (None, None, "", "invalid_step"),
        (None, None, "300.0", "invalid_step"),
        ("yesterday", None, None, "invalid_range"),
        ("-5", None, None, "invalid_range"),
        (None, "", None, "invalid_range"),
        ("1" * 12, None, None, "invalid_range"),
        ("2000", "1000", None, "invalid_range"),
        ("1000", "1000", None, "invalid_range"),
    ],
)
def test_a_bad_range_is_a_400(raw_from: str | None, raw_to: str | None, raw_step: str | None, code: str) -> None:
    with pytest.raises(BadRequest) as refused:
        parse_range(raw_from, raw_to, raw_step, START)
    assert refused.value.code == code


def test_the_range_defaults_to_the_last_day_at_5_minutes_aligned_outwards() -> None:
    assert parse_range(None, None, None, START + 10) == (START - 86400, START + 300, 300)
    assert parse_range("3599", "3601", "3600", START) == (0, 7200, 3600)


def test_the_csv_has_one_row_per_point_in_the_columns_order() -> None:
    repo = repo_with(a={"total_uploads": 1})
    take_snapshot(repo, DAY)
    count(repo, 0, total_uploads=3, duplicates_avoided=1)
    take_snapshot(repo, DAY + timedelta(minutes=5))
    body = History(repo).series(ADMIN, str(START), str(START + 600), "300", DAY)
    rows = list(csv.reader(io.StringIO(history_csv(body))))
    assert tuple(rows[0]) == CSV_COLUMNS
    first, second = (dict(zip(CSV_COLUMNS, row, strict=True)) for row in rows[1:])
    assert first["at"] == str(START) and first["interval_uploads"] == "" and first["total_uploads"] == "1"
    assert second["interval_uploads"] == "3" and second["interval_duplicates"] == "1"
    assert second["interval_dedup_ratio"] == "0.333333" and second["dedup_ratio"] == "0.25"


def test_the_latest_snapshot_checks_against_the_counters_it_was_taken_from() -> None:
    repo = repo_with(a={"total_uploads": 5, "total_files": 2}, b={"deleted_uploads": 1})
    snapshot = take_snapshot(repo, DAY)
    assert snapshot_mismatches(snapshot, repo.counter_shards()) == []
    # the counters move on after the snapshot: growing ones only grow, files and bytes go both ways
    count(repo, 0, total_uploads=2, total_files=-1)
    count(repo, 2, total_uploads=1)  # a shard the snapshot did not read
    assert snapshot_mismatches(snapshot, repo.counter_shards()) == []
    # a shard's growing counter below what the snapshot read: the snapshot (or the shard) is wrong
    count(repo, 1, deleted_uploads=-1)
    assert snapshot_mismatches(snapshot, repo.counter_shards()) == ["shard#001.deleted_uploads: read 1, now 0"]
    # a total that is not the sum of what was read
    item = history_codec.snapshot_items(snapshot)[-1] | {"total_uploads": 6}
    tampered = history_codec.snapshot(item)
    count(repo, 1, deleted_uploads=1)
    assert snapshot_mismatches(tampered, repo.counter_shards()) == [
        "total_uploads: the total is not the sum of the shards read"
    ]


@pytest.mark.parametrize(
    "name", ["reaped_contents", "reaped_bytes", "expired_uploads", "failed_uploads", "rejected_uploads"]
)
def test_the_reaper_s_and_the_reconcile_s_counts_only_grow_after_a_snapshot(name: str) -> None:
    repo = repo_with(a={name: 3, "total_files": 1})
    snapshot = take_snapshot(repo, DAY)
    count(repo, 0, **{name: 1})
    assert snapshot_mismatches(snapshot, repo.counter_shards()) == []
    count(repo, 0, **{name: -2})
    assert snapshot_mismatches(snapshot, repo.counter_shards()) == [f"shard#000.{name}: read 3, now 2"]


def sweep(repo: FakeRepository, **overrides: object) -> tuple[dict[str, object], list[tuple[str, float]]]:
    reconciler = Reconciler(repo.settings, repo, FakeObjectStore(), FakeIngestQueue(), workers=1, wall=lambda: DAY)
    emitted: list[tuple[str, float]] = []
    state = reconciler.begin({"sweep": True, **overrides})
    while state["pos"]["phase"] != "done":
        state = reconciler.page(state["pos"]["phase"], state, lambda name, value, _: emitted.append((name, value)))
    return reconciler.finish(state), emitted


def test_the_audit_checks_the_latest_snapshot() -> None:
    repo = FakeRepository(settings(history_table="h"))
    assert sweep(repo)[0]["snapshot"] is None  # no snapshot yet
    count(repo, 0, total_uploads=2, deleted_uploads=1)
    take_snapshot(repo, DAY)
    count(repo, 1, total_uploads=1)  # the counters move on after it
    summary, emitted = sweep(repo)
    assert summary["snapshot"] == [] and not [name for name, _ in emitted if name == "SnapshotMismatch"]
    # a snapshot that is not what its shards said
    item = repo.snapshot_items[("latest", 0)]
    item["read"]["shard#000"][2] = 5
    summary, emitted = sweep(repo)
    assert summary["snapshot"] == [
        "total_uploads: the total is not the sum of the shards read",
        "shard#000.total_uploads: read 5, now 2",
    ]
    assert ("SnapshotMismatch", 2) in emitted
    # without a history table there is nothing to check
    assert sweep(FakeRepository(settings()))[0]["snapshot"] is None
