"""The sign-in and the shared header in a real browser (Playwright): the local users' hint, the first sign-in of a
user made with a temporary password (NEW_PASSWORD_REQUIRED), the role the header names; and the admin page at a
phone's size (390x844: nothing scrolls sideways) with one date format. Fixtures and the browser come from
tests/e2e/test_browser.py."""

from __future__ import annotations

import os
import re
import uuid

import pytest
import requests
from playwright.sync_api import Browser, expect

from dfdlocal.cognito import local_password
from tests.e2e.browser_auth import SIGN_IN_TIMEOUT_MS, open_signed_in
from tests.e2e.e2e_helpers import RunningStack, wait_until
from tests.e2e.test_browser import browser, browser_session  # noqa: F401 - fixture

pytestmark = [pytest.mark.e2e, pytest.mark.browser]

PHONE = {"width": 390, "height": 844}


def test_the_local_sign_in_form_names_the_local_users(
    browser: Browser,  # noqa: F811 - the fixture imported above
    stack: RunningStack,
    request: pytest.FixtureRequest,
) -> None:
    with browser_session(browser, stack, request) as (context, _watch):
        page = context.new_page()
        page.goto(stack.api_url + "/")
        hint = page.get_by_test_id("signin-hint")
        expect(hint).to_be_visible(timeout=SIGN_IN_TIMEOUT_MS)
        for user in ("alice", "carol", "bob", "admin"):
            expect(hint).to_contain_text(user)
        expect(hint).to_contain_text(local_password())


def test_a_temporary_password_leads_to_choosing_a_new_one_then_signed_in(
    browser: Browser,  # noqa: F811 - the fixture imported above
    stack: RunningStack,
    request: pytest.FixtureRequest,
) -> None:
    idp = stack.client("cognito-idp")
    pool = stack.cognito["user_pool_id"]
    username = f"new{uuid.uuid4().hex[:8]}"
    idp.admin_create_user(
        UserPoolId=pool, Username=username, TemporaryPassword="Temporary-pass-1", MessageAction="SUPPRESS"
    )
    idp.admin_add_user_to_group(UserPoolId=pool, Username=username, GroupName="tenant-acme")
    with browser_session(browser, stack, request) as (context, watch):
        page = context.new_page()
        page.goto(stack.api_url + "/admin")
        page.get_by_label("Username").fill(username)
        page.get_by_label("Password", exact=True).fill("Temporary-pass-1")
        page.get_by_test_id("signin-submit").click()
        message = page.get_by_test_id("signin-message")
        expect(message).to_contain_text("Choose a new password", timeout=SIGN_IN_TIMEOUT_MS)
        expect(page.get_by_test_id("signin-submit")).to_have_text(re.compile("Set password and sign in"))
        page.get_by_test_id("signin-new-password-1").fill("Chosen-pass-123")
        page.get_by_test_id("signin-new-password-2").fill("Chosen-pass-999")
        page.get_by_test_id("signin-submit").click()
        expect(message).to_have_text("The two new passwords differ.")
        page.get_by_test_id("signin-new-password-1").fill("short")
        page.get_by_test_id("signin-new-password-2").fill("short")
        page.get_by_test_id("signin-submit").click()
        expect(message).to_contain_text("That password is not accepted", timeout=SIGN_IN_TIMEOUT_MS)
        page.get_by_test_id("signin-new-password-1").fill("Chosen-pass-123")
        page.get_by_test_id("signin-new-password-2").fill("Chosen-pass-123")
        page.get_by_test_id("signin-submit").click()
        expect(page.get_by_test_id("account-user")).to_have_text(username, timeout=SIGN_IN_TIMEOUT_MS)
        expect(page.get_by_test_id("account-tenant")).to_have_text("acme")
        assert not watch.errors, watch.errors
    assert idp.admin_get_user(UserPoolId=pool, Username=username)["UserStatus"] == "CONFIRMED"
    assert stack.sign_in(username, "Chosen-pass-123")["AccessToken"]


def test_the_header_names_an_admin_as_admin_and_a_tenant_user_by_tenant(
    browser: Browser,  # noqa: F811 - the fixture imported above
    stack: RunningStack,
    request: pytest.FixtureRequest,
) -> None:
    with browser_session(browser, stack, request) as (context, _watch):
        admin = open_signed_in(context.new_page(), stack.api_url + "/admin", "admin", local_password())
        account = admin.get_by_test_id("account")
        expect(admin.get_by_test_id("account-admin")).to_be_visible()
        expect(account).not_to_contain_text("personal", use_inner_text=True)  # what is shown, not hidden nodes
        expect(account).not_to_contain_text("tenant", use_inner_text=True)
        alice = open_signed_in(context.new_page(), stack.api_url + "/admin", "alice", local_password())
        expect(alice.get_by_test_id("account-tenant")).to_have_text("acme")
        expect(alice.get_by_test_id("account")).to_contain_text("tenant acme", use_inner_text=True)
        expect(alice.get_by_test_id("account-admin")).to_be_hidden()


def stored_file(stack: RunningStack) -> None:
    """One stored file with a long name, so that the dashboard's table has a row to lay out."""
    body = os.urandom(2000)
    name = "a-rather-long-file-name-that-could-push-the-table-sideways-" + uuid.uuid4().hex + ".bin"
    answer = requests.post(
        f"{stack.api_url}/upload", json={"filename": name, "size": len(body)}, headers=stack.auth(), timeout=10
    )
    assert answer.status_code == 201, answer.text
    issued = answer.json()
    assert requests.put(issued["upload_url"], data=body, headers=issued["headers"], timeout=10).status_code == 200

    def stored() -> bool:
        meta = requests.get(f"{stack.api_url}/metadata/{issued['upload_id']}", headers=stack.auth(), timeout=10)
        return bool(meta.json().get("status") == "stored")

    wait_until(stored, timeout=30)


def test_the_admin_page_fits_a_phone_and_writes_dates_one_way(
    browser: Browser,  # noqa: F811 - the fixture imported above
    stack: RunningStack,
    request: pytest.FixtureRequest,
) -> None:
    stored_file(stack)
    with browser_session(browser, stack, request, viewport=PHONE) as (context, _watch):
        page = open_signed_in(context.new_page(), stack.api_url + "/admin", "admin", local_password())
        rows = page.locator("[data-testid=hashes-table] tbody tr, table tbody tr")
        expect(rows.first).to_be_visible(timeout=15_000)
        expect(page.locator("#stats-updated")).to_contain_text("Updated", timeout=15_000)
        width = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
        assert width[0] <= width[1] == PHONE["width"], f"document {width[0]} px wide in a {width[1]} px viewport"
        # one format: the table's dates and the "Updated" line are both Intl medium date + short time
        table_date = page.locator("table tbody tr time").first.inner_text()
        updated = page.locator("#stats-updated").inner_text().removeprefix("Updated ").strip()
        medium = re.compile(r"^[A-Z][a-z]{2} \d{1,2}, \d{4}, \d{1,2}:\d{2}\s?[AP]M$")
        assert medium.match(table_date), table_date
        assert medium.match(updated), updated
