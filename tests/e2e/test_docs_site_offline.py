"""The documentation site read with the network closed: the home page's architecture diagram (README's mermaid
block) renders as SVG from the site's own copy of mermaid (docs/assets/vendor/mermaid, `make web-vendor`), and
no request leaves the site's own address. mkdocs-material would fetch mermaid from unpkg.com without that copy."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, Route, expect

from tests.e2e.browser_support import ARTIFACTS, VIEWPORT
from tests.e2e.e2e_helpers import ROOT, serving
from tests.unit.test_docs_site import build

pytestmark = [pytest.mark.e2e, pytest.mark.browser]

VENDORED = ROOT / "docs" / "assets" / "vendor" / "mermaid" / "mermaid.min.js"
LABELS = ("UploadFunction", "IngestFunction", "EventBridge bus")  # nodes of README's diagram


@pytest.fixture(scope="module")
def site_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The site as `make docs` builds it, served on 127.0.0.1."""
    tmp_path = tmp_path_factory.mktemp("site")
    result = build(tmp_path, ROOT / "mkdocs.yml")
    assert result.returncode == 0, result.stderr[-4000:]
    with serving(tmp_path / "site") as url:
        yield url


def shadow_texts(node: dict[str, Any], inside_svg: bool = False) -> Iterator[str]:
    """The text of every node under an <svg>, closed shadow roots included (a DOM.getDocument node tree)."""
    inside_svg = inside_svg or node.get("nodeName", "").lower() == "svg"
    if inside_svg and node.get("nodeType") == 3:
        yield str(node.get("nodeValue", ""))
    for child in node.get("children", []) + node.get("shadowRoots", []):
        yield from shadow_texts(child, inside_svg)


def test_the_architecture_diagram_renders_with_the_network_closed(browser: Browser, site_url: str) -> None:
    assert VENDORED.is_file(), "make web-vendor writes it"
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    outside: list[str] = []
    problems: list[str] = []

    def closed_network(route: Route) -> None:
        """Only the site's own address answers, as on a machine without internet."""
        if urlsplit(route.request.url).netloc == urlsplit(site_url).netloc:
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort("internetdisconnected")

    context.route("**/*", closed_network)
    page.on("pageerror", lambda error: problems.append(f"uncaught {error}"))
    try:
        page.goto(site_url)
        # mkdocs-material swaps the <pre class="mermaid"> for a <div class="mermaid"> holding the SVG in a closed
        # shadow root, once mermaid has rendered it
        diagram = page.locator("article div.mermaid")
        try:
            expect(diagram).to_have_count(1, timeout=30_000)
        except AssertionError as exc:
            raise AssertionError(f"the diagram did not render; requests that left the site: {outside}") from exc
        expect(page.locator("article pre", has_text="flowchart TB")).to_have_count(0)
        box = diagram.bounding_box()
        assert box is not None and box["height"] > 200 and box["width"] > 200, box
        # a closed shadow root is out of reach of the page's scripts and of Playwright's selectors; CDP sees it
        cdp = context.new_cdp_session(page)
        texts = " ".join(shadow_texts(cdp.send("DOM.getDocument", {"depth": -1, "pierce": True})["root"]))
        for label in LABELS:
            assert label in texts, f"{label!r} not in the diagram's SVG: {texts[:500]}"
        assert "Syntax error" not in texts
        assert not outside, f"requests left the site: {outside}"
        assert not problems, problems
    except BaseException:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "docs-site-offline.png"), full_page=True)
        raise
    finally:
        context.close()
