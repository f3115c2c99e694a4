"""The local stack's addresses: what it binds vs what it puts in URLs handed to clients (presigned URLs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dfdlocal.stack import LocalStack, StackOptions

ANY_V4 = "0.0.0.0"  # noqa: S104 - an option's value under test, nothing is bound


@pytest.mark.parametrize(
    ("host", "public_host", "url"),
    [
        ("127.0.0.1", None, "http://127.0.0.1:4566"),
        (ANY_V4, None, "http://127.0.0.1:4566"),  # a wildcard is no address to connect to
        ("::", None, "http://127.0.0.1:4566"),
        (ANY_V4, "dfd.lan", "http://dfd.lan:4566"),  # other machines upload through the presigned URLs
        ("::1", None, "http://[::1]:4566"),
    ],
)
def test_urls_advertise_a_connectable_host(host: str, public_host: str | None, url: str) -> None:
    stack = LocalStack(StackOptions(root=Path("."), host=host, public_host=public_host))
    stack.ports["aws"] = 4566
    assert stack.url("aws") == url
