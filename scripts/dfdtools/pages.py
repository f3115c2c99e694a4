"""The web pages' files: what `make deploy` publishes, derived from what the pages reference.

Starting from every page (web/*.html), each file a browser would fetch is followed: HTML ``src``/``href``
(scripts, stylesheets, images, links to other pages), JavaScript module imports (static and dynamic) and
``new URL("...", ...)`` (how docs.js names the spec), CSS ``url()`` and ``@import``. References leaving the
site (another origin, ``data:``, a fragment) are not files. Two files do not come from web/: ``config.js``,
written by the deploy from the stack's outputs, and ``openapi.yaml``, the API's spec (docs/openapi.yaml, as the
local stack serves it). A reference to anything else that web/ does not hold is an error, never a page that
fails on CloudFront (S3 answers 403 for what was never published).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator, Mapping
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parents[2]
WEB = ROOT / "web"
# site path -> its source outside web/ (the local stack serves the same file at the same path: dfdlocal.apigw)
SPEC = "openapi.yaml"
OUTSIDE_WEB = {SPEC: ROOT / "docs" / "openapi.yaml"}
GENERATED = frozenset({"config.js"})  # written by the deploy (dfdtools.deploy.config_script)

# JavaScript and CSS references by pattern: the pages' own code is small and plain, and the bundles
# (web/vendor) import nothing relative; no parser of either language is among the project's dependencies.
_JS_IMPORTS = (
    re.compile(r"""\bimport\s*(?:[\w*${}\s,]+?\s*from\s*)?["'](\.{0,2}/[^"'\n]+)["']"""),
    re.compile(r"""\bimport\(\s*["'](\.{0,2}/[^"'\n]+)["']\s*\)"""),
)
# new URL("x", import.meta.url) is the script's neighbour; new URL("x", location...) the page's (docs.js's spec)
_JS_URL = re.compile(r"""\bnew\s+URL\(\s*["']([^"'\n]+)["']\s*,\s*([\w.]+)""")
_CSS_REFERENCES = (
    re.compile(r"""url\(\s*(?:"([^"]*)"|'([^']*)'|([^)'"\s]*))\s*\)"""),
    re.compile(r"""@import\s+["']([^"']+)["']"""),
)


class PageError(Exception):
    """A page references a file that would not be published."""


class _References(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("src", "href") and value:
                self.found.append(value)


def _references(path: Path) -> Iterator[tuple[str, bool]]:
    """The references a page, script or stylesheet makes, each with whether it is relative to the file itself
    (else to the page: every page is at the site's root)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".html":
        parser = _References()
        parser.feed(text)
        yield from ((found, True) for found in parser.found)
    elif path.suffix in (".js", ".mjs"):
        for pattern in _JS_IMPORTS:
            yield from ((match.group(1), True) for match in pattern.finditer(text))
        for match in _JS_URL.finditer(text):
            yield match.group(1), match.group(2) == "import.meta.url"
    elif path.suffix == ".css":
        for pattern in _CSS_REFERENCES:
            for match in pattern.finditer(text):
                yield next(group for group in match.groups() if group is not None), True


def _site_path(reference: str, referrer: str) -> str | None:
    """The site path a reference names, relative to the referring file's path; None when it is not a file here."""
    parts = urlsplit(reference)
    if parts.scheme or parts.netloc or not parts.path:
        return None  # another origin, data:, a bare fragment or query
    path = posixpath.normpath(posixpath.join("/", posixpath.dirname(referrer), unquote(parts.path)))
    if parts.path.endswith("/"):
        path = posixpath.join(path, "index.html")  # the site root is index.html (CloudFront's DefaultRootObject)
    return path.lstrip("/")


def page_files(web: Path = WEB, outside: Mapping[str, Path] = OUTSIDE_WEB) -> dict[str, Path]:
    """Every file the pages reference, transitively: site path -> source file (config.js excepted: the deploy
    writes it). Raises PageError naming each reference that neither web/ nor `outside` holds."""
    pending = sorted(path.name for path in web.glob("*.html"))
    files: dict[str, Path] = {}
    missing: list[str] = []
    while pending:
        site_path = pending.pop()
        if site_path in files:
            continue
        source = outside.get(site_path, web / site_path)
        files[site_path] = source
        for reference, own in _references(source):
            target = _site_path(reference, site_path if own else "")
            if target is None or target in files or target in GENERATED:
                continue
            if target in outside or (web / target).is_file():
                pending.append(target)
            else:
                missing.append(f"{site_path} -> {reference}")
    if missing:
        raise PageError("pages reference files that would not be published: " + ", ".join(sorted(set(missing))))
    return files
