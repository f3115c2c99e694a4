"""The security headers of every API response (JSON, never a page): nothing may render, frame or refer from it.
A module of constants only (the local stack imports it before any handler's settings exist); the pages' own
headers: scripts/dfdlocal/webheaders.py."""

from __future__ import annotations

API_SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
}
