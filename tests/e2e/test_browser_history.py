"""The admin dashboard's history chart and tenants table in headless Chromium over the local stack: the points the
chart draws are the API's for each range (a simulated past written into the history table, the stack's own recent
snapshots), a range without snapshots shows so, the chosen range survives a reload, and 1,000 tenants (their
references written directly) page and sort as /admin/tenants does."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
import requests
from playwright.sync_api import Browser, Locator, Page, Response, Route, expect

from dfd.adapters.dynamo.codec import to_item
from dfd.history.codec import snapshot_items
from dfd.history.ports import SNAPSHOT_FIELDS, Snapshot
from tests.e2e.browser_auth import open_signed_in
from tests.e2e.browser_support import browser_session
from tests.e2e.e2e_helpers import ROOT, RunningStack

pytestmark = [pytest.mark.e2e, pytest.mark.browser]

PAST = int(datetime(2021, 3, 1, tzinfo=UTC).timestamp())  # the simulated days: 2021-03-01 to 2021-03-03
HOURS = 72
TENANTS = 1000
COUNTS = (("uploads", "Uploads"), ("duplicates", "Duplicates"), ("deletes", "Deletes"))  # the counts chart's series
# tenants the fixture writes besides the 1,000: the stack's tenants outnumber GET /admin/tenants' largest page (1,000)
# even when no other test has left one
OTHERS = ("zz-else-0", "zz-else-1", "zz-else-2")
LOADED_MS = 20_000
# the tenants table's columns, as web/js/history.js draws them (each cell's data-value: the row's figure)
TABLE_COLUMNS = ("tenant", "files", "bytes", "uploads", "duplicates", "bytes_saved", "used_bytes", "pending_uploads")


def history_table(stack: RunningStack) -> str:
    return str(stack.description["tables"]["StatsHistoryTable"])


def past_snapshots() -> list[Snapshot]:
    """A snapshot every hour of three days: each hour 5 + h % 7 uploads, every third of them a duplicate."""
    snaps: list[Snapshot] = []
    totals = dict.fromkeys(SNAPSHOT_FIELDS, 0)
    for hour in range(HOURS):
        uploads = 5 + hour % 7
        duplicates = uploads // 3
        totals["total_uploads"] += uploads
        totals["duplicates_avoided"] += duplicates
        totals["total_files"] += uploads - duplicates
        totals["total_bytes_stored"] += 1000 * (uploads - duplicates)
        totals["total_s3_size_saved"] += 1000 * duplicates
        totals["deleted_uploads"] += hour % 2
        totals["reaped_contents"] += hour % 3 == 0  # the reaper's and the reconcile's, and rejections
        totals["reaped_bytes"] += 1000 * (hour % 3 == 0)
        totals["expired_uploads"] += hour % 4 == 0
        totals["failed_uploads"] += hour % 5 == 0
        totals["rejected_uploads"] += hour % 6 == 0
        snaps.append(Snapshot(taken_at=PAST + hour * 3600 + 60, totals=dict(totals), read={}))
    return snaps


@pytest.fixture(scope="module")
def simulated_past(stack: RunningStack) -> Iterator[None]:
    """Three days of 2021 in the history table, removed afterwards."""
    ddb = stack.client("dynamodb")
    # their expiry a day ahead: the local stack deletes expired items as DynamoDB's TTL does
    expires = int(datetime.now(UTC).timestamp()) + 86400
    items = [item | {"ttl": expires} for snap in past_snapshots() for item in snapshot_items(snap)]
    for item in items:
        ddb.put_item(TableName=history_table(stack), Item=to_item(item))
    yield
    for item in items:
        ddb.delete_item(TableName=history_table(stack), Key=to_item({"series": item["series"], "at": item["at"]}))


@pytest.fixture(scope="module")
def many_tenants(stack: RunningStack) -> Iterator[list[str]]:
    """1,000 tenants, each holding one content (tenant i: i % 9 + 1 uploads of 100 * i bytes), and OTHERS more that
    sort before them, removed afterwards."""
    ddb = stack.client("dynamodb")
    names = [f"zz-load-{index:04d}" for index in range(TENANTS)]
    rows = [
        {"tenant": name, "hash": f"{index:064x}", "upload_count": index % 9 + 1, "size": 100 * index}
        for index, name in enumerate(names)
    ]
    rows += [{"tenant": name, "hash": f"{0:064x}", "upload_count": 1, "size": 1} for name in OTHERS]
    for start in range(0, len(rows), 25):
        batch = [{"PutRequest": {"Item": to_item(row)}} for row in rows[start : start + 25]]
        put_batch(ddb, stack.tenant_files_table, batch)
    yield names
    for start in range(0, len(rows), 25):
        batch = [
            {"DeleteRequest": {"Key": to_item({"tenant": row["tenant"], "hash": row["hash"]})}}
            for row in rows[start : start + 25]
        ]
        put_batch(ddb, stack.tenant_files_table, batch)


def put_batch(ddb: Any, table: str, requests_: list[dict[str, Any]]) -> None:
    pending: dict[str, Any] = {table: requests_}
    while pending:
        pending = ddb.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}


def api_history(stack: RunningStack, shown: dict[str, Any]) -> dict[str, Any]:
    query = {"from": shown["from"], "to": shown["to"], "step": shown["step"]}
    answer = requests.get(f"{stack.api_url}/admin/stats/history", params=query, headers=stack.auth("admin"), timeout=10)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def drawn(page: Page, state: str = "(ready|empty)") -> dict[str, Any]:
    chart = page.get_by_test_id("history-chart")
    expect(chart).to_have_attribute("data-state", re.compile(f"^{state}$"), timeout=LOADED_MS)
    data: dict[str, Any] = json.loads(chart.get_attribute("data-points") or "null")
    return data


def assert_points_are(shown: dict[str, Any], body: dict[str, Any]) -> None:
    """The chart's points are the answer's: each interval figure, null where the answer's point has no interval."""
    assert [point["at"] for point in body["points"]] == shown["at"]
    for key, values in shown["series"].items():
        assert values == [(point["interval"] or {}).get(key) for point in body["points"]], key


