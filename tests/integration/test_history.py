"""The counters' history end to end on DynamoDB Local: SnapshotFunction's snapshots of real uploads at simulated
times, GET /admin/stats/history as JSON and CSV, its 400s, GET /admin/stats unchanged beside it, the audit's check of
the latest snapshot, and GET /admin/tenants."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from dfd import deps
from dfd.core import clock
from dfd.core.records import COUNTER_FIELDS
from dfd.handlers import admin_stats, snapshot
from dfd.history.service import CSV_COLUMNS
from tests.integration.support import Aws, upload_as, upload_bytes
from tests.support import ALICE, BOB, CAROL, LambdaContext, api_event, call
from tests.unit.fakes import run_reconcile

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def snap(at: datetime) -> dict[str, Any]:
    result: dict[str, Any] = snapshot.handler({"source": "aws.events", "now": clock.iso(at)}, LambdaContext())
    return result


def history(query: dict[str, str], headers: dict[str, str] | None = None) -> dict[str, Any]:
    response: dict[str, Any] = admin_stats.handler(
        api_event("GET", "/admin/stats/history", query=query, headers=headers), LambdaContext()
    )
    return response


def test_snapshots_of_uploads_read_back_as_series_of_differences(aws: Aws) -> None:
    assert snap(T0)["totals"]["total_uploads"] == 0
    upload_bytes(aws, b"first content" * 40, "a.bin")
    upload_bytes(aws, b"first content" * 40, "b.bin")  # a duplicate after upload
    snap(T0 + timedelta(minutes=5, seconds=10))
    upload_bytes(aws, b"other content" * 10, "c.bin")
    taken = snap(T0 + timedelta(minutes=14))
    status, stats = call(admin_stats.handler, api_event("GET", "/admin/stats"))
    assert status == 200 and set(stats) == {*COUNTER_FIELDS, "dedup_ratio"}  # GET /admin/stats as it was
    assert set(stats) < set(CSV_COLUMNS)
    assert {name: taken["totals"][name] for name in stats if name != "dedup_ratio"} == {
        name: value for name, value in stats.items() if name != "dedup_ratio"
    }

    start = str(clock.epoch(T0))
    query = {"from": start, "to": str(clock.epoch(T0) + 900), "step": "300"}
    status, body = call(admin_stats.handler, api_event("GET", "/admin/stats/history", query=query))
    assert status == 200, body
    assert [point["at"] - clock.epoch(T0) for point in body["points"]] == [0, 300, 600]
    first, second, third = body["points"]
    assert first["interval"] is None and first["totals"]["total_uploads"] == 0
    assert second["interval"]["uploads"] == 2 and second["interval"]["duplicates"] == 1
    assert second["interval"]["bytes_saved"] == len(b"first content" * 40) and second["interval"]["files_change"] == 1
    assert third["interval"]["uploads"] == 1 and third["interval"]["duplicates"] == 0
    assert third["totals"]["total_uploads"] == stats["total_uploads"] == 3
    assert third["totals"]["dedup_ratio"] == stats["dedup_ratio"]

    hourly = call(admin_stats.handler, api_event("GET", "/admin/stats/history", query={**query, "step": "3600"}))[1]
    assert [(p["at"], p["taken_at"]) for p in hourly["points"]] == [(clock.epoch(T0), clock.epoch(T0) + 840)]

    response = history(query, {"accept": "text/csv"})
    assert response["statusCode"] == 200 and response["headers"]["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(response["body"])))
    assert tuple(rows[0]) == CSV_COLUMNS and len(rows) == 4
    assert dict(zip(CSV_COLUMNS, rows[2], strict=True))["interval_uploads"] == "2"
    assert history(query, {"accept": "application/json, text/csv;q=0.5"})["headers"]["Content-Type"] == (
        "application/json"
    )


def test_points_written_with_a_total_per_attribute_read_as_the_packed_ones(aws: Aws) -> None:
    start = clock.epoch(T0)
    old = {"series": {"S": "step#300"}, "at": {"N": str(start)}, "taken_at": {"N": str(start + 2)}}
    old |= {"total_uploads": {"N": "4"}, "duplicates_avoided": {"N": "1"}, "read": {"M": {}}}
    aws.ddb.put_item(TableName=aws.settings.history_table, Item=old)
    upload_bytes(aws, b"after the old point" * 10, "a.bin")
    snap(T0 + timedelta(minutes=5))
    query = {"from": str(start), "to": str(start + 600), "step": "300"}
    status, body = call(admin_stats.handler, api_event("GET", "/admin/stats/history", query=query))
    assert status == 200, body
    first, second = body["points"]
    assert (first["taken_at"], first["totals"]["total_uploads"], first["totals"]["failed_uploads"]) == (start + 2, 4, 0)
    assert second["totals"]["total_uploads"] == 1 and second["interval"]["uploads"] == -3  # the old point's figures


@pytest.mark.parametrize(
    ("query", "code", "says"),
    [
        ({"step": "60"}, "invalid_step", "300, 3600, 86400"),
        ({"from": "0", "to": str(8 * 86400), "step": "300"}, "invalid_range", "at most 604800 seconds (7 days)"),
        ({"from": "soon"}, "invalid_range", "epoch seconds"),
        ({"since": "0"}, "unknown_parameter", "since"),
    ],
)
def test_a_bad_query_is_a_400_naming_what_is_wrong(aws: Aws, query: dict[str, str], code: str, says: str) -> None:
    status, body = call(admin_stats.handler, api_event("GET", "/admin/stats/history", query=query))
    assert status == 400 and body["error"]["code"] == code and says in body["error"]["message"], body


def test_history_is_for_admins_only(aws: Aws) -> None:
    status, body = call(admin_stats.handler, api_event("GET", "/admin/stats/history", user=ALICE))
    assert status == 403 and body["error"]["code"] == "forbidden"


def test_a_snapshot_at_a_time_without_its_zone_fails_and_writes_nothing(aws: Aws) -> None:
    with pytest.raises(snapshot.SnapshotInputError):
        snapshot.handler({"now": "2026-03-01T12:00:00"}, LambdaContext())
    assert aws.ddb.scan(TableName=aws.settings.history_table)["Items"] == []


def test_the_sweep_checks_the_latest_snapshot_against_the_counters(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INGEST_QUEUE_URL", aws.queue_url)
    upload_bytes(aws, b"audited" * 30, "a.bin")
    snap(clock.now())
    upload_bytes(aws, b"audited" * 30, "b.bin")  # the counters move on after the snapshot
    summary = run_reconcile(deps.reconciler(), sweep=True)
    assert summary["snapshot"] == [] and summary["drift"] == {"files": 0, "bytes": 0}, summary
    # a snapshot whose totals are not what it read
    item = aws.ddb.get_item(TableName=aws.settings.history_table, Key={"series": {"S": "latest"}, "at": {"N": "0"}})[
        "Item"
    ]
    item["total_uploads"] = {"N": "7"}
    aws.ddb.put_item(TableName=aws.settings.history_table, Item=item)
    summary = run_reconcile(deps.reconciler(), sweep=True)
    assert summary["snapshot"] == ["total_uploads: the total is not the sum of the shards read"], summary


def test_every_tenant_s_totals_paged_and_as_csv(aws: Aws) -> None:
    data = b"tenant content" * 20
    upload_as(aws, ALICE, data, "a.bin")
    upload_as(aws, CAROL, data, "c.bin")  # acme again: a duplicate within the tenant
    upload_as(aws, BOB, data, "b.bin")  # globex: the same content, its first upload
    status, body = call(admin_stats.handler, api_event("GET", "/admin/tenants", query={"sort": "uploads"}))
    assert status == 200, body
    rows = {row["tenant"]: row for row in body["items"]}
    assert [row["tenant"] for row in body["items"]] == ["acme", "globex"] and body["next"] is None
    assert rows["acme"] | {"used_bytes": 0} == {
        "tenant": "acme",
        "files": 1,
        "bytes": len(data),
        "uploads": 2,
        "duplicates": 1,
        "bytes_saved": len(data),
        "pending_uploads": 0,
        "used_bytes": 0,
        "quota_bytes": None,
        "quota_used": None,
    }
    assert rows["acme"]["used_bytes"] == len(data)
    assert (rows["globex"]["uploads"], rows["globex"]["duplicates"]) == (1, 0)
    first = call(admin_stats.handler, api_event("GET", "/admin/tenants", query={"limit": "1"}))[1]
    assert [row["tenant"] for row in first["items"]] == ["acme"] and first["next"]
    rest = call(admin_stats.handler, api_event("GET", "/admin/tenants", query={"limit": "1", "cursor": first["next"]}))
    assert [row["tenant"] for row in rest[1]["items"]] == ["globex"] and rest[1]["next"] is None
    response = admin_stats.handler(api_event("GET", "/admin/tenants", headers={"accept": "text/csv"}), LambdaContext())
    assert response["statusCode"] == 200 and response["headers"]["Content-Type"].startswith("text/csv")
    assert response["body"].splitlines()[1].startswith(f"acme,1,{len(data)},2,1,{len(data)},0,")
    status, refused = call(admin_stats.handler, api_event("GET", "/admin/tenants", query={"page": "2"}))
    assert status == 400 and refused["error"]["code"] == "unknown_parameter"
    status, refused = call(admin_stats.handler, api_event("GET", "/admin/tenants", user=ALICE))
    assert status == 403 and refused["error"]["code"] == "forbidden"
