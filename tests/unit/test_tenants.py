"""GET /admin/tenants on the fakes (dfd.history.tenants, dfd.history.codec.tenant_totals): every tenant's totals
from its references and usage shards, sorted, paged with a validated cursor, as CSV; and sorted across every page
of the DynamoDB adapter's Scan."""

from __future__ import annotations

import base64
import csv
import io
import json
from typing import Any

import pytest

from dfd.adapters.dynamo.base import to_item
from dfd.adapters.dynamo.history import Snapshots
from dfd.core.errors import BadRequest, Forbidden
from dfd.history.tenants import CSV_COLUMNS, SORTS, Tenants, tenants_csv
from tests.unit.callers import ADMIN, ALICE, settings
from tests.unit.fakes import FakeRepository


def world(tenants: int = 0, **overrides: int) -> tuple[FakeRepository, Tenants]:
    repo = FakeRepository(settings(**overrides))
    for n in range(tenants):
        repo.tenant_refs[(f"t{n:04d}", f"{n:064x}")] = {"upload_count": 1 + n % 3, "size": 10 * (n % 7)}
    return repo, Tenants(repo.settings, repo)


def test_a_tenant_s_totals_come_from_its_references_and_usage_shards() -> None:
    repo, tenants = world(tenant_quota_bytes=1000)
    repo.tenant_refs[("acme", "a" * 64)] = {"upload_count": 3, "size": 100}
    repo.tenant_refs[("acme", "b" * 64)] = {"upload_count": 1, "size": 50}
    repo.tenant_refs[("acme", "c" * 64)] = {"upload_count": 0, "size": 70}  # deleted, awaiting the reaper
    repo.usage["acme"] = {"c": 1, "s": 150, "u": 250}
    repo.usage["globex"] = {"c": 2, "s": 0, "u": 80}  # only pending uploads
    body = tenants.page(ADMIN, None, None, None, None)
    assert body["items"] == [
        {
            "tenant": "acme",
            "files": 2,
            "bytes": 150,
            "uploads": 4,
            "duplicates": 2,
            "bytes_saved": 200,
            "pending_uploads": 1,
            "used_bytes": 250,
            "quota_bytes": 1000,
            "quota_used": 0.25,
        },
        {
            "tenant": "globex",
            "files": 0,
            "bytes": 0,
            "uploads": 0,
            "duplicates": 0,
            "bytes_saved": 0,
            "pending_uploads": 2,
            "used_bytes": 80,
            "quota_bytes": 1000,
            "quota_used": 0.08,
        },
    ]
    assert (body["count"], body["total_tenants"], body["next"]) == (2, 2, None)
    assert (body["sort"], body["order"]) == ("tenant", "asc")


@pytest.mark.parametrize("sort", SORTS)
@pytest.mark.parametrize("order", ["asc", "desc"])
def test_pages_cover_every_tenant_once_in_order(sort: str, order: str) -> None:
    _, tenants = world(1000)
    seen: list[dict[str, object]] = []
    cursor = None
    for _ in range(25):
        body = tenants.page(ADMIN, sort, order, "45", cursor)
        assert body["total_tenants"] == 1000 and body["count"] == len(body["items"]) <= 45
        seen += body["items"]
        cursor = body["next"]
        if cursor is None:
            break
    assert cursor is None and len(seen) == 1000 and len({row["tenant"] for row in seen}) == 1000
    keys = [(row[sort], row["tenant"]) for row in seen]
    assert keys == sorted(keys, reverse=order == "desc")


def test_the_default_order_is_largest_first_for_a_figure() -> None:
    _, tenants = world(20)
    body = tenants.page(ADMIN, "bytes", None, "3", None)
    assert body["order"] == "desc" and [row["bytes"] for row in body["items"]] == [60, 60, 50]


