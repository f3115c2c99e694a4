"""The lost-copy check on an S3 Inventory report (dfd.reconcile.inventory, dfd.reconcile.service): a version the newest
report lists costs no HeadObject; one it does not list is asked of S3 unless the record was written after S3's listing;
no report, a stale one or an unreadable one leaves the check to one HeadObject per content."""

from __future__ import annotations

import csv
import gzip
import io
import json
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote_plus

import pytest

from dfd.core import clock
from dfd.reconcile import inventory
from tests.unit.test_reconcile_domain import BUCKET, NOW, World

PREFIX = "inventory/b/uploads-daily/"


def write_report(world: World, created: datetime, keys: list[tuple[str, str]], *, folder: str | None = None) -> str:
    """An S3 Inventory CSV report (as S3 writes it) listing `keys` (key, ETag), taken at `created`."""
    rows = io.StringIO()
    writer = csv.writer(rows, quoting=csv.QUOTE_ALL)
    for key, etag in keys:
        writer.writerow([BUCKET, quote_plus(key), "9", etag.strip('"')])
    data_key = f"{PREFIX}data/{created.timestamp():.0f}.csv.gz"
    world.objects.put(BUCKET, data_key, gzip.compress(rows.getvalue().encode()))
    manifest = {
        "sourceBucket": BUCKET,
        "destinationBucket": f"arn:aws:s3:::{BUCKET}",
        "version": "2016-11-30",
        "creationTimestamp": str(int(created.timestamp() * 1000)),
        "fileFormat": "CSV",
        "fileSchema": "Bucket, Key, Size, ETag",
        "files": [{"key": data_key, "size": 1, "MD5checksum": "x"}],
    }
    manifest_key = f"{PREFIX}{folder or created.strftime('%Y-%m-%dT%H-%MZ')}/manifest.json"
    world.objects.put(BUCKET, manifest_key, json.dumps(manifest).encode())
    return manifest_key


def stored(world: World, data: bytes) -> tuple[str, str]:
    answer = world.register(data)
    world.put(answer, data)
    assert world.ingest(answer["key"]).value == "stored"
    return answer["key"], world.objects.objects[(BUCKET, answer["key"])].etag


def sweep(world: World, now: datetime) -> list[tuple[str, float, str]]:
    emitted: list[tuple[str, float, str]] = []
    state = world.reconciler.begin({"now": clock.iso(now)})
    while state["pos"]["phase"] != "done":
        state = world.reconciler.page(state["pos"]["phase"], state, lambda *m: emitted.append(m))
    world.reconciler.finish(state)
    return emitted


@pytest.fixture
def world() -> World:
    return World(inventory_prefix=PREFIX)


def test_listed_versions_cost_no_head_and_the_unlisted_older_one_is_asked_and_marked_lost(world: World) -> None:
    kept = stored(world, b"kept")
    gone = stored(world, b"gone")
    del world.objects.objects[(BUCKET, gone[0])]  # lost before S3's listing: the report does not list it
    write_report(world, NOW + timedelta(hours=1), [kept])
    world.objects.heads.clear()
    assert sweep(world, NOW + timedelta(hours=2)) == [("LostFiles", 1, "Count")]
    assert world.objects.heads == [(BUCKET, gone[0])]  # the one candidate, not the listed one
    states = {record["s3_key"]: record.get("state") for record in world.repo.files.values()}
    assert states == {kept[0]: None, gone[0]: "lost"}


def test_an_unlisted_candidate_that_is_there_is_not_lost(world: World) -> None:
    """The report missed it (S3's listing is eventually consistent): its HeadObject says it is there."""
    there = stored(world, b"there")
    write_report(world, NOW + timedelta(hours=1), [])
    world.objects.heads.clear()
    assert sweep(world, NOW + timedelta(hours=2)) == []
    assert world.objects.heads == [(BUCKET, there[0])]


def test_a_record_written_after_the_listing_is_left_to_the_next_report(world: World) -> None:
    write_report(world, NOW - timedelta(hours=1), [])
    newer = stored(world, b"newer than the report")
    del world.objects.objects[(BUCKET, newer[0])]
    world.objects.heads.clear()
    assert sweep(world, NOW + timedelta(hours=2)) == []
    assert world.objects.heads == []
    assert next(iter(world.repo.files.values())).get("state") is None


