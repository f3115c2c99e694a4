"""The API reference on the local stack: /openapi.yaml is docs/openapi.yaml, /docs renders it (vendored Swagger
UI) under a CSP that allows no inline script, and both web pages link to it from their header."""

from __future__ import annotations

import re

import pytest
import requests
from playwright.sync_api import Browser, expect

from tests.e2e.e2e_helpers import ROOT, RunningStack
from tests.e2e.openapi_check import DOCUMENT, load_document
from tests.e2e.test_browser import browser  # noqa: F401 - fixture

pytestmark = pytest.mark.e2e


def test_the_document_is_served_as_it_is_in_the_repository(stack: RunningStack) -> None:
    answer = requests.get(f"{stack.api_url}/openapi.yaml", timeout=10)
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/yaml"
    assert answer.content == DOCUMENT.read_bytes()


def test_the_reference_page_has_no_inline_script(stack: RunningStack) -> None:
    answer = requests.get(f"{stack.api_url}/docs", timeout=10)
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/html")
    scripts = re.findall(r"<script\b([^>]*)>(.*?)</script>", answer.text, flags=re.S)
    assert scripts and all("src=" in attributes and not body.strip() for attributes, body in scripts)
    assert re.search(r"<[^>]*\son[a-z]+\s*=", answer.text) is None, "an inline event handler"


@pytest.mark.parametrize("page", ["index.html", "admin.html"])
def test_the_web_pages_link_to_the_reference(page: str) -> None:
    header = re.search(r"<header.*?</header>", (ROOT / "web" / page).read_text(), flags=re.S)
    assert header is not None and 'href="docs.html"' in header.group(0)


@pytest.mark.browser
def test_the_reference_renders_every_operation_under_the_pages_csp(
    browser: Browser,  # noqa: F811 - the fixture imported above
    stack: RunningStack,
) -> None:
    context = browser.new_context()
    page = context.new_page()
    problems: list[str] = []
    page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: problems.append(f"uncaught {error}"))

    answer = page.goto(f"{stack.api_url}/docs")
    assert answer is not None
    csp = answer.headers.get("content-security-policy", "")  # the pages' own (dfdlocal.webheaders)
    script_src = next(d for d in csp.split(";") if d.strip().startswith("script-src"))
    assert "'unsafe-inline'" not in script_src and "'unsafe-eval'" not in script_src, csp
    operations = sum(
        1 for item in load_document()["paths"].values() for method in item if method not in ("parameters",)
    )
    expect(page.locator(".opblock")).to_have_count(operations, timeout=30_000)
    expect(page.locator(".info .title")).to_contain_text("dfd")
    assert not problems, problems
    context.close()
