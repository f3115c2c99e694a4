"""The browser tests' shared helpers: Chromium lookup, browser contexts with artifacts on failure, API setup
and page helpers (the ``browser`` fixture is in conftest.py)."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlsplit

import pytest
import requests
from playwright.sync_api import (
    Browser,
    BrowserContext,
    Locator,
    Page,
    expect,
)

from tests.e2e.e2e_helpers import ROOT, RunningStack, nothing_to_reap, wait_until

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    # the machine's network is closed: without these Chromium keeps calling home and logging refused connections
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
VIEWPORT = {"width": 1280, "height": 900}
ARTIFACTS = ROOT / "artifacts" / "browser"
INGEST_TIMEOUT_MS = 30_000
STATS_TIMEOUT_MS = 15_000  # the dashboard polls every 3 s
HEX32 = re.compile(r"^[0-9a-f]{32}$")
ANY = re.compile(r".*")
STAT_KEYS = ("total_files", "total_uploads", "duplicates_avoided", "total_bytes_stored", "total_s3_size_saved")


# ------------------------------------------------------------------------------------------------
# Browser
# ------------------------------------------------------------------------------------------------
def find_chromium() -> str | None:
    """DFD_CHROMIUM if set, else ``chromium`` on PATH, else Debian's /usr/bin/chromium."""
    configured = os.environ.get("DFD_CHROMIUM")
    if configured:
        return configured if Path(configured).is_file() else None
    found = shutil.which("chromium")
    if found:
        return found
    return "/usr/bin/chromium" if Path("/usr/bin/chromium").is_file() else None


def browser_unavailable(reason: str) -> NoReturn:
    """Fail when the browser test is required (CI), skip otherwise."""
    if os.environ.get("DFD_REQUIRE_BROWSER") == "1":
        pytest.fail(f"DFD_REQUIRE_BROWSER=1 but {reason}: install Debian's chromium (apt-get install chromium)")
    pytest.skip(f"{reason} (install Debian's chromium to run the browser tests; DFD_REQUIRE_BROWSER=1 fails)")


class PageWatch:
    """What the browser did: console errors, uncaught exceptions, requests and API responses."""

    def __init__(self) -> None:
        self.console: list[str] = []
        self.errors: list[str] = []
        self.requests: list[tuple[str, str]] = []
        self.responses: list[tuple[str, str, int]] = []

    def attach(self, page: Page, label: str) -> Page:
        page.on("console", lambda msg: self.on_console(label, msg.type, msg.text))
        page.on("pageerror", lambda exc: self.errors.append(f"{label}: uncaught {exc}"))
        page.on("request", lambda req: self.requests.append((req.method, req.url)))
        page.on("response", lambda resp: self.responses.append((resp.request.method, resp.url, resp.status)))
        return page

    def on_console(self, label: str, kind: str, text: str) -> None:
        self.console.append(f"{label} [{kind}] {text}")
        # Chrome logs every non-2xx fetch, the expected 409 of a precheck duplicate included.
        if kind == "error" and not text.startswith("Failed to load resource"):
            self.errors.append(f"{label}: console error: {text}")

    def puts(self) -> list[str]:
        return [url for method, url in self.requests if method == "PUT"]


@contextmanager
def artifacts_on_failure(name: str, context: BrowserContext, watch: PageWatch, stack: RunningStack) -> Iterator[None]:
    """On any failure: a full-page screenshot of every open page, the console and the stack log tail."""
    try:
        yield
    except BaseException:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        saved: list[str] = []
        for index, page in enumerate(context.pages):
            target = ARTIFACTS / f"{name}-{index}-{urlsplit(page.url).path.strip('/') or 'index'}.png"
            try:
                page.screenshot(path=str(target), full_page=True)
                saved.append(str(target))
            except Exception as exc:  # keep the original failure
                saved.append(f"{target}: screenshot failed: {exc}")
        (ARTIFACTS / f"{name}-console.log").write_text("\n".join(watch.console) + "\n")
        (ARTIFACTS / f"{name}-stack.log").write_text(stack.logs(tail=400) + "\n")
        print(f"browser artifacts: {', '.join(saved)}; console and stack log in {ARTIFACTS}")
        raise


@contextmanager
def browser_session(
    browser: Browser, stack: RunningStack, request: pytest.FixtureRequest, **options: Any
) -> Iterator[tuple[BrowserContext, PageWatch]]:
    """A fresh browser context (the desktop viewport and en-US unless `options` say otherwise) with its page
    watch; a failure inside leaves artifacts; the context is closed after."""
    context = browser.new_context(**({"viewport": VIEWPORT, "locale": "en-US"} | options))
    watch = PageWatch()
    try:
        with artifacts_on_failure(request.node.name, context, watch, stack):
            yield context, watch
    finally:
        context.close()


def docs_screenshot(page: Page, name: str) -> None:
    """With DFD_SCREENSHOTS=<folder> (relative to the repository), save the README screenshot of a page."""
    folder = os.environ.get("DFD_SCREENSHOTS")
    if not folder:
        return
    target = Path(folder) if Path(folder).is_absolute() else ROOT / folder
    target.mkdir(parents=True, exist_ok=True)
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(target / name))


