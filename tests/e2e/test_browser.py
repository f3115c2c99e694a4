"""The web pages in a real browser: headless Chromium (Debian's ``chromium``) driven by Playwright.

Against the local stack, asserting what a user sees:

* upload page: two files with different content are hashed, uploaded and stored (progress 100 %, overall
  progress complete); a third file with the same content as the first is reported as a duplicate by the
  precheck (HTTP 409) and never sent: no PUT leaves the browser for it; Download returns the stored bytes.
* dashboard: the counters show the uploads, follow new uploads live (3 s refresh, no reload), and the stored
  files table pages forward and back with the smallest page size. Copy puts a row's SHA-256 on the clipboard
  from the keyboard, and keyboard focus on a row's Download button survives the table's background refresh.
* upload page errors and folders: an empty file gets the API's 400 and no Retry (it cannot succeed); a file
  from a folder shows its relative path, is posted with its base name, and a 503 offers a Retry that works;
  an empty folder gives a notice.
* dashboard with the API down: stats and table show errors; once the API answers again both recover without
  a click.
* dashboard on a phone (390 px): no horizontal scrolling, every Download button inside the viewport, a long
  file name cut to two lines (full name kept), pager buttons on one line.

The ``stack`` fixture is shared by the whole e2e session, so the counters are checked as deltas from what the
API reported before the scenario; every file's content carries a per-run nonce.

On failure, screenshots of the open pages, the browser console and the stack's log tail are written to
``artifacts/browser/``. With ``DFD_SCREENSHOTS=docs/screenshots`` the README screenshots (upload.png,
admin.png, 1280x900) are written there after the scenario, so they show real data.

Every page is used signed in (tests/e2e/browser_auth.py): the upload page as alice (tenant acme), the
dashboard as admin; the API helpers send the same users' tokens. Sign-in itself: a wrong password is refused
on the form, alice signs in, uploads a file and sees it processed; the dashboard tells alice "Admins only"
and works once admin signs in.

No Chromium: the tests skip, unless ``DFD_REQUIRE_BROWSER=1`` (set by ``.ci/run``), where they fail.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests
from playwright.sync_api import (
    Browser,
    Locator,
    Page,
    Request,
    Route,
    expect,
)

from tests.e2e.browser_auth import SignInFailed, open_signed_in, sign_in, sign_out
from tests.e2e.browser_support import (
    HEX32,
    INGEST_TIMEOUT_MS,
    STATS_TIMEOUT_MS,
    api_precheck_duplicate,
    api_stats,
    api_upload,
    browser_session,
    docs_screenshot,
    download_bytes,
    expect_complete,
    expect_stat,
    file_row,
    pick,
    settled_stats,
    wait_page_loaded,
    wait_stored,
)
from tests.e2e.e2e_helpers import RunningStack

pytestmark = [pytest.mark.e2e, pytest.mark.browser]


def test_upload_dedup_download_and_dashboard(
    browser: Browser, stack: RunningStack, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    nonce = uuid.uuid4().hex
    content_x = f"content X, uploaded twice ({nonce})\n".encode()
    content_y = f"content Y, uploaded once ({nonce})\n".encode() * 3
    files = {"a.txt": content_x, "c.txt": content_y, "b.txt": content_x}
    for name, body in files.items():
        (tmp_path / name).write_bytes(body)
    hash_x, hash_y = hashlib.sha256(content_x).hexdigest(), hashlib.sha256(content_y).hexdigest()
    base = settled_stats(stack)

    aws_host = urlsplit(stack.aws_url).netloc
    with browser_session(
        browser, stack, request, accept_downloads=True, permissions=["clipboard-read", "clipboard-write"]
    ) as (context, watch):
        # ---------------- upload page: A and C are new content
        page = watch.attach(context.new_page(), "upload")
        open_signed_in(page, stack.api_url + "/", "alice", stack.password)
        expect(page.get_by_test_id("overall-summary")).to_have_text("No files yet.")
        pick(page, [tmp_path / "a.txt", tmp_path / "c.txt"])
        row_a, row_c = file_row(page, "a.txt"), file_row(page, "c.txt")
        for row, digest, body in ((row_a, hash_x, content_x), (row_c, hash_y, content_y)):
            expect(row).to_have_attribute("data-status", "stored", timeout=INGEST_TIMEOUT_MS)
            expect(row).to_have_attribute("data-sha256", digest)
            expect(row).to_have_attribute("data-uploaded-bytes", str(len(body)))
            expect(row).to_have_attribute("data-upload-id", HEX32)
            expect(row.get_by_test_id("file-status")).to_have_text("Stored")
            expect(row.get_by_test_id("file-hash")).to_have_text(digest)
            expect_complete(row.get_by_test_id("file-progress"))
        overall = page.get_by_test_id("overall-progress")
        expect(overall).to_have_attribute("data-finished", "2")
        expect(overall).to_have_attribute("data-total", "2")
        expect(overall).to_have_attribute("data-failed", "0")
        expect_complete(overall)
        expect(page.get_by_test_id("overall-summary")).to_contain_text("2 of 2 files done")

        upload_ids = {row_a.get_attribute("data-upload-id"), row_c.get_attribute("data-upload-id")}
        puts = watch.puts()
        assert len(puts) == 2, puts
        assert {urlsplit(url).netloc for url in puts} == {aws_host}, puts
        assert {urlsplit(url).path.rsplit("/", 1)[-1] for url in puts} == upload_ids, puts

        # ---------------- B has A's content: the precheck answers 409, nothing is uploaded
        pick(page, [tmp_path / "b.txt"])
        row_b = file_row(page, "b.txt")
        expect(row_b).to_have_attribute("data-status", "duplicate", timeout=INGEST_TIMEOUT_MS)
        expect(row_b).to_have_attribute("data-precheck", "true")
        expect(row_b).to_have_attribute("data-uploaded-bytes", "0")
        expect(row_b).to_have_attribute("data-upload-id", HEX32)  # the 409's own upload record
        expect(row_b.get_by_test_id("file-status")).to_have_text("Duplicate")
        expect(row_b.get_by_test_id("file-detail")).to_have_text("Already stored — 0 bytes uploaded")
        expect(row_b.get_by_test_id("file-hash")).to_have_text(hash_x)
        expect_complete(row_b.get_by_test_id("file-progress"))
        expect(overall).to_have_attribute("data-finished", "3")
        expect(overall).to_have_attribute("data-total", "3")
        expect_complete(overall)
        expect(page.get_by_test_id("overall-summary")).to_contain_text("1 duplicate")
        assert watch.puts() == puts, "a PUT was sent for the duplicate"
        posts = [status for method, url, status in watch.responses if method == "POST" and url.endswith("/upload")]
        assert posts == [201, 201, 409], posts

        # ---------------- downloads: by upload id (A) and by hash (B, a precheck duplicate)
        assert download_bytes(page, row_a.get_by_test_id("file-download")) == content_x
        assert download_bytes(page, row_b.get_by_test_id("file-download")) == content_x
        expect(row_a.get_by_test_id("download-link")).to_be_visible()
        docs_screenshot(page, "upload.png")

        # ---------------- dashboard: the counters of the three uploads
        admin = watch.attach(context.new_page(), "admin")
        open_signed_in(admin, stack.api_url + "/admin", "admin", stack.password)
        expect_stat(admin, "total_files", base["total_files"] + 2)
        expect_stat(admin, "total_uploads", base["total_uploads"] + 3)
        expect_stat(admin, "duplicates_avoided", base["duplicates_avoided"] + 1)
        expect_stat(admin, "total_bytes_stored", base["total_bytes_stored"] + len(content_x) + len(content_y))
        expect_stat(admin, "total_s3_size_saved", base["total_s3_size_saved"] + len(content_x))
        expect(admin.get_by_test_id("stats-error")).to_be_hidden()

        # the smallest page size, and enough files for at least two pages of it
        sizes = admin.get_by_test_id("page-size").evaluate("s => Array.from(s.options, o => Number(o.value))")
        size = min(sizes)
        admin.get_by_test_id("page-size").select_option(str(size))
        wait_page_loaded(admin, 1)
        points = int(admin.get_by_test_id("stats-chart").get_attribute("data-points") or "0")
        files_now = base["total_files"] + 2
        extra = [f"extra {i} ({nonce})\n".encode() * (i + 1) for i in range(max(4, size + 1 - files_now))]
        wait_stored(stack, [api_upload(stack, f"extra-{i}.txt", body) for i, body in enumerate(extra)])

        # the dashboard follows, without a reload
        files_total = files_now + len(extra)
        expect_stat(admin, "total_files", files_total)
        expect_stat(admin, "total_uploads", base["total_uploads"] + 3 + len(extra))
        expect_stat(admin, "duplicates_avoided", base["duplicates_avoided"] + 1)
        assert int(admin.get_by_test_id("stats-chart").get_attribute("data-points") or "0") > points

        # the first page reloads itself when a file appears: full, with a next page
        rows = admin.get_by_test_id("hash-row")
        expect(rows).to_have_count(size, timeout=STATS_TIMEOUT_MS)
        expect(admin.get_by_test_id("next-page")).to_be_enabled(timeout=STATS_TIMEOUT_MS)
        expect(admin.get_by_test_id("prev-page")).to_be_disabled()
        first = wait_page_loaded(admin, 1, files=files_total)
        assert len(first) == size == len(set(first)), first

        # forward to the last page, then back to the first: each page is what it was
        pages = [first]
        while admin.get_by_test_id("next-page").is_enabled():
            admin.get_by_test_id("next-page").click()
            pages.append(wait_page_loaded(admin, len(pages) + 1))
            expect(admin.get_by_test_id("prev-page")).to_be_enabled()
        seen = [digest for listed in pages for digest in listed]
        assert len(pages) >= 2, pages
        assert len(seen) == len(set(seen)) == files_total, pages
        assert {hash_x, hash_y} | {hashlib.sha256(body).hexdigest() for body in extra} <= set(seen)
        expect(admin.get_by_test_id("table-status")).to_contain_text("last page")
        for number in range(len(pages) - 1, 0, -1):
            admin.get_by_test_id("prev-page").click()
            assert wait_page_loaded(admin, number) == pages[number - 1]
        expect(admin.get_by_test_id("prev-page")).to_be_disabled()
        expect(admin.get_by_test_id("table-error")).to_be_hidden()

        # back to the default page size, and Download from the table (by hash)
        default = admin.get_by_test_id("page-size").evaluate(
            "s => Array.from(s.options).find(o => o.defaultSelected).value"
        )
        admin.get_by_test_id("page-size").select_option(default)
        wait_page_loaded(admin, 1)
        row_x = admin.locator(f'[data-testid=hash-row][data-hash="{hash_x}"]')
        if row_x.count() == 0:  # on a shared stack X may sit on a later page
            admin.get_by_test_id("page-size").select_option(str(max(sizes)))
            wait_page_loaded(admin, 1)
        assert download_bytes(admin, row_x.get_by_test_id("hash-download")) == content_x
        docs_screenshot(admin, "admin.png")

        # ---------------- the full SHA-256 without a mouse: Copy, from the keyboard
        copy = row_x.get_by_test_id("hash-copy")
        copy.focus()
        admin.keyboard.press("Enter")
        expect(copy).to_have_text(re.compile(r"^Copied"))
        assert admin.evaluate("navigator.clipboard.readText()") == hash_x

        # ---------------- a new file refreshes the first page in the background: keyboard focus stays put
        # X's row, not just any row: the table lists every tenant's files, and alice's precheck of another
        # tenant's content is an upload of new content, not a duplicate
        uploads = row_x.locator("td.col-uploads")
        count = int(uploads.inner_text().replace(",", ""))
        button = row_x.get_by_test_id("hash-download")
        button.focus()
        admin.evaluate("window.focusedBefore = document.activeElement")
        api_precheck_duplicate(stack, "again.txt", hash_x, len(content_x))  # this row's upload count goes up...
        wait_stored(stack, [api_upload(stack, "focus.txt", f"focus ({nonce})\n".encode())])  # ...and a file appears
        expect_stat(admin, "total_files", files_total + 1)
        expect(uploads).to_have_text(f"{count + 1:,}", timeout=STATS_TIMEOUT_MS)  # the page was reloaded
        expect(button).to_be_focused()
        assert admin.evaluate("document.activeElement === window.focusedBefore"), "the focused button was replaced"

        assert not watch.errors, watch.errors


def test_upload_page_errors_and_folders(
    browser: Browser, stack: RunningStack, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    nonce = uuid.uuid4().hex
    (tmp_path / "empty.txt").write_bytes(b"")
    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "d.txt").write_bytes(f"content D, in a folder ({nonce})\n".encode())
    (tmp_path / "nothing" / "inside").mkdir(parents=True)

    with browser_session(browser, stack, request) as (context, watch):
        page = watch.attach(context.new_page(), "upload")
        open_signed_in(page, stack.api_url + "/", "alice", stack.password)

        # an empty file: the API refuses it (400), and retrying cannot change that, so no Retry is offered
        pick(page, [tmp_path / "empty.txt"])
        empty = file_row(page, "empty.txt")
        expect(empty).to_have_attribute("data-status", "error", timeout=INGEST_TIMEOUT_MS)
        expect(empty.get_by_test_id("file-error")).to_contain_text("validation_error: size must be at least 1 byte")
        expect(empty.get_by_test_id("file-error-hint")).to_be_visible()
        expect(empty.get_by_test_id("file-retry")).to_have_count(0)

        # a folder: the list shows the relative path, the API gets the base name; a 503 is tried again by itself
        posted: list[str] = []

        def on_request(req: Request) -> None:
            if req.method == "POST" and req.url.endswith("/upload"):
                posted.append(req.post_data_json["filename"])

        page.on("request", on_request)
        page.route(
            "**/upload",
            lambda route: route.fulfill(
                status=503, json={"error": {"code": "service_unavailable", "message": "Try again (test)"}}
            ),
            times=1,
        )
        pick(page, folder, "folder-input")
        row = file_row(page, "docs/sub/d.txt")
        expect(row.locator(".file-name")).to_have_text("docs/sub/d.txt")
        expect(row).to_have_attribute("data-status", "stored", timeout=INGEST_TIMEOUT_MS)
        assert posted == ["d.txt", "d.txt"], posted

        # a failure that outlasts the retries: the row offers Retry, which sends the file again
        page.route(
            "**/upload",
            lambda route: route.fulfill(status=502, json={"error": {"code": "bad_gateway", "message": "Down (test)"}}),
        )
        page.evaluate("() => window.dfdUppy.getPlugin('DfdUpload').setOptions({ retryDelays: [10] })")
        (tmp_path / "e.txt").write_bytes(f"content E ({nonce})\n".encode())
        pick(page, [tmp_path / "e.txt"])
        late = file_row(page, "e.txt")
        expect(late).to_have_attribute("data-status", "error", timeout=INGEST_TIMEOUT_MS)
        expect(late.get_by_test_id("file-error")).to_contain_text("bad_gateway: Down (test)")
        page.unroute("**/upload")
        late.get_by_test_id("file-retry").click()
        expect(late).to_have_attribute("data-status", "stored", timeout=INGEST_TIMEOUT_MS)

        assert not watch.errors, watch.errors


def test_dashboard_recovers_when_the_api_comes_back(
    browser: Browser, stack: RunningStack, request: pytest.FixtureRequest
) -> None:
    api_calls = re.compile(r"/admin/(stats|hashes)(\?|$)")

    def down(route: Route) -> None:
        route.fulfill(status=503, json={"error": {"code": "service_unavailable", "message": "API down (test)"}})

    with browser_session(browser, stack, request) as (context, watch):
        page = watch.attach(context.new_page(), "admin")
        page.route(api_calls, down)
        open_signed_in(page, stack.api_url + "/admin", "admin", stack.password)
        expect(page.get_by_test_id("stats-error")).to_contain_text("API down (test)")
        expect(page.get_by_test_id("table-error")).to_contain_text("API down (test)")
        expect(page.get_by_test_id("table-status")).to_have_text("Page 1 · failed to load")

        # the API is back: the next statistics poll recovers the stats and reloads the table, no click
        page.unroute(api_calls, down)
        expect(page.get_by_test_id("stats-error")).to_be_hidden(timeout=STATS_TIMEOUT_MS)
        expect(page.get_by_test_id("table-error")).to_be_hidden(timeout=STATS_TIMEOUT_MS)
        expect(page.get_by_test_id("table-status")).to_have_text(re.compile(r"^Page 1 · (rows|no rows)"))
        assert not watch.errors, watch.errors


def test_dashboard_on_a_phone(browser: Browser, stack: RunningStack, request: pytest.FixtureRequest) -> None:
    """Layout only, so the table's page is made up: a long name, a long content type, large numbers."""
    width = 390
    long_name = "quarterly-financial-results-and-projections-for-the-board-" * 4 + "final.pdf"
    items = [
        {
            "hash": hashlib.sha256(f"phone {i}".encode()).hexdigest(),
            "filename": long_name if i == 0 else f"phone-{i}.txt",
            "size": 123_456_789 * (i + 1),
            "content_type": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
            "created_at": "2026-01-02T03:04:05Z",
            "upload_count": 12_345,
        }
        for i in range(3)
    ]
    page_json = {"items": items, "count": len(items), "last_evaluated_key": "more"}

    with browser_session(browser, stack, request, viewport={"width": width, "height": 844}, has_touch=True) as (
        context,
        watch,
    ):
        page = watch.attach(context.new_page(), "admin")
        page.route(re.compile(r"/admin/hashes\?"), lambda route: route.fulfill(json=page_json))
        open_signed_in(page, stack.api_url + "/admin", "admin", stack.password)
        wait_page_loaded(page, 1)
        expect(page.get_by_test_id("hash-row")).to_have_count(len(items))

        assert page.evaluate("document.documentElement.scrollWidth") <= width
        overflow = page.locator(".table-wrap").evaluate("w => w.scrollWidth - w.clientWidth")
        assert overflow <= 0, f"the table scrolls sideways by {overflow} px"
        for button in page.get_by_test_id("hash-download").all():
            box = button.bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, box

        name = page.get_by_test_id("hash-row").first.locator(".name-text")
        expect(name).to_have_text(long_name)
        expect(name).to_have_attribute("title", long_name)
        line = float(name.evaluate("n => parseFloat(getComputedStyle(n).lineHeight)"))
        box = name.bounding_box()
        assert box is not None and box["height"] <= 2 * line + 1, (box, line)

        for key in ("prev-page", "next-page"):
            pager = page.get_by_test_id(key)
            # the height of the label's text, in lines
            lines = pager.evaluate(
                """b => {
                    const text = document.createRange();
                    text.selectNodeContents(b);
                    return text.getBoundingClientRect().height / parseFloat(getComputedStyle(b).lineHeight);
                }"""
            )
            assert lines < 1.5, f"{key} wraps onto {lines:.1f} lines"
        assert not watch.errors, watch.errors