def assert_drawn_is_api(stack: RunningStack, shown: dict[str, Any]) -> dict[str, Any]:
    """The chart's points are the API's answer for the same range and step, asked again (a range whose snapshots
    no longer change)."""
    body = api_history(stack, shown)
    assert_points_are(shown, body)
    return body


def history_drawn(page: Page, act: Callable[[], object], state: str = "(ready|empty)") -> dict[str, Any]:
    """Does `act` and returns what the chart then draws: the points of the GET /admin/stats/history answer the page
    fetched for it, asked for the drawn range and step (the stack keeps taking snapshots: a later call may hold
    one more)."""

    def asked(response: Response) -> bool:
        return urlsplit(response.url).path == "/admin/stats/history"

    with page.expect_response(asked, timeout=LOADED_MS) as answer:
        act()
    assert answer.value.status == 200, answer.value.text()
    shown = drawn(page, state)
    query = dict(parse_qsl(urlsplit(answer.value.url).query))
    assert query == {"from": str(shown["from"]), "to": str(shown["to"]), "step": str(shown["step"])}
    assert_points_are(shown, answer.value.json())
    return shown


def chart_fits(canvas: Locator, width: int) -> None:
    """The chart follows the window's width (redrawn shortly after a resize)."""
    for _ in range(100):
        box = canvas.bounding_box()
        if box and box["width"] <= width:
            return
        canvas.page.wait_for_timeout(100)
    raise AssertionError(f"the chart is wider than the {width} px window: {canvas.bounding_box()}")


def section_screenshot(page: Page, name: str) -> None:
    """With DFD_SCREENSHOTS=<folder>, save the history and tenants sections as the docs' screenshot `name`."""
    folder = os.environ.get("DFD_SCREENSHOTS")
    if not folder:
        return
    target = Path(folder) if Path(folder).is_absolute() else ROOT / folder
    target.mkdir(parents=True, exist_ok=True)
    expect(page.get_by_test_id("tenants-table")).to_have_attribute("data-page", "1", timeout=LOADED_MS)
    top = page.get_by_test_id("history").bounding_box()
    bottom = page.get_by_test_id("tenants-table").bounding_box()
    assert top and bottom
    width = page.viewport_size["width"] if page.viewport_size else 1280
    clip = {"x": 0, "y": top["y"] - 8, "width": width, "height": min(bottom["y"] + 260, top["y"] + 1400) - top["y"]}
    page.screenshot(path=str(target / name), clip=clip, full_page=True)


def choose_custom(page: Page, first: str, last: str) -> None:
    page.get_by_label("Range", exact=True).select_option("custom")
    page.get_by_label("From (UTC day)").fill(first)
    page.get_by_label("To (UTC day, included)").fill(last)
    page.get_by_test_id("history-apply").click()


