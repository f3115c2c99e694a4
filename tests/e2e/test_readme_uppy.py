"""The site's page "Uploading with Uppy" (docs/uploading/uppy.md): its HTML block, as written, in headless Chromium
against the local stack.

The block is taken from the page, saved with the bundle the page says to copy (web/vendor/uppy) in a folder
served on its own origin (as `python3 -m http.server` would), and opened; the only change is the API address (the
test's stack listens on a free port, not 3000). A token is pasted, a new file is stored, and the same content
again is reported already stored with no byte sent.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from tests.e2e.browser_support import browser_session
from tests.e2e.e2e_helpers import ROOT, RunningStack, serving

pytestmark = [pytest.mark.e2e, pytest.mark.browser]

PAGE = ROOT / "docs" / "uploading" / "uppy.md"
README_API = "http://127.0.0.1:3000"


def readme_page() -> str:
    blocks = re.findall(r"```html\n(.*?)```", PAGE.read_text(), flags=re.S)
    assert len(blocks) == 1, "the page has exactly one html block"
    assert README_API in blocks[0]
    return blocks[0]


@pytest.fixture
def served_page(tmp_path: Path, stack: RunningStack) -> Iterator[str]:
    for name in ("uppy.js", "uppy.css"):
        shutil.copy(ROOT / "web" / "vendor" / "uppy" / name, tmp_path / name)
    (tmp_path / "index.html").write_text(readme_page().replace(README_API, stack.api_url))
    with serving(tmp_path) as url:
        yield url


def test_the_readme_page_uploads_new_and_known_files(
    browser: Browser,
    stack: RunningStack,
    served_page: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    body = os.urandom(200_000)
    first = tmp_path / "readme-first.bin"
    first.write_bytes(body)
    second = tmp_path / "readme-second.bin"
    second.write_bytes(body)
    with browser_session(browser, stack, request) as (context, watch):
        page = watch.attach(context.new_page(), "readme")
        page.goto(served_page)
        page.locator("#token").fill(stack.token("alice"))
        page.set_input_files('.uppy-Dashboard-input[name="files[]"]', first)
        done = page.locator("#done li")
        expect(done).to_have_count(1, timeout=60_000)
        expect(done.first).to_contain_text("readme-first.bin: stored (")
        upload_id = re.search(r"\(([0-9a-f]{32})\)", done.first.inner_text())
        assert upload_id, done.first.inner_text()
        puts = len(watch.puts())
        assert puts == 1

        page.locator(".uppy-DashboardContent-addMore").click()
        page.set_input_files('.uppy-Dashboard-input[name="files[]"]', second)
        expect(done).to_have_count(2, timeout=60_000)
        expect(done.nth(1)).to_contain_text("readme-second.bin: already stored (")
        assert len(watch.puts()) == puts
        assert not watch.errors, watch.errors
