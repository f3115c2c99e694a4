"""The web pages against a hostile link or a hostile API, in a real browser (Playwright).

* ``?api=http://evil.example`` in the page address is ignored: the pages take the API's address from
  ``config.js`` only, so every request still goes to the configured API and none to the address in the link.
* A ``javascript:`` download URL from a hostile API does nothing: no dialog, no navigation, an error shown to
  the user and no link offered.

Sign-in: when the page shows the sign-in form (the local stack verifies tokens) the tests sign in as the local
users (scripts/dfdlocal/cognito.py); when the page has no sign-in (``data-auth="disabled"``) they go on as they
are. Fixtures and the browser come from tests/e2e/test_browser.py.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, Dialog, Frame, Page, Route, expect

from dfdlocal.cognito import local_password
from tests.e2e.browser_auth import SIGN_IN_TIMEOUT_MS, sign_in
from tests.e2e.browser_support import INGEST_TIMEOUT_MS, browser_session, file_row
from tests.e2e.e2e_helpers import RunningStack

pytestmark = [pytest.mark.e2e, pytest.mark.browser]

EVIL = "http://evil.example"
AUTH_STATES = re.compile(r"^(signed-out|signed-in|disabled)$")


def signed_in_if_asked(page: Page, username: str) -> None:
    """Sign in when the page shows the sign-in form; nothing to do when the page has no sign-in."""
    root = page.locator("html")
    expect(root).to_have_attribute("data-auth", AUTH_STATES, timeout=SIGN_IN_TIMEOUT_MS)
    if root.get_attribute("data-auth") != "disabled":
        sign_in(page, username, local_password())


def origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def test_api_address_in_the_page_url_is_ignored(
    browser: Browser,
    stack: RunningStack,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    sample = tmp_path / "linked.txt"
    sample.write_bytes(f"uploaded from a hostile link ({uuid.uuid4().hex})\n".encode())
    evil_requests: list[str] = []

    def refuse(route: Route) -> None:  # the network is closed anyway: record and refuse what reaches for it
        evil_requests.append(route.request.url)
        route.abort()

    with browser_session(browser, stack, request) as (context, watch):
        context.route(re.compile(r"^https?://evil\.example(/|$)"), refuse)

        page = watch.attach(context.new_page(), "upload")
        page.goto(f"{stack.api_url}/?api={EVIL}")
        signed_in_if_asked(page, "alice")
        page.set_input_files("[data-testid=file-input]", [sample])
        row = file_row(page, "linked.txt")
        expect(row).to_have_attribute("data-status", "stored", timeout=INGEST_TIMEOUT_MS)

        admin = watch.attach(context.new_page(), "admin")
        admin.goto(f"{stack.api_url}/admin?api={EVIL}&apiBase={EVIL}")
        signed_in_if_asked(admin, "admin")
        expect(admin.get_by_test_id("table-status")).to_have_text(re.compile(r"^Page 1 · "), timeout=15_000)

        api = origin(stack.api_url)
        posts = [url for method, url in watch.requests if method == "POST" and urlsplit(url).path == "/upload"]
        stats = [url for method, url in watch.requests if method == "GET" and urlsplit(url).path == "/admin/stats"]
        assert posts and all(origin(url) == api for url in posts), posts
        assert stats and all(origin(url) == api for url in stats), stats
        assert evil_requests == []
        assert not [url for _, url in watch.requests if "evil.example" in urlsplit(url).netloc]
        assert not watch.errors, watch.errors


def test_a_javascript_download_url_from_the_api_does_nothing(
    browser: Browser,
    stack: RunningStack,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    sample = tmp_path / "hostile.txt"
    sample.write_bytes(f"downloaded through a hostile API ({uuid.uuid4().hex})\n".encode())
    dialogs: list[str] = []
    hostile: list[str] = []

    def answer(route: Route) -> None:
        hostile.append(route.request.url)
        route.fulfill(
            status=200,
            json={
                "download_url": "javascript:alert(1)",
                "expires_in": 300,
                "filename": "hostile.txt",
                "size": 1,
                "hash": "0" * 64,
                "content_type": "text/plain",
            },
        )

    with browser_session(browser, stack, request) as (context, watch):
        page = watch.attach(context.new_page(), "upload")

        def on_dialog(dialog: Dialog) -> None:
            dialogs.append(f"{dialog.type}: {dialog.message}")
            dialog.dismiss()

        page.on("dialog", on_dialog)
        page.goto(f"{stack.api_url}/")
        signed_in_if_asked(page, "alice")
        page.set_input_files("[data-testid=file-input]", [sample])
        row = file_row(page, "hostile.txt")
        expect(row).to_have_attribute("data-status", "stored", timeout=INGEST_TIMEOUT_MS)

        navigations: list[str] = []

        def on_navigated(frame: Frame) -> None:
            if frame == page.main_frame:
                navigations.append(frame.url)

        page.on("framenavigated", on_navigated)
        address = page.url
        page.route(re.compile(r"/download/[^/?]+$"), answer)
        row.get_by_test_id("file-download").click()

        status = row.get_by_test_id("file-download-status")
        expect(status).to_contain_text("not http(s)")
        expect(status).to_contain_text("Download failed")
        expect(row.get_by_test_id("download-link")).to_have_count(0)
        expect(row.get_by_test_id("file-download")).not_to_have_attribute("aria-busy", "true")
        assert hostile, "the hostile answer was never requested"
        # a javascript: URL run by the page would have opened the alert; none did, and the page never moved
        assert page.evaluate("1 + 1") == 2  # the page is alive and answering (any pending dialog would block)
        assert dialogs == []
        assert navigations == [] and page.url == address
        assert not watch.errors, watch.errors