def test_the_chart_draws_the_api_s_points_for_each_range(
    browser: Browser, stack: RunningStack, simulated_past: None, request: pytest.FixtureRequest
) -> None:
    with browser_session(browser, stack, request) as (context, watch):
        page = watch.attach(context.new_page(), "admin")
        day = history_drawn(page, lambda: open_signed_in(page, stack.api_url + "/admin.html", "admin", stack.password))
        assert day["step"] == 300 and day["to"] - day["from"] == 86400

        choose_custom(page, "2021-03-01", "2021-03-03")
        past = drawn(page, "ready")
        assert (past["from"], past["to"], past["step"]) == (PAST, PAST + 3 * 86400, 3600)
        body = assert_drawn_is_api(stack, past)
        assert len(past["at"]) == HOURS and body["points"][1]["interval"]["uploads"] == 6
        expect(page.get_by_test_id("history-chart").locator("canvas")).to_have_count(1)
        uploads = sum(v for v in past["series"]["uploads"] if v is not None)
        expect(page.get_by_test_id("history-sum-uploads")).to_have_attribute("data-value", str(uploads))

        page.get_by_label("Series", exact=True).select_option("contents")  # what the reconcile ended, and new contents
        for key in ("new_contents", "contents_reaped", "expired_uploads", "failed_uploads", "rejected_uploads"):
            total = sum(v for v in past["series"][key] if v is not None)
            assert total > 0 and key in past["carried"], key
            expect(page.get_by_test_id(f"history-sum-{key}")).to_have_attribute("data-value", str(total))

        page.get_by_label("Series", exact=True).select_option("bytes")
        expect(page.get_by_test_id("history-sum-bytes_saved")).to_be_visible()
        page.locator("#history-chart .u-over").hover()  # the legend shows the figures at the cursor, exactly
        saved = page.locator("#history-chart .u-legend .u-series").nth(1).locator(".u-value")
        expect(saved).to_have_text(re.compile(r"\(([0-9,]+) B\)$"))
        exact = int(re.sub(r"[^0-9]", "", (saved.inner_text().rsplit("(", 1)[1])))
        assert exact in past["series"]["bytes_saved"], saved.inner_text()
        section_screenshot(page, "admin-history.png")
        page.set_viewport_size({"width": 390, "height": 900})
        chart_fits(page.locator("#history-chart canvas"), 390)
        assert page.evaluate("document.documentElement.scrollWidth") <= 390  # nothing off-screen on a phone
        section_screenshot(page, "admin-history-390.png")
        page.set_viewport_size({"width": 1280, "height": 900})

        page.reload()
        expect(page.get_by_label("Range", exact=True)).to_have_value("custom")
        expect(page.get_by_label("Series", exact=True)).to_have_value("bytes")
        assert drawn(page, "ready")["at"] == past["at"]

        ranges = page.get_by_label("Range", exact=True)
        week = history_drawn(page, lambda: ranges.select_option("7d"))
        assert week["step"] == 3600 and week["to"] - week["from"] == 7 * 86400
        month = history_drawn(page, lambda: ranges.select_option("30d"))
        assert month["step"] == 3600 and month["to"] - month["from"] == 30 * 86400
        assert not watch.errors, watch.errors  # no uncaught error, no script or style the page's CSP refuses


def test_the_focused_chart_reads_out_a_point_s_exact_figures(
    browser: Browser, stack: RunningStack, simulated_past: None, request: pytest.FixtureRequest
) -> None:
    with browser_session(browser, stack, request) as (context, watch):
        page = watch.attach(context.new_page(), "admin")
        open_signed_in(page, stack.api_url + "/admin.html", "admin", stack.password)
        choose_custom(page, "2021-03-01", "2021-03-03")
        past = drawn(page, "ready")
        assert_drawn_is_api(stack, past)
        chart = page.get_by_test_id("history-chart")
        chart.focus()
        expect(chart).to_be_focused()
        point = page.get_by_test_id("history-point")

        def read_out(index: int) -> str:
            at = datetime.fromtimestamp(past["at"][index], UTC).strftime("%Y-%m-%d %H:%M UTC")
            figures = [(label, past["series"][key][index]) for key, label in COUNTS]
            return at + ": " + ", ".join(f"{label} {'no interval' if v is None else v}" for label, v in figures)

        last = len(past["at"]) - 1
        for key, index in (("End", last), ("ArrowLeft", last - 1), ("Home", 0), ("ArrowRight", 1), ("ArrowLeft", 0)):
            page.keyboard.press(key)
            expect(point).to_have_attribute("data-at", str(past["at"][index]))
            expect(point).to_have_text(read_out(index))
        legend = page.locator("#history-chart .u-legend .u-series").nth(1).locator(".u-value")
        expect(legend).to_have_text("—")  # the first point has no interval
        page.keyboard.press("ArrowRight")
        expect(legend).to_have_text(str(past["series"]["uploads"][1]))

        page.get_by_label("Series", exact=True).select_option("ratio")
        chart.focus()
        page.keyboard.press("End")
        duplicates, uploads = past["series"]["duplicates"][last], past["series"]["uploads"][last]
        exact = f"{100 * duplicates / uploads:.2f} % ({duplicates} of {uploads})"  # the ratio and what it is of
        expect(point).to_have_text(re.compile(f"Dedup ratio {re.escape(exact)}$"))
        expect(page.locator("#history-chart .u-legend .u-series").nth(1).locator(".u-value")).to_have_text(exact)
        assert not watch.errors, watch.errors