def cursor(payload: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    ("query", "code"),
    [
        (("size", None, None, None), "invalid_sort"),
        (("bytes", "up", None, None), "invalid_order"),
        ((None, None, "0", None), "invalid_limit"),
        ((None, None, "1001", None), "invalid_limit"),
        ((None, None, None, "not a cursor!"), "invalid_token"),
        ((None, None, None, cursor({"sort": "bytes", "order": "asc", "after": [1, "t"]})), "invalid_token"),
        ((None, None, None, cursor({"sort": "tenant", "order": "asc", "after": ["a", "b"]})), "invalid_token"),
        (("bytes", "asc", None, cursor({"sort": "bytes", "order": "asc", "after": ["1", "t"]})), "invalid_token"),
        (("bytes", "asc", None, cursor({"sort": "bytes", "order": "asc", "after": [True, "t"]})), "invalid_token"),
        (("bytes", "asc", None, cursor({"sort": "bytes", "order": "asc", "after": [1, "t" * 257]})), "invalid_token"),
        (("bytes", "asc", None, cursor({"sort": "bytes", "order": "asc", "after": [1, "t"], "x": 1})), "invalid_token"),
        ((None, None, None, "A" * 513), "invalid_token"),
    ],
)
def test_a_bad_query_is_a_400(query: tuple[str | None, ...], code: str) -> None:
    _, tenants = world(3)
    with pytest.raises(BadRequest) as refused:
        tenants.page(ADMIN, *query)
    assert refused.value.code == code


def test_a_cursor_resumes_after_its_tenant() -> None:
    _, tenants = world(5)
    after = cursor({"sort": "tenant", "order": "asc", "after": ["t0002", "t0002"]})
    body = tenants.page(ADMIN, "tenant", "asc", None, after)
    assert [row["tenant"] for row in body["items"]] == ["t0003", "t0004"]


def test_tenants_are_for_admins_only() -> None:
    with pytest.raises(Forbidden):
        world(1)[1].page(ALICE, None, None, None, None)


def test_the_csv_has_one_row_per_tenant_and_no_quota_is_empty() -> None:
    _, tenants = world(2)
    rows = list(csv.reader(io.StringIO(tenants_csv(tenants.page(ADMIN, None, None, None, None)))))
    assert tuple(rows[0]) == CSV_COLUMNS and len(rows) == 3
    assert rows[2] == ["t0001", "1", "10", "2", "1", "10", "0", "0", "", ""]


class PagedScan:
    """The tenant view's Scan as DynamoDB pages it: `per_page` items a page in key order, a LastEvaluatedKey after
    every page but the last."""

    def __init__(self, items: list[dict[str, Any]], per_page: int) -> None:
        self.items = sorted(items, key=lambda item: (item["hash"], item["tenant"]))
        self.per_page = per_page
        self.requests: list[dict[str, Any]] = []

    def scan(self, **kwargs: Any) -> dict[str, Any]:
        self.requests.append(kwargs)
        start = int(kwargs.get("ExclusiveStartKey", {}).get("at", {}).get("N", "0"))
        page = self.items[start : start + self.per_page]
        response: dict[str, Any] = {"Items": [to_item(item) for item in page]}
        if start + self.per_page < len(self.items):
            response["LastEvaluatedKey"] = {"at": {"N": str(start + self.per_page)}}
        return response


def test_the_listing_sorts_every_scan_page_of_the_tenant_view() -> None:
    """The route's sort is over the whole view: the adapter reads every Scan page first, so the tenants a later page
    holds take their places in the first page of the listing."""
    count = 45
    items = [  # the Scan's key order (by hash) is the reverse of the tenants' names
        {"tenant": f"t{n:03d}", "hash": f"{count - n:064x}", "upload_count": 1 + n % 4, "size": n} for n in range(count)
    ]
    client = PagedScan(items, per_page=10)
    tenants = Tenants(settings(), Snapshots(client, settings()))
    body = tenants.page(ADMIN, "tenant", "asc", "5", None)
    assert [row["tenant"] for row in body["items"]] == [f"t{n:03d}" for n in range(5)]
    assert body["total_tenants"] == count and len(client.requests) == 5
    assert [request.get("ExclusiveStartKey") for request in client.requests][1:] == [
        {"at": {"N": str(start)}} for start in (10, 20, 30, 40)
    ]
    by_uploads = tenants.page(ADMIN, "uploads", None, "3", None)["items"]
    assert [(row["tenant"], row["uploads"]) for row in by_uploads] == [("t043", 4), ("t039", 4), ("t035", 4)]
