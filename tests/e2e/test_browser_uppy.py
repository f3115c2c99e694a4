"""The upload page (Uppy's Dashboard + @dfd/uppy + Golden Retriever) in headless Chromium against the local stack.

Each scenario signs in as alice and chooses files through the Dashboard's own file input; what the browser sent is
counted from its requests (S3 part PUTs carry ``partNumber``), what dfd holds is asked from the API and S3:
a new file is stored and downloads from My uploads; a known file sends 0 bytes; a 70 MiB multipart upload whose
part is damaged on the way (S3 refuses it: BadDigest) sends that part again and is stored; pause stops the parts
and resume finishes; a reload mid-upload resumes with only the missing part; a quota refusal shows dfd's error;
cancel aborts the multipart upload in S3. At 390x844 nothing scrolls sideways.

Uses the ``browser`` fixture and helpers of test_browser.py (skips without Chromium unless DFD_REQUIRE_BROWSER=1).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests
from playwright.sync_api import Browser, Locator, Page, Request, Route, expect

from tests.e2e.browser_auth import sign_in
from tests.e2e.browser_support import INGEST_TIMEOUT_MS, browser_session, download_bytes, file_row, pick
from tests.e2e.e2e_helpers import RunningStack

pytestmark = [pytest.mark.e2e, pytest.mark.browser]

MIB = 1024 * 1024
PART_NUMBER = re.compile(r"[?&]partNumber=(\d+)(?:&|$)")
UPLOAD_TIMEOUT_MS = 120_000
DONE_TIMEOUT_MS = UPLOAD_TIMEOUT_MS + INGEST_TIMEOUT_MS
USER = "alice"


def part_number(req: Request) -> int | None:
    if req.method != "PUT":
        return None
    found = PART_NUMBER.search(req.url)
    return int(found.group(1)) if found else None


def ask_for_multipart(route: Route) -> None:
    """POST /upload as the plugin sends it, plus ``"multipart": true`` (small files, a few parts)."""
    if route.request.method != "POST":
        route.continue_()
        return
    body: dict[str, Any] = route.request.post_data_json or {}
    route.continue_(post_data=json.dumps(body | {"multipart": True}))


def open_upload_page(page: Page, stack: RunningStack) -> None:
    page.goto(stack.api_url + "/")
    sign_in(page, USER, stack.password)
    expect(page.get_by_test_id("app")).to_be_visible()
    expect(page.locator("[data-testid=file-input]")).to_have_count(1)


def poll(page: Page, probe: Callable[[], Any], timeout: float = 60) -> None:
    """Wait until `probe()` is truthy, letting Playwright run the test's route handlers meanwhile (a plain sleep
    would block them: the sync API dispatches events only inside its own calls)."""
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout} s")
        page.wait_for_timeout(200)


def a_file(tmp_path: Path, name: str, size: int) -> tuple[Path, str]:
    body = os.urandom(size)
    path = tmp_path / name
    path.write_bytes(body)
    return path, hashlib.sha256(body).hexdigest()


def metadata(stack: RunningStack, upload_id: str) -> dict[str, Any]:
    answer = requests.get(f"{stack.api_url}/metadata/{upload_id}", headers=stack.auth(USER), timeout=10)
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()
    return result


def s3_multipart_uploads(stack: RunningStack) -> list[dict[str, Any]]:
    uploads: list[dict[str, Any]] = stack.client("s3").list_multipart_uploads(Bucket=stack.bucket).get("Uploads", [])
    return uploads


def test_new_file_known_file_and_download_from_my_uploads(
    browser: Browser,
    stack: RunningStack,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    path, digest = a_file(tmp_path, "uppy-new.txt", 300_000)
    with browser_session(browser, stack, request, accept_downloads=True) as (context, watch):
        page = watch.attach(context.new_page(), "upload")
        open_upload_page(page, stack)
        pick(page, path)
        row = file_row(page, path.name)
        expect(row).to_have_attribute("data-status", "stored", timeout=DONE_TIMEOUT_MS)
        expect(row).to_have_attribute("data-sha256", digest)
        expect(row).to_have_attribute("data-uploaded-bytes", str(path.stat().st_size))
        expect(row.get_by_test_id("file-hash")).to_have_text(digest)
        upload_id = row.get_attribute("data-upload-id") or ""
        assert metadata(stack, upload_id)["status"] == "stored"
        assert len(watch.puts()) == 1

        # My uploads lists it with a Download; the date is the page's one format
        mine = page.locator(f'[data-testid=my-upload][data-upload-id="{upload_id}"]')
        page.get_by_test_id("my-uploads-refresh").click()
        expect(mine).to_have_attribute("data-status", "stored", timeout=15_000)
        assert download_bytes(page, mine.get_by_test_id("my-upload-download")) == path.read_bytes()
        shown = page.evaluate("iso => DFD.formatDate(iso)", metadata(stack, upload_id)["created_at"])
        expect(mine.locator("td.col-date")).to_have_text(shown)

        # the same content again, under another name: 409, nothing sent
        again = tmp_path / "uppy-known.txt"
        again.write_bytes(path.read_bytes())
        puts = len(watch.puts())
        pick(page, again)
        known = file_row(page, again.name)
        expect(known).to_have_attribute("data-status", "duplicate", timeout=DONE_TIMEOUT_MS)
        expect(known).to_have_attribute("data-precheck", "true")
        expect(known).to_have_attribute("data-uploaded-bytes", "0")
        expect(known.get_by_test_id("file-detail")).to_contain_text("0 bytes uploaded")
        assert len(watch.puts()) == puts
        assert not watch.errors, watch.errors


def test_phone_width_has_no_sideways_scroll(
    browser: Browser,
    stack: RunningStack,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    path, _ = a_file(tmp_path, "a-rather-long-file-name-that-must-wrap-on-a-phone-screen-" + "x" * 40 + ".bin", 1000)
    with browser_session(browser, stack, request, viewport={"width": 390, "height": 844}) as (context, watch):
        page = watch.attach(context.new_page(), "phone")
        open_upload_page(page, stack)
        pick(page, path)
        expect(file_row(page, path.name)).to_have_attribute("data-status", "stored", timeout=DONE_TIMEOUT_MS)
        page.get_by_test_id("my-uploads-refresh").click()
        expect(page.get_by_test_id("my-upload").first).to_be_visible()
        width = page.evaluate("() => document.documentElement.scrollWidth")
        assert width <= 390, f"the page is {width} px wide at a 390 px viewport"


def test_multipart_with_a_part_damaged_in_flight_is_sent_again(
    browser: Browser,
    stack: RunningStack,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    size = 70 * MIB
    path, digest = a_file(tmp_path, "uppy-70mib.bin", size)
    damaged = 3
    with browser_session(browser, stack, request) as (context, watch):
        page = watch.attach(context.new_page(), "upload")
        sent: Counter[int] = Counter()
        answers: list[tuple[int, int]] = []
        page.on("request", lambda req: sent.update([n]) if (n := part_number(req)) is not None else None)
        page.on(
            "response",
            lambda resp: answers.append((n, resp.status)) if (n := part_number(resp.request)) is not None else None,
        )

        def corrupt_once(route: Route) -> None:
            body = route.request.post_data_buffer
            if part_number(route.request) == damaged and sent[damaged] == 1 and body:
                route.continue_(post_data=bytes([body[0] ^ 0xFF]) + body[1:])  # the signed checksum no longer fits
            else:
                route.continue_()

        page.route(PART_NUMBER, corrupt_once)
        open_upload_page(page, stack)
        pick(page, path)
        row = file_row(page, path.name)
        expect(row).to_have_attribute("data-status", "stored", timeout=DONE_TIMEOUT_MS)
        part_count = int(row.get_attribute("data-part-count") or "0")
        assert row.get_attribute("data-multipart") == "true" and part_count >= 9
        assert sent[damaged] == 2, f"the damaged part was sent {sent[damaged]} times"
        assert sum(sent.values()) == part_count + 1, sent
        assert answers.count((damaged, 400)) == answers.count((damaged, 200)) == 1
        # the plugin read S3's answer (CORS headers on errors too) and retried because of it
        assert any("BadDigest" in line for line in watch.console), watch.console
        expect(row).to_have_attribute("data-sha256", digest)
        assert metadata(stack, row.get_attribute("data-upload-id") or "")["hash"] == digest
        expect(page.get_by_test_id("overall-progress")).to_have_attribute("data-sent-bytes", str(size))


def test_pause_and_resume(
    browser: Browser,
    stack: RunningStack,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    path, digest = a_file(tmp_path, "uppy-paused.bin", 22 * MIB)
    with browser_session(browser, stack, request) as (context, watch):
        page = watch.attach(context.new_page(), "upload")
        row = upload_with_part_held(page, stack, path, 2)
        expect(row).to_have_attribute("data-status", "uploading")
        row.get_by_test_id("file-pause").click()
        expect(row).to_have_attribute("data-status", "paused")
        page.unroute(PART_NUMBER)
        puts = len(watch.puts())
        page.wait_for_timeout(1500)
        assert len(watch.puts()) == puts, "nothing is sent while paused"
        row.get_by_test_id("file-resume").click()
        expect(row).to_have_attribute("data-status", "stored", timeout=DONE_TIMEOUT_MS)
        expect(row).to_have_attribute("data-sha256", digest)


def test_reload_mid_upload_resumes_with_only_the_missing_part(
    browser: Browser,
    stack: RunningStack,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    path, digest = a_file(tmp_path, "uppy-reload.bin", 17 * MIB + 12_345)
    held_part = 2
    with browser_session(browser, stack, request) as (context, watch):
        page = watch.attach(context.new_page(), "upload")
        page.on("dialog", lambda dialog: dialog.accept())
        page.route("**/upload", ask_for_multipart)
        sent: Counter[int] = Counter()
        page.on("request", lambda req: sent.update([n]) if (n := part_number(req)) is not None else None)
        held: list[Route] = []
        page.route(PART_NUMBER, lambda route: hold_part(route, held_part, held))
        open_upload_page(page, stack)
        pick(page, path)
        row = file_row(page, path.name)
        expect(row).to_have_attribute("data-multipart", "true", timeout=UPLOAD_TIMEOUT_MS)
        part_count = int(row.get_attribute("data-part-count") or "0")
        poll(page, lambda: sent == Counter(range(1, part_count + 1)))
        upload_id = row.get_attribute("data-upload-id")
        poll(page, lambda: len(held_parts(stack, upload_id or "")) == part_count - 1, timeout=30)
        page.wait_for_timeout(500)  # Golden Retriever writes its state on a short debounce

        page.unroute(PART_NUMBER)
        page.reload()
        sent.clear()
        expect(page.get_by_test_id("app")).to_be_visible(timeout=15_000)
        row = file_row(page, path.name)
        expect(row).to_have_attribute("data-status", "stored", timeout=DONE_TIMEOUT_MS)
        assert sent == Counter({held_part: 1}), f"parts sent after the reload: {dict(sent)}"
        expect(row).to_have_attribute("data-upload-id", upload_id or "")
        expect(row).to_have_attribute("data-resumed", "true")
        assert metadata(stack, upload_id or "")["hash"] == digest


def upload_with_part_held(page: Page, stack: RunningStack, path: Path, number: int) -> Locator:
    """`path` picked on the upload page as a multipart upload whose part `number` is never answered: its row, once
    that part's PUT is held."""
    page.route("**/upload", ask_for_multipart)
    held: list[Route] = []
    page.route(PART_NUMBER, lambda route: hold_part(route, number, held))
    open_upload_page(page, stack)
    pick(page, path)
    row = file_row(page, path.name)
    poll(page, lambda: held)
    return row