def test_the_chart_draws_the_series_the_api_carries(
    browser: Browser, stack: RunningStack, simulated_past: None, request: pytest.FixtureRequest
) -> None:
    """A series of the page's list that the API's points do not carry is neither drawn nor summed."""

    def without_deletes(route: Route) -> None:
        answer = route.fetch()
        body = answer.json()
        for point in body["points"]:
            if point["interval"]:
                del point["interval"]["deletes"]
        route.fulfill(response=answer, json=body)

    with browser_session(browser, stack, request) as (context, watch):
        page = watch.attach(context.new_page(), "admin")
        page.route("**/admin/stats/history?*", without_deletes)
        open_signed_in(page, stack.api_url + "/admin.html", "admin", stack.password)
        choose_custom(page, "2021-03-01", "2021-03-03")
        past = drawn(page, "ready")
        assert "deletes" not in past["carried"] and {"uploads", "duplicates"} <= set(past["carried"])
        labels = page.locator("#history-chart .u-legend .u-series .u-label")
        expect(labels).to_have_text(["Interval from (UTC)", "Uploads", "Duplicates"])
        expect(page.get_by_test_id("history-sum-uploads")).to_be_visible()
        expect(page.get_by_test_id("history-sum-deletes")).to_have_count(0)
        assert not watch.errors, watch.errors


def test_a_range_without_snapshots_says_so(
    browser: Browser, stack: RunningStack, request: pytest.FixtureRequest
) -> None:
    with browser_session(browser, stack, request) as (context, watch):
        page = watch.attach(context.new_page(), "admin")
        open_signed_in(page, stack.api_url + "/admin.html", "admin", stack.password)
        choose_custom(page, "2019-06-01", "2019-06-02")
        empty = drawn(page, "empty")
        assert empty["at"] == [] and empty["step"] == 300
        assert api_history(stack, empty)["points"] == []
        expect(page.get_by_test_id("history-empty")).to_be_visible()
        expect(page.get_by_test_id("history-chart").locator("canvas")).to_have_count(0)
        choose_custom(page, "2019-06-03", "2019-06-01")
        expect(page.get_by_test_id("history-error")).to_contain_text("must not be after")
        assert not watch.errors, watch.errors


def test_the_dashboard_follows_a_dark_colour_scheme(
    browser: Browser, stack: RunningStack, request: pytest.FixtureRequest
) -> None:
    with browser_session(browser, stack, request) as (context, watch):
        page = watch.attach(context.new_page(), "admin")
        page.emulate_media(color_scheme="dark")
        open_signed_in(page, stack.api_url + "/admin.html", "admin", stack.password)
        drawn(page)
        card = page.get_by_test_id("history").evaluate("node => getComputedStyle(node).backgroundColor")
        assert card == "rgb(27, 31, 36)", card
        page.emulate_media(color_scheme="light")
        card = page.get_by_test_id("history").evaluate("node => getComputedStyle(node).backgroundColor")
        assert card == "rgb(255, 255, 255)", card
        assert not watch.errors, watch.errors


def every_tenant(stack: RunningStack, sort: str) -> list[dict[str, Any]]:
    """Every row of GET /admin/tenants in the given sort (its default order), page after page by the API's cursor."""
    rows: list[dict[str, Any]] = []
    params = {"sort": sort, "limit": "1000"}
    while True:
        answer = requests.get(f"{stack.api_url}/admin/tenants", params=params, headers=stack.auth("admin"), timeout=30)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        rows += body["items"]
        if not body["next"]:
            return rows
        params["cursor"] = body["next"]