def test_dashboard_follows_duplicates_and_outlives_hung_requests(
    browser: Browser, stack: RunningStack, request: pytest.FixtureRequest
) -> None:
    """The API is played by the test: a duplicate upload (upload_count grows, total_files does not) shows in the
    table without a click, and a request that never answers times out instead of stopping the dashboard."""
    digest = hashlib.sha256(b"followed").hexdigest()
    api: dict[str, Any] = {"uploads": 1, "hang": set(), "held": []}

    def stats() -> dict[str, Any]:
        uploads = api["uploads"]
        return {
            "total_files": 1,
            "total_bytes_stored": 100,
            "total_uploads": uploads,
            "duplicates_avoided": uploads - 1,
            "total_s3_size_saved": 100 * (uploads - 1),
            "deleted_uploads": 0,
            "dedup_ratio": (uploads - 1) / uploads,
        }

    def answer(route: Route) -> None:
        which = "stats" if "/admin/stats" in route.request.url else "hashes"
        if which in api["hang"]:
            api["hang"].discard(which)
            api["held"].append(route)  # never answered
            return
        if which == "stats":
            route.fulfill(json=stats())
            return
        item = {
            "hash": digest,
            "filename": "followed.txt",
            "size": 100,
            "content_type": "text/plain",
            "created_at": "2026-01-02T03:04:05Z",
            "upload_count": api["uploads"],
        }
        route.fulfill(json={"items": [item], "count": 1, "last_evaluated_key": None})

    def upload_count(page: Page) -> Locator:
        return page.locator(f'[data-testid=hash-row][data-hash="{digest}"] td').nth(5)

    with browser_session(browser, stack, request) as (context, watch):
        page = watch.attach(context.new_page(), "admin")
        page.route(re.compile(r"/admin/(stats|hashes)(\?|$)"), answer)
        open_signed_in(page, stack.api_url + "/admin", "admin", stack.password)
        expect_stat(page, "total_uploads", 1)
        wait_page_loaded(page, 1)
        expect(upload_count(page)).to_have_text("1")

        api["uploads"] = 2  # a duplicate: same files, one more upload
        expect_stat(page, "total_uploads", 2)
        expect(upload_count(page)).to_have_text("2", timeout=STATS_TIMEOUT_MS)

        # the table's refresh hangs: it times out (10 s), and the next poll loads the page again
        api["hang"].add("hashes")
        api["uploads"] = 3
        expect_stat(page, "total_uploads", 3)
        expect(upload_count(page)).to_have_text("3", timeout=10_000 + STATS_TIMEOUT_MS)

        # a statistics poll hangs: it times out, is reported, and polling goes on
        api["hang"].add("stats")
        expect(page.get_by_test_id("stats-error")).to_contain_text("did not answer", timeout=10_000 + 5_000)
        api["uploads"] = 4
        expect_stat(page, "total_uploads", 4)
        expect(page.get_by_test_id("stats-error")).to_be_hidden()
        expect(upload_count(page)).to_have_text("4", timeout=STATS_TIMEOUT_MS)
        assert len(api["held"]) == 2
        assert not watch.errors, watch.errors