def hold_part(route: Route, number: int, held: list[Route]) -> None:
    """Part `number`'s PUT is never answered (kept in `held`); the others go through."""
    if part_number(route.request) == number:
        held.append(route)
    else:
        route.continue_()


def held_parts(stack: RunningStack, upload_id: str) -> list[dict[str, Any]]:
    answer = requests.get(f"{stack.api_url}/uploads/{upload_id}/parts", headers=stack.auth(USER), timeout=10)
    parts: list[dict[str, Any]] = answer.json().get("parts", []) if answer.status_code == 200 else []
    return parts


def test_quota_error_is_shown(
    browser: Browser,
    stack: RunningStack,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    path, _ = a_file(tmp_path, "uppy-over-quota.bin", 4096)
    with browser_session(browser, stack, request) as (context, watch):
        page = watch.attach(context.new_page(), "upload")

        def claim_two_gib(route: Route) -> None:  # the local quota is 1 GiB: a 2 GiB upload is refused
            body: dict[str, Any] = route.request.post_data_json or {}
            route.continue_(post_data=json.dumps(body | {"size": 2048 * MIB}))

        page.route("**/upload", claim_two_gib)
        open_upload_page(page, stack)
        pick(page, path)
        row = file_row(page, path.name)
        expect(row).to_have_attribute("data-status", "error", timeout=UPLOAD_TIMEOUT_MS)
        expect(row).to_have_attribute("data-error-code", "quota_exceeded")
        expect(row.get_by_test_id("file-error")).to_contain_text("quota_exceeded: ")
        assert not watch.puts()


def test_cancel_aborts_the_multipart_upload_in_s3(
    browser: Browser,
    stack: RunningStack,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    path, _ = a_file(tmp_path, "uppy-cancelled.bin", 17 * MIB)
    with browser_session(browser, stack, request) as (context, watch):
        page = watch.attach(context.new_page(), "upload")
        row = upload_with_part_held(page, stack, path, 2)
        upload_id = row.get_attribute("data-upload-id") or ""
        key = metadata(stack, upload_id).get("key") or f"uploads/{upload_id}"
        assert any(u["Key"].endswith(upload_id) or u["Key"] == key for u in s3_multipart_uploads(stack))
        row.get_by_test_id("file-cancel").click()
        expect(row).to_have_attribute("data-status", "cancelled")
        poll(page, lambda: metadata(stack, upload_id)["status"] == "deleted", timeout=15)
        assert not any(upload_id in u["Key"] for u in s3_multipart_uploads(stack))