def tenants_page(page: Page, number: int, query: dict[str, str], act: Callable[[], object]) -> dict[str, Any]:
    """Does `act` and returns the GET /admin/tenants answer it made the page fetch (exactly `query`), once the table
    shows it as page `number`: one row per item, in its order, each cell the item's figure."""

    def asked(response: Response) -> bool:
        url = urlsplit(response.url)
        return url.path == "/admin/tenants" and dict(parse_qsl(url.query)) == query

    with page.expect_response(asked, timeout=LOADED_MS) as answer:
        act()
    assert answer.value.status == 200, answer.value.text()
    body: dict[str, Any] = answer.value.json()
    expect(page.get_by_test_id("tenants-table")).to_have_attribute("data-page", str(number), timeout=LOADED_MS)
    shown = page.locator("[data-testid=tenants-body] tr").evaluate_all(
        "rows => rows.map(row => [row.dataset.tenant, [...row.cells].map(cell => cell.dataset.value)])"
    )
    assert shown == [[item["tenant"], [str(item[key]) for key in TABLE_COLUMNS]] for item in body["items"]]
    return body


def names(rows: list[dict[str, Any]]) -> list[str]:
    return [row["tenant"] for row in rows]


def test_a_thousand_tenants_page_and_sort(
    browser: Browser, stack: RunningStack, many_tenants: list[str], request: pytest.FixtureRequest
) -> None:
    """The table pages through every tenant by the API's cursor: each page is the answer the page fetched, the pages
    together are every tenant once, in order (other tests' tenants among them: only the fixture's are known)."""
    loaded = set(many_tenants)
    ours = {*loaded, *OTHERS}
    listed = every_tenant(stack, "tenant")
    assert len(listed) > 1000 and names(listed) == sorted(set(names(listed)))
    assert [name for name in names(listed) if name in ours] == [*OTHERS, *many_tenants]
    figures = {row["tenant"]: row for row in listed}
    for index, name in enumerate(many_tenants):
        uploads = index % 9 + 1
        assert (figures[name]["files"], figures[name]["bytes"], figures[name]["uploads"]) == (1, 100 * index, uploads)
        assert (figures[name]["duplicates"], figures[name]["bytes_saved"]) == (uploads - 1, (uploads - 1) * 100 * index)

    with browser_session(browser, stack, request) as (context, watch):
        page = watch.attach(context.new_page(), "admin")
        open_signed_in(page, stack.api_url + "/admin.html", "admin", stack.password)
        expect(page.get_by_test_id("tenants-table")).to_have_attribute("data-page", "1", timeout=LOADED_MS)
        by_name = {"sort": "tenant", "order": "asc", "limit": "100"}
        size = page.get_by_test_id("tenants-page-size")
        pages = [tenants_page(page, 1, by_name, lambda: size.select_option("100"))]
        following = page.get_by_test_id("tenants-next")
        while pages[-1]["next"]:
            expect(following).to_be_enabled()
            cursor = {"cursor": pages[-1]["next"]}
            pages.append(tenants_page(page, len(pages) + 1, by_name | cursor, following.click))
        expect(following).to_be_disabled()
        expect(page.get_by_test_id("tenants-status")).to_contain_text("last page")
        seen = [name for body in pages for name in names(body["items"])]
        assert all(body["count"] == 100 for body in pages[:-1]) and 1 <= pages[-1]["count"] <= 100
        assert seen == sorted(set(seen)) and len(seen) > 1000
        assert [name for name in seen if name in ours] == [*OTHERS, *many_tenants]

        back = by_name | {"cursor": pages[-3]["next"]}  # the page before the last, by the cursor that led to it
        before = tenants_page(page, len(pages) - 1, back, page.get_by_test_id("tenants-prev").click)
        assert [name for name in names(before["items"]) if name in ours] == [
            name for name in names(pages[-2]["items"]) if name in ours
        ]

        sort = page.get_by_test_id("tenants-sort-uploads")
        sort.focus()
        by_uploads = {"sort": "uploads", "order": "desc", "limit": "100"}
        top = tenants_page(page, 1, by_uploads, lambda: page.keyboard.press("Enter"))  # keyboard: most uploads first
        expect(page.locator("#tenants-th-uploads")).to_have_attribute("aria-sort", "descending")
        ranked = [(row["uploads"], row["tenant"]) for row in top["items"]]
        assert ranked == sorted(ranked, reverse=True)
        expected = sorted(many_tenants, key=lambda name: (figures[name]["uploads"], name), reverse=True)
        mine = [name for name in names(top["items"]) if name in loaded]
        assert mine and mine == expected[: len(mine)]

        again = tenants_page(page, 1, by_uploads, page.reload)  # the order survives a reload
        expect(page.locator("#tenants-th-uploads")).to_have_attribute("aria-sort", "descending")
        assert [n for n in names(again["items"]) if n in ours] == [n for n in names(top["items"]) if n in ours]
        assert not watch.errors, watch.errors
