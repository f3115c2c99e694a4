"""The upload page's "Git LFS tokens" panel (web/js/tokens.js) in headless Chromium: create a token (its secret
shown once, and it works on /lfs), see it listed without its secret, revoke it (refused on /lfs at once)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from playwright.sync_api import Browser, expect, sync_playwright

from tests.e2e.browser_auth import sign_in
from tests.e2e.e2e_helpers import RunningStack

pytestmark = [pytest.mark.e2e, pytest.mark.browser]


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    executable = os.environ.get("DFD_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(executable).is_file():
        if os.environ.get("DFD_REQUIRE_BROWSER") == "1":
            pytest.fail("DFD_REQUIRE_BROWSER=1 but no Chromium is installed")
        pytest.skip("no Chromium (apt-get install chromium)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, headless=True, args=["--no-sandbox"])
        yield launched
        launched.close()


def lfs_status(stack: RunningStack, token: str) -> int:
    response = requests.post(
        f"{stack.api_url}/lfs/panel/locks/verify",
        json={},
        headers={"Accept": "application/vnd.git-lfs+json"},
        auth=("git", token),
        timeout=30,
    )
    return response.status_code


def test_the_tokens_panel_creates_lists_and_revokes(stack: RunningStack, browser: Browser) -> None:
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.goto(stack.api_url + "/")
    sign_in(page, "carol", stack.password)
    panel = page.get_by_test_id("lfs-tokens")
    panel.get_by_test_id("lfs-token-name").fill("browser laptop")
    panel.get_by_test_id("lfs-token-create").click()
    secret = panel.get_by_test_id("lfs-token-secret")
    expect(secret).to_contain_text("dfd_pat_", timeout=15_000)
    token = secret.inner_text().strip()
    assert lfs_status(stack, token) == 200
    row = panel.get_by_test_id("lfs-token").filter(has_text="browser laptop")
    expect(row).to_have_count(1)
    assert token not in panel.get_by_test_id("lfs-tokens-list").inner_text()

    page.on("dialog", lambda dialog: dialog.accept())
    row.get_by_test_id("lfs-token-revoke").click()
    expect(row).to_have_count(0, timeout=15_000)
    assert lfs_status(stack, token) == 401
    assert errors == []
    page.close()