def test_announcements_made_together_are_all_read(
    browser: Browser, stack: RunningStack, request: pytest.FixtureRequest
) -> None:
    with browser_session(browser, stack, request) as (context, watch):
        page = watch.attach(context.new_page(), "upload")
        open_signed_in(page, stack.api_url + "/", "alice", stack.password)
        page.evaluate("() => { DFD.announce('First.'); DFD.announce('Second.'); DFD.announce('First.'); }")
        expect(page.get_by_test_id("live-status")).to_have_text("First. Second.")
        page.evaluate("() => DFD.announce('Third.')")
        expect(page.get_by_test_id("live-status")).to_have_text("Third.")
        assert not watch.errors, watch.errors


# ------------------------------------------------------------------------------------------------
# Signing in
# ------------------------------------------------------------------------------------------------
def test_sign_in_then_upload_a_file_and_see_it_processed(
    browser: Browser, stack: RunningStack, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    body = f"signed-in upload ({uuid.uuid4().hex})\n".encode()
    (tmp_path / "mine.txt").write_bytes(body)
    with browser_session(browser, stack, request, accept_downloads=True) as (context, watch):
        page = watch.attach(context.new_page(), "upload")
        page.goto(stack.api_url + "/")
        expect(page.locator("html")).to_have_attribute("data-auth", "signed-out", timeout=15_000)
        expect(page.get_by_test_id("signin-form")).to_be_visible()
        expect(page.get_by_test_id("app")).to_be_hidden()
        with pytest.raises(SignInFailed):
            sign_in(page, "alice", stack.password + "-wrong")
        expect(page.get_by_test_id("signin-message")).to_be_visible()
        assert not [url for _, url in watch.requests if url.startswith(stack.api_url + "/upload")]

        sign_in(page, "alice", stack.password)
        expect(page.get_by_test_id("account-user")).to_have_text("alice")
        expect(page.get_by_test_id("account-tenant")).to_contain_text("acme")
        expect(page.get_by_test_id("account-admin")).to_be_hidden()
        pick(page, [tmp_path / "mine.txt"])
        row = file_row(page, "mine.txt")
        expect(row).to_have_attribute("data-status", "stored", timeout=INGEST_TIMEOUT_MS)
        expect(row).to_have_attribute("data-sha256", hashlib.sha256(body).hexdigest())
        upload_id = row.get_attribute("data-upload-id")
        assert upload_id and HEX32.match(upload_id)
        assert download_bytes(page, row.get_by_test_id("file-download")) == body

        # the upload is alice's: the API answers her token with it
        meta = requests.get(f"{stack.api_url}/metadata/{upload_id}", headers=stack.auth("alice"), timeout=10)
        assert meta.status_code == 200 and meta.json()["status"] == "stored", meta.text

        sign_out(page)
        expect(page.get_by_test_id("app")).to_be_hidden()


def test_dashboard_refuses_alice_and_works_for_admin(
    browser: Browser, stack: RunningStack, request: pytest.FixtureRequest
) -> None:
    """Needs the API's admin rule (403 on /admin/* for non-admins, branch tenant)."""
    with browser_session(browser, stack, request) as (context, watch):
        page = watch.attach(context.new_page(), "admin")
        open_signed_in(page, stack.api_url + "/admin", "alice", stack.password)
        notice = page.get_by_test_id("admins-only")
        expect(notice).to_be_visible(timeout=STATS_TIMEOUT_MS)
        expect(notice).to_contain_text("Admins only")
        expect(page.get_by_test_id("dashboard")).to_be_hidden()
        expect(page.get_by_test_id("stats-error")).to_be_hidden()

        sign_in(page, "admin", stack.password)  # signs alice out first
        expect(page.get_by_test_id("account-admin")).to_be_visible()
        expect(page.get_by_test_id("dashboard")).to_be_visible(timeout=STATS_TIMEOUT_MS)
        expect(notice).to_be_hidden()
        stats = api_stats(stack)
        expect_stat(page, "total_files", stats["total_files"])
        expect(page.get_by_test_id("stats-error")).to_be_hidden()
