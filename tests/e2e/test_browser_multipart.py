"""A multipart upload in a real browser (headless Chromium, Playwright) against the local stack, interrupted and
resumed after a page reload (issue 14).

A generated file of a few parts (the local stack's lowered minimum part size) is chosen on the upload page; the
page's POST /upload asks for a multipart upload (``"multipart": true``, so the test does not depend on the local
threshold). One part's PUT is held by the test (never answered) while the others are acknowledged; the page is
reloaded (the held request dies with it) and the same file chosen again: the page finds its resume record in
IndexedDB, asks GET /uploads/{id}/parts, and sends ONLY the part that was held — counted per ``partNumber`` from
the browser's requests — then completes; the upload ends ``stored`` with the file's SHA-256, and the resume record
is gone.

Uses the ``browser`` fixture and helpers of test_browser.py (skips without Chromium unless DFD_REQUIRE_BROWSER=1).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, Request, Route, expect

from tests.e2e.browser_auth import sign_in
from tests.e2e.e2e_helpers import RunningStack
from tests.e2e.test_browser import (  # noqa: F401 - browser is a fixture used by name
    INGEST_TIMEOUT_MS,
    browser,
    browser_session,
    file_row,
)

pytestmark = [pytest.mark.e2e, pytest.mark.browser]

MIB = 1024 * 1024
FILE_SIZE = 17 * MIB + 12_345  # 4 parts of 5 MiB (the local minimum), 3 of 8 MiB (the AWS default)
HELD_PART = 2
PART_NUMBER = re.compile(r"[?&]partNumber=(\d+)(?:&|$)")
UPLOAD_TIMEOUT_MS = 60_000
LOCAL_USER = "alice"

COUNT_RESUME_RECORDS = """() => new Promise((resolve, reject) => {
  const open = indexedDB.open("dfd-uploads");
  open.onerror = () => reject(open.error);
  open.onsuccess = () => {
    const db = open.result;
    if (!db.objectStoreNames.contains("multipart")) { resolve(0); return; }
    const count = db.transaction("multipart").objectStore("multipart").count();
    count.onsuccess = () => resolve(count.result);
    count.onerror = () => reject(count.error);
  };
})"""


def part_number(req: Request) -> int | None:
    """The part number of a PUT to a presigned UploadPart URL, else None."""
    if req.method != "PUT":
        return None
    found = PART_NUMBER.search(req.url)
    return int(found.group(1)) if found else None


def ask_for_multipart(route: Route) -> None:
    """POST /upload as the page sends it, plus ``"multipart": true`` (the server may also decide so by size)."""
    req = route.request
    if req.method != "POST":
        route.continue_()
        return
    body: dict[str, Any] = req.post_data_json or {}
    route.continue_(post_data=json.dumps(body | {"multipart": True}))


def signed_in(page: Page, stack: RunningStack) -> None:
    """Sign in as the local user when the stack has a user pool (a reload restores the session by itself)."""
    cognito = stack.description.get("cognito")
    if cognito:
        sign_in(page, LOCAL_USER, str(cognito["password"]))
    expect(page.get_by_test_id("app")).to_be_visible()


def test_multipart_upload_resumes_after_a_reload_sending_only_the_missing_part(
    browser: Browser,  # noqa: F811 - the fixture imported above
    stack: RunningStack,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    body = os.urandom(FILE_SIZE)
    digest = hashlib.sha256(body).hexdigest()
    path = tmp_path / "large-resumable.bin"
    path.write_bytes(body)

    with browser_session(browser, stack, request) as (context, watch):
        page = watch.attach(context.new_page(), "upload")
        page.on("dialog", lambda dialog: dialog.accept())  # "leave the page?" while uploading: yes
        page.route("**/upload", ask_for_multipart)
        sent: Counter[int] = Counter()
        page.on("request", lambda req: sent.update([n]) if (n := part_number(req)) is not None else None)
        held: list[Route] = []

        def hold(route: Route) -> None:
            if part_number(route.request) == HELD_PART:
                held.append(route)  # never answered: the reload cancels it
            else:
                route.continue_()

        page.route(PART_NUMBER, hold)
        page.goto(stack.api_url + "/")
        signed_in(page, stack)

        # ---------------- the upload, with one part held: every other part is acknowledged
        page.set_input_files("[data-testid=file-input]", path)
        row = file_row(page, path.name)
        expect(row).to_have_attribute("data-multipart", "true", timeout=UPLOAD_TIMEOUT_MS)
        part_count = int(row.get_attribute("data-part-count") or "0")
        assert 3 <= part_count <= 4, f"{part_count} parts: the local stack's part size is not 5 or 8 MiB"
        part_size = int(row.get_attribute("data-part-size") or "0")
        assert part_size in (5 * MIB, 8 * MIB) and (part_count - 1) * part_size < FILE_SIZE <= part_count * part_size
        expect(row).to_have_attribute("data-parts-done", str(part_count - 1), timeout=UPLOAD_TIMEOUT_MS)
        expect(row).to_have_attribute("data-status", "uploading")
        expect(row.get_by_test_id("file-pause")).to_be_visible()
        expect(row.get_by_test_id("file-cancel")).to_be_visible()
        assert len(held) == 1, held
        assert sent == Counter(range(1, part_count + 1)), sent
        upload_id = row.get_attribute("data-upload-id")
        assert upload_id and page.evaluate(COUNT_RESUME_RECORDS) == 1

        # ---------------- reload: the page lists the unfinished upload; choosing the file again continues it
        page.unroute(PART_NUMBER, hold)
        page.reload()
        sent.clear()
        signed_in(page, stack)
        expect(page.get_by_test_id("resume-notice")).to_contain_text(path.name)
        page.set_input_files("[data-testid=file-input]", path)
        row = file_row(page, path.name)
        expect(row).to_have_attribute("data-status", "stored", timeout=UPLOAD_TIMEOUT_MS + INGEST_TIMEOUT_MS)

        assert sent == Counter({HELD_PART: 1}), f"parts sent after the reload: {dict(sent)}"
        expect(row).to_have_attribute("data-upload-id", upload_id)
        expect(row).to_have_attribute("data-resumed", "true")
        expect(row).to_have_attribute("data-sent-bytes", str(part_size))
        expect(row).to_have_attribute("data-uploaded-bytes", str(FILE_SIZE))
        expect(row).to_have_attribute("data-sha256", digest)
        expect(row.get_by_test_id("file-hash")).to_have_text(digest)
        metadata = page.evaluate("id => DFD.apiFetch('GET', '/metadata/' + id).then(r => r.body)", upload_id)
        assert metadata["status"] == "stored", metadata
        assert (metadata.get("file") or {}).get("hash", metadata.get("hash")) == digest, metadata
        assert page.evaluate(COUNT_RESUME_RECORDS) == 0
        expect(page.get_by_test_id("resume-notice")).to_be_hidden()
        assert not watch.errors, watch.errors
