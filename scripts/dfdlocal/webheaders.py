"""The security headers of dfd's pages: ONE definition, used by the local stack's static server and written
out for a hosted deployment (web/README.md, "Security headers"; a CloudFront response-headers policy takes the
same values). The API's own responses carry :data:`dfd.core.headers.API_SECURITY_HEADERS`, set by the functions.

The pages' Content-Security-Policy allows what they legitimately do and nothing else:
- scripts only from the pages' own origin — no inline script, no eval; ``'wasm-unsafe-eval'`` lets the
  SHA-256 hasher (hash-wasm) compile its WebAssembly;
- workers from the origin or ``blob:`` (a hash worker may be shipped inline in a bundle, as Uppy plugins do);
- ``connect-src``: the origin (the API, served beside the pages locally), plus the endpoints the pages talk to
  — the API when it lives elsewhere, S3 (presigned PUT/GET) and the sign-in service (Cognito);
- styles from the origin; style *attributes* inline (UI libraries such as Uppy's Dashboard set them); images
  from the origin, ``data:`` and ``blob:`` (previews of the files being uploaded);
- never framed (``frame-ancestors 'none'``, X-Frame-Options for older browsers), no ``<base>``, no plugins,
  forms post only to the origin, and no Referer sent anywhere (URLs may carry upload ids).
"""

from __future__ import annotations

from collections.abc import Iterable

from dfd.core.headers import API_SECURITY_HEADERS

__all__ = ["API_SECURITY_HEADERS", "hosted_connect_sources", "page_csp", "page_headers"]


def page_csp(connect: Iterable[str] = ()) -> str:
    """The pages' Content-Security-Policy; `connect`: the origins they fetch besides their own."""
    sources = " ".join(dict.fromkeys(["'self'", *(source.rstrip("/") for source in connect if source)]))
    directives = [
        "default-src 'none'",
        "script-src 'self' 'wasm-unsafe-eval'",
        "worker-src 'self' blob:",
        f"connect-src {sources}",
        "img-src 'self' data: blob:",
        "style-src 'self'",
        "style-src-attr 'unsafe-inline'",
        "font-src 'self'",
        "manifest-src 'self'",
        "base-uri 'none'",
        "form-action 'self'",
        "object-src 'none'",
        "frame-ancestors 'none'",
    ]
    return "; ".join(directives)


def page_headers(connect: Iterable[str] = ()) -> dict[str, str]:
    """Every header a page (HTML, script, style, wasm...) is served with."""
    return {
        "Content-Security-Policy": page_csp(connect),
        "Referrer-Policy": "no-referrer",
        "X-Content-Type-Options": "nosniff",
        "X-Frame-Options": "DENY",
        "Cross-Origin-Opener-Policy": "same-origin",
    }


def hosted_connect_sources(api_url: str, region: str) -> list[str]:
    """`connect-src` of pages hosted apart from the API: the API, S3 (virtual-hosted, regional or global
    presigned URLs) and Cognito's user-pool endpoint."""
    return [
        api_url,
        f"https://*.s3.{region}.amazonaws.com",
        "https://*.s3.amazonaws.com",
        f"https://cognito-idp.{region}.amazonaws.com",
    ]
