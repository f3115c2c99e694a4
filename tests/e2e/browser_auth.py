"""Signing in on the web pages from a browser test (Playwright): the pages show a sign-in form until signed in.

The pages (web/js/auth.js) mark their state on ``<html data-auth=...>``: ``signed-out`` (the form is shown),
``pending`` (a stored session is being refreshed), ``signed-in``, ``disabled`` (config.js configures no sign-in)
or ``misconfigured``. Tokens are kept in the tab's sessionStorage, so a page opened with ``context.new_page()``
starts signed out, while navigating within one page (or reloading it) stays signed in.
"""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

SIGN_IN_TIMEOUT_MS = 15_000


class SignInFailed(AssertionError):
    """The page refused the credentials (or could not reach the sign-in service); the message is the page's."""


def sign_in(page: Page, username: str, password: str, *, timeout_ms: float = SIGN_IN_TIMEOUT_MS) -> None:
    """Sign in on the page currently shown (upload page or dashboard) and wait until it shows `username` as
    signed in. Raises SignInFailed with the page's message if the sign-in is refused."""
    root = page.locator("html")
    expect(root).to_have_attribute("data-auth", re.compile(r"^(signed-out|signed-in)$"), timeout=timeout_ms)
    if root.get_attribute("data-auth") == "signed-in":
        if page.get_by_test_id("account-user").inner_text() == username:
            return
        sign_out(page, timeout_ms=timeout_ms)
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_test_id("signin-submit").click()
    message = page.get_by_test_id("signin-message")
    account = page.get_by_test_id("account")
    expect(account.filter(visible=True).or_(message.filter(visible=True))).to_be_visible(timeout=timeout_ms)
    if root.get_attribute("data-auth") != "signed-in":
        raise SignInFailed(f"sign-in as {username!r} failed: {message.inner_text()}")
    expect(page.get_by_test_id("account-user")).to_have_text(username)
    expect(page.get_by_test_id("app")).to_be_visible()


def sign_out(page: Page, *, timeout_ms: float = SIGN_IN_TIMEOUT_MS) -> None:
    """Click Sign out and wait for the sign-in form."""
    page.get_by_test_id("sign-out").click()
    expect(page.locator("html")).to_have_attribute("data-auth", "signed-out", timeout=timeout_ms)
    expect(page.get_by_test_id("signin-form")).to_be_visible()


def open_signed_in(page: Page, url: str, username: str, password: str) -> Page:
    """Go to `url` and sign in there as `username`; returns the page."""
    page.goto(url)
    sign_in(page, username, password)
    return page