def test_the_newest_report_is_read(world: World) -> None:
    kept = stored(world, b"kept")
    write_report(world, NOW + timedelta(hours=1), [], folder="2026-03-01T13-00Z")  # listed nothing
    write_report(world, NOW + timedelta(hours=2), [kept], folder="2026-03-01T14-00Z")
    world.objects.heads.clear()
    assert sweep(world, NOW + timedelta(hours=3)) == []
    assert world.objects.heads == []


@pytest.mark.parametrize("case", ["none configured", "no report", "stale", "not CSV"])
def test_without_a_usable_report_every_content_is_asked(case: str) -> None:
    world = World() if case == "none configured" else World(inventory_prefix=PREFIX)
    kept = stored(world, b"kept")
    gone = stored(world, b"gone")
    del world.objects.objects[(BUCKET, gone[0])]
    if case == "stale":
        write_report(world, NOW - timedelta(days=3), [kept])
    if case == "not CSV":
        key = write_report(world, NOW + timedelta(hours=1), [kept])
        body = json.loads(world.objects.objects[(BUCKET, key)].data) | {"fileFormat": "Parquet"}
        world.objects.objects[(BUCKET, key)].data = json.dumps(body).encode()
    world.objects.heads.clear()
    assert sweep(world, NOW + timedelta(hours=2)) == [("LostFiles", 1, "Count")]
    assert sorted(world.objects.heads) == sorted([(BUCKET, kept[0]), (BUCKET, gone[0])])


def test_a_report_is_read_once_by_the_pages_of_a_run(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    kept = stored(world, b"kept")
    write_report(world, NOW + timedelta(hours=1), [kept])
    reads: list[str] = []
    get = world.objects.get_bytes

    def counted(bucket: str, key: str) -> bytes:
        reads.append(key)
        return get(bucket, key)

    monkeypatch.setattr(world.objects, "get_bytes", counted)
    monkeypatch.setattr("dfd.reconcile.service.PAGE", {"pending": 100, "reap": 100, "references": 200, "orphans": 1000,
                                               "files": 1})  # fmt: skip
    stored(world, b"second")  # written after the report: left to the next one
    sweep(world, NOW + timedelta(hours=2))
    assert len([key for key in reads if key.endswith(".csv.gz")]) == 1  # two pages, one read of the data


def test_manifests_and_rows_as_s3_writes_them() -> None:
    keys = [f"{PREFIX}2026-03-01T01-00Z/manifest.json", f"{PREFIX}2026-03-02T01-00Z/manifest.json",
            f"{PREFIX}2026-03-02T01-00Z/manifest.checksum", f"{PREFIX}data/x.csv.gz", f"{PREFIX}hive/dt=1/symlink.txt",
            f"{PREFIX}nonsense/manifest.json"]  # fmt: skip
    assert inventory.newest_manifest(PREFIX, keys) == f"{PREFIX}2026-03-02T01-00Z/manifest.json"
    assert inventory.newest_manifest(PREFIX, keys[2:]) is None
    raw: dict[str, Any] = {"creationTimestamp": "1772326800000", "fileFormat": "CSV", "fileSchema": "Bucket, Key, ETag",
                           "files": [{"key": "d"}]}  # fmt: skip
    manifest = inventory.parse_manifest("m", json.dumps(raw).encode())
    assert manifest.created == datetime(2026, 3, 1, 1, 0, tzinfo=UTC) and manifest.files == ("d",)
    data = gzip.compress(b'"b","uploads/a+b%2Bc","abc"\n"b","uploads/x","def"\n')
    report = inventory.Report(manifest, frozenset(inventory.versions(manifest, data)))
    assert report.lists("uploads/a b+c", '"abc"') and report.lists("uploads/x", "def")
    assert not report.lists("uploads/x", "abc") and not report.lists("uploads/y", "def")
    for broken in ({**raw, "fileSchema": "Bucket, Key"}, {**raw, "fileFormat": "ORC"}, {"fileFormat": "CSV"}):
        with pytest.raises(inventory.InventoryError):
            inventory.parse_manifest("m", json.dumps(broken).encode())
    with pytest.raises(inventory.InventoryError):
        inventory.parse_manifest("m", b"not json")
