"""The upload page's "My uploads": alice uploads a file, sees it listed, deletes it after a
confirmation, and the list shows it deleted; the API agrees (410 on download)."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest
import requests
from playwright.sync_api import Browser, expect

from tests.e2e.browser_auth import open_signed_in
from tests.e2e.browser_support import INGEST_TIMEOUT_MS, browser_session, file_row
from tests.e2e.e2e_helpers import RunningStack

pytestmark = [pytest.mark.e2e, pytest.mark.browser]


def test_my_uploads_lists_and_deletes(
    browser: Browser, stack: RunningStack, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    name = f"mine-{uuid.uuid4().hex[:8]}.txt"
    (tmp_path / name).write_text(f"{uuid.uuid4()} listed, then deleted\n")
    with browser_session(browser, stack, request) as (context, watch):
        page = watch.attach(context.new_page(), "upload")
        open_signed_in(page, stack.api_url + "/", "alice", stack.password)
        page.set_input_files("[data-testid=file-input]", [tmp_path / name])
        expect(file_row(page, name)).to_have_attribute("data-status", "stored", timeout=INGEST_TIMEOUT_MS)
        upload_id = file_row(page, name).get_attribute("data-upload-id")
        listed = page.locator(f'[data-testid=my-upload][data-upload-id="{upload_id}"]')
        expect(listed).to_have_attribute("data-status", "stored", timeout=INGEST_TIMEOUT_MS)
        expect(listed).to_contain_text(name)
        page.once("dialog", lambda dialog: dialog.accept())
        listed.get_by_test_id("delete-upload").click()
        expect(listed).to_have_attribute("data-status", "deleted")
        expect(listed.get_by_test_id("delete-upload")).to_have_count(0)
    gone = requests.get(f"{stack.api_url}/download/{upload_id}", headers=stack.auth(), timeout=10)
    assert gone.status_code == 410
    deleted = requests.get(f"{stack.api_url}/admin/stats", headers=stack.auth("admin"), timeout=10).json()
    with browser_session(browser, stack, request) as (context, watch):  # the dashboard's count follows
        page = watch.attach(context.new_page(), "admin")
        open_signed_in(page, stack.api_url + "/admin.html", "admin", stack.password)
        shown = page.get_by_test_id("stat-deleted_uploads")
        expect(shown).to_have_attribute("data-value", re.compile(r"^[0-9]+$"), timeout=INGEST_TIMEOUT_MS)
        assert int(shown.get_attribute("data-value") or "-1") >= deleted["deleted_uploads"] >= 1