# ------------------------------------------------------------------------------------------------
# API helpers (the setup a second user would do from another machine)
# ------------------------------------------------------------------------------------------------
def api_stats(stack: RunningStack) -> dict[str, int]:
    answer = requests.get(f"{stack.api_url}/admin/stats", headers=stack.auth("admin"), timeout=10)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    return {key: int(body[key]) for key in STAT_KEYS}


def settled_stats(stack: RunningStack) -> dict[str, int]:
    """The counters once nothing from earlier tests is still being ingested (two equal reads 0.5 s apart) or
    waits for the reaper (an earlier test's deleted content, reaped at the next reconcile run, would take
    total_files down while the test counts)."""
    wait_until(lambda: nothing_to_reap(stack), timeout=150, interval=1)
    previous = api_stats(stack)

    def stable() -> dict[str, int] | None:
        nonlocal previous
        current = api_stats(stack)
        same = current == previous
        previous = current
        return current if same else None

    time.sleep(0.5)
    return wait_until(stable, timeout=15, interval=0.5)


def api_upload(stack: RunningStack, filename: str, body: bytes) -> str:
    """POST /upload, then PUT the bytes to the presigned URL with the returned headers; returns the upload id."""
    created = requests.post(
        f"{stack.api_url}/upload",
        json={
            "filename": filename,
            "size": len(body),
            "content_type": "text/plain",
            "sha256": hashlib.sha256(body).hexdigest(),
        },
        headers=stack.auth("alice"),
        timeout=10,
    )
    assert created.status_code == 201, created.text
    issued: dict[str, Any] = created.json()
    put = requests.request(
        issued.get("method", "PUT"), issued["upload_url"], data=body, headers=issued.get("headers", {}), timeout=10
    )
    assert put.status_code == 200, put.text
    return str(issued["upload_id"])


def api_precheck_duplicate(stack: RunningStack, filename: str, digest: str, size: int) -> None:
    """POST /upload for content that is already stored: 409, counted as an upload of that content."""
    answer = requests.post(
        f"{stack.api_url}/upload",
        json={"filename": filename, "size": size, "sha256": digest},
        headers=stack.auth("alice"),
        timeout=10,
    )
    assert answer.status_code == 409 and answer.json().get("duplicate"), answer.text


def wait_stored(stack: RunningStack, upload_ids: list[str]) -> None:
    pending = set(upload_ids)

    def all_stored() -> bool:
        for upload_id in sorted(pending):
            answer = requests.get(f"{stack.api_url}/metadata/{upload_id}", headers=stack.auth("alice"), timeout=10)
            if answer.status_code == 200 and answer.json().get("status") == "stored":
                pending.discard(upload_id)
        return not pending

    wait_until(all_stored, timeout=INGEST_TIMEOUT_MS / 1000)


# ------------------------------------------------------------------------------------------------
# Page helpers
# ------------------------------------------------------------------------------------------------
def pick(page: Page, files: Path | list[Path], testid: str = "file-input") -> None:
    """Choose files (or, testid folder-input, a folder) with the Dashboard's input; once the Dashboard lists
    files, its "Add more" shows the input again."""
    if page.locator(f"[data-testid={testid}]").count() == 0:
        page.locator(".uppy-DashboardContent-addMore").click()
    page.set_input_files(f"[data-testid={testid}]", files)


def file_row(page: Page, name: str) -> Locator:
    return page.locator(f'[data-testid=file-row][data-file-name="{name}"]')


def progress_of(locator: Locator) -> tuple[float, float]:
    value, maximum = locator.evaluate("p => [p.value, p.max]")
    return float(value), float(maximum)


def expect_complete(progress: Locator) -> None:
    value, maximum = progress_of(progress)
    assert value == maximum == 100, f"progress {value}/{maximum}"


def download_bytes(page: Page, button: Locator) -> bytes:
    with page.expect_download(timeout=15_000) as info:
        button.click()
    download = info.value
    assert download.failure() is None, download.failure()
    return Path(download.path()).read_bytes()


def expect_stat(page: Page, key: str, value: int) -> None:
    stat = page.get_by_test_id(f"stat-{key}")
    expect(stat).to_have_attribute("data-value", str(value), timeout=STATS_TIMEOUT_MS)
    if key in ("total_files", "total_uploads", "duplicates_avoided"):
        expect(stat).to_have_text(f"{value:,}")


def table_hashes(page: Page) -> list[str]:
    return page.get_by_test_id("hash-row").evaluate_all("rows => rows.map(r => r.getAttribute('data-hash'))")


def wait_page_loaded(page: Page, number: int, *, files: int | None = None) -> list[str]:
    """The hashes of table page `number` once no load is in flight (background refreshes included), and, with
    `files`, once the page shown was requested after the statistics reported that many files."""
    status = page.get_by_test_id("table-status")
    expect(status).to_have_text(re.compile(rf"^Page {number} · rows "), timeout=10_000)
    table = page.get_by_test_id("hashes-table")
    expect(table).not_to_have_attribute("aria-busy", "true")
    loaded_for = re.compile(r"^\d*$") if files is None else str(files)
    expect(table).to_have_attribute("data-loaded-for-files", loaded_for, timeout=STATS_TIMEOUT_MS)
    expect(status).to_have_text(re.compile(rf"^Page {number} · rows "))
    return table_hashes(page)


# ------------------------------------------------------------------------------------------------
# The scenario
# ------------------------------------------------------------------------------------------------
