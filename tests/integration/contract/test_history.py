"""The counters' history's contract (dfd.history.ports; dfd.adapters.dynamo.history): the shards read whole, a
snapshot written to every series, the series read back in order, the latest snapshot with what it read."""

from __future__ import annotations

from dfd.history.ports import SNAPSHOT_FIELDS, Snapshot
from dfd.ingest.ports import TenantShare
from tests.integration.contract.support import Repository, commit, registered

T0 = 1_772_366_400  # 2026-03-01T12:00:00Z: the start of an hour


def test_shards_snapshots_and_series(repo: Repository) -> None:
    assert repo.latest_snapshot() is None and repo.history(300, 0, T0 * 2) == []
    _, v = registered(repo, 1)
    commit(repo, "stored", v, TenantShare("acme", False, False, 100))
    shards = repo.counter_shards()
    assert sum(shard.total_uploads for shard in shards.values()) == 1
    assert sum(shard.total_files for shard in shards.values()) == 1
    read = {
        "shard#000": (1, 100, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0),
        "shard#003": (0, 0, 2, 2, 200, 1, 0, 0, 0, 1, 50, 0, 2, 4),
    }
    assert len(SNAPSHOT_FIELDS) == len(read["shard#000"])
    totals = {name: sum(values[i] for values in read.values()) for i, name in enumerate(SNAPSHOT_FIELDS)}
    for offset in (0, 301, 3599, 3600):
        repo.put_snapshot(Snapshot(T0 + offset, {**totals, "total_uploads": 3 + offset}, read))
    assert [(p.at, p.snapshot.taken_at) for p in repo.history(300, T0, T0 + 3601)] == [
        (T0, T0),
        (T0 + 300, T0 + 301),
        (T0 + 3300, T0 + 3599),
        (T0 + 3600, T0 + 3600),
    ]
    hourly = repo.history(3600, T0 - 3600, T0 + 7200)
    assert [(p.at, p.snapshot.totals["total_uploads"]) for p in hourly] == [(T0, 3 + 3599), (T0 + 3600, 3 + 3600)]
    assert all(p.snapshot.read == {} for p in hourly)  # a series' read carries the totals only
    assert all(p.snapshot.read == {} for p in repo.history(300, T0, T0 + 3601))
    assert hourly[-1].snapshot.totals["failed_uploads"] == 2 and hourly[-1].snapshot.totals["reaped_bytes"] == 50
    assert hourly[-1].snapshot.totals["rejected_uploads"] == 4
    daily = repo.history(86400, T0 - 86400, T0 + 86400)
    assert [p.snapshot.taken_at for p in daily] == [T0 + 3600] and daily[0].snapshot.totals["total_bytes_stored"] == 100
    assert repo.history(300, T0 + 1, T0 + 300) == []  # start <= at < end
    latest = repo.latest_snapshot()
    assert latest == Snapshot(T0 + 3600, {**totals, "total_uploads": 3603}, read)
